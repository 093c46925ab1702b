"""The benchmarks in the VM test bed: build the modules, boot, pick the device."""
from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from bench import device as devmod
from bench.target import VMTarget
from scripts.vmbed import VM, VMConfig, VMError

ROOT = Path(__file__).resolve().parent.parent
THROTTLED_NOTE = ("ssdsim is not built for this kernel yet, so the suites ran on the VM's "
                  "throttled NVMe device (QEMU NVMe, backing file throttled to {iops} IOPS "
                  "so that requests queue inside the device): a stand-in, not an SSD model")


def test_kernels() -> list[str]:
    """The test kernels' releases (scripts/kernels test)."""
    r = subprocess.run([str(ROOT / "scripts" / "kernels"), "test"], capture_output=True,
                       text=True)
    if r.returncode != 0 or not r.stdout.split():
        raise VMError(f"no test kernel installed (run scripts/setup): {r.stderr.strip()}")
    return r.stdout.split()


def build_modules(kernel: str) -> Path:
    r = subprocess.run(["make", "-s", "-C", str(ROOT), f"KVER={kernel}", "modules"],
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise VMError(f"building the modules for {kernel} failed:\n"
                      + (r.stdout + r.stderr)[-3000:])
    return ROOT / ".build" / kernel


def build_lttng(kernel: str) -> None:
    """LTTng's kernel tracer and the project's probes into .build/<kernel>/lttng/
    (the VM takes every module there)."""
    r = subprocess.run(["make", "-s", "-C", str(ROOT), f"KVER={kernel}", "lttng-probes"],
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise VMError(f"building LTTng's modules for {kernel} failed:\n"
                      + (r.stdout + r.stderr)[-3000:])


@contextmanager
def booted(kernel: str, build: bool = True, attempts: int = 2,
           **cfg: Any) -> Iterator[VMTarget]:
    """A VM of @kernel with the project's modules, as a Target; @cfg:
    other VMConfig fields (a suite's vm_config()).  A VM that does not
    answer its first command is booted again (@attempts in all)."""
    mods = build_modules(kernel) if build else ROOT / ".build" / kernel
    for attempt in range(1, attempts + 1):
        vm = VM(VMConfig(kernel=kernel, modules_dir=mods if mods.is_dir() else None, **cfg))
        try:
            vm.start()
            vm.run("true", timeout=30)
            break
        except VMError as e:
            _dispose(vm)
            if attempt == attempts:
                raise
            print(f"bench: the VM did not answer ({str(e).splitlines()[0]}); booting again",
                  flush=True)
        except BaseException:
            _dispose(vm)
            raise
    try:
        yield VMTarget(vm)
    finally:
        _dispose(vm)


def _dispose(vm: VM) -> None:
    if os.environ.get("VM_KEEP"):
        vm.stop()
        print(f"bench: kept the VM's files in {vm.workdir}")
    else:
        vm.cleanup()


def has_module(t: VMTarget, module: str) -> bool:
    return module in t.vm.modules


def pick_device(t: VMTarget, time_scale: int | None = None) -> tuple[str, str]:
    """ssdsim0 when the ssdsim module was built (loaded here, with
    @time_scale if given), otherwise the throttled NVMe device; the device
    and a note for the report ('' for ssdsim)."""
    if has_module(t, "ssdsim"):
        devmod.load_module(t, "ssdsim", f"time_scale={time_scale}" if time_scale else "")
        return "ssdsim0", ""
    dev = t.check("readlink /dev/vm-throttled").strip().removeprefix("/dev/")
    return dev, THROTTLED_NOTE.format(iops=t.vm.cfg.throttle_iops)
