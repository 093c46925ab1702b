"""The ssdsim part of the trace report on a canned ftrace trace: ssdsim
loaded with fill_percent=100 cmt_pages=2 (defaults otherwise: 8 dies on 4
channels, time_scale 20), five 4 KiB random writes then three 8 KiB random
reads at QD1 (6.12 VM).  The expected per-die counts are what the device's
own sysfs statistics said right after the run; the times follow from the
parameters: read + transfer (50 + 10 us) x 20 = 1.2 ms, transfer + program
(10 + 500 us) x 20 = 10.2 ms, GC of 56 copies and one erase
56 x (50 + 500) x 20 us + 3 ms x 20 = 676 ms."""
from __future__ import annotations

import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from tracepoints import report

DATA = Path(__file__).parent / "data" / "ssdsim-ftrace-small.txt"
ROOT = Path(__file__).resolve().parents[2]

# /sys/block/ssdsim0/ssdsim/ after the run, die 0 first
SYSFS = {
    "die_reads": [4, 2, 0, 1, 2, 58, 2, 1],
    "die_programs": [4, 1, 0, 0, 1, 58, 1, 1],
    "die_erases": [0, 0, 0, 0, 0, 1, 0, 0],
    "die_busy_ns": [45_600_000, 12_600_000, 0, 1_200_000, 12_600_000, 698_800_000,
                    12_600_000, 11_400_000],
}


@pytest.fixture
def trace() -> report.Trace:
    return report.read_trace(DATA, "ssdsim")


def test_die_usage_matches_the_device_counters(trace: report.Trace) -> None:
    use = report.die_usage(trace)
    assert {dev for dev, _ in use} == {"254,0"}
    per_die = {die: u for (_, die), u in use.items()}
    for name, attr in [("die_reads", "reads"), ("die_programs", "programs"),
                       ("die_erases", "erases"), ("die_busy_ns", "busy_ns")]:
        got = [getattr(per_die[d], attr) if d in per_die else 0 for d in range(8)]
        assert got == SYSFS[name], name
    ops: Counter[str] = Counter()
    for u in use.values():
        ops += u.ops
    # 5 writes, 3 reads of 2 pages; 8 mapping-cache misses, 5 write-backs
    assert ops == {"program": 5, "read": 6, "map_read": 8, "map_write": 5}
    assert sum(u.gc_runs for u in use.values()) == 1


def test_fields_and_times(trace: report.Trace) -> None:
    names = Counter(e.name for e in trace.events)
    assert names == {"ssdsim_die_op": 24, "ssdsim_gc": 1, "ssdsim_queue": 8,
                     "ssdsim_complete": 8}
    for ev in trace.events:
        f = ev.fields
        if ev.name == "ssdsim_die_op":
            assert f["channel"] == int(f["die"]) % 4
            dur = int(f["end_ns"]) - int(f["start_ns"])
            assert dur == (1_200_000 if "read" in str(f["op"]) else 10_200_000), ev
        elif ev.name == "ssdsim_gc":
            assert (f["die"], f["block"], f["victims"], f["copied"]) == (5, 685, 1, 56)
            assert int(f["end_ns"]) - int(f["start_ns"]) == 676_000_000
        elif ev.name == "ssdsim_queue":
            assert f["device_ns"] == int(f["done_ns"]) - int(f["arrive_ns"])
        elif ev.name == "ssdsim_complete":
            assert f["error"] == 0
            assert int(f["latency_ns"]) >= int(f["device_ns"])
    # a buffered write completes at once; the first read waited behind GC
    reads = [e for e in trace.events if e.name == "ssdsim_complete" and e.fields["rwbs"] == "RS"]
    assert [e.fields["device_ns"] for e in reads] == [47_086_982, 11_400_000, 2_400_000]


def test_markdown_and_script(trace: report.Trace) -> None:
    md = report.ssdsim_markdown(trace)
    assert "| R | 3 | 11.400 / 47.087 |" in md
    assert "| 254,0 | 5 | 58 | 58 | 1 | 1 | 698.800 |" in md
    out = subprocess.run([sys.executable, str(ROOT / "scripts" / "trace-report"),
                          "--system", "ssdsim", str(DATA)],
                         capture_output=True, text=True, check=True).stdout
    assert "Requests completed: 8; events lost by the tracer: 0." in out
    assert "| 254,0 | 0 | 4 | 4 | 0 | 0 | 45.600 |" in out
