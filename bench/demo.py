"""python3 -m bench demo: for each test kernel, boot the VM test bed, load
ssdsim (or fall back to the throttled NVMe device, and say so), run short
versions of every suite whose schedulers exist, write their reports and an
index page; print its path.

By default on the first test kernel (--all-kernels: each; --kernel: those
named).  The short versions take about 12 minutes per test kernel under
TCG; `python3 -m bench run ... --vm` runs any suite at full length in the
VM."""
from __future__ import annotations

import argparse
import datetime as dt
import json
import shutil
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from bench import prep, report, suites
from bench.args import parse
from bench.device import DeviceError
from bench.markdown import table
from bench.results import ResultsError
from bench.runner import RunError, fmt_secs
from bench.session import run_suite
from bench.target import Target, TargetError, VMTarget
from bench.vm import booted, build_modules, has_module, pick_device, test_kernels
from scripts.vmbed import VMError

ROOT = Path(__file__).resolve().parent.parent

#: a line of the index: (suite or step, its results folder, seconds, note)
Step = tuple[str, Path | None, float, str]
#: what runs after a suite's short run, on the same target: steps(target,
#: results folder, device), each step a Step
Steps = Callable[[Target, Path, str], list[Step]]


@dataclass(frozen=True)
class DemoSuite:
    suite: str
    args: tuple[str, ...]
    needs_module: str | None = None     # skipped when the VM lacks this module
    on_device: bool = True              # runs on the demo device (else its own)
    # ssdsim reloaded with these parameters for this suite and its steps
    # (when the demo device is ssdsim), then as it was
    ssdsim: tuple[tuple[str, str], ...] = ()
    # the steps after its run, on the same VM and device (from demo()'s
    # caller: python3 -m bench gives kyber-grid kyber-tune's, kybertune/demo.py)
    then: Steps | None = None


DEMO = (
    DemoSuite("k2", ("--ops", "read,randread,write,randwrite", "--bounds", "1,8,64",
                     "--occupancy", "empty,full", "--full-ops", "randread,randwrite",
                     "--full-bounds", "1,64", "--reps", "1", "--runtime", "2",
                     "--ramp", "0.5"), needs_module="k2-iosched"),
    DemoSuite("kyber-baseline", ("--reps", "2", "--runtime", "2", "--ramp", "0.5")),
    # on an instruction-counting clock (its own VM: Overhead.vm_config()),
    # where one vCPU makes 1 and 2 jobs the same measure and 2 repetitions
    # are plenty (a block's ratio varies by 0.1 %)
    DemoSuite("overhead", ("--icount", "3", "--jobs", "1", "--reps", "2", "--runtime", "1",
                           "--ramp", "0.3"), on_device=False),
    DemoSuite("flashfq", ("--scenarios", "a,b,c,d", "--tasks", "16", "--reps", "1",
                          "--runtime", "2", "--ramp", "0.5"), needs_module="flashfq-iosched"),
    DemoSuite("cars", ("--read-ratios", "0,50,100", "--flows", "2,4,8", "--reps", "1",
                       "--runtime", "3", "--ramp", "0.5"), needs_module="cars-iosched"),
    # then kyber-tune's verify and bench (DemoSuite.then).  Kyber
    # computes a percentile from 500 samples or 1 s of them, and the writes
    # queued before it throttles them stay: 3 s runs after a 0.5 s ramp gave
    # the reader the same P99 at every point (248-253 ms at time_scale 60,
    # 82-85 ms at 20), so no objective to keep.  At 20, with 3 s of ramp and
    # 4 measured, R1+W256's P99 is 11.1 ms at the best point against the
    # defaults' 87.6 (6.12)
    DemoSuite("kyber-grid", ("--read-us", "100,1000", "--write-us", "1000,100000",
                             "--write-through", "--reps", "1", "--runtime", "4",
                             "--ramp", "3"), ssdsim=(("time_scale", "20"),)),
)


# ssdsim slower than its default (20), so that its latencies stand well
# above the TCG host's scheduling hiccups (tens of ms), which otherwise decide
# a short run's p99.9
SSDSIM_TIME_SCALE = 60


@dataclass
class Done:
    kernel: str
    device: str
    note: str
    suites: list[Step] = field(default_factory=list)
    boot: float = 0.0


def demo(a: argparse.Namespace, then: Mapping[str, Steps] | None = None) -> int:
    """The demo @a asks for; @then: a suite's follow-up steps (DemoSuite.then),
    by suite."""
    t0 = time.monotonic()
    names = {s.suite for s in DEMO}
    bad = [x for x in (a.suites or "").split(",") if x and x not in names]
    if bad:
        print(f"demo: no demo suite {', '.join(bad)} (suites: {', '.join(sorted(names))})",
              file=sys.stderr)
        return 2
    kernels = a.kernel or (test_kernels() if a.all_kernels else test_kernels()[:1])
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%d-%H%M%S")
    top = Path(a.out) if a.out else ROOT / "results" / f"demo-{stamp}"
    top.mkdir(parents=True, exist_ok=True)
    print(f"demo: kernels {', '.join(kernels)}; results in {top}", flush=True)
    done: list[Done] = []
    for k in kernels:
        print(f"\n=== {k}: building the modules, booting the VM", flush=True)
        try:
            if not a.no_build:
                build_modules(k)
            _kernel(k, top, a.seed, done, a.suites.split(",") if a.suites else None, then)
        except (VMError, TargetError, DeviceError) as e:
            # no modules, or a VM that would not boot or answer: say so, go on
            msg = str(e).splitlines()[0]
            print(f"demo: {k}: {msg}", file=sys.stderr, flush=True)
            if not done or done[-1].kernel != k:
                done.append(Done(k, "?", ""))
            done[-1].suites.append(("(VM)", None, 0.0, f"FAILED: {msg}"))
    wall = time.monotonic() - t0
    index = write_index(top, done, wall)
    failed = [s for d in done for s in d.suites if s[3].startswith("FAILED")]
    print(f"\ndemo: {fmt_secs(wall)} in all"
          + (f"; {len(failed)} suite(s) FAILED" if failed else "")
          + f"\nreport: {index}", flush=True)
    return 1 if failed else 0


def _kernel(k: str, top: Path, seed: int, done: list[Done],
            only: list[str] | None = None, then: Mapping[str, Steps] | None = None) -> None:
    """Every demo suite (or those named in @only) on kernel @k, each followed
    by its steps in @then.  A suite during which the VM stops answering
    runs once more on a new VM; the rest go on there."""
    todo = [replace(s, then=(then or {}).get(s.suite, s.then))
            for s in DEMO if not only or s.suite in only]
    retried: set[DemoSuite] = set()
    d: Done | None = None
    while todo:
        # a VM as the next suite wants it (Suite.vm_config()), for it and
        # the suites after it that want the same
        cfg = _vm_config(todo[0])
        with booted(k, build=False, **cfg) as t:
            dev, note = pick_device(t, SSDSIM_TIME_SCALE)
            if note:
                t.notes["note"] = note
                print(f"demo: {note}", flush=True)
            if d is None:
                d = Done(k, dev, note, boot=t.vm.boot_seconds)
                done.append(d)
            while todo and _vm_config(todo[0]) == cfg:
                s = todo.pop(0)
                if not _run_one(t, s, k, dev, top, seed, d):
                    if s not in retried:
                        retried.add(s)
                        d.suites.pop()
                        todo.insert(0, s)
                        print(f"demo: the VM stopped answering; {s.suite} again on a new VM",
                              flush=True)
                    break


def _vm_config(s: DemoSuite) -> dict[str, Any]:
    """What the VM of demo suite @s must be (Suite.vm_config())."""
    return suites.get(s.suite).vm_config(parse(["run", s.suite, *s.args]))


def _run_one(t: VMTarget, s: DemoSuite, k: str, dev: str, top: Path, seed: int,
             d: Done) -> bool:
    """Run one demo suite; False if the VM stopped answering."""
    if s.needs_module and not has_module(t, s.needs_module):
        why = f"module {s.needs_module} is not built for {k}"
        print(f"demo: skipping {s.suite}: {why}", flush=True)
        d.suites.append((s.suite, None, 0.0, why))
        return True
    with prep.ssdsim_loaded_with(t, dev, dict(s.ssdsim) if dev.startswith("ssdsim") else {}):
        return _run_loaded(t, s, k, dev, top, seed, d)


def _run_loaded(t: VMTarget, s: DemoSuite, k: str, dev: str, top: Path, seed: int,
                d: Done) -> bool:
    """_run_one() once the device is as @s wants it."""
    out = top / k / s.suite
    if out.exists():
        shutil.rmtree(out)      # a failed attempt's partial folder
    argv = ["run", s.suite, "--short", "--seed", str(seed), "--out", str(out), *s.args]
    if s.on_device:
        argv += ["--device", dev]
    print(f"\n--- {k}: {s.suite}", flush=True)
    ts = time.monotonic()
    try:
        folder = run_suite(t, parse(argv), command=["python3", "-m", "bench", *argv])
    except (TargetError, DeviceError, RunError, ResultsError, ValueError) as e:
        print(f"demo: {s.suite} FAILED on {k}: {e}", file=sys.stderr, flush=True)
        d.suites.append((s.suite, out if (out / "manifest.json").exists() else None,
                         time.monotonic() - ts, f"FAILED: {str(e).splitlines()[0]}"))
        return t.answering
    d.suites.append((s.suite, folder, time.monotonic() - ts, ""))
    return _follow_up(t, s, k, dev, folder, d)


def _follow_up(t: VMTarget, s: DemoSuite, k: str, dev: str, folder: Path, d: Done) -> bool:
    """The steps after the suite's run (s.then); False if the VM stopped
    answering."""
    if s.then is None:
        return True
    name = s.then.__module__
    print(f"\n--- {k}: {s.suite}: {name}", flush=True)
    ts = time.monotonic()
    try:
        d.suites += s.then(t, folder, dev)
    except (TargetError, DeviceError, RunError, ResultsError, ValueError) as e:
        print(f"demo: {name} FAILED on {k}: {e}", file=sys.stderr, flush=True)
        d.suites.append((name, None, time.monotonic() - ts, f"FAILED: {str(e).splitlines()[0]}"))
        return t.answering
    return True


def write_index(top: Path, done: list[Done], wall: float) -> Path:
    lines = ["# Benchmark demo: the suites in the VM test bed\n",
             f"Short versions of every suite (`python3 -m bench demo`), {fmt_secs(wall)} in "
             "all, under QEMU (TCG) with 2 vCPUs (the overhead suite: one, on a clock that "
             "counts instructions): absolute numbers are the emulator's; the "
             "comparisons between schedulers within one run are the point. Each suite's "
             "report has its tables, plots, parameters and the exact fio job files.\n"]
    for d in done:
        lines.append(f"\n## Kernel {d.kernel}\n")
        lines.append(f"Device: `/dev/{d.device}`"
                     + (f". **{d.note}.**" if d.note else " (ssdsim).")
                     + f" VM booted in {d.boot:.1f} s.\n")
        if d.device.startswith("ssdsim"):
            ts = _time_scales(top / d.kernel)
            if ts:
                vals = list(ts.values())
                main = max(vals, key=vals.count)
                other = ", ".join(f"{s}: {v}" for s, v in ts.items() if v != main)
                lines.append(f"ssdsim time_scale = {main}" + (f" ({other})" if other else "")
                             + f": every device time is {main}× a real SSD's.\n")
        rows = []
        for s, f, secs, why in d.suites:
            link = ""
            if f is not None and (f / "report.md").exists():
                rel = f"{f.relative_to(top)}/report.md"
                link = f"[{rel}]({rel})"
            rows.append([s, fmt_secs(secs) if secs else "–",
                         "; ".join(x for x in (link, why) if x)])
        lines.append(table(["suite", "time", "report"], rows, "lll"))
        for s, f, _, why in d.suites:
            if f is not None and (f / "headline.md").exists():
                lines.append(f"\n### {s}{' (' + why + ')' if why else ''}\n\n"
                             + (f / "headline.md").read_text())
    path = top / "report.md"
    path.write_text("\n".join(lines))
    (top / "demo.json").write_text(json.dumps({"wall_seconds": wall, "kernels": [
        {"kernel": d.kernel, "device": d.device, "note": d.note, "boot": d.boot,
         "suites": [[s, str(f.relative_to(top)) if f else None, secs, why]
                    for s, f, secs, why in d.suites]} for d in done]}, indent=1) + "\n")
    return path


def is_demo_folder(folder: Path) -> bool:
    return (folder / "demo.json").is_file()


def rewrite(top: Path) -> Path:
    """Re-render a demo folder: each suite's report, then the index."""
    data = json.loads((top / "demo.json").read_text())
    done = []
    for k in data["kernels"]:
        d = Done(k["kernel"], k["device"], k["note"], boot=k["boot"])
        for s, f, secs, why in k["suites"]:
            folder = top / f if f else None
            if folder is not None and (folder / "manifest.json").exists():
                report.write(folder)
            d.suites.append((s, folder, secs, why))
        done.append(d)
    return write_index(top, done, data["wall_seconds"])


def _time_scales(folder: Path) -> dict[str, str]:
    """ssdsim's time_scale in each suite's run, by the suite's folder."""
    out = {}
    for mf in sorted(folder.glob("*/manifest.json")):
        d = json.loads(mf.read_text()).get("device", {})
        if d.get("kind") == "ssdsim":
            out[mf.parent.name] = str(d.get("module_params", {}).get("time_scale", ""))
    return out
