"""The benchmark runner: configurations in seeded random order, repeated;
for each, the scheduler and its tunables through sysfs (read back), then fio
with JSON output; everything into a results folder with a manifest.

Results folder (results/<suite>-<device>-<UTC time>/):
  manifest.json   suite, target (kernel, host, fio), device (model, size,
                  queue depth, ssdsim/null_blk parameters), parameters,
                  seed and order, schedulers' queue depths, notes, and one
                  record per run (configuration, repetition, labels,
                  tunables as read back, files, times; in the VM bed what
                  the host gave QEMU during the run: bench/target.py
                  host_window()); rewritten after each run, so an
                  interrupted run can still be reported
  runs/NNN-<key>.fio   the exact job file of run NNN
  runs/NNN-<key>.json  fio's raw JSON output
  runs/NNN-<key>.log   fio's stdout/stderr
  runs/NNN-<key>.trace.txt.gz  with --trace ftrace: the events of that run
                               (text, gzip'd); also a configuration's
                               record_events with keep_trace
  runs/NNN-<key>.lttng/        with --trace lttng: its CTF trace
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import random
import re
import signal
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any, TextIO

from bench import device as devmod
from bench import fio
from bench.device import DeviceError, DeviceInfo
from bench.target import Target, TargetError, host_window, q

if TYPE_CHECKING:
    from bench.trace import Tracing

FORMAT = 1
Label = str | int | float


class RunError(RuntimeError):
    """fio failed, or a configuration could not be applied."""


@dataclass(frozen=True)
class Config:
    """One measured configuration: a scheduler, its tunables, a job file."""
    key: str                              # unique in the plan, e.g. empty/randread/k2-8
    scheduler: str
    jobfile: str
    seconds: float                        # expected fio wall time (ramp + runtime)
    tunables: tuple[tuple[str, Label], ...] = ()
    labels: tuple[tuple[str, Label], ...] = ()
    #: trace events (SYS or SYS:EVENT) recorded into the ftrace ring buffer
    #: during this run and, unless @keep_trace, not kept: what tracing costs
    #: (overhead --traced)
    record_events: tuple[str, ...] = ()
    #: save this run's trace beside it (runs/NNN-<key>.trace.txt.gz, the run's
    #: manifest `trace` entry naming it) as --trace saves every run's
    keep_trace: bool = False
    #: fio's --output-format: "json+" adds each job's latency histogram
    fio_output: str = "json"
    #: tunables known only right before the run (read from the device then,
    #: after the phase's settle), written before @tunables
    live_tunables: Callable[[RunContext], tuple[tuple[str, Label], ...]] | None = None

    def label(self, name: str) -> Label:
        return dict(self.labels)[name]


@dataclass
class Phase:
    """Configurations that run together after one device set-up (e.g. the
    device preconditioned full).  Blocks are the unit of randomisation:
    usually one configuration each; the overhead suite's none/X/X/none
    sequences are blocks of four that keep their inner order."""
    name: str
    blocks: list[list[Config]]
    setup: Callable[[RunContext], dict[str, Any]] | None = None
    describe: str = ""
    #: runs before each configuration, e.g. to let the device finish the
    #: writes the previous one left in its cache
    settle: Callable[[RunContext], None] | None = None


@dataclass
class Plan:
    phases: list[Phase]
    notes: list[str] = field(default_factory=list)
    params: dict[str, Any] = field(default_factory=dict)   # suite parameters to record

    def configs(self) -> list[Config]:
        return [c for ph in self.phases for b in ph.blocks for c in b]


@dataclass
class RunContext:
    """What a suite's plan and phase set-ups see."""
    target: Target
    device: DeviceInfo
    args: argparse.Namespace                     # the parsed command line
    cleanups: Cleanups
    sched_info: dict[str, dict[str, Any]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    out: TextIO = sys.stdout
    params: dict[str, Any] = field(default_factory=dict)   # runtime, ramp, reps
    state: dict[str, Any] = field(default_factory=dict)    # the suite's own
    tracing: Tracing | None = None                          # --trace, or record_events

    @property
    def dev(self) -> str:
        return self.device.name

    def say(self, msg: str) -> None:
        print(msg, file=self.out, flush=True)

    def on_exit(self, what: str, fn: Callable[[], None]) -> None:
        """Register a clean-up that runs at the end, even after Ctrl-C."""
        self.cleanups.add(what, fn)


def order(plan: Plan, reps: int, seed: int) -> list[tuple[Phase, int, list[Config]]]:
    """Phases in their order; inside each, every (block, repetition) in an
    order shuffled by @seed.  Returns (phase, repetition, block) triples."""
    rng = random.Random(seed)
    out: list[tuple[Phase, int, list[Config]]] = []
    for ph in plan.phases:
        units = [(rep, b) for rep in range(reps) for b in ph.blocks]
        rng.shuffle(units)
        out += [(ph, rep, b) for rep, b in units]
    return out


def safe_key(key: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.+-]+", "_", key)


def fmt_secs(s: float) -> str:
    s = max(0, int(round(s)))
    if s >= 3600:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    if s >= 60:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s}s"


def now_iso() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


class Manifest:
    """manifest.json, rewritten atomically as the run goes."""

    def __init__(self, folder: Path, data: dict[str, Any]):
        self.folder = folder
        self.data = data
        self.save()

    def save(self) -> None:
        tmp = self.folder / "manifest.json.tmp"
        tmp.write_text(json.dumps(self.data, indent=1, sort_keys=False) + "\n")
        tmp.replace(self.folder / "manifest.json")


@contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    def handler(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt
    old = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)


@contextmanager
def no_interrupts() -> Iterator[None]:
    """Ignore Ctrl-C while the device is being put back."""
    old = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, old)


def apply(ctx: RunContext, c: Config) -> dict[str, str]:
    """Select the configuration's scheduler, write its tunables, read them
    back; the values read back.  A scheduler that is already selected is
    selected again when tunables follow, so that each configuration starts
    from the elevator's defaults.  Live tunables are asked for now and
    written first."""
    t, dev = ctx.target, ctx.dev
    live = c.live_tunables(ctx) if c.live_tunables is not None else ()
    cur = devmod.current_scheduler(t, dev)
    if cur != c.scheduler or c.tunables or live:
        if cur == c.scheduler and cur != "none":
            devmod.set_scheduler(t, dev, "none")
        devmod.set_scheduler(t, dev, c.scheduler)
    return {k: devmod.set_tunable(t, dev, k, v) for k, v in (*live, *c.tunables)}


JSON_MARK = "@@bench: fio json@@"


def run_fio(target: Target, jobfile: str, timeout: float, remote_base: str,
            start: str = "", stop: str = "", output: str = "json") -> tuple[int, str, str]:
    """Run a job file on the target: (exit status, fio's JSON text, its log).
    One round trip: write the job file, run fio, print its log and JSON.
    @start and @stop (shell text: a tracer's) run right before and after fio;
    @output is fio's output format, json or json+ (with latency histograms)."""
    if output not in ("json", "json+"):
        raise ValueError(f"fio output format {output!r}: json or json+")
    job = remote_base + ".fio"
    out = remote_base + ".json"
    if "\nEOF\n" in f"\n{jobfile}\n":
        raise ValueError("a job file line reads EOF")
    if start:
        start = f"{start} || {{ echo 'bench: could not start tracing'; exit 97; }}; "
    if stop:
        stop = f"{stop}; "
    r = target.run(f"mkdir -p {q(os.path.dirname(job))} && cat > {q(job)} <<'EOF'\n"
                   f"{jobfile.rstrip()}\nEOF\n"
                   f"rm -f {q(out)}; {start}fio --output-format={output} --output={q(out)} {q(job)} "
                   f"> {q(out)}.log 2>&1; rc=$?; {stop}cat {q(out)}.log; echo; echo '{JSON_MARK}'; "
                   f"cat {q(out)} 2>/dev/null; exit $rc", timeout=timeout)
    log, sep, text = r.out.partition(f"\n{JSON_MARK}\n")
    if not sep:     # killed (timeout) before the marker
        return r.rc, "", r.out
    return r.rc, text, log.rstrip("\n")


def check_fio(rc: int, text: str, log: str) -> dict[str, Any]:
    """fio's parsed JSON, or RunError saying what went wrong."""
    try:
        res = fio.parse(text)
    except (ValueError, json.JSONDecodeError):
        raise RunError(f"fio failed (exit {rc}) and wrote no JSON:\n{log.strip()[-2000:]}")
    bad = [f"{j['jobname']}: error {j.get('error')}" for j in res.get("jobs", [])
           if j.get("error")]
    if rc != 0 or bad:
        raise RunError(f"fio failed (exit {rc}{'; ' + ', '.join(bad) if bad else ''}):\n"
                       f"{log.strip()[-2000:]}")
    return res


class Progress:
    """'[i/n] ...' lines with an estimate of the time left, learnt from the
    runs so far (fio's time plus the runner's own overhead)."""

    def __init__(self, units: list[tuple[Phase, int, list[Config]]], out: TextIO):
        self.expected = [c.seconds for _, _, b in units for c in b]
        self.n = len(self.expected)
        self.done = 0
        self.spent = 0.0
        self.planned_done = 0.0
        self.out = out

    def left(self) -> float:
        rest = sum(self.expected[self.done:])
        if self.done and self.planned_done > 0:
            return rest * self.spent / self.planned_done
        return rest * 1.15 + 2 * (self.n - self.done)

    def start(self, what: str) -> None:
        print(f"[{self.done + 1}/{self.n}] {what}  (about {fmt_secs(self.left())} left)",
              file=self.out, flush=True)

    def finish(self, seconds: float) -> None:
        self.spent += seconds
        self.planned_done += self.expected[self.done]
        self.done += 1


def describe_config(c: Config) -> str:
    tun = " ".join(f"{k}={v}" for k, v in c.tunables)
    return f"{c.key} [{c.scheduler}{' ' + tun if tun else ''}]"


def execute(ctx: RunContext, plan: Plan, folder: Path, manifest: Manifest,
            reps: int, seed: int, brief: Callable[[Config, dict[str, Any]], str] | None = None
            ) -> None:
    """Run the plan into @folder, recording each run in the manifest.  The
    caller puts the device back (cleanup()), also after an error or Ctrl-C;
    the manifest's status says how it ended."""
    t = ctx.target
    runs_dir = folder / "runs"
    runs_dir.mkdir(parents=True, exist_ok=True)
    units = order(plan, reps, seed)
    manifest.data["order"] = [[ph.name, rep, [c.key for c in b]] for ph, rep, b in units]
    manifest.data["status"] = "running"
    manifest.save()
    progress = Progress(units, ctx.out)
    remote = f"{t.tmpdir}/run"
    phase_done: set[str] = set()
    i = 0
    try:
        with sigterm_as_interrupt():
            for ph, rep, block in units:
                if ph.name not in phase_done:
                    phase_done.add(ph.name)
                    if ph.setup is not None:
                        ctx.say(f"== phase {ph.name}: {ph.describe or 'set-up'}")
                        t0 = time.monotonic()
                        info = ph.setup(ctx)
                        info["seconds"] = round(time.monotonic() - t0, 1)
                        manifest.data["phases"][ph.name] = info
                        manifest.save()
                for c in block:
                    i += 1
                    progress.start(f"{describe_config(c)} rep {rep + 1}/{reps}")
                    t0 = time.monotonic()
                    if ph.settle is not None:
                        ph.settle(ctx)
                    started = now_iso()
                    actual = apply(ctx, c)
                    base = f"{i:03d}-{safe_key(c.key)}"
                    (runs_dir / f"{base}.fio").write_text(c.jobfile)
                    tr = ctx.tracing
                    events = tr.events_for(c.record_events) if tr is not None else []
                    if tr is not None:
                        tr.tracer.prepare(events, base)
                    if tr is not None and events:
                        start, stop = tr.tracer.start_cmd(), tr.tracer.stop_cmd()
                    else:
                        start = stop = ""
                    h0 = t.host_times()
                    rc, text, log = run_fio(t, c.jobfile, c.seconds * 3 + 120, remote,
                                            start, stop, c.fio_output)
                    host = host_window(h0, t.host_times())
                    (runs_dir / f"{base}.json").write_text(text)
                    (runs_dir / f"{base}.log").write_text(log)
                    traced: dict[str, Any] = {}
                    if tr is not None and events:
                        keep = tr.save or c.keep_trace
                        name = f"{base}{tr.suffix()}" if keep else None
                        traced = {"tracer": tr.tracer.kind,
                                  "events": [str(e) for e in events],
                                  "file": f"runs/{name}" if name else None,
                                  **tr.tracer.finish(runs_dir / name if name else None)}
                    secs = time.monotonic() - t0
                    rec = {"i": i, "phase": ph.name, "key": c.key, "rep": rep,
                           "scheduler": c.scheduler, "tunables": actual,
                           "labels": dict(c.labels), "job": f"runs/{base}.fio",
                           "json": f"runs/{base}.json", "log": f"runs/{base}.log",
                           "started": started, "seconds": round(secs, 2), "rc": rc}
                    if traced:
                        rec["trace"] = traced
                    if host is not None:
                        rec["host"] = host
                    manifest.data["runs"].append(rec)
                    manifest.save()
                    res = check_fio(rc, text, log)
                    progress.finish(secs)
                    if brief is not None:
                        line = brief(c, res)
                        if line:
                            ctx.say(f"    {line}")
        manifest.data["status"] = "complete"
    except KeyboardInterrupt:
        manifest.data["status"] = "interrupted"
        ctx.say("\ninterrupted: putting the device back")
        raise
    except BaseException as e:
        manifest.data["status"] = "failed"
        manifest.data["error"] = str(e)
        raise
    finally:
        manifest.data["finished"] = now_iso()
        manifest.save()


class Cleanups:
    """What to undo at the end, last registered first, even after Ctrl-C
    (which is ignored while they run)."""

    def __init__(self, out: TextIO = sys.stdout):
        self.items: list[tuple[str, Callable[[], None]]] = []
        self.out = out

    def add(self, what: str, fn: Callable[[], None]) -> None:
        self.items.append((what, fn))

    def run(self) -> list[str]:
        done = []
        with no_interrupts():
            while self.items:
                what, fn = self.items.pop()
                try:
                    fn()
                    done.append(what)
                    print(f"restored: {what}", file=self.out, flush=True)
                except (DeviceError, TargetError, RunError, OSError) as e:
                    done.append(f"FAILED: {what}: {e}")
                    print(f"could not restore {what}: {e}", file=self.out, flush=True)
        return done
