"""The Kyber study's Table 2 baseline: 4 KiB random reads (R) and random
writes (W) at queue depth 1 and 256, alone and in the four pairs, on the
device with none; IOPS and P99 latency per side.

`workloads()` and `plan_workloads()` are what a Kyber grid-search tuner
reuses: the same jobs under another scheduler and other tunables."""
from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import fio, jobs
from bench.markdown import table
from bench.plot import figure, save
from bench.results import Results, summarize
from bench.runner import Config, Phase, Plan, RunContext
from bench.suites import Suite, SuiteReport

DEPTHS = (1, 256)


@dataclass(frozen=True)
class Workload:
    """e.g. R1+W256: a reader at depth 1 beside a writer at depth 256."""
    read_depth: int | None
    write_depth: int | None

    @property
    def name(self) -> str:
        parts = []
        if self.read_depth is not None:
            parts.append(f"R{self.read_depth}")
        if self.write_depth is not None:
            parts.append(f"W{self.write_depth}")
        return "+".join(parts)

    @staticmethod
    def parse(text: str) -> Workload:
        r = w = None
        for part in text.strip().upper().split("+"):
            if len(part) < 2 or part[0] not in "RW" or not part[1:].isdigit():
                raise ValueError(f"bad workload {text!r}: use e.g. R1, W256, R1+W256")
            if part[0] == "R" and r is None:
                r = int(part[1:])
            elif part[0] == "W" and w is None:
                w = int(part[1:])
            else:
                raise ValueError(f"bad workload {text!r}: one R and one W at most")
        return Workload(r, w)


def workloads(depths: Sequence[int] = DEPTHS) -> list[Workload]:
    """R and W alone at each depth, then every R+W pair (Table 2's rows)."""
    alone = [Workload(d, None) for d in depths] + [Workload(None, d) for d in depths]
    pairs = [Workload(r, w) for r in depths for w in depths]
    return alone + pairs


def depth_note(hw: int | None, wls: Sequence[Workload]) -> str | None:
    """A report note when a workload is deeper than the device's tags per
    hardware queue (@hw), else None."""
    deep = max((d for w in wls for d in (w.read_depth, w.write_depth) if d), default=0)
    if hw and deep > hw:
        return (f"iodepth {deep} exceeds the device's {hw} tags per hardware queue: "
                "the excess waits in the block layer")
    return None


def jobfile(dev: str, w: Workload, runtime: float, ramp: float, ioengine: str,
            cpus: int | None, comment: str = "") -> str:
    g = jobs.common(dev, runtime, ramp, ioengine, (50.0, 90.0, 99.0, 99.9))
    g["bs"] = "4k"
    out = []
    for i, (name, rw, depth) in enumerate((("R", "randread", w.read_depth),
                                           ("W", "randwrite", w.write_depth))):
        if depth is None:
            continue
        o: dict[str, jobs.Value] = {"rw": rw, "iodepth": depth}
        if cpus:
            o["cpus_allowed"] = i % cpus
        out.append(jobs.Job(name, o))
    return jobs.render(g, out, comment)


def plan_workloads(ctx: RunContext, wls: Sequence[Workload], scheduler: str = "none",
                   tunables: tuple[tuple[str, str | int | float], ...] = (),
                   tag: str = "") -> list[list[Config]]:
    """One block per workload under @scheduler with @tunables."""
    runtime, ramp = ctx.params["runtime"], ctx.params["ramp"]
    cpus = None if ctx.args.no_pin else ctx.target.ncpus()
    sched_tag = tag or scheduler
    blocks = []
    for w in wls:
        text = jobfile(ctx.device.path, w, runtime, ramp, ctx.args.ioengine, cpus,
                       comment=f"kyber-baseline: {w.name} under {sched_tag}")
        blocks.append([Config(f"{sched_tag}/{w.name}", scheduler, text, runtime + ramp,
                              tunables=tunables,
                              labels=(("workload", w.name), ("sched", sched_tag)))])
    return blocks


def _side(res: dict[str, Any], name: str) -> tuple[float, float] | None:
    if not any(j["jobname"] == name for j in res["jobs"]):
        return None
    st = fio.job_stats(res, name)
    return st.iops, fio.percentile(st, 99.0)


class KyberBaseline(Suite):
    name = "kyber-baseline"
    title = "Kyber study, Table 2: random reads and writes at depth 1 and 256 under none"
    description = ("R1, R256, W1, W256 alone and R1+W1, R1+W256, R256+W1, R256+W256 "
                   "(4 KiB random I/O) under none: IOPS and P99 per side")
    schedulers = ()
    durations = (30.0, 5.0, 3)
    short_durations = (3.0, 0.5, 1)

    def add_arguments(self, p: argparse.ArgumentParser) -> None:
        p.add_argument("--workloads", default=None,
                       help="comma-separated, e.g. R1,W256,R1+W256 (default: Table 2's 8)")

    def plan(self, ctx: RunContext) -> Plan:
        a = ctx.args
        wls = ([Workload.parse(x) for x in a.workloads.split(",")] if a.workloads
               else workloads())
        note = depth_note(ctx.device.hw_depth, wls)
        return Plan([Phase("none", plan_workloads(ctx, wls))], [note] if note else [],
                    {"workloads": [w.name for w in wls]})

    def brief(self, c: Config, result: dict[str, Any]) -> str:
        parts = []
        for name in ("R", "W"):
            s = _side(result, name)
            if s:
                parts.append(f"{name}: {s[0]:.0f} IOPS, P99 {s[1] / 1000:.2f} ms")
        return "; ".join(parts)

    def report(self, res: Results, plots: Path) -> SuiteReport:
        names: list[str] = []
        data: dict[str, dict[str, list[tuple[float, float]]]] = {}
        for r in res.runs:
            wl = r.labels["workload"]
            if wl not in names:
                names.append(wl)
            for side in ("R", "W"):
                s = _side(r.result, side)
                if s:
                    data.setdefault(wl, {}).setdefault(side, []).append(s)
        order = [w.name for w in workloads()]
        names = [n for n in order if n in names] + [n for n in names if n not in order]
        rows = []
        summary: dict[str, Any] = {}
        for wl in names:
            row: list[object] = [wl]
            for side in ("R", "W"):
                vals = data.get(wl, {}).get(side, [])
                iops = summarize(v[0] for v in vals)
                p99 = summarize(v[1] for v in vals)
                row += [iops.fmt(1, 0), p99.fmt(1e-3, 3)]
                if vals:
                    summary.setdefault(wl, {})[side] = {"iops": iops.mean, "p99_us": p99.mean,
                                                        "iops_sd": iops.sd, "n": iops.n}
            rows.append(row)
        tab = table(["workload", "R IOPS", "R P99 (ms)", "W IOPS", "W P99 (ms)"], rows)
        body = ("\n## IOPS and P99 completion latency per side\n\n"
                "Mean ± standard deviation (min–max) over repetitions; '–' where the "
                "workload has no such side.\n\n" + tab)
        body += f"\n![kyber baseline]({self._plot(names, data, plots)})\n"
        return SuiteReport(body, {"kyber-baseline": summary}, tab)

    def _plot(self, names: list[str], data: dict[str, dict[str, list[tuple[float, float]]]],
              plots: Path) -> str:
        fig, ax = figure(2, 1, width=5.4, height=3.4)
        x = list(range(len(names)))
        for col, (idx, scale, ylabel, log) in enumerate(((0, 1.0, "IOPS", False),
                                                         (1, 1e-3, "P99 latency (ms)", True))):
            a = ax[0][col]
            for k, (side, color) in enumerate((("R", "tab:blue"), ("W", "tab:orange"))):
                ys, lo, hi, xs = [], [], [], []
                for i, wl in enumerate(names):
                    vals = [v[idx] * scale for v in data.get(wl, {}).get(side, [])]
                    if not vals:
                        continue
                    s = summarize(vals)
                    xs.append(i + (k - 0.5) * 0.38)
                    ys.append(s.mean)
                    lo.append(s.mean - s.lo)
                    hi.append(s.hi - s.mean)
                a.bar(xs, ys, width=0.38, color=color, label=side, yerr=[lo, hi], capsize=2)
            a.set_xticks(x)
            a.set_xticklabels(names, rotation=30, fontsize=8)
            a.set_ylabel(ylabel)
            if log:
                a.set_yscale("log")
            a.grid(alpha=0.3, axis="y")
            a.legend(fontsize=8)
        return save(fig, plots / "kyber-baseline.png")


SUITE = KyberBaseline()
