"""The trace report on a synthetic cars trace, printed with the TP_printk
formats of tracepoints/trace/events/cars.h read from the header itself.

On 254,0 from t0 = 1 s: flow 100 has six 4 KiB reads, flow 200 four 4 KiB
writes, each inserted, dispatched 10 us later (flow 100's requests on dies
0, 1, 0, 1, 0, 1; flow 200's on dies 2..5) and completed 100 us after
that; flow 200's first write is requeued once (given back 20 us after its
dispatch, inserted again at the head and dispatched 10 us later); one
write is forced and one read predicted to miss the mapping cache.  Three
picks passed over heads: two for a busy die (one of them then dispatched
another request), one for the throttle."""
from __future__ import annotations

import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from tracepoints import report
from tracepoints.tests.test_flashfq_report import ftrace_line, printk_formats

ROOT = Path(__file__).resolve().parents[2]
FORMATS = printk_formats(ROOT / "tracepoints" / "trace" / "events" / "cars.h")
DEV = (254, 0)
T0 = 1_000_000_000
US = 1_000


class Trace:
    def __init__(self) -> None:
        self.lines: list[tuple[int, str]] = []

    def event(self, ts: int, name: str, **f: int | str) -> None:
        unnamed = [*DEV, f.pop("rwbs", "RS"), f.pop("sector", 0), f.pop("nr_sector", 8)]
        self.lines.append((ts, ftrace_line(FORMATS[name], ts, name, {"inflight": 1, **f},
                                           unnamed)))

    def request(self, ts: int, tag: int, flow: int, die: int, write: bool, requeue: bool = False,
                **extra: int) -> None:
        rq: dict[str, int | str] = {"hctx": 0, "tag": tag, "flow": flow,
                                    "rwbs": "WS" if write else "RS", "sector": tag * 8}
        place = {"die": die, "ndies": 1}
        self.event(ts, "cars_insert", **rq, head=0)
        disp = {**place, "op": int(write), "forced": 0, "cmt_miss": 0, **extra}
        self.event(ts + 10 * US, "cars_dispatch", **rq, **disp)
        if requeue:
            self.event(ts + 30 * US, "cars_requeue", **rq, kept=0, inflight=0)
            self.event(ts + 30 * US, "cars_insert", **rq, head=1)
            ts += 30 * US
            self.event(ts + 10 * US, "cars_dispatch", **rq, **disp)
        self.event(ts + 110 * US, "cars_complete", **rq, **place)

    def text(self) -> str:
        return "# tracer: nop\n#\n" + "".join(line + "\n" for _, line in sorted(self.lines))


def scenario() -> str:
    tr = Trace()
    for i in range(6):
        tr.request(T0 + i * 200 * US, 10 + i, 100, i % 2, False,
                   **({"cmt_miss": 1} if i == 5 else {}))
    for i in range(4):
        tr.request(T0 + 50 * US + i * 200 * US, 20 + i, 200, 2 + i, True, requeue=i == 0,
                   **({"forced": 1} if i == 3 else {}))
    for k, (reason, dispatched) in enumerate(((0, 1), (0, 0), (2, 1))):
        tr.event(T0 + (k * 200 + 5) * US, "cars_skip", flow=200, reason=reason, die=0,
                 skipped=2 if k == 0 else 1, dispatched=dispatched)
    return tr.text()


@pytest.fixture
def trace_file(tmp_path: Path) -> Path:
    p = tmp_path / "cars.txt"
    p.write_text(scenario())
    return p


def test_every_event_of_the_header_is_parsed(trace_file: Path) -> None:
    trace = report.read_trace(trace_file, "cars")
    names = Counter(e.name for e in trace.events)
    assert set(names) == set(FORMATS) == {"cars_insert", "cars_dispatch", "cars_complete",
                                          "cars_requeue", "cars_skip"}
    ev = next(e for e in trace.events if e.name == "cars_dispatch")
    assert ev.fields["flow"] == 100 and ev.fields["die"] == 0 and ev.fields["rwbs"] == "RS"


def test_requests_joined_per_flow(trace_file: Path) -> None:
    trace = report.read_trace(trace_file, "cars")
    bd = report.breakdown(trace, "cars")
    assert len(bd.requests) == 10 and bd.orphans == 0 and bd.unfinished == 0
    assert bd.decisions["requeue"] == 1 and bd.decisions["skip"] == 3
    by_flow = Counter(r.task for r in bd.requests)
    assert by_flow == {100: 6, 200: 4}
    requeued = next(r for r in bd.requests if r.requeues)
    # the requeued write keeps its first insert: staged 40 us, device 100 us
    assert (requeued.task, requeued.staged_ns, requeued.device_ns) == (200, 40 * US, 100 * US)
    assert all(r.staged_ns + r.device_ns == r.total_ns for r in bd.requests)


def test_cars_markdown(trace_file: Path) -> None:
    trace = report.read_trace(trace_file, "cars")
    md = report.cars_markdown(trace, report.breakdown(trace, "cars"))
    print(md)
    # 11 dispatches: the requeued write twice
    assert ("Dispatched 11 request(s): 1 forced (every head conflicted for max_hold_us), 1 "
            "predicted to miss the mapping cache, 0 on more than one die.") in md
    assert ("Picks that passed over a flow's head: 3 (4 heads in all), 2 of them dispatched "
            "another request; by the first head's reason: die busy 2, throttle 1.") in md
    assert "| 0 | 3 | 0 | 0 | 0.273 |" in md and "| 2 | 0 | 2 | 0 | 0.182 |" in md
    assert "| 100 | 6 | 0.010 / 0.010 | 0.110 / 0.110 |" in md
    assert "| 200 | 4 | 0.010 / 0.040 | 0.110 / 0.140 |" in md


def test_script(trace_file: Path, tmp_path: Path) -> None:
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "trace-report"), "--system",
                        "cars", "--out", str(tmp_path / "out"), str(trace_file)],
                       capture_output=True, text=True, check=True)
    assert "## cars: predicted dies, skips and flows" in r.stdout
    assert (tmp_path / "out" / "cars-latency-cdf.png").exists()
