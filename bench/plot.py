"""The reports' plots (PNG files beside report.md): matplotlib, off-screen,
and the suites' common figures.  Below bench.report, so that the suites
(which bench.report calls) and kyber-tune draw with it."""
from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from bench import results as resmod  # noqa: E402


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
