"""Fault injection under every project scheduler (the debug tier only: it
needs the debug kernel's null_blk fault injection, fail_make_request,
failslab, fail_page_alloc and fail-nth; scripts/debugkernel).

Each I/O test runs on a memory-backed null_blk device made through configfs
(its fault attributes are there, and its `times` counts down as faults
fire, which proves the path ran), checks fio's data with crc32c, and ends
with the scheduler idle: nothing in flight or queued by its own counts
(debugfs) or the block layer's.  The guest fixture then fails the test on
any lockdep, KASAN, UBSAN, BUG or WARNING report and on kmemleak's."""
from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest

from bench import fio
from conftest import BAD_DMESG, Guest
from schedulers import Sched

pytestmark = pytest.mark.debug_kernel

NULLB = "/sys/kernel/config/nullb/faults"
FAULTS = "/sys/kernel/debug"
SIZE_MB = 256
# what fio writes and later verifies: 2 jobs x 4 MiB, 4-64 KiB blocks
# (about 250 writes and as many reads; test_requeue_injection sends back
# REQUEUE_PERCENT of them and asks for more than 50 requeues)
JOB_MB = 4
REQUEUE_PERCENT = 20
WRITE = ("--name=w --filename=/dev/{dev} --direct=1 --ioengine=io_uring "
         f"--rw=randwrite --bsrange=4k-64k --iodepth=16 --numjobs=2 --size={JOB_MB}m "
         f"--offset_increment={JOB_MB}m --verify=crc32c --verify_fatal=1 --randrepeat=0 "
         "--group_reporting")


@pytest.fixture
def nullb(guest: Guest, sched: Sched) -> Iterator[str]:
    """A 256 MiB memory-backed null_blk disk with fault injection (2
    hardware queues of depth 32, io_timeout 1 s) and the scheduler
    selected; its disk name."""
    g = guest
    if g.run(f"[ -d {FAULTS}/fail_make_request ]").rc != 0:
        pytest.fail(f"{g.kernel} has no fault injection: the debug tier runs on the "
                    "kernel scripts/debugkernel builds")
    g.sh(f"""
set -e
grep -q configfs /proc/mounts || mount -t configfs none /sys/kernel/config
if grep -q '^null_blk ' /proc/modules; then rmmod null_blk; fi
modprobe null_blk nr_devices=0
mkdir {NULLB}
cd {NULLB}
echo 1 > memory_backed; echo {SIZE_MB} > size; echo 4096 > blocksize
echo 2 > submit_queues; echo 32 > hw_queue_depth
echo 1 > power
""")
    # 6.12 names a configfs disk after its directory; older kernels nullb<index>
    dev = NULLB.rsplit("/", 1)[1]
    if g.run(f"[ -e /sys/block/{dev} ]").rc != 0:
        dev = "nullb" + g.sh(f"cat {NULLB}/index").strip()
    g.sh(f"echo 1000 > /sys/block/{dev}/queue/io_timeout")
    g.load(sched.module)
    g.select(dev, sched.name)
    yield dev
    if not g.dead:
        g.sh(f"""
echo none > /sys/block/{dev}/queue/scheduler
echo 0 > {NULLB}/power
rmdir {NULLB}
rmmod null_blk
""")


def arm(g: Guest, group: str, probability: int, times: int) -> None:
    """Arm a fault attribute (a debugfs directory or a configfs group),
    quietly: verbose 0, or each fault dumps a stack to the kernel log."""
    g.sh(f"cd {group} && echo 0 > verbose && echo 1 > interval && "
         f"echo {times} > times && echo {probability} > probability")


def fired(g: Guest, group: str, times: int) -> int:
    """Faults injected since arm(..., times): what `times` counted down."""
    return times - int(g.sh(f"cat {group}/times").strip())


def write_and_verify(g: Guest, dev: str, timeout: float = 600) -> dict[str, Any]:
    res = g.fio(WRITE.format(dev=dev) + " --do_verify=1", timeout=timeout)
    st = fio.job_stats(res, "w")
    assert st.error == 0
    assert st.io_bytes == 2 * 2 * (JOB_MB << 20), st  # written and read back
    return res


def write_only(g: Guest, dev: str) -> None:
    """WRITE's writes, with the checksums verify_only() reads back later
    (where that is done anyway, reading back at once too only doubled the
    debug kernel's time)."""
    res = g.fio(WRITE.format(dev=dev) + " --do_verify=0", timeout=600)
    st = fio.job_stats(res, "w")
    assert st.error == 0
    assert st.io_bytes == 2 * (JOB_MB << 20), st


def verify_only(g: Guest, dev: str) -> None:
    """Everything WRITE wrote reads back intact (fio --verify_only)."""
    res = g.fio(WRITE.format(dev=dev) + " --verify_only", timeout=600)
    st = fio.job_stats(res, "w")
    assert st.error == 0
    # fio counts the writes it replays without doing them, and the reads
    assert st.io_bytes == 2 * 2 * (JOB_MB << 20), st


def read_with_errors(g: Guest, dev: str, seconds: int) -> tuple[int, int, int]:
    """Random 4 KiB reads (one bio each) by two jobs that go on past I/O
    errors: the reads done, the reads that failed and the first error's
    errno.  Each job reports its own: with --group_reporting fio sums the
    errors but may give the first error of a job that had none (0), as it
    did when every dropped read was the second job's."""
    res = g.fio(f"--name=r --filename=/dev/{dev} --direct=1 --ioengine=io_uring "
                f"--rw=randread --bs=4k --iodepth=16 --numjobs=2 --size={SIZE_MB}m "
                f"--time_based --runtime={seconds} --continue_on_error=read "
                # fio goes on past EIO only unless told: also past ETIMEDOUT
                # (110; this fio knows it by number only)
                "--ignore_error=EIO:110",
                timeout=seconds + 300, ok=False)
    jobs = [j for j in res["jobs"] if j["jobname"] == "r"]
    assert len(jobs) == 2, [j["jobname"] for j in res["jobs"]]
    ios = fio.total_ios(res, "r")
    errnos = [int(j["first_error"]) for j in jobs if int(j["total_err"])]
    return ios, sum(int(j["total_err"]) for j in jobs), errnos[0] if errnos else 0


def test_requeue_injection(guest: Guest, sched: Sched, nullb: str) -> None:
    """null_blk sends back REQUEUE_PERCENT of requests (half as
    BLK_STS_RESOURCE, half through blk_mq_requeue_request): nothing is
    lost, all of it verifies, and the scheduler ends idle."""
    g, grp = guest, f"{NULLB}/requeue_inject"
    arm(g, grp, REQUEUE_PERCENT, 2000)
    write_and_verify(g, nullb)
    n = fired(g, grp, 2000)
    arm(g, grp, 0, 0)
    print(f"{sched.name}: {n} requeues injected")
    assert n > 50
    g.assert_idle(nullb)


def timed_out(g: Guest) -> int:
    """null_blk's "rq ... timed out" lines in the kernel log so far: the
    requests its timeout handler saw, injected or real."""
    return int(g.sh("dmesg | grep -c 'null_blk: rq .* timed out' || true").strip())


def test_timeout_injection(guest: Guest, sched: Sched, nullb: str) -> None:
    """null_blk drops 20 reads, which time out after io_timeout (1 s) and
    fail: fio sees those errors (ETIMEDOUT) and no more, nothing hangs, the
    data reads back intact afterwards and the scheduler ends idle.

    A read can also time out for real: the memory-backed disk's queue_rq
    may block (null_timeout_rq() then sets BLK_STS_TIMEOUT and the
    submission path completes it), and on the debug kernel beside CI's VM
    tiers one did (fio saw 21 errors for 20 injected, cars, 6.12).  So
    every injected timeout must fail its read and every error must be a
    timeout null_blk's handler logged: on the same disk in timer mode (20
    ms a request, io_timeout 5 ms, no injection) 74 reads were logged as
    timed out and fio counted 73 errors, all ETIMEDOUT (one timed out as
    fio ended, presumably)."""
    g, grp = guest, f"{NULLB}/timeout_inject"
    write_only(g, nullb)
    before = timed_out(g)
    arm(g, grp, 5, 20)
    ios, errors, errno = read_with_errors(g, nullb, 8)
    n = fired(g, grp, 20)
    arm(g, grp, 0, 0)
    handled = timed_out(g) - before
    print(f"{sched.name}: {n} timeouts injected, {handled} handled by null_blk, fio saw "
          f"{errors} errors (first errno {errno}) in {ios} reads")
    assert n > 0
    assert n <= errors <= handled and errno == 110  # ETIMEDOUT
    g.assert_idle(nullb)
    verify_only(g, nullb)
    g.assert_idle(nullb)


def test_fail_make_request(guest: Guest, sched: Sched, nullb: str) -> None:
    """fail_make_request fails 5% of the disk's bios for a short window
    (100 failures): exactly those errors reach fio (EIO), nothing hangs,
    and the data reads back intact afterwards."""
    g, grp = guest, f"{FAULTS}/fail_make_request"
    write_only(g, nullb)
    g.sh(f"echo 1 > /sys/block/{nullb}/make-it-fail")
    arm(g, grp, 5, 100)
    try:
        ios, errors, errno = read_with_errors(g, nullb, 4)
        n = fired(g, grp, 100)
    finally:
        arm(g, grp, 0, 0)
        g.sh(f"echo 0 > /sys/block/{nullb}/make-it-fail")
    print(f"{sched.name}: {n} bios failed, fio saw {errors} errors "
          f"(first errno {errno}) in {ios} reads")
    assert n > 0
    assert errors == n and errno == 5  # EIO
    g.assert_idle(nullb)
    verify_only(g, nullb)


# Reports the injected allocation failures themselves cause: the page
# allocator's "page allocation failure" warning with its backtrace.
ALLOC_WARNING = re.compile(r"page allocation failure|warn_alloc")


def _module_range(g: Guest, module: str) -> tuple[int, int]:
    """[start, end) of the module's core (text and data), from /proc/modules."""
    line = g.sh(f"grep '^{module.replace('-', '_')} ' /proc/modules")
    f = line.split()
    base = int(f[5], 16)
    assert base, f"/proc/modules hides addresses: {line}"
    return base, base + int(f[1])


def test_allocation_failures_during_switch(guest: Guest, sched: Sched) -> None:
    """Every allocation made from the scheduler's code while it is selected
    fails in turn (fail-nth with failslab and fail_page_alloc restricted to
    the module's address range): each such switch fails with an error and
    leaves the queue on none, I/O still works, and the next switch
    succeeds.  kmemleak after the module's unload finds nothing (the guest
    fixture)."""
    g = guest
    dev = g.fast
    g.select(dev, "none")
    g.load(sched.module)
    start, end = _module_range(g, sched.module)
    for attr in ("failslab", "fail_page_alloc"):
        d = f"{FAULTS}/{attr}"
        g.sh(f"cd {d} && echo 0 > verbose && echo N > ignore-gfp-wait && "
             f"echo {start} > require-start && echo {end} > require-end && "
             f"echo 0 > reject-start && echo 0 > reject-end && echo 32 > stacktrace-depth")
    failed = 0
    try:
        for nth in range(1, 200):
            # One command a failure (six took 6 s of the debug kernel's
            # time, beside the fio run).  The switch in the shell itself,
            # builtins only: fail-nth counts the calls of the task that set
            # it (a child does not inherit it); then it is disarmed before
            # anything else runs.  When an allocation failed: which
            # scheduler the queue is on, I/O through it, and none again.
            r = g.run(f"""
echo {nth} > /proc/self/fail-nth
echo {sched.name} > /sys/block/{dev}/queue/scheduler; rc=$?
read -r left < /proc/self/fail-nth
echo 0 > /proc/self/fail-nth
echo left=$left rc=$rc
echo "now=$(cat /sys/block/{dev}/queue/scheduler)"
[ "$left" = 0 ] || exit 0
fio --output-format=json --output=/tmp/fio.json --name=io --filename=/dev/{dev} --direct=1 \\
    --rw=randread --bs=4k --iodepth=4 --ioengine=io_uring --size=4m --number_ios=64 || exit 5
echo none > /sys/block/{dev}/queue/scheduler || exit 6
echo "after=$(cat /sys/block/{dev}/queue/scheduler)"
echo FIO; cat /tmp/fio.json""", timeout=300)
            m = re.search(r"left=(\d+) rc=(\d+)\nnow=.*\[([^\]]+)\]", r.out)
            assert m and r.rc == 0, r.out
            injected = m.group(1) == "0"
            now = m.group(3)
            if not injected:
                # fewer than nth allocations: every one has failed once
                assert m.group(2) == "0", r.out
                assert now == sched.name
                break
            failed += 1
            if m.group(2) != "0":
                assert now == "none", f"allocation {nth} failed: queue on {now}"
            else:  # the scheduler coped without that allocation
                assert now == sched.name
            res = fio.parse(r.out.split("\nFIO\n", 1)[1])
            assert fio.job_stats(res, "io").error == 0
            assert re.search(r"after=.*\[none\]", r.out), r.out
        else:
            pytest.fail("the switch still failed after 199 injected allocation failures")
    finally:
        for attr in ("failslab", "fail_page_alloc"):
            g.sh(f"cd {FAULTS}/{attr} && echo 0 > require-start && "
                 f"echo {2**64 - 1} > require-end && echo Y > ignore-gfp-wait")
    print(f"{sched.name}: {failed} allocations failed in turn during the switch")
    assert failed > 0, "no allocation of the module's failed: the injection never ran"
    g.select(dev, "none")
    bad = unexpected_reports(g.sh("dmesg -c").splitlines())
    assert not bad, "kernel log during the injections:\n" + "\n".join(bad[:80])


def unexpected_reports(log: list[str]) -> list[str]:
    """The kernel log from its first problem on, leaving out the reports the
    injected failures cause themselves: the page allocator's "page
    allocation failure" warning, up to the end of its backtrace."""
    kept: list[str] = []
    skipping = False
    for ln in log:
        if ALLOC_WARNING.search(ln):
            skipping = True
        elif skipping and "</TASK>" in ln:
            skipping = False
        elif not skipping:
            kept.append(ln)
    first = next((i for i, ln in enumerate(kept) if BAD_DMESG.search(ln)), None)
    return [] if first is None else kept[first:first + 80]
