"""kyber-tune in `python3 -m bench demo`: after the short kyber-grid run,
on the same VM and device, the grid's recommendation for a read-P99
objective re-measured (predicted against measured, as `kyber-tune verify`)
and `auto` against the grid (as `kyber-tune bench`).

The objective is chosen from the grid itself, since the demo's device is
whatever the bed has: the geometric mean of the lowest read P99 of the
R1+W256 grid and Kyber's defaults' read P99, i.e. a target that the
defaults miss and some static point meets.  python3 -m bench (its
__main__) gives steps() to bench.demo for the kyber-grid suite."""
from __future__ import annotations

import math
import time
from pathlib import Path

from bench import device as devmod
from bench import prep
from bench.demo import Step
from bench.session import run_suite
from bench.suites import kyber_dead as deadmod
from bench.suites.kyber_grid import Grid
from bench.target import Target

from kybertune import cli as kt_cli
from kybertune import versus
from kybertune.recommend import Objective, recommend

WORKLOAD = "R1+W256"
# the tuner needs some periods after the writer starts (the write target
# moves x2 to x8 a period): the reader measured from 20 s after the start,
# of a 70 s run
BENCH_RUNTIME, BENCH_SETTLE = 70.0, 20.0


def objective_us(g: Grid) -> float | None:
    """Between the grid's best read P99 and the defaults': their geometric
    mean; None if the defaults are within 20% of the best (the targets do
    not matter there)."""
    p99 = [c.means(["read_p99_us"])["read_p99_us"] for c in g.cells.values()]
    p99 = [v for v in p99 if not math.isnan(v)]
    if not p99 or g.default is None:
        return None
    lo, hi = min(p99), g.default.means(["read_p99_us"])["read_p99_us"]
    if math.isnan(hi) or hi <= 1.2 * lo:
        return None
    return math.sqrt(lo * hi)


def steps(t: Target, folder: Path, device: str) -> list[Step]:
    """The two follow-up steps on kyber-grid results @folder (reports in
    folders beside it); each step's (name, folder, seconds, note)."""
    res, gs = kt_cli._grids(str(folder), None)
    g = gs.get(WORKLOAD)
    if g is None:
        return [("kyber-tune", None, 0.0, f"no {WORKLOAD} in the grid")]
    obj = objective_us(g)
    if obj is None:
        return [("kyber-tune", None, 0.0, "the grid's read P99 hardly depends on the "
                 "targets: no objective to keep")]
    out: list[Step] = []
    # 1. the recommendation for the objective, measured again
    t0 = time.monotonic()
    scale = int(res.manifest["params"].get("time_scale", 1))
    tol = float(res.manifest["params"].get("dead_tolerance", deadmod.TOLERANCE))
    rec = recommend(g, Objective("max-write-iops", None, obj), scale, tol)
    vdir = folder.parent / "kyber-verify"
    if rec.best is None:
        out.append(("kyber-verify", None, 0.0, f"no grid point meets {obj / 1000:.1f} ms"))
    else:
        argv = kt_cli.verify_argv(res, rec, device, 1, str(vdir), None, False, None)
        run_suite(t, kt_cli.bench_cli.parse(argv), command=["python3", "-m", "bench", *argv])
        cell = kt_cli.measured(str(vdir), rec)
        text = rec.text() + "\n\n" + kt_cli.compare(rec, cell.samples, tol)
        # the demo's index shows each step's headline
        (vdir / "headline.md").write_text(f"```\n{text}\n```\n")
        print(text, flush=True)
        out.append(("kyber-verify", vdir, time.monotonic() - t0, ""))
    # 2. auto against the grid, the writer starting halfway, on ssdsim
    # loaded as the grid's runs had it (write-through), then as it was
    t1 = time.monotonic()
    bdir = folder.parent / "kyber-bench"
    params = kt_cli.ssdsim_param_dict(res.manifest)
    with prep.ssdsim_loaded_with(t, devmod.resolve(t, device), params):
        o = versus.run(t, res, device, obj, WORKLOAD, BENCH_RUNTIME, BENCH_SETTLE, 1.0, bdir)
    out.append(("kyber-bench", bdir, time.monotonic() - t1, versus.summarize_goals(o)))
    return out
