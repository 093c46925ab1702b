"""VM suites: one VM per kernel and pytest session, rebooted if a test kills it.

Run through tests/run (which builds the modules first), or directly:
    python3 -m pytest tests/vm --kernel 6.1.0-56-cloud-amd64
"""
from __future__ import annotations

import functools
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from bench import fio  # noqa: E402
from scripts.vmbed import KERNEL_PROBLEM as BAD_DMESG  # noqa: E402
from scripts.vmbed import VM, VMConfig, VMError  # noqa: E402
from schedulers import SCHEDULERS, Sched  # noqa: E402


def pytest_configure(config: pytest.Config) -> None:
    for m in ("timing: asserts timing or throughput ratios (not run in the debug tier, "
              "where KASAN and lockdep make timing meaningless)",
              "lttng: needs the LTTng modules (not built for the debug kernel)",
              "debug_kernel: needs the debug kernel's fault injection (the debug tier only)",
              "debug_tier: runs in the debug tier too (tests/run): test_generic's and "
              "test_trace's tests, and of the other suites those on a path of the project's "
              "code that test_generic and test_faults do not take",
              "userspace: tests user space (the benchmark runner, kyber-tune, the udev rule) "
              "on whatever kernel: tests/run runs it on the first test kernel only",
              "first_kernel: a test of what no kernel changes (a long end-to-end run, a "
              "policy of a scheduler's core header or of ssdsim's model) whose kernel side "
              "other tests cover on every kernel: tests/run runs it on the first test "
              "kernel only (pytest --kernel runs it on any)",
              "minutes(n): takes up to n minutes on a slow, busy host; under tests/run's time "
              "budget it starts only while that still ends by the others' end "
              "(pytest_runtest_setup())"):
        config.addinivalue_line("markers", m)


# tests/run's deadline for starting a VM test (seconds since the epoch;
# its BUDGET_MIN after make check began)
DEADLINE_ENV = "VM_TEST_DEADLINE"
# what a test without a minutes() mark takes at most on a slow, busy host
# (the debug kernel's allocation failures for cars took 4 min in CI)
UNMARKED_MIN = 4


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """A test not started by tests/run's deadline is skipped, with that
    reason, before its fixtures boot anything, so that the run ends with
    its summary before CI stops it (tests/run fails every such test); one
    marked minutes(n) with n above
    UNMARKED_MIN as soon as it would no longer end by when one started at
    the deadline ends."""
    deadline = os.environ.get(DEADLINE_ENV)
    if not deadline:
        return
    m = item.get_closest_marker("minutes")
    longer = max(0.0, float(m.args[0]) - UNMARKED_MIN) * 60 if m else 0.0
    if time.time() > float(deadline) - longer:
        pytest.skip("time budget: not started by tests/run's deadline (BUDGET_MIN)"
                    + (f", less its {m.args[0]} min" if longer else ""))


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--kernel", help="kernel release to boot (default: first test kernel)")


def _kernel(config: pytest.Config) -> str:
    k = config.getoption("--kernel")
    if k:
        return str(k)
    out = subprocess.run([str(ROOT / "scripts" / "kernels"), "test"],
                         capture_output=True, text=True, check=True).stdout
    return out.split()[0]


class DeviceOrderError(VMError):
    """6.12 probes NVMe controllers asynchronously: now and then the throttled
    one becomes nvme0.  The tests want nvme0n1 to be the plain device, as on
    a user's box, so such a boot is retried."""


class Guest:
    """Helpers over a running VM."""

    def __init__(self, vm: VM):
        self.vm = vm
        self.kernel = vm.cfg.kernel
        self.fast = "nvme0n1"
        self.throttled = self.sh("readlink /dev/vm-throttled").strip().removeprefix("/dev/")
        if self.sh("readlink /dev/vm-fast").strip() != "/dev/nvme0n1":
            raise DeviceOrderError("the plain NVMe device is not nvme0n1")

    @property
    def debug_kernel(self) -> bool:
        """The debug tier's kernel (KASAN, lockdep: several times slower, so
        a rate or ratio that depends on the CPU's speed means nothing)."""
        return self.kernel.endswith(DEBUG_LOCALVERSION)

    @property
    def dead(self) -> bool:
        return self.vm.dead

    def run(self, script: str, timeout: float = 300) -> Any:
        return self.vm.run(script, timeout)

    def sh(self, script: str, timeout: float = 300) -> str:
        return self.vm.check(script, timeout)

    def fio(self, args: str, timeout: float = 300, ok: bool = True,
            output: str = "json") -> dict[str, Any]:
        """Run fio (arguments as on its command line) and return its JSON
        (@output json+: with each job's latency histogram, clat_bins).
        One command, which prints the JSON after fio's own output: a second
        to read the file cost the debug kernel's VM 0.7 s a run."""
        if output not in ("json", "json+"):
            raise ValueError(f"fio output format {output!r}: json or json+")
        mark = "=== /tmp/fio.json ==="
        r = self.vm.run(f"rm -f /tmp/fio.json; fio --output-format={output} --output=/tmp/fio.json "
                        f"{args}\nrc=$?\necho; echo '{mark}'; cat /tmp/fio.json; exit $rc", timeout)
        out, _, text = r.out.rpartition(f"\n{mark}\n")
        if ok and r.rc != 0:
            raise AssertionError(f"fio {args} failed (exit {r.rc}):\n{out}\n{text[-2000:]}")
        return fio.parse(text)

    def scheduler(self, dev: str) -> str:
        line = self.sh(f"cat /sys/block/{dev}/queue/scheduler")
        m = re.search(r"\[([^\]]+)\]", line)
        assert m, line
        return m.group(1)

    def select(self, dev: str, sched: str) -> None:
        self.sh(f"echo {sched} > /sys/block/{dev}/queue/scheduler")
        assert self.scheduler(dev) == sched

    def attr(self, dev: str, name: str) -> str:
        return self.sh(f"cat /sys/block/{dev}/queue/iosched/{name}").strip()

    @staticmethod
    def sched_dbg(dev: str) -> str:
        """The scheduler's debugfs folder of /dev/@dev."""
        return f"/sys/kernel/debug/block/{dev}/sched"

    def stat(self, dev: str, name: str) -> str:
        """The scheduler's debugfs file @name of /dev/@dev."""
        return self.sh(f"cat {self.sched_dbg(dev)}/{name}").strip()

    def read_stat(self, dev: str) -> tuple[int, int]:
        """(reads completed, reads merged) from /sys/block/<dev>/stat."""
        f = self.sh(f"cat /sys/block/{dev}/stat").split()
        return int(f[0]), int(f[1])

    def stats(self, dev: str, name: str = "counters") -> dict[str, int]:
        """A debugfs file of "name value" lines (counters) as a dict."""
        return {k: int(v) for k, v in (ln.split() for ln in self.stat(dev, name).splitlines())}

    def assert_idle(self, dev: str) -> None:
        """Nothing in flight or queued: the block layer's counts and, where
        the scheduler has them, its own (debugfs sched/inflight,
        sched/queued).  One command (each is 0.7 s on the debug kernel)."""
        dbg = self.sched_dbg(dev)
        out = self.sh(f"""
sleep 0.5
echo "block $(cat /sys/block/{dev}/inflight)"
for f in inflight queued; do
	[ -e {dbg}/$f ] || continue
	echo "== $f"
	cat {dbg}/$f
done""")
        block, *rest = out.split("\n== ")
        assert block.split() == ["block", "0", "0"], out
        for part in rest:
            name, _, text = part.partition("\n")
            # a count, or one per queue ("rt0 0" ... "be 0": K2's queued)
            assert all(ln.split()[-1] == "0" for ln in text.splitlines() if ln.strip()), \
                (name, text)

    def set_attr(self, dev: str, name: str, value: object) -> None:
        self.sh(f"echo {value} > /sys/block/{dev}/queue/iosched/{name}")
        assert self.attr(dev, name) == str(value)

    def load(self, module: str) -> None:
        self.sh(f"modprobe {module}")

    def take_dmesg(self) -> list[str]:
        """The kernel log since the last call from its first line that
        indicates a kernel problem on (a KASAN or lockdep report explains
        itself in the lines that follow; at most 80), or nothing."""
        lines = self.sh("dmesg -c").splitlines()
        first = next((i for i, ln in enumerate(lines) if BAD_DMESG.search(ln)), None)
        return [] if first is None else lines[first:first + 80]

    @functools.cached_property
    def has_kmemleak(self) -> bool:
        return self.run(f"[ -e {KMEMLEAK} ]").rc == 0

    def unload_modules(self) -> None:
        """Unload the project's modules that nothing uses (what they free
        on exit is then in kmemleak's next scan)."""
        mods = " ".join(m.replace("-", "_") for m in self.vm.modules)
        self.sh(f"""
for m in {mods}; do grep -q "^$m " /proc/modules && rmmod $m 2>/dev/null; done
true""")

    def depot_pools(self) -> int | None:
        """The stack depot's pools in use (DEPOT_POOLS_CAP), None on a
        kernel without the depot's statistics."""
        r = self.run("cat /sys/kernel/debug/stackdepot/stats 2>/dev/null")
        m = re.search(r"^pools: (\d+)$", r.out, re.M) if r.rc == 0 else None
        return int(m.group(1)) if m else None

    def take_leaks(self) -> str:
        """Scan for leaks and return kmemleak's report of those not yet
        seen ("" if none; always "" on a kernel without kmemleak).
        kmemleak reports an object once it has been unreferenced for 5 s,
        so a leak at the end of one scan's span can show at the next
        scan, with its backtrace."""
        if not self.has_kmemleak:
            return ""
        return self.sh(f"""
echo scan > {KMEMLEAK}
cat {KMEMLEAK}
echo clear > {KMEMLEAK}
""", timeout=600).strip()


# The debug kernel's stack depot (lib/stackdepot.c) keeps every distinct
# stack trace KASAN and kmemleak save, in at most DEPOT_POOLS_CAP pools of
# 16 KiB, and never frees them; full, it warns ("Stack depot reached limit
# capacity") and saves no more.  A module loaded again lies at another
# address, so each load adds new traces of the paths through it: in one
# boot of the debug tier (32 tests, the modules loaded again for most)
# it filled at 601 s of uptime, during the last test file but one.  After
# a test file that leaves it at DEPOT_POOLS_REBOOT or more, the next test
# boots a new VM.
DEPOT_POOLS_CAP = 8192
DEPOT_POOLS_REBOOT = DEPOT_POOLS_CAP // 2
# CONFIG_LOCALVERSION of the debug kernel (tests/debug/kernel.config)
DEBUG_LOCALVERSION = "-ssd-debug"
# The debug kernel's guest has one vCPU: with two, beside the VM tiers'
# guests on a 2-core host, each vCPU spins on locks (lockdep's too) whose
# holder the host has not scheduled, and the debug tier took far longer
# (tests/README.md).  Lockdep and KASAN check the same paths, interrupts
# still come between any two instructions; the VM tiers run two vCPUs for
# what needs true parallelism.
DEBUG_SMP = 1
NVMET = "/sys/kernel/config/nvmet"
KMEMLEAK = "/sys/kernel/debug/kmemleak"
NVMET_NQN = "testnqn.k2-loop"
# How long the target holds each request.  A reset first quiesces the
# queues, then shuts the sockets down and cancels what is still in flight
# (nvme_tcp_teardown_io_queues): whatever completes between the two is not
# requeued.  That window measured 1-8 ms (function trace, 6.1, 4 resets),
# but a vCPU that QEMU does not run for a while stretches it: at 10 ms
# one reset in three on 6.12 found every request completed, at 100 ms one
# CI run on 6.1 did.  At 1 s a stall would have to last a second.
NVMET_DELAY_MS = 1000


@pytest.fixture
def nvme_tcp(guest: Guest) -> Iterator[tuple[str, str]]:
    """A loopback NVMe/TCP controller in the guest: the kernel's target
    (nvmet-tcp) exports a memory-backed null_blk device (timer_disk(), so
    that fio can verify what it wrote) that completes each request after
    NVMET_DELAY_MS on 127.0.0.1, and the host driver (nvme-tcp) connects
    to it.  Yields (controller, disk), e.g. ("nvme2", "nvme2n1").
    Its reset path differs from nvme-pci's: the requests in flight are
    cancelled and requeued, and it has no shadow doorbells."""
    g = guest
    before = set(g.sh("ls /sys/class/nvme").split())
    with timer_disk(g, NVMET_DELAY_MS * 1000000, "memory_backed=1") as disk:
        g.sh(f"""
set -e
modprobe nvmet-tcp
modprobe nvme-tcp
ip link set lo up
grep -q configfs /proc/mounts || mount -t configfs none /sys/kernel/config
dev=/dev/{disk}
s={NVMET}/subsystems/{NVMET_NQN}
mkdir $s
echo 1 > $s/attr_allow_any_host
mkdir $s/namespaces/1
echo -n "$dev" > $s/namespaces/1/device_path
echo 1 > $s/namespaces/1/enable
p={NVMET}/ports/1
mkdir $p
echo tcp > $p/addr_trtype
echo ipv4 > $p/addr_adrfam
echo 127.0.0.1 > $p/addr_traddr
echo 4420 > $p/addr_trsvcid
ln -s $s $p/subsystems/{NVMET_NQN}
echo "transport=tcp,traddr=127.0.0.1,trsvcid=4420,nqn={NVMET_NQN}" > /dev/nvme-fabrics
""", timeout=120)
        ctrl = ""
        for _ in range(100):
            new = set(g.sh("ls /sys/class/nvme").split()) - before
            if new:
                ctrl = new.pop()
                disks = g.sh(f"ls /sys/class/nvme/{ctrl} | grep '^{ctrl}n' || true").split()
                if disks and g.run(f"test -b /dev/{disks[0]}").rc == 0:
                    break
            g.sh("sleep 0.1")
        else:
            raise AssertionError("the loopback NVMe/TCP controller did not appear")
        yield ctrl, disks[0]
        if g.dead:
            return
        g.sh(f"""
echo 1 > /sys/class/nvme/{ctrl}/delete_controller
s={NVMET}/subsystems/{NVMET_NQN}
rm -f {NVMET}/ports/1/subsystems/{NVMET_NQN}
rmdir {NVMET}/ports/1
echo 0 > $s/namespaces/1/enable
rmdir $s/namespaces/1 $s
""", timeout=120)


def need_modules(g: Guest, *names: str) -> None:
    """Skip the test unless the project's modules @names were built for
    the guest's kernel."""
    missing = [n for n in names if n not in g.vm.modules]
    if missing:
        pytest.skip(f"needs {' and '.join(missing)} built for this kernel")


def ssdsim_loaded(g: Guest) -> bool:
    return any(ln.split()[0] == "ssdsim" for ln in g.sh("cat /proc/modules").splitlines()
               if ln.strip())


def load_ssdsim(guest: Guest, **params: object) -> None:
    """ssdsim (ssdsim0) loaded afresh with these module parameters."""
    if ssdsim_loaded(guest):
        guest.sh("rmmod ssdsim")
    args = " ".join(f"{k}={v}" for k, v in params.items())
    guest.sh(f"modprobe ssdsim {args} && test -b /dev/ssdsim0")


@contextmanager
def ssdsim(guest: Guest, time_scale: int, **params: object) -> Iterator[str]:
    """ssdsim0 at @time_scale with more module parameters @params, removed
    afterwards."""
    load_ssdsim(guest, time_scale=time_scale, **params)
    try:
        yield "ssdsim0"
    finally:
        if not guest.dead and ssdsim_loaded(guest):
            guest.sh("rmmod ssdsim")


@contextmanager
def timer_disk(g: Guest, completion_ns: int, params: str = "") -> Iterator[str]:
    """A null_blk disk (1 GiB, no media) whose timer completes each request
    completion_ns after it was issued, whatever the guest's CPU does
    meanwhile; params: more of null_blk's module parameters.  Yields its
    name (nullb0); afterwards its scheduler is none again and null_blk is
    unloaded.  Where a test needs the device, not the CPU, to be what
    requests wait for: the throttled NVMe drive serves one every 4 ms,
    about what a thread of the debug kernel on a slow host takes to issue
    its next read."""
    g.sh(f"""
! grep -q '^null_blk ' /proc/modules || rmmod null_blk
modprobe null_blk nr_devices=1 gb=1 irqmode=2 completion_nsec={completion_ns} {params}
for i in $(seq 50); do [ -b /dev/nullb0 ] && break; sleep 0.1; done
[ -b /dev/nullb0 ]
""", timeout=60)
    try:
        yield "nullb0"
    finally:
        if not g.dead:
            g.select("nullb0", "none")
            g.sh("rmmod null_blk")


def _boot_note(kernel: str, err: VMError) -> None:
    """Record a boot that failed for tests/run to print (VM_BOOT_NOTES)."""
    lines = str(err).splitlines()
    note = f"{kernel}: a VM died while booting and was booted again: {lines[0]}"
    tail = [ln.strip() for ln in lines[1:] if ln.strip()][-8:]
    if tail:
        note += " | console: " + " | ".join(tail)
    path = os.environ.get("VM_BOOT_NOTES")
    if path:
        with open(path, "a") as f:
            f.write(note.replace("\n", " ") + "\n")
    print("NOTE: " + note, file=sys.stderr)


@pytest.fixture(scope="module", params=SCHEDULERS, ids=lambda s: s.name)
def sched(request: pytest.FixtureRequest) -> Sched:
    """Each project scheduler in turn (tests/vm/schedulers.py), module by
    module: the generic suite and the fault injection tests; on the debug
    kernel those that are not a test fixture (pytest_collection_modifyitems())."""
    return request.param  # type: ignore[no-any-return]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """On the debug kernel, deselect the tests of a scheduler that is a
    test fixture (Sched.fixture)."""
    if not _kernel(config).endswith(DEBUG_LOCALVERSION):
        return
    keep, drop = [], []
    for item in items:
        cs = getattr(item, "callspec", None)
        s = cs.params.get("sched") if cs is not None else None
        (drop if isinstance(s, Sched) and s.fixture else keep).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


@dataclass(frozen=True)
class VMs:
    """vm_factory: get() the VM (booting one when there is none or it
    died), or the current one (None: none yet)."""
    get: Callable[[], Guest]
    current: Callable[[], Guest | None]
    retire: Callable[[], None]   # stop the VM: the next get() boots one


def boot_guest(cfg: VMConfig) -> Guest:
    """Boot a VM as @cfg says and return its Guest, with an empty kernel
    log.  A guest that dies while booting is booted once more (nothing of
    the project's has run yet: the init script loads only upstream modules,
    so the death is the emulator's or the kernel's; tests/run's output says
    so), and one whose NVMe devices came up in the wrong order up to five
    times (DeviceOrderError)."""
    boot_failures = 0
    for attempt in range(5):
        vm = VM(cfg)
        try:
            vm.start()
        except VMError as e:
            vm.cleanup()
            boot_failures += 1
            if boot_failures > 1:
                raise
            _boot_note(cfg.kernel, e)
            continue
        try:
            g = Guest(vm)
            break
        except DeviceOrderError:
            vm.cleanup()
            if attempt == 4:
                raise
        except BaseException:
            vm.cleanup()
            raise
    else:
        raise VMError(f"{cfg.kernel}: no boot of 5 came up")
    g.sh("dmesg -c >/dev/null")
    return g


@pytest.fixture(scope="session")
def vm_factory(request: pytest.FixtureRequest) -> Iterator[VMs]:
    kernel = _kernel(request.config)
    state: dict[str, Any] = {"vm": None, "guest": None}

    def get() -> Guest:
        g = state["guest"]
        if g is None or g.dead:
            if state["vm"] is not None:
                state["vm"].cleanup()
                state["vm"] = None
            g = boot_guest(VMConfig(kernel=kernel, modules_dir=ROOT / ".build" / kernel,
                                    smp=DEBUG_SMP if kernel.endswith(DEBUG_LOCALVERSION)
                                    else VMConfig.smp))
            state["vm"] = g.vm
            if g.has_kmemleak:
                # what booting left is not the tests'; leak_scan scans after
                # each file, so kmemleak's own scan every 10 min is only
                # another 6-12 s of the guest's CPU
                g.sh(f"echo scan=off > {KMEMLEAK}; echo scan > {KMEMLEAK}; "
                     f"echo clear > {KMEMLEAK}", timeout=600)
            state["guest"] = g
        return g

    def retire() -> None:
        if state["vm"] is not None:
            state["vm"].cleanup()
        state["vm"] = state["guest"] = None

    yield VMs(get, lambda: state["guest"], retire)
    if state["vm"] is not None:
        state["vm"].cleanup()


def assert_log_clean(g: Guest) -> None:
    """What the test left in the kernel log (Guest.take_dmesg()) fails it."""
    bad = g.take_dmesg()
    assert not bad, "kernel log during this test:\n" + "\n".join(bad)


@pytest.fixture
def guest(vm_factory: VMs) -> Iterator[Guest]:
    """The VM, with a check that the test left the kernel log clean; on the
    debug kernel the project's unused modules are unloaded after it, so
    that leak_scan sees what their exit frees (elsewhere LTTng's modules
    stay loaded: unloading them under lttng-sessiond breaks its next
    session)."""
    g = vm_factory.get()
    yield g
    if not g.dead:
        assert_log_clean(g)
        if g.has_kmemleak:  # the debug kernel: what they free goes to leak_scan
            g.unload_modules()


# icount_guest's clock: 2^ICOUNT_SHIFT ns an instruction (QEMU -icount)
ICOUNT_SHIFT = 3


@pytest.fixture(scope="session")
def icount_vms(request: pytest.FixtureRequest) -> Iterator[dict[str, Guest]]:
    """icount_guest's VM between two tests that ask for it one after the
    other ("guest"), stopped at the end of the session if still up."""
    state: dict[str, Guest] = {}
    yield state
    if "guest" in state:
        state.pop("guest").vm.cleanup()


def _next_wants_icount(request: pytest.FixtureRequest) -> bool:
    """Whether the test pytest runs after this one asks for icount_guest."""
    items = request.session.items
    try:
        i = items.index(request.node)
    except ValueError:
        return False
    return i + 1 < len(items) and "icount_guest" in getattr(items[i + 1], "fixturenames", ())


#: the guest's uptime, s, from which a guest whose clock counts
#: instructions has done what booting left it to do
ICOUNT_SETTLED_S = 30


def _settle(g: Guest) -> None:
    """Wait until @g has been up ICOUNT_SETTLED_S: what the guest still
    does after booting takes CPU time, which on the instruction-counting
    clock is the requests' time too.  Measured on 7.3 with a 4 KiB reader
    at iodepth 1 on ssdsim (1.2 ms a read): 1987 us a read over the first
    second from 18 s of uptime, 1584 over the next 4 s and 1382 after;
    from 28 s of uptime, 1383 at once.  Idle, the guest's clock runs ahead
    of the host's, so the wait costs a few seconds."""
    g.sh(f"while [ $(cut -d. -f1 /proc/uptime) -lt {ICOUNT_SETTLED_S} ]; do sleep 1; done",
         timeout=300)


@pytest.fixture
def icount_guest(request: pytest.FixtureRequest, icount_vms: dict[str, Guest]
                 ) -> Iterator[Guest]:
    """A VM beside the session's whose clock counts the instructions its
    vCPUs execute (QEMU -icount shift=ICOUNT_SHIFT, sleep=off:
    scripts/vmbed.py accel_args()) instead of following the host's: a test
    that compares latencies measured in the guest sees the same figures
    whatever else the host runs.  On plain TCG a host that does not run
    the guest's vCPU for 100 ms (CI runs the debug tier's VM beside this
    one on two cores) puts 100 ms into whatever request is in flight,
    which is the p99.9 of a few thousand.  Its kernel log is checked after
    the test, as the guest fixture's.

    Booted for the test, and kept for the next one when that asks for it
    too (a boot is 15-25 s of TCG); stopped otherwise: with sleep=off an
    idle guest's clock jumps from timer to timer as fast as the host runs
    it (on 6.12, 754 s of the guest's in 20 s, taking 18.2 s of a host
    CPU), which the session's VM would lose."""
    g = icount_vms.get("guest")
    if g is None or g.dead:
        if g is not None:
            icount_vms.pop("guest").vm.cleanup()
        g = icount_vms["guest"] = _boot_own(request.config, icount=ICOUNT_SHIFT)
        _settle(g)
    try:
        yield g
        if not g.dead:
            assert_log_clean(g)
    finally:
        if g.dead or not _next_wants_icount(request):
            icount_vms.pop("guest").vm.cleanup()


def _boot_own(config: pytest.Config, **cfg: Any) -> Guest:
    """A VM beside the session's, booted with the project's modules and
    @cfg (more of VMConfig's fields); the caller stops it."""
    kernel = _kernel(config)
    return boot_guest(VMConfig(kernel=kernel, modules_dir=ROOT / ".build" / kernel, **cfg))


@contextmanager
def own_guest(config: pytest.Config, **cfg: Any) -> Iterator[Guest]:
    """A VM of the test's own, beside the session's, booted with the
    project's modules and @cfg (more of VMConfig's fields), and stopped
    afterwards."""
    g = _boot_own(config, **cfg)
    try:
        yield g
    finally:
        g.vm.cleanup()


@pytest.fixture(scope="module", autouse=True)
def leak_scan(vm_factory: VMs, request: pytest.FixtureRequest) -> Iterator[None]:
    """kmemleak over each test file's tests, once they are done: a scan
    takes 6-12 s of the debug kernel's time (it reads all of the guest's
    memory), which once per test was about 10 of the debug tier's 33 min.
    A leak fails the file's last test, with kmemleak's backtrace of the
    allocation."""
    yield
    g = vm_factory.current()
    if g is not None and not g.dead:
        leaks = g.take_leaks()
        depot = g.depot_pools() if g.debug_kernel else None
        if depot is not None:
            print(f"\nstack depot after {request.module.__name__}: {depot} pools of "
                  f"{DEPOT_POOLS_CAP}", flush=True)
            if depot >= DEPOT_POOLS_REBOOT:
                print("the next test boots a new VM", flush=True)
                vm_factory.retire()
        assert not leaks, (f"kmemleak after the tests of {request.module.__name__}:\n"
                           + "\n".join(leaks.splitlines()[:60]))
