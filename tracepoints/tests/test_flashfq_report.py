"""The trace report on a synthetic flashfq trace, written in the test with
the TP_printk formats of tracepoints/trace/events/flashfq.h read from the
header itself (so the parser is checked against what the kernel prints).

The scenario, in windows of 1 ms from t0 = 1 s on 254,0: tasks 100 and 200
are dispatched four 60 us-charge requests each in every window, task 300
in windows 5..9; task 400 has one request in window 7, then anticipations
(one expiring in window 8, one cancelled in window 9) keep it active
through window 9.  So the fair share is 1/2 in windows 0..4, 1/3 in 5..6
and 1/4 in 7..9.  Task 200's first request of window 3 is requeued and
dispatched again (charged twice); a complete of a request inserted before
the trace starts it; two undispatched inserts on one tag at the end (the
first merged away) end it.  Device times: task 100 50 us, task 200 150 us,
task 300 and 400 100 us per request."""
from __future__ import annotations

import re
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tracepoints import report

ROOT = Path(__file__).resolve().parents[2]
HEADER = ROOT / "tracepoints" / "trace" / "events" / "flashfq.h"
DEV = (254, 0)
T0 = 1_000_000_000
MS, US = 1_000_000, 1_000
CHARGE = 60_000
DEVICE_NS = {100: 50 * US, 200: 150 * US, 300: 100 * US, 400: 100 * US}


def printk_prefixes(header: Path) -> dict[str, str]:
    """Macro -> the format it puts before an event's, of the TP_printk_*()
    macros of the trace/events headers @header includes (iosched-rq.h's
    request fields), as `#define TP_printk_x(fmt, args...) TP_printk("..." fmt, ...)`;
    TP_printk itself puts nothing."""
    out = {"TP_printk": ""}
    for inc in re.findall(r"^#include <trace/events/([\w-]+\.h)>", header.read_text(), re.M):
        if (header.parent / inc).is_file():
            out.update(re.findall(r'^#define\s+(TP_printk_\w+)\(fmt, args\.\.\.\)[\s\\]*'
                                  r'TP_printk\("([^"]*)" fmt,', (header.parent / inc).read_text(),
                                  re.M))
    return out


def printk_formats(header: Path = HEADER) -> dict[str, str]:
    """Event name -> its TP_printk format in @header, the prefix of a
    TP_printk_*() macro (printk_prefixes) included; DEFINE_EVENTs taking
    their class's."""
    text = header.read_text()
    prefixes = printk_prefixes(header)
    fmts = {m.group(1): prefixes[m.group(2)] + m.group(3) for m in re.finditer(
        r'^(?:TRACE_EVENT|DECLARE_EVENT_CLASS)\((\w+),.*?(TP_printk\w*)\(\s*"([^"]*)"', text,
        re.M | re.S)}
    classes = set()
    for m in re.finditer(r"^DEFINE_EVENT\((\w+),\s*(\w+),", text, re.M):
        fmts[m.group(2)] = fmts[m.group(1)]
        classes.add(m.group(1))
    return {name: fmt for name, fmt in fmts.items() if name not in classes}


FORMATS = printk_formats()


def ftrace_line(fmt: str, ts: int, name: str, named: dict[str, Any], unnamed: list[Any],
                pid: int = 1) -> str:
    """Event @name at @ts as ftrace prints it with TP_printk format @fmt:
    `name=%x` from @named, the unnamed conversions from @unnamed in turn."""
    rest = iter(unnamed)

    def conv(m: re.Match[str]) -> str:
        return f"{m.group(1)}={named[m.group(1)]}" if m.group(1) else str(next(rest))
    body = re.sub(r"(?:(\w+)=)?%(?:llu|u|d|s)", conv, fmt)
    assert "%" not in body, body
    return (f"             fio-{pid}     [000] ...1. "
            f"{ts // 10**9:5d}.{ts % 10**9 // US:06d}: {name}: {body}")


class Trace:
    """ftrace text lines of flashfq events, each printed as the kernel
    prints it: `name=%x` from the named field, the unnamed conversions
    (dev, rwbs, sector+nr_sector) from the request."""

    def __init__(self) -> None:
        self.lines: list[tuple[int, str]] = []
        self.tags = iter(range(100, 10_000))

    def event(self, ts: int, name: str, task: int = 0, **f: int) -> None:
        unnamed = [*DEV, f.pop("rwbs", "RS"), f.pop("sector", 2048 * task), f.pop("nr_sector", 8)]
        f = {"task": task, "inflight": 1, "vtime": 0, "start": 0, **f}
        self.lines.append((ts, ftrace_line(FORMATS[name], ts, name, f, unnamed, task or 1)))

    def request(self, ts: int, task: int, requeue: bool = False) -> None:
        """Insert at @ts, dispatch 5 us later, complete after the task's
        device time; with @requeue given back 15 us after its dispatch,
        inserted again 10 us later and dispatched 10 us after that."""
        tag = next(self.tags)
        rq = {"hctx": 0, "tag": tag, "task": task}
        self.event(ts, "flashfq_insert", **rq, finish=CHARGE, head=0)
        self.event(ts + 5 * US, "flashfq_dispatch", **rq, charge=CHARGE, staged_ns=5 * US, gap=0)
        if requeue:
            self.event(ts + 20 * US, "flashfq_requeue", **rq)
            self.event(ts + 30 * US, "flashfq_insert", **rq, finish=CHARGE, head=1)
            ts += 35 * US
            self.event(ts + 5 * US, "flashfq_dispatch", **rq, charge=CHARGE, staged_ns=40 * US,
                       gap=0)
        self.event(ts + 5 * US + DEVICE_NS[task], "flashfq_complete", **rq,
                   device_ns=DEVICE_NS[task])

    def text(self) -> str:
        return "# tracer: nop\n#\n" + "".join(line + "\n" for _, line in sorted(self.lines))


def scenario() -> str:
    tr = Trace()
    for w in range(10):
        base = T0 + w * MS
        tasks = [100, 200] + ([300] if w >= 5 else [])
        for r in range(4):
            for k, task in enumerate(tasks):
                tr.request(base + r * 200 * US + k * 10 * US, task,
                           requeue=(w, r, task) == (3, 0, 200))
        tr.event(base + 999 * US, "flashfq_vtime", vtime=(w + 1) * 240_000, delta=240_000)
    # the 128 KiB write point learnt
    tr.event(T0 + 2 * MS, "flashfq_cost", point=3, old=2_040_000, cost=40_800_000, source=2,
             samples=8)
    # a request inserted and dispatched before the trace
    tr.event(T0 + 1 * US, "flashfq_complete", 100, hctx=0, tag=9999, device_ns=80 * US)
    for t in (300, 500, 700):
        tr.event(T0 + 3 * MS + t * US, "flashfq_throttled", 200, antic=0, gap=150_000,
                 throttle=100_000, inflight=2, queued=3)
    for t in (300, 500):
        tr.event(T0 + 6 * MS + t * US, "flashfq_throttled", 300, antic=1, gap=20_000,
                 throttle=100_000, inflight=1, queued=2)
    tr.request(T0 + 7 * MS + 800 * US, 400)     # completes at 7.905 ms
    antic = {"start": 300_000, "until_ns": T0 + 8 * MS + 500 * US, "block_ns": 2 * MS}
    tr.event(T0 + 7 * MS + 905 * US, "flashfq_antic_start", 400, **antic)
    tr.event(T0 + 8 * MS + 500 * US, "flashfq_antic_expire", 400, **antic)
    tr.event(T0 + 9 * MS + 100 * US, "flashfq_antic_start", 400, **antic)
    tr.event(T0 + 9 * MS + 300 * US, "flashfq_antic_cancel", 400, **antic)
    for t in (800, 850):    # the first is merged away, the second still queued at the end
        tr.event(T0 + 9 * MS + t * US, "flashfq_insert", 100, hctx=0, tag=5000,
                 finish=CHARGE, head=0)
    return tr.text()


@pytest.fixture(scope="module")
def trace_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    p = tmp_path_factory.mktemp("flashfq") / "flashfq.txt"
    p.write_text(scenario())
    return p


@pytest.fixture(scope="module")
def trace(trace_file: Path) -> report.Trace:
    return report.read_trace(trace_file, "flashfq")


def test_every_event_of_the_header_is_parsed(trace: report.Trace) -> None:
    assert set(FORMATS) == {f"flashfq_{e}" for e in (
        "insert", "dispatch", "complete", "requeue", "throttled", "antic_start",
        "antic_expire", "antic_cancel", "vtime", "cost")}
    assert {e.name for e in trace.events} == set(FORMATS)
    d = next(e for e in trace.events if e.name == "flashfq_dispatch").fields
    assert d == {"dev": "254,0", "hctx": 0, "tag": 100, "rwbs": "RS", "sector": 204800,
                 "nr_sector": 8, "task": 100, "start": 0, "charge": CHARGE, "vtime": 0,
                 "staged_ns": 5 * US, "inflight": 1, "gap": 0}
    th = next(e for e in trace.events if e.name == "flashfq_throttled").fields
    assert th == {"dev": "254,0", "task": 200, "antic": 0, "gap": 150_000,
                  "throttle": 100_000, "inflight": 2, "queued": 3}
    c = next(e for e in trace.events if e.name == "flashfq_cost").fields
    assert c == {"dev": "254,0", "point": 3, "old": 2_040_000, "cost": 40_800_000,
                 "source": 2, "samples": 8}


def test_requests_joined(trace: report.Trace) -> None:
    bd = report.breakdown(trace, "flashfq")
    assert len(bd.requests) == 40 + 40 + 20 + 1
    assert (bd.unfinished, bd.merged, bd.orphans, bd.lost) == (1, 1, 1, 0)
    assert bd.decisions == {"throttled": 5, "antic_start": 2, "antic_expire": 1,
                            "antic_cancel": 1, "vtime": 10, "cost": 1, "requeue": 1}
    assert Counter(r.task for r in bd.requests) == {100: 40, 200: 40, 300: 20, 400: 1}
    requeued = [r for r in bd.requests if r.requeues]
    assert len(requeued) == 1 and requeued[0].task == 200
    # its first insert to its second dispatch, then the device
    assert (requeued[0].staged_ns, requeued[0].device_ns) == (40 * US, 150 * US)
    for r in bd.requests:
        assert r.staged_ns + r.device_ns == r.total_ns
        assert r.device_ns == r.kernel_device_ns == DEVICE_NS[r.task]
        assert r.staged_ns == r.kernel_staged_ns
    classes = report.per_class(bd)
    assert list(classes) == ["all"] and classes["all"]["count"] == 101
    assert classes["all"]["staged"][50.0] == 5 * US
    assert classes["all"]["device"]["max"] == 150 * US


def test_shares_against_the_fair_share(trace: report.Trace) -> None:
    svcs = report.service(trace, MS)
    assert list(svcs) == ["254,0"]
    s = svcs["254,0"]
    assert (s.t0_ns, s.span_ns, s.window_ns, s.windows) == (T0, 9_999 * US, MS, 10)
    shares, fair = s.shares(), s.fair()
    assert fair == pytest.approx([1 / 2] * 5 + [1 / 3] * 2 + [1 / 4] * 3)
    for w in (0, 1, 2, 4):          # two tasks, 1:1
        assert (shares[100][w], shares[200][w]) == (0.5, 0.5)
    assert (shares[100][3], shares[200][3]) == pytest.approx((4 / 9, 5 / 9))   # charged twice
    for w in (5, 6, 8, 9):          # three tasks, 1:1:1
        assert [shares[t][w] for t in (100, 200, 300)] == pytest.approx([1 / 3] * 3)
    assert [shares[t][7] for t in (100, 200, 300, 400)] == pytest.approx([4 / 13] * 3 + [1 / 13])
    assert shares[300][:5] == [0.0] * 5
    assert [shares[400][w] for w in (8, 9)] == [0.0, 0.0]   # active, anticipated, not served
    active = {t: [w for w in range(10) if s.tasks[t].active_w[w]] for t in s.tasks}
    assert active == {100: list(range(10)), 200: list(range(10)), 300: [5, 6, 7, 8, 9],
                      400: [7, 8, 9]}
    assert {t: (x.requests, x.charge, x.completions, x.device_ns) for t, x in s.tasks.items()} == {
        100: (40, 40 * CHARGE, 41, 40 * 50 * US + 80 * US),
        200: (41, 41 * CHARGE, 40, 40 * 150 * US),
        300: (20, 20 * CHARGE, 20, 20 * 100 * US),
        400: (1, CHARGE, 1, 100 * US)}


def test_holds_anticipations_and_virtual_time(trace: report.Trace) -> None:
    s = report.service(trace, MS)["254,0"]
    assert s.holds == {"throttle": 3, "antic": 2}
    assert s.antic == {"start": 2, "expire": 1, "cancel": 1}
    assert (len(s.vtime_pts), s.vtime_delta, s.vtime_from) == (10, 2_400_000, 0)
    assert s.vtime_pts[-1] == (T0 + 9 * MS + 999 * US, 2_400_000)


def test_automatic_window() -> None:
    assert report.auto_window(10 * MS) == 200 * US
    assert report.auto_window(3 * 10**9) == 100 * MS
    assert report.auto_window(0) == 1 * US
    s = report.service(report.read_ftrace(scenario(), "flashfq"))["254,0"]
    assert (s.window_ns, s.windows) == (200 * US, 50)


def test_markdown(trace: report.Trace) -> None:
    bd = report.breakdown(trace, "flashfq")
    md = report.service_markdown(report.service(trace, MS), bd)
    rows = {ln.split(" | ")[0].lstrip("| "): ln for ln in md.splitlines() if ln.startswith("| ")}
    total = 102 * CHARGE
    # task 200 first (most charge), its requeued request in its staged p99
    assert md.index("| 200 |") < md.index("| 100 |") < md.index("| 300 |") < md.index("| 400 |")
    assert rows["200"] == (f"| 200 | 41 | 2.460 | {41 * CHARGE / total:.3f} | 0.589 | 10 of 10 | "
                           f"{(4 * 0.5 + 5 / 9 + 4 / 3 + 4 / 13) / 10:.3f} | "
                           f"{(5 / 2 + 2 / 3 + 3 / 4) / 10:.3f} | 0.005 / 0.040 |")
    assert rows["400"].startswith("| 400 | 1 | 0.060 | 0.010 | 0.010 | 3 of 10 | 0.026 | 0.250 |")
    assert ("Dispatch held back 3 time(s) by the throttle (antic=0) and 2 by an anticipation "
            "(antic=1). Anticipations: 2 started, 1 expired, 1 cancelled. Virtual time: "
            "10 advance(s), 2.400 ms in all (from 0.000 to 2.400 ms), 240.024 ms per second "
            "of trace.") in md


def test_plots_and_script(trace: report.Trace, trace_file: Path, tmp_path: Path) -> None:
    svcs = report.service(trace, MS)
    pngs = report.service_plot(svcs, tmp_path)
    assert [p.name for p in pngs] == ["flashfq-share.png"]
    assert pngs[0].stat().st_size > 5000
    bd = report.breakdown(trace, "flashfq")
    assert [p.name for p in report.plot(bd, trace, "flashfq", tmp_path)] == [
        "flashfq-latency-cdf.png", "flashfq-inflight.png"]

    out = tmp_path / "out"
    md = subprocess.run([sys.executable, str(ROOT / "scripts" / "trace-report"), "--system",
                         "flashfq", "--window-ms", "1", "--out", str(out), str(trace_file)],
                        capture_output=True, text=True, check=True).stdout
    assert "| all | 101 |" in md and "## Each task's share of the device" in md
    assert "| 100 | 40 | 2.400 |" in md
    assert sorted(p.name for p in out.iterdir()) == [
        "flashfq-inflight.png", "flashfq-latency-cdf.png", "flashfq-share.png", "report.md"]
    assert "![flashfq-share](flashfq-share.png)" in (out / "report.md").read_text()


def test_no_flashfq_events_no_service() -> None:
    k2 = report.read_trace(Path(__file__).parent / "data" / "k2-ftrace-small.txt", "k2")
    assert report.service(k2) == {} and report.service(report.Trace([])) == {}
