"""CARS ("CARS: A Multi-layer Conflict-Aware Request Scheduler for NVMe
SSDs"): conflict-aware request scheduling against round-robin, the paper's
set-up in fio terms on ssdsim.

Flows are fio jobs (each its own process, so its own I/O context: one CARS
flow), random 4 KiB mixed reads and writes (rwmixread), direct I/O, a few
requests in flight each (--iodepth), flow k in region k of the device.
Three experiments, their mixes measured once and shared where they are the
same workload:

  pair   two flows, 50% reads each
  sweep  flow 2's read ratio swept (--read-ratios), flow 1 at 50%
  flows  N flows (--flows), every flow at --fairness-reads, for weighted
         fairness

each under none, mq-deadline, cars with filter=0 ("cars-rr": plain
round-robin with the same depth and throttle, the paper's baseline) and
cars (and, when asked for, "cars-probed": cars calibrated by
bench/probe.py as on a drive that publishes nothing, against cars
calibrated from ssdsim's sysfs); and one flow of each read ratio alone
under none (the device's own response time).  A flow's slowdown is its
mean response time (completion latency, reads and writes) in the mix over
a flow of its read ratio alone; weighted fairness is the sum over the
flows of 1 / slowdown.

CARS's model of the device is ssdsim's (bench/calibrate.py cars_tunables):
ssdsim runs write-through (write_buffer_kb=0, so a page is programmed when
its write is served, where the host can predict it) and is reloaded before
every run, so that each run starts from the same empty device and cars,
selected afresh, knows every page written since (its record of writes
starts empty with the device's); the write pointer is read from ssdsim
right before each cars run (Config.live_tunables).

The goal: half of the paper's gains over round-robin, i.e. cars's mean
slowdown at least 23% below cars-rr's and its IOPS at least 12% above
(the paper: 46% lower slowdown, 23% more IOPS, 67.5% better weighted
fairness).
"""
from __future__ import annotations

import argparse
import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import fio, jobs, prep
from bench.calibrate import cars_tunables, probed_tunables, read_ssdsim
from bench.markdown import table
from bench.plot import figure, grouped_bars, save, summary_lines
from bench.results import Results, Summary, summarize
from bench.runner import Config, Label, Phase, Plan, RunContext, RunError
from bench.suites import (OURS, UPSTREAM, Sched, Suite, SuiteReport, add_icount_argument,
                          extra_tunables, icount_note, ordered)
from bench.suites.k2 import csv

#: cars calibrated by bench/probe.py (its live tunables: probed_model())
PROBED = "cars-probed"
#: the compared configurations: label -> (elevator, cars's filter)
CONFIGS: dict[str, tuple[str, int | None]] = {
    "none": ("none", None), "mq-deadline": ("mq-deadline", None),
    "cars-rr": ("cars", 0), "cars": ("cars", 1), PROBED: ("cars", 1)}
SCHEDS = list(CONFIGS)
#: compared unless --schedulers says otherwise (cars-probed adds the probe,
#: about a minute, to the set-up)
DEFAULT_SCHEDS = ["none", "mq-deadline", "cars-rr", "cars"]
NAMES = {"cars-rr": "cars filter=0", PROBED: "cars (probed)"}
#: cars calibrated by the probe against cars calibrated from ssdsim's
#: sysfs: the most its mean slowdown or total IOPS may differ on a workload
PROBED_WITHIN = 0.05
EXPERIMENTS = {"pair": "two flows, 50% reads each",
               "sweep": "flow 2's read ratio swept, flow 1 at 50% reads",
               "flows": "N flows, weighted fairness"}
#: flow 1's read percentage (the pair's, the sweep's first flow)
READS = 50
READ_RATIOS = [0, 25, 50, 75, 100]
FLOWS = [2, 4, 8]
IODEPTH = 4
MAX_FLOWS = 64
P = 99.0
BASELINE = "none"
ALONE = "alone"
MIX = "mix"
#: the paper's gains of cars over round-robin, and the goal: half of them
PAPER = {"slowdown": 0.46, "iops": 0.23, "fairness": 0.675}
GOAL = {"slowdown": 0.23, "iops": 0.12}


def name(s: str) -> str:
    return NAMES.get(s, s)


def workload_key(reads: Sequence[int]) -> str:
    """A workload (a read percentage per flow) as a key: r50-r0."""
    return "-".join(f"r{r}" for r in reads)


def workload_reads(key: str) -> tuple[int, ...]:
    return tuple(int(x[1:]) for x in key.split("-"))


def workload_title(key: str) -> str:
    reads = workload_reads(key)
    if len(set(reads)) == 1:
        return f"{len(reads)} flows, {reads[0]}% reads each"
    return f"{len(reads)} flows: " + ", ".join(f"{r}%" for r in reads) + " reads"


def workload_short(key: str) -> str:
    """For a plot's axis: 8×50%, or 50%/0% reads per flow."""
    reads = workload_reads(key)
    if len(set(reads)) == 1:
        return f"{len(reads)}×{reads[0]}%"
    return "/".join(f"{r}%" for r in reads)


def experiment_workloads(experiments: Sequence[str], ratios: Sequence[int],
                         flows: Sequence[int], fair: Sequence[int]) -> dict[str, list[str]]:
    """Each experiment's workloads (keys), in its order."""
    out: dict[str, list[str]] = {}
    for e in experiments:
        if e == "pair":
            out[e] = [workload_key((READS, READS))]
        elif e == "sweep":
            out[e] = [workload_key((READS, r)) for r in ratios]
        elif e == "flows":
            out[e] = [workload_key([fair[k % len(fair)] for k in range(n)]) for n in flows]
    return out


def flow_name(k: int, reads: int) -> str:
    """fio job name of flow @k (from 0) reading @reads %."""
    return f"flow{k + 1}-r{reads}"


def flow_reads(job: str) -> int:
    return int(job.rsplit("-r", 1)[1])


def jobfile(dev: str, size_bytes: int, reads: Sequence[int], regions: int, runtime: float,
            ramp: float, ioengine: str, iodepth: int, cpus: int | None,
            comment: str = "") -> str:
    """One fio job per flow: random 4 KiB reads and writes (rwmixread: the
    flow's read percentage), direct I/O, @iodepth in flight; flow k in
    region k of @regions equal ones."""
    if iodepth < 1:
        raise ValueError(f"iodepth {iodepth}: at least 1")
    if len(reads) > regions:
        raise ValueError(f"{len(reads)} flows for {regions} regions")
    region = (size_bytes // regions) >> 20 << 20
    if region < (1 << 20):
        raise ValueError(f"device too small for {regions} regions of at least 1 MiB")
    g = jobs.common(dev, runtime, ramp, ioengine)
    g.update({"rw": "randrw", "bs": "4k", "iodepth": iodepth})
    out = []
    for k, r in enumerate(reads):
        if not 0 <= r <= 100:
            raise ValueError(f"read percentage {r}: 0 to 100")
        o: dict[str, jobs.Value] = {"rwmixread": r, "offset": f"{region * k >> 20}M",
                                    "size": f"{region >> 20}M"}
        if cpus:
            o["cpus_allowed"] = k % cpus
        out.append(jobs.Job(flow_name(k, r), o))
    return jobs.render(g, out, comment)


def write_through(ctx: RunContext) -> dict[str, Any]:
    """The phase's set-up: ssdsim reloaded write-through."""
    return prep.write_through(
        ctx, "ssdsim reloaded write-through (write_buffer_kb=0: a write completes "
        "when its page is programmed, so cars can predict the program), and "
        "again with the same parameters before every run (an empty device, "
        "write pointer at die 0)")


def ssdsim_model(ctx: RunContext) -> tuple[tuple[str, Label], ...]:
    """cars's tunables matching the ssdsim disk now (its write pointer
    included): a cars configuration's live tunables."""
    return tuple(cars_tunables(read_ssdsim(ctx.target, ctx.dev)).items())


def write_through_probed(ctx: RunContext) -> dict[str, Any]:
    """The phase's set-up with cars-probed among the configurations:
    write_through(), then bench/probe.py on the write-through device under
    none, as `bench calibrate cars --probe` runs it (the settle before
    every run reloads ssdsim, so no run sees what the probe wrote).  What
    it found is kept for probed_model() and recorded with the set-up."""
    info = write_through(ctx)
    ctx.say("probing the device for cars-probed (bench/probe.py)")
    values = probed_tunables(ctx.target, ctx.dev, ctx.device, ctx.out)
    ctx.state[PROBED] = values
    info["probed"] = values
    return info


def probed_model(ctx: RunContext) -> tuple[tuple[str, Label], ...]:
    """cars-probed's live tunables: what the set-up's probe found, then
    the write pointer from ssdsim as cars gets it (the probe cannot find
    it; both cars configurations are given it).  erase_us and the mapping
    cache stay at cars's defaults, as after `bench calibrate cars
    --probe`."""
    values = ctx.state.get(PROBED)
    if values is None:
        raise RunError("cars-probed runs before the phase's probe")
    die = int(read_ssdsim(ctx.target, ctx.dev)["write_die"]) % int(values["nr_dies"])
    return (*values.items(), ("write_pointer", die))


# ---------------------------------------------------------------------------
# analysis

@dataclass(frozen=True)
class Flow:
    name: str
    reads: int          # read percentage
    ios: int
    iops: float
    mean_us: float      # mean completion latency over its reads and writes
    read_us: float      # its reads' (NaN without reads)
    write_us: float
    p99_us: float       # over reads and writes (merged histograms)
    #: mean_us / alone; for a flow that completed no I/O, the run time /
    #: alone (a lower bound); NaN without an alone run of its read ratio
    slowdown: float = math.nan

    @property
    def starved(self) -> bool:
        return self.ios == 0


def flow_stats(result: dict[str, Any], job: str, alone_us: dict[int, float] | None = None,
               runtime_s: float = 0.0) -> Flow:
    """A flow's numbers from fio's output; its slowdown against @alone_us
    (read percentage -> mean response time alone)."""
    sides = {d: fio.job_stats(result, job, d) for d in ("read", "write")}
    ios = sum(s.ios for s in sides.values())
    mean = (sum(s.clat_mean_us * s.ios for s in sides.values()) / ios) if ios else math.nan
    reads = flow_reads(job)
    base = (alone_us or {}).get(reads, math.nan)
    rt = mean if ios else runtime_s * 1e6
    return Flow(job, reads, ios, sum(s.iops for s in sides.values()), mean,
                *(s.clat_mean_us if s.ios else math.nan for s in sides.values()),
                fio.merged_percentile(sides.values(), P), rt / base)


@dataclass(frozen=True)
class Mix:
    """One run of a workload."""
    flows: list[Flow]

    @property
    def n(self) -> int:
        return len(self.flows)

    @property
    def iops(self) -> float:
        return sum(f.iops for f in self.flows)

    @property
    def mean_slowdown(self) -> float:
        return statistics.fmean(f.slowdown for f in self.flows)

    @property
    def max_slowdown(self) -> float:
        return max(f.slowdown for f in self.flows)

    @property
    def fairness(self) -> float:
        """Weighted fairness: the sum over the flows of 1 / slowdown."""
        return sum(1 / f.slowdown for f in self.flows)


def mix_metrics(result: dict[str, Any], alone_us: dict[int, float], runtime_s: float) -> Mix:
    return Mix([flow_stats(result, j["jobname"], alone_us, runtime_s) for j in result["jobs"]])


@dataclass
class Data:
    #: read percentage -> the lone flow, one per run
    alone: dict[int, list[Flow]]
    #: workload -> configuration -> one per run
    mixes: dict[str, dict[str, list[Mix]]]

    def alone_us(self) -> dict[int, float]:
        """Each read ratio's mean response time alone (mean over runs)."""
        return {r: statistics.fmean(f.mean_us for f in fs if f.ios)
                for r, fs in self.alone.items() if any(f.ios for f in fs)}


def collect(res: Results) -> Data:
    d = Data({}, {})
    for r in res.where(kind=ALONE):
        f = flow_stats(r.result, r.jobs()[0])
        d.alone.setdefault(f.reads, []).append(f)
    base = d.alone_us()
    runtime = float(res.manifest["params"]["runtime"])
    for r in res.where(kind=MIX):
        d.mixes.setdefault(str(r.labels["workload"]), {}).setdefault(
            str(r.labels["sched"]), []).append(mix_metrics(r.result, base, runtime))
    return d


FLOW_KEYS = ("iops", "mean_us", "read_us", "write_us", "p99_us", "slowdown")
MIX_KEYS = ("iops", "mean_slowdown", "max_slowdown", "fairness")


def summarize_mixes(mixes: list[Mix]) -> dict[str, Any]:
    """Per configuration of a workload: MIX_KEYS and, per flow (by
    position), FLOW_KEYS, each a Summary over the runs."""
    out: dict[str, Any] = {k: summarize(getattr(m, k) for m in mixes) for k in MIX_KEYS}
    out["fairness_per_flow"] = summarize(m.fairness / m.n for m in mixes)
    out["starved"] = sum(f.starved for m in mixes for f in m.flows)
    out["flows"] = [{"name": f.name, **{k: summarize(getattr(m.flows[i], k) for m in mixes)
                                        for k in FLOW_KEYS}}
                    for i, f in enumerate(mixes[0].flows)]
    return out


def as_dicts(x: Any) -> Any:
    """Summaries (nested in dicts and lists) as dicts, for summary.json."""
    if isinstance(x, Summary):
        return x.as_dict()
    if isinstance(x, dict):
        return {k: as_dicts(v) for k, v in x.items()}
    if isinstance(x, list):
        return [as_dicts(v) for v in x]
    return x


def workloads_in(by_exp: dict[str, list[str]], have: Iterable[str]) -> list[str]:
    """The workloads of @have in the experiments' order, each once."""
    keep = set(have)
    return [w for w in dict.fromkeys(w for ws in by_exp.values() for w in ws) if w in keep]


def probed_change(probed: dict[str, Any], cars: dict[str, Any]) -> dict[str, float]:
    """cars-probed against cars on one workload (means over runs): mean
    slowdown and total IOPS, each as a fraction above cars's."""
    return {"slowdown": probed["mean_slowdown"].mean / cars["mean_slowdown"].mean - 1,
            "iops": probed["iops"].mean / cars["iops"].mean - 1}


def within(g: dict[str, float]) -> bool:
    return all(abs(v) <= PROBED_WITHIN for v in g.values())


def gains(cars: dict[str, Any], rr: dict[str, Any]) -> dict[str, float]:
    """cars against cars-rr on one workload (means over runs): slowdown
    reduction, IOPS gain, weighted-fairness gain, as fractions."""
    return {"slowdown": 1 - cars["mean_slowdown"].mean / rr["mean_slowdown"].mean,
            "iops": cars["iops"].mean / rr["iops"].mean - 1,
            "fairness": cars["fairness"].mean / rr["fairness"].mean - 1}


def meets(g: dict[str, float]) -> bool:
    return all(g[k] >= v for k, v in GOAL.items())


def pct(x: float) -> str:
    return "–" if math.isnan(x) else f"{x * 100:+.1f}%"


# ---------------------------------------------------------------------------

class CarsSuite(Suite):
    name = "cars"
    title = "CARS: conflict-aware dispatch against round-robin (slowdown, IOPS, fairness)"
    description = ("the CARS paper's flows on ssdsim (write-through): two flows at 50% "
                   "reads, flow 2's read ratio swept, 2-8 flows; none, mq-deadline, cars "
                   "filter=0 (round-robin), cars: IOPS, mean and p99 response time, "
                   "slowdown, weighted fairness")
    schedulers = (Sched("mq-deadline", UPSTREAM["mq-deadline"], required=False),
                  Sched("cars", OURS["cars"]))
    durations = (30.0, 5.0, 3)
    short_durations = (3.0, 0.5, 1)

    def add_arguments(self, p: argparse.ArgumentParser) -> None:
        p.add_argument("--experiments", type=csv(str, list(EXPERIMENTS)),
                       default=list(EXPERIMENTS),
                       help="pair: two flows, 50%% reads each; sweep: flow 2's read ratio "
                            "swept, flow 1 at 50%%; flows: N flows, weighted fairness "
                            "(default pair,sweep,flows)")
        p.add_argument("--read-ratios", type=csv(int, range(101)), default=READ_RATIOS,
                       help="sweep: flow 2's read percentages (default "
                            f"{','.join(map(str, READ_RATIOS))})")
        p.add_argument("--flows", type=csv(int, range(2, MAX_FLOWS + 1)), default=FLOWS,
                       help=f"flows: the numbers of flows, 2 to {MAX_FLOWS} (default "
                            f"{','.join(map(str, FLOWS))})")
        p.add_argument("--fairness-reads", type=csv(int, range(101)), default=[READS],
                       help="flows: the flows' read percentages, repeated over the flows "
                            f"(default {READS}: every flow at {READS}%%; 0,100: writers and "
                            "readers in turn)")
        p.add_argument("--iodepth", type=int, default=IODEPTH,
                       help=f"requests each flow keeps in flight (default {IODEPTH})")
        p.add_argument("--schedulers", type=csv(str, SCHEDS), default=DEFAULT_SCHEDS,
                       help=f"compared, of {','.join(SCHEDS)} (default "
                            f"{','.join(DEFAULT_SCHEDS)}; cars-rr is cars with filter=0, "
                            "cars-probed cars calibrated by bench/probe.py in the set-up "
                            "instead of from ssdsim's sysfs)")
        p.add_argument("--cars-tunables", default="", metavar="'NAME=VALUE ...'",
                       help="more cars tunables for the cars, cars-rr and cars-probed runs, "
                            "written after the ones matching ssdsim or probed (e.g. "
                            "'throttle_size=8')")
        add_icount_argument(p, "response times are of the guest's time, which a host "
                               "that stalls the guest does not advance (its vCPUs share one "
                               "host thread: give ssdsim a time_scale that keeps the device, "
                               "not the vCPUs, the bottleneck)")

    def plan(self, ctx: RunContext) -> Plan:
        a = ctx.args
        runtime, ramp = ctx.params["runtime"], ctx.params["ramp"]
        if ctx.device.kind != "ssdsim":
            raise ValueError(f"the cars suite runs on ssdsim: cars's model of the device (dies, "
                             f"timing, write pointer) is read from it; /dev/{ctx.dev} is "
                             f"{ctx.device.kind}")
        if getattr(a, "trace", None) == "lttng":
            raise ValueError("the cars suite reloads ssdsim before every run, which LTTng's "
                             "ssdsim probes prevent: use --trace ftrace")
        if a.iodepth < 1:
            raise ValueError("--iodepth must be at least 1")
        extra = extra_tunables(a.cars_tunables, "--cars-tunables", "cars", ctx.sched_info)
        scheds = [s for s in a.schedulers if CONFIGS[s][0] == "none"
                  or CONFIGS[s][0] in ctx.sched_info]
        model = cars_tunables(read_ssdsim(ctx.target, ctx.dev))
        by_exp = experiment_workloads(a.experiments, a.read_ratios, a.flows, a.fairness_reads)
        mixes = list(dict.fromkeys(w for ws in by_exp.values() for w in ws))
        ratios = list(dict.fromkeys(r for w in mixes for r in workload_reads(w)))
        regions = max(len(workload_reads(w)) for w in mixes)
        cpus = None if a.no_pin else ctx.target.ncpus()

        def config(key: str, s: str, reads: Sequence[int], labels: tuple[tuple[str, Label], ...],
                   what: str) -> Config:
            elv, filt = CONFIGS[s]
            text = jobfile(ctx.device.path, ctx.device.size_bytes, reads, regions, runtime,
                           ramp, a.ioengine, a.iodepth, cpus,
                           comment=f"cars suite: {what}, under {name(s)}")
            live = None if filt is None else probed_model if s == PROBED else ssdsim_model
            return Config(key, elv, text, runtime + ramp,
                          tunables=(("filter", filt), *extra) if filt is not None else (),
                          labels=labels + (("sched", s),), fio_output="json+",
                          live_tunables=live)
        blocks = [[config(f"{MIX}/{w}/{s}", s, workload_reads(w),
                          (("kind", MIX), ("workload", w)), workload_title(w))]
                  for w in mixes for s in scheds]
        blocks += [[config(f"{ALONE}/r{r}", BASELINE, (r,),
                           (("kind", ALONE), ("workload", workload_key((r,))), ("reads", r)),
                           f"one flow of {r}% reads alone")] for r in ratios]
        region_mib = (ctx.device.size_bytes // regions) >> 20
        notes = icount_note(a, ctx.target, runtime) + [
            f"flows: one fio job (process, so one I/O context and one cars flow) each, "
            f"random 4 KiB reads and writes (rwmixread), direct I/O, {a.ioengine} with "
            f"{a.iodepth} in flight; flow k in region k of {regions} ({region_mib} MiB "
            "each)",
            "cars and cars-rr (cars with filter=0: round-robin, same depth and throttle): "
            "the tunables matching ssdsim (bench/calibrate.py cars_tunables: "
            + " ".join(f"{k}={v}" for k, v in model.items() if k != "write_pointer")
            + "), the write pointer read from ssdsim's write_die right before each run"
            + (", then " + " ".join(f"{k}={v}" for k, v in extra) if extra else ""),
            f"slowdown baseline: each read ratio's flow alone under {BASELINE}"]
        probing = PROBED in scheds
        if probing:
            notes.append("cars (probed): cars calibrated by bench/probe.py, run once in the "
                         "set-up on the write-through device (the values are in the manifest's "
                         "set-up record and the report), the write pointer read from ssdsim "
                         "as for cars, erase_us and the mapping cache at cars's defaults")
        if cpus:
            notes.append(f"flow k pinned to CPU k mod {cpus}")
        phase = Phase("cars", blocks, write_through_probed if probing else write_through,
                      "ssdsim write-through" + (", then probed" if probing else ""),
                      settle=prep.empty_again)
        return Plan([phase], notes, {
            "experiments": a.experiments, "read_ratios": a.read_ratios, "flows": a.flows,
            "fairness_reads": a.fairness_reads, "iodepth": a.iodepth,
            "workloads": by_exp, "schedulers": scheds, "baseline": BASELINE,
            "regions": regions, "region_mib": region_mib, "cars_model": model,
            "cars_tunables": dict(extra), "goal": GOAL, "paper": PAPER, "icount": a.icount})

    def brief(self, c: Config, result: dict[str, Any]) -> str:
        fs = [flow_stats(result, j["jobname"]) for j in result["jobs"]]
        return "; ".join(f"{f.name} {f.iops:.0f} IOPS, {f.mean_us / 1000:.2f} ms" if f.ios
                         else f"{f.name} no I/O" for f in fs)

    # -- report -----------------------------------------------------------------

    def report(self, res: Results, plots: Path) -> SuiteReport:
        d = collect(res)
        p = res.manifest["params"]
        by_exp: dict[str, list[str]] = p.get("workloads") or {"workloads": sorted(d.mixes)}
        summ = {w: {s: summarize_mixes(ms) for s, ms in by_s.items()}
                for w, by_s in d.mixes.items()}
        vs = {w: gains(ss["cars"], ss["cars-rr"]) for w, ss in summ.items()
              if "cars" in ss and "cars-rr" in ss}
        out = [self._method(p), self._alone(d)]
        shown: set[str] = set()
        for e, ws in by_exp.items():
            ws = [w for w in ws if w in summ]
            if not ws:
                continue
            out.append(self._pair(ws[0], summ[ws[0]], plots) if e == "pair" else
                       self._series(e, ws, summ, plots, shown))
            shown.update(ws)
        out.append(self._versus(by_exp, vs, summ, plots))
        pv = {w: probed_change(ss[PROBED], ss["cars"]) for w, ss in summ.items()
              if PROBED in ss and "cars" in ss}
        probed = res.manifest.get("phases", {}).get("cars", {}).get("probed")
        if pv:
            out.append(self._probed(by_exp, pv, summ, p.get("cars_model") or {}, probed))
        head = self._finding(by_exp, vs, summ) + self._probed_finding(pv)
        summary = {"baseline": BASELINE, "goal": GOAL, "paper": PAPER,
                   "alone_us": {str(r): summarize(f.mean_us for f in fs if f.ios).as_dict()
                                for r, fs in sorted(d.alone.items())},
                   "workloads": {w: {"title": workload_title(w), "experiments":
                                     [e for e, ws in by_exp.items() if w in ws],
                                     "schedulers": as_dicts(ss)} for w, ss in summ.items()},
                   "cars_vs_rr": {w: {**g, "goal_met": meets(g)} for w, g in vs.items()},
                   "probed": probed,
                   "probed_vs_cars": {w: {**g, "within": within(g)} for w, g in pv.items()},
                   **self._goal(by_exp, vs)}
        return SuiteReport(f"\n## Findings\n\n{head}" + "".join(out), {"cars": summary}, head)

    def _goal(self, by_exp: dict[str, list[str]], vs: dict[str, dict[str, float]]
              ) -> dict[str, Any]:
        """The goal's verdict: on the pair (the paper's set-up), and the
        best gains over every workload (the paper's 'up to')."""
        pair = next((w for w in by_exp.get("pair", []) if w in vs), None)
        best = {k: max(g[k] for g in vs.values()) for k in PAPER} if vs else {}
        return {"pair": None if pair is None else {**vs[pair], "goal_met": meets(vs[pair])},
                "best": best or None, "best_goal_met": meets(best) if best else None}

    def _method(self, p: dict[str, Any]) -> str:
        return ("\n## Method\n\n"
                "Each flow is one fio job, its own process and so its own I/O context (one "
                "cars flow): random 4 KiB reads and writes in the proportion of its read "
                f"ratio (rwmixread), direct I/O, {p.get('iodepth', IODEPTH)} requests in "
                "flight, in a region of the device of its own. ssdsim runs write-through "
                "and is reloaded before every run: each run starts from the same empty "
                "device. **cars filter=0** is cars's plain round-robin with the same depth "
                "and throttle, the paper's baseline; both cars configurations get the "
                "tunables matching ssdsim (its dies, page, read and program times; the "
                "write pointer read from ssdsim before each run). A flow's **response "
                "time** is fio's completion latency over its reads and writes (mean; p99 "
                "from its merged histograms, fio json+); its **slowdown** is its mean "
                "response time in the mix over the mean response time of one flow of its "
                f"read ratio alone under {BASELINE} (the device's own). A flow that "
                "completed no I/O counts with the run time as its response time (a lower "
                "bound). **Weighted fairness** is the sum over the flows of 1 / slowdown "
                "(N for N flows that no one slows down; the table adds it divided by N). "
                f"The goal, half of the paper's gains over round-robin: cars's mean "
                f"slowdown at least {GOAL['slowdown']:.0%} below cars filter=0's and its "
                f"IOPS at least {GOAL['iops']:.0%} above (the paper: "
                f"{PAPER['slowdown']:.0%} lower slowdown, {PAPER['iops']:.0%} more IOPS, "
                f"{PAPER['fairness']:.1%} better weighted fairness). Numbers: mean ± "
                "standard deviation (min–max) over repetitions.\n")

    def _alone(self, d: Data) -> str:
        rows = []
        for r in sorted(d.alone):
            fs = d.alone[r]
            rows.append([f"{r}%", summarize(f.iops for f in fs).fmt(1, 0),
                         summarize(f.mean_us for f in fs if f.ios).fmt(1e-3, 2),
                         summarize(f.read_us for f in fs).fmt(1e-3, 2),
                         summarize(f.write_us for f in fs).fmt(1e-3, 2),
                         summarize(f.p99_us for f in fs).fmt(1e-3, 2), len(fs)])
        return (f"\n## Alone (under {BASELINE})\n\n"
                + table(["reads", "IOPS", "mean response time (ms)", "reads (ms)",
                         "writes (ms)", "p99 (ms)", "runs"], rows))

    def _totals(self, w: str, ss: dict[str, dict[str, Any]]) -> str:
        n = len(workload_reads(w))
        rows = [[name(s), v["iops"].fmt(1, 0), v["mean_slowdown"].fmt(1, 2),
                 v["max_slowdown"].fmt(1, 2), v["fairness"].fmt(1, 2),
                 v["fairness_per_flow"].fmt(1, 3), v["starved"], v["iops"].n]
                for s, v in ((s, ss[s]) for s in ordered(ss, SCHEDS))]
        return table(["scheduler", "total IOPS", "mean slowdown", "max slowdown",
                      f"weighted fairness (of {n})", "÷ N", "flows without I/O", "runs"], rows)

    def _flows(self, ss: dict[str, dict[str, Any]]) -> str:
        rows = []
        for s in ordered(ss, SCHEDS):
            for f in ss[s]["flows"]:
                rows.append([name(s), f["name"], f["iops"].fmt(1, 0), f["mean_us"].fmt(1e-3, 2),
                             f["read_us"].fmt(1e-3, 2), f["write_us"].fmt(1e-3, 2),
                             f["p99_us"].fmt(1e-3, 2), f["slowdown"].fmt(1, 2)])
        return table(["scheduler", "flow", "IOPS", "mean response time (ms)", "reads (ms)",
                      "writes (ms)", "p99 (ms)", "slowdown"], rows, "llrrrrrr")

    def _pair(self, w: str, ss: dict[str, dict[str, Any]], plots: Path) -> str:
        scheds = ordered(ss, SCHEDS)
        flows = [f["name"] for f in ss[scheds[0]]["flows"]]
        fig, ax = figure(3, 1, width=4.4, height=3.4)
        for col, (key, scale, ylabel) in enumerate((("slowdown", 1.0, "slowdown"),
                                                    ("iops", 1.0, "IOPS"),
                                                    ("p99_us", 1e-3, "p99 response time (ms)"))):
            a = ax[0][col]
            grouped_bars(a, [name(s) for s in scheds], [
                (fl, [scaled(ss[s]["flows"][i][key], scale) for s in scheds])
                for i, fl in enumerate(flows)])
            a.set_ylabel(ylabel)
            a.tick_params(axis="x", labelsize=7)
            a.grid(alpha=0.3, axis="y")
            a.legend(fontsize=7)
        ax[0][0].axhline(1, color="k", lw=0.8, ls=":")
        fig.suptitle(workload_title(w), fontsize=9)
        png = save(fig, plots / "cars-pair.png")
        return (f"\n## {EXPERIMENTS['pair'].capitalize()}\n\n" + self._totals(w, ss) + "\n"
                + self._flows(ss) + f"\n![{EXPERIMENTS['pair']}]({png})\n")

    def _series(self, e: str, ws: list[str], summ: dict[str, dict[str, dict[str, Any]]],
                plots: Path, shown: set[str]) -> str:
        """The sweep (x: flow 2's read percentage) or the flows experiment
        (x: the number of flows): lines per scheduler, a table per workload
        (those of a workload in @shown are above)."""
        xs = [workload_reads(w)[1] if e == "sweep" else len(workload_reads(w)) for w in ws]
        scheds = ordered({s for w in ws for s in summ[w]}, SCHEDS)
        empty = summarize([])
        panels = (("mean_slowdown", "mean slowdown"), ("iops", "total IOPS"),
                  ("fairness", "weighted fairness (Σ 1/slowdown)") if e == "flows" else
                  ("max_slowdown", "max slowdown"))
        fig, ax = figure(3, 1, width=4.4, height=3.4)
        for col, (key, ylabel) in enumerate(panels):
            a = ax[0][col]
            summary_lines(a, xs, [(name(s), [summ[w].get(s, {}).get(key, empty) for w in ws])
                                  for s in scheds])
            if key == "fairness":
                a.plot(xs, xs, "k:", lw=0.8, label="N (no slowdown)")
            a.set_xlabel("flow 2's reads (%)" if e == "sweep" else "flows")
            a.set_xticks(xs)
            a.set_ylabel(ylabel)
            a.grid(alpha=0.3)
            a.legend(fontsize=7)
        png = save(fig, plots / f"cars-{e}.png")
        parts = [f"\n## {EXPERIMENTS.get(e, e).capitalize()}\n\n![{e}]({png})\n"]
        for w in ws:
            parts.append(f"\n### {workload_title(w)}\n\n" + (
                "The same runs as above.\n" if w in shown else
                self._totals(w, summ[w]) + "\n" + self._flows(summ[w])))
        return "".join(parts)

    def _versus(self, by_exp: dict[str, list[str]], vs: dict[str, dict[str, float]],
                summ: dict[str, dict[str, dict[str, Any]]], plots: Path) -> str:
        ws = workloads_in(by_exp, vs)
        if not ws:
            return "\n## cars against cars filter=0\n\nNot measured (both are needed).\n"
        rows = []
        for w in ws:
            g, c, r = vs[w], summ[w]["cars"], summ[w]["cars-rr"]
            rows.append([workload_title(w), f"{r['mean_slowdown'].mean:.2f} → "
                         f"{c['mean_slowdown'].mean:.2f}", pct(-g["slowdown"]),
                         f"{r['iops'].mean:.0f} → {c['iops'].mean:.0f}", pct(g["iops"]),
                         f"{r['fairness'].mean:.2f} → {c['fairness'].mean:.2f}",
                         pct(g["fairness"]), "yes" if meets(g) else "no"])
        fig, ax = figure(1, 1, width=max(5.0, 1.1 * len(ws) + 2), height=3.6)
        a = ax[0][0]
        grouped_bars(a, [workload_short(w) for w in ws], [
            (label, [summarize([100 * vs[w][k]]) for w in ws]) for k, label in (
                ("slowdown", "slowdown reduction"), ("iops", "IOPS gain"),
                ("fairness", "weighted-fairness gain"))])
        for k, color in (("slowdown", "tab:blue"), ("iops", "tab:orange")):
            a.axhline(100 * GOAL[k], color=color, ls="--", lw=1,
                      label=f"goal: {GOAL[k]:.0%} {'less slowdown' if k == 'slowdown' else 'more IOPS'}")
        a.axhline(0, color="k", lw=0.8)
        a.set_ylabel("cars vs cars filter=0 (%)")
        a.tick_params(axis="x", labelsize=7)
        a.grid(alpha=0.3, axis="y")
        a.legend(fontsize=7)
        png = save(fig, plots / "cars-vs-rr.png")
        return ("\n## cars against cars filter=0 (round-robin)\n\n"
                f"Goal: slowdown at least {GOAL['slowdown']:.0%} lower and IOPS at least "
                f"{GOAL['iops']:.0%} higher (the paper: {PAPER['slowdown']:.0%}, "
                f"{PAPER['iops']:.0%}; weighted fairness {PAPER['fairness']:.1%} better).\n\n"
                + table(["workload", "mean slowdown", "change", "total IOPS", "change",
                         "weighted fairness", "change", "goal met"], rows, "lrrrrrrl")
                + f"\n![cars against cars filter=0]({png})\n")

    def _probed(self, by_exp: dict[str, list[str]], pv: dict[str, dict[str, float]],
                summ: dict[str, dict[str, dict[str, Any]]], model: dict[str, Any],
                probed: dict[str, Any] | None) -> str:
        """cars calibrated by the probe against cars calibrated from
        ssdsim's sysfs: the values, then each workload's mean slowdown and
        total IOPS."""
        keys = [k for k in model if k != "write_pointer"]
        keys += [k for k in probed or {} if k not in keys]
        vals = table(["tunable", "from ssdsim's sysfs", "probed"],
                     [[k, model.get(k, "–"), (probed or {}).get(k, "cars's default")]
                      for k in keys])
        ws = workloads_in(by_exp, pv)
        rows = []
        for w in ws:
            g, c, q = pv[w], summ[w]["cars"], summ[w][PROBED]
            rows.append([workload_title(w), f"{c['mean_slowdown'].mean:.2f} → "
                         f"{q['mean_slowdown'].mean:.2f}", pct(g["slowdown"]),
                         f"{c['iops'].mean:.0f} → {q['iops'].mean:.0f}", pct(g["iops"]),
                         "yes" if within(g) else "no"])
        return ("\n## cars calibrated by the probe against cars from ssdsim's sysfs\n\n"
                "The probe (bench/probe.py, as `bench calibrate cars --probe` runs it) measured "
                "the write-through device in the set-up; both get the write pointer from "
                "ssdsim.\n\n" + vals + "\n"
                + table(["workload", "mean slowdown, sysfs → probed", "change",
                         "total IOPS, sysfs → probed", "change",
                         f"within {PROBED_WITHIN:.0%}"], rows, "lrrrrl"))

    def _probed_finding(self, pv: dict[str, dict[str, float]]) -> str:
        if not pv:
            return ""
        worst = {k: max(pv, key=lambda w: abs(pv[w][k])) for k in ("slowdown", "iops")}
        return (f"- cars calibrated by the probe against cars from ssdsim's sysfs: within "
                f"{PROBED_WITHIN:.0%} on {sum(within(g) for g in pv.values())} of {len(pv)} "
                f"workload(s); the largest changes: mean slowdown "
                f"{pct(pv[worst['slowdown']]['slowdown'])} "
                f"({workload_title(worst['slowdown'])}), total IOPS "
                f"{pct(pv[worst['iops']]['iops'])} ({workload_title(worst['iops'])}).\n")

    def _finding(self, by_exp: dict[str, list[str]], vs: dict[str, dict[str, float]],
                 summ: dict[str, dict[str, dict[str, Any]]]) -> str:
        if not vs:
            return "cars and cars filter=0 were not both measured: no comparison.\n"
        lines = []
        pair = next((w for w in by_exp.get("pair", []) if w in vs), None)
        if pair is not None:
            g, c, r = vs[pair], summ[pair]["cars"], summ[pair]["cars-rr"]
            lines.append(
                f"{workload_title(pair)}, cars against cars filter=0 (round-robin): mean "
                f"slowdown {r['mean_slowdown'].mean:.2f} → {c['mean_slowdown'].mean:.2f} "
                f"(**{pct(-g['slowdown'])}**; goal ≤ −{GOAL['slowdown']:.0%}, paper "
                f"−{PAPER['slowdown']:.0%}), total IOPS {r['iops'].mean:.0f} → "
                f"{c['iops'].mean:.0f} (**{pct(g['iops'])}**; goal ≥ +{GOAL['iops']:.0%}, "
                f"paper +{PAPER['iops']:.0%}): goal **{'met' if meets(g) else 'not met'}** "
                f"({g['slowdown'] / GOAL['slowdown']:.0%} of the slowdown goal, "
                f"{g['iops'] / GOAL['iops']:.0%} of the IOPS goal).")
            lines.append(self._why(pair, c, r))
        best = {k: max(vs, key=lambda w: vs[w][k]) for k in PAPER}
        lines.append(
            f"Over {len(vs)} workload(s), the best of cars against cars filter=0 (the "
            f"paper's 'up to'): slowdown {pct(-vs[best['slowdown']]['slowdown'])} "
            f"({workload_title(best['slowdown'])}), IOPS {pct(vs[best['iops']]['iops'])} "
            f"({workload_title(best['iops'])}), weighted fairness "
            f"{pct(vs[best['fairness']]['fairness'])} ({workload_title(best['fairness'])}; "
            f"paper +{PAPER['fairness']:.1%}); goal met on "
            f"{sum(meets(g) for g in vs.values())} of {len(vs)}.")
        for w in by_exp.get("flows", []):
            if w in summ and "none" in summ[w] and "cars" in summ[w]:
                lines.append(f"{workload_title(w)}: weighted fairness " + ", ".join(
                    f"{name(s)} {summ[w][s]['fairness'].mean:.2f}"
                    for s in ordered(summ[w], SCHEDS)) + f" (of {len(workload_reads(w))}).")
        return "".join(f"- {ln}\n" for ln in lines)

    def _why(self, w: str, c: dict[str, Any], r: dict[str, Any]) -> str:
        """Where the difference comes from: reads' and writes' mean
        response times under cars and cars filter=0."""
        def side(key: str) -> str:
            vals = [(f[key].mean, g[key].mean) for f, g in zip(r["flows"], c["flows"])
                    if f[key].n and g[key].n]
            if not vals:
                return "–"
            rr = statistics.fmean(v for v, _ in vals)
            cc = statistics.fmean(v for _, v in vals)
            return f"{rr / 1000:.2f} → {cc / 1000:.2f} ms ({pct(cc / rr - 1)})"
        return (f"Where it comes from ({workload_title(w)}, mean over the flows, cars filter=0 "
                f"→ cars): reads {side('read_us')}, writes {side('write_us')}; the filter "
                "holds a read whose die is predicted busy programming and dispatches another "
                "flow's request instead.")


def scaled(s: Summary, k: float) -> Summary:
    return Summary(s.n, s.mean * k, s.sd * k, s.median * k, s.lo * k, s.hi * k)


SUITE = CarsSuite()
