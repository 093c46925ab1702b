"""kyber-tune bench: `auto` against the grid's static points.

A latency-bound reader runs alone for half of the run; at half time a
writer starts beside it (the grid's workload pair, e.g. R1+W256: reader at
depth 1, writer at depth 256); `auto` tunes Kyber all along with the read-P99
objective.  fio measures the reader after the writer has started and
--settle seconds have passed (a second reader job, the same I/O, starting
then) and the writer.  The grid, measured with both running, gives the best
static point for the same objective (the most write IOPS among the points
whose read P99 meets it) and Kyber's defaults.  Goal (issue 15): the
reader's P99 within 10% of the objective, and the writer's IOPS at least 90%
of the best static point's and above the defaults'."""
from __future__ import annotations

import json
import math
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from bench import device as devmod
from bench import fio, jobs
from bench.device import DeviceError
from bench.markdown import table
from bench.results import Results
from bench.suites.kyber_baseline import Workload
from bench.suites.kyber_grid import grids
from bench.target import Target, q

from kybertune import auto
from kybertune.recommend import Objective, recommend

TOLERANCE_P99, SHARE_OF_BEST = 1.10, 0.90


def jobfile(dev: str, w: Workload, runtime: float, settle: float) -> str:
    """Reader alone for @runtime / 2, then beside the writer; 'after' is the
    reader from @settle seconds after the writer started, 'settling' the
    same reader in between (not measured), so that a reader runs all along:
    without it the tuner saw writes and no reads for @settle seconds, took
    that for reads stalled behind the writes and raised the write target
    x8 a period, and 'after' started on a device full of writes, its first
    reads (150-175 ms at time_scale 20) inside the measured part."""
    if w.read_depth is None or w.write_depth is None:
        raise ValueError(f"{w.name}: bench needs a reader and a writer (e.g. R1+W256)")
    half = runtime / 2
    if not 0 <= settle < half:
        raise ValueError("--settle must be at least 0 and less than half of --runtime")
    g = jobs.common(dev, runtime, 0, "libaio", (50.0, 90.0, 99.0, 99.9))
    g["bs"] = "4k"
    read: dict[str, jobs.Value] = {"rw": "randread", "iodepth": w.read_depth}
    return jobs.render(g, [
        jobs.Job("before", {**read, "runtime": f"{half:g}s"}),
        *([jobs.Job("settling", {**read, "startdelay": f"{half:g}s",
                                 "runtime": f"{settle:g}s"})] if settle > 0 else []),
        jobs.Job("after", {**read, "startdelay": f"{half + settle:g}s",
                           "runtime": f"{half - settle:g}s"}),
        jobs.Job("writer", {"rw": "randwrite", "iodepth": w.write_depth,
                            "startdelay": f"{half:g}s", "runtime": f"{half:g}s"}),
    ], f"kyber-tune bench: {w.name}, the writer from {half:g} s on")


@dataclass
class Outcome:
    objective_us: float
    after_p99_us: float
    before_p99_us: float
    writer_iops: float
    best: dict[str, float] | None       # the best static point's read P99 and write IOPS
    best_name: str
    default: dict[str, float] | None
    rows: list[auto.Row]

    def goals(self) -> dict[str, bool | None]:
        out: dict[str, bool | None] = {
            "read P99 within 10% of the objective":
                self.after_p99_us <= TOLERANCE_P99 * self.objective_us}
        out["write IOPS >= 90% of the best static point's"] = (
            None if self.best is None else self.writer_iops >= SHARE_OF_BEST * self.best["write_iops"])
        out["write IOPS above Kyber's defaults'"] = (
            None if self.default is None else self.writer_iops > self.default["write_iops"])
        return out


def static(res: Results, workload: str, objective_us: float
           ) -> tuple[dict[str, float] | None, str, dict[str, float] | None]:
    """The grid's best static point for the objective (most write IOPS with
    the read P99 met) and its defaults, as mean read P99 and write IOPS."""
    gs = grids(res)
    if workload not in gs:
        raise ValueError(f"the grid has no {workload} (it has {', '.join(gs)})")
    g = gs[workload]
    scale = int(res.manifest["params"].get("time_scale", 1))
    rec = recommend(g, Objective("max-write-iops", max_read_p99_us=objective_us), scale)

    figs = ("read_p99_us", "write_iops")
    best = rec.best.cell.means(figs) if rec.best is not None else None
    return (best, rec.best.name if rec.best else "none meets it",
            g.default.means(figs) if g.default is not None else None)


def run(target: Target, grid: Results, device: str, objective_us: float, workload: str,
        runtime: float, settle: float, period: float, out_dir: Path,
        out: TextIO = sys.stdout) -> Outcome:
    dev = devmod.resolve(target, device)
    if grid.manifest["device"]["name"] != dev:
        print(f"note: the grid was measured on {grid.manifest['device']['name']}, "
              f"this run is on {dev}", file=out)
    best, best_name, default = static(grid, workload, objective_us)
    w = Workload.parse(workload)
    text = jobfile(f"/dev/{dev}", w, runtime, settle)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "bench.fio").write_text(text)
    saved = devmod.save_state(target, dev)
    tmp = f"{target.tmpdir}/kyber-bench"
    try:
        devmod.offer_scheduler(target, dev, "kyber", "kyber-iosched")
        devmod.set_scheduler(target, dev, "kyber")
        target.check(f"mkdir -p {q(tmp)} && cat > {q(tmp)}/job.fio <<'EOF'\n{text}EOF\n"
                     f"rm -f {q(tmp)}/rc; (fio --output-format=json --output={q(tmp)}/out.json "
                     f"{q(tmp)}/job.fio > {q(tmp)}/fio.log 2>&1; echo $? > {q(tmp)}/rc) "
                     "> /dev/null 2>&1 &", what="starting fio")
        res = auto.run(target, dev, objective_us, period, runtime, out=out,
                       log=out_dir / "log.csv")
        # auto ran @runtime s of the target's clock, as fio does
        deadline = target.clock() + 120
        while target.run(f"[ -e {q(tmp)}/rc ]").rc != 0:
            if target.clock() > deadline:
                raise DeviceError("fio did not finish 120 s after its runtime")
            target.sleep(1)
        rc = target.check(f"cat {q(tmp)}/rc").strip()
        raw = target.check(f"cat {q(tmp)}/out.json")
        (out_dir / "fio.json").write_text(raw)
        if rc != "0":
            raise DeviceError(f"fio failed (exit {rc}): "
                              + target.run(f"tail -n 20 {q(tmp)}/fio.log").out)
    finally:
        target.run(f"pkill -f {q(tmp)}/job.fio; rm -rf {q(tmp)}")
        failed = devmod.restore_state(target, saved)
        if failed:
            print("could not restore: " + "; ".join(failed), file=out)
    r = fio.parse(raw)
    o = Outcome(objective_us, fio.percentile(fio.job_stats(r, "after", "read"), 99.0),
                fio.percentile(fio.job_stats(r, "before", "read"), 99.0),
                fio.job_stats(r, "writer", "write").iops, best, best_name, default, res.rows)
    write_report(o, out_dir, grid, workload, runtime, settle, target.describe().get("kind", ""))
    return o


def write_report(o: Outcome, out_dir: Path, grid: Results, workload: str, runtime: float,
                 settle: float, where: str = "") -> Path:
    """report.md and summary.json in @out_dir; @where: the target's kind
    (a VM's names its clock)."""
    auto.plot(o.rows, o.objective_us, out_dir / "auto.png")
    rows: list[list[object]] = [
        ["auto (reader from the writer's start + settle)", f"{o.after_p99_us / 1000:.3f}",
         f"{o.writer_iops:.0f}"]]
    if o.best is not None:
        rows.append([f"best static point ({o.best_name})", f"{o.best['read_p99_us'] / 1000:.3f}",
                     f"{o.best['write_iops']:.0f}"])
    if o.default is not None:
        rows.append(["Kyber's defaults", f"{o.default['read_p99_us'] / 1000:.3f}",
                     f"{o.default['write_iops']:.0f}"])
    goals = o.goals()
    text = (f"# kyber-tune bench: auto against the grid, {workload}\n\n"
            f"Objective: read P99 <= {o.objective_us:g} us. The reader runs alone for "
            f"{runtime / 2:g} s (its P99 {o.before_p99_us / 1000:.3f} ms), then a writer "
            f"starts beside it; the reader is measured from {settle:g} s after that. The "
            f"static figures are the grid's ({grid.folder}), measured with both running."
            + (f" Target: {where}." if where else "") + "\n\n"
            + table(["", "read P99 (ms)", "write IOPS"], rows)
            + "\n" + "".join(f"- {k}: **{'yes' if v else 'no' if v is not None else 'n/a'}**\n"
                             for k, v in goals.items())
            + "\n![auto](auto.png)\n\n`log.csv`: the tuner's periods; `fio.json`, `bench.fio`: "
            "the workload.\n")
    path = out_dir / "report.md"
    path.write_text(text)
    (out_dir / "summary.json").write_text(json.dumps({
        "objective_us": o.objective_us, "after_p99_us": o.after_p99_us,
        "before_p99_us": o.before_p99_us, "writer_iops": o.writer_iops,
        "best_static": o.best, "best_static_point": o.best_name, "default": o.default,
        "goals": goals, **auto.summary(o.rows, o.objective_us, runtime / 2 + settle)},
        indent=1, default=lambda x: None if isinstance(x, float) and math.isnan(x) else x)
        + "\n")
    return path


def summarize_goals(o: Outcome) -> str:
    return "; ".join(f"{k}: {'yes' if v else 'no' if v is not None else 'n/a'}"
                     for k, v in o.goals().items())
