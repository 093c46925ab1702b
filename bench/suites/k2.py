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
"""
from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import fio, jobs, prep
from bench.report import figure, save, table
from bench.results import Results, Run, summarize
from bench.runner import Config, Phase, Plan, RunContext
from bench.suites import Sched, Suite, SuiteReport

OPS = {"read": "sequential read", "randread": "random read",
       "write": "sequential write", "randwrite": "random write"}
BOUNDS = (1, 2, 4, 8, 16, 32, 64)
OCCUPANCIES = {"empty": "empty device", "full": "fully occupied device",
               "asis": "device as it is (no preconditioning)"}
RT = "rt"
P = 99.9


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

def jobfile(dev: str, size_bytes: int, op: str, runtime: float, ramp: float, ioengine: str,
            thinktime_us: int, be_jobs: int, be_iodepth: int, cpus: int | None,
            comment: str = "") -> str:
    g = jobs.common(dev, runtime, ramp, ioengine)
    g.update({"bs": "4k", "rw": op})
    names = [RT] + [f"be{i + 1}" for i in range(be_jobs)]
    region = (size_bytes // len(names)) >> 20 << 20
    out = []
    for i, name in enumerate(names):
        o: dict[str, jobs.Value] = (
            {"ioengine": "psync", "iodepth": 1, "thinktime": thinktime_us,
             "prioclass": 1, "prio": 0} if name == RT else
            {"iodepth": be_iodepth, "prioclass": 2, "prio": 4})
        if not op.startswith("rand"):
            if region < (1 << 20):
                raise ValueError(f"device too small for {len(names)} sequential regions")
            # sequential jobs each stream through their own region
            o.update({"offset": f"{region * i >> 20}M", "size": f"{region >> 20}M"})
        if cpus:
            o["cpus_allowed"] = i % cpus
        out.append(jobs.Job(name, o))
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
        out.setdefault(lb["occupancy"], {}).setdefault(lb["op"], {}).setdefault(
            bound_label(lb["bound"]), []).append(run_metrics(r))
    return out


def points(by_bound: dict[int, list[dict[str, float]]]) -> tuple[Point | None, list[Point]]:
    def mean(b: int) -> Point:
        ms = by_bound[b]
        return Point(b, summarize(m["p999_us"] for m in ms).mean,
                     summarize(m["bw_kib"] for m in ms).mean)
    none = mean(0) if 0 in by_bound else None
    return none, [mean(b) for b in sorted(by_bound) if b != 0]


def _order(keys: Any, ref: Any) -> list[Any]:
    return [k for k in ref if k in keys] + sorted(k for k in keys if k not in ref)


def selection_rows(data: dict[str, dict[str, dict[int, list[dict[str, float]]]]],
                   alpha: float, beta: float) -> list[list[str]]:
    rows = []
    for occ in _order(data, OCCUPANCIES):
        for op in _order(data[occ], OPS):
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

    def plan(self, ctx: RunContext) -> Plan:
        a = ctx.args
        runtime, ramp = ctx.params["runtime"], ctx.params["ramp"]
        depth = int(ctx.sched_info["k2"]["nr_requests"])
        notes: list[str] = []
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
                phases.append(Phase(f"{occ}/{op}", blocks,
                                    None if occ == "asis" else occupier(full),
                                    f"{OCCUPANCIES[occ]}, {OPS[op]}", settle=prep.settle))
        return Plan(phases, notes, {"ops": a.ops, "bounds": a.bounds,
                                    "occupancy": a.occupancy, "full_ops": a.full_ops,
                                    "full_bounds": a.full_bounds,
                                    "full_runtime_factor": a.full_runtime_factor,
                                    "thinktime_us": a.thinktime_us, "be_jobs": a.be_jobs,
                                    "be_iodepth": a.be_iodepth, "queue_depth": depth})

    def brief(self, c: Config, result: dict[str, Any]) -> str:
        rt = fio.job_stats(result, RT)
        bw = sum(fio.job_stats(result, j["jobname"]).bw_kib for j in result["jobs"])
        return (f"RT p99.9 {fio.percentile(rt, P) / 1000:.2f} ms ({rt.ios} I/Os), "
                f"total {bw / 1024:.1f} MiB/s")

    def report(self, res: Results, plots: Path) -> SuiteReport:
        data = collect(res)
        tables: list[str] = []
        out: list[str] = []
        summary: dict[str, Any] = {}
        findings: list[str] = []
        for occ in _order(data, OCCUPANCIES):
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
            for op in _order(data[occ], OPS):
                by_bound = data[occ][op]
                sec, summ, finding, tab = self._op_section(occ, op, by_bound, plots)
                out.append(sec)
                tables.append(f"\n{OPS.get(op, op).capitalize()}, {occ}:\n\n{tab}")
                summary.setdefault(occ, {})[op] = summ
                if finding:
                    findings.append(finding)
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
                    plots: Path) -> tuple[str, dict[str, Any], str, str]:
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
            entry = {k: {"mean": v.mean, "sd": v.sd, "min": v.lo, "max": v.hi, "n": v.n}
                     for k, v in s.items()}
            if b == 0:
                summ["none"] = entry
            else:
                summ["bounds"][str(b)] = entry
        none_pt, pts = points(by_bound)
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
        png = self._plot(occ, op, by_bound, plots)
        tab = table(["scheduler, bound", "RT p99.9 (ms)", "vs none", "RT mean (ms)",
                     "RT I/Os", "total MiB/s", "vs none", "runs"], rows)
        sec = (f"\n### {OPS.get(op, op).capitalize()} ({occ})\n\n" + tab
               + f"\n![{op} {occ}]({png})\n")
        return sec, summ, finding, tab

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
