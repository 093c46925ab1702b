"""Where the benchmarks run: this machine, or the VM test bed.

Every suite talks to a Target only through shell scripts (`run`) and files
(`read_file`, `write_file`), so the same suite drives /dev/nvme0n1 of a real
box (LocalTarget: subprocess) and /dev/ssdsim0 in the VM (VMTarget: the
guest's busybox shell through scripts/vmbed.py).  The guest has no Python, so
scripts stay POSIX sh that busybox understands.
"""
from __future__ import annotations

import base64
import os
import shlex
import signal
import socket
import subprocess
import time
from abc import ABC, abstractmethod
from pathlib import Path
from typing import TYPE_CHECKING, Any

from scripts.vmbed import Result, VMError, describe_accel

if TYPE_CHECKING:
    from scripts.vmbed import VM

ROOT = Path(__file__).resolve().parent.parent


class TargetError(RuntimeError):
    """A command on the target failed in a way the benchmark cannot go on from."""


def q(s: object) -> str:
    """Shell-quote a value for a target script."""
    return shlex.quote(str(s))


class Target(ABC):
    """A machine that runs shell scripts and fio."""

    #: where scratch files (job files, fio output) go on the target
    tmpdir: str = "/tmp/bench"

    @abstractmethod
    def run(self, script: str, timeout: float = 300.0) -> Result:
        """Run a POSIX sh script; its exit status and its stdout+stderr."""

    @abstractmethod
    def read_file(self, path: str) -> bytes:
        """A file's contents."""

    @abstractmethod
    def write_file(self, path: str, data: bytes) -> None:
        """Create or replace a file."""

    @abstractmethod
    def describe(self) -> dict[str, str]:
        """kind, kernel, host, cpus, fio version ... for the manifest."""

    @property
    @abstractmethod
    def is_local(self) -> bool:
        """True when the target is this machine (so the host's .build is its)."""

    @property
    def answering(self) -> bool:
        """False once the target is known to be gone (a VM that stopped
        answering): cleanups that need it are then skipped."""
        return True

    def host_times(self) -> dict[str, Any] | None:
        """For a VM, what the host has given it so far (scripts/vmbed.py
        VM.host_times()); None for a machine that is its own host."""
        return None

    def check(self, script: str, timeout: float = 300.0, what: str = "") -> str:
        """Run a script that must succeed; its output."""
        r = self.run(script, timeout)
        if r.rc != 0:
            raise TargetError(f"{what or 'command'} failed (exit {r.rc}) on {self.name()}:\n"
                              f"  {script.strip()}\n  {r.out.strip()}")
        return r.out

    def remove_tmpdir(self) -> None:
        """Remove the scratch files (best effort: also when the target is gone)."""
        try:
            self.run(f"rm -rf {q(self.tmpdir)}")
        except TargetError:
            pass

    def clock(self) -> float:
        """The target's monotonic clock, in seconds (a VM's own clock: with
        --icount it counts the guest's instructions, not the host's time)."""
        out = self.check("cut -d' ' -f1 /proc/uptime", what="reading the clock")
        try:
            return float(out.strip())
        except ValueError:
            raise TargetError(f"/proc/uptime on {self.name()}: {out.strip()[:80]!r}") from None

    def sleep(self, seconds: float) -> None:
        """Wait @seconds of the target's clock (clock())."""
        self.check(f"sleep {seconds:g}", timeout=seconds + 60, what="sleeping")

    def name(self) -> str:
        return self.describe().get("kind", type(self).__name__)

    def kernel(self) -> str:
        return self.check("uname -r").strip()

    def ncpus(self) -> int:
        out = self.check("grep -c ^processor /proc/cpuinfo").strip()
        return max(1, int(out))

    def _common_description(self) -> dict[str, str]:
        r = self.run("uname -r; uname -n; grep -c ^processor /proc/cpuinfo; "
                     "fio --version 2>/dev/null || echo 'no fio'; "
                     "sed -n 's/^model name[^:]*: *//p' /proc/cpuinfo | head -n1")
        lines = (r.out.splitlines() + [""] * 5)[:5]
        return {"kernel": lines[0], "host": lines[1], "cpus": lines[2],
                "fio": lines[3], "cpu_model": lines[4]}


class LocalTarget(Target):
    """This machine.  Scripts run under /bin/sh in their own session, so a
    Ctrl-C reaches the runner first, which stops them before restoring the
    device."""

    def __init__(self, tmpdir: str | None = None):
        self.tmpdir = tmpdir or f"/tmp/bench-{os.getpid()}"
        self._desc: dict[str, str] | None = None

    @property
    def is_local(self) -> bool:
        return True

    def run(self, script: str, timeout: float = 300.0) -> Result:
        p = subprocess.Popen(["/bin/sh", "-c", script], stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                             start_new_session=True)
        try:
            out, _ = p.communicate(timeout=timeout)
        except BaseException as e:  # timeout, Ctrl-C: stop the whole group
            _stop_group(p)
            if isinstance(e, subprocess.TimeoutExpired):
                return Result(124, f"timed out after {timeout:.0f} s: {script.strip()[:200]}")
            raise
        return Result(p.returncode, out.decode(errors="replace"))

    def clock(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)

    def read_file(self, path: str) -> bytes:
        try:
            return Path(path).read_bytes()
        except OSError as e:
            raise TargetError(f"cannot read {path}: {e.strerror}") from e

    def write_file(self, path: str, data: bytes) -> None:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_bytes(data)

    def describe(self) -> dict[str, str]:
        if self._desc is None:
            self._desc = {"kind": "local", **self._common_description()}
        return self._desc


def _stop_group(p: subprocess.Popen[bytes]) -> None:
    """SIGINT the script's process group (fio then exits cleanly), SIGKILL
    it if it does not go within 10 s."""
    for sig, wait in ((signal.SIGINT, 10.0), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(p.pid, sig)
        except ProcessLookupError:
            pass
        try:
            p.wait(wait)
            return
        except subprocess.TimeoutExpired:
            continue


class VMTarget(Target):
    """A running scripts/vmbed.py VM (e.g. the VM tests' `guest.vm`)."""

    def __init__(self, vm: VM, notes: dict[str, str] | None = None):
        self.vm = vm
        self.notes = dict(notes or {})
        self._desc: dict[str, str] | None = None

    @property
    def is_local(self) -> bool:
        return False

    @property
    def answering(self) -> bool:
        return not self.vm.dead

    def run(self, script: str, timeout: float = 300.0) -> Result:
        try:
            return self.vm.run(script, timeout)
        except (VMError, OSError, socket.error) as e:
            raise TargetError(f"the VM stopped answering: {e}") from e

    def read_file(self, path: str) -> bytes:
        r = self.run(f"base64 {q(path)}")
        if r.rc != 0:
            raise TargetError(f"cannot read {path} in the VM: {r.out.strip()}")
        return base64.b64decode(r.out)

    def write_file(self, path: str, data: bytes) -> None:
        b64 = base64.b64encode(data).decode()
        lines = "\n".join(b64[i:i + 76] for i in range(0, len(b64), 76))
        d = os.path.dirname(path) or "/"
        self.check(f"mkdir -p {q(d)} && base64 -d > {q(path)} <<'EOF'\n{lines}\nEOF",
                   what=f"writing {path}")

    def host_times(self) -> dict[str, Any] | None:
        return self.vm.host_times()

    def describe(self) -> dict[str, str]:
        if self._desc is None:
            cfg = self.vm.cfg
            self._desc = {"kind": f"vm (QEMU {describe_accel(cfg)}, {cfg.smp} vCPUs, "
                                  f"{cfg.mem_mb} MiB)", **self._common_description()}
        return {**self._desc, **self.notes}


def host_window(before: dict[str, Any] | None, after: dict[str, Any] | None
                ) -> dict[str, float] | None:
    """What the host gave a VM between two host_times() samples: the
    window's length ("seconds"), QEMU's CPU time in it ("qemu_s"), its vCPU
    threads' summed ("vcpu_s") and the host's steal time over its CPUs
    ("steal_s"), in s; None without both samples.  Divided by the window,
    the first two are host CPUs: a VM whose vCPUs got less of the host
    than in another run shows it there."""
    if before is None or after is None:
        return None
    vcpus = sum(after["vcpus"].values()) - sum(
        before["vcpus"].get(k, 0.0) for k in after["vcpus"])
    return {"seconds": round(after["clock"] - before["clock"], 3),
            "qemu_s": round(after["qemu"] - before["qemu"], 3),
            "vcpu_s": round(vcpus, 3),
            "steal_s": round(after["steal"] - before["steal"], 3)}
