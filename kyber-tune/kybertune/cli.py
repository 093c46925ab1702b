"""kyber-tune: find, recommend and keep Kyber's latency targets.

  grid       the study's grid search (the benchmark runner's kyber-grid suite)
  report     rewrite a grid's report.md and heatmaps
  recommend  the best targets of a grid for an objective, with predicted figures
  verify     re-run the recommended point; predicted against measured
  auto       keep a read-P99 objective on a live device (online tuner)
  bench      auto against the grid: a writer starts halfway beside a reader
"""
from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench import cli as bench_cli
from bench import results as resmod
from bench import device as devmod
from bench.device import DeviceError
from bench.results import ResultsError, Summary
from bench.suites import add_icount_argument, refuse_icount_here
from bench.suites import kyber_dead as deadmod
from bench.suites.kyber_grid import Cell, Grid, grids
from bench.target import TargetError
from scripts.vmbed import VMError

from kybertune.recommend import OBJECTIVES, Objective, Recommendation, dumps, recommend

PROG = "kyber-tune"

EPILOG = """\
examples:
  kyber-tune grid --device /dev/nvme0n1                    # a real, empty NVMe drive
  kyber-tune grid --vm --device ssdsim0 --short --read-us 50:5000:3 --write-us 100:100000:3
  kyber-tune recommend results/kyber-grid-nvme0n1-20261125-120000 --workload R1+W256 \\
      --objective min-read-p99 --min-write-iops 20000
  kyber-tune verify results/kyber-grid-nvme0n1-20261125-120000 --workload R1+W256 \\
      --objective max-iops --max-read-p99-us 500
  kyber-tune auto --device /dev/nvme0n1 --read-p99-us 300   # until Ctrl-C
"""


def _objective_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("results", help="a kyber-grid results folder")
    p.add_argument("--workload", help="the grid's workload to use (default: each)")
    p.add_argument("--objective", choices=OBJECTIVES, required=True,
                   help="min-read-p99: the lowest read P99 (with --min-write-iops, among "
                   "points that keep that many write IOPS); max-iops: the most read + write "
                   "IOPS (with --max-read-p99-us, among points within that read P99); "
                   "max-write-iops: the most write IOPS (same ceiling)")
    p.add_argument("--min-write-iops", type=float, metavar="IOPS")
    p.add_argument("--max-read-p99-us", type=float, metavar="US")
    p.add_argument("--tolerance", type=float, default=deadmod.TOLERANCE,
                   help="differences of means up to this fraction count as none when "
                   f"listing equally good points (default {deadmod.TOLERANCE})")


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0],
                                 epilog=EPILOG,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True, metavar="COMMAND")
    sub.add_parser("grid", add_help=False,
                   help="the grid search: `kyber-tune grid --help` (the options of "
                   "`python3 -m bench run kyber-grid`)")
    rep = sub.add_parser("report", help="rewrite report.md and the heatmaps of grid results")
    rep.add_argument("results", nargs="+")
    rec = sub.add_parser("recommend", help="the best targets of a grid for an objective",
                         description="The best targets of a measured grid for an objective, "
                         "with the figures the grid predicts for them (mean ± sd over its "
                         "repetitions) and Kyber's defaults' beside them.")
    _objective_args(rec)
    rec.add_argument("--json", action="store_true", help="print JSON instead of text")
    ver = sub.add_parser("verify", help="re-run the recommended point; predicted vs measured",
                         description="Recommend as `recommend` does, then run that point "
                         "again (with Kyber's defaults beside it) on the grid's device, with "
                         "the grid's durations, and print predicted against measured.")
    _objective_args(ver)
    ver.add_argument("--reps", type=int, default=3, help="repetitions (default 3)")
    ver.add_argument("--device", help="default: the grid's device")
    ver.add_argument("--destroy-data", metavar="DEVICE",
                     help="as for grid: overwrite a device that holds data")
    ver.add_argument("--out", help="results folder of the re-run (default: "
                     "<grid folder>-verify-<UTC time>)")
    ver.add_argument("--vm", action="store_true", help="in the VM test bed")
    ver.add_argument("--kernel", help="with --vm: kernel release (default: the grid's)")
    au = sub.add_parser("auto", help="keep a read-P99 objective on a live device",
                        description="Online tuner: sets read_lat_nsec to the objective and "
                        "moves write_lat_nsec every period from Kyber's own p99 reports "
                        "(kyber_latency events in an ftrace instance of its own; no fio), "
                        "until --duration or Ctrl-C/SIGTERM; then puts the targets (and with "
                        "--select the scheduler) back, also after an error. Writes log.csv, "
                        "auto.png and summary.json. The controller: kyber-tune/README.md.")
    au.add_argument("--device", "-d", required=True, help="the live device (kyber selected)")
    au.add_argument("--read-p99-us", type=float, required=True, metavar="US",
                    help="the objective: read P99 in us")
    au.add_argument("--period", type=float, default=1.0,
                    help="seconds between adjustments (default 1)")
    au.add_argument("--duration", type=float, default=0.0,
                    help="seconds to run (default 0: until Ctrl-C or SIGTERM)")
    au.add_argument("--write-min-us", type=float,
                    help="lowest write target in us (default: the objective)")
    au.add_argument("--write-max-us", type=float,
                    help="highest write target in us (default: 1000 x the objective)")
    au.add_argument("--select", action="store_true",
                    help="select kyber if the device uses another scheduler (put back at "
                    "the end)")
    au.add_argument("--out", help="folder for log.csv, auto.png, summary.json (default "
                    "results/kyber-auto-<device>-<UTC time>)")
    au.add_argument("--vm", action="store_true", help="in the VM test bed")
    au.add_argument("--kernel", help="with --vm: kernel release")
    au.add_argument("--ssdsim", metavar="PARAMS", default="",
                    help="with --vm and an ssdsim device: its module parameters")
    add_icount_argument(au, "--period and --duration are then of the guest's clock")
    be = sub.add_parser("bench", help="auto against a grid's static points: a writer starts "
                        "halfway beside a latency-bound reader",
                        description="A reader (the grid workload's R side) runs alone for half "
                        "of --runtime, then the writer (its W side) starts beside it, while "
                        "`auto` keeps --read-p99-us. fio measures the reader from --settle "
                        "seconds after the writer's start, and the writer; the grid gives the "
                        "best static point for the same objective and Kyber's defaults. Writes "
                        "report.md, auto.png, log.csv, fio.json, summary.json into --out.")
    be.add_argument("grid", help="a kyber-grid results folder measured on the device")
    be.add_argument("--read-p99-us", type=float, required=True, metavar="US")
    be.add_argument("--workload", default="R1+W256", help="the grid's pair (default R1+W256)")
    be.add_argument("--runtime", type=float, default=60.0, help="seconds in all (default 60)")
    be.add_argument("--settle", type=float, default=10.0,
                    help="seconds after the writer's start before the reader is measured "
                    "(default 10)")
    be.add_argument("--period", type=float, default=1.0, help="auto's period (default 1)")
    be.add_argument("--device", help="default: the grid's device")
    be.add_argument("--destroy-data", metavar="DEVICE",
                    help="overwrite a device that holds data (must name it again)")
    be.add_argument("--out", help="default: <grid folder>-bench-<UTC time>")
    be.add_argument("--vm", action="store_true", help="in the VM test bed")
    be.add_argument("--kernel", help="with --vm: kernel release (default: the grid's)")
    add_icount_argument(be, "the reader's and writer's figures and auto's periods are of "
                        "the guest's clock (default: the grid's, so that both are measured "
                        "on the same clock)")
    return ap


def cmd_bench(a: argparse.Namespace) -> int:
    import datetime as dt
    from kybertune import versus
    res = _load_grid(a.grid)
    a.device = a.device or res.manifest["device"]["path"]
    if a.vm and not a.kernel:
        a.kernel = res.manifest["target"].get("kernel")
    a.icount = vm_icount(a, res)
    a.ssdsim = ssdsim_params(res.manifest)
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%d-%H%M%S")
    out = Path(a.out or f"{Path(a.grid).resolve()}-bench-{stamp}")
    a.trace = None
    with bench_cli.target_for(a) as target:
        devmod.check_device(target, devmod.resolve(target, a.device), a.destroy_data)
        o = versus.run(target, res, a.device, a.read_p99_us, a.workload, a.runtime, a.settle,
                       a.period, out)
    print(f"\nreader P99 {o.after_p99_us / 1000:.3f} ms (objective {a.read_p99_us / 1000:g}), "
          f"writer {o.writer_iops:.0f} IOPS; {versus.summarize_goals(o)}\nreport: "
          f"{out / 'report.md'}")
    return 0


def cmd_auto(a: argparse.Namespace) -> int:
    import datetime as dt
    from kybertune import auto
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%d-%H%M%S")
    name = a.device.rsplit("/", 1)[-1]
    out = Path(a.out or bench_cli.ROOT / "results" / f"kyber-auto-{name}-{stamp}")
    a.trace = None
    a.icount = vm_icount(a, None)
    with bench_cli.target_for(a) as target:
        res = auto.run(target, a.device, a.read_p99_us, a.period, a.duration,
                       a.write_min_us, a.write_max_us, a.select, sys.stdout,
                       log=out / "log.csv")
    if res.rows:
        auto.plot(res.rows, a.read_p99_us, out / "auto.png")
        s = auto.summary(res.rows, a.read_p99_us)
        (out / "summary.json").write_text(auto.dumps({**s, "stopped_by": res.stopped_by,
                                                      "restored": res.restored}) + "\n")
        print(f"{s['over']} of {s['periods']} periods over the objective; log, plot and "
              f"summary in {out}")
    return 0


def vm_icount(a: argparse.Namespace, grid: resmod.Results | None) -> int | None:
    """The instruction-counting clock's shift for a.vm: --icount, else the
    @grid's (verify and bench compare with it); ValueError for --icount
    without --vm."""
    given = getattr(a, "icount", None)
    refuse_icount_here(given, not a.vm)
    if not a.vm:
        return None
    if given is not None:
        return int(given)
    got = grid.manifest["params"].get("icount") if grid is not None else None
    return None if got is None else int(got)


def _load_grid(folder: str) -> resmod.Results:
    """A kyber-grid results folder (ResultsError if it holds another suite's)."""
    res = resmod.load(folder)
    if res.suite != "kyber-grid":
        raise ResultsError(f"{folder} holds {res.suite} results, not kyber-grid")
    return res


def _grids(folder: str, workload: str | None) -> tuple[resmod.Results, dict[str, Grid]]:
    res = _load_grid(folder)
    p = res.manifest["params"]
    gs = grids(res, float(p.get("dead_tolerance", deadmod.TOLERANCE)))
    if workload is not None:
        if workload not in gs:
            raise ValueError(f"--workload {workload}: the grid has {', '.join(gs)}")
        gs = {workload: gs[workload]}
    return res, {k: g for k, g in gs.items() if g.cells}


def _recommendations(a: argparse.Namespace) -> tuple[resmod.Results, list[Recommendation]]:
    obj = Objective(a.objective, a.min_write_iops, a.max_read_p99_us)
    res, gs = _grids(a.results, a.workload)
    scale = int(res.manifest["params"].get("time_scale", 1))
    return res, [recommend(g, obj, scale, a.tolerance) for g in gs.values()]


def cmd_recommend(a: argparse.Namespace) -> int:
    _, recs = _recommendations(a)
    print(dumps(recs) if a.json else "\n\n".join(r.text() for r in recs))
    return 0 if all(r.best is not None for r in recs) else 3


def cmd_verify(a: argparse.Namespace) -> int:
    import datetime as dt
    res, recs = _recommendations(a)
    if len(recs) != 1:
        raise ValueError("verify re-runs one point: name the grid's --workload "
                         f"({', '.join(r.workload for r in recs)})")
    rec = recs[0]
    print(rec.text(), flush=True)
    if rec.best is None:
        return 3
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%d-%H%M%S")
    out = a.out or f"{Path(a.results).resolve()}-verify-{stamp}"
    argv = verify_argv(res, rec, a.device, a.reps, out, a.destroy_data, a.vm, a.kernel)
    rc = bench_cli.main(argv)
    if rc != 0:
        return rc
    print("\n" + compare(rec, measured(out, rec).samples, a.tolerance))
    return 0


def measured(folder: str, rec: Recommendation) -> Cell:
    """@rec's best point as verify's re-run in @folder measured it."""
    assert rec.best is not None
    _, again = _grids(folder, rec.workload)
    g = again[rec.workload]
    cell = g.default if rec.best.name == "default" else next(iter(g.cells.values()))
    assert cell is not None
    return cell


def verify_argv(res: resmod.Results, rec: Recommendation, device: str | None, reps: int,
                out: str, destroy_data: str | None, vm: bool, kernel: str | None) -> list[str]:
    """`python3 -m bench` arguments re-running @rec's best point (and the
    defaults) like the grid @res: its device unless @device, its
    durations, engine, pinning and file system."""
    assert rec.best is not None
    m = res.manifest
    p = m["params"]
    argv = ["run", "kyber-grid", "--device", device or m["device"]["path"],
            "--workloads", rec.workload,
            "--read-us", f"{rec.best.read_us:g}", "--write-us", f"{rec.best.write_us:g}",
            "--runtime", f"{p['runtime']:g}", "--ramp", f"{p['ramp']:g}",
            "--reps", str(reps), "--ioengine", p.get("ioengine", "io_uring"), "--out", out]
    if not p.get("pin", True):
        argv.append("--no-pin")
    if p.get("fs"):
        argv += ["--fs", p["fs"]]
    if destroy_data:
        argv += ["--destroy-data", destroy_data]
    if vm:
        argv += ["--vm", "--kernel", kernel or m["target"].get("kernel", "")]
        if m["device"].get("kind") == "ssdsim":
            argv += ["--ssdsim", ssdsim_params(m)]
        if p.get("icount") is not None:
            argv += ["--icount", str(p["icount"])]
    if p.get("write_through"):
        argv.append("--write-through")
    return argv


def ssdsim_params(manifest: dict[str, Any]) -> str:
    """The module parameters ssdsim had while a results folder's runs ran
    (to load it the same way in a new VM): those of the last phase set-up
    that reloaded it (--write-through), else the device's as found; "" for
    another device."""
    return " ".join(f"{k}={v}" for k, v in sorted(ssdsim_param_dict(manifest).items()))


def ssdsim_param_dict(manifest: dict[str, Any]) -> dict[str, str]:
    """ssdsim_params() as a dict ({} for another device)."""
    if manifest["device"].get("kind") != "ssdsim":
        return {}
    params = manifest["device"].get("module_params", {})
    for ph in manifest.get("phases", {}).values():
        params = ph.get("module_params", params)
    return dict(params)


def compare(rec: Recommendation, measured: dict[str, list[float]],
            tolerance: float = deadmod.TOLERANCE) -> str:
    """Predicted against measured, per metric, with whether they agree
    (bench.suites.kyber_dead's rule)."""
    from bench.results import summarize
    assert rec.best is not None
    pred = rec.best.predicted()
    lines = [f"{'metric':12s} {'predicted':>28s} {'measured':>28s}  agree"]
    for m, title, scale, digits in (("read_p99_us", "read P99 ms", 1e-3, 3),
                                    ("read_iops", "read IOPS", 1.0, 0),
                                    ("write_iops", "write IOPS", 1.0, 0)):
        got: Summary = summarize(measured.get(m, []))
        if pred[m].n == 0 and got.n == 0:
            continue
        same = deadmod.indistinguishable(rec.best.cell.samples.get(m, []),
                                         measured.get(m, []), tolerance)
        lines.append(f"{title:12s} {pred[m].fmt(scale, digits):>28s} "
                     f"{got.fmt(scale, digits):>28s}  {'yes' if same else 'NO'}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "grid":
        return bench_cli.main(["run", "kyber-grid", *argv[1:]])
    a = build_parser().parse_args(argv)
    try:
        if a.cmd == "report":
            return bench_cli.main(["report", *a.results])
        if a.cmd == "recommend":
            return cmd_recommend(a)
        if a.cmd == "verify":
            return cmd_verify(a)
        if a.cmd == "auto":
            return cmd_auto(a)
        if a.cmd == "bench":
            return cmd_bench(a)
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
    except (ResultsError, ValueError, OSError, DeviceError, TargetError, VMError) as e:
        print(f"{PROG}: {e}", file=sys.stderr)
        return 1
    return 2
