"""VM suites: one VM per kernel and pytest session, rebooted if a test kills it.

Run through tests/run (which builds the modules first), or directly:
    python3 -m pytest tests/vm --kernel 6.1.0-56-cloud-amd64
"""
from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from bench import fio  # noqa: E402
from scripts.vmbed import VM, VMConfig, VMError  # noqa: E402

# Kernel log lines that fail the test during which they appeared.
BAD_DMESG = re.compile(
    r"WARNING:|BUG:|Oops|Call Trace|general protection|kernel BUG|"
    r"blocked for more than|hung_task|soft lockup|rcu_sched self-detected|"
    r"list_(add|del) corruption|UBSAN|KASAN|refcount_t:")


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
    def dead(self) -> bool:
        return self.vm.dead

    def run(self, script: str, timeout: float = 300) -> Any:
        return self.vm.run(script, timeout)

    def sh(self, script: str, timeout: float = 300) -> str:
        return self.vm.check(script, timeout)

    def fio(self, args: str, timeout: float = 300, ok: bool = True) -> dict[str, Any]:
        """Run fio (arguments as on its command line) and return its JSON."""
        r = self.vm.run(f"fio --output-format=json --output=/tmp/fio.json {args}", timeout)
        text = self.vm.read_file("/tmp/fio.json").decode(errors="replace")
        if ok and r.rc != 0:
            raise AssertionError(f"fio {args} failed (exit {r.rc}):\n{r.out}\n{text[-2000:]}")
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

    def set_attr(self, dev: str, name: str, value: object) -> None:
        self.sh(f"echo {value} > /sys/block/{dev}/queue/iosched/{name}")
        assert self.attr(dev, name) == str(value)

    def load(self, module: str) -> None:
        self.sh(f"modprobe {module}")

    def take_dmesg(self) -> list[str]:
        """Kernel log lines since the last call that indicate a kernel problem."""
        out = self.sh("dmesg -c")
        return [ln for ln in out.splitlines() if BAD_DMESG.search(ln)]


@pytest.fixture(scope="session")
def vm_factory(request: pytest.FixtureRequest) -> Iterator[Any]:
    kernel = _kernel(request.config)
    state: dict[str, Any] = {"vm": None, "guest": None}

    def get() -> Guest:
        g = state["guest"]
        if g is None or g.dead:
            if state["vm"] is not None:
                state["vm"].cleanup()
            for attempt in range(5):
                vm = VM(VMConfig(kernel=kernel, modules_dir=ROOT / ".build" / kernel))
                state["vm"] = vm
                vm.start()
                try:
                    g = Guest(vm)
                    break
                except DeviceOrderError:
                    vm.cleanup()
                    state["vm"] = None
                    if attempt == 4:
                        raise
            g.sh("dmesg -c >/dev/null")
            state["guest"] = g
        return g

    yield get
    if state["vm"] is not None:
        state["vm"].cleanup()


@pytest.fixture
def guest(vm_factory: Any) -> Iterator[Guest]:
    """The VM, with a check that the test left the kernel log clean."""
    g: Guest = vm_factory()
    yield g
    if not g.dead:
        bad = g.take_dmesg()
        assert not bad, "kernel log during this test:\n" + "\n".join(bad[:30])
