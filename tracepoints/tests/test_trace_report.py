"""The trace report on a canned trace recorded by tests/vm/test_trace.py
(the first events of a k2 run: an RT level-3 reader and a best-effort
reader on the throttled VM NVMe device, max_inflight=2).  The expected
numbers were worked out by hand from the timestamps in the file."""
from __future__ import annotations

import gzip
import math
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


def test_gzipped_ftrace_text_reads_as_the_text(tmp_path: Path) -> None:
    """The runner keeps ftrace's text gzip'd (runs/NNN-<key>.trace.txt.gz)."""
    gz = tmp_path / "001-x.trace.txt.gz"
    gz.write_bytes(gzip.compress(DATA.read_bytes()))
    plain, packed = report.read_trace(DATA, "k2"), report.read_trace(gz, "k2")
    assert packed.events and packed.events == plain.events and packed.lost == plain.lost


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
    # in one line, from the first k2 event
    t0 = min(e.ts_ns for e in trace.events if e.name.startswith("k2_"))
    assert report.adjust_history(trace) == "; ".join(
        f"{(5.56e9 + 1e7 * i - t0) / 1e9:.1f} s: {d}" for i, d in enumerate((
            "32->1 0.0 ms return", "1->2 0.9 ms up_fast", "2->1 4.0 ms down",
            "1->1 2.5 ms hold")))
    bd = report.breakdown(trace, "k2")
    md = report.adaptive_markdown(trace, bd)
    assert "Decisions: 4 (hold 1, down 1, up_fast 1, return 1)" in md
    assert "from 32 to 1, between 1 and 2" in md and "Real-time requests: 3" in md
    pngs = report.adaptive_plot(trace, bd, tmp_path)
    assert [p.name for p in pngs] == ["k2-adaptive.png"] and pngs[0].stat().st_size > 5000
    # without the events, nothing
    plain = report.read_trace(DATA, "k2")
    assert report.adaptive_markdown(plain, bd) == ""
    assert report.adjust_history(plain) == ""
    assert report.adaptive_plot(plain, bd, tmp_path / "none") == []


# -- the k2 trace over time ---------------------------------------------------------

def k2_request(tag: int, queue: int, insert_s: float, complete_s: float | None,
               nr_sector: int = 8, rwbs: str = "R") -> str:
    """ftrace lines of one request's life cycle on 259,1 (k2's TP_printk
    formats), dispatched when inserted; no completion when @complete_s is
    None."""
    rq = f"259,1 hctx=0 tag={tag} {rwbs} {tag * 8}+{nr_sector} queue={queue}"
    line = "             fio-257     [001] ...1. {:>12.6f}: k2_{}: {}\n"
    out = line.format(insert_s, "insert", f"{rq} class=1 level=0 head=0 pid=257 comm=fio")
    out += line.format(insert_s, "dispatch", f"{rq} staged_ns=0 inflight=1 promoted=0")
    if complete_s is not None:
        ns = round((complete_s - insert_s) * 1e9)
        out += line.format(complete_s, "complete", f"{rq} device_ns={ns} inflight=0")
    return out


def k2_adjust(ts_s: float, old: int, new: int, reason: str = "up") -> str:
    return (f"             fio-257     [001] d..1. {ts_s:>12.6f}: k2_adjust: 259,1 old={old} "
            f"new={new} est_us=0 samples=10 reason={reason}\n")


def test_timeline_windows() -> None:
    """From t0 = 10 s (the first event) in 1 s windows: window 0 has RT
    requests of 10 and 30 ms and a 1 MiB best-effort write, window 1 an RT
    request of 5 ms and 128 KiB of best effort, window 2 none (a request
    still in the device at the end); the trace ends at 13.5 s, so the RT
    request completing at 13.1 s is in the scatter but in no window."""
    text = "".join([
        k2_request(1, 0, 10.0, 10.010), k2_request(2, 8, 10.1, 10.9, 2048, "W"),
        k2_adjust(10.2, 32, 1, "return"), k2_request(3, 0, 10.5, 10.530),
        k2_request(4, 8, 11.0, 11.999, 256), k2_request(5, 0, 11.2, 11.205),
        k2_adjust(11.5, 1, 2), k2_request(6, 8, 12.5, None), k2_request(7, 1, 13.0, 13.1),
        k2_adjust(13.5, 2, 1, "down")])
    tl = report.timeline(report.read_ftrace(text, "k2"), 1_000_000_000)
    assert tl.window_s == 1.0 and tl.span_s == 3.5
    assert tl.starts() == [0.0, 1.0, 2.0]
    assert tl.bound == [(0.0, 32), (pytest.approx(0.2), 1), (1.5, 2), (3.5, 1)]
    assert [(pytest.approx(t), ms) for t, ms in tl.rt] == [
        (0.01, 10.0), (0.53, 30.0), (1.205, 5.0), (3.1, 100.0)]
    assert tl.rt_p99_ms[:2] == [30.0, 5.0] and math.isnan(tl.rt_p99_ms[2])
    # 2 x 4 KiB + 1 MiB, 4 KiB + 128 KiB, nothing
    assert tl.bw_mib_s == [1.0078125, 0.12890625, 0.0]
    # half-second windows: each RT request alone in its window, the last
    # one's window [3, 3.5 s) now whole
    tl = report.timeline(report.read_ftrace(text, "k2"), 500_000_000)
    assert len(tl.starts()) == 7 and tl.rt_p99_ms[:3] == [10.0, 30.0, 5.0]
    assert all(math.isnan(x) for x in tl.rt_p99_ms[3:6]) and tl.rt_p99_ms[6] == 100.0
    assert tl.bw_mib_s == [0.0078125, 2.0078125, 0.0078125, 0.25, 0.0, 0.0, 0.0078125]
    # nearest rank: of 200 RT latencies of 1..200 ms in a window, the 198th
    many = "".join(k2_request(i, 0, 1.0 + i / 1000, 1.0 + i / 1000 + i / 1000)
                   for i in range(1, 201)) + k2_adjust(3.0, 1, 1, "hold")
    tl = report.timeline(report.read_ftrace(many, "k2"), 10**9)
    assert tl.rt_p99_ms == [198.0]
    # the same RT requests alone, without windows
    assert [(pytest.approx(t), ms) for t, ms in report.rt_latencies(
        report.read_ftrace(text, "k2"))] == [(0.01, 10.0), (0.53, 30.0), (1.205, 5.0),
                                             (3.1, 100.0)]
    # the window by default: about 40 over the trace (100 ms for 3.5 s)
    tl = report.timeline(report.read_ftrace(text, "k2"))
    assert tl.window_ns == 100_000_000 and len(tl.bw_mib_s) == 35
    # a trace without the system's events, or without k2_adjust
    assert report.timeline(report.read_ftrace("", "k2"), 10**9).bw_mib_s == []
    one = report.read_ftrace(k2_request(1, 0, 1.0, 2.5), "k2")
    assert report.timeline(one, 10**9).bound == []
