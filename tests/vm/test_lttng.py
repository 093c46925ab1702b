"""K2's events recorded by LTTng (kernel tracer and probe built by
`make lttng-probes`), read back with babeltrace2 by scripts/trace-report."""
from __future__ import annotations

import sys
from pathlib import Path

from bench import fio
from conftest import ROOT, Guest
from tracing import lttng_record

sys.path.insert(0, str(ROOT))
from tracepoints import report  # noqa: E402


def test_lttng_session_records_k2(guest: Guest, tmp_path: Path) -> None:
    """An LTTng kernel session records k2_* during fio: one complete event per
    fio I/O, no event lost, staged + device = total for every request, and
    the kernel's device time agrees with the trace's timestamps."""
    g = guest
    dev = g.throttled
    g.load("k2-iosched")
    g.select(dev, "k2")
    g.set_attr(dev, "max_inflight", 2)
    g.sh(f"echo 2 > /sys/block/{dev}/queue/nomerges")
    try:
        path = lttng_record(g, "k2", f"""
fio --output-format=json --output=/tmp/fio.json --filename=/dev/{dev} --direct=1 \
    --ioengine=libaio --rw=randread --bs=4k --iodepth=8 --time_based --runtime=3 \
    --name=rt --prioclass=1 --prio=0 --name=be --prioclass=2 --prio=4
""", tmp_path)
    finally:
        g.sh(f"echo 0 > /sys/block/{dev}/queue/nomerges")
        g.select(dev, "none")
    res = fio.parse(g.vm.read_file("/tmp/fio.json").decode())
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
