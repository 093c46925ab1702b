"""The trace report on a canned trace recorded by tests/vm/test_trace.py
(the first events of a k2 run: an RT level-3 reader and a best-effort
reader on the throttled VM NVMe device, max_inflight=2).  The expected
numbers were worked out by hand from the timestamps in the file."""
from __future__ import annotations

from pathlib import Path

import pytest

from tracepoints import report

DATA = Path(__file__).parent / "data" / "k2-ftrace-small.txt"


@pytest.fixture
def bd() -> report.Breakdown:
    return report.breakdown(report.read_trace(DATA, "k2"), "k2")


def test_requests_joined_per_class(bd: report.Breakdown) -> None:
    assert len(bd.requests) == 5
    assert bd.unfinished == 8       # 2 dispatched and 6 still staged at the end
    assert bd.orphans == 0
    assert bd.lost == 0
    assert bd.decisions == {"throttled": 5}
    classes = report.per_class(bd)
    assert list(classes) == ["rt3", "be"]
    assert classes["rt3"]["count"] == 3 and classes["be"]["count"] == 2


def test_known_latencies(bd: report.Breakdown) -> None:
    first = bd.requests[0]          # hctx0 tag 192, best effort: completes first
    assert (first.queue, first.sector) == (8, 534320)
    assert (first.staged_ns, first.device_ns, first.total_ns) == (30_000, 783_000, 813_000)
    rt = [r for r in bd.requests if r.queue == 3]
    assert [r.total_ns for r in rt] == [8_121_000, 1_281_000, 117_000]
    assert [r.staged_ns for r in rt] == [5_133_000, 22_000, 17_000]
    classes = report.per_class(bd)
    assert classes["rt3"]["device"]["max"] == 2_988_000
    assert classes["rt3"]["total"][50.0] == 1_281_000
    assert classes["be"]["total"]["max"] == 1_632_000


def test_staged_plus_device_is_total(bd: report.Breakdown) -> None:
    for r in bd.requests:
        assert r.staged_ns + r.device_ns == r.total_ns
        # ktime and the trace clock differ a little under emulation
        assert abs(r.kernel_device_ns - r.device_ns) < 1_000_000


def test_lost_events_are_reported() -> None:
    text = DATA.read_text() + "CPU:1 [LOST 42 EVENTS]\n"
    bd = report.breakdown(report.read_ftrace(text, "k2"), "k2")
    assert bd.lost == 42
    assert "events lost by the tracer: 42" in report.markdown(bd, "k2")


def test_markdown_and_plots(bd: report.Breakdown, tmp_path: Path) -> None:
    md = report.markdown(bd, "k2")
    assert "| rt3 | 3 |" in md and "| be | 2 |" in md
    pngs = report.plot(bd, report.read_trace(DATA, "k2"), "k2", tmp_path)
    assert [p.name for p in pngs] == ["k2-latency-cdf.png", "k2-inflight.png"]
    assert all(p.stat().st_size > 5000 for p in pngs)


def test_other_systems_ignored() -> None:
    assert report.read_trace(DATA, "flashfq").events == []


def test_perf_script_format_reads_the_same() -> None:
    """`perf record -e 'k2:*'` then `perf script` prints the same events."""
    lines = []
    for line in DATA.read_text().splitlines():
        m = report.FTRACE_LINE.match(line)
        if m:
            lines.append(f"{m.group('task'):>16} {m.group('pid'):>6} [{m.group('cpu')}] "
                         f"{m.group('ts')}: k2:{m.group('name')}: {m.group('body')}")
    perf = report.breakdown(report.read_ftrace("\n".join(lines), "k2"), "k2")
    ftrace = report.breakdown(report.read_trace(DATA, "k2"), "k2")
    assert [r.total_ns for r in perf.requests] == [r.total_ns for r in ftrace.requests]
    assert perf.decisions == ftrace.decisions


def test_adaptive_bound_report(tmp_path: Path) -> None:
    """k2_adjust events (ftrace prints the reason by name, CTF by number):
    the decisions, the bound in force and a plot of it above the RT
    latencies."""
    adj = ("            fio-257     [001] d..1.     {t}: k2_adjust: 259,1 old={o} new={n} "
           "est_us={e} samples=100 reason={r}\n")
    text = DATA.read_text() + "".join(adj.format(t=t, o=o, n=n, e=e, r=r) for t, o, n, e, r in (
        ("5.560000", 32, 1, 0, "return"), ("5.570000", 1, 2, 900, "up_fast"),
        ("5.580000", 2, 1, 4000, "down"), ("5.590000", 1, 1, 2500, 0)))
    trace_file = tmp_path / "trace.txt"
    trace_file.write_text(text)
    trace = report.read_trace(trace_file, "k2")
    adj_events = report.adjustments(trace)
    assert [(a.old, a.new, a.reason) for a in adj_events] == [
        (32, 1, "return"), (1, 2, "up_fast"), (2, 1, "down"), (1, 1, "hold")]
    bd = report.breakdown(trace, "k2")
    md = report.adaptive_markdown(trace, bd)
    assert "Decisions: 4 (hold 1, down 1, up_fast 1, return 1)" in md
    assert "from 32 to 1, between 1 and 2" in md and "Real-time requests: 3" in md
    pngs = report.adaptive_plot(trace, bd, tmp_path)
    assert [p.name for p in pngs] == ["k2-adaptive.png"] and pngs[0].stat().st_size > 5000
    # without the events, nothing
    plain = report.read_trace(DATA, "k2")
    assert report.adaptive_markdown(plain, bd) == ""
    assert report.adaptive_plot(plain, bd, tmp_path / "none") == []
