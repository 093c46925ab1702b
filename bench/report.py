"""report.md (and summary.json, PNG plots) from a results folder.

The common header says what was measured where (device, model, kernel,
target, ssdsim's time_scale, parameters, seed); each suite writes its own
tables and plots below it (bench/suites/<suite>.py: report())."""
from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from bench import results as resmod  # noqa: E402
from bench.markdown import table  # noqa: E402  (the suites' and kyber-tune's table)
from bench.results import Results  # noqa: E402
from bench.trace import report_section as trace_section  # noqa: E402


K = TypeVar("K", str, int)


def ordered(keys: Iterable[K], ref: Collection[K]) -> list[K]:
    """@keys in @ref's order (the order a suite names its schedulers,
    operations, ...), then those @ref lacks, sorted."""
    have = set(keys)
    return [k for k in ref if k in have] + sorted(k for k in have if k not in ref)


def figure(ncols: int = 1, nrows: int = 1, width: float = 5.2, height: float = 3.6
           ) -> tuple[Figure, Any]:
    fig, axes = plt.subplots(nrows, ncols, figsize=(width * ncols, height * nrows),
                             squeeze=False)
    return fig, axes


def grouped_bars(ax: Any, groups: Sequence[str],
                 series: Sequence[tuple[str, Sequence[resmod.Summary]]],
                 median: bool = False) -> list[float]:
    """Bars in groups along x (@groups), one bar per series in each group:
    the mean (or median) of its Summary, with the min–max range as error
    bar; no bar where a Summary is empty.  The bar heights."""
    width = 0.8 / max(1, len(series))
    heights: list[float] = []
    for k, (name, sums) in enumerate(series):
        xs, ys, lo, hi = [], [], [], []
        for i, sm in enumerate(sums):
            if sm.n == 0:
                continue
            c = sm.median if median else sm.mean
            xs.append(i + (k - (len(series) - 1) / 2) * width)
            ys.append(c)
            lo.append(c - sm.lo)
            hi.append(sm.hi - c)
        ax.bar(xs, ys, width=width, yerr=[lo, hi], capsize=3, label=name)
        heights += ys
    ax.set_xticks(list(range(len(groups))))
    ax.set_xticklabels(list(groups))
    return heights


def summary_lines(ax: Any, xs: Sequence[float],
                  series: Sequence[tuple[str, Sequence[resmod.Summary]]],
                  scale: float = 1.0) -> list[float]:
    """A line per series through the means of its Summaries at @xs, with
    the min–max range as error bars; no point where a Summary is empty.
    The values plotted."""
    plotted: list[float] = []
    for name, sums in series:
        pts = [(x, sm) for x, sm in zip(xs, sums) if sm.n]
        if not pts:
            continue
        ys = [sm.mean * scale for _, sm in pts]
        ax.errorbar([x for x, _ in pts], ys, capsize=3, marker="o", label=name,
                    yerr=[[(sm.mean - sm.lo) * scale for _, sm in pts],
                          [(sm.hi - sm.mean) * scale for _, sm in pts]])
        plotted += ys
    return plotted


def save(fig: Figure, path: Path) -> str:
    """Write a PNG next to report.md; the relative path for a Markdown link."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path.name if path.parent.name == "" else f"{path.parent.name}/{path.name}"


def human_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"


def device_line(m: dict[str, Any]) -> str:
    d = m["device"]
    s = f"`{d['path']}`"
    if d.get("given") and d["given"] not in (d["path"], d["name"]):
        s += f" (given as `{d['given']}`)"
    s += f": {d['model']}, {human_bytes(d['size_bytes'])}"
    s += f", {d['hw_queues']} hardware queue(s) of depth {d['hw_depth']}"
    return s


def header(res: Results, title: str) -> str:
    m = res.manifest
    t = m["target"]
    d = m["device"]
    p = m["params"]
    out = [f"# {title}\n"]
    rows: list[tuple[str, str]] = [
        ("Device", device_line(m)),
        ("Kernel", f"`{t.get('kernel', '?')}`"),
        ("Target", f"{t.get('kind', '?')}, {t.get('cpus', '?')} CPU(s)"
                   + (f" ({t['cpu_model']})" if t.get("cpu_model") else "")
                   + f", {t.get('fio', 'fio ?')}"),
    ]
    if d.get("kind") == "ssdsim":
        mp = d.get("module_params", {})
        rows.append(("ssdsim", f"time_scale = {mp.get('time_scale', '?')}; parameters: "
                     + ", ".join(f"{k}={v}" for k, v in sorted(mp.items()))))
    elif d.get("kind") == "null_blk":
        mp = d.get("module_params", {})
        rows.append(("null_blk", ", ".join(f"{k}={v}" for k, v in sorted(mp.items())
                                           if k in NULL_BLK_SHOWN)))
    for k, v in t.items():
        if k.startswith("note"):
            rows.append(("Note", str(v)))
    rows += [
        ("Runs", f"{len(res.runs)} of {len(_nruns(m))} planned, "
                 f"status **{m.get('status', '?')}**; {p['reps']} repetition(s), "
                 f"{p['runtime']:g} s each after a {p['ramp']:g} s ramp; ioengine {p['ioengine']}"),
        ("Order", f"configurations in random order, seed {p['seed']}"),
        *trace_rows(p),
        ("When", f"{m.get('created', '?')} – {m.get('finished', '?')}"),
        ("Command", f"`{' '.join(m.get('command', []))}`"),
    ]
    out.append(table(["", ""], rows, "ll"))
    notes = list(m.get("notes", []))
    for name, ph in m.get("phases", {}).items():
        if ph.get("note"):
            notes.append(f"phase {name}: {ph['note']}")
    if notes:
        out.append("\nNotes:\n\n" + "".join(f"- {n}\n" for n in notes))
    if m.get("status") != "complete":
        out.append(f"\n**This run is {m.get('status')}**"
                   + (f": {m['error']}" if m.get("error") else "")
                   + "; the tables below hold what completed.\n")
    return "\n".join(out)


def trace_rows(p: dict[str, Any]) -> list[tuple[str, str]]:
    tr = p.get("trace")
    if not tr:
        return []
    what = ("every run, kept beside it" if tr.get("saved") else
            "only in the configurations that ask for them, kept beside their runs"
            if tr.get("kept") else "only in the runs that measure tracing's cost, not kept")
    return [("Tracing", f"{tr['tracer']}, {tr.get('buffer_kb_per_cpu')} KiB per CPU"
             + (f", clock {tr['clock']}" if tr.get("clock") else "")
             + f"; events {', '.join(tr.get('events', []))}; {what}")]


NULL_BLK_SHOWN = {"queue_mode", "irqmode", "completion_nsec", "submit_queues",
                  "hw_queue_depth", "bs", "blocksize", "gb", "memory_backed"}


def _nruns(m: dict[str, Any]) -> list[str]:
    return [k for _, _, block in m.get("order", []) for k in block]


def write(folder: str | Path) -> Path:
    """Write report.md, summary.json and plots/*.png into a results folder."""
    from bench.suites import get as get_suite
    res = resmod.load(folder)
    try:
        suite = get_suite(res.suite)
    except KeyError as e:
        raise resmod.ResultsError(f"{folder}: {e.args[0]}") from e
    plots = res.folder / "plots"
    plots.mkdir(exist_ok=True)
    for old in plots.glob("*.png"):
        old.unlink()
    rep = suite.report(res, plots)
    traces, trace_summary = trace_section(res)
    text = header(res, f"{suite.title}") + "\n" + rep.body + traces
    text += ("\n## Files\n\n`manifest.json` (parameters, order, one record per run), "
             "`runs/NNN-*.fio` (the exact job files), `runs/NNN-*.json` (fio's output), "
             + ("`runs/NNN-*.trace.txt.gz` or `runs/NNN-*.lttng/` (the traces), "
                if trace_summary else "")
             + "`plots/`.\n")
    summary = {**rep.summary, **({"traces": trace_summary} if trace_summary else {})}
    path = res.folder / "report.md"
    path.write_text(text)
    (res.folder / "summary.json").write_text(json.dumps(summary, indent=1, sort_keys=True)
                                             + "\n")
    (res.folder / "headline.md").write_text(rep.headline)
    return path
