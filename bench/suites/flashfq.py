"""FlashFQ (Shen and Park, USENIX ATC 2013): fairness among concurrent tasks
on flash, the paper's four synthetic scenarios:

  a  one 4 KiB random reader and one 4 KiB random writer
  b  16 4 KiB readers and 16 4 KiB writers
  c  16 4 KiB readers and 16 128 KiB readers
  d  16 4 KiB writers and 16 128 KiB writers

each under none, mq-deadline, kyber, bfq and flashfq, plus one task of each
class alone (by default under none: the device's own response time, the
paper's "running alone"; --baseline same runs them under each scheduler).

A task is one fio job, so its own process and I/O context: synchronous
direct I/O (psync, one request at a time, as the paper's tasks), random
offsets in a region of the device of its own.  A task's slowdown is its mean
response time in the mix over its class's mean response time alone.  With n
tasks of equal weight each is entitled to 1/n of the device, so the
proportional slowdown is n.  Reported per scenario and scheduler: each
class's mean slowdown and the worst task's, the 99.9th percentile response
time per class (from the class's merged latency histograms, fio json+), and
whether flashfq keeps every class within 1.5x the proportional slowdown.

COST_POINTS says which task class measures which of flashfq's cost
tunables (`python3 -m bench calibrate flashfq`, bench/calibrate.py).
"""
from __future__ import annotations

import argparse
import math
import statistics
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import fio, jobs, prep
from bench.markdown import table
from bench.plot import figure, grouped_bars, save
from bench.results import Results, summarize
from bench.runner import Config, Phase, Plan, RunContext
from bench.suites import (OURS, UPSTREAM, Sched, Suite, SuiteReport, add_icount_argument,
                          extra_tunables, icount_note, ordered)
from bench.suites.k2 import OCCUPANCIES, csv, occupier

P = 99.9
SCHEDS = ["none", "mq-deadline", "kyber", "bfq", "flashfq"]
ALONE = "alone"
#: the goal: every class's mean slowdown within this factor of proportional
FAIR_FACTOR = 1.5
BASELINES = {"none": "alone under none (the device's own response time)",
             "same": "alone under the same scheduler as the mix"}


@dataclass(frozen=True)
class TaskClass:
    key: str        # fio job names are <key>-<i>
    rw: str
    bs: str
    one: str        # "4 KiB reader"
    many: str       # "4 KiB readers"


CLASSES = {c.key: c for c in (
    TaskClass("r4k", "randread", "4k", "4 KiB reader", "4 KiB readers"),
    TaskClass("w4k", "randwrite", "4k", "4 KiB writer", "4 KiB writers"),
    TaskClass("r128k", "randread", "128k", "128 KiB reader", "128 KiB readers"),
    TaskClass("w128k", "randwrite", "128k", "128 KiB writer", "128 KiB writers"))}

#: scenario -> its two task classes, and whether each has --tasks tasks
#: (False: one each)
SCENARIOS: dict[str, tuple[tuple[str, str], bool]] = {
    "a": (("r4k", "w4k"), False),
    "b": (("r4k", "w4k"), True),
    "c": (("r4k", "r128k"), True),
    "d": (("w4k", "w128k"), True),
}

#: flashfq's cost tunables and the task class whose device time per request
#: each one is (bench/calibrate.py measures it)
COST_POINTS = {"cost_read_4k_ns": "r4k", "cost_read_128k_ns": "r128k",
               "cost_write_4k_ns": "w4k", "cost_write_128k_ns": "w128k"}
COST_RANGE = (1, 1_000_000_000)


def ssdsim_dies(params: dict[str, str]) -> int:
    """The dies of ssdsim with module parameters @params: its parallelism."""
    return int(params["channels"]) * int(params["dies_per_channel"])


def ssdsim_costs(params: dict[str, str]) -> dict[str, int]:
    """flashfq's four cost points (ns) on ssdsim with module parameters
    @params: the mean latency of one request at a time in steady state, as
    flashfq-core.h derives its defaults (ssdsim's default parameters at
    time_scale 1).  A read holds each die it touches for read + transfer per
    page, its pages spread over the dies; a write through the write buffer
    costs what its pages take to program, spread over all dies (without a
    buffer, as a read with program instead of read)."""
    ts = int(params["time_scale"])
    dies = ssdsim_dies(params)
    page = int(params["page_size"])
    rd = (int(params["read_ns"]) + int(params["xfer_ns"])) * ts
    wr = (int(params["program_ns"]) + int(params["xfer_ns"])) * ts
    buffered = int(params.get("write_buffer_kb", "0")) > 0
    out = {}
    for tunable, cls in COST_POINTS.items():
        pages = -(-int(CLASSES[cls].bs.removesuffix("k")) * 1024 // page)
        per_die = -(-pages // dies)
        if CLASSES[cls].rw == "randread":
            ns = per_die * rd
        else:
            ns = pages * wr // dies if buffered else per_die * wr
        out[tunable] = min(COST_RANGE[1], max(COST_RANGE[0], ns))
    return out


def sfq_bound_us(tasks: list[tuple[str, int]], tunables: dict[str, str]) -> float | None:
    """Start-time fair queueing's delay bound for @tasks ((class, number))
    at flashfq's costs in @tunables (ns), in us: a request can wait for one
    request of every other task besides its own service (Goyal, Vin and
    Cheng 1997), so with equal weights one request's cost of every task.
    The costs are device time one request at a time: a device that serves
    several at once gets through them sooner.  None when a cost is not
    among @tunables (flashfq's own defaults, not recorded)."""
    tunable = {cls: t for t, cls in COST_POINTS.items()}
    if any(c not in tunable or tunable[c] not in tunables for c, _ in tasks):
        return None
    return sum(n * int(tunables[tunable[c]]) for c, n in tasks) / 1000


def scenario_tasks(scn: str, tasks: int) -> list[tuple[str, int]]:
    """(class, number of tasks) of a scenario."""
    classes, many = SCENARIOS[scn]
    return [(c, tasks if many else 1) for c in classes]


def scenario_title(scn: str, tasks: int) -> str:
    return f"({scn}) " + " + ".join(f"{n} {CLASSES[c].many}" if n > 1 else f"one {CLASSES[c].one}"
                                     for c, n in scenario_tasks(scn, tasks))


def task_class(job: str) -> str:
    return job.rsplit("-", 1)[0]


def jobfile(dev: str, size_bytes: int, tasks: list[tuple[str, int]], regions: int,
            runtime: float, ramp: float, cpus: int | None, comment: str = "",
            iodepth: int = 1) -> str:
    """One fio job per task: psync (one request at a time), direct I/O,
    random offsets in region k of @regions equal ones for the k-th task;
    with @iodepth above 1, io_uring keeping that many requests in flight
    (bench calibrate)."""
    if iodepth < 1:
        raise ValueError(f"iodepth {iodepth}: at least 1")
    g = jobs.common(dev, runtime, ramp, "psync" if iodepth == 1 else "io_uring")
    g["iodepth"] = iodepth
    region = (size_bytes // regions) >> 20 << 20
    if region < (1 << 20):
        raise ValueError(f"device too small for {regions} regions of at least 1 MiB")
    if sum(n for _, n in tasks) > regions:
        raise ValueError(f"{sum(n for _, n in tasks)} tasks for {regions} regions")
    out = []
    k = 0
    for cls, n in tasks:
        c = CLASSES[cls]
        for i in range(n):
            o: dict[str, jobs.Value] = {"rw": c.rw, "bs": c.bs,
                                        "offset": f"{region * k >> 20}M",
                                        "size": f"{region >> 20}M"}
            if cpus:
                o["cpus_allowed"] = k % cpus
            out.append(jobs.Job(f"{cls}-{i}", o))
            k += 1
    return jobs.render(g, out, comment)


# ---------------------------------------------------------------------------
# analysis

@dataclass(frozen=True)
class Task:
    name: str
    cls: str
    ios: int
    mean_us: float
    #: mean response time / the class's alone; for a task that completed no
    #: I/O, the run time / the class's alone (a lower bound)
    slowdown: float

    @property
    def starved(self) -> bool:
        return self.ios == 0


@dataclass(frozen=True)
class Mix:
    """One mixed run."""
    tasks: list[Task]
    #: class -> slowdown (mean over its tasks), worst (its worst task's),
    #: p999_us (merged histograms), ios_per_task, starved (tasks)
    classes: dict[str, dict[str, float]]

    @property
    def n(self) -> int:
        return len(self.tasks)

    @property
    def worst(self) -> Task:
        return worst_of(self.tasks)


def worst_of(tasks: Iterable[Task]) -> Task:
    """The task with the largest slowdown (unknown ones last)."""
    return max(tasks, key=lambda t: -1.0 if math.isnan(t.slowdown) else t.slowdown)


def class_p999(stats: list[fio.JobStats]) -> float:
    """The class's 99.9th percentile response time in us: from its tasks'
    merged latency histograms (fio json+); without them, the largest of the
    tasks' own p99.9."""
    return fio.merged_percentile(stats, P)


def mix_metrics(result: dict[str, Any], alone_us: dict[str, float], runtime_s: float) -> Mix:
    """Slowdowns and percentiles of a mixed run, given each class's mean
    response time alone (us)."""
    stats = [fio.job_stats(result, j["jobname"]) for j in result["jobs"]]
    tasks = []
    for st in stats:
        cls = task_class(st.name)
        base = alone_us.get(cls, float("nan"))
        rt = st.lat_mean_us if st.ios else runtime_s * 1e6
        tasks.append(Task(st.name, cls, st.ios, st.lat_mean_us, rt / base))
    classes: dict[str, dict[str, float]] = {}
    for cls in dict.fromkeys(t.cls for t in tasks):
        ts = [t for t in tasks if t.cls == cls]
        classes[cls] = {
            "slowdown": statistics.fmean(t.slowdown for t in ts),
            "worst": max(t.slowdown for t in ts),
            "p999_us": class_p999([s for s in stats if task_class(s.name) == cls]),
            "ios_per_task": statistics.fmean(t.ios for t in ts),
            "starved": float(sum(t.starved for t in ts))}
    return Mix(tasks, classes)


@dataclass
class Data:
    baseline: str
    #: (scheduler, class) -> the lone task's statistics, one per run
    alone: dict[tuple[str, str], list[fio.JobStats]]
    #: scenario -> scheduler -> one per run
    mixes: dict[str, dict[str, list[Mix]]]

    def alone_us(self, sched: str) -> dict[str, float]:
        """Each class's mean response time alone (mean over the runs), the
        baseline of @sched's mixes."""
        ref = sched if self.baseline == "same" else "none"
        out = {}
        for (s, cls), sts in self.alone.items():
            done = [st.lat_mean_us for st in sts if st.ios]
            if s == ref and done:
                out[cls] = statistics.fmean(done)
        return out


def collect(res: Results) -> Data:
    p = res.manifest["params"]
    d = Data(str(p.get("baseline", "none")), {}, {})
    for r in res.where(scenario=ALONE):
        d.alone.setdefault((r.labels["sched"], r.labels["class"]), []).append(
            r.job(r.jobs()[0]))
    for r in res.runs:
        scn, s = r.labels["scenario"], r.labels["sched"]
        if scn != ALONE:
            d.mixes.setdefault(scn, {}).setdefault(s, []).append(
                mix_metrics(r.result, d.alone_us(s), float(p["runtime"])))
    return d


# ---------------------------------------------------------------------------

class FlashFQSuite(Suite):
    name = "flashfq"
    title = "FlashFQ: fairness among concurrent tasks (slowdown against running alone)"
    description = ("the FlashFQ paper's 4 scenarios (4 KiB reader+writer; 16+16 4 KiB "
                   "readers/writers; 16 4 KiB + 16 128 KiB readers; the same writers), "
                   "synchronous tasks; none, mq-deadline, kyber, bfq, flashfq: slowdowns, "
                   "p99.9")
    schedulers = tuple(Sched(s, {**UPSTREAM, **OURS}[s], required=s == "flashfq")
                       for s in SCHEDS if s != "none")
    durations = (30.0, 5.0, 3)
    short_durations = (2.0, 0.5, 1)

    def add_arguments(self, p: argparse.ArgumentParser) -> None:
        p.add_argument("--scenarios", type=csv(str, list(SCENARIOS)), default=list(SCENARIOS),
                       help="a: one 4 KiB reader + one 4 KiB writer; b: N 4 KiB readers + N "
                            "4 KiB writers; c: N 4 KiB + N 128 KiB readers; d: N 4 KiB + N "
                            "128 KiB writers (default a,b,c,d)")
        p.add_argument("--tasks", type=int, default=16,
                       help="N, the tasks of each class in scenarios b-d (default 16)")
        p.add_argument("--schedulers", type=csv(str, SCHEDS), default=SCHEDS,
                       help=f"compared (default {','.join(SCHEDS)})")
        p.add_argument("--baseline", choices=list(BASELINES), default="none",
                       help="the slowdown's denominator: each task class running alone "
                            "under none (default), or under the same scheduler as the mix")
        p.add_argument("--occupancy", choices=list(OCCUPANCIES), default="empty",
                       help="device state: empty before every run (default; ssdsim "
                            "reloaded with fill_percent=0, another device discarded), full "
                            "(first fill_percent=100 / one write pass) or asis.  The "
                            "scenarios' writes fill the device otherwise, and its garbage "
                            "collection slows later runs whatever their scheduler.  On a "
                            "trimmed real drive reads of unwritten blocks skip the flash: "
                            "use full")
        p.add_argument("--flashfq-tunables", default="", metavar="'NAME=VALUE ...'",
                       help="flashfq tunables for its runs, e.g. the costs `python3 -m "
                            "bench calibrate flashfq` measured (default: its defaults; on "
                            "ssdsim, costs computed from its module parameters)")
        add_icount_argument(p, "response times are of the guest's time, which a host "
                               "that stalls the guest does not advance (give ssdsim a "
                               "time_scale that keeps the device, not the vCPUs, the "
                               "bottleneck)")

    def plan(self, ctx: RunContext) -> Plan:
        a = ctx.args
        runtime, ramp = ctx.params["runtime"], ctx.params["ramp"]
        if a.tasks < 1:
            raise ValueError("--tasks must be at least 1")
        cpus = None if a.no_pin else ctx.target.ncpus()
        scheds = [s for s in a.schedulers if s == "none" or s in ctx.sched_info]
        tun: tuple[tuple[str, str], ...] = extra_tunables(
            a.flashfq_tunables, "--flashfq-tunables", "flashfq", ctx.sched_info)
        regions = 2 * a.tasks
        region_mib = (ctx.device.size_bytes // regions) >> 20
        notes = icount_note(a, ctx.target, runtime)
        notes.append(f"tasks: one fio job (process) each, psync (one request at a time), "
                     f"direct I/O, random offsets; task k of a run in region k of {regions} "
                     f"({region_mib} MiB each)")
        if cpus:
            notes.append(f"task k pinned to CPU k mod {cpus}")
        if ctx.device.kind == "ssdsim":
            mp = ctx.device.module_params
            if not any(k in COST_POINTS for k, _ in tun):
                tun += tuple((k, str(v)) for k, v in ssdsim_costs(mp).items())
                notes.append("flashfq's costs: ssdsim's, from its module parameters "
                             f"(time_scale {mp['time_scale']}; flashfq-core.h's defaults are "
                             "these at time_scale 1)")
            if "depth" not in dict(tun):
                dies = ssdsim_dies(mp)
                tun += (("depth", str(dies)),)
                notes.append(f"flashfq's depth: ssdsim's {dies} dies, its parallelism (the "
                             "paper's D)")
        if tun:
            notes.append("flashfq runs with " + " ".join(f"{k}={v}" for k, v in tun))

        def config(key: str, sched: str, tasks: list[tuple[str, int]],
                   labels: tuple[tuple[str, str], ...], what: str) -> list[Config]:
            text = jobfile(ctx.device.path, ctx.device.size_bytes, tasks, regions, runtime,
                           ramp, cpus, comment=f"flashfq suite: {what}, under {sched}")
            return [Config(key, sched, text, runtime + ramp,
                           tunables=tun if sched == "flashfq" else (),
                           labels=labels + (("sched", sched),), fio_output="json+")]
        blocks = [config(f"{scn}/{s}", s, scenario_tasks(scn, a.tasks), (("scenario", scn),),
                         scenario_title(scn, a.tasks))
                  for scn in a.scenarios for s in scheds]
        needed = dict.fromkeys(c for scn in a.scenarios for c, _ in scenario_tasks(scn, a.tasks))
        for s in scheds if a.baseline == "same" else ["none"]:
            blocks += [config(f"{ALONE}/{s}/{c}", s, [(c, 1)],
                              (("scenario", ALONE), ("class", c)), f"one {CLASSES[c].one} alone")
                       for c in needed]
        phase = Phase("flashfq", blocks, None if a.occupancy == "asis" else
                      occupier(a.occupancy == "full"), OCCUPANCIES[a.occupancy],
                      settle=prep.empty_again if a.occupancy == "empty" else prep.settle)
        return Plan([phase], notes, {
            "ioengine": "psync", "scenarios": a.scenarios, "tasks": a.tasks,
            "schedulers": scheds,
            "baseline": a.baseline, "occupancy": a.occupancy, "regions": regions,
            "region_mib": region_mib, "flashfq_tunables": dict(tun),
            "fair_factor": FAIR_FACTOR, "icount": a.icount})

    def brief(self, c: Config, result: dict[str, Any]) -> str:
        per: dict[str, list[fio.JobStats]] = {}
        for j in result["jobs"]:
            per.setdefault(task_class(j["jobname"]), []).append(
                fio.job_stats(result, j["jobname"]))
        parts = []
        for cls, sts in per.items():
            done = [s.lat_mean_us for s in sts if s.ios]
            parts.append(f"{cls} {statistics.fmean(done) / 1000:.2f} ms" if done else
                         f"{cls} –")
            if len(done) < len(sts):
                parts[-1] += f" ({len(sts) - len(done)} task(s) without I/O)"
        return "mean response time per task: " + ", ".join(parts)

    def report(self, res: Results, plots: Path) -> SuiteReport:
        d = collect(res)
        p = res.manifest["params"]
        out = ["\n## Method\n\n"
               "Each task is one fio job, its own process and so its own I/O context: "
               "synchronous direct I/O (psync, one request at a time), random offsets in "
               "a region of the device of its own. A task's **slowdown** is its mean "
               "response time in the mix divided by the mean response time of one task of "
               f"its class running **{BASELINES.get(d.baseline, d.baseline)}** "
               f"(`--baseline {d.baseline}`). With n tasks of equal weight each is "
               "entitled to 1/n of the device: the **proportional slowdown** is n. A "
               "class's slowdown is the mean over its tasks; the worst task is the task "
               "with the largest. A task that completed no I/O counts with the run time "
               "as its response time (a lower bound). p99.9 per class comes from the "
               "class's merged latency histograms (fio json+); below 1000 I/Os it is "
               "close to the largest latency seen. Numbers: mean ± standard deviation "
               "(min–max) over repetitions.\n"]
        summary: dict[str, Any] = {"baseline": d.baseline, "fair_factor": FAIR_FACTOR,
                                   "alone": {}, "scenarios": {}}
        rows = []
        for s, cls in [(s, c) for s in ordered({k[0] for k in d.alone}, SCHEDS)
                       for c in ordered({k[1] for k in d.alone if k[0] == s}, CLASSES)]:
            sts = d.alone[(s, cls)]
            m = summarize(st.lat_mean_us for st in sts if st.ios)
            p999 = summarize(class_p999([st]) for st in sts)
            rows.append([CLASSES[cls].one if cls in CLASSES else cls, s, m.fmt(1e-3, 3),
                         p999.fmt(1e-3, 2), f"{statistics.fmean(st.ios for st in sts):.0f}",
                         len(sts)])
            summary["alone"].setdefault(s, {})[cls] = {"mean_us": m.as_dict(), "p999_us": p999.as_dict()}
        out.append("\n## Alone\n\n" + table(["task", "scheduler", "mean response time (ms)",
                                             "p99.9 (ms)", "I/Os", "runs"], rows, "llrrrr"))
        findings = []
        tasks = int(p.get("tasks", 16))
        costs = {str(k): str(v) for k, v in p.get("flashfq_tunables", {}).items()}
        for scn in ordered(d.mixes, SCENARIOS):
            sec, summ, finding = self._scenario(scn, tasks, d.mixes[scn], plots, costs)
            out.append(sec)
            summary["scenarios"][scn] = summ
            findings.append(finding)
        lines = "".join(f"- {f}\n" for f in findings)
        head = (f"Slowdown baseline: each task class {BASELINES.get(d.baseline, d.baseline)}."
                f"\n\n{lines}")
        return SuiteReport(f"\n## Findings\n\n{head}" + "".join(out), {"flashfq": summary},
                           head)

    def _scenario(self, scn: str, tasks: int, by_sched: dict[str, list[Mix]],
                  plots: Path, costs: dict[str, str]) -> tuple[str, dict[str, Any], str]:
        scheds = ordered(by_sched, SCHEDS)
        first = by_sched[scheds[0]][0]
        n = first.n
        classes = list(first.classes)
        title = (scenario_title(scn, tasks) if scn in SCENARIOS and
                 sum(c for _, c in scenario_tasks(scn, tasks)) == n else scn)
        bound = (sfq_bound_us(scenario_tasks(scn, tasks), costs) if scn in SCENARIOS
                 and "flashfq" in by_sched else None)
        summ: dict[str, Any] = {"title": title, "proportional": n, "sfq_bound_us": bound,
                                "schedulers": {}}
        rows, crows = [], []
        for s in scheds:
            mixes = by_sched[s]
            worst = summarize(m.worst.slowdown for m in mixes)
            per: dict[str, dict[str, Any]] = {}
            for cls in classes:
                got = [m.classes[cls] for m in mixes if cls in m.classes]
                sd, cw, p999 = (summarize(g[k] for g in got)
                                for k in ("slowdown", "worst", "p999_us"))
                starved = int(sum(g["starved"] for g in got))
                per[cls] = {"slowdown": sd.as_dict(), "worst": cw.as_dict(), "p999_us": p999.as_dict(),
                            "ios_per_task": statistics.fmean(g["ios_per_task"] for g in got),
                            "starved": starved}
                crows.append([s, CLASSES[cls].many if cls in CLASSES else cls, sd.fmt(1, 1),
                              f"{sd.mean / n:.2f}", cw.fmt(1, 1), p999.fmt(1e-3, 2),
                              f"{per[cls]['ios_per_task']:.0f}", starved, sd.n])
            fair = all(per[c]["slowdown"]["mean"] <= FAIR_FACTOR * n for c in classes)
            w = worst_of(m.worst for m in mixes)
            summ["schedulers"][s] = {"classes": per, "worst_task": worst.as_dict(),
                                     "worst_task_name": w.name, "within_fair_factor": fair}
            rows.append([s, worst.fmt(1, 1), f"{worst.mean / n:.2f}",
                         f"{CLASSES[w.cls].one if w.cls in CLASSES else w.cls} ({w.name})",
                         "yes" if fair else "no", worst.n])
        png = self._plot(scn, title, n, classes, scheds, by_sched, plots)
        why = ("" if bound is None else
               f" Start-time fair queueing's delay bound at flashfq's costs: **{bound / 1000:.1f}"
               " ms**, one request's cost of every task: a request whose start tag comes up "
               "behind one of every other task's waits about that long (the heavy tasks' tags "
               "move in lockstep when they start together at one cost each), and a heavy "
               "task's request, tagged a whole request after its last, can wait longer.")
        sec = (f"\n## {title}\n\nProportional slowdown: **{n}** ({n} concurrent tasks).{why}"
               "\n\n"
               + table(["scheduler", "worst task's slowdown", "÷ proportional", "worst task",
                        f"every class ≤ {FAIR_FACTOR:g}× proportional", "runs"], rows, "lrrllr")
               + "\n" + table(["scheduler", "class", "mean slowdown", "÷ proportional",
                               "worst task of the class", "p99.9 (ms)", "I/Os per task",
                               "tasks without I/O", "runs"], crows, "llrrrrrrr")
               + f"\n![{title}]({png})\n")
        return sec, summ, self._finding(title, n, classes, summ["schedulers"], bound)

    def _finding(self, title: str, n: int, classes: list[str],
                 by: dict[str, dict[str, Any]], bound_us: float | None) -> str:
        def name(c: str) -> str:
            return CLASSES[c].many if c in CLASSES else c
        parts = [f"{title}, proportional slowdown {n}: "]
        ff = by.get("flashfq")
        if ff is None:
            parts.append("flashfq not measured")
        else:
            parts.append(f"flashfq keeps every class within {FAIR_FACTOR:g}× of it: **"
                         + ("yes" if ff["within_fair_factor"] else "no") + "** ("
                         + ", ".join(f"{name(c)} {ff['classes'][c]['slowdown']['mean']:.1f}"
                                     for c in classes) + ")")
        worst = {s: v["worst_task"]["mean"] for s, v in by.items()
                 if not math.isnan(v["worst_task"]["mean"])}
        if worst:
            best = min(worst, key=lambda s: worst[s])
            parts.append(f"; lowest worst-task slowdown: **{best}** {worst[best]:.1f} ("
                         + ", ".join(f"{s} {v:.1f}" for s, v in worst.items() if s != best)
                         + ")")
        if ff is not None and "bfq" in by:
            parts.append("; p99.9 flashfq vs bfq: " + ", ".join(
                f"{name(c)} {ff['classes'][c]['p999_us']['mean'] / 1000:.2f} vs "
                f"{by['bfq']['classes'][c]['p999_us']['mean'] / 1000:.2f} ms" for c in classes))
            if bound_us is not None:
                parts.append(f" (start-time fair queueing's delay bound {bound_us / 1000:.1f} ms)")
        elif ff is not None:
            parts.append("; bfq not measured")
        return "".join(parts)

    def _plot(self, scn: str, title: str, n: int, classes: list[str], scheds: list[str],
              by_sched: dict[str, list[Mix]], plots: Path) -> str:
        """The paper's style: per scheduler, a bar per class (mean slowdown,
        min–max over repetitions), the worst task, the proportional line."""
        fig, ax = figure(1, 1, width=6.4, height=3.8)
        a = ax[0][0]
        heights = grouped_bars(a, scheds, [
            (CLASSES[c].many if c in CLASSES else c,
             [summarize(m.classes[c]["slowdown"] for m in by_sched[s] if c in m.classes)
              for s in scheds]) for c in classes])
        worst = [summarize(m.worst.slowdown for m in by_sched[s]).mean for s in scheds]
        a.plot(range(len(scheds)), worst, "kv", ls="none", label="worst task")
        a.axhline(n, color="k", ls="--", lw=1, label=f"proportional ({n})")
        a.axhline(FAIR_FACTOR * n, color="tab:red", ls=":", lw=1,
                  label=f"{FAIR_FACTOR:g}× proportional")
        vals = [v for v in heights + worst + [n] if v > 0 and not math.isnan(v)]
        if vals and max(vals) / min(vals) > 30:
            a.set_yscale("log")
        a.set_ylabel("slowdown (mean response time\n/ alone)")
        a.set_title(title, fontsize=9)
        a.grid(alpha=0.3, axis="y")
        a.legend(fontsize=7)
        return save(fig, plots / f"flashfq-{scn}.png")


SUITE = FlashFQSuite()
