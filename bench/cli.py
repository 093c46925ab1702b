"""python3 -m bench: run benchmark suites, write reports, combine the overhead
suite's boots, select K2 bounds, calibrate FlashFQ's cost model and CARS's
device model, and the VM demonstration."""
from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench import suites
from bench.args import ROOT, parse

if TYPE_CHECKING:
    from bench.demo import Steps
    from bench.target import Target


@contextmanager
def target_for(a: argparse.Namespace) -> Iterator[Target]:
    """This machine, or with --vm a booted VM test bed (ssdsim loaded when
    the device is ssdsim), configured as @a's suite asks (vm_config()), or
    with a.icount set its clock counting instructions."""
    from bench.target import LocalTarget
    if not a.vm:
        yield LocalTarget()
        return
    from bench.vm import booted, test_kernels
    kernel = a.kernel or test_kernels()[0]
    if getattr(a, "trace", None) == "lttng":
        from bench.vm import build_lttng
        build_lttng(kernel)
    cfg: dict[str, Any] = {}
    if getattr(a, "suite", None):
        cfg = suites.get(a.suite).vm_config(a)
    elif getattr(a, "icount", None) is not None:
        cfg = {"icount": a.icount}
    with booted(kernel, build=True, **cfg) as target:
        if getattr(a, "device", None) and a.device.lstrip("/").removeprefix("dev/").startswith(
                "ssdsim"):
            from bench import device as devmod
            devmod.load_module(target, "ssdsim", getattr(a, "ssdsim", "") or "")
        yield target


def cmd_run(a: argparse.Namespace, argv: Sequence[str]) -> int:
    from bench.session import run_suite
    with target_for(a) as target:
        run_suite(target, a, command=["python3", "-m", "bench", *argv])
    return 0


def cmd_calibrate(a: argparse.Namespace) -> int:
    from bench.calibrate import calibrate
    from bench.device import DeviceError
    if not a.device:
        raise DeviceError(f"calibrate {a.scheduler} needs --device (e.g. /dev/nvme0n1)")
    if a.probe and a.scheduler != "cars":
        raise DeviceError("--probe applies to calibrate cars")
    with target_for(a) as target:
        calibrate(target, a.scheduler, a.device, a.destroy_data, a.runtime, a.ramp,
                  iodepth=a.iodepth, probed=a.probe)
    return 0


def cmd_select(a: argparse.Namespace) -> int:
    from bench import results
    res = results.load(a.results)
    suite = suites.get(res.suite)
    if not suite.has_select():
        print(f"bench: select applies to k2 results; {a.results} holds {res.suite}",
              file=sys.stderr)
        return 2
    from bench.suites.k2 import K2Suite
    assert isinstance(suite, K2Suite)
    print(f"K2 objective selection, alpha = {a.alpha:g} %, beta = {a.beta:g} % "
          f"({a.results}, kernel {res.manifest['target'].get('kernel')}, "
          f"/dev/{res.manifest['device']['name']})\n")
    print(suite.select_table(res, a.alpha, a.beta))
    return 0


def cmd_boots(a: argparse.Namespace) -> int:
    from bench import results
    from bench.suites.overhead import boots_report
    text = boots_report([results.load(r) for r in a.results])
    if a.out:
        try:
            Path(a.out).write_text(text)
        except OSError as e:
            raise ValueError(f"--out {a.out}: {e.strerror}") from e
    print(text, end="")
    return 0


def main(argv: Sequence[str] | None = None,
         demo_steps: Mapping[str, Steps] | None = None) -> int:
    """The command line @argv (default: sys.argv's); @demo_steps: what
    `demo` runs after a suite's run, by suite (bench.demo.DemoSuite.then)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    a = parse(argv)
    from bench.device import DeviceError
    from bench.results import ResultsError
    from bench.runner import RunError
    from bench.target import TargetError
    from scripts.vmbed import VMError
    try:
        if a.cmd == "list":
            for n, s in sorted(suites.all_suites().items()):
                print(f"{n:16s}{s.description}")
            return 0
        if a.cmd == "run":
            return cmd_run(a, argv)
        if a.cmd == "report":
            from bench import demo, report
            for r in a.results:
                print(demo.rewrite(Path(r)) if demo.is_demo_folder(Path(r)) else report.write(r))
            return 0
        if a.cmd == "select":
            return cmd_select(a)
        if a.cmd == "boots":
            return cmd_boots(a)
        if a.cmd == "calibrate":
            return cmd_calibrate(a)
        if a.cmd == "demo":
            from bench.demo import demo
            return demo(a, demo_steps)
    except KeyboardInterrupt:
        print("bench: interrupted", file=sys.stderr)
        return 130
    except (DeviceError, RunError, TargetError, ResultsError, VMError, ValueError,
            FileExistsError) as e:
        print(f"bench: {e}", file=sys.stderr)
        return 1
    return 2
