"""fio JSON parsing used by the tests and the reports."""
from __future__ import annotations

import json

import pytest

from bench import fio

SAMPLE = {
    "fio version": "fio-3.33",
    "jobs": [
        {"jobname": "rt", "error": 0,
         "read": {"io_bytes": 4096 * 100, "total_ios": 100, "iops": 50.0, "bw": 200.0,
                  "clat_ns": {"percentile": {"99.000000": 2000000, "99.900000": 3500000}},
                  "lat_ns": {"mean": 1500000.0}},
         "write": {"io_bytes": 0, "total_ios": 0, "iops": 0.0, "bw": 0.0}},
        {"jobname": "be", "error": 0,
         "read": {"io_bytes": 8192, "total_ios": 2, "iops": 1.0, "bw": 4.0,
                  "clat_ns": {"percentile": {"99.900000": 10}}, "lat_ns": {"mean": 5.0}},
         "write": {"io_bytes": 40960, "total_ios": 10, "iops": 5.0, "bw": 20.0,
                   "clat_ns": {"percentile": {"99.900000": 7000}}, "lat_ns": {"mean": 6000.0}}},
    ],
}


def test_parse_skips_notices_before_json() -> None:
    text = "fio: note: something\n" + json.dumps(SAMPLE)
    assert fio.parse(text)["jobs"][0]["jobname"] == "rt"


def test_job_stats_and_percentiles_in_us() -> None:
    st = fio.job_stats(SAMPLE, "rt")
    assert st.ios == 100 and st.io_bytes == 409600 and st.iops == 50.0
    assert fio.percentile(st, 99.9) == 3500.0
    assert st.lat_mean_us == 1500.0


def test_total_ios_sums_every_job_of_a_name() -> None:
    two = {"jobs": SAMPLE["jobs"] + [SAMPLE["jobs"][1]]}
    assert fio.job_stats(two, "be").ios == 12  # the first "be" only
    assert fio.total_ios(two, "be") == 24
    assert fio.total_ios(two, "be", ("read",)) == 4
    assert fio.total_ios(two) == 124
    assert fio.total_ios(two, "none") == 0


def test_mixed_job_sums_directions_and_takes_busiest_percentiles() -> None:
    st = fio.job_stats(SAMPLE, "be")
    assert st.ios == 12 and st.io_bytes == 49152 and st.iops == 6.0
    assert fio.percentile(st, 99.9) == 7.0  # from the write side
    assert fio.job_stats(SAMPLE, "be", "read").ios == 2


def test_missing_job_and_percentile_are_errors() -> None:
    with pytest.raises(KeyError, match="no fio job 'nope'"):
        fio.job_stats(SAMPLE, "nope")
    with pytest.raises(KeyError,
                       match=r"fio did not report percentile 50.0 \(have \[99.0, 99.9\]\)"):
        fio.percentile(fio.job_stats(SAMPLE, "rt"), 50.0)
    with pytest.raises(ValueError, match="no JSON object in fio output"):
        fio.parse("no json here")
