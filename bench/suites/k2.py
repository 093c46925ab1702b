"""K2 (Miemietz, Weisse, Haertig, RTSS 2019), Section 3's analysis seed.

Three asynchronous best-effort jobs at queue depth 32 (prioclass 2) and one
synchronous real-time job (psync, iodepth 1, prioclass 1 prio 0, 2 ms think
time), 4 KiB, for sequential read, random read, sequential write and random
write; under none and under k2 with max_inflight 1..64.  Outputs the RT job's
99.9th percentile latency and the total bandwidth per bound (the paper's
Figures 4 and 5), on an empty device and, as in Section 4, on a fully
occupied one with a longer run; and the paper's objective selection:

  O1  the largest bound whose RT p99.9 is at most alpha% of none's
  O2  the smallest bound that keeps at least beta% of none's bandwidth

And a tag-pressure workload (K2's rt_tags): best-effort jobs that queue more
requests than there are scheduler tags (4 at iodepth nr_requests), so that
without a reserve the real-time job sleeps in tag allocation behind them;
the RT p99.9 under none, k2 with rt_tags=0 and k2 with its default reserve,
against k2 beside the light load above, at one bound (default 1).

With --targets-us, the adaptive bound (k2's target_latency_us) beside the
fixed ones: a row per target, and whether it lies on or beyond the
fixed-bound latency/bandwidth frontier (no fixed bound has both a lower RT
p99.9 and a higher bandwidth; 'unclear' when only the means say one has,
within the spread of the repetitions).  With --changing-load, a run whose
background load changes halfway (1 best-effort job of the operation, then
--changing-be-jobs of --changing-be-op, random writes by default: behind
programs on the dies the same bound means a much longer wait), at every
fixed bound and at the first target: the RT p99.9 and the bandwidth of
each half, and which of them meet the target in both halves (at most the
target, and within TARGET_SLACK of it: fio's tail in a TCG guest takes in
the guest's CPU).  These runs
record k2's trace events and keep them (runs/NNN-<key>.trace.txt.gz), from
which a figure shows the adaptive run over time: the bound in force, each
RT request's latency and their p99 per window against the target, and the
bandwidth per window beside that of the best fixed bound meeting the
target, the second half's start marked.
"""
from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import fio, jobs, prep
from bench.markdown import table
from bench.plot import figure, grouped_bars, save
from bench.results import Results, Run, summarize
from bench.runner import Config, Phase, Plan, RunContext
from bench.suites import Sched, Suite, SuiteReport, add_icount_argument, icount_note, ordered

OPS = {"read": "sequential read", "randread": "random read",
       "write": "sequential write", "randwrite": "random write"}
BOUNDS = (1, 2, 4, 8, 16, 32, 64)
OCCUPANCIES = {"empty": "empty device", "full": "fully occupied device",
               "asis": "device as it is (no preconditioning)"}
RT = "rt"
P = 99.9
# A target is met within this factor too: the issue's own test of adaptive
# K2 (p99.9 within 20 % of the target), since fio's tail under a TCG guest
# takes in the guest's CPU, which no scheduler sees (tests/vm/test_bench.py).
TARGET_SLACK = 1.2


def csv(kind: type, choices: Any = None) -> Any:
    def parse(text: str) -> list[Any]:
        try:
            vals = [kind(x) for x in text.split(",") if x.strip()]
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a comma-separated list of {kind.__name__}: "
                                             f"{text!r}")
        bad = [v for v in vals if choices is not None and v not in choices]
        if bad or not vals:
            raise argparse.ArgumentTypeError(
                f"{text!r}: choose from {', '.join(map(str, choices))}" if choices else
                f"{text!r}: empty list")
        return vals
    return parse


# ---------------------------------------------------------------------------
# jobs

def _jobs(names: list[tuple[str, bool]], op: str, region: int, thinktime_us: int,
          be_iodepth: int, cpus: int | None, extra: dict[str, jobs.Value] | None = None,
          first: int = 0) -> list[jobs.Job]:
    """The suite's jobs: (name, real-time?) each; a real-time job is
    synchronous with a think time, the others asynchronous at @be_iodepth;
    sequential jobs each stream through their own @region of the device;
    job i (counted from @first) pinned to CPU i mod @cpus; @extra options
    for all."""
    out = []
    for i, (name, rt) in enumerate(names, first):
        o: dict[str, jobs.Value] = (
            {"ioengine": "psync", "iodepth": 1, "thinktime": thinktime_us,
             "prioclass": 1, "prio": 0} if rt else
            {"iodepth": be_iodepth, "prioclass": 2, "prio": 4})
        o.update(extra or {})
        if not op.startswith("rand"):
            if region < (1 << 20):
                raise ValueError(f"device too small for {len(names)} sequential regions")
            o.update({"offset": f"{region * i >> 20}M", "size": f"{region >> 20}M"})
        if cpus:
            o["cpus_allowed"] = i % cpus
        out.append(jobs.Job(name, o))
    return out


def jobfile(dev: str, size_bytes: int, op: str, runtime: float, ramp: float, ioengine: str,
            thinktime_us: int, be_jobs: int, be_iodepth: int, cpus: int | None,
            comment: str = "") -> str:
    g = jobs.common(dev, runtime, ramp, ioengine)
    g.update({"bs": "4k", "rw": op})
    names = [(RT, True)] + [(f"be{i + 1}", False) for i in range(be_jobs)]
    region = (size_bytes // len(names)) >> 20 << 20
    return jobs.render(g, _jobs(names, op, region, thinktime_us, be_iodepth, cpus), comment)


def changing_jobfile(dev: str, size_bytes: int, op: str, runtime: float, ramp: float,
                     ioengine: str, thinktime_us: int, be_jobs: tuple[int, int],
                     be_iodepth: int, cpus: int | None, comment: str = "",
                     be_op2: str = "") -> str:
    """The RT job and @be_jobs[0] best-effort jobs for the first half of
    @runtime, then another RT job and @be_jobs[1] best-effort jobs for the
    second (startdelay), those doing @be_op2 if given: each half's figures
    are its own jobs'.  Jobs are named rt1/rt2 and be1-<i>/be2-<i>."""
    half = runtime / 2
    g = jobs.common(dev, half, ramp, ioengine)
    g.update({"bs": "4k", "rw": op})
    region = (size_bytes // (1 + max(be_jobs))) >> 20 << 20
    out = []
    for h in (1, 2):
        names = [(f"{RT}{h}", True)] + [(f"be{h}-{i + 1}", False)
                                        for i in range(be_jobs[h - 1])]
        out += _jobs(names[:1], op, region, thinktime_us, be_iodepth, cpus,
                     {"startdelay": f"{half + ramp:g}s"} if h == 2 else None)
        be_op = be_op2 if h == 2 and be_op2 else op
        out += _jobs(names[1:], be_op, region, thinktime_us, be_iodepth, cpus,
                     {"startdelay": f"{half + ramp:g}s", "rw": be_op} if h == 2 else None,
                     first=1)
    return jobs.render(g, out, comment)


def clamp_bounds(bounds: list[int], depth: int, dev: str) -> tuple[list[int], list[str]]:
    """Bounds above the queue depth become the depth (once); notes saying so."""
    out: list[int] = []
    notes = []
    if any(b < 1 for b in bounds):
        raise ValueError(f"k2 bounds must be at least 1: {bounds}")
    for b in bounds:
        e = min(b, depth)
        if e != b:
            notes.append(f"max_inflight {b} clamped to {e}, the queue depth (nr_requests "
                         f"under k2) of /dev/{dev}")
        if e not in out:
            out.append(e)
    return out, notes


def occupier(full: bool) -> Callable[[RunContext], dict[str, Any]]:
    """A phase set-up bringing the device to the empty or full state."""
    def setup(ctx: RunContext) -> dict[str, Any]:
        return prep.occupy(ctx, full)
    return setup


# ---------------------------------------------------------------------------
# analysis

@dataclass(frozen=True)
class Point:
    """Means over repetitions at one bound (bound 0 stands for none)."""
    bound: int
    p999_us: float
    bw_kib: float


@dataclass(frozen=True)
class Selection:
    o1: int | None      # largest bound with RT p99.9 <= alpha% of none's
    o2: int | None      # smallest bound with bandwidth >= beta% of none's
    both: list[int]     # bounds meeting both objectives


def select(none: Point, points: list[Point], alpha: float, beta: float) -> Selection:
    lat_ok = [p.bound for p in points if p.p999_us <= alpha / 100.0 * none.p999_us]
    bw_ok = [p.bound for p in points if p.bw_kib >= beta / 100.0 * none.bw_kib]
    return Selection(o1=max(lat_ok) if lat_ok else None, o2=min(bw_ok) if bw_ok else None,
                     both=sorted(set(lat_ok) & set(bw_ok)))


def dominating(pt: Point, fixed: list[Point]) -> list[int]:
    """The fixed bounds with both a lower RT p99.9 and a higher bandwidth
    than @pt: none means @pt lies on or beyond their frontier."""
    return [p.bound for p in fixed if p.p999_us < pt.p999_us and p.bw_kib > pt.bw_kib]


def margin(pt: Point, fixed: list[Point], bound: int) -> str:
    """By how much fixed @bound beats the adaptive point @pt, for a finding:
    one run each has no spread to judge a bandwidth 0.1 % higher by."""
    b = next(p for p in fixed if p.bound == bound)
    return (f": {b.p999_us / 1000:.2f} against {pt.p999_us / 1000:.2f} ms, "
            f"{b.bw_kib / pt.bw_kib - 1:+.1%} bandwidth")


def beyond_spread(adaptive: list[dict[str, float]],
                  by_bound: dict[int, list[dict[str, float]]], dom: list[int]) -> list[int]:
    """Of the bounds in @dom (each with both a lower mean RT p99.9 and a
    higher mean bandwidth than the adaptive runs), those that beat every
    adaptive run in every one of their own on both; with one run on either
    side the means are all there is, and every bound in @dom counts."""
    out = []
    for b in dom:
        ms = by_bound[b]
        if len(ms) < 2 or len(adaptive) < 2 or (
                max(m["p999_us"] for m in ms) < min(m["p999_us"] for m in adaptive)
                and min(m["bw_kib"] for m in ms) > max(m["bw_kib"] for m in adaptive)):
            out.append(b)
    return out


def _ranks(v: list[float]) -> list[float]:
    order = sorted(range(len(v)), key=lambda i: v[i])
    ranks = [0.0] * len(v)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and v[order[j + 1]] == v[order[i]]:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2.0
        i = j + 1
    return ranks


def spearman(x: list[float], y: list[float]) -> float:
    rx, ry = _ranks(x), _ranks(y)
    mx, my = sum(rx) / len(rx), sum(ry) / len(ry)
    num = sum((a - mx) * (b - my) for a, b in zip(rx, ry))
    den = math.sqrt(sum((a - mx) ** 2 for a in rx) * sum((b - my) ** 2 for b in ry))
    return num / den if den else 0.0


def falls_with_bound(points: list[Point]) -> bool:
    """The RT tail latency falls as the bound falls: lower at the smallest
    bound than at the largest and, with three bounds or more, rank-
    correlated with the bound (Spearman >= 0.5)."""
    pts = sorted(points, key=lambda p: p.bound)
    if len(pts) < 2:
        return False
    if not pts[0].p999_us < pts[-1].p999_us:
        return False
    if len(pts) >= 3:
        return spearman([p.bound for p in pts], [p.p999_us for p in pts]) >= 0.5
    return True


def trend_verdict(points: list[Point], lowest: list[float], highest: list[float]) -> str:
    """'yes' when the RT tail falls with the bound (falls_with_bound) and,
    with repetitions, every run at the smallest bound beat every run at the
    largest; 'unclear (ranges overlap)' when only the means say so; 'no'."""
    if not falls_with_bound(points):
        return "no"
    if len(lowest) > 1 and len(highest) > 1 and max(lowest) >= min(highest):
        return "unclear (ranges overlap)"
    return "yes"


def run_metrics(r: Run) -> dict[str, float]:
    rt = r.job(RT)
    total = sum(r.job(j).bw_kib for j in r.jobs())
    return {"p999_us": fio.percentile(rt, P), "p99_us": fio.percentile(rt, 99.0),
            "rt_mean_us": rt.lat_mean_us, "rt_iops": rt.iops, "rt_ios": float(rt.ios),
            "bw_kib": total,
            "be_bw_kib": total - rt.bw_kib}


def bound_label(b: Any) -> int:
    return 0 if b == "none" else int(b)


def collect(res: Results) -> dict[str, dict[str, dict[int, list[dict[str, float]]]]]:
    """occupancy -> op -> bound (0: none) -> per-run metrics."""
    out: dict[str, dict[str, dict[int, list[dict[str, float]]]]] = {}
    for r in res.runs:
        lb = r.labels
        if "pressure" in lb or "target_us" in lb or "changing" in lb:
            continue
        out.setdefault(lb["occupancy"], {}).setdefault(lb["op"], {}).setdefault(
            bound_label(lb["bound"]), []).append(run_metrics(r))
    return out


def collect_adaptive(res: Results) -> dict[str, dict[str, dict[int, list[dict[str, float]]]]]:
    """occupancy -> op -> target (us) -> per-run metrics of the adaptive rows,
    with k2_p999_us (traced_rt_p999()) where the run's trace was kept."""
    out: dict[str, dict[str, dict[int, list[dict[str, float]]]]] = {}
    for r in res.runs:
        lb = r.labels
        if "target_us" not in lb or "changing" in lb:
            continue
        m = run_metrics(r)
        k2 = traced_rt_p999(res, r)
        if k2 is not None:
            m["k2_p999_us"] = k2
        out.setdefault(lb["occupancy"], {}).setdefault(lb["op"], {}).setdefault(
            int(lb["target_us"]), []).append(m)
    return out


def traced_rt(res: Results, r: Run) -> list[tuple[float, float]] | None:
    """Run @r's real-time requests in the block layer, from its kept k2
    trace (tracepoints.report.rt_latencies(): completion in seconds from the
    trace's first event, latency insert to completion in ms); None without
    the trace, when the tracer lost events (a request missing a part is
    left out), or when it cannot be read (an LTTng trace without
    babeltrace2)."""
    f = kept_trace(res, r)
    if f is None or r.rec["trace"].get("lost"):
        return None
    from tracepoints import report as tr

    try:
        return tr.rt_latencies(tr.read_trace(f, "k2"))
    except (OSError, ImportError):
        return None


def p999_between(rt: list[tuple[float, float]], lo_s: float, hi_s: float) -> float | None:
    """The nearest-rank RT p99.9 (us) of the requests of @rt (traced_rt())
    completed in [@lo_s, @hi_s), None if there are none."""
    from tracepoints import report as tr

    lat = sorted(round(ms * 1000) for s, ms in rt if lo_s <= s < hi_s)
    return tr.percentile(lat, P) if lat else None


def traced_rt_p999(res: Results, r: Run) -> float | None:
    """Run @r's RT p99.9 (us) in the block layer (traced_rt()), of the
    requests completed after the ramp (fio's measured period, from the
    trace's first event); None without a readable, whole trace.  This is
    the latency adaptive K2 measures and governs (the target's); fio's adds
    the reader's system call and its wake-up, which in a TCG guest on a
    busy host lose milliseconds no I/O scheduler can give back (measured: a
    run whose trace had one RT read above a 28.5 ms target, 1 of 2467, and
    fio's p99.9 34.3 ms, 1.20 of it)."""
    rt = traced_rt(res, r)
    if rt is None:
        return None
    return p999_between(rt, float(res.manifest.get("params", {}).get("ramp", 0)), math.inf)


def traced_half_p999(res: Results, r: Run) -> dict[str, float]:
    """A changing-load run's RT p99.9 (us) in the block layer per half
    (traced_rt()), over each half's measured period as fio's figures are:
    the first half's jobs measure [ramp, ramp + runtime), the second's
    start at halfway_s() and measure from a ramp later, for the suite's
    runtime; k2_p999_us_1 and _2, those with requests, {} without a
    readable, whole trace."""
    rt = traced_rt(res, r)
    if rt is None:
        return {}
    p = res.manifest.get("params", {})
    ramp, runtime = float(p.get("ramp", 0)), float(p.get("runtime", 0))
    out = {}
    for h, lo in ((1, ramp), (2, halfway_s(res) + ramp)):
        v = p999_between(rt, lo, lo + runtime)
        if v is not None:
            out[f"k2_p999_us_{h}"] = v
    return out


def half_metrics(r: Run) -> dict[str, float]:
    """A changing-load run: each half's RT p99.9 and total bandwidth."""
    out = {}
    for h in (1, 2):
        names = [j for j in r.jobs() if j == f"{RT}{h}" or j.startswith(f"be{h}-")]
        out[f"p999_us_{h}"] = fio.percentile(r.job(f"{RT}{h}"), P)
        out[f"bw_kib_{h}"] = sum(r.job(j).bw_kib for j in names)
    return out


def changing_finding(op: str, how: str, ad: dict[str, Any], fixed_ok: dict[str, Any],
                     best: tuple[str, dict[str, Any]] | None, ok: bool) -> str:
    """The changing-load finding for @op: whether adaptive K2 (@ad, @ok)
    meets the target in both halves (@how: "" or " within N %"), which
    fixed bounds do (@fixed_ok: configuration -> summary; @best, the one of
    most bandwidth), and whether adaptive does so with more bandwidth than
    any of them."""
    beaten = best is None or best[1]["bw_kib_mean"] < ad["bw_kib_mean"]
    return (f"changing load, {OPS.get(op, op)}: k2 adaptive meets the target{how} in both "
            f"halves: **{'yes' if ok else 'no'}** ({ad['bw_kib_mean'] / 1024:.1f} MiB/s); "
            "fixed bounds that do: "
            + (", ".join(k.split("-", 1)[1] for k in fixed_ok) or "none")
            + (f", the best of them {best[0].split('-', 1)[1]} at "
               f"{best[1]['bw_kib_mean'] / 1024:.1f} MiB/s" if best else "")
            + "; no single fixed bound does so with adaptive's bandwidth: "
            + f"**{'yes' if ok and beaten else 'no'}**")


def changing_conf(lb: dict[str, Any]) -> str:
    """A changing-load run's configuration: "k2-<bound>" or "adaptive-<target>"."""
    return f"adaptive-{lb['target_us']}" if "target_us" in lb else f"k2-{lb['bound']}"


def collect_changing(res: Results) -> dict[str, dict[str, list[dict[str, float]]]]:
    """op -> configuration (changing_conf()) -> per-run metrics of the
    changing-load runs, with the block layer's per half
    (traced_half_p999()) where the run's trace was kept."""
    out: dict[str, dict[str, list[dict[str, float]]]] = {}
    for r in res.runs:
        lb = r.labels
        if "changing" not in lb:
            continue
        out.setdefault(lb["op"], {}).setdefault(changing_conf(lb), []).append(
            {**half_metrics(r), **traced_half_p999(res, r)})
    return out


def kept_trace(res: Results, r: Run) -> Path | None:
    """Run @r's kept trace (its manifest entry names it and the file is
    there), or None."""
    f = r.rec.get("trace", {}).get("file")
    return res.folder / f if f and (res.folder / f).exists() else None


def first_traced(res: Results, op: str, conf: str) -> Run | None:
    """The first repetition of changing-load configuration @conf of @op
    whose trace was kept (kept_trace()), or None."""
    runs = [r for r in res.runs if "changing" in r.labels and r.labels.get("op") == op
            and changing_conf(r.labels) == conf and kept_trace(res, r) is not None]
    return min(runs, key=lambda r: (r.rec.get("rep", 0), r.rec.get("i", 0)), default=None)


def halfway_s(res: Results) -> float:
    """When a changing-load run's second half starts, in seconds after fio
    starts: the ramp and the suite's run time (half the changing-load
    run's), as changing_jobfile() put them in its jobs' startdelay."""
    p = res.manifest.get("params", {})
    return float(p.get("ramp", 0)) + float(p.get("runtime", 0))


def points(by_bound: dict[int, list[dict[str, float]]]) -> tuple[Point | None, list[Point]]:
    def mean(b: int) -> Point:
        ms = by_bound[b]
        return Point(b, summarize(m["p999_us"] for m in ms).mean,
                     summarize(m["bw_kib"] for m in ms).mean)
    none = mean(0) if 0 in by_bound else None
    return none, [mean(b) for b in sorted(by_bound) if b != 0]


def selection_rows(data: dict[str, dict[str, dict[int, list[dict[str, float]]]]],
                   alpha: float, beta: float) -> list[list[str]]:
    rows = []
    for occ in ordered(data, OCCUPANCIES):
        for op in ordered(data[occ], OPS):
            none, pts = points(data[occ][op])
            if none is None or not pts:
                rows.append([occ, op, "–", "–", "no none or no k2 runs", "", ""])
                continue
            s = select(none, pts, alpha, beta)
            by = {p.bound: p for p in pts}
            o1 = (f"{s.o1} ({by[s.o1].p999_us / 1000:.2f} ms)" if s.o1 is not None
                  else "no bound qualifies")
            o2 = (f"{s.o2} ({by[s.o2].bw_kib / 1024:.1f} MiB/s)" if s.o2 is not None
                  else "no bound qualifies")
            rows.append([occ, OPS.get(op, op), f"{none.p999_us / 1000:.2f} ms",
                         f"{none.bw_kib / 1024:.1f} MiB/s", o1, o2,
                         ", ".join(map(str, s.both)) or "–"])
    return rows


#: the tag-pressure cases in report order: (label "pressure", scheduler, rt_tags)
PRESSURE_CASES = (("light", "k2", "default"), ("flood", "none", "–"),
                  ("flood", "k2", "0"), ("flood", "k2", "default"))


def collect_pressure(res: Results) -> dict[str, dict[tuple[str, str, str], list[dict[str, float]]]]:
    """op -> (case, scheduler, rt_tags) -> per-run metrics of the tag-pressure
    workload."""
    out: dict[str, dict[tuple[str, str, str], list[dict[str, float]]]] = {}
    for r in res.runs:
        lb = r.labels
        if "pressure" not in lb:
            continue
        sched = "none" if lb["bound"] == "none" else "k2"
        out.setdefault(lb["op"], {}).setdefault(
            (lb["pressure"], sched, str(lb["rt_tags"])), []).append(run_metrics(r))
    return out


def pressure_case_name(case: tuple[str, str, str], bound: Any, be: str) -> str:
    load, sched, rt_tags = case
    who = "none" if sched == "none" else f"k2 {bound}, rt_tags {rt_tags}"
    return f"{load} ({be}): {who}"


SELECT_HEADERS = ["occupancy", "operation", "none: RT p99.9", "none: bandwidth",
                  "O1: largest bound, p99.9 ≤ α·none", "O2: smallest bound, BW ≥ β·none",
                  "bounds meeting both"]


# ---------------------------------------------------------------------------

class K2Suite(Suite):
    name = "k2"
    title = "K2: real-time tail latency and bandwidth against the in-flight bound"
    description = ("3 best-effort async jobs (iodepth 32) + 1 RT sync job (2 ms think time), "
                   "4 KiB, 4 operation types; none vs k2 max_inflight 1..64; empty and "
                   "fully occupied device (K2 paper, Figures 4-5, Section 4)")
    schedulers = (Sched("k2", "k2-iosched"),)
    durations = (30.0, 5.0, 3)
    short_durations = (3.0, 0.5, 2)

    def add_arguments(self, p: argparse.ArgumentParser) -> None:
        p.add_argument("--ops", type=csv(str, list(OPS)), default=list(OPS),
                       help="operation types (default: read,randread,write,randwrite)")
        p.add_argument("--bounds", type=csv(int), default=list(BOUNDS),
                       help="k2 max_inflight values (default: 1,2,4,8,16,32,64; clamped "
                            "to the queue depth)")
        p.add_argument("--occupancy", type=csv(str, list(OCCUPANCIES)),
                       default=["empty", "full"],
                       help="device states, in order: empty (ssdsim fill_percent=0 / "
                            "discard), full (fill_percent=100 / one write pass), asis "
                            "(default: empty,full)")
        p.add_argument("--full-ops", type=csv(str, list(OPS)), default=None,
                       help="operation types for the full device (default: --ops)")
        p.add_argument("--full-bounds", type=csv(int), default=None,
                       help="bounds for the full device (default: --bounds)")
        p.add_argument("--full-runtime-factor", type=float, default=2.0,
                       help="the full device runs this many times longer (default 2)")
        p.add_argument("--thinktime-us", type=int, default=2000,
                       help="RT job think time in us (default 2000)")
        p.add_argument("--be-jobs", type=int, default=3, help="best-effort jobs (default 3)")
        p.add_argument("--be-iodepth", type=int, default=32,
                       help="best-effort queue depth (default 32)")
        p.add_argument("--tag-pressure", type=csv(str, [*OPS, "off"]), default=["randread"],
                       help="operation types of the tag-pressure workload, or off "
                            "(default: randread)")
        p.add_argument("--pressure-be-jobs", type=int, default=4,
                       help="tag pressure: best-effort jobs (default 4)")
        p.add_argument("--pressure-iodepth", type=int, default=0,
                       help="tag pressure: best-effort queue depth (default 0: the queue's "
                            "nr_requests under k2, so that together they want 4 times the "
                            "scheduler tags of a hardware queue)")
        p.add_argument("--pressure-bound", type=int, default=1,
                       help="tag pressure: k2 max_inflight (default 1)")
        p.add_argument("--targets-us", type=csv(int), default=[],
                       help="adaptive rows: k2 target_latency_us values, each run with "
                            "max_inflight the largest bound (default: none)")
        p.add_argument("--changing-load", type=csv(str, [*OPS, "off"]), default=["off"],
                       help="operation types of the changing-load run (needs --targets-us; "
                            "default: off)")
        p.add_argument("--changing-be-jobs", type=int, default=3,
                       help="changing load: best-effort jobs in the second half "
                            "(default 3; the first half has 1)")
        p.add_argument("--changing-be-op", choices=list(OPS), default="randwrite",
                       help="changing load: what the second half's best-effort jobs do "
                            "(default randwrite; the first half's do the operation type)")
        add_icount_argument(p, "latencies are of the guest's time, which a host that "
                               "stalls the guest does not advance")

    def plan(self, ctx: RunContext) -> Plan:
        a = ctx.args
        runtime, ramp = ctx.params["runtime"], ctx.params["ramp"]
        depth = int(ctx.sched_info["k2"]["nr_requests"])
        notes: list[str] = icount_note(a, ctx.target, runtime)
        cpus = None if a.no_pin else ctx.target.ncpus()
        if cpus:
            notes.append(f"jobs pinned: rt to CPU 0, be<i> to CPU i mod {cpus}")
        phases = []
        for occ in a.occupancy:
            full = occ == "full"
            ops = (a.full_ops or a.ops) if full else a.ops
            bounds, bnotes = clamp_bounds((a.full_bounds or a.bounds) if full else a.bounds,
                                          depth, ctx.dev)
            notes += [n for n in bnotes if n not in notes]
            rt = runtime * (a.full_runtime_factor if full else 1.0)
            for op in ops:
                # each operation type on a freshly prepared device: writes
                # change what the next runs find (GC backlog, mapping)
                blocks = []
                for b in ["none", *bounds]:
                    what = "none" if b == "none" else f"k2 max_inflight={b}"
                    text = jobfile(ctx.device.path, ctx.device.size_bytes, op, rt, ramp,
                                   a.ioengine, a.thinktime_us, a.be_jobs, a.be_iodepth, cpus,
                                   comment=f"k2 suite: {OPS[op]}, {OCCUPANCIES[occ]}, {what}")
                    blocks.append([Config(
                        f"{occ}/{op}/{'none' if b == 'none' else f'k2-{b}'}",
                        "none" if b == "none" else "k2", text, rt + ramp,
                        tunables=() if b == "none" else (("max_inflight", b),),
                        labels=(("occupancy", occ), ("op", op), ("bound", b)))])
                for t in a.targets_us:
                    text = jobfile(ctx.device.path, ctx.device.size_bytes, op, rt, ramp,
                                   a.ioengine, a.thinktime_us, a.be_jobs, a.be_iodepth, cpus,
                                   comment=f"k2 suite: {OPS[op]}, {OCCUPANCIES[occ]}, k2 "
                                           f"target_latency_us={t} max_inflight={max(bounds)}")
                    # k2's events kept beside the run: the block layer's
                    # RT p99.9 (traced_rt_p999()), what the target governs
                    blocks.append([Config(
                        f"{occ}/{op}/k2-adaptive-{t}", "k2", text, rt + ramp,
                        tunables=(("max_inflight", max(bounds)), ("target_latency_us", t)),
                        labels=(("occupancy", occ), ("op", op), ("bound", "adaptive"),
                                ("target_us", t)),
                        record_events=("k2",), keep_trace=True)])
                again = occ == "empty" and op in ("write", "randwrite")
                phases.append(Phase(f"{occ}/{op}", blocks,
                                    None if occ == "asis" else occupier(full),
                                    f"{OCCUPANCIES[occ]}, {OPS[op]}"
                                    + (", emptied again before each run" if again else ""),
                                    settle=prep.empty_again if again else prep.settle))
        changing = [op for op in a.changing_load if op != "off"]
        if changing:
            phases += self._changing_phases(ctx, changing, depth, cpus, notes)
        pressure = [op for op in a.tag_pressure if op != "off"]
        if pressure:
            phases += self._pressure_phases(ctx, pressure, a.occupancy[0], depth, notes)
        return Plan(phases, notes, {"ops": a.ops, "bounds": a.bounds,
                                    "occupancy": a.occupancy, "full_ops": a.full_ops,
                                    "full_bounds": a.full_bounds,
                                    "full_runtime_factor": a.full_runtime_factor,
                                    "thinktime_us": a.thinktime_us, "be_jobs": a.be_jobs,
                                    "be_iodepth": a.be_iodepth, "queue_depth": depth,
                                    "tag_pressure": pressure,
                                    "pressure_be_jobs": a.pressure_be_jobs,
                                    "pressure_iodepth": a.pressure_iodepth or depth,
                                    "pressure_bound": a.pressure_bound,
                                    "targets_us": a.targets_us, "changing_load": changing,
                                    "changing_be_jobs": a.changing_be_jobs,
                                    "changing_be_op": a.changing_be_op,
                                    "icount": a.icount})

    def _changing_phases(self, ctx: RunContext, ops: list[str], depth: int, cpus: int | None,
                         notes: list[str]) -> list[Phase]:
        """The changing-load run: per operation type, every fixed bound and
        the first target, with 1 best-effort job in the first half and
        --changing-be-jobs in the second, on the device as the first
        occupancy leaves it, emptied again before each run (unless the
        occupancy is 'full'): the second half's writes fill the device, and
        on a 256 MiB ssdsim at time_scale 50 its garbage collection put
        every configuration's second-half RT p99.9 at 784-893 ms from the
        13th of 21 runs on, where the first ones (bounds 1 to 4) had 32-33
        ms."""
        a = ctx.args
        if not a.targets_us:
            raise ValueError("--changing-load needs --targets-us (the target to keep)")
        if a.changing_be_jobs < 1:
            raise ValueError("--changing-be-jobs must be at least 1")
        runtime, ramp = ctx.params["runtime"] * 2, ctx.params["ramp"]
        bounds, bnotes = clamp_bounds(a.bounds, depth, ctx.dev)
        notes += [n for n in bnotes if n not in notes]
        target, occ = a.targets_us[0], a.occupancy[0]
        phases = []
        for op in ops:
            blocks = []
            for b in [*bounds, "adaptive"]:
                what = (f"k2 target_latency_us={target} max_inflight={max(bounds)}"
                        if b == "adaptive" else f"k2 max_inflight={b}")
                text = changing_jobfile(ctx.device.path, ctx.device.size_bytes, op, runtime,
                                        ramp, a.ioengine, a.thinktime_us,
                                        (1, a.changing_be_jobs), a.be_iodepth, cpus,
                                        comment=f"k2 suite, changing load: {OPS[op]}, {what}",
                                        be_op2=a.changing_be_op)
                tun: tuple[tuple[str, Any], ...] = (
                    (("max_inflight", max(bounds)), ("target_latency_us", target))
                    if b == "adaptive" else (("max_inflight", b),))
                lbl: tuple[tuple[str, Any], ...] = (
                    ("changing", f"1x{a.be_iodepth} {op}->{a.changing_be_jobs}x{a.be_iodepth} "
                                 f"{a.changing_be_op}"),
                    ("op", op), ("bound", b))
                if b == "adaptive":
                    lbl += (("target_us", target),)
                name = f"adaptive-{target}" if b == "adaptive" else f"k2-{b}"
                # every k2 event (each request's life cycle, k2_adjust), kept
                # beside the run for the report's figure over time: at the
                # few hundred requests a second of these runs on ssdsim the
                # tracepoints' cost is negligible (on a fast device it is
                # what overhead --traced measures, and --trace-buffer-kb
                # may overflow: the trace section counts lost events)
                blocks.append([Config(f"changing/{op}/{name}", "k2", text, runtime + 2 * ramp,
                                      tunables=tun, labels=lbl, record_events=("k2",),
                                      keep_trace=True)])
            again = occ != "full"
            phases.append(Phase(f"changing/{op}", blocks,
                                None if occ == "asis" else occupier(occ == "full"),
                                f"changing load, {OPS[op]}, {OCCUPANCIES[occ]}"
                                + (", emptied again before each run" if again else ""),
                                settle=prep.empty_again if again else prep.settle))
        return phases

    def _pressure_phases(self, ctx: RunContext, ops: list[str], occ: str, depth: int,
                         notes: list[str]) -> list[Phase]:
        """The tag-pressure workload: per operation type, the light load at the
        pressure bound (the reference), then the flood under none, k2 without
        a reserve (rt_tags=0) and k2 with its default reserve.  Scheduler tags
        belong to a hardware queue, so when jobs are pinned every job runs on
        CPU 0: they compete for the same queue's tags on any machine."""
        a = ctx.args
        runtime, ramp = ctx.params["runtime"], ctx.params["ramp"]
        [bound], bnotes = clamp_bounds([a.pressure_bound], depth, ctx.dev)
        notes += [n for n in bnotes if n not in notes]
        iodepth = a.pressure_iodepth or depth
        if a.pressure_be_jobs < 1 or iodepth < 1:
            raise ValueError("--pressure-be-jobs and --pressure-iodepth must be at least 1")
        cpus = None if a.no_pin else 1
        if cpus:
            notes.append("tag pressure: every job pinned to CPU 0 (one hardware queue's tags)")
        phases = []
        for op in ops:
            blocks = []
            for case, sched, rt_tags in PRESSURE_CASES:
                be_jobs, be_depth = ((a.be_jobs, a.be_iodepth) if case == "light" else
                                     (a.pressure_be_jobs, iodepth))
                tun = (("rt_tags", int(rt_tags)),) if rt_tags.isdigit() else ()
                what = ("none" if sched == "none" else
                        f"k2 max_inflight={bound} rt_tags={rt_tags}")
                text = jobfile(ctx.device.path, ctx.device.size_bytes, op, runtime, ramp,
                               a.ioengine, a.thinktime_us, be_jobs, be_depth, cpus,
                               comment=f"k2 suite, tag pressure: {OPS[op]}, {case} "
                                       f"({be_jobs} x iodepth {be_depth}), {what}")
                name = "none" if sched == "none" else f"k2-{bound}-rt_tags-{rt_tags}"
                blocks.append([Config(
                    f"pressure/{op}/{case}/{name}", sched, text, runtime + ramp,
                    tunables=() if sched == "none" else (("max_inflight", bound), *tun),
                    labels=(("pressure", case), ("op", op), ("bound", bound if sched == "k2"
                                                              else "none"),
                            ("rt_tags", rt_tags), ("be", f"{be_jobs}x{be_depth}")))])
            phases.append(Phase(f"pressure/{op}", blocks,
                                None if occ == "asis" else occupier(occ == "full"),
                                f"tag pressure, {OPS[op]}, {OCCUPANCIES[occ]}",
                                settle=prep.settle))
        return phases

    def brief(self, c: Config, result: dict[str, Any]) -> str:
        names = [j["jobname"] for j in result["jobs"]]
        bw = sum(fio.job_stats(result, n).bw_kib for n in names)
        rts = [RT] if RT in names else [f"{RT}{h}" for h in (1, 2)]  # changing load: halves
        return ", ".join(f"{n.upper()} p99.9 "
                         f"{fio.percentile(fio.job_stats(result, n), P) / 1000:.2f} ms "
                         f"({fio.job_stats(result, n).ios} I/Os)" for n in rts) \
            + f", total {bw / 1024:.1f} MiB/s"

    def report(self, res: Results, plots: Path) -> SuiteReport:
        data = collect(res)
        adaptive = collect_adaptive(res)
        tables: list[str] = []
        out: list[str] = []
        summary: dict[str, Any] = {}
        findings: list[str] = []
        for occ in ordered(data, OCCUPANCIES):
            out.append(f"\n## {OCCUPANCIES.get(occ, occ).capitalize()}\n\n")
            phs = res.manifest.get("phases", {})
            # one phase per occupancy in results from before phases per op
            ph = phs.get(occ) or next((v for k, v in phs.items()
                                       if k.startswith(f"{occ}/")), {})
            if ph.get("note"):
                per_op = occ not in phs
                out.append(f"Preparation{' of each operation type' if per_op else ''}: "
                           f"{ph['note']}" + ("; the device's write cache flushed before "
                                              "each run" if per_op else "") + ".\n")
            for op in ordered(data[occ], OPS):
                by_bound = data[occ][op]
                adapt = adaptive.get(occ, {}).get(op, {})
                sec, summ, finding, tab = self._op_section(occ, op, by_bound, plots, adapt)
                out.append(sec)
                tables.append(f"\n{OPS.get(op, op).capitalize()}, {occ}:\n\n{tab}")
                summary.setdefault(occ, {})[op] = summ
                findings += [f for f in finding.split("\n") if f]
        # the sections after the sweeps: (summary key, section)
        extra: list[tuple[str, tuple[str, dict[str, Any], list[str], list[str]]]] = []
        changing = collect_changing(res)
        if changing:
            extra.append(("changing_load", self._changing_section(res, changing, plots)))
        pressure = collect_pressure(res)
        if pressure:
            extra.append(("tag_pressure", self._pressure_section(res, pressure, plots)))
        for key, (sec, summ, more, tabs) in extra:
            out.append(sec)
            tables += tabs
            summary[key] = summ
            findings += more
        alpha, beta = 50.0, 80.0
        sel = ("\n## Objective selection (α = 50 %, β = 80 %)\n\n"
               "O1 is the largest bound whose RT p99.9 latency is at most α of none's; O2 "
               "the smallest bound that keeps at least β of none's total bandwidth (means "
               "over repetitions). Other objectives: `python3 -m bench select "
               f"{res.folder} --alpha A --beta B`.\n\n"
               + table(SELECT_HEADERS, selection_rows(data, alpha, beta), "lllllll"))
        lines = "".join(f"- {f}\n" for f in findings)
        head = f"\n## Findings\n\n{lines}" if findings else ""
        head += ("\nTables: mean ± standard deviation (min–max) over the runs; 'vs none' "
                 "compares means. RT I/Os is the number of RT completions per run that the "
                 "percentile comes from: below 1000, fio's p99.9 is the largest latency "
                 "seen.\n")
        return SuiteReport(head + "".join(out) + sel, {"k2": summary},
                           lines + "\n" + "".join(tables))

    def _op_section(self, occ: str, op: str, by_bound: dict[int, list[dict[str, float]]],
                    plots: Path, adaptive: dict[int, list[dict[str, float]]] | None = None
                    ) -> tuple[str, dict[str, Any], str, str]:
        """One operation type and occupancy: a row per bound (and per
        adaptive target), the trend finding and, with adaptive rows, whether
        each lies on the fixed bounds' frontier (findings one per line)."""
        none = by_bound.get(0)
        ref = {k: summarize(m[k] for m in none) for k in ("p999_us", "bw_kib")} if none else {}
        rows = []
        summ: dict[str, Any] = {"bounds": {}}
        for b in sorted(by_bound, key=lambda x: (x != 0, x)):
            ms = by_bound[b]
            s = {k: summarize(m[k] for m in ms)
                 for k in ("p999_us", "p99_us", "rt_mean_us", "rt_iops", "rt_ios", "bw_kib")}
            rel_lat = f"{s['p999_us'].mean / ref['p999_us'].mean:.2f}×" if ref else "–"
            rel_bw = f"{s['bw_kib'].mean / ref['bw_kib'].mean:.2f}×" if ref else "–"
            rows.append([("none" if b == 0 else f"k2, {b}"),
                         s["p999_us"].fmt(1e-3, 2), rel_lat if b else "1×",
                         s["rt_mean_us"].fmt(1e-3, 2), f"{s['rt_ios'].mean:.0f}",
                         s["bw_kib"].fmt(1 / 1024, 1), rel_bw if b else "1×", s["p999_us"].n])
            entry = {k: v.as_dict() for k, v in s.items()}
            if b == 0:
                summ["none"] = entry
            else:
                summ["bounds"][str(b)] = entry
        none_pt, pts = points(by_bound)
        adaptive = adaptive or {}
        apts: list[tuple[int, Point]] = []
        for t in sorted(adaptive):
            ms = adaptive[t]
            s = {k: summarize(m[k] for m in ms)
                 for k in ("p999_us", "p99_us", "rt_mean_us", "rt_iops", "rt_ios", "bw_kib")}
            rows.append([f"k2 adaptive, target {t / 1000:g} ms", s["p999_us"].fmt(1e-3, 2),
                         f"{s['p999_us'].mean / ref['p999_us'].mean:.2f}×" if ref else "–",
                         s["rt_mean_us"].fmt(1e-3, 2), f"{s['rt_ios'].mean:.0f}",
                         s["bw_kib"].fmt(1 / 1024, 1),
                         f"{s['bw_kib'].mean / ref['bw_kib'].mean:.2f}×" if ref else "–",
                         s["p999_us"].n])
            pt = Point(0, s["p999_us"].mean, s["bw_kib"].mean)
            apts.append((t, pt))
            dom = dominating(pt, pts)
            clear = beyond_spread(ms, by_bound, dom)
            if ms and all("k2_p999_us" in m for m in ms):
                s["k2_p999_us"] = summarize(m["k2_p999_us"] for m in ms)
            summ.setdefault("adaptive", {})[str(t)] = {
                **{k: v.as_dict() for k, v in s.items()}, "dominated_by": dom,
                "dominated_beyond_spread": clear, "on_frontier": not dom,
                "verdict": "yes" if not dom else "no" if clear else "unclear"}
        finding = ""
        def mean_ms(b: int) -> float:
            return summarize(m["rt_mean_us"] for m in by_bound[b]).mean / 1000

        if pts:
            lo, hi = min(pts, key=lambda p: p.bound), max(pts, key=lambda p: p.bound)
            verdict = trend_verdict(pts, [m["p999_us"] for m in by_bound[lo.bound]],
                                    [m["p999_us"] for m in by_bound[hi.bound]])
            summ["falls_as_bound_falls"] = verdict == "yes"
            summ["finding"] = verdict
            finding = (f"{OPS.get(op, op)}, {occ}: RT p99.9 latency falls as the bound falls: "
                       f"**{verdict}** (bound {hi.bound}: "
                       f"{hi.p999_us / 1000:.2f} ms → bound {lo.bound}: "
                       f"{lo.p999_us / 1000:.2f} ms"
                       + (f"; none: {none_pt.p999_us / 1000:.2f} ms" if none_pt else "")
                       + f"; RT mean {mean_ms(hi.bound):.2f} → {mean_ms(lo.bound):.2f} ms"
                       + f"; bandwidth at bound {lo.bound}: "
                       + (f"{lo.bw_kib / none_pt.bw_kib:.0%} of none's)" if none_pt else
                          f"{lo.bw_kib / 1024:.1f} MiB/s)"))
        for t, pt in apts:
            a = summ["adaptive"][str(t)]
            dom, clear = a["dominated_by"], a["dominated_beyond_spread"]
            k2 = a.get("k2_p999_us")
            finding += (f"\n{OPS.get(op, op)}, {occ}: k2 adaptive, target {t / 1000:g} ms: RT "
                        f"p99.9 {pt.p999_us / 1000:.2f} ms"
                        + (f" (in the block layer, from k2's trace: {k2['mean'] / 1000:.2f} ms)"
                           if k2 else "")
                        + f", {pt.bw_kib / 1024:.1f} MiB/s; on or "
                        "beyond the fixed bounds' frontier: "
                        + ("**yes**" if not dom else
                           "**no** (bound " + ", ".join(map(str, clear)) + " has both a lower "
                           "RT p99.9 and a higher bandwidth" + (
                               " in every run" if len(by_bound[clear[0]]) > 1 and len(
                                   adaptive[t]) > 1 else "") + margin(pt, pts, clear[0]) + ")"
                           if clear else
                           "**unclear** (bound " + ", ".join(map(str, dom)) + " has both a "
                           "lower mean RT p99.9 and a higher mean bandwidth, within the spread "
                           "of the repetitions)"))
        png = self._plot(occ, op, by_bound, plots)
        tab = table(["scheduler, bound", "RT p99.9 (ms)", "vs none", "RT mean (ms)",
                     "RT I/Os", "total MiB/s", "vs none", "runs"], rows)
        sec = (f"\n### {OPS.get(op, op).capitalize()} ({occ})\n\n" + tab
               + f"\n![{op} {occ}]({png})\n")
        if apts:
            fpng = self._frontier_plot(occ, op, by_bound, apts, plots)
            sec += f"\n![{op} {occ} frontier]({fpng})\n"
        return sec, summ, finding, tab

    def _frontier_plot(self, occ: str, op: str, by_bound: dict[int, list[dict[str, float]]],
                       apts: list[tuple[int, Point]], plots: Path) -> str:
        """RT p99.9 against bandwidth: the fixed bounds as a line, none, and
        each adaptive target as a star."""
        none, pts = points(by_bound)
        fig, ax = figure(1, 1, width=6.0, height=4.0)
        a = ax[0][0]
        a.plot([p.bw_kib / 1024 for p in pts], [p.p999_us / 1000 for p in pts], marker="o",
               label="k2, fixed bound")
        for p in pts:
            a.annotate(str(p.bound), (p.bw_kib / 1024, p.p999_us / 1000), fontsize=7,
                       xytext=(3, 3), textcoords="offset points")
        if none:
            a.scatter([none.bw_kib / 1024], [none.p999_us / 1000], color="tab:red",
                      marker="s", label="none")
        for i, (t, p) in enumerate(apts):
            a.scatter([p.bw_kib / 1024], [p.p999_us / 1000], marker="*", s=140,
                      color=f"C{2 + i}", zorder=3, label=f"k2 adaptive, target {t / 1000:g} ms")
        a.set_yscale("log")
        a.set_xlabel("total bandwidth (MiB/s)")
        a.set_ylabel("RT p99.9 latency (ms)")
        a.set_title(f"{OPS.get(op, op)}, {occ}: latency/bandwidth frontier", fontsize=9)
        a.grid(alpha=0.3)
        a.legend(fontsize=7)
        return save(fig, plots / f"k2-{occ}-{op}-frontier.png")

    def _changing_section(self, res: Results, data: dict[str, dict[str, list[dict[str, float]]]],
                          plots: Path) -> tuple[str, dict[str, Any], list[str], list[str]]:
        """The changing-load run: each configuration's RT p99.9 and bandwidth
        per half against the target; which meet it in both halves."""
        params = res.manifest.get("params", {})
        target = (params.get("targets_us") or [0])[0]
        light = f"1x{params.get('be_iodepth', 32)}"
        heavy = (f"{params.get('changing_be_jobs', 3)}x{params.get('be_iodepth', 32)}"
                 + (f" {OPS.get(params['changing_be_op'], '')}" if params.get("changing_be_op")
                    else ""))
        out = [f"\n## Changing load (target {target / 1000:g} ms)\n\nThe RT job beside "
               f"{light} best-effort requests (jobs x iodepth) in the first half of the run "
               f"and {heavy} in the second; each half's figures are its own jobs'. 'meets' "
               "means the mean RT p99.9 of both halves is at most the target, 'within "
               f"{TARGET_SLACK - 1:.0%}' at most {TARGET_SLACK:g} times it (the tolerance of "
               "the adaptive bound's VM test), both by fio's figures. The block layer's RT "
               "p99.9 (from each run's k2 trace: insert to completion, over the same "
               "measured periods; '-' without a whole trace) is what adaptive K2 measures "
               "and governs; fio's adds the reader's system call and wake-up.\n"]
        tables, findings = [], []
        summary: dict[str, Any] = {}
        for op in ordered(data, OPS):
            confs = data[op]

            def order_key(k: str) -> tuple[int, int]:
                kind, _, v = k.partition("-")
                return (kind == "adaptive", int(v) if v.isdigit() else 0)
            rows, names = [], []
            sums: list[list[dict[str, float]]] = []
            for k in sorted(confs, key=order_key):
                ms = confs[k]
                sm = {f: summarize(m[f] for m in ms)
                      for f in ("p999_us_1", "p999_us_2", "bw_kib_1", "bw_kib_2")}
                for f in ("k2_p999_us_1", "k2_p999_us_2"):
                    if all(f in m for m in ms):
                        sm[f] = summarize(m[f] for m in ms)
                worst = max(sm["p999_us_1"].mean, sm["p999_us_2"].mean)
                meets, within = worst <= target, worst <= TARGET_SLACK * target
                bw = (sm["bw_kib_1"].mean + sm["bw_kib_2"].mean) / 2
                name = (f"k2 adaptive, target {target / 1000:g} ms" if k.startswith("adaptive")
                        else f"k2, {k.split('-', 1)[1]}")
                k2 = " / ".join(sm[f].fmt(1e-3, 2) if f in sm else "-"
                                for f in ("k2_p999_us_1", "k2_p999_us_2"))
                rows.append([name, sm["p999_us_1"].fmt(1e-3, 2), sm["p999_us_2"].fmt(1e-3, 2),
                             k2, sm["bw_kib_1"].fmt(1 / 1024, 1), sm["bw_kib_2"].fmt(1 / 1024, 1),
                             "yes" if meets else "no", "yes" if within else "no",
                             sm["p999_us_1"].n])
                summary.setdefault(op, {})[k] = {**{f: v.as_dict() for f, v in sm.items()},
                                                 "meets": meets, "within": within,
                                                 "bw_kib_mean": bw}
                names.append(name.replace("k2 adaptive, target ", "adaptive\n"))
                sums.append(ms)
            ad_key, ad = next(((k, v) for k, v in summary.get(op, {}).items()
                               if k.startswith("adaptive")), ("", None))
            # the strict reading last: its best bound is the figure over time's
            best: tuple[str, dict[str, Any]] | None = None
            if ad is not None:
                for key, how in (("within", f" within {TARGET_SLACK - 1:.0%}"), ("meets", "")):
                    ok = {k: v for k, v in summary.get(op, {}).items()
                          if k.startswith("k2-") and v[key]}
                    best = max(ok.items(), key=lambda kv: kv[1]["bw_kib_mean"], default=None)
                    findings.append(changing_finding(op, how, ad, ok, best, ad[key]))
            tab = table(["configuration", "RT p99.9, 1st half (ms)", "RT p99.9, 2nd half (ms)",
                         "block layer RT p99.9, 1st / 2nd (ms)",
                         "MiB/s, 1st half", "MiB/s, 2nd half", "meets",
                         f"within {TARGET_SLACK - 1:.0%}", "runs"], rows)
            fig, ax = figure(2, 1, width=9.0, height=3.4)

            def series(key: str, scale: float) -> list[tuple[str, list[Any]]]:
                return [(f"{which} half", [summarize(m[f"{key}_{h}"] * scale for m in ms)
                                           for ms in sums])
                        for h, which in ((1, "1st"), (2, "2nd"))]
            grouped_bars(ax[0][0], names, series("p999_us", 1e-3))
            ax[0][0].axhline(target / 1000, color="tab:red", ls="--", label="target")
            ax[0][0].set_ylabel("RT p99.9 latency (ms)")
            ax[0][0].set_yscale("log")
            grouped_bars(ax[0][1], names, series("bw_kib", 1 / 1024))
            ax[0][1].set_ylabel("total bandwidth (MiB/s)")
            for a in ax[0]:
                a.tick_params(axis="x", labelsize=7)
                a.grid(alpha=0.3, axis="y")
                a.legend(fontsize=7)
            png = save(fig, plots / f"k2-changing-{op}.png")
            out.append(f"\n### {OPS.get(op, op).capitalize()}\n\n{tab}\n![changing load "
                       f"{op}]({png})\n")
            if ad is not None:
                out.append(self._changing_time(res, op, ad_key, target,
                                               best[0] if best else None, plots))
            tables.append(f"\nChanging load, {OPS.get(op, op)}:\n\n{tab}")
        return "".join(out), summary, findings, tables

    def _changing_time(self, res: Results, op: str, adaptive: str, target: int,
                       fixed: str | None, plots: Path) -> str:
        """The adaptive changing-load run over time, from its kept k2 trace:
        the bound in force, the RT latencies and their p99 per window against
        the target, the bandwidth per window beside that of @fixed (the
        best fixed bound meeting the target); a paragraph and the figure,
        '' without the trace (results from before the runs kept it)."""
        ad = first_traced(res, op, adaptive)
        if ad is None:
            return ""
        from tracepoints import report as tr

        fr = first_traced(res, op, fixed) if fixed else None
        try:
            tl = tr.timeline(tr.read_trace(res.folder / ad.rec["trace"]["file"], "k2"))
            ftl = (tr.timeline(tr.read_trace(res.folder / fr.rec["trace"]["file"], "k2"),
                               tl.window_ns) if fr else None)
        except (OSError, ImportError) as e:     # an LTTng trace without babeltrace2
            return f"\nNo figure over time: {e}.\n"
        half = halfway_s(res)
        bound = fixed.split("-", 1)[1] if fixed else ""
        fig, ax = figure(1, 3, width=9.0, height=2.3)
        top, mid, bot = (a[0] for a in ax)

        def steps(a: Any, t: tr.Timeline, ys: list[float], **kw: Any) -> None:
            if ys:
                a.step(t.starts() + [len(ys) * t.window_s], ys + ys[-1:], where="post", **kw)

        if tl.bound:
            xs = [t for t, _ in tl.bound] + [tl.span_s]
            top.step(xs, [b for _, b in tl.bound] + [tl.bound[-1][1]], where="post",
                     label="adaptive: bound in force")
        if fixed:
            top.axhline(int(bound), color="tab:green", ls=":", label=f"fixed bound {bound}")
        top.set_ylabel("bound (requests)")
        if tl.rt:
            mid.scatter([t for t, _ in tl.rt], [ms for _, ms in tl.rt], s=3, alpha=0.4,
                        label="adaptive: RT latency")
        steps(mid, tl, tl.rt_p99_ms, color="tab:orange", label="adaptive: RT p99 per window")
        mid.axhline(target / 1000, color="tab:red", ls="--", label="target")
        mid.set_yscale("log")
        mid.set_ylabel("RT latency (ms)")
        steps(bot, tl, tl.bw_mib_s, label="adaptive")
        if ftl:
            steps(bot, ftl, ftl.bw_mib_s, color="tab:green", label=f"fixed bound {bound}")
        bot.set_ylabel("total MiB/s per window")
        for a in (top, bot):
            a.set_ylim(bottom=0)
        bot.set_xlabel("time from the trace's first event (s)")
        for a in (top, mid, bot):
            a.axvline(half, color="grey", ls="-.",
                      label="second half starts" if a is top else None)
            a.set_xlim(0, max(tl.span_s, half))
            a.grid(alpha=0.3)
            a.legend(fontsize=7, loc="upper left")
        top.set_title(f"changing load, {OPS.get(op, op)}: k2 adaptive, target "
                      f"{target / 1000:g} ms, over time", fontsize=9)
        png = save(fig, plots / f"k2-changing-{op}-time.png")
        lost = int(ad.rec["trace"].get("lost") or 0)
        reps = len({r.rec.get("rep") for r in res.runs if "changing" in r.labels
                    and r.labels.get("op") == op and changing_conf(r.labels) == adaptive})
        return (f"\nOver time, from the k2 events recorded during the run"
                + (f" (of {reps} repetitions, the first of each configuration with a "
                   "kept trace)" if reps > 1 else "")
                + ": the adaptive bound in force (top); each RT request's latency, insert "
                f"to completion, and their p99 per {tl.window_s:g} s window against the "
                f"target (middle); the bandwidth completed per window (bottom)"
                + (f", beside fixed bound {bound}'s, the best that meets the target in both "
                   "halves" if ftl else
                   f" (fixed bound {bound}, the best that meets the target, kept no trace)"
                   if fixed else "")
                + f". The vertical line marks the second half's start ({half:g} s after "
                "fio's); time runs from the first traced event, ramps included."
                + (f" **The tracer lost {lost} event(s) of this run**: the figure misses "
                   "their requests (ftrace overwrites the oldest, which moves time 0 later)."
                   if lost else "")
                + f"\n\n![changing load {op} over time]({png})\n")

    def _pressure_section(self, res: Results,
                          data: dict[str, dict[tuple[str, str, str], list[dict[str, float]]]],
                          plots: Path) -> tuple[str, dict[str, Any], list[str], list[str]]:
        """The tag-pressure workload: RT p99.9 per case, against the light
        load's; what the best-effort jobs got."""
        params = res.manifest.get("params", {})
        bound = params.get("pressure_bound", 1)
        nr = params.get("queue_depth", "?")
        default = res.manifest.get("schedulers", {}).get("k2", {}).get(
            "defaults", {}).get("rt_tags", "a quarter of nr_requests")
        light = f"{params.get('be_jobs', 3)}x{params.get('be_iodepth', 32)}"
        flood = f"{params.get('pressure_be_jobs', 4)}x{params.get('pressure_iodepth', nr)}"
        out = [f"\n## Tag pressure (rt_tags)\n\nThe RT job beside {flood} best-effort "
               f"requests (jobs x iodepth), more than the {nr} scheduler tags of a "
               f"hardware queue, against beside the light load ({light}); k2 at "
               f"max_inflight {bound}, its reserve for real-time submitters at the "
               f"default ({default} tags) and off (rt_tags=0, K2 before the reserve). "
               "'vs light' is the ratio of mean RT p99.9 to k2's beside the light "
               "load.\n"]
        tables, findings = [], []
        summary: dict[str, Any] = {}
        for op in ordered(data, OPS):
            cases = data[op]
            ref = cases.get(PRESSURE_CASES[0])
            ref_p = summarize(m["p999_us"] for m in ref).mean if ref else float("nan")
            rows, sums, names = [], [], []
            for case in PRESSURE_CASES:
                ms = cases.get(case)
                if not ms:
                    continue
                sm = {k: summarize(m[k] for m in ms)
                      for k in ("p999_us", "rt_mean_us", "rt_ios", "be_bw_kib")}
                name = pressure_case_name(case, bound, light if case[0] == "light" else flood)
                rows.append([name, sm["p999_us"].fmt(1e-3, 2),
                             f"{sm['p999_us'].mean / ref_p:.2f}×" if ref else "–",
                             sm["rt_mean_us"].fmt(1e-3, 2), f"{sm['rt_ios'].mean:.0f}",
                             sm["be_bw_kib"].fmt(1 / 1024, 1), sm["p999_us"].n])
                sums.append(summarize(m["p999_us"] / 1000 for m in ms))
                names.append(name.replace(": ", "\n"))
                summary.setdefault(op, {})["/".join(case)] = {
                    k: v.as_dict() for k, v in sm.items()}
            with_r, without = cases.get(PRESSURE_CASES[3]), cases.get(PRESSURE_CASES[2])
            if ref and with_r and without:
                r_with = summarize(m["p999_us"] for m in with_r).mean / ref_p
                r_without = summarize(m["p999_us"] for m in without).mean / ref_p
                summary[op]["flood_over_light"] = {"rt_tags_default": r_with,
                                                   "rt_tags_0": r_without}
                findings.append(
                    f"tag pressure, {OPS.get(op, op)}: RT p99.9 beside the flood over beside "
                    f"the light load, k2 {bound}: **{r_with:.2f}×** with the default "
                    f"reserve, {r_without:.2f}× with rt_tags=0")
            tab = table(["load (jobs x iodepth): scheduler", "RT p99.9 (ms)", "vs light",
                         "RT mean (ms)", "RT I/Os", "best-effort MiB/s", "runs"], rows)
            fig, ax = figure(1, 1, width=7.0, height=3.4)
            a = ax[0][0]
            grouped_bars(a, names, [("RT p99.9 (ms), mean, min–max",
                                     sums)])
            a.set_yscale("log")
            a.set_ylabel("RT p99.9 latency (ms)")
            a.set_title(f"tag pressure, {OPS.get(op, op)}", fontsize=9)
            a.tick_params(axis="x", labelsize=7)
            a.grid(alpha=0.3, axis="y")
            png = save(fig, plots / f"k2-pressure-{op}.png")
            out.append(f"\n### {OPS.get(op, op).capitalize()}\n\n{tab}\n![tag pressure "
                       f"{op}]({png})\n")
            tables.append(f"\nTag pressure, {OPS.get(op, op)}:\n\n{tab}")
        return "".join(out), summary, findings, tables

    def _plot(self, occ: str, op: str, by_bound: dict[int, list[dict[str, float]]],
              plots: Path) -> str:
        fig, ax = figure(2, 1, width=4.6, height=3.4)
        bounds = sorted(b for b in by_bound if b != 0)
        for col, (key, scale, ylabel, title) in enumerate((
                ("p999_us", 1e-3, "RT p99.9 latency (ms)", "RT tail latency"),
                ("bw_kib", 1 / 1024, "total bandwidth (MiB/s)", "bandwidth"))):
            a = ax[0][col]
            if bounds:
                ss = [summarize(m[key] for m in by_bound[b]) for b in bounds]
                y = [s.mean * scale for s in ss]
                err = [[(s.mean - s.lo) * scale for s in ss], [(s.hi - s.mean) * scale for s in ss]]
                a.errorbar(bounds, y, yerr=err, marker="o", capsize=3, label="k2 (min–max)")
                a.set_xscale("log", base=2)
                a.set_xticks(bounds)
                a.set_xticklabels([str(b) for b in bounds])
            if 0 in by_bound:
                s = summarize(m[key] for m in by_bound[0])
                a.axhline(s.mean * scale, color="tab:red", ls="--", label="none")
                if s.n > 1:
                    a.axhspan(s.lo * scale, s.hi * scale, color="tab:red", alpha=0.12)
            a.set_xlabel("k2 max_inflight")
            a.set_ylabel(ylabel)
            a.set_ylim(0, max([1e-9] + [m[key] * scale for ms in by_bound.values()
                                        for m in ms]) * 1.18)
            a.set_title(f"{OPS.get(op, op)}, {occ}: {title}", fontsize=9)
            a.grid(alpha=0.3)
            a.legend(fontsize=8)
        return save(fig, plots / f"k2-{occ}-{op}.png")

    def has_select(self) -> bool:
        return True

    def select_table(self, res: Results, alpha: float, beta: float) -> str:
        return table(SELECT_HEADERS, selection_rows(collect(res), alpha, beta), "lllllll")


SUITE = K2Suite()
