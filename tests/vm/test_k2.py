"""K2's behaviour: the in-flight bound, strict real-time priority, tail latency.

Priority and latency are measured on the throttled NVMe device, where
requests really wait inside the device; ratios come from one VM run."""
from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from bench import fio
from adaptive_target import ADAPTIVE_TIME_SCALE
from conftest import Guest, need_modules, ssdsim, timer_disk
from tracing import assert_driver_order, driver_order_trace, reset_keeps_depth

FAST = "nvme0n1"


@pytest.fixture
def k2(guest: Guest) -> Iterator[Guest]:
    guest.load("k2-iosched")
    yield guest
    if not guest.dead:
        for dev in (FAST, guest.throttled):
            guest.select(dev, "none")


SAMPLES = 100


def _saturating_reads(dev: str) -> str:
    """fio's arguments for job "sat": two jobs of 4 KiB random reads at
    iodepth 32 on /dev/@dev, more than any bound the tests set."""
    return (f"--name=sat --filename=/dev/{dev} --direct=1 --ioengine=io_uring "
            "--rw=randread --bs=4k --iodepth=32 --numjobs=2 --group_reporting")


def test_bound_never_exceeded_and_reached(k2: Guest) -> None:
    """With max_inflight=4 under a saturating load, K2's count and the block
    layer's count of requests in the driver never exceed 4, reach it, and
    return to 0 when idle."""
    g = k2
    dev = g.throttled
    g.select(dev, "k2")
    g.set_attr(dev, "max_inflight", 4)
    script_args = _saturating_reads(dev)
    # 100 samples, however long they take: 3 s here, 110 s on the debug
    # kernel beside the VM tiers; a time-based run got 39 in 4 s on CI's
    # 7.3 beside the debug tier.  fio runs until they are in.
    r = g.run(f"""
fio --output-format=json --output=/tmp/fio.json {script_args} --time_based --runtime=600 &
pid=$!
: > /tmp/samples
n=0
while [ $n -lt {SAMPLES} ] && kill -0 $pid 2>/dev/null; do
	# builtins only: a fork per sample was most of this test's 224 s on
	# the debug kernel beside the VM tiers
	read -r k < /sys/block/{dev}/queue/iosched/inflight
	read -r r w < /sys/block/{dev}/inflight
	echo "$k $r $w" >> /tmp/samples
	n=$((n + 1))
	sleep 0.01
done
kill -0 $pid || exit 3
kill -INT $pid
wait $pid  # 128: fio interrupted
true
""", timeout=300)
    assert r.rc == 0, r.out
    rows = [list(map(int, ln.split())) for ln in g.sh("cat /tmp/samples").splitlines()
            if len(ln.split()) == 3]
    assert len(rows) == SAMPLES, rows
    k2_counts = [row[0] for row in rows]
    dev_counts = [row[1] + row[2] for row in rows]
    print(f"{len(rows)} samples: k2 inflight max {max(k2_counts)}, "
          f"device inflight max {max(dev_counts)}")
    assert max(k2_counts) <= 4
    # The block layer counts its in-flight requests by walking the tags,
    # not in one snapshot: a request that completes early in the walk and
    # one that K2 then dispatches, counted later in it, can both be seen
    # (5 was seen once in 6.1, in one sample).  It backs K2's own count,
    # which is exact: nearly every walk is within the bound.
    over = [c for c in dev_counts if c > 4]
    assert len(over) <= 0.01 * len(dev_counts), over
    assert max(k2_counts) == 4, "a saturating load never reached the bound"
    g.sh("sleep 0.3")
    assert g.attr(dev, "inflight") == "0"
    assert g.sh(f"cat /sys/block/{dev}/inflight").split() == ["0", "0"]


# A device slower than K2's stall check (5 s): each request takes 6 s.
SLOW_NS = 6_000_000_000
# test_lowering_bound_takes_effect's device: 100 ms a request, 320 IOPS at 32
LOWER_NS = 100_000_000


def _recovered_stalls(g: Guest, dev: str) -> int:
    return g.stats(dev, "recovery_causes")["stall"]


def test_slow_device_keeps_the_bound(k2: Guest) -> None:
    """A healthy device slower than K2's stall check: null_blk in timer
    mode completes each request after 6 s, K2's bound is 1 and fio keeps 2
    reads queued.  When nothing has completed for 5 s, K2 looks for the
    requests that hold its slots, finds the one in the device, and gives
    nothing back: the driver never holds more than 1, and no recovery is
    counted.  (Before, each such check reset the count and let another
    request out.)"""
    g = k2
    with timer_disk(g, SLOW_NS) as dev:
        g.sh(f"echo 60000 > /sys/block/{dev}/queue/io_timeout")  # null_blk's own: 5 s
        g.select(dev, "k2")
        g.set_attr(dev, "max_inflight", 1)
        r = g.run(f"""
fio --output-format=json --output=/tmp/fio.json --name=slow --filename=/dev/{dev} \
    --direct=1 --ioengine=libaio --rw=randread --bs=4k --iodepth=2 \
    --time_based --runtime=12 &
pid=$!
while kill -0 $pid 2>/dev/null; do
    read -r k < /sys/block/{dev}/queue/iosched/inflight
    read -r r w < /sys/block/{dev}/inflight
    echo "$k $r $w"
    sleep 0.2
done > /tmp/samples
wait $pid
""", timeout=120)
        assert r.rc == 0, r.out
        st = fio.job_stats(fio.parse(g.vm.read_file("/tmp/fio.json").decode()), "slow")
        rows = [[int(x) for x in ln.split()] for ln in g.sh("cat /tmp/samples").splitlines()
                if len(ln.split()) == 3]
        k2_max = max(row[0] for row in rows)
        dev_max = max(row[1] + row[2] for row in rows)
        print(f"{len(rows)} samples: k2 inflight max {k2_max}, device inflight max "
              f"{dev_max}; {st.ios} reads; {_recovered_stalls(g, dev)} recovered")
        assert st.error == 0 and st.ios >= 2
        assert dev_max == 1 and k2_max == 1
        assert _recovered_stalls(g, dev) == 0
        checks = int(g.stat(dev, "stall_checks"))
        print(f"{checks} stall checks")
        assert checks >= 1, "K2 never waited 5 s at the bound: the case was not exercised"
        assert g.attr(dev, "inflight") == "0"


@pytest.mark.debug_tier
def test_lost_slots_are_given_back(k2: Guest) -> None:
    """Slots that no request holds (debugfs lose_slots counts 2 of them, as
    an accounting bug would leave them) at max_inflight=2 stop dispatch;
    once nothing has happened for 5 s K2 finds no request holding them,
    gives both back with a warning, and reads flow again.  Junk written to
    lose_slots is refused and changes nothing."""
    g = k2
    dbg = Guest.sched_dbg(FAST)
    g.select(FAST, "k2")
    g.set_attr(FAST, "max_inflight", 2)
    for junk in ("0", "-1", "abc", "1001"):
        assert g.run(f"echo {junk} > {dbg}/lose_slots").rc != 0, junk
    assert g.attr(FAST, "inflight") == "0"
    g.sh(f"echo 2 > {dbg}/lose_slots")
    assert g.attr(FAST, "inflight") == "2"
    assert g.sh(f"cat {dbg}/lose_slots").strip() == "2"
    st = fio.job_stats(g.fio(f"--name=lost --filename=/dev/{FAST} --direct=1 "
                             "--ioengine=libaio --rw=randread --bs=4k --iodepth=4 "
                             "--time_based --runtime=10", timeout=120), "lost")
    print(f"{st.ios} reads; recovered {_recovered_stalls(g, FAST)}")
    assert st.error == 0 and st.ios > 100
    assert _recovered_stalls(g, FAST) == 1
    g.sh("sleep 0.3")
    assert g.attr(FAST, "inflight") == "0"
    assert "2 of 2 requests counted in flight no longer exist" in g.sh("dmesg")


def test_lowering_bound_takes_effect(k2: Guest) -> None:
    """Lowering max_inflight from 32 to 2 during I/O: once the requests above
    the new bound complete, the count stays within 2.  On null_blk whose
    timer completes each request 100 ms after issue (timer_disk()), so that
    the device, not the guest's CPU, holds the requests: on the throttled
    NVMe drive (250 IOPS) the debug kernel's fio, beside the VM tiers in
    CI, issued too few to keep more than 2 in flight, twice."""
    g = k2
    with timer_disk(g, LOWER_NS) as dev:
        g.select(dev, "k2")
        g.set_attr(dev, "max_inflight", 32)
        args = _saturating_reads(dev)
        # wait for the load to fill the device, for as long as fio runs
        # (the debug kernel's fio took over 2 s to start once); fio's
        # runtime counts from its first I/O, so 5 s of it are left after
        r = g.run(f"""
fio --output-format=json --output=/tmp/fio.json {args} --time_based --runtime=5 &
pid=$!
while [ "$(cat /sys/block/{dev}/queue/iosched/inflight)" -le 2 ] && kill -0 $pid 2>/dev/null; do
	sleep 0.1
done
high=$(cat /sys/block/{dev}/queue/iosched/inflight)
echo 2 > /sys/block/{dev}/queue/iosched/max_inflight || exit 3
sleep 0.5
: > /tmp/samples
while kill -0 $pid 2>/dev/null; do
	cat /sys/block/{dev}/queue/iosched/inflight >> /tmp/samples
	sleep 0.01
done
wait $pid || exit 4
echo high=$high
""", timeout=120)
        assert r.rc == 0, r.out
        high = int(re.search(r"high=(\d+)", r.out).group(1))  # type: ignore[union-attr]
        after = [int(x) for x in g.sh("cat /tmp/samples").split()]
    print(f"before lowering: {high} in flight; after: max {max(after)} over {len(after)} samples")
    assert high > 2, "the load did not fill the device before the bound was lowered"
    assert after and max(after) <= 2


# Jobs whose class matters use libaio: it submits in the job's own thread,
# whose I/O priority the requests then carry.  io_uring hands a request it
# cannot issue at once to a worker thread, which submits it with the
# worker's priority (seen: 4 of 819 RT requests arrived as best effort).
def _two_readers(g: Guest, dev: str, a: str, b: str, seconds: int = 5) -> tuple[float, float]:
    args = (f"--filename=/dev/{dev} --direct=1 --ioengine=libaio --rw=randread --bs=4k "
            f"--iodepth=16 --time_based --runtime={seconds} "
            f"--name=a {a} --name=b {b}")
    res = g.fio(args, timeout=seconds + 120)
    return fio.job_stats(res, "a").iops, fio.job_stats(res, "b").iops


@pytest.mark.timing
def test_starvation_ms_serves_best_effort(k2: Guest) -> None:
    """With starvation_ms=20 the best-effort reader is no longer starved
    (at least 20 IOPS of the throttled drive's 250), and the real-time one
    still gets at least twice as much."""
    g = k2
    dev = g.throttled
    g.select(dev, "k2")
    g.set_attr(dev, "max_inflight", 1)
    g.set_attr(dev, "starvation_ms", 20)
    try:
        hi, lo = _two_readers(g, dev, "--prioclass=1 --prio=0", "--prioclass=2 --prio=0")
    finally:
        g.set_attr(dev, "starvation_ms", 0)
    print(f"starvation_ms=20: RT0 {hi:.1f} IOPS, BE {lo:.1f} IOPS")
    # a promotion at most every 20 ms: about 50 IOPS, far from starved,
    # and real time still first: at least twice best effort's (6.1: RT0
    # 205, BE 52)
    assert lo >= 20, f"best effort got {lo:.1f} IOPS"
    assert hi >= 2 * lo, f"RT0 {hi:.1f} IOPS, best effort {lo:.1f}"


RT_LATENCY_JOBS = (
    "--filename=/dev/{dev} --direct=1 --bs=4k --rw=randread --time_based --runtime={t} "
    "--percentile_list=50:99:99.9 "
    "--name=rt --ioengine=psync --iodepth=1 --thinktime=2000 --prioclass=1 --prio=0 "
    "--name=be --ioengine=libaio --iodepth=32 --numjobs=3 --prioclass=2 --prio=4"
)


@contextmanager
def k2_on_ssdsim(g: Guest) -> Iterator[str]:
    """ssdsim at ADAPTIVE_TIME_SCALE, whose dies queue requests as the
    throttled drive does, on the guest's clock, with k2-iosched loaded;
    its scheduler none again before ssdsim goes."""
    need_modules(g, "k2-iosched", "ssdsim")
    g.load("k2-iosched")
    with ssdsim(g, ADAPTIVE_TIME_SCALE) as dev:
        yield dev
        g.select(dev, "none")


def test_driver_gets_requests_in_dispatch_order(k2: Guest) -> None:
    """blk-mq sorts a dispatch batch that holds requests of several hardware
    queues by queue; K2 ends a batch at a request of another queue
    (elevator/iosched-batch.h), so real-time requests reach the device ahead
    of the best-effort ones K2 handed out after them.  A real-time 4 KiB
    reader on CPU 0 beside a best-effort writer on CPU 1 (each CPU its own
    hardware queue), both submitting in batches, on ssdsim at max_inflight
    8: in every dispatching context (pid and CPU) the requests reached
    ssdsim's queue_rq (ssdsim_queue) in k2_dispatch order, and batches did
    end for another queue's request.  Without the rule the order broke in
    this run (with one real-time request at a time and a bound of 4, two
    batches in 1000 requests mixed queues, and none was reordered)."""
    g = k2
    with k2_on_ssdsim(g) as dev:
        g.select(dev, "k2")
        g.set_attr(dev, "max_inflight", 8)
        text = driver_order_trace(g, dev, "k2", (
            "--direct=1 --bs=4k --time_based --runtime=3 --size=32M --ioengine=libaio "
            "--name=rt --rw=randread --iodepth=4 --iodepth_batch_submit=4 "
            "--prioclass=1 --prio=0 --cpus_allowed=0 "
            "--name=be --rw=randwrite --iodepth=16 --iodepth_batch_submit=8 "
            "--prioclass=2 --prio=4 --cpus_allowed=1 --offset=32M"))
        ended = int(g.stat(dev, "batch_ended"))
    assert_driver_order(text, "k2_dispatch", ended)


@pytest.mark.timing
@pytest.mark.parametrize("hi_name,hi_prio,lo_name,lo_prio", [
    # the public K2 code put all eight RT levels in one queue
    ("RT0", "--prioclass=1 --prio=0", "RT7", "--prioclass=1 --prio=7"),
    ("RT7", "--prioclass=1 --prio=7", "BE0", "--prioclass=2 --prio=0"),
], ids=["rt0-over-rt7", "rt7-over-be0"])
def test_strict_priority(icount_guest: Guest, hi_name: str, hi_prio: str, lo_name: str,
                         lo_prio: str) -> None:
    """max_inflight=1: a reader of the higher class or level gets at least
    10x the IOPS of one of the lower, both at iodepth 16, on ssdsim.  The
    lower one is served only when the higher has nothing queued.  In a VM
    whose clock counts instructions (icount_guest): on the throttled NVMe
    drive under plain TCG a host that did not run the higher reader's
    vCPU while its 16 requests drained let the lower one in (7.3: RT7
    231.6 IOPS, BE0 26.1 in one CI run; 252.8 and 5.5 on its rerun)."""
    g = icount_guest
    with k2_on_ssdsim(g) as dev:
        g.select(dev, "k2")
        g.set_attr(dev, "max_inflight", 1)
        hi, lo = _two_readers(g, dev, hi_prio, lo_prio)
    print(f"{hi_name} {hi:.1f} IOPS, {lo_name} {lo:.1f} IOPS")
    assert hi > 0 and hi >= 10 * lo


@pytest.mark.timing
@pytest.mark.first_kernel  # k2-core.h's bound; strict priority and the bound: each kernel
def test_rt_tail_latency_ratio(icount_guest: Guest) -> None:
    """The seed's set-up, shortened: one synchronous RT 4 KiB random reader
    with 2 ms think time beside three best-effort readers at iodepth 32.  The
    RT reader's p99.9 latency under k2 (max_inflight=1) is at least 3x lower
    than under none, in the same run.

    In a VM of its own whose clock counts instructions (icount_guest), on
    ssdsim, whose dies queue requests as the throttled drive does, on the
    guest's clock.  On the throttled NVMe drive under plain TCG the host was
    in the figures: in CI on 6.12 (2026-11-29) k2's p99.9 came out at 354.4
    ms, where 15 ms is usual (a host stall in one of its few slowest reads),
    and none's 392.2 ms was then not 3x it.  On ssdsim at time_scale 50 the
    k2 suite measured 165.3 ms under none and 6.5 ms at bound 1."""
    with k2_on_ssdsim(icount_guest) as dev:
        _rt_tail_latency_ratio(icount_guest, dev)


def _rt_tail_latency_ratio(g: Guest, dev: str) -> None:
    p999 = {}
    for sched in ("none", "k2"):
        g.select(dev, sched)
        if sched == "k2":
            g.set_attr(dev, "max_inflight", 1)
        res = g.fio(RT_LATENCY_JOBS.format(dev=dev, t=6), timeout=300)
        rt = fio.job_stats(res, "rt")
        p999[sched] = fio.percentile(rt, 99.9)
        print(f"{sched}: RT p50 {fio.percentile(rt, 50) / 1000:.2f} ms, "
              f"p99 {fio.percentile(rt, 99) / 1000:.2f} ms, "
              f"p99.9 {p999[sched] / 1000:.2f} ms over {rt.ios} reads")
        assert rt.ios >= 100
    print(f"ratio none/k2 = {p999['none'] / p999['k2']:.1f}")
    assert p999["none"] >= 3 * p999["k2"]


# The real-time reader of RT_LATENCY_JOBS beside best-effort readers that
# hold more requests than the throttled device's scheduler tags (256 per
# hardware queue, 2 hardware queues): 4 x 256.
RT_TAG_FLOOD_JOBS = (
    "--filename=/dev/{dev} --direct=1 --bs=4k --rw=randread --time_based --runtime={t} "
    "--percentile_list=50:99:99.9 "
    "--name=rt --ioengine=psync --iodepth=1 --thinktime=2000 --prioclass=1 --prio=0 "
    "--name=be --ioengine=libaio --iodepth=256 --numjobs=4 --prioclass=2 --prio=4"
)


# A request on the tag-flood test's disk takes what one does on the
# throttled drive (250 IOPS), on the guest's clock
TAG_FLOOD_NS = 4_000_000


@pytest.mark.timing
def test_rt_keeps_tags_under_best_effort_flood(icount_guest: Guest) -> None:
    """At max_inflight=1, a synchronous RT reader (2 ms think time) beside
    best-effort readers that want more requests than there are scheduler
    tags (4 at iodepth 256): with rt_tags (a quarter of the tags kept for
    real-time submitters, the default) its p99 latency stays within 2x
    of its p99 beside 3 best-effort readers at iodepth 32, which leave
    tags free.  With rt_tags=0 (everything shared, K2 before rt_tags) the
    best-effort readers take every tag and the RT reader sleeps in tag
    allocation behind them: at least 3x worse, same boot (15-50x
    measured).  The p99.9 is printed, not compared: from the 1100-1400
    reads of a run it is the second largest.

    In a VM of its own whose clock counts instructions (icount_guest), on
    a null_blk disk that completes each request 4 ms after it was issued
    (the throttled drive's pace, on the guest's clock; hw_queue_depth 128
    gives the block layer's usual 256 scheduler tags).  On the throttled
    drive under plain TCG the host was in the figures: in CI on 6.1 the
    light load's p99 came out at 69.7 ms, where 14.5-16.3 ms is usual, and
    the flood without rt_tags at 2.4x it."""
    g = icount_guest
    need_modules(g, "k2-iosched")
    g.load("k2-iosched")
    with timer_disk(g, TAG_FLOOD_NS, "hw_queue_depth=128") as dev:
        g.select(dev, "k2")
        _rt_keeps_tags(g, dev)


def _rt_keeps_tags(g: Guest, dev: str) -> None:
    g.set_attr(dev, "max_inflight", 1)
    nr = int(g.sh(f"cat /sys/block/{dev}/queue/nr_requests"))
    assert g.attr(dev, "rt_tags") == str(nr // 4)
    p99 = {}
    for case, jobs, rt_tags in (("light", RT_LATENCY_JOBS, nr // 4),
                                ("flood", RT_TAG_FLOOD_JOBS, nr // 4),
                                ("flood, rt_tags=0", RT_TAG_FLOOD_JOBS, 0)):
        g.set_attr(dev, "rt_tags", rt_tags)
        res = g.fio(jobs.format(dev=dev, t=8), timeout=300)
        rt = fio.job_stats(res, "rt")
        p99[case] = fio.percentile(rt, 99)
        print(f"{case}: RT p50 {fio.percentile(rt, 50) / 1000:.2f} ms, "
              f"p99 {p99[case] / 1000:.2f} ms, "
              f"p99.9 {fio.percentile(rt, 99.9) / 1000:.2f} ms over {rt.ios} reads; "
              f"best effort {fio.total_ios(res, 'be', ('read',))} reads")
        assert rt.ios >= 100
    print(f"nr_requests {nr}; p99 flood/light = {p99['flood'] / p99['light']:.2f}, "
          f"without rt_tags {p99['flood, rt_tags=0'] / p99['light']:.2f}")
    assert p99["flood"] <= 2 * p99["light"]
    assert p99["flood, rt_tags=0"] >= 3 * p99["light"]


@pytest.mark.timing
def test_adaptive_bound_meets_a_target_between_bound_1_and_32(icount_guest: Guest) -> None:
    """target_latency_us: the seed's set-up (RT_LATENCY_JOBS) on ssdsim,
    where a request waits behind those ahead of it on its die.  With a
    target between the RT p99.9 of k2 at bound 1 and at 32 (their geometric
    mean, same boot), the adaptive bound settles between them: over a run
    from bound 1 the RT p99 K2 measures (debugfs adapt_latency: allocation
    to completion) is at most the target, the top of the controller's band,
    the p99.9 fio measures is below bound 32's, and best effort gets at
    least BE_GAIN times what it gets at bound 1.  Then, settled, the same
    load again: fio's own RT p99.9 is at most the target (SETTLED_S).
    When only best effort is left, the bound in force goes to
    max_inflight; when RT returns, it goes back to the controller's bound
    at once.

    In a VM of its own whose clock counts instructions (icount_guest): on
    the throttled NVMe drive under plain TCG, the host's stalls and the
    debug tier's VM beside this one were in every latency (CI on 6.1:
    bound 1's p99.9 69.7 ms, where 7 ms is usual, and bound 32's not twice
    it; here with two busy loops beside: 116.9 ms).

    The best-effort readers start 0.5 s after the RT reader: were they
    first, more than K2_ADAPT_IDLE_MS after the target was set (fio's
    start-up under TCG can take that long), K2 would see best effort alone,
    go idle and let 32 of their requests into the device, and the RT
    reader's first read would wait behind them.  That is the return after
    an idle spell, which the end of the test covers; the run from bound 1
    asserts that it had none."""
    with k2_on_ssdsim(icount_guest) as dev:
        _adaptive_bound(icount_guest, dev)


# The settled run: fio's RT p99.9 is at most the target when no more of
# its reads lie above the target than chance puts above a true p99.9 with
# probability 1 % (fio.tail_allowance: 7 of about 2700 reads).  Its
# sample p99.9, the second largest of the 1300 a 10 s run gives, is not
# that test: the controller holds the highest bound its estimate puts at
# or below the target, and the sample landed at 0.86-1.05 of the target
# over nine runs (above it twice).  20 s: where 1 in 200 reads lay above
# the target (13.5 expected) this fails 97 times in 100.
SETTLED_S = 20

# how much more best effort gets under the adaptive bound than at bound 1,
# at the least (measured: 7.2x on 6.1, 7.9x on 6.12)
BE_GAIN = 3.0


def _adaptive_bound(g: Guest, dev: str) -> None:
    g.select(dev, "k2")
    p999, be = {}, {}

    def run(case: str, seconds: int) -> fio.JobStats:
        res = g.fio(RT_LATENCY_JOBS.format(dev=dev, t=seconds) + " --startdelay=500ms",
                    timeout=300, output="json+")
        rt = fio.job_stats(res, "rt")
        p999[case] = fio.percentile(rt, 99.9)
        be[case] = fio.job_stats(res, "be").ios / seconds
        print(f"{case}: RT p99.9 {p999[case] / 1000:.2f} ms over {rt.ios} reads, "
              f"best effort {be[case]:.0f} IOPS")
        return rt

    for bound in (1, 32):
        g.set_attr(dev, "max_inflight", bound)
        run(f"bound {bound}", 10)
    assert p999["bound 32"] > 2 * p999["bound 1"], p999
    target = int((p999["bound 1"] * p999["bound 32"]) ** 0.5)  # us, as fio's
    g.set_attr(dev, "max_inflight", 32)
    g.set_attr(dev, "target_latency_us", target)
    before = g.stats(dev, "adapt")
    run("adaptive", 20)
    st = g.stats(dev, "adapt")
    hist = g.stat(dev, "adapt_history")
    lat = g.stats(dev, "adapt_latency")
    print(f"target {target / 1000:.2f} ms; adapt: {st}\n{hist}\nK2's view: {lat}")
    assert lat["samples"] >= 200 and lat["p99_us"] <= target, lat
    assert p999["adaptive"] < p999["bound 32"]
    # what the RT reader leaves to best effort grows with the bound
    assert be["adaptive"] >= BE_GAIN * be["bound 1"], be
    assert st["down"] + st["up"] + st["up_fast"] + st["up_double"] > 0 and 1 < st["bound"] < 32
    assert st["return"] == before["return"], (before, st)  # no idle spell: from bound 1
    # settled: the RT reader's tail as fio sees it meets the target
    rt = run("settled", SETTLED_S)
    over, allowed = fio.count_above(rt.clat_bins, target), fio.tail_allowance(rt.ios, 99.9)
    print(f"settled: {over} of {rt.ios} RT reads above the target ({allowed} allowed)")
    assert over <= allowed, (p999, target, over, allowed)
    # best effort alone: max_inflight once the RT reader has been gone 0.5 s
    g.fio(f"--name=be --filename=/dev/{dev} --direct=1 --bs=4k --rw=randread "
          "--ioengine=libaio --iodepth=32 --time_based --runtime=2", timeout=120)
    st = g.stats(dev, "adapt")
    assert st["idle"] >= 1 and st["in_force"] == 32, st
    # and back
    run("return", 2)
    st = g.stats(dev, "adapt")
    back = [ln.split() for ln in g.stat(dev, "adapt_history").splitlines()
            if ln.split()[1] == "return"]
    assert st["return"] >= 1 and back and back[-1][2] == "32" and int(back[-1][3]) < 32, st
    g.set_attr(dev, "target_latency_us", 0)
    assert g.attr(dev, "effective_inflight") == "32"


@pytest.mark.debug_tier
def test_rt_tags_follow_nr_requests(k2: Guest) -> None:
    """rt_tags defaults to a quarter of nr_requests, accepts up to half,
    and reads as the reserve in force: after nr_requests shrinks (the
    scheduler tags are reallocated and depth_updated runs) the setting is
    clamped to half the new depth, and best-effort and real-time readers
    that want more tags than there are still complete their I/O."""
    g = k2
    dev = FAST
    g.select(dev, "k2")
    nr = int(g.sh(f"cat /sys/block/{dev}/queue/nr_requests"))
    try:
        assert g.attr(dev, "rt_tags") == str(nr // 4)
        g.set_attr(dev, "rt_tags", nr // 2)
        assert g.run(f"echo {nr // 2 + 1} > /sys/block/{dev}/queue/iosched/rt_tags").rc != 0
        g.sh(f"echo 32 > /sys/block/{dev}/queue/nr_requests")
        assert g.attr(dev, "rt_tags") == "16"
        res = g.fio(f"--filename=/dev/{dev} --direct=1 --bs=4k --rw=randread --time_based "
                    "--runtime=3 --ioengine=libaio "
                    "--name=rt --iodepth=64 --prioclass=1 --prio=0 "
                    "--name=be --iodepth=64 --numjobs=2 --prioclass=2 --prio=4", timeout=120)
        assert fio.job_stats(res, "rt").ios > 0 and fio.job_stats(res, "be").ios > 0
        assert fio.job_stats(res, "rt").error == 0 and fio.job_stats(res, "be").error == 0
    finally:
        if not g.dead:
            g.sh(f"echo {nr} > /sys/block/{dev}/queue/nr_requests")
    assert g.attr(dev, "rt_tags") == str(nr // 2)
    g.sh("sleep 0.3")
    assert g.attr(dev, "inflight") == "0"


def test_reset_with_bound_leaves_nothing_in_flight(k2: Guest) -> None:
    """An NVMe controller reset while K2 holds requests at the bound: I/O
    completes, and K2's count returns to 0."""
    g = k2
    g.select(FAST, "k2")
    g.set_attr(FAST, "max_inflight", 4)
    args = (f"--name=r --filename=/dev/{FAST} --direct=1 --ioengine=io_uring --rw=randrw "
            "--bs=4k --iodepth=32 --numjobs=2 --group_reporting --time_based --runtime=4")
    r = g.run(f"""
fio --output-format=json --output=/tmp/fio.json {args} &
pid=$!
sleep 1.5
echo 1 > /sys/class/nvme/nvme0/reset_controller || exit 3
wait $pid
""", timeout=180)
    assert r.rc == 0, r.out
    assert fio.job_stats(fio.parse(g.vm.read_file("/tmp/fio.json").decode()), "r").error == 0
    g.sh("sleep 0.5")
    assert g.attr(FAST, "inflight") == "0"
    after = g.fio(f"--name=after --filename=/dev/{FAST} --direct=1 --ioengine=io_uring "
                  "--rw=randread --bs=4k --iodepth=8 --time_based --runtime=1", timeout=60)
    assert fio.job_stats(after, "after").ios > 0


def test_tcp_reset_requeues_and_leaves_nothing_in_flight(
        k2: Guest, nvme_tcp: tuple[str, str]) -> None:
    """A reset of a loopback NVMe/TCP controller while K2 holds requests at
    the bound (both kernels; this transport has no shadow doorbells), under
    verified writes.  The requests in flight are cancelled and come back
    through requeue_request (k2_requeue fires).  NVMe prepared them
    (RQF_DONTPREP), so they are issued again from hctx->dispatch, not
    through K2, and keep their slots: from the reset on the driver never
    holds more than the bound (before, K2 filled the slots they gave back
    and up to twice the bound was outstanding).  fio verifies every block
    it wrote and sees no error.  Every slot is given back: the reset changes
    the hardware queue maps, which re-initialises the elevator, and K2's
    exit warns (failing this test) if its count is not 0 then.  The new
    instance's count is 0 when idle as well."""
    ctrl, dev = nvme_tcp
    devno = k2.sh(f"cat /sys/block/{dev}/dev").strip().replace(":", ",")
    # 2 x 16 verified 4 KiB writes: at 1 s a request, 8 s, then the reads
    requeues = reset_keeps_depth(
        k2, "k2", ctrl, dev, "max_inflight", 4, f"/sys/block/{dev}/queue/iosched/inflight",
        load=("--rw=randwrite --bs=4k --iodepth=8 --numjobs=2 --size=64k "
              "--offset_increment=64k --verify=crc32c --verify_fatal=1 --group_reporting"))
    for e in requeues:
        assert e.fields["dev"] == devno and e.fields["queue"] == 8


# The merge test's disk: a request takes 50 ms, whatever the CPU does.
MERGE_NS = 50_000_000


def test_sequential_stream_merges(k2: Guest) -> None:
    """A sequential reader submitting one 4 KiB read per call (so the plug
    merges nothing) behind max_inflight=1: its reads merge into the requests
    K2 holds, and the device sees at least 4 times fewer requests than fio
    issued.  With nomerges=2 on the same set-up, one request per read.
    How many reads queue behind the one in the device depends on how fast
    the CPU submits them against how fast the device serves them: the disk
    is null_blk's timer (MERGE_NS a request), on which even the debug
    kernel on a slow host issues the 15 reads fio has left in the time the
    device takes for one.  (On the throttled NVMe drive, 4 ms a request,
    the debug kernel merged only 1.6 to 3.1 reads a request, and 6.1 fell
    short of 4 in CI on a busy host.)"""
    g = k2
    with timer_disk(g, MERGE_NS) as dev:
        g.select(dev, "k2")
        g.set_attr(dev, "max_inflight", 1)
        args = (f"--name=seq --filename=/dev/{dev} --direct=1 --ioengine=libaio --rw=read "
                "--bs=4k --iodepth=16 --iodepth_batch_submit=1 --time_based --runtime=3")
        seen = {}
        for nomerges in (0, 2):
            g.sh(f"echo {nomerges} > /sys/block/{dev}/queue/nomerges")
            try:
                reads0, merges0 = g.read_stat(dev)
                ios = fio.job_stats(g.fio(args, timeout=120), "seq").ios
                reads1, merges1 = g.read_stat(dev)
            finally:
                g.sh(f"echo 0 > /sys/block/{dev}/queue/nomerges")
            seen[nomerges] = (ios, reads1 - reads0, merges1 - merges0)
            print(f"nomerges={nomerges}: fio {ios} reads, device {reads1 - reads0} requests, "
                  f"{merges1 - merges0} merges")
    ios, reqs, merges = seen[0]
    assert ios > 0 and merges > 0
    assert ios >= 4 * reqs
    ios, reqs, merges = seen[2]
    assert merges == 0 and ios <= reqs <= ios + 16
