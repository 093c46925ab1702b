"""K2's, FlashFQ's and CARS's events recorded by LTTng (kernel tracer and probe built by
`make lttng-probes`), read back with babeltrace2 by scripts/trace-report."""
from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path
from typing import Any

from bench import fio
from bench.suites import OURS
from conftest import ROOT, Guest
from tracing import lttng_record

sys.path.insert(0, str(ROOT))
from tracepoints import report  # noqa: E402


def _record_fio(g: Guest, tmp_path: Path, sched: str, attrs: dict[str, int],
                fio_args: str) -> tuple[Path, dict[str, Any]]:
    """Record sched's system with LTTng while fio runs @fio_args on the
    throttled disk under @sched (its module loaded, @attrs written,
    merges off); the trace and fio's JSON result."""
    dev = g.throttled
    g.load(OURS[sched])
    g.select(dev, sched)
    for name, value in attrs.items():
        g.set_attr(dev, name, value)
    g.sh(f"echo 2 > /sys/block/{dev}/queue/nomerges")
    try:
        path = lttng_record(g, sched, f"""
fio --output-format=json --output=/tmp/fio.json --filename=/dev/{dev} --direct=1 \
    --ioengine=libaio --bs=4k --time_based --runtime=3 {fio_args}
""", tmp_path)
    finally:
        g.sh(f"echo 0 > /sys/block/{dev}/queue/nomerges")
        g.select(dev, "none")
    return path, fio.parse(g.vm.read_file("/tmp/fio.json").decode())


def test_lttng_session_records_k2(guest: Guest, tmp_path: Path) -> None:
    """An LTTng kernel session records k2_* during fio: one complete event per
    fio I/O, no event lost, staged + device = total for every request, and
    the kernel's device time agrees with the trace's timestamps."""
    path, res = _record_fio(guest, tmp_path, "k2", {"max_inflight": 2},
                            "--rw=randread --iodepth=8 --name=rt --prioclass=1 --prio=0 "
                            "--name=be --prioclass=2 --prio=4")
    ios = {n: fio.job_stats(res, n).ios for n in ("rt", "be")}
    trace = report.read_trace(path, "k2")
    assert trace.source == "lttng"
    bd = report.breakdown(trace, "k2")
    classes = report.per_class(bd)
    print({k: v["count"] for k, v in classes.items()}, ios, dict(bd.decisions))
    assert trace.lost == 0
    assert bd.orphans == 0 and bd.unfinished == 0
    assert classes["rt0"]["count"] == ios["rt"]
    assert classes["be"]["count"] == ios["be"]
    assert bd.decisions["throttled"] > 0
    for rq in bd.requests:
        assert rq.staged_ns + rq.device_ns == rq.total_ns
    # The kernel's own device time agrees with the timestamps within 1 ms
    # for nearly every request (a vCPU the busy host preempts between the
    # two clock reads accounts for the rest).
    agree = sum(abs(r.kernel_device_ns - r.device_ns) < 1_000_000 for r in bd.requests)
    assert agree >= 0.95 * len(bd.requests), f"{agree} of {len(bd.requests)}"


def test_lttng_session_records_flashfq(guest: Guest, tmp_path: Path) -> None:
    """flashfq_* through LTTng: every field of the kernel header, one
    complete event per fio I/O, nothing lost, staged + device = total, and
    two equal readers at depth 1 each near half of the charge."""
    devno = guest.sh(f"cat /sys/block/{guest.throttled}/dev").strip().replace(":", ",")
    path, res = _record_fio(guest, tmp_path, "flashfq", {"depth": 1},
                            "--rw=randread --iodepth=8 --name=a --name=b")
    ios = sum(fio.job_stats(res, n).ios for n in ("a", "b"))
    trace = report.read_trace(path, "flashfq")
    assert trace.source == "lttng" and trace.lost == 0
    rq = {"dev", "sector", "nr_sector", "hctx", "tag", "rwbs", "task", "start"}
    fields = {"flashfq_insert": rq | {"finish", "vtime", "at_head"},
              "flashfq_dispatch": rq | {"charge", "vtime", "staged_ns", "inflight", "gap"},
              "flashfq_complete": rq | {"device_ns", "inflight"},
              "flashfq_requeue": rq | {"inflight"},
              "flashfq_throttled": {"dev", "task", "antic", "gap", "throttle", "inflight",
                                    "queued"},
              "flashfq_vtime": {"dev", "vtime", "delta"},
              "flashfq_cost": {"dev", "point", "old", "cost", "source", "samples"},
              **{f"flashfq_antic_{k}": {"dev", "task", "start", "until_ns", "block_ns"}
                 for k in ("start", "expire", "cancel")}}
    names = Counter(e.name for e in trace.events)
    print(dict(names))
    for n in ("insert", "dispatch", "complete", "vtime"):
        assert names[f"flashfq_{n}"] > 0
    for ev in trace.events:
        assert set(ev.fields) == fields[ev.name], ev
    bd = report.breakdown(trace, "flashfq")
    assert bd.orphans == 0 and bd.unfinished == 0
    assert report.per_class(bd)["all"]["count"] == ios
    for r in bd.requests:
        assert r.staged_ns + r.device_ns == r.total_ns
    s = report.service(trace)[devno]
    total = sum(t.charge for t in s.tasks.values())
    shares = [t.charge / total for t in s.tasks.values()]
    print(f"charge shares: {shares}")
    assert len(shares) == 2 and all(0.4 <= x <= 0.6 for x in shares)


def test_lttng_session_records_cars(guest: Guest, tmp_path: Path) -> None:
    """cars_* through LTTng: every field of the kernel header, one complete
    event per fio I/O, nothing lost, staged + device = total, each of the
    two flows found with its own requests, and every predicted die within
    nr_dies."""
    path, res = _record_fio(guest, tmp_path, "cars", {"depth": 2},
                            "--rw=randrw --iodepth=4 --name=a --name=b")
    ios = sum(fio.job_stats(res, n).ios for n in ("a", "b"))
    trace = report.read_trace(path, "cars")
    assert trace.source == "lttng" and trace.lost == 0
    rq = {"dev", "sector", "nr_sector", "hctx", "tag", "rwbs", "flow"}
    fields = {"cars_insert": rq | {"at_head"},
              "cars_dispatch": rq | {"die", "ndies", "op", "forced", "cmt_miss", "inflight"},
              "cars_complete": rq | {"die", "ndies", "inflight"},
              "cars_requeue": rq | {"kept", "inflight"},
              "cars_skip": {"dev", "flow", "reason", "die", "skipped", "dispatched"}}
    names = Counter(e.name for e in trace.events)
    print(dict(names))
    for n in ("insert", "dispatch", "complete"):
        assert names[f"cars_{n}"] > 0
    for ev in trace.events:
        assert set(ev.fields) == fields[ev.name], ev
        if ev.name == "cars_dispatch":
            assert 0 <= int(ev.fields["die"]) < 8 and int(ev.fields["inflight"]) <= 2, ev
    bd = report.breakdown(trace, "cars")
    assert bd.orphans == 0 and bd.unfinished == 0
    assert report.per_class(bd)["all"]["count"] == ios
    for r in bd.requests:
        assert r.staged_ns + r.device_ns == r.total_ns
    flows = Counter(r.task for r in bd.requests)
    assert len(flows) == 2 and 0 not in flows, flows
    assert "## cars: predicted dies, skips and flows" in report.cars_markdown(trace, bd)
