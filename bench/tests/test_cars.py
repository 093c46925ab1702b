"""`bench calibrate cars`: CARS's tunables from an ssdsim disk's sysfs
(the whole path, selection and read-back included, runs in the VM:
tests/vm/test_cars.py)."""
from __future__ import annotations

import pytest

from bench.calibrate import cars_tunables

#: ssdsim's defaults (ssdsim/README.md), as its sysfs shows them
SSDSIM = {"dies": "8", "page_size": "4096", "read_ns": "50000", "program_ns": "500000",
          "erase_ns": "3000000", "xfer_ns": "10000", "time_scale": "20", "cmt_pages": "0",
          "write_buffer_pages": "64", "write_die": "5"}


def test_cars_tunables_scale_ssdsim_times_and_keep_its_geometry() -> None:
    t = cars_tunables(SSDSIM)
    assert t == {"nr_dies": 8, "page_kb": 4, "read_us": 1200, "write_us": 10200,
                 "erase_us": 60000, "depth": 8, "max_hold_us": 10200, "cmt_regions": 0,
                 "write_pointer": 5}
    # the order they are written in: geometry first (it resets the record of
    # writes), the write pointer last
    assert list(t)[:2] == ["nr_dies", "page_kb"] and list(t)[-1] == "write_pointer"


def test_cars_tunables_mapping_cache_and_limits() -> None:
    t = cars_tunables({**SSDSIM, "cmt_pages": "64", "page_size": "16384", "time_scale": "1"})
    # 16 KiB pages hold 4096 4-byte entries: one translation page maps 64 MiB
    assert t["cmt_region_kb"] == 65536 and t["cmt_regions"] == 64
    assert list(t).index("cmt_region_kb") < list(t).index("cmt_regions")
    assert t["page_kb"] == 16 and t["read_us"] == 60 and t["write_us"] == 510
    # times beyond cars's range are clamped to it; the hold to 1 s
    slow = cars_tunables({**SSDSIM, "time_scale": "100000"})
    assert slow["erase_us"] == 10_000_000 and slow["write_us"] == 10_000_000
    assert slow["max_hold_us"] == 1_000_000
    assert cars_tunables({**SSDSIM, "write_die": "13"})["write_pointer"] == 5
    with pytest.raises(ValueError, match="page_size 512 is outside cars's page_kb range"):
        cars_tunables({**SSDSIM, "page_size": "512"})
