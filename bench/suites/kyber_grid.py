"""kyber-grid: the Kyber study's grid search on the benchmark runner (also
`kyber-tune grid`), and the grids it measured (grids(), which kyber-tune's
recommend, verify and bench read).

Every point of read targets x write targets (read_lat_nsec, write_lat_nsec)
is one configuration of the runner: before its fio run the runner selects
none, then kyber again (a fresh instance, so nothing of the previous point
carries over), writes the two targets and reads them back (the manifest
records what was read).  Points and repetitions run in one random order
(seeded, recorded).  Each workload pair of the study (R1+W256, R256+W256,
R1+W1, R256+W1: 4 KiB random reads and writes at those depths, the
kyber-baseline suite's jobs) or a user's fio job file is measured at every
point, and once at Kyber's own defaults for comparison.

Targets are given in device time: on ssdsim, whose every device time is
time_scale x a real flash chip's, the suite writes target x time_scale to
sysfs, so that the same grid means the same thing relative to the device.

With --fs, each run gets a fresh file system (mkfs, mount, fio on files in
it, as the study did), made by the runner's settle step before the
scheduler is applied; the device is unmounted at the end."""
from __future__ import annotations

import argparse
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench import fio, jobs, prep
from bench.markdown import table
from bench.plot import figure, save
from bench.results import Results, Run, Summary, summarize
from bench.runner import Config, Phase, Plan, RunContext, RunError
from bench.suites import Sched, Suite, SuiteReport, add_icount_argument, icount_note
from bench.suites.kyber_baseline import Workload, depth_note
from bench.suites.kyber_baseline import jobfile as baseline_jobfile
from bench.suites import kyber_dead as deadmod
from bench.target import q

#: the study's workload pairs
PAIRS = ("R1+W256", "R256+W256", "R1+W1", "R256+W1")
#: default axes, device time in us (log-spaced; Kyber's defaults, 2 ms and
#: 10 ms, lie inside both)
READ_US = "50:5000:5"
WRITE_US = "100:100000:5"
FILESYSTEMS = {"ext4": "mkfs.ext4 -F -q", "xfs": "mkfs.xfs -f -q", "f2fs": "mkfs.f2fs -f -q"}
METRICS = ("read_p99_us", "read_iops", "write_iops")
METRIC_TITLES = {"read_p99_us": "read P99 (ms)", "read_iops": "read IOPS",
                 "write_iops": "write IOPS"}
DEFAULT_READ_NS, DEFAULT_WRITE_NS = 2000000, 10000000


def axis(spec: str, option: str = "targets") -> list[float]:
    """Target values in us from 'LO:HI:N' (N log-spaced values, both ends
    included) or a comma-separated list; increasing, no duplicates."""
    spec = spec.strip()
    try:
        if ":" in spec:
            lo_s, hi_s, n_s = spec.split(":")
            lo, hi, n = float(lo_s), float(hi_s), int(n_s)
            if n < 1 or lo <= 0 or hi < lo or (n == 1 and hi != lo):
                raise ValueError
            vals = [lo] if n == 1 else [lo * (hi / lo) ** (k / (n - 1)) for k in range(n)]
        else:
            vals = [float(x) for x in spec.split(",") if x.strip()]
    except ValueError:
        raise ValueError(f"{option}: {spec!r} is neither LO:HI:N (0 < LO <= HI, N >= 1) "
                         "nor a list of values in us") from None
    vals = [float(f"{v:.3g}") for v in vals]
    if not vals or any(v <= 0 for v in vals) or sorted(set(vals)) != vals:
        raise ValueError(f"{option}: {spec!r}: give increasing positive values in us")
    return vals


def time_scale(ctx_device: Any) -> int:
    """ssdsim's time_scale (1 for any other device)."""
    if getattr(ctx_device, "kind", "") == "ssdsim":
        return int(ctx_device.module_params.get("time_scale", 1) or 1)
    return 1


def to_ns(us: float, scale: int) -> int:
    return max(1, round(us * 1000 * scale))


@dataclass
class Cell:
    """One grid point of one workload: each metric's repetitions."""
    read_ns: int
    write_ns: int
    samples: dict[str, list[float]] = field(default_factory=dict)

    def add(self, metric: str, value: float) -> None:
        if not math.isnan(value):
            self.samples.setdefault(metric, []).append(value)

    def summaries(self, metrics: Sequence[str] | None = None) -> dict[str, Summary]:
        """Each metric's summary over the repetitions (every metric of
        METRICS unless @metrics)."""
        return {m: summarize(self.samples.get(m, [])) for m in (metrics or METRICS)}

    def means(self, metrics: Sequence[str] | None = None) -> dict[str, float]:
        return {m: v.mean for m, v in self.summaries(metrics).items()}


@dataclass
class Grid:
    """A workload's grid as measured: axes in device-time us, cells by
    (read index, write index), Kyber's defaults, the dead points."""
    workload: str
    read_us: list[float]
    write_us: list[float]
    cells: dict[tuple[int, int], Cell]
    default: Cell | None
    dead: set[tuple[int, int]]

    def summary(self) -> dict[str, Any]:
        def cell(c: Cell) -> dict[str, Any]:
            return {"read_lat_nsec": c.read_ns, "write_lat_nsec": c.write_ns,
                    **{m: v.as_dict() for m, v in c.summaries().items()}}
        return {"read_us": self.read_us, "write_us": self.write_us,
                "points": [{"i": i, "j": j, "read_us": self.read_us[i],
                            "write_us": self.write_us[j], "dead": (i, j) in self.dead,
                            **cell(c)} for (i, j), c in sorted(self.cells.items())],
                "default": cell(self.default) if self.default else None}


def sides(result: dict[str, Any]) -> dict[str, float]:
    """A run's read P99 (us, over the jobs that read: fio.merged_percentile), read
    IOPS and write IOPS (summed over jobs); NaN for a side nothing did."""
    names = [j["jobname"] for j in result["jobs"]]
    out = {}
    for ddir in ("read", "write"):
        st = [fio.job_stats(result, n, ddir) for n in names]
        done = [s for s in st if s.ios]
        out[f"{ddir}_iops"] = sum(s.iops for s in done) if done else math.nan
        if ddir == "read":
            out["read_p99_us"] = fio.merged_percentile(done, 99.0)
    return out


def grids(res: Results, tolerance: float = deadmod.TOLERANCE) -> dict[str, Grid]:
    """Every workload's grid from a kyber-grid results folder."""
    p = res.manifest["params"]
    read_us, write_us = list(p["read_us"]), list(p["write_us"])
    out: dict[str, Grid] = {}
    for wl in p["workloads"]:
        out[wl] = Grid(wl, read_us, write_us, {}, None, set())
    for r in res.runs:
        g = out.get(r.labels.get("workload", ""))
        if g is None:
            continue
        c = _cell_of(g, r)
        for k, v in sides(r.result).items():
            c.add(k, v)
    for g in out.values():
        g.dead = deadmod.dead_points({ij: c.samples for ij, c in g.cells.items()}, tolerance)
    return out


def _cell_of(g: Grid, r: Run) -> Cell:
    lab = r.labels
    if lab.get("point") == "default":
        if g.default is None:
            g.default = Cell(int(lab["read_ns"]), int(lab["write_ns"]))
        return g.default
    ij = (int(lab["i"]), int(lab["j"]))
    if ij not in g.cells:
        g.cells[ij] = Cell(int(lab["read_ns"]), int(lab["write_ns"]))
    return g.cells[ij]


def _user_jobfile(text: str, dev: str, runtime: float, ramp: float, ioengine: str,
                  fs_dir: str | None, fs_size: str, comment: str) -> str:
    """A user's fio job file with the runner's common options (device or
    file-system directory, run time, ramp, percentiles) under its own."""
    sections = jobs.parse_options(text)
    user_global = sections.pop("global", {})
    if not sections:
        raise ValueError("--job-file: no job in it")
    g = jobs.common(dev, runtime, ramp, ioengine, (50.0, 90.0, 99.0, 99.9))
    for k in ("filename", "directory", "runtime", "ramp_time", "time_based"):
        if k in user_global or any(k in o for o in sections.values()):
            raise ValueError(f"--job-file: leave {k} to kyber-tune (it sets the device, "
                             "the file system and the durations)")
    g.update(user_global)
    if fs_dir is not None:
        del g["filename"]
        g["directory"], g["size"] = fs_dir, fs_size
    return jobs.render(g, [jobs.Job(n, o) for n, o in sections.items()], comment)


class KyberGrid(Suite):
    name = "kyber-grid"
    title = "Kyber's latency targets: read_lat_nsec x write_lat_nsec grid"
    description = ("the Kyber study's grid search: read x write latency targets for the "
                   "workload pairs R1+W256, R256+W256, R1+W1, R256+W1 (or a job file); "
                   "heatmaps and the dead configuration space")
    schedulers = (Sched("kyber", "kyber-iosched"),)
    durations = (30.0, 5.0, 3)
    short_durations = (3.0, 0.5, 2)

    def add_arguments(self, p: argparse.ArgumentParser) -> None:
        p.add_argument("--read-us", default=READ_US, metavar="LO:HI:N|LIST",
                       help=f"read targets in us of device time (default {READ_US}: 5 "
                       "log-spaced values; on ssdsim each is multiplied by its time_scale)")
        p.add_argument("--write-us", default=WRITE_US, metavar="LO:HI:N|LIST",
                       help=f"write targets in us of device time (default {WRITE_US})")
        p.add_argument("--workloads", default=",".join(PAIRS),
                       help=f"comma-separated pairs (default {','.join(PAIRS)})")
        p.add_argument("--job-file", metavar="FILE",
                       help="measure this fio job file (its jobs, e.g. a reader and a writer) "
                       "instead of --workloads; kyber-tune sets the device or directory "
                       "and the durations")
        p.add_argument("--fs", choices=sorted(FILESYSTEMS),
                       help="a fresh file system of this type for every run, fio on files in "
                       "it (default: the raw device)")
        p.add_argument("--fs-size", default="1g",
                       help="with --fs: each job's file size, fio syntax (default 1g)")
        p.add_argument("--write-through", action="store_true",
                       help="on ssdsim: reload it write-through first (write_buffer_kb=0; "
                       "its original parameters are reloaded at the end). With its DRAM "
                       "buffer a write completes at once and Kyber cannot hold back the "
                       "programs that keep the dies busy")
        p.add_argument("--dead-tolerance", type=float, default=deadmod.TOLERANCE,
                       help="dead space: differences of means up to this fraction count as "
                       f"none (default {deadmod.TOLERANCE})")
        add_icount_argument(p, "latencies and IOPS are of the guest's time, which a host "
                            "that stalls the VM does not enter; kyber-tune's verify and "
                            "bench of this grid run on the same clock")

    def plan(self, ctx: RunContext) -> Plan:
        a = ctx.args
        read_us, write_us = axis(a.read_us, "--read-us"), axis(a.write_us, "--write-us")
        if not 0 <= a.dead_tolerance < 1:
            raise ValueError("--dead-tolerance: a fraction, 0 <= x < 1")
        scale = time_scale(ctx.device)
        runtime, ramp = ctx.params["runtime"], ctx.params["ramp"]
        cpus = None if a.no_pin else ctx.target.ncpus()
        fs_dir = f"{ctx.target.tmpdir}/fs" if a.fs else None
        user = Path(a.job_file).read_text() if a.job_file else None
        names = ["job-file"] if user is not None else \
            [Workload.parse(w).name for w in a.workloads.split(",") if w.strip()]
        if not names:
            raise ValueError("--workloads: none given")
        defaults = ctx.sched_info.get("kyber", {}).get("defaults", {})
        dflt = (int(defaults.get("read_lat_nsec", DEFAULT_READ_NS)),
                int(defaults.get("write_lat_nsec", DEFAULT_WRITE_NS)))
        blocks: list[list[Config]] = []
        for wl in names:
            comment = f"kyber-grid: {wl}"
            if user is not None:
                text = _user_jobfile(user, ctx.device.path, runtime, ramp, a.ioengine,
                                     fs_dir, a.fs_size, comment)
            else:
                text = baseline_jobfile(ctx.device.path, Workload.parse(wl), runtime, ramp,
                                        a.ioengine, cpus, comment)
                if fs_dir is not None:
                    text = _on_fs(text, fs_dir, a.fs_size)
            points: list[tuple[str, int, int, tuple[tuple[str, int], ...]]] = [
                (f"r{r:g}-w{w:g}", to_ns(r, scale), to_ns(w, scale), (("i", i), ("j", j)))
                for i, r in enumerate(read_us) for j, w in enumerate(write_us)]
            points.append(("default", *dflt, (("point", "default"),)))
            for key, rns, wns, extra in points:
                blocks.append([Config(
                    f"{wl}/{key}", "kyber", text, runtime + ramp,
                    tunables=(("read_lat_nsec", rns), ("write_lat_nsec", wns)),
                    labels=(("workload", wl), ("read_ns", rns), ("write_ns", wns), *extra))])
        notes = icount_note(a, ctx.target, runtime)
        if scale != 1:
            notes.append(f"ssdsim time_scale {scale}: every target is written to sysfs as "
                         f"{scale} x the device time shown (e.g. {read_us[0]:g} us -> "
                         f"read_lat_nsec {to_ns(read_us[0], scale)})")
        note = None if user is not None else \
            depth_note(ctx.device.hw_depth, [Workload.parse(w) for w in names])
        if note:
            notes.append(note)
        settle = None
        if a.fs:
            settle = self._fresh_fs(ctx, a.fs, fs_dir)
            notes.append(f"a fresh {a.fs} for every run ({FILESYSTEMS[a.fs]}), "
                         f"files of {a.fs_size} per job")
        setup = None
        if a.write_through:
            if ctx.device.kind != "ssdsim":
                raise ValueError("--write-through applies to ssdsim only")
            setup = _write_through
            settle = _fresh_then(settle, fs_dir)
        return Plan([Phase("grid", blocks, setup=setup, settle=settle)], notes,
                    {"workloads": names, "read_us": read_us, "write_us": write_us,
                     "time_scale": scale, "fs": a.fs, "dead_tolerance": a.dead_tolerance,
                     "write_through": a.write_through,
                     "default_ns": list(dflt), "icount": a.icount})

    @staticmethod
    def _fresh_fs(ctx: RunContext, fs: str, mnt: str | None) -> Any:
        assert mnt is not None
        dev = ctx.device.path
        mkfs = FILESYSTEMS[fs]

        def unmount() -> None:
            ctx.target.run(_unmount(mnt))

        def settle(c: RunContext) -> None:
            # the file system's module, if it is one and not loaded yet
            if c.target.run(f"grep -qw {fs} /proc/filesystems || modprobe {fs}").rc != 0:
                raise RunError(f"this kernel has no {fs} (not in /proc/filesystems, and "
                               f"modprobe {fs} failed)")
            r = c.target.run(f"({_unmount(mnt)}) && {mkfs} {q(dev)} && mkdir -p {q(mnt)} && "
                             f"mount -t {fs} {q(dev)} {q(mnt)}", timeout=600)
            if r.rc != 0:
                # the head: mkfs says what is wrong before printing its usage
                raise RunError(f"could not make a fresh {fs} on {dev}: {r.out.strip()[:500]}")
        ctx.on_exit(f"{dev} unmounted from {mnt}", unmount)
        return settle

    def brief(self, c: Config, result: dict[str, Any]) -> str:
        s = sides(result)
        parts = []
        if not math.isnan(s["read_iops"]):
            parts.append(f"R: {s['read_iops']:.0f} IOPS, P99 {s['read_p99_us'] / 1000:.2f} ms")
        if not math.isnan(s["write_iops"]):
            parts.append(f"W: {s['write_iops']:.0f} IOPS")
        return "; ".join(parts)

    def report(self, res: Results, plots: Path) -> SuiteReport:
        p = res.manifest["params"]
        gs = grids(res, float(p.get("dead_tolerance", deadmod.TOLERANCE)))
        scale = int(p.get("time_scale", 1))
        body = ["\nTargets are device time"
                + (f"; ssdsim's time_scale {scale} multiplies what is written to sysfs"
                   if scale != 1 else "")
                + ". Mean ± standard deviation (min–max) over repetitions.\n\n"
                "**Dead configuration space** (hatched in the heatmaps, † in the tables): "
                "a point that cannot be told from any of its grid neighbours in read P99, "
                "read IOPS or write IOPS. Two points count as the same when Welch's "
                "two-sided t-test over their repetitions does not reject equal means at "
                "the 5% level, or when their means differ by at most "
                f"{100 * float(p.get('dead_tolerance', deadmod.TOLERANCE)):g}% "
                "(the only test with one repetition).\n"]
        headline = []
        summary: dict[str, Any] = {}
        for wl, g in gs.items():
            if not g.cells:
                continue
            summary[wl] = g.summary()
            body.append(f"\n## {wl}\n\n{len(g.dead)} of {len(g.cells)} points dead.\n\n")
            body.append(f"![{wl} heatmaps]({self._heatmaps(g, plots)})\n\n")
            body.append(self._table(g))
            headline.append(f"{wl}: {len(g.dead)} of {len(g.cells)} points dead")
        return SuiteReport("".join(body), {"kyber-grid": summary},
                           "; ".join(headline) + "\n" if headline else "")

    @staticmethod
    def _table(g: Grid) -> str:
        rows: list[list[object]] = []
        cells = [((i, j), c) for (i, j), c in sorted(g.cells.items())]
        for (i, j), c in cells:
            rows.append([f"{g.read_us[i]:g}", f"{g.write_us[j]:g}"]
                        + _row(c) + ["†" if (i, j) in g.dead else ""])
        if g.default is not None:
            rows.append([f"default ({g.default.read_ns / 1000:g} us in sysfs)",
                         f"default ({g.default.write_ns / 1000:g} us in sysfs)"]
                        + _row(g.default) + [""])
        return table(["read target (us)", "write target (us)", "read P99 (ms)", "read IOPS",
                      "write IOPS", "dead"], rows, "rrrrrl")

    @staticmethod
    def _heatmaps(g: Grid, plots: Path) -> str:
        fig, ax = figure(3, 1, width=4.4, height=3.8)
        for k, m in enumerate(METRICS):
            a = ax[0][k]
            scale = 1e-3 if m == "read_p99_us" else 1.0
            vals = [[math.nan] * len(g.write_us) for _ in g.read_us]
            for (i, j), c in g.cells.items():
                s = c.summaries([m])[m]
                vals[i][j] = s.mean * scale if s.n else math.nan
            cmap = "viridis_r" if m == "read_p99_us" else "viridis"
            im = a.imshow(vals, origin="lower", aspect="auto", cmap=cmap)
            fig.colorbar(im, ax=a, fraction=0.046, pad=0.04)
            for i, row in enumerate(vals):
                for j, v in enumerate(row):
                    if (i, j) in g.dead:
                        a.add_patch(_hatch(j, i))
                    if not math.isnan(v):
                        r, gr, b, _ = im.cmap(im.norm(v))
                        dark = 0.299 * r + 0.587 * gr + 0.114 * b < 0.5
                        a.text(j, i, f"{v:.3g}" if scale != 1.0 else f"{v:.0f}",
                               ha="center", va="center", fontsize=7,
                               color="white" if dark else "black",
                               bbox={"boxstyle": "round,pad=0.15", "alpha": 0.6, "lw": 0,
                                     "fc": "black" if dark else "white"})
            a.set_xticks(range(len(g.write_us)))
            a.set_xticklabels([_us(v) for v in g.write_us], rotation=30, fontsize=7)
            a.set_yticks(range(len(g.read_us)))
            a.set_yticklabels([_us(v) for v in g.read_us], fontsize=7)
            a.set_xlabel("write target")
            a.set_ylabel("read target")
            a.set_title(f"{g.workload}: {METRIC_TITLES[m]}"
                        + (" (hatched: dead)" if g.dead else ""), fontsize=9)
        return save(fig, plots / f"kyber-grid-{re.sub(r'[^A-Za-z0-9]+', '_', g.workload)}.png")


def _write_through(ctx: RunContext) -> dict[str, Any]:
    return prep.write_through(
        ctx, "ssdsim reloaded write-through (write_buffer_kb=0: a write completes when "
        "its page is programmed), and again before every run, so that every point "
        "starts from the same empty device (no garbage collection left by the points "
        "before it)")


def _unmount(mnt: str) -> str:
    """The command that unmounts @mnt if something is mounted there."""
    # /proc/mounts rather than mountpoint(1), which busybox (the VM) may lack
    return f"! awk -v m={q(mnt)} '$2 == m {{f = 1}} END {{exit !f}}' /proc/mounts || umount {q(mnt)}"


def _fresh_then(then: Callable[[RunContext], None] | None,
                mnt: str | None) -> Callable[[RunContext], None]:
    """A settle step: ssdsim reloaded with its parameters (empty; the file
    system at @mnt unmounted first), then @then."""
    def settle(ctx: RunContext) -> None:
        if mnt is not None:
            ctx.target.run(_unmount(mnt))
        prep.reload_ssdsim(ctx, dict(ctx.device.module_params))
        if then is not None:
            then(ctx)
    return settle


def _on_fs(text: str, directory: str, size: str) -> str:
    """A raw-device job file rewritten for files in @directory."""
    out = []
    for line in text.splitlines():
        if line.startswith("filename="):
            out += [f"directory={directory}", f"size={size}"]
        else:
            out.append(line)
    return "\n".join(out) + "\n"


def _row(c: Cell) -> list[object]:
    s = c.summaries()
    return [s["read_p99_us"].fmt(1e-3, 3), s["read_iops"].fmt(1.0, 0),
            s["write_iops"].fmt(1.0, 0)]


def _us(v: float) -> str:
    return f"{v / 1000:g} ms" if v >= 1000 else f"{v:g} µs"


def _hatch(x: int, y: int) -> Any:
    from matplotlib.patches import Rectangle
    return Rectangle((x - 0.5, y - 0.5), 1, 1, fill=False, hatch="///", edgecolor="0.45",
                     linewidth=0)


SUITE = KyberGrid()
