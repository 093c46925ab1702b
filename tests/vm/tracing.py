"""Recording a trace system's events in the guest: ftrace through tracefs,
or an LTTng kernel session (tracer and probes built by `make lttng-probes`)."""
from __future__ import annotations

import io
import re
import sys
import tarfile
from pathlib import Path
from typing import Any

import pytest

from bench import fio
from conftest import ROOT, Guest

sys.path.insert(0, str(ROOT))
from tracepoints import report  # noqa: E402
from tracepoints.report import Event  # noqa: E402

T = "/sys/kernel/tracing"


def ftrace_record(g: Guest, system: str | tuple[str, ...], script: str,
                  timeout: float = 300) -> str:
    """Run @script with every event of @system (or of each of several)
    enabled; the ftrace text.  The trace clock is CLOCK_MONOTONIC, the
    clock of the events' own ns fields (the default clock can run at
    another rate under emulation)."""
    systems = (system,) if isinstance(system, str) else system
    on = "\n".join(f"echo 1 > {T}/events/{s}/enable || exit 3" for s in systems)
    off = "\n".join(f"echo 0 > {T}/events/{s}/enable" for s in systems)
    r = g.run(f"""
echo 0 > {T}/tracing_on
echo > {T}/trace
echo 16384 > {T}/buffer_size_kb
echo mono > {T}/trace_clock
{on}
echo 1 > {T}/tracing_on
{script}
rc=$?
echo 0 > {T}/tracing_on
{off}
exit $rc
""", timeout=timeout)
    assert r.rc == 0, r.out
    return g.vm.read_file(f"{T}/trace", compress=True).decode(errors="replace")


#: an elevator's dispatch event or ssdsim_queue in an ftrace text: the
#: context (pid, CPU), the request's op and first sector
_ISSUE = re.compile(r"-(?P<pid>\d+)\s+\[(?P<cpu>\d+)\]\s+\S+\s+[\d.]+: "
                    r"(?P<ev>\w+_dispatch|ssdsim_queue): \S+ hctx=\d+ tag=\d+ "
                    r"(?P<rwbs>[A-Z]+) (?P<sector>\d+)\+")


def driver_order_trace(g: Guest, dev: str, system: str, fio_args: str) -> str:
    """fio with @fio_args on ssdsim @dev, recording @system's events and
    ssdsim_queue (ftrace); the text.  Skips the test when @dev has one
    hardware queue (one CPU): no batch can mix queues."""
    if int(g.sh(f"ls /sys/block/{dev}/mq | wc -l")) < 2:
        pytest.skip(f"{dev} has one hardware queue here (one CPU)")
    return ftrace_record(g, (system, "ssdsim/ssdsim_queue"),
                         f"fio --filename=/dev/{dev} {fio_args} >/dev/null", timeout=180)


def assert_driver_order(text: str, dispatch: str, batches_ended: int) -> None:
    """In an ftrace text with the elevator's @dispatch event and
    ssdsim_queue (driver_order_trace()): in every dispatching context (pid
    and CPU: a request handed out is issued to the driver in the same
    context) the requests reached ssdsim's queue_rq in the order the
    elevator handed them out.  Requests that did not reach it there (the
    driver asked for a retry) are left out.  Also asserts that reads and
    writes took part, that over 100 requests were compared and that the
    elevator ended dispatch batches for another queue's request
    (@batches_ended, its counter), so that the run tested the rule
    (elevator/iosched-batch.h)."""
    issued: dict[tuple[str, str], dict[str, list[tuple[str, int]]]] = {}
    for m in _ISSUE.finditer(text):
        if m["ev"] not in (dispatch, "ssdsim_queue"):
            continue
        ctx = issued.setdefault((m["pid"], m["cpu"]), {dispatch: [], "ssdsim_queue": []})
        ctx[m["ev"]].append((m["rwbs"][0], int(m["sector"])))
    ops = {op for c in issued.values() for op, _ in c[dispatch]}
    assert ops == {"R", "W"}, ops
    compared = 0
    for where, c in issued.items():
        queued = set(c["ssdsim_queue"])
        sent = [k for k in c[dispatch] if k in queued]
        assert c["ssdsim_queue"] == sent, (where, next(
            (i, a, b) for i, (a, b) in enumerate(zip(c["ssdsim_queue"], sent)) if a != b))
        compared += len(sent)
    print(f"{compared} requests compared in {len(issued)} contexts; "
          f"batches ended {batches_ended}")
    assert compared > 100
    assert batches_ended > 0


def lttng_built(g: Guest, system: str) -> bool:
    return g.run(f"test -e /lib/modules/$(uname -r)/extra/lttng-probe-{system}.ko").rc == 0


def lttng_record(g: Guest, system: str, script: str, out: Path, timeout: float = 300) -> Path:
    """Run @script in an LTTng kernel session recording every {system}_*
    event (one 8 MiB channel); the CTF trace, copied into @out."""
    if not lttng_built(g, system):
        raise AssertionError("the LTTng modules were not built: make lttng-probes KVER="
                             + g.kernel)
    r = g.run(f"""
export HOME=/root
modprobe lttng-probe-{system} || exit 2
pidof lttng-sessiond >/dev/null || lttng-sessiond --daemonize --kmod-probes={system} \
    >/tmp/sessiond.log 2>&1 || {{ cat /tmp/sessiond.log; exit 3; }}
rm -rf /tmp/lttng-trace /tmp/lttng-trace.tar
lttng create {system}test --output=/tmp/lttng-trace >/dev/null || exit 4
lttng enable-channel -k --subbuf-size=1M --num-subbuf=8 big >/dev/null || exit 5
lttng enable-event -k -c big '{system}_*' >/dev/null || exit 6
lttng start >/dev/null || exit 7
{script}
rc=$?
lttng stop >/dev/null || exit 9
lttng destroy >/dev/null || exit 10
[ $rc -eq 0 ] || exit 8
cd /tmp && tar -cf /tmp/lttng-trace.tar lttng-trace
""", timeout=timeout)
    assert r.rc == 0, r.out
    with tarfile.open(fileobj=io.BytesIO(g.vm.read_file("/tmp/lttng-trace.tar", compress=True))) as tf:
        tf.extractall(out)  # noqa: S202 (our own VM's trace)
    return out / "lttng-trace"


# reset_when_held()'s default load: random reads and writes, 2 jobs at
# iodepth 8, for 4 s.
RESET_LOAD = ("--rw=randrw --bs=4k --iodepth=8 --numjobs=2 --group_reporting "
              "--time_based --runtime=4")


def reset_when_held(g: Guest, system: str, ctrl: str, dev: str, inflight: str,
                    held: int, load: str = RESET_LOAD, limit: str = "",
                    ) -> tuple[list[Event], dict[str, Any], list[int]]:
    """fio job "r" with @load (fio arguments) on @dev with the
    events of @system recorded; once the file @inflight (the scheduler's own
    in-flight count) reaches @held, reset controller @ctrl.  The
    {system}_requeue events (none lost), fio's result, checked error-free,
    and the requests in the driver (/sys/block/@dev/inflight, reads plus
    writes) sampled every 20 ms from the reset until fio ends; with @limit
    (a file) only the samples taken while it read as it did before the
    reset (the reset re-initialises the elevator, with default tunables,
    once the queue has drained).  The reset
    lasts until every request fio has out completes (the queue is frozen to
    remap it), one NVMET_DELAY_MS for each @held of them: the shallow depth
    keeps that short."""
    args = f"--name=r --filename=/dev/{dev} --direct=1 --ioengine=libaio {load}"
    limit = limit or "/dev/null"
    text = ftrace_record(g, system, f"""
fio --output-format=json --output=/tmp/fio.json {args} &
pid=$!
# reset only once requests are held at the bound (fio may start slowly)
i=0
until [ "$(cat {inflight})" -ge {held} ]; do
    i=$((i + 1)); [ $i -le 200 ] || {{ echo "never {held} requests in flight"; exit 4; }}
    sleep 0.05
done
sleep 0.2
held=$(cat {inflight}); t0=$(cut -d' ' -f1 /proc/uptime)
limit=$(cat {limit})
while kill -0 $pid 2>/dev/null; do
    a=$(cat {limit} 2>/dev/null); n=$(cat /sys/block/{dev}/inflight 2>/dev/null)
    b=$(cat {limit} 2>/dev/null)
    [ "$a" = "$limit" ] && [ "$b" = "$limit" ] && [ -n "$n" ] && echo $n
    sleep 0.02
done > /tmp/dev_inflight &
echo 1 > /sys/class/nvme/{ctrl}/reset_controller || exit 3
awk -v n="$held" -v t0="$t0" '{{printf "%d requests in flight just before the reset, which took %d ms\\n", n, ($1 - t0) * 1000}}' \
    /proc/uptime > /tmp/reset.txt
wait $pid
st=$?
wait  # the sampler
[ $st -eq 0 ]
""", timeout=180)
    res = fio.parse(g.vm.read_file("/tmp/fio.json").decode())
    dev_inflight = [sum(int(f) for f in ln.split())
                    for ln in g.sh("cat /tmp/dev_inflight").splitlines() if ln.strip()]
    assert fio.job_stats(res, "r").error == 0
    trace = report.read_ftrace(text, system)
    assert trace.lost == 0
    requeues = [e for e in trace.events if e.name == f"{system}_requeue"]
    info = g.sh("cat /tmp/reset.txt").strip()
    print(f"{ctrl} reset: {len(requeues)} requests requeued, "
          f"{fio.job_stats(res, 'r').ios} I/Os by fio; {info}; at most "
          f"{max(dev_inflight, default=0)} in the driver over {len(dev_inflight)} "
          "samples from the reset on")
    assert requeues, f"the reset requeued nothing: the path was not exercised ({info})"
    return requeues, res, dev_inflight


def reset_keeps_depth(g: Guest, sched: str, ctrl: str, dev: str, depth_attr: str,
                      depth: int, inflight: str, idle: tuple[str, ...] = (),
                      load: str = RESET_LOAD) -> list[Event]:
    """The reset test of a scheduler that holds requests back (@sched
    selected on NVMe/TCP disk @dev of controller @ctrl): its tunable
    @depth_attr at @depth, reset_when_held() once @inflight (its own
    in-flight count, a file) reads @depth.  Asserted: every
    {sched}_requeue's inflight within @depth, the driver never holding
    more than @depth until the reset re-initialises the elevator, the same
    elevator in place after, serving I/O, and @inflight and the files
    @idle reading 0 once that I/O is done.  The requeue events."""
    g.select(dev, sched)
    try:
        g.set_attr(dev, depth_attr, depth)
        requeues, _, dev_inflight = reset_when_held(
            g, sched, ctrl, dev, inflight, depth, load=load,
            limit=f"/sys/block/{dev}/queue/iosched/{depth_attr}")
        assert all(0 <= int(e.fields["inflight"]) <= depth for e in requeues)
        assert dev_inflight, "no sample of the driver's in-flight count before re-init"
        assert max(dev_inflight) <= depth, (
            f"{max(dev_inflight)} requests in the driver after the reset, {depth_attr} {depth}")
        assert g.scheduler(dev) == sched
        g.set_attr(dev, depth_attr, depth)
        after = g.fio(f"--name=after --filename=/dev/{dev} --direct=1 --ioengine=libaio "
                      "--rw=randread --bs=4k --iodepth=16 --time_based --runtime=3", timeout=60)
        assert fio.job_stats(after, "after").ios > 0
        g.sh("sleep 0.3")
        for f in (inflight, *idle):
            assert g.sh(f"cat {f}").strip() == "0", f
    finally:
        g.select(dev, "none")
    return requeues
