"""A results folder read back: the manifest, each run's labels and fio JSON,
and summaries over repetitions."""
from __future__ import annotations

import json
import math
import statistics
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from bench import fio


class ResultsError(RuntimeError):
    """Not a results folder, or one this version cannot read."""


@dataclass
class Run:
    folder: Path
    rec: dict[str, Any]

    @property
    def phase(self) -> str:
        return str(self.rec["phase"])

    @property
    def key(self) -> str:
        return str(self.rec["key"])

    @property
    def scheduler(self) -> str:
        return str(self.rec["scheduler"])

    @property
    def labels(self) -> dict[str, Any]:
        return dict(self.rec.get("labels", {}))

    @cached_property
    def result(self) -> dict[str, Any]:
        return fio.parse((self.folder / self.rec["json"]).read_text())

    def job(self, name: str, ddir: str | None = None) -> fio.JobStats:
        return fio.job_stats(self.result, name, ddir)

    def jobs(self) -> list[str]:
        return [j["jobname"] for j in self.result["jobs"]]


@dataclass
class Results:
    folder: Path
    manifest: dict[str, Any]
    runs: list[Run] = field(default_factory=list)

    @property
    def suite(self) -> str:
        return str(self.manifest["suite"])

    def where(self, **labels: Any) -> list[Run]:
        return [r for r in self.runs if all(r.labels.get(k) == v for k, v in labels.items())]


def load(folder: str | Path) -> Results:
    """A results folder's manifest and its complete runs (fio exit 0, JSON
    present); a half-written last run of an interrupted session is left out."""
    folder = Path(folder)
    mf = folder / "manifest.json"
    if not mf.is_file():
        raise ResultsError(f"{folder}: not a results folder (no manifest.json)")
    manifest = json.loads(mf.read_text())
    if manifest.get("format") != 1:
        raise ResultsError(f"{folder}: unknown results format {manifest.get('format')!r}")
    runs = []
    for rec in manifest.get("runs", []):
        run = Run(folder, rec)
        if rec.get("rc") != 0:
            continue
        try:
            run.result
        except (OSError, ValueError):
            continue
        runs.append(run)
    return Results(folder, manifest, runs)


@dataclass(frozen=True)
class Summary:
    """Mean, sample standard deviation, median and range over repetitions."""
    n: int
    mean: float
    sd: float
    median: float
    lo: float
    hi: float

    def fmt(self, scale: float = 1.0, digits: int = 1) -> str:
        """'mean ± sd (min–max)', or 'value' for one sample; '–' for none."""
        if self.n == 0:
            return "–"
        m = self.mean * scale
        if self.n == 1:
            return f"{m:.{digits}f}"
        return (f"{m:.{digits}f} ± {self.sd * scale:.{digits}f} "
                f"({self.lo * scale:.{digits}f}–{self.hi * scale:.{digits}f})")

    def as_dict(self) -> dict[str, float]:
        """For summary.json: mean, sd, min, max, n."""
        return {"mean": self.mean, "sd": self.sd, "min": self.lo, "max": self.hi, "n": self.n}

    def fmt_median(self, scale: float = 1.0, digits: int = 3) -> str:
        if self.n == 0:
            return "–"
        m = self.median * scale
        if self.n == 1:
            return f"{m:.{digits}f}"
        return f"{m:.{digits}f} ({self.lo * scale:.{digits}f}–{self.hi * scale:.{digits}f})"


def summarize(values: Iterable[float]) -> Summary:
    v = [float(x) for x in values if x is not None and not math.isnan(float(x))]
    if not v:
        nan = float("nan")
        return Summary(0, nan, nan, nan, nan, nan)
    return Summary(len(v), statistics.fmean(v), statistics.stdev(v) if len(v) > 1 else 0.0,
                   statistics.median(v), min(v), max(v))
