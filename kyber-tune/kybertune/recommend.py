"""The best targets of a measured grid for an objective.

Objectives:
- min-read-p99: the lowest mean read P99, among the points whose mean write
  IOPS are at least --min-write-iops (no constraint without it);
- max-iops: the highest mean read + write IOPS, among the points whose mean
  read P99 is at most --max-read-p99-us;
- max-write-iops: the highest mean write IOPS, among the same (what a
  latency-bound reader leaves a writer).
Kyber's defaults, measured beside the grid, are a candidate too.  The
prediction is the point's mean ± standard deviation over the grid's
repetitions; the points that cannot be told from the best in the objective
(bench.suites.kyber_dead's rule) are listed as alternatives."""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

from bench.results import Summary
from bench.suites import kyber_dead as deadmod
from bench.suites.kyber_grid import Cell, Grid

OBJECTIVES = ("min-read-p99", "max-iops", "max-write-iops")


@dataclass(frozen=True)
class Objective:
    kind: str
    min_write_iops: float | None = None
    max_read_p99_us: float | None = None

    def __post_init__(self) -> None:
        if self.kind not in OBJECTIVES:
            raise ValueError(f"objective {self.kind!r}: one of {', '.join(OBJECTIVES)}")
        if self.kind == "min-read-p99" and self.max_read_p99_us is not None:
            raise ValueError("min-read-p99 takes a write-IOPS floor (--min-write-iops), "
                             "not a read-P99 ceiling")
        if self.kind != "min-read-p99" and self.min_write_iops is not None:
            raise ValueError(f"{self.kind} takes a read-P99 ceiling (--max-read-p99-us), "
                             "not a write-IOPS floor")
        for v in (self.min_write_iops, self.max_read_p99_us):
            if v is not None and not (v >= 0 and math.isfinite(v)):
                raise ValueError(f"objective bound {v}: must be a finite number >= 0")

    def describe(self) -> str:
        if self.kind == "min-read-p99":
            return "minimise read P99" + (f" subject to write IOPS >= {self.min_write_iops:g}"
                                          if self.min_write_iops is not None else "")
        what = "read + write IOPS" if self.kind == "max-iops" else "write IOPS"
        return f"maximise {what}" + (
            f" subject to read P99 <= {self.max_read_p99_us:g} us"
            if self.max_read_p99_us is not None else "")

    def feasible(self, c: Cell) -> bool:
        m = c.means()
        if self.kind == "min-read-p99":
            if math.isnan(m["read_p99_us"]):
                return False
            return self.min_write_iops is None or m["write_iops"] >= self.min_write_iops
        if self.max_read_p99_us is not None and not m["read_p99_us"] <= self.max_read_p99_us:
            return False
        return not math.isnan(self.score(c))

    def score(self, c: Cell) -> float:
        """Larger is better."""
        if self.kind == "min-read-p99":
            return -c.means()["read_p99_us"]
        return _total(c) if self.kind == "max-iops" else c.means()["write_iops"]

    def samples(self, c: Cell) -> list[float]:
        """The objective's repetitions at @c."""
        if self.kind == "min-read-p99":
            return list(c.samples.get("read_p99_us", []))
        if self.kind == "max-write-iops":
            return list(c.samples.get("write_iops", []))
        r, w = c.samples.get("read_iops", []), c.samples.get("write_iops", [])
        if r and w:
            return [a + b for a, b in zip(r, w)]
        return list(r or w)


@dataclass
class Candidate:
    name: str              # "r250-w1000" or "default"
    read_us: float         # device time (sysfs value / time_scale / 1000)
    write_us: float
    cell: Cell

    def predicted(self) -> dict[str, Summary]:
        return self.cell.summaries()


@dataclass
class Recommendation:
    workload: str
    objective: Objective
    best: Candidate | None
    feasible: int
    considered: int
    alternatives: list[Candidate] = field(default_factory=list)
    default: Candidate | None = None

    def as_dict(self) -> dict[str, Any]:
        def cand(c: Candidate | None) -> dict[str, Any] | None:
            if c is None:
                return None
            return {"point": c.name, "read_us": c.read_us, "write_us": c.write_us,
                    "read_lat_nsec": c.cell.read_ns, "write_lat_nsec": c.cell.write_ns,
                    "predicted": {k: v.as_dict() for k, v in c.predicted().items()}}
        return {"workload": self.workload, "objective": self.objective.describe(),
                "feasible": self.feasible, "considered": self.considered,
                "best": cand(self.best), "alternatives": [cand(a) for a in self.alternatives],
                "default": cand(self.default)}

    def text(self) -> str:
        out = [f"{self.workload}: {self.objective.describe()}; "
               f"{self.feasible} of {self.considered} points meet the constraint"]
        if self.best is None:
            out.append("no point meets it: relax the bound or widen the grid")
            return "\n".join(out)
        b = self.best
        out.append(f"best: {b.name}: read_lat_nsec={b.cell.read_ns} "
                   f"write_lat_nsec={b.cell.write_ns}")
        out.append("predicted: " + fmt_figures(b.predicted()))
        if self.default is not None and self.default is not b:
            out.append("Kyber's defaults (read_lat_nsec="
                       f"{self.default.cell.read_ns} write_lat_nsec="
                       f"{self.default.cell.write_ns}): " + fmt_figures(self.default.predicted()))
        if self.alternatives:
            out.append("as good within the spread: "
                       + ", ".join(a.name for a in self.alternatives))
        return "\n".join(out)


def fmt_figures(p: dict[str, Summary]) -> str:
    return (f"read P99 {p['read_p99_us'].fmt(1e-3, 3)} ms, "
            f"read IOPS {p['read_iops'].fmt(1.0, 0)}, write IOPS {p['write_iops'].fmt(1.0, 0)}")


def _total(c: Cell) -> float:
    m = c.means()
    vals = [v for v in (m["read_iops"], m["write_iops"]) if not math.isnan(v)]
    return sum(vals) if vals else math.nan


def candidates(g: Grid, scale: int) -> list[Candidate]:
    out = [Candidate(f"r{g.read_us[i]:g}-w{g.write_us[j]:g}", g.read_us[i], g.write_us[j], c)
           for (i, j), c in sorted(g.cells.items())]
    if g.default is not None:
        out.append(Candidate("default", g.default.read_ns / 1000 / scale,
                             g.default.write_ns / 1000 / scale, g.default))
    return out


def recommend(g: Grid, obj: Objective, scale: int = 1,
              tolerance: float = deadmod.TOLERANCE) -> Recommendation:
    cands = candidates(g, scale)
    ok = [c for c in cands if obj.feasible(c.cell)]
    default = next((c for c in cands if c.name == "default"), None)
    if not ok:
        return Recommendation(g.workload, obj, None, 0, len(cands), default=default)
    best = max(ok, key=lambda c: obj.score(c.cell))
    alts = [c for c in ok if c is not best and deadmod.indistinguishable(
        obj.samples(c.cell), obj.samples(best.cell), tolerance)]
    alts.sort(key=lambda c: -obj.score(c.cell))
    return Recommendation(g.workload, obj, best, len(ok), len(cands), alts, default)


def dumps(recs: list[Recommendation]) -> str:
    return json.dumps([r.as_dict() for r in recs], indent=1)
