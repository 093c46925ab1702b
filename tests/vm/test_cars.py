"""CARS's behaviour on ssdsim: the die filter keeps reads away from dies
busy programming, the depth bound holds, and the accounting returns to
zero.

ssdsim runs write-through (write_buffer_kb=0), so a page is programmed
when its write is served and the host's prediction can see it; CARS is
given ssdsim's geometry and timing (8 dies, 4 KiB pages, time_scale 20:
read 1 ms + 0.2 ms transfer, program 10 ms + 0.2 ms)."""
from __future__ import annotations

import io
import re
from collections.abc import Iterator

import pytest

from bench import fio
from bench.calibrate import calibrate_cars
from bench.target import VMTarget
from conftest import Guest, load_ssdsim, timer_disk
from tracing import assert_driver_order, driver_order_trace, ftrace_record, reset_keeps_depth

SCHED = "cars"
DEV = "ssdsim0"
TIME_SCALE = 20
# ssdsim's defaults scaled: tR + transfer, tPROG + transfer, us
READ_US = (50 + 10) * TIME_SCALE
WRITE_US = (500 + 10) * TIME_SCALE
DIES = 8

MIXED = (f"--filename=/dev/{DEV} --direct=1 --bs=4k --ioengine=libaio --time_based "
         "--runtime={t} --size=64m --randrepeat=1 "
         "--name=a --rw=randrw --rwmixread=50 --iodepth=2 --numjobs=8 --group_reporting")


def _cars(guest: Guest) -> Iterator[Guest]:
    """ssdsim write-through at TIME_SCALE and cars-iosched loaded in
    @guest; ssdsim removed afterwards."""
    load_ssdsim(guest, time_scale=TIME_SCALE, write_buffer_kb=0)
    guest.load("cars-iosched")
    yield guest
    if not guest.dead:
        guest.select(DEV, "none")
        guest.sh("rmmod ssdsim")


@pytest.fixture
def cars(guest: Guest) -> Iterator[Guest]:
    yield from _cars(guest)


@pytest.fixture
def icount_cars(icount_guest: Guest) -> Iterator[Guest]:
    """cars's fixture in the VM whose clock counts instructions."""
    yield from _cars(icount_guest)


def _calibrate(g: Guest) -> None:
    """`bench calibrate cars`'s work (selects cars), checked against
    ssdsim's documented defaults."""
    back = calibrate_cars(VMTarget(g.vm), DEV, io.StringIO())
    assert back == {"nr_dies": str(DIES), "page_kb": "4", "read_us": str(READ_US),
                    "write_us": str(WRITE_US), "erase_us": str(3000 * TIME_SCALE),
                    "depth": str(DIES), "max_hold_us": str(WRITE_US), "cmt_regions": "0",
                    "write_pointer": str(_stat(g, "write_die"))}


def _stat(g: Guest, name: str) -> int:
    return int(g.sh(f"cat /sys/block/{DEV}/ssdsim/{name}"))


def _run_mixed(g: Guest, filt: int, seconds: int) -> tuple[float, int, int, dict[str, int]]:
    """Share of reads delayed behind a program, reads, IOPS, counters.

    CARS's write pointer is set from ssdsim's (write_die): the first run's
    writes moved ssdsim's, and CARS, selected afresh, starts at die 0."""
    _calibrate(g)
    g.set_attr(DEV, "filter", filt)
    d0, r0 = _stat(g, "reads_delayed"), _stat(g, "host_read_pages")
    res = g.fio(MIXED.format(t=seconds), timeout=300)
    delayed = _stat(g, "reads_delayed") - d0
    reads = _stat(g, "host_read_pages") - r0
    iops = int(fio.job_stats(res, "a").iops)
    counters = g.stats(DEV)
    g.sh("sleep 0.2")
    assert g.attr(DEV, "depth") == str(DIES)
    assert g.stat(DEV, "inflight") == "0"
    assert g.stat(DEV, "queued") == "0"
    g.select(DEV, "none")
    return delayed / max(reads, 1), reads, iops, counters


def test_sysfs_geometry_and_depth(cars: Guest) -> None:
    """page_kb takes powers of two only; nr_dies 1..255; a change keeps the
    other tunables; depth shows the bound in force."""
    g = cars
    g.select(DEV, SCHED)
    base = f"/sys/block/{DEV}/queue/iosched"
    for name, bad in (("page_kb", 3), ("page_kb", 128), ("nr_dies", 0), ("nr_dies", 256),
                      ("filter", 2), ("cmt_region_kb", 2)):
        before = g.attr(DEV, name)
        assert g.run(f"echo {bad} > {base}/{name}").rc != 0, (name, bad)
        assert g.attr(DEV, name) == before
    g.set_attr(DEV, "write_us", 1234)
    g.set_attr(DEV, "nr_dies", 16)
    g.set_attr(DEV, "page_kb", 16)
    assert g.attr(DEV, "write_us") == "1234"
    assert len(g.stat(DEV, "dies").splitlines()) == 16
    assert g.run(f"echo 16 > {base}/write_pointer").rc != 0
    g.set_attr(DEV, "write_pointer", 15)
    assert g.attr(DEV, "write_pointer") == "15"
    nr = int(g.sh(f"cat /sys/block/{DEV}/queue/nr_requests"))
    g.set_attr(DEV, "depth", nr)
    assert g.attr(DEV, "depth") == str(nr)
    assert g.run(f"echo {nr + 1} > {base}/depth").rc != 0
    g.select(DEV, "none")


def _join(trace: str) -> list[tuple[str, int, int, int]]:
    """(rwbs, first sector, predicted die, real die) per dispatched request,
    in order: cars_dispatch gives the prediction; ssdsim reports the die
    operations of a request (ssdsim_die_op, under its lock) just before
    that request's ssdsim_queue, on the same CPU."""
    pending: dict[int, list[int]] = {}
    real: dict[tuple[str, int], list[int]] = {}
    pred: list[tuple[str, int, int]] = []
    for ln in trace.splitlines():
        m = re.search(r"\[(\d+)\].*?(cars_dispatch|ssdsim_die_op|ssdsim_queue): (.*)", ln)
        if not m:
            continue
        cpu, ev, rest = int(m.group(1)), m.group(2), m.group(3)
        if ev == "ssdsim_die_op":
            op = re.search(r"op=(\w+)", rest)
            if op and op.group(1) in ("read", "program"):
                pending.setdefault(cpu, []).append(int(re.search(r"die=(\d+)", rest).group(1)))
            continue
        f = re.search(r"tag=-?\d+ (\w+) (\d+)\+\d+", rest)
        if not f:
            continue
        key = (f.group(1), int(f.group(2)))
        if ev == "ssdsim_queue":
            dies = pending.pop(cpu, [])
            if dies:
                real.setdefault(key, []).append(dies[0])
        else:
            pred.append((key[0], key[1], int(re.search(r" die=(\d+)", rest).group(1))))
    out = []
    for rwbs, sector, die in pred:
        got = real.get((rwbs, sector))
        if got:
            out.append((rwbs, sector, die, got.pop(0)))
    return out


def test_prediction_accuracy(cars: Guest) -> None:
    """cars_dispatch's predicted die against the die ssdsim used
    (ssdsim_die_op): at least 90% right for writes and for reads of pages
    written through cars in the same run, with 4 KiB random reads and
    writes over 4 MiB (so that reads find pages written before them).  The
    jobs submit from one CPU: requests dispatched from two CPUs' hardware
    queues can reach ssdsim in the other order, which moves ssdsim's write
    pointer against cars's; with the VM tiers and the debug tier sharing
    the host that cost 4-8 points (89.3% of reads of written pages right,
    7.3, one run), and from one CPU every prediction was right (7.3).  A
    count of I/Os, not a time, so that the counts asserted do not depend on
    the kernel's speed: 5 s gave 195 reads of written pages on the debug
    kernel alone, and the test failed on CI's debug tier beside the VM
    tiers (the message was cut from the log)."""
    g = cars
    _calibrate(g)
    t = "/sys/kernel/tracing/events/ssdsim"
    trace = ftrace_record(g, "cars", f"""
echo 1 > {t}/ssdsim_die_op/enable; echo 1 > {t}/ssdsim_queue/enable
fio --filename=/dev/{DEV} --direct=1 --bs=4k --ioengine=libaio --size=4m --number_ios=400 \\
    --name=a --rw=randrw --rwmixread=50 --iodepth=2 --numjobs=4 --cpus_allowed=0 >/dev/null
rc=$?
echo 0 > {t}/ssdsim_die_op/enable; echo 0 > {t}/ssdsim_queue/enable
exit $rc""")
    g.select(DEV, "none")
    rows = _join(trace)
    written: set[int] = set()
    score = {"W": [0, 0], "R written": [0, 0], "R never written": [0, 0]}
    for rwbs, sector, die, real in rows:
        kind = ("W" if "W" in rwbs else
                "R written" if sector // 8 in written else "R never written")
        score[kind][0] += die == real
        score[kind][1] += 1
        if kind == "W":
            written.add(sector // 8)
    for kind, (right, n) in score.items():
        print(f"{kind}: {right} of {n} predicted right ({right / max(n, 1):.1%})")
    assert score["W"][1] > 100 and score["R written"][1] > 100, score
    for kind in ("W", "R written"):
        right, n = score[kind]
        assert right >= 0.9 * n, (kind, right, n)


def test_driver_gets_requests_in_dispatch_order(cars: Guest) -> None:
    """blk-mq sorts a dispatch batch that holds requests of several hardware
    queues by queue; CARS ends a batch at a head of another queue
    (elevator/iosched-batch.h), so the requests reach ssdsim in the order
    CARS predicted their dies in: with 4 KiB random reads and writes from
    both CPUs (each its own hardware queue), in every dispatching context
    (pid and CPU) ssdsim's queue_rq (ssdsim_queue) saw them in cars_dispatch
    order, and batches did end for another queue's head.  Requests of two
    runs at once (one per CPU) can still reach ssdsim in either order,
    which the prediction test avoids by submitting from one CPU."""
    g = cars
    _calibrate(g)
    text = driver_order_trace(g, DEV, SCHED, (
        "--direct=1 --bs=4k --ioengine=libaio --size=4m --number_ios=300 --name=a "
        "--rw=randrw --rwmixread=50 --iodepth=4 --numjobs=4 --cpus_allowed=0,1 "
        "--cpus_allowed_policy=split"))
    ended = g.stats(DEV)["batch_ended"]
    g.select(DEV, "none")
    assert_driver_order(text, "cars_dispatch", ended)


@pytest.mark.debug_tier
def test_lookahead_verifies_and_ends_idle(cars: Guest) -> None:
    """With lookahead 8 (picks past a flow's oldest request, so a flow's
    requests leave out of order), four flows of random 4-32 KiB writes read
    back intact (crc32c), every request dispatched completes, and nothing
    is left in flight or queued."""
    g = cars
    _calibrate(g)
    g.set_attr(DEV, "lookahead", 8)
    res = g.fio(f"--filename=/dev/{DEV} --direct=1 --ioengine=io_uring --name=v "
                "--rw=randwrite --bsrange=4k-32k --iodepth=8 --numjobs=4 --size=4m "
                "--offset_increment=4m --verify=crc32c --verify_fatal=1 --do_verify=1 "
                "--randrepeat=0 --group_reporting", timeout=600)
    st = fio.job_stats(res, "v")
    assert st.error == 0
    assert st.io_bytes == 4 * 2 * (4 << 20), st  # written and read back
    g.assert_idle(DEV)
    c = g.stats(DEV)
    assert c["dispatched"] == c["completed"], c
    g.select(DEV, "none")


def test_tcp_reset_requeues_and_leaves_nothing_in_flight(
        guest: Guest, nvme_tcp: tuple[str, str]) -> None:
    """A reset of a loopback NVMe/TCP controller while CARS holds requests
    at depth 4 (a reset path other than nvme-pci's, which the generic
    suite resets: the requests in flight are requeued, not cancelled):
    the requests in flight come back through requeue_request (cars_requeue
    fires, each keeping its slot, kept=1: NVMe prepared them), fio sees no
    error, the driver never holds more than 4 until the elevator is
    re-initialised, and the new one serves I/O and is idle afterwards."""
    ctrl, dev = nvme_tcp
    guest.load("cars-iosched")
    dbg = Guest.sched_dbg(dev)
    requeues = reset_keeps_depth(guest, SCHED, ctrl, dev, "depth", 4, f"{dbg}/inflight",
                                 (f"{dbg}/queued",))
    assert requeues and all(e.fields["kept"] == 1 for e in requeues), requeues[:3]


def test_sequential_stream_merges(guest: Guest) -> None:
    """A sequential reader submitting one 4 KiB read per call (so the plug
    merges nothing) behind depth 1 on a disk that takes 50 ms a request
    (null_blk's timer, whatever the CPU does): its reads are queued while
    one is in flight, so they enter the elevator hash (cars_will_wait())
    and the next reads merge into them; the device sees at least 4 times
    fewer requests than fio issued, and CARS dispatched no more than the
    device saw."""
    g = guest
    g.load("cars-iosched")
    with timer_disk(g, 50_000_000) as dev:
        g.select(dev, SCHED)
        g.set_attr(dev, "depth", 1)
        before = g.stats(dev)
        reads0, merges0 = g.read_stat(dev)
        res = g.fio(f"--name=seq --filename=/dev/{dev} --direct=1 --ioengine=libaio "
                    "--rw=read --bs=4k --iodepth=16 --iodepth_batch_submit=1 --time_based "
                    "--runtime=3", timeout=120)
        ios = fio.job_stats(res, "seq").ios
        reads1, merges1 = g.read_stat(dev)
        after = g.stats(dev)
    reqs = reads1 - reads0
    sent = after["dispatched"] - before["dispatched"]
    print(f"fio {ios} reads, device {reqs} requests, {merges1 - merges0} merges; "
          f"cars dispatched {sent}")
    assert ios > 0 and merges1 > merges0
    assert ios >= 4 * reqs
    assert sent <= reqs + 16


# the probe's geometry: 8 dies (4 channels x 2), 16 KiB pages, write-through,
# ssdsim's default times at TIME_SCALE
PROBE_SSDSIM = {"time_scale": TIME_SCALE, "page_size": 16384, "write_buffer_kb": 0}


@pytest.mark.timing
@pytest.mark.first_kernel  # cars-core.h's filter; the dispatch side: the others, each kernel
def test_filter_keeps_reads_off_programming_dies(icount_cars: Guest) -> None:
    """The same mixed random read/write load (8 flows, 50% reads, iodepth 2
    each: 16 requests for a depth of 8) under cars with filter=0
    (round-robin, same depth and throttle) and filter=1: at least 30% fewer
    reads wait behind a program on their die (ssdsim's reads_delayed) with
    the filter.  In a VM whose clock counts instructions (icount_guest):
    cars holds a request back only while the requests queued outnumber the
    free slots, so what it holds depends on the jobs keeping their depth,
    and on plain TCG beside the other lane's VM the filter showed less
    (6.1: 27.0 % of reads delayed against 35.8 % without it, one CI run;
    20.3 against 52.2 on 6.12 on a quiet host)."""
    g = icount_cars
    off = _run_mixed(g, 0, 10)
    on = _run_mixed(g, 1, 10)
    for name, (share, reads, iops, c) in (("filter=0", off), ("filter=1", on)):
        print(f"{name}: {share:.1%} of {reads} reads delayed, {iops} IOPS, "
              f"skips {c['skip_die_busy']}, forced {c['forced']}, unheld {c['unheld']}, "
              f"map hits {c['map_hits']} misses {c['map_misses']}")
    assert off[3]["skip_die_busy"] == 0 and on[3]["skip_die_busy"] > 0
    assert off[1] > 100 and on[1] > 100
    assert on[0] <= 0.7 * off[0], f"delayed share {on[0]:.1%} vs {off[0]:.1%}"


def test_probe_finds_the_geometry(icount_guest: Guest) -> None:
    """`bench calibrate cars --probe` on ssdsim with 16 KiB pages, measured
    with fio as on a drive that publishes nothing: nr_dies ssdsim's dies
    (the striping period: static striping found), page_kb 16, read_us and
    write_us within 30 % of its scaled times (what `bench calibrate cars`
    reads from its sysfs), depth nr_dies, and cars left selected with
    those values.  In a VM of its own whose clock counts instructions
    (icount_guest): on plain TCG beside the other lane's VM the host's
    stalls idled the dies under the write run (sustained 517 and 622 IOPS
    where 8 dies of 10.2 ms programs serve 784), putting write_us 52 % and
    26 % high."""
    g = icount_guest
    load_ssdsim(g, **PROBE_SSDSIM)
    g.load("cars-iosched")
    try:
        out = io.StringIO()
        back = calibrate_cars(VMTarget(g.vm), DEV, out, probed=True)
        print(out.getvalue())
        assert back["nr_dies"] == str(DIES) and back["depth"] == str(DIES), back
        assert back["page_kb"] == "16", back
        assert abs(int(back["read_us"]) - READ_US) <= 0.3 * READ_US, back
        assert abs(int(back["write_us"]) - WRITE_US) <= 0.3 * WRITE_US, back
        assert f"striping period {DIES} pages; static striping (page mod dies) holds" \
            in out.getvalue()
        assert g.scheduler(DEV) == SCHED
    finally:
        if not g.dead:
            g.select(DEV, "none")
            g.sh("rmmod ssdsim")
