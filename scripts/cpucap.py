"""Hold a command's processes a little below the machine's CPUs (scripts/cpucap).

The test hosts are virtual machines with 2 vCPUs.  When this project keeps
both busy (make check's two lanes, each with a QEMU), the hypervisor under
them stops the whole machine for about 100 ms, five times a minute: three
busy loops beside a sleeping probe measured 10 gaps of 101-105 ms in 120 s
(and 220 ticks of steal time).  A TCG guest counts such a stop as time: a
read in flight takes 100 ms more, a throttled drive serves a burst after
it, and the VM tiers' timing tests failed on it in CI (RT p99.9 of 69.7 ms
at bound 1, where 7 ms is usual).  The same loops held to 1.9 CPUs in 10 ms
periods (the kernel's CFS bandwidth control, in a cgroup of their own)
measured no gap over 40 ms in 300 s: the hypervisor no longer steps in,
and our own throttling pauses the group for at most 0.5 ms a period.  It
costs at most 5 % of the CPU.

The group is ssd-iosched-cap under the caller's cpu cgroup (v1's cpu
controller, or v2's where cpu is enabled); runs at once share it, as they
share the CPUs.  Where no cgroup can be written (not root, no cpu
controller), the command runs as it is and a line says so.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

GROUP = "ssd-iosched-cap"
FRACTION = 0.95
PERIOD_US = 10_000


@dataclass(frozen=True)
class Cap:
    """A cpu cgroup directory and the interface version that runs it."""
    path: Path
    v2: bool


def parse_fraction(raw: str) -> float:
    """CPUCAP_FRACTION's value: a number in (0, 1], or 0 for off;
    ValueError otherwise."""
    try:
        fraction = float(raw)
    except ValueError:
        raise ValueError(f"CPUCAP_FRACTION {raw!r}: not a number") from None
    if fraction != 0 and not 0 < fraction <= 1:
        raise ValueError(f"fraction {fraction}: not in (0, 1]")
    return fraction


def quota_us(cpus: int, fraction: float, period_us: int) -> int:
    """The CFS quota per period for fraction of cpus (at least 1 ms, the
    kernel's minimum)."""
    if not 0 < fraction <= 1:
        raise ValueError(f"fraction {fraction}: not in (0, 1]")
    return max(1000, round(cpus * fraction * period_us))


def _own_cgroup(proc_cgroup: str, controller: str | None) -> str:
    """This process's cgroup path for controller (None: the v2 hierarchy),
    from /proc/self/cgroup's text."""
    for line in proc_cgroup.splitlines():
        _, ctrls, path = line.split(":", 2)
        if (controller is None and ctrls == "") or \
                (controller is not None and controller in ctrls.split(",")):
            return path
    return "/"


def find(mountinfo: str, proc_cgroup: str, root: Path = Path("/")) -> Cap | None:
    """Where to make the group: under this process's cgroup of a mounted v1
    cpu controller, else of a v2 hierarchy that offers cpu.  root prefixes
    every path (tests)."""
    v2 = None
    for line in mountinfo.splitlines():
        fields = line.split(" - ")
        if len(fields) != 2:
            continue
        mnt = fields[0].split()[4]
        fstype, _, opts = fields[1].split()[:3]
        if fstype == "cgroup" and "cpu" in opts.split(","):
            own = _own_cgroup(proc_cgroup, "cpu").lstrip("/")
            return Cap(root / mnt.lstrip("/") / own / GROUP, v2=False)
        if fstype == "cgroup2" and v2 is None:
            base = root / mnt.lstrip("/") / _own_cgroup(proc_cgroup, None).lstrip("/")
            ctrls = base / "cgroup.controllers"
            if ctrls.exists() and "cpu" in ctrls.read_text().split():
                v2 = Cap(base / GROUP, v2=True)
    return v2


def apply(cap: Cap, pid: int, cpus: int, fraction: float = FRACTION,
          period_us: int = PERIOD_US) -> int:
    """Make the group, set its quota, move process pid into it; returns the
    quota in microseconds a period.  OSError when the cgroup refuses."""
    q = quota_us(cpus, fraction, period_us)
    if cap.v2:
        # a v2 group's cpu interface exists once its parent enables it
        ctl = cap.path.parent / "cgroup.subtree_control"
        if "cpu" not in ctl.read_text().split():
            ctl.write_text("+cpu")
        cap.path.mkdir(exist_ok=True)
        (cap.path / "cpu.max").write_text(f"{q} {period_us}")
    else:
        cap.path.mkdir(exist_ok=True)
        # no quota while the period changes: a new period must not make an
        # old quota exceed the parent's
        (cap.path / "cpu.cfs_quota_us").write_text("-1")
        (cap.path / "cpu.cfs_period_us").write_text(str(period_us))
        (cap.path / "cpu.cfs_quota_us").write_text(str(q))
    (cap.path / "cgroup.procs").write_text(str(pid))
    return q


def cap_self(fraction: float = FRACTION, period_us: int = PERIOD_US) -> str:
    """Move this process (and so what it starts) into the group; returns the
    line to print: what was done, or why nothing was."""
    if fraction == 0:
        return "cpucap: off (CPUCAP_FRACTION=0)"
    cpus = os.cpu_count() or 1
    try:
        cap = find(Path("/proc/self/mountinfo").read_text(),
                   Path("/proc/self/cgroup").read_text())
        if cap is None:
            return "cpucap: no cpu cgroup controller is mounted; running uncapped"
        q = apply(cap, os.getpid(), cpus, fraction, period_us)
    except OSError as e:
        return f"cpucap: cannot use a cpu cgroup ({e}); running uncapped"
    return (f"cpucap: at most {q / period_us:.2f} of {cpus} CPUs in {period_us // 1000} ms "
            f"periods ({cap.path}; CPUCAP_FRACTION=0 turns it off)")
