"""Where test_bench's adaptive-vs-select test sets its target: pure, so that
tests/python checks the choice on the sweeps that CI measured; and the
ssdsim time scale of both adaptive VM tests (test_bench's, test_k2's)."""
from __future__ import annotations

import itertools

SWEEP = (1, 2, 4, 8, 16, 32)
# ssdsim's time_scale for the adaptive tests: fast enough that a run holds
# thousands of real-time reads, and bound 1's RT p99.9 (6-13 ms) far from
# 32's (48-62 ms) and none's (125-184 ms), measured on all three kernels
ADAPTIVE_TIME_SCALE = 50
TARGET_OF_UPPER = 0.95       # the target, of the gap's upper bound's p99.9
FLOOR_TIMES = 2.5            # the target, at least, of bound 1's p99.9
WIDE = 1.5                   # a wide gap: the upper bound's p99.9, of the lower's
GAINS = 1.1                  # a gap's upper bound's bandwidth, at least, of the lower's


def gap_for_target(p999: dict[int, float], bw: dict[int, float]) -> tuple[int, int, int]:
    """The two neighbouring bounds of SWEEP between which the target goes,
    and the target (in the unit of @p999), TARGET_OF_UPPER of the upper
    bound's p99.9 or of a larger bound's if that is shorter (tail_ceiling()).

    The p99.9s are first made monotonic (each bound's is at least the
    largest of the bounds below it, tail_floor()): a larger bound cannot
    have a shorter tail than a smaller one, and a short run's p99.9 is near
    its largest sample: where one measured shorter, that was the host's
    noise, and a target set from it would sit on the floor of that noise.

    The target is taken below every measured p99.9 from the upper bound
    up (tail_ceiling()), so that `bench select` picks a bound below the
    upper one: were a larger bound's p99.9 to come out under the target,
    select could pick the largest bound, which adaptive K2 (up to 32)
    cannot out-deliver.

    The candidate gaps are those whose target is clear of the floor, at
    least FLOOR_TIMES bound 1's p99.9; without one, the highest gap.  Bound
    1's p99.9 is that floor: one request's device time and what the host
    adds to fio's latencies, not to K2's estimate; at FLOOR_TIMES bound 1's
    p99.9 what the host adds is a small part of the target.

    Of the candidates, the wide ones (upper p99.9 at least WIDE the lower's,
    so that the target falls clearly above the lower one's, whatever the
    noise) compete on the bandwidth the device gains from the lower bound to
    the upper; without a wide one, the gap with the largest ratio of p99.9s
    wins, the one that leaves the controller the most room above the lower
    bound.

    Only gaps whose upper bound delivered GAINS times the lower's bandwidth
    or more take part (all of them if none did): `bench select` picks the
    lower bound, and where the device gives no more above it, no bound
    adaptive K2 can choose out-delivers it.  git log of this file has the
    sweeps that led to each rule."""
    f, c = tail_floor(p999), tail_ceiling(p999)
    gaps = list(zip(SWEEP, SWEEP[1:]))
    gaps = [(lo, hi) for lo, hi in gaps if bw[hi] >= GAINS * bw[lo]] or gaps
    clear = [(lo, hi) for lo, hi in gaps if TARGET_OF_UPPER * c[hi] >= FLOOR_TIMES * f[1]]
    candidates = clear or gaps[-1:]
    wide = [(lo, hi) for lo, hi in candidates if c[hi] >= WIDE * f[lo]]
    if wide:
        lo, hi = max(wide, key=lambda g: bw[g[1]] / bw[g[0]])
    else:
        lo, hi = max(candidates, key=lambda g: c[g[1]] / f[g[0]])
    return lo, hi, int(TARGET_OF_UPPER * c[hi])


def tail_floor(p999: dict[int, float]) -> dict[int, float]:
    """Each bound of SWEEP's RT p99.9, or the largest of a smaller bound's."""
    return dict(zip(SWEEP, itertools.accumulate((p999[b] for b in SWEEP), max)))


def tail_ceiling(p999: dict[int, float]) -> dict[int, float]:
    """Each bound of SWEEP's RT p99.9, or the smallest of a larger bound's:
    a target below it is below every bound's from there up."""
    top = list(itertools.accumulate((p999[b] for b in reversed(SWEEP)), min))
    return dict(zip(SWEEP, reversed(top)))
