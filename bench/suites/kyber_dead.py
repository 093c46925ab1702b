"""The dead configuration space of a grid: points that cannot be told apart
from any of their neighbours.

Two points are *indistinguishable* in a metric when either
- Welch's two-sided t-test over their repetitions does not reject equal
  means at the 5% level (critical values of Student's t for the
  Welch-Satterthwaite degrees of freedom, rounded down: conservative), or
- their means differ by at most TOLERANCE (5%) of the larger: a floor for
  what a benchmark of this length can resolve, which is also the rule when
  either point has a single repetition (no spread to test).

A point is *dead* when it is indistinguishable from every grid neighbour
(left, right, above, below) in every metric: moving its targets one step
either way changes nothing measurable.  A region of dead points is the
study's "dead configuration space"."""
from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence

TOLERANCE = 0.05
ALPHA = 0.05

# Student's t, two-sided 5% (0.975 quantile), by degrees of freedom
_T975 = ((1, 12.706), (2, 4.303), (3, 3.182), (4, 2.776), (5, 2.571), (6, 2.447),
         (7, 2.365), (8, 2.306), (9, 2.262), (10, 2.228), (12, 2.179), (15, 2.131),
         (20, 2.086), (30, 2.042), (60, 2.000), (120, 1.980))


def t_critical(df: float) -> float:
    """t(0.975, df) for df rounded down to the table's next lower entry."""
    if df < 1:
        return math.inf
    crit = _T975[0][1]
    for d, t in _T975:
        if df >= d:
            crit = t
    return crit


def indistinguishable(a: Sequence[float], b: Sequence[float],
                      tolerance: float = TOLERANCE) -> bool:
    """Whether samples @a and @b (repetitions of one metric at two points)
    are indistinguishable by the rule in the module's docstring."""
    if not a or not b:
        return True      # nothing measured on one side: nothing to tell apart
    ma, mb = statistics.fmean(a), statistics.fmean(b)
    if abs(ma - mb) <= tolerance * max(abs(ma), abs(mb)):
        return True
    if len(a) < 2 or len(b) < 2:
        return False
    va, vb = statistics.variance(a) / len(a), statistics.variance(b) / len(b)
    se2 = va + vb
    if se2 == 0:
        return False     # no spread at all and means further apart than the floor
    df = se2 ** 2 / ((va ** 2 / (len(a) - 1) if va else 0) + (vb ** 2 / (len(b) - 1) if vb else 0))
    return abs(ma - mb) / math.sqrt(se2) < t_critical(df)


Point = tuple[int, int]   # (read index, write index)


def dead_points(samples: Mapping[Point, Mapping[str, Sequence[float]]],
                tolerance: float = TOLERANCE) -> set[Point]:
    """The dead points of a grid: @samples maps (i, j) to each metric's
    repetitions.  A point with no neighbour measured is not dead (there is
    nothing to compare it with)."""
    dead = set()
    for (i, j), metrics in samples.items():
        nbrs = [p for p in ((i - 1, j), (i + 1, j), (i, j - 1), (i, j + 1)) if p in samples]
        if not nbrs:
            continue
        if all(indistinguishable(metrics.get(m, ()), samples[p].get(m, ()), tolerance)
               for p in nbrs for m in set(metrics) | set(samples[p])):
            dead.add((i, j))
    return dead
