"""K2's objective selection and the 'falls as the bound falls' finding."""
from __future__ import annotations

import pytest

from bench.suites.k2 import Point, falls_with_bound, select, spearman, trend_verdict

NONE = Point(0, p999_us=10_000.0, bw_kib=100_000.0)
# p99.9 and bandwidth both grow with the bound, as in the paper's figures
CURVE = [Point(1, 1_000, 40_000), Point(2, 2_000, 60_000), Point(4, 3_000, 75_000),
         Point(8, 4_500, 82_000), Point(16, 6_000, 90_000), Point(32, 8_000, 97_000),
         Point(64, 9_800, 99_000)]


def test_o1_o2_on_the_paper_shape() -> None:
    s = select(NONE, CURVE, alpha=50, beta=80)
    assert s.o1 == 8        # 4.5 ms <= 5 ms; 16 has 6 ms
    assert s.o2 == 8        # 82 MB/s >= 80; 4 has 75
    assert s.both == [8]


def test_thresholds_are_inclusive_and_can_be_unmet() -> None:
    s = select(NONE, CURVE, alpha=30, beta=90)
    assert s.o1 == 4        # 3 ms == 30 % of 10 ms
    assert s.o2 == 16       # 90 == 90 %
    assert s.both == []
    s = select(NONE, CURVE, alpha=5, beta=100)
    assert s.o1 is None and s.o2 is None and s.both == []


def test_selection_does_not_assume_monotone_curves() -> None:
    bumpy = [Point(1, 2_000, 85_000), Point(2, 7_000, 50_000), Point(4, 4_000, 81_000)]
    s = select(NONE, bumpy, alpha=50, beta=80)
    assert s.o1 == 4 and s.o2 == 1 and s.both == [1, 4]


def test_spearman() -> None:
    assert spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    assert spearman([1, 2, 3], [5, 5, 5]) == 0.0


def test_falls_with_bound() -> None:
    assert falls_with_bound(CURVE)
    assert falls_with_bound([Point(64, 9_000, 1), Point(1, 1_000, 1)])
    assert not falls_with_bound([Point(1, 9_000, 1), Point(64, 1_000, 1)])
    assert not falls_with_bound([Point(1, 1_000, 1)])
    # lower at 1 than at 64, but the middle goes the other way: no trend
    assert not falls_with_bound([Point(1, 5_000, 1), Point(2, 9_000, 1), Point(4, 8_000, 1),
                                 Point(8, 3_000, 1), Point(64, 5_100, 1)])


def test_trend_verdict_needs_separated_ranges_with_repetitions() -> None:
    pts = [Point(1, 5_000, 1), Point(64, 9_000, 1)]
    assert trend_verdict(pts, [4_000, 6_000], [8_000, 10_000]) == "yes"
    assert trend_verdict(pts, [1_000, 9_000], [8_000, 10_000]) == "unclear (ranges overlap)"
    assert trend_verdict(pts, [5_000], [9_000]) == "yes"      # one run each: the means
    assert trend_verdict(list(reversed([Point(1, 9_000, 1), Point(64, 5_000, 1)])),
                         [9_000], [5_000]) == "no"


def test_adaptive_point_against_the_frontier() -> None:
    """An adaptive point is on or beyond the fixed bounds' frontier unless
    some fixed bound has both a lower RT p99.9 and a higher bandwidth."""
    from bench.suites.k2 import dominating
    fixed = [Point(1, 10_000, 50), Point(4, 30_000, 80), Point(16, 90_000, 100)]
    assert dominating(Point(0, 25_000, 70), fixed) == []      # between 1 and 4
    assert dominating(Point(0, 30_000, 80), fixed) == []      # as good as bound 4
    assert dominating(Point(0, 40_000, 70), fixed) == [4]     # 4 beats it on both
    assert dominating(Point(0, 95_000, 40), fixed) == [1, 4, 16]


def test_domination_beyond_the_spread_of_repetitions() -> None:
    """A bound dominates beyond the spread only if it beats every adaptive
    run in every run of its own, on both RT p99.9 and bandwidth; with one
    run on either side, the means decide."""
    from bench.suites.k2 import beyond_spread

    def runs(*pairs: tuple[float, float]) -> list[dict[str, float]]:
        return [{"p999_us": p, "bw_kib": b} for p, b in pairs]
    ad = runs((30_000, 70), (34_000, 72))
    by_bound = {2: runs((25_000, 80), (28_000, 82)),      # clearly better on both
                4: runs((20_000, 75), (31_000, 90)),      # p99.9 ranges overlap
                8: runs((25_000, 71), (26_000, 90)),      # bandwidth ranges overlap
                16: runs((20_000, 90))}                   # one run: its mean decides
    assert beyond_spread(ad, by_bound, [2, 4, 8, 16]) == [2, 16]
    assert beyond_spread(ad[:1], by_bound, [4, 8]) == [4, 8]
    assert beyond_spread(ad, by_bound, []) == []
