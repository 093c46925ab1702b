"""One `bench run`: device checks, schedulers, plan, execution, report."""
from __future__ import annotations

import argparse
import datetime as dt
import random
import sys
from pathlib import Path
from typing import Any, TextIO

from bench import device as devmod
from bench import report as reportmod
from bench import suites
from bench import trace as tracemod
from bench.device import DeviceError
from bench.runner import FORMAT, Cleanups, Manifest, RunContext, execute, now_iso
from bench.suites import Suite
from bench.target import Target

ROOT = Path(__file__).resolve().parent.parent


def durations(suite: Suite, args: argparse.Namespace) -> tuple[float, float, int]:
    runtime, ramp, reps = suite.short_durations if args.short else suite.durations
    if args.runtime is not None:
        runtime = args.runtime
    if args.ramp is not None:
        ramp = args.ramp
    if args.reps is not None:
        reps = args.reps
    if runtime <= 0 or ramp < 0 or reps < 1:
        raise ValueError("--runtime must be > 0, --ramp >= 0, --reps >= 1")
    return runtime, ramp, reps


def probe_schedulers(target: Target, dev: str, names: list[str]) -> dict[str, dict[str, Any]]:
    """Each elevator's queue depth (nr_requests) and default tunables on @dev."""
    info: dict[str, dict[str, Any]] = {}
    for name in names:
        devmod.set_scheduler(target, dev, "none")
        devmod.set_scheduler(target, dev, name)
        info[name] = {"nr_requests": devmod.nr_requests(target, dev),
                      "defaults": devmod.read_tunables(target, dev)}
    return info


def folder_for(args: argparse.Namespace, suite: Suite, dev: str) -> Path:
    if args.out:
        folder = Path(args.out)
    else:
        stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%d-%H%M%S")
        folder = Path(args.results_dir) / f"{suite.name}-{dev}-{stamp}"
    if (folder / "manifest.json").exists():
        raise FileExistsError(f"{folder} already holds results")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def run_suite(target: Target, args: argparse.Namespace, out: TextIO = sys.stdout,
              command: list[str] | None = None) -> Path:
    """Run args.suite on @target; the results folder (with report.md unless
    args.no_report)."""
    suite = suites.get(args.suite)
    runtime, ramp, reps = durations(suite, args)
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1 << 31)
    cleanups = Cleanups(out)
    notes: list[str] = []
    manifest: Manifest | None = None
    try:
        if suite.needs_device:
            if not args.device:
                raise DeviceError(f"suite {suite.name} needs --device (e.g. /dev/nvme0n1)")
            dev = devmod.resolve(target, args.device)
        else:
            dev, dnotes = suite.make_device(target, args, cleanups.add)
            notes += dnotes
        safety: dict[str, Any] = {"checked": False}
        if suite.writes and suite.needs_device:
            safety = devmod.check_device(target, dev, args.destroy_data, out)
        saved = devmod.save_state(target, dev)
        available = ["none"]
        for s in suite.schedulers:
            if s.name == "none":
                continue
            why = devmod.ensure_scheduler(target, dev, s.name, s.module, cleanups.add)
            if why is None:
                available.append(s.name)
            elif s.required:
                raise DeviceError(f"suite {suite.name} needs elevator {s.name}: {why}")
            else:
                notes.append(f"{s.name} not measured: {why}")
        cleanups.add(*devmod.restorer(target, saved))
        sched_info = probe_schedulers(target, dev, [s for s in available if s != "none"])
        devmod.set_scheduler(target, dev, "none")
        info = devmod.info(target, dev)
        info.scheduler = saved.scheduler
        info.given = args.device if suite.needs_device else dev
        ctx = RunContext(target=target, device=info, args=args, cleanups=cleanups,
                         sched_info=sched_info, notes=notes, out=out)
        ctx.params = {"runtime": runtime, "ramp": ramp, "reps": reps}
        plan = suite.plan(ctx)
        measured = list(dict.fromkeys(c.scheduler for c in plan.configs()))
        record = list(dict.fromkeys(e for c in plan.configs() for e in c.record_events))
        ctx.tracing = tracemod.setup(target, args.trace, args.trace_events or "",
                                     args.trace_buffer_kb, measured, info.kind, record,
                                     cleanups.add,
                                     keep=any(c.keep_trace for c in plan.configs()))
        if ctx.tracing is not None:
            plan.notes += ctx.tracing.notes
            plan.params["trace"] = ctx.tracing.describe()
        folder = folder_for(args, suite, dev)
        n = len(plan.configs()) * reps
        print(f"{suite.name} on /dev/{dev} ({info.model}, {target.name()}, kernel "
              f"{target.describe().get('kernel')}): {n} runs, results in {folder}",
              file=out, flush=True)
        if ctx.tracing is not None and ctx.tracing.save:
            print(f"tracing with {ctx.tracing.tracer.kind}: "
                  + ", ".join(map(str, ctx.tracing.events)), file=out, flush=True)
        manifest = Manifest(folder, {
            "format": FORMAT, "suite": suite.name, "title": suite.title,
            "status": "planned", "command": command or sys.argv,
            "created": now_iso(), "target": target.describe(), "device": info.as_dict(),
            "safety": safety,
            "params": {"runtime": runtime, "ramp": ramp, "reps": reps, "seed": seed,
                       "ioengine": args.ioengine, "short": bool(args.short),
                       "pin": not args.no_pin, **plan.params},
            "schedulers": sched_info, "notes": notes + plan.notes, "phases": {},
            "runs": []})
        execute(ctx, plan, folder, manifest, reps, seed, suite.brief)
    finally:
        restored = cleanups.run()
        target.remove_tmpdir()
        if manifest is not None:
            manifest.data["restored"] = restored
            manifest.save()
            # also after Ctrl-C or an error: a report of what completed
            if not args.no_report and manifest.data["runs"]:
                try:
                    path = reportmod.write(manifest.folder)
                    print(f"report: {path}", file=out, flush=True)
                except Exception as e:  # noqa: BLE001 - never mask the run's own outcome
                    print(f"no report: {e}", file=out, flush=True)
    assert manifest is not None
    return manifest.folder
