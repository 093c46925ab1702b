"""Scheduler CPU overhead: 4 KiB random reads on null_blk without completion
delay (the CPU is the bottleneck, so IOPS measures the cost per request),
with 1 and 2 jobs (each pinned to its CPU), under none, mq-deadline, kyber,
bfq, fifo-ref (the do-nothing reference elevator), k2 with a bound that
never limits (max_inflight = the queue depth) and flashfq with a dispatch
depth that never limits (depth = the queue depth, at most 256) and its
throttle off (throttle_us=0: two jobs that are not device-bound drift apart
in virtual time until the throttle holds the faster one to the slower one's
pace, a fairness decision that would show here as cost per request;
anticipation stays on, but with that depth it never holds dispatch), and
cars with depth = the queue depth, its throttle off (throttle_size=0, the
same fairness decision), nr_dies = 255, its largest, and every die time 1
us, so that its die prediction and filter run on every request but a die
is predicted busy only for the microsecond after a dispatch (null_blk has
no dies: a request held for one would measure cars's device model, not
its cost; at its default 60 us reads, 64 requests in flight over 255 dies
would find about a fifth of the heads on a busy die).

In the VM bed (--vm) the guest runs with multi-threaded TCG, a host thread
per vCPU, so that 2 jobs run at once as on a real machine (without
--traced: Overhead.vm_config()).  With --icount SHIFT the guest's clock
counts instructions instead (QEMU -icount, 2^SHIFT ns an instruction):
fio's time-based runs then end after a fixed number of the guest's
instructions, so IOPS are I/Os per instruction, the same whatever the
host does (a block's ratio spread 0.70-1.03 with the host's clock); the
VM has one vCPU (icount runs every vCPU in one host thread, and a vCPU
that QEMU switches away from while it holds a lock would leave another
spinning on it, in counted instructions), so the jobs share it: the
figure is CPU cost per request, without lock contention across CPUs.

Each scheduler X is measured in a block none, X, X, none, so that slow
drift (other load, thermal) cancels in the block's ratio X/none (of the
means; with --icount of the better runs: block_ratios()); blocks run
in seeded random order and are repeated.  Reported: medians and ranges of
the ratios, K2's ratio to fifo-ref and to mq-deadline, FlashFQ's to
fifo-ref and to bfq (the goals: at least 0.90 of fifo-ref's, above bfq's)
and to mq-deadline, and CARS's to fifo-ref (the goal: at least 0.90) and
to mq-deadline; with two jobs or more on the host's clock the goals are
those of many submitting CPUs: each of the three at least 0.95 of
fifo-ref's and above mq-deadline's (and FlashFQ above bfq's).

With --reference fifo-ref the blocks are fifo-ref, X, X, fifo-ref: X's
ratio to fifo-ref is then measured within a block, in the host's state of
those seconds.  A ratio of two blocks' ratios to none mixes two states:
this host's multi-threaded VM moves between a fast state and a slow one
(none at 48-60K IOPS and at 31-37K within one boot), in the slow one a
scheduler's ratio to none is higher (mq-deadline 0.78-0.86 there,
0.71-0.81 in the fast), and which state a block meets is chance: K2's
ratio to fifo-ref over blocks so paired moved 0.85-1.15 from one
repetition to the next.

With --count DIR, DIR an earlier run of this suite on the instruction-
counting clock with the same reference and kernel, each scheduler's ratio
there (its ratio "by count", the median over DIR's blocks, best runs:
block_ratios()) is kept in this run's parameters and the report gives it
beside this run's ratio and their quotient: on the host's clock with two
jobs, what running on two CPUs at once costs a scheduler beyond what it
costs the reference: waiting for locks, cache lines moved between the
CPUs and, in the VM, what TCG charges each running vCPU for the
scheduler's code (scripts/hostprof; Kyber, per-CPU by design, lands on
its count).

With --traced, a pseudo-scheduler k2+trace (k2 with its trace events
recorded into an ftrace ring buffer during those runs) is measured the same
way, and the report gives K2 traced / K2 untraced: what enabled tracepoints
cost per request.

With --k2-target-us N, a pseudo-scheduler k2-adaptive: k2 with the same
bound and target_latency_us=N, its block's jobs real-time (prioclass 1),
so that every completion goes through the adaptive bound's measurement and
every dispatch through its controller; the report gives its ratio to
fifo-ref's (the goal: at least 0.95) and to k2's.  N must be well above
null_blk's latency, or the bound falls and measures the device, not the
cost: 5000 (5 ms) lets the controller climb from bound 1 to the queue depth
within the ramp."""
from __future__ import annotations

import argparse
import math
import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from bench import device as devmod
from bench import jobs
from bench.probe import CARS_MAX_DEPTH, CARS_MAX_DIES
from bench.device import DeviceError
from bench.markdown import table
from bench.plot import figure, grouped_bars, save
from bench.results import Results, ResultsError, Run, Summary, load, summarize
from bench.runner import Config, Phase, Plan, RunContext
from bench.suites import (OURS, UPSTREAM, Sched, Suite, SuiteReport, add_icount_argument,
                          assignments, icount_note, ordered)
from bench.suites.k2 import csv
from bench.target import Target

NULL_BLK: dict[str, int | str] = {
    "queue_mode": 2, "irqmode": 1, "completion_nsec": 0, "submit_queues": 2,
    "hw_queue_depth": 256, "nr_devices": 1, "gb": 16, "bs": 4096, "memory_backed": 0}
SCHEDS = [*UPSTREAM, *OURS]
TRACED = "k2+trace"              # k2 with its events recorded (--traced)
ADAPTIVE = "k2-adaptive"         # k2 with target_latency_us set (--k2-target-us)
ORDER = SCHEDS + [ADAPTIVE, TRACED]
#: scheduler -> (the references it is compared with: a minimum for its
#: ratio over theirs, with ">" when it must be strictly above)
COMPARE: dict[str, list[tuple[str, float | None, str]]] = {
    "k2": [("fifo-ref", None, ""), ("mq-deadline", None, "")],
    "flashfq": [("fifo-ref", 0.90, "≥"), ("bfq", 1.0, ">"), ("mq-deadline", None, "")],
    "cars": [("fifo-ref", 0.90, "≥"), ("mq-deadline", None, "")],
    ADAPTIVE: [("fifo-ref", 0.95, "≥"), ("k2", None, "")],
}
#: with two jobs or more on the host's clock (the multi-threaded VM, each
#: job on a CPU of its own, so that contention between CPUs counts): the
#: goals of many submitting CPUs, each of the three at least 0.95 of
#: fifo-ref's and above mq-deadline's
COMPARE_CONCURRENT: dict[str, list[tuple[str, float | None, str]]] = {
    "k2": [("fifo-ref", 0.95, "≥"), ("mq-deadline", 1.0, ">")],
    "flashfq": [("fifo-ref", 0.95, "≥"), ("bfq", 1.0, ">"), ("mq-deadline", 1.0, ">")],
    "cars": [("fifo-ref", 0.95, "≥"), ("mq-deadline", 1.0, ">")],
    ADAPTIVE: COMPARE[ADAPTIVE],
}
NAMES = {"k2": "K2", "flashfq": "FlashFQ", "cars": "CARS", ADAPTIVE: "K2 adaptive"}
#: flashfq's dispatch depth tunable's largest value
FLASHFQ_MAX_DEPTH = 256


def compare_for(nj: int, icount: bool) -> dict[str, list[tuple[str, float | None, str]]]:
    """The comparisons, with their goals, of @nj jobs' figures: the
    concurrent ones (COMPARE_CONCURRENT) with two jobs or more on the
    host's clock, else COMPARE's (one job, or the instruction-counting
    clock's one vCPU, where the jobs take turns)."""
    return COMPARE_CONCURRENT if nj >= 2 and not icount else COMPARE


def run_iops(r: Run) -> float:
    return sum(r.job(j).iops for j in r.jobs())


def cpu_us_per_io(r: Run) -> float:
    """fio's own CPU time (user + system, which includes the submission path
    through the scheduler) per I/O."""
    cpu = ios = 0.0
    for j in r.result["jobs"]:
        cpu += (float(j.get("usr_cpu", 0)) + float(j.get("sys_cpu", 0))) / 100.0 \
            * float(j.get("job_runtime", 0)) * 1000.0
        ios += r.job(j["jobname"]).ios
    return cpu / ios if ios else float("nan")


def host_cpus(r: Run, key: str = "vcpu_s") -> float:
    """Host CPUs the VM's vCPU threads (@key "vcpu_s") or all of QEMU
    ("qemu_s") had over the run: CPU seconds over its seconds (the runner's
    host window); NaN without one (a real box, or an older result)."""
    h = r.rec.get("host")
    return float(h[key]) / float(h["seconds"]) if h and h.get("seconds") else float("nan")


def reference_of(res: Results) -> str:
    """The elevator of the blocks' outer runs: none unless --reference."""
    return str(res.manifest.get("params", {}).get("reference") or "none")


def block_ratios(res: Results, best: bool = False) -> dict[int, dict[str, list[dict[str, float]]]]:
    """jobs -> scheduler -> one entry per complete R/X/X/R block, R the
    reference (reference_of(): none unless --reference): ratio X/R of mean
    IOPS, X's IOPS, R's IOPS, X's and R's CPU per I/O, and in the VM bed
    the host CPUs R's and X's runs got (host_cpus(): "ref_vcpus",
    "vcpus", "ref_qemu"; NaN elsewhere).
    With @best (an instruction-counting clock) each side's IOPS is its
    better run's, not the mean: there a run's I/Os per instruction can
    only lose, to other work of the guest's that came during it (the
    serial agent, a kworker), which hits a run in a dozen or so and takes
    up to a tenth of it, and the better of two runs is the scheduler's."""
    ref = reference_of(res)
    groups: dict[tuple[int, str, int], list[Run]] = {}
    for r in res.runs:
        lb = r.labels
        groups.setdefault((int(lb["jobs"]), str(lb["pair"]), int(r.rec["rep"])), []).append(r)
    out: dict[int, dict[str, list[dict[str, float]]]] = {}
    for (nj, x, _), runs in sorted(groups.items()):
        xs = [r for r in runs if r.labels["sched"] == x]
        ns = [r for r in runs if r.labels["sched"] == ref]
        if not xs or not ns:
            continue
        pick = max if best else statistics.fmean
        xi = pick(run_iops(r) for r in xs)
        ni = pick(run_iops(r) for r in ns)
        out.setdefault(nj, {}).setdefault(x, []).append(
            {"ratio": xi / ni if ni else float("nan"), "iops": xi, "ref_iops": ni,
             "cpu_us": statistics.fmean(cpu_us_per_io(r) for r in xs),
             "ref_cpu_us": statistics.fmean(cpu_us_per_io(r) for r in ns),
             # the mean over runs that have the host's times (NaN: none)
             "vcpus": summarize(host_cpus(r) for r in xs).mean,
             "ref_vcpus": summarize(host_cpus(r) for r in ns).mean,
             "ref_qemu": summarize(host_cpus(r, "qemu_s") for r in ns).mean})
    return out


def events_per_io(res: Results, nj: int) -> list[float]:
    """Trace events written per fio I/O in each traced run with @nj jobs."""
    out = []
    for r in res.where(jobs=nj, sched=TRACED):
        written = r.rec.get("trace", {}).get("written")
        ios = sum(r.job(j).ios for j in r.jobs())
        if written is not None and ios:
            out.append(written / ios)
    return out


def relative(a: list[dict[str, float]], b: list[dict[str, float]]) -> list[float]:
    """Per repetition, a's ratio to the reference over b's (repetitions
    paired in order)."""
    return [x["ratio"] / y["ratio"] for x, y in zip(a, b) if y["ratio"]]


class Comparison(NamedTuple):
    """One of compare_for()'s comparisons in one run's figures of one job
    count: X / @ref per repetition (@rel: against the blocks' reference,
    X's blocks' own ratios; else X's ratio over @ref's, repetition by
    repetition), the ratio of their median ratios (@of_medians), the value
    a goal is judged on (@judged: on the instruction-counting clock the
    medians' ratio, which a run that lost some IOPS to periodic work of
    the guest's does not move; else @rel's median, pairs of blocks close
    in time cancelling the host's drift) and whether it meets @goal (@met,
    None: no goal)."""
    x: str
    ref: str
    goal: float | None
    op: str
    rel: Summary
    of_medians: float
    judged: float
    met: bool | None


def comparisons(data: dict[str, list[dict[str, float]]], nj: int, icount: bool, ref0: str,
                ratios: dict[str, Summary]) -> list[Comparison]:
    """compare_for()'s comparisons that one run's blocks of @nj jobs
    (@data: block_ratios()'s, @ratios: each scheduler's blocks' ratios
    summarized) can make, against the blocks' reference @ref0."""
    out = []
    for x, refs in compare_for(nj, icount).items():
        for ref, goal, op in refs:
            if not (data.get(x) and (ref == ref0 or data.get(ref))):
                continue
            rel = ratios[x] if ref == ref0 else summarize(relative(data[x], data[ref]))
            by_med = ratios[x].median / (1.0 if ref == ref0 else ratios[ref].median)
            judged = by_med if icount else rel.median
            met = None if goal is None else (judged >= goal if op == "≥" else judged > goal)
            out.append(Comparison(x, ref, goal, op, rel, by_med, judged, met))
    return out


def count_ratios(folder: Path, reference: str, kernel: str) -> dict[str, Any]:
    """The figures --count takes from @folder, an overhead run on the
    instruction-counting clock with blocks of @reference on @kernel: per
    job count, each scheduler's median ratio over its blocks (their better
    runs, as that run's report has them).  ValueError, saying why, for a
    folder that is not such a run."""
    try:
        res = load(folder)
    except (OSError, ValueError, ResultsError) as e:
        raise ValueError(f"--count: {e}") from e
    m = res.manifest
    if m.get("suite") != "overhead":
        raise ValueError(f"--count {folder}: a {m.get('suite')} run, not an overhead run")
    params = m.get("params", {})
    if params.get("icount") is None:
        raise ValueError(f"--count {folder}: not run on the instruction-counting clock "
                         "(--icount)")
    if reference_of(res) != reference:
        raise ValueError(f"--count {folder}: its blocks' reference is {reference_of(res)}, "
                         f"this run's {reference}")
    theirs = m.get("target", {}).get("kernel")
    if theirs != kernel:
        raise ValueError(f"--count {folder}: measured on kernel {theirs}, this run on {kernel}")
    ratios = {str(nj): {x: summarize(b["ratio"] for b in bl).median for x, bl in xs.items()}
              for nj, xs in block_ratios(res, best=True).items()}
    if not ratios:
        raise ValueError(f"--count {folder}: no complete block")
    return {"from": folder.name, "icount": params["icount"], "ratios": ratios}


def boots_report(runs: Sequence[Results]) -> str:
    """The figures of several runs of this suite, one a boot, of one
    kernel, reference and clock (anything else is refused, saying which):
    per job count, each scheduler's median ratio to the reference in each
    run, their median and range over the runs, and with --count each
    run's quotient by its count; then each comparison's value that its
    goal is judged on (Comparison) in each run, and in how many runs the
    goal is met.  On the host's clock a ratio moves from boot to boot by
    more than a scheduler's distance from its goal may be (README, "What
    two vCPUs can show"): this is the table that says how often it holds.
    Markdown, for `python3 -m bench boots`."""
    if not runs:
        raise ValueError("no results folders")
    for res in runs:
        if res.suite != "overhead":
            raise ValueError(f"{res.folder}: not an overhead run (a {res.suite} run)")

    def setup(res: Results) -> tuple[str, str, str]:
        icount = res.manifest.get("params", {}).get("icount")
        return (str(res.manifest.get("target", {}).get("kernel")), reference_of(res),
                "the host's clock" if icount is None else
                f"the instruction-counting clock (--icount {icount})")
    first = setup(runs[0])
    for res in runs[1:]:
        for what, want, got in zip(("kernel", "reference", "clock"), first, setup(res)):
            if got != want:
                raise ValueError(f"{res.folder}: {what} {got}, {runs[0].folder}'s {want}: "
                                 "the runs must share kernel, reference and clock")
    kernel, ref0, clock = first
    icount = runs[0].manifest.get("params", {}).get("icount") is not None
    n = len(runs)
    # per run: job count -> scheduler -> its blocks' ratios; the comparisons
    ratios: list[dict[int, dict[str, Summary]]] = []
    comps: list[dict[int, list[Comparison]]] = []
    counts: list[dict[str, dict[str, float]]] = []
    for res in runs:
        data = block_ratios(res, best=icount)
        ratios.append({nj: {x: summarize(b["ratio"] for b in bl) for x, bl in xs.items()}
                       for nj, xs in data.items()})
        comps.append({nj: comparisons(data[nj], nj, icount, ref0, ratios[-1][nj])
                      for nj in data})
        counts.append(res.manifest.get("params", {}).get("count", {}).get("ratios", {}))

    def fmt(v: float | None) -> str:
        return "–" if v is None else f"{v:.3f}"
    out = [f"# Overhead over {n} runs\n\n"
           f"Kernel {kernel}, reference {ref0}, {clock}. Runs: "
           + ", ".join(f"{i + 1} `{res.folder.name}`" for i, res in enumerate(runs))
           + f". Each run's figure is its median over its {ref0}/X/X/{ref0} blocks "
           "(its report's); 'over runs' is the median (min–max) of those.\n"]
    for nj in sorted({nj for r in ratios for nj in r}):
        scheds = ordered({x for r in ratios for x in r.get(nj, {})}, ORDER)
        has_count = any(str(nj) in c for c in counts)
        rows = []
        for x in scheds:
            per = [r[nj][x].median if x in r.get(nj, {}) else None for r in ratios]
            got = [v for v in per if v is not None]
            row = [x, ", ".join(fmt(v) for v in per),
                   summarize(got).fmt_median(1, 3)]
            if has_count:
                cs = [c.get(str(nj), {}).get(x) for c in counts]
                distinct = sorted({f"{c:.3f}" for c in cs if c is not None})
                row += [", ".join(distinct) or "–",
                        ", ".join(fmt(v / c if v is not None and c else None)
                                  for v, c in zip(per, cs))]
            rows.append(row)
        out.append(f"\n## {nj} job(s)\n\n" + table(
            ["scheduler", f"ratio to {ref0}, each run", "over runs",
             *(["by count", "over count, each run"] if has_count else [])], rows))
        crows = []
        keys = [(c.x, c.ref) for cs in comps for c in cs.get(nj, [])]
        for x, ref in dict.fromkeys(keys):
            per_c = [next((c for c in cs.get(nj, []) if (c.x, c.ref) == (x, ref)), None)
                     for cs in comps]
            got_c = [c for c in per_c if c is not None]
            goal = next((c for c in got_c if c.goal is not None), None)
            crows.append([f"{NAMES.get(x, x)} / {ref}",
                          ", ".join(fmt(c.judged if c else None) for c in per_c),
                          summarize(c.judged for c in got_c).fmt_median(1, 3),
                          "–" if goal is None else f"{goal.op} {goal.goal:.2f}",
                          "–" if goal is None else
                          f"{sum(1 for c in got_c if c.met)} of {len(got_c)}"])
        if crows:
            out.append("\n" + table(["comparison", "each run", "over runs", "goal", "met in"],
                                     crows))
            out.append("\nA comparison's value in a run is what its goal is judged on: "
                       + ("the ratio of the medians" if icount else
                          "the median over repetitions, within each block against "
                          f"{ref0}, else of X's ratio over the other's repetition by "
                          "repetition") + ".\n")
    return "".join(out)


class Overhead(Suite):
    name = "overhead"
    title = "Scheduler overhead on null_blk: IOPS relative to none"
    description = ("4 KiB random reads on null_blk (no completion delay), 1 and 2 jobs, "
                   "none/X/X/none blocks for mq-deadline, kyber, bfq, fifo-ref, k2, flashfq, cars")
    schedulers = tuple(Sched(s, {**UPSTREAM, **OURS}[s], required=False) for s in SCHEDS)
    writes = False
    needs_device = False
    durations = (10.0, 2.0, 5)
    short_durations = (2.0, 0.5, 1)

    def add_arguments(self, p: argparse.ArgumentParser) -> None:
        p.add_argument("--jobs", type=csv(int), default=[1, 2],
                       help="numbers of fio jobs, each pinned to a CPU (default 1,2)")
        p.add_argument("--iodepth", type=int, default=32, help="per job (default 32)")
        p.add_argument("--schedulers", type=csv(str, SCHEDS), default=SCHEDS,
                       help=f"each compared with --reference's elevator (default {','.join(SCHEDS)})")
        p.add_argument("--reference", default="none",
                       help="the elevator of each block's outer runs (default none); "
                            "fifo-ref measures each scheduler's ratio to fifo-ref within "
                            "its block, in the host's state of those seconds, not as the "
                            "quotient of two blocks' ratios to none")
        p.add_argument("--traced", action="store_true",
                       help=f"also measure {TRACED}: k2 with its trace events (system k2) "
                            "recorded into an ftrace ring buffer during those runs; the "
                            "report gives K2 traced / K2 untraced")
        p.add_argument("--k2-target-us", type=int, default=0,
                       help=f"also measure {ADAPTIVE}: k2 with target_latency_us set to this "
                            "(us), its block's jobs real-time (default 0: not measured)")
        add_icount_argument(p, "one vCPU, IOPS become I/Os per instruction, repeatable "
                               "whatever the host's load")
        p.add_argument("--count", type=Path, metavar="DIR",
                       help="an earlier overhead run with --icount, the same --reference "
                            "and kernel: the report gives each scheduler's ratio there "
                            "(by count) beside this run's, and this run's over it")
        p.add_argument("--allow-null-blk", action="store_true",
                       help="on this machine: allow loading (and afterwards unloading) "
                            "the null_blk module for /dev/nullb0")
        p.add_argument("--null-blk", default="",
                       help="extra null_blk parameters, e.g. 'irqmode=0 hw_queue_depth=512'")

    def vm_config(self, args: argparse.Namespace) -> dict[str, Any]:
        """Multi-threaded: the bed's single-threaded TCG runs both vCPUs in
        turns on one host thread, so 2 jobs never run at once and a vCPU
        descheduled holding a scheduler's lock leaves the other spinning
        for its whole turn; that measured the locks' bad luck, not their
        cost (a block's ratio ranged 0.40-1.00 for the same scheduler).
        With --traced, single: enabling trace events patches kernel text,
        which multi-threaded TCG now and then gets wrong (tests/README.md, The VM test bed).  With
        --icount, one vCPU on an instruction-counting clock (module
        docstring)."""
        if args.icount is not None:
            return {"icount": args.icount, "smp": 1}
        return {} if args.traced else {"tcg_thread": "multi"}

    def make_device(self, target: Target, args: argparse.Namespace,
                    on_exit: Callable[[str, Callable[[], None]], None]) -> tuple[str, list[str]]:
        if target.is_local and not args.allow_null_blk:
            raise DeviceError("the overhead suite measures on null_blk: it loads the null_blk "
                              "module (/dev/nullb0, no media) with its own parameters and "
                              "unloads it at the end; pass --allow-null-blk to allow that")
        if devmod.module_loaded(target, "null_blk"):
            if target.is_local:
                raise DeviceError("null_blk is already loaded: unload it first (modprobe -r "
                                  "null_blk) so that the suite can load it with its own "
                                  "parameters")
            if not devmod.unload_module(target, "null_blk"):
                raise DeviceError("null_blk is loaded in the VM and cannot be unloaded")
        params: dict[str, int | str] = dict(NULL_BLK)
        params.update(assignments(args.null_blk, "--null-blk"))
        devmod.load_module(target, "null_blk", " ".join(f"{k}={v}" for k, v in params.items()))

        def unload() -> None:
            if not devmod.unload_module(target, "null_blk"):
                raise DeviceError("cannot unload null_blk")
        on_exit("null_blk unloaded", unload)
        for _ in range(50):
            if target.run("[ -e /sys/class/block/nullb0/queue/scheduler ]").rc == 0:
                break
            time.sleep(0.1)
        else:
            raise DeviceError("null_blk loaded but /dev/nullb0 did not appear")
        return "nullb0", [f"null_blk loaded by the suite: "
                          + " ".join(f"{k}={v}" for k, v in params.items())]

    def plan(self, ctx: RunContext) -> Plan:
        a = ctx.args
        runtime, ramp = ctx.params["runtime"], ctx.params["ramp"]
        cpus = None if a.no_pin else ctx.target.ncpus()
        ref = a.reference
        if ref != "none" and ref not in ctx.sched_info:
            raise ValueError(f"--reference {ref}: not an elevator of the device's here "
                             f"(available: none, {', '.join(sorted(ctx.sched_info))})")
        scheds = [s for s in a.schedulers if s in ctx.sched_info and s != ref]
        count = None
        if a.count is not None:
            if a.icount is not None:
                raise ValueError("--count gives a run on the host's clock the figures of one "
                                 "on the instruction-counting clock: not with --icount")
            count = count_ratios(a.count, ref, str(ctx.target.describe().get("kernel")))
        notes = []
        if ref != "none":
            notes.append(f"blocks {ref}/X/X/{ref}: each ratio is X's IOPS over {ref}'s")
        notes += [n + ", so IOPS are I/Os per instruction"
                  for n in icount_note(a, ctx.target, runtime)]
        if cpus:
            notes.append(f"job i pinned to CPU i mod {cpus}")
        if cpus and max(a.jobs) > cpus:
            notes.append(f"{max(a.jobs)} jobs on {cpus} CPUs: jobs share CPUs")
        measured: list[tuple[str, str]] = [(x, x) for x in scheds]  # (label, elevator)
        if a.traced:
            if a.trace:
                raise ValueError("--traced compares k2 traced with k2 untraced; with --trace "
                                 "every run is traced: use one of them")
            if "k2" not in scheds:
                raise ValueError(f"--traced needs k2 among the schedulers, and k2 is "
                                 f"{'not available' if 'k2' in a.schedulers else 'not chosen'}")
            measured.append((TRACED, "k2"))
            notes.append(f"{TRACED}: k2 with every k2 event recorded into an ftrace ring "
                         "buffer (overwritten when full, not saved) during its runs")
        if a.k2_target_us:
            if "k2" not in scheds:
                raise ValueError(f"--k2-target-us needs k2 among the schedulers, and k2 is "
                                 f"{'not available' if 'k2' in a.schedulers else 'not chosen'}")
            if a.k2_target_us < 0:
                raise ValueError("--k2-target-us must be positive")
            measured.append((ADAPTIVE, "k2"))
            notes.append(f"{ADAPTIVE}: k2 with target_latency_us={a.k2_target_us}; every job "
                         f"of its blocks ({ref}'s runs too) real-time, prioclass 1")
        blocks = []
        for nj in a.jobs:
            g = jobs.common(ctx.device.path, runtime, ramp, a.ioengine)
            g.update({"rw": "randread", "bs": "4k", "iodepth": a.iodepth})
            for x, elv in measured:
                rt: dict[str, jobs.Value] = ({"prioclass": 1, "prio": 0} if x == ADAPTIVE
                                             else {})
                js = [jobs.Job(f"j{i}", {**({"cpus_allowed": i % cpus} if cpus else {}), **rt})
                      for i in range(nj)]
                tun: tuple[tuple[str, str | int | float], ...] = ()
                if elv == "k2":
                    tun = (("max_inflight", int(ctx.sched_info["k2"]["nr_requests"])),)
                    if x == ADAPTIVE:
                        tun += (("target_latency_us", a.k2_target_us),)
                elif elv == "flashfq":
                    tun = (("depth", min(FLASHFQ_MAX_DEPTH,
                                         int(ctx.sched_info["flashfq"]["nr_requests"]))),
                           ("throttle_us", 0))
                elif elv == "cars":
                    tun = (("nr_dies", CARS_MAX_DIES),
                           ("depth", min(CARS_MAX_DEPTH,
                                         int(ctx.sched_info["cars"]["nr_requests"]))),
                           ("throttle_size", 0), ("read_us", 1), ("write_us", 1),
                           ("erase_us", 1))
                block = []
                for slot, (s, tag) in enumerate(((ref, "a"), (x, "a"), (x, "b"),
                                                 (ref, "b"))):
                    text = jobs.render(g, js, comment=f"overhead: {nj} job(s), {s} "
                                       f"(block {x}, slot {slot})")
                    block.append(Config(f"j{nj}/{x}/{s}-{tag}", elv if s == x else ref, text,
                                        runtime + ramp, tunables=tun if s == x else (),
                                        labels=(("jobs", nj), ("pair", x), ("sched", s),
                                                ("slot", slot)),
                                        record_events=("k2",) if s == TRACED else ()))
                blocks.append(block)
        return Plan([Phase("null_blk", blocks)], notes,
                    {"jobs": a.jobs, "iodepth": a.iodepth,
                     "schedulers": [x for x, _ in measured], "k2_target_us": a.k2_target_us,
                     "icount": a.icount, "reference": ref,
                     **({"count": count} if count else {})})

    def brief(self, c: Config, result: dict[str, Any]) -> str:
        from bench import fio
        iops = sum(fio.job_stats(result, j["jobname"]).iops for j in result["jobs"])
        return f"{iops:,.0f} IOPS"

    def report(self, res: Results, plots: Path) -> SuiteReport:
        # what a goal is judged on: per repetition (pairs of blocks close in
        # time, which cancels the host's drift), or on an instruction-
        # counting clock, which has none, the ratio of the medians (which a
        # run that lost some IOPS to periodic work of the guest's does not move)
        icount = res.manifest.get("params", {}).get("icount") is not None
        data = block_ratios(res, best=icount)
        ref0 = reference_of(res)
        out = [f"\n## IOPS relative to {ref0}\n\n"
               f"Each ratio comes from one {ref0}/X/X/{ref0} block (mean IOPS of the X runs "
               f"over the mean of the {ref0} runs"
               + (f"; on the instruction-counting clock the better X run over the better "
                  f"{ref0} run, as a run there only loses to other work of the guest's"
                  if icount else "")
               + "); median (min–max) over repetitions. "
               "Below 1 means the scheduler costs CPU time per request. 'fio CPU/IO' is "
               "fio's user+system CPU time per I/O, which includes the submission path. "
               "A comparison 'X / Y' pairs the repetitions of this run, all on the same "
               "boot.\n"]
        count = res.manifest.get("params", {}).get("count")
        if count:
            out.append(f"\n'By count' is each scheduler's ratio to {ref0} on the "
                       f"instruction-counting clock (--icount {count['icount']}), the "
                       f"median over the blocks of {count['from']}; 'over count' is this "
                       "run's median over it: with 2 jobs or more on the host's clock, "
                       "what running on several CPUs at once costs a scheduler beyond "
                       f"what it costs {ref0} (lock waits, cache lines moved between "
                       "the CPUs and, in the VM, TCG's cost of each running vCPU's "
                       "code: scripts/hostprof).\n")
        summary: dict[str, Any] = {}
        head: list[str] = []
        for nj in sorted(data):
            rows = []
            ratios: dict[str, Summary] = {}     # scheduler -> its blocks' ratios
            by_count: dict[str, float] = count["ratios"].get(str(nj), {}) if count else {}
            for x in ordered(data[nj], ORDER):
                bl = data[nj][x]
                ratio = ratios[x] = summarize(b["ratio"] for b in bl)
                iops = summarize(b["iops"] for b in bl)
                refi = summarize(b["ref_iops"] for b in bl)
                cpu = summarize(b["cpu_us"] for b in bl)
                ncpu = summarize(b["ref_cpu_us"] for b in bl)
                rows.append([x, ratio.fmt_median(1, 3), iops.fmt_median(1, 0),
                             refi.fmt_median(1, 0), f"{cpu.median:.2f} / {ncpu.median:.2f}",
                             ratio.n])
                summary.setdefault(str(nj), {})[x] = {
                    "ratio_median": ratio.median, "ratio_min": ratio.lo, "ratio_max": ratio.hi,
                    "iops_median": iops.median, "ref_iops_median": refi.median,
                    "reference": ref0,
                    "blocks": ratio.n}
                if by_count:
                    c = by_count.get(x)
                    rows[-1][2:2] = ["–", "–"] if c is None else \
                        [f"{c:.3f}", f"{ratio.median / c:.3f}"]
                    if c is not None:
                        summary[str(nj)][x].update(count=c, over_count=ratio.median / c)
            out.append(f"\n### {nj} job(s)\n\n" + table(
                ["scheduler", f"IOPS ratio to {ref0}",
                 *(["by count", "over count"] if by_count else []),
                 "IOPS", f"{ref0}'s IOPS (same blocks)",
                 f"fio CPU/IO µs (X / {ref0})", "blocks"], rows))
            head.append(f"\n{nj} job(s): " + ", ".join(f"{r[0]} {r[1]}" for r in rows)
                        + f" (IOPS ratio to {ref0}, median (min–max))\n")
            k2 = data[nj].get("k2")
            comp = []
            for c in comparisons(data[nj], nj, icount, ref0, ratios):
                x, ref, rel = c.x, c.ref, c.rel
                entry: dict[str, Any] = {"median": rel.median, "min": rel.lo,
                                         "max": rel.hi, "of_medians": c.of_medians}
                met = ""
                if c.goal is not None:
                    entry["goal_met"] = c.met
                    met = (f"; goal {c.op} {c.goal:.2f}"
                           + (" on the medians' ratio" if icount else "")
                           + f": **{'met' if c.met else 'not met'}**")
                how = (f"{NAMES[x]}'s IOPS over {ref}'s within each block)"
                       if ref == ref0 else
                       f"{NAMES[x]}'s ratio to {ref0} over {ref}'s); {c.of_medians:.3f} "
                       f"as the ratio of their median ratios to {ref0}")
                comp.append(f"- {NAMES[x]} / {ref}: {rel.fmt_median(1, 3)} (per "
                            f"repetition, {how}{met}\n")
                summary[str(nj)][f"{x}_vs_{ref}"] = entry
            if k2 and data[nj].get(TRACED):
                rel = summarize(relative(data[nj][TRACED], k2))
                per_io = summarize(events_per_io(res, nj))
                comp.append(f"- K2 traced / K2 untraced: {rel.fmt_median(1, 3)} (per "
                            f"repetition, {TRACED}'s ratio to {ref0} over k2's; "
                            f"{per_io.fmt_median(1, 2)} trace events written per I/O, "
                            "ramp included)\n")
                summary[str(nj)]["k2_traced_vs_untraced"] = {
                    "median": rel.median, "min": rel.lo, "max": rel.hi,
                    "events_per_io_median": per_io.median}
            if comp:
                out.append("\n" + "".join(comp))
                head.append("".join(comp))
        out.append(f"\n![overhead]({self._plot(data, plots, ref0)})\n")
        out.append(f"\nEach block's ratio against its {ref0} runs' IOPS: a host that "
                   "moves between a fast and a slow state within a boot shows as two "
                   "clusters, and a ratio that depends on the state as a slope.")
        hosted = {nj: [b for x in data[nj] for b in data[nj][x]
                       if not math.isnan(b["ref_vcpus"])] for nj in data}
        if any(hosted.values()):
            out.append(f" Below them, each block's {ref0} IOPS against the host CPUs "
                       "its runs' vCPU threads had (CPU time over the run's time, "
                       "from the host's /proc): a slow state that comes with fewer "
                       "CPUs is the host's share, one with as many is not.\n\n")
            for nj in sorted(hosted):
                bl = hosted[nj]
                if not bl:
                    continue
                vc = summarize(b["ref_vcpus"] for b in bl)
                qc = summarize(b["ref_qemu"] for b in bl)
                xc = summarize(b["vcpus"] for b in bl)
                out.append(f"- {nj} job(s): the {ref0} runs' vCPU threads had "
                           f"{vc.fmt_median(1, 2)} host CPUs (QEMU in all "
                           f"{qc.fmt_median(1, 2)}), the measured schedulers' runs "
                           f"{xc.fmt_median(1, 2)}; median (min–max) over blocks\n")
        plot = self._plot_blocks(data, plots, ref0, any(hosted.values()))
        out.append(f"\n\n![overhead by block]({plot})\n")
        return SuiteReport("".join(out), {"overhead": summary}, "".join(head))

    def _plot(self, data: dict[int, dict[str, list[dict[str, float]]]], plots: Path,
              ref: str) -> str:
        fig, ax = figure(1, 1, width=6.4, height=3.6)
        a = ax[0][0]
        njs = sorted(data)
        scheds = [s for s in ORDER if any(s in data[n] for n in njs)]
        grouped_bars(a, scheds, [(f"{nj} job(s)", [summarize(
            b["ratio"] for b in data[nj].get(s, [])) for s in scheds]) for nj in njs],
            median=True)
        a.axhline(1.0, color="k", lw=0.8, ls="--")
        a.set_ylabel(f"IOPS / {ref}'s IOPS (median, min–max)")
        a.grid(alpha=0.3, axis="y")
        a.legend(fontsize=8)
        return save(fig, plots / "overhead.png")

    def _plot_blocks(self, data: dict[int, dict[str, list[dict[str, float]]]], plots: Path,
                     ref: str, hosted: bool) -> str:
        """A panel per job count: each block's ratio over its reference
        runs' IOPS, a marker series per scheduler; below each, with
        @hosted (the runs recorded the host's times: the VM bed), the
        reference's IOPS over the host CPUs its vCPU threads had."""
        njs = sorted(data)
        fig, ax = figure(len(njs), 2 if hosted else 1, width=5.2, height=3.6)
        for col, nj in enumerate(njs):
            a = ax[0][col]
            for s in ordered(data[nj], ORDER):
                bl = data[nj][s]
                a.plot([b["ref_iops"] / 1000 for b in bl], [b["ratio"] for b in bl],
                       marker="o", ls="", label=s)
                if hosted:
                    ax[1][col].plot([b["ref_vcpus"] for b in bl],
                                    [b["ref_iops"] / 1000 for b in bl],
                                    marker="o", ls="", label=f"block {s}")
            a.axhline(1.0, color="k", lw=0.8, ls="--")
            a.set_title(f"{nj} job(s)")
            a.set_xlabel(f"{ref}'s IOPS in the block (thousands)")
            a.set_ylabel(f"IOPS / {ref}'s IOPS")
            if hosted:
                h = ax[1][col]
                h.set_xlabel(f"host CPUs of the vCPU threads in {ref}'s runs")
                h.set_ylabel(f"{ref}'s IOPS (thousands)")
            for panel in ax[:, col]:
                panel.grid(alpha=0.3)
                panel.legend(fontsize=7)
        return save(fig, plots / "overhead-blocks.png")

SUITE = Overhead()
