"""fio job files of the suites."""
from __future__ import annotations

import re

import pytest

from bench import jobs
from bench.suites import k2, kyber_baseline


def test_render_and_parse_round_trip() -> None:
    text = jobs.render({"filename": "/dev/x", "direct": 1, "time_based": None},
                       [jobs.Job("a", {"rw": "randread", "iodepth": 4}), jobs.Job("b")],
                       comment="two jobs")
    assert text.startswith("# two jobs\n[global]\n")
    opts = jobs.parse_options(text)
    assert opts["global"] == {"filename": "/dev/x", "direct": "1", "time_based": None}
    assert opts["a"] == {"rw": "randread", "iodepth": "4"} and opts["b"] == {}


def test_render_rejects_bad_and_duplicate_names() -> None:
    with pytest.raises(ValueError, match="duplicate"):
        jobs.render({}, [jobs.Job("a"), jobs.Job("a")])
    with pytest.raises(ValueError, match="bad fio job name"):
        jobs.render({}, [jobs.Job("a b")])


def test_common_options() -> None:
    g = jobs.common("/dev/nvme0n1", 30, 5, "libaio")
    assert g["direct"] == 1 and g["ioengine"] == "libaio" and "time_based" in g
    assert g["runtime"] == "30s" and g["ramp_time"] == "5s"
    assert g["percentile_list"] == "50:90:99:99.9:99.99"
    with pytest.raises(ValueError, match="runtime must be positive"):
        jobs.common("/dev/x", 0, 0)


def _k2(op: str, cpus: int | None = 2) -> dict[str, dict[str, str | None]]:
    return jobs.parse_options(k2.jobfile("/dev/nvme0n1", 4 << 30, op, 10, 1, "io_uring",
                                         2000, 3, 32, cpus))


@pytest.mark.parametrize("op", ["read", "randread", "write", "randwrite"])
def test_k2_jobs_are_the_papers(op: str) -> None:
    o = _k2(op)
    g = o.pop("global")
    assert g["filename"] == "/dev/nvme0n1" and g["direct"] == "1" and g["bs"] == "4k"
    assert g["rw"] == op and g["ioengine"] == "io_uring"
    assert list(o) == ["rt", "be1", "be2", "be3"]
    rt = o["rt"]
    assert (rt["ioengine"], rt["iodepth"], rt["thinktime"], rt["prioclass"], rt["prio"]) == \
        ("psync", "1", "2000", "1", "0")
    for be in ("be1", "be2", "be3"):
        assert o[be]["iodepth"] == "32" and o[be]["prioclass"] == "2"
        assert "ioengine" not in o[be]     # the global asynchronous engine
    assert [o[j]["cpus_allowed"] for j in o] == ["0", "1", "0", "1"]


def test_k2_sequential_jobs_stream_through_disjoint_regions() -> None:
    o = _k2("write")
    regions = [(int(str(o[j]["offset"]).rstrip("M")), int(str(o[j]["size"]).rstrip("M")))
               for j in ("rt", "be1", "be2", "be3")]
    assert regions == [(0, 1024), (1024, 1024), (2048, 1024), (3072, 1024)]
    assert "offset" not in _k2("randwrite")["be1"]


def test_k2_no_pinning() -> None:
    assert all("cpus_allowed" not in v for v in _k2("randread", None).values())


def test_kyber_workloads_are_table_2() -> None:
    names = [w.name for w in kyber_baseline.workloads()]
    assert names == ["R1", "R256", "W1", "W256", "R1+W1", "R1+W256", "R256+W1", "R256+W256"]
    o = jobs.parse_options(kyber_baseline.jobfile(
        "/dev/x", kyber_baseline.Workload.parse("r1+w256"), 5, 1, "io_uring", 2))
    assert o["R"]["rw"] == "randread" and o["R"]["iodepth"] == "1"
    assert o["W"]["rw"] == "randwrite" and o["W"]["iodepth"] == "256"
    assert o["global"]["bs"] == "4k" and o["global"]["direct"] == "1"
    only_w = jobs.parse_options(kyber_baseline.jobfile(
        "/dev/x", kyber_baseline.Workload.parse("W1"), 5, 1, "io_uring", None))
    assert list(only_w) == ["global", "W"]
    for bad, msg in (("X1", "use e.g. R1, W256, R1+W256"), ("R", "use e.g. R1, W256, R1+W256"),
                     ("R1+R2", "one R and one W at most"), ("", "use e.g. R1, W256, R1+W256")):
        with pytest.raises(ValueError, match=re.escape(f"bad workload '{bad}': {msg}")):
            kyber_baseline.Workload.parse(bad)
