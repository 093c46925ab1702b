"""tests/vm/adaptive_target.py: where the adaptive-vs-select VM test sets
its target, on sweeps measured in CI and here (RT p99.9 in microseconds)."""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "vm"))

from adaptive_target import SWEEP, gap_for_target, tail_ceiling, tail_floor  # noqa: E402

BW = {1: 1.08, 2: 1.91, 4: 3.50, 8: 5.18, 16: 7.22, 32: 9.04}   # MiB/s, 6.12


def test_a_wide_gap_clear_of_the_floor() -> None:
    # 6.12, two busy loops beside the guest
    p = {1: 16_200, 2: 16_300, 4: 16_200, 8: 24_500, 16: 32_400, 32: 60_600}
    assert gap_for_target(p, BW) == (16, 32, int(0.95 * 60_600))


def test_of_the_wide_gaps_the_one_with_the_most_bandwidth_gained() -> None:
    p = {1: 5_000, 2: 5_500, 4: 6_000, 8: 12_000, 16: 22_000, 32: 40_000}
    # 4-8 (2x the p99.9, but its target is below 2.5x bound 1's) is not
    # clear; 8-16 (1.83x) gains 1.39x the bandwidth, 16-32 (1.82x) 1.25x
    assert gap_for_target(p, BW)[:2] == (8, 16)


def test_without_a_wide_gap_the_largest_ratio_of_tails() -> None:
    # CI on 6.12 (bounds 1-8 as measured; 16 and 32 cut from the log):
    # no two neighbours 1.5x apart; the old choice stopped the test there
    p = {1: 14_483, 2: 15_401, 4: 22_151, 8: 27_918, 16: 39_000, 32: 52_000}
    # clear of the floor (2.5 x 14.5 ms): 8-16 (1.40x) and 16-32 (1.33x)
    assert gap_for_target(p, BW) == (8, 16, int(0.95 * 39_000))


def test_without_a_clear_gap_the_highest() -> None:
    p = {1: 20_000, 2: 22_000, 4: 24_000, 8: 30_000, 16: 35_000, 32: 45_000}
    assert gap_for_target(p, BW) == (16, 32, int(0.95 * 45_000))


def test_a_tail_shorter_than_a_smaller_bound_is_noise() -> None:
    # CI: 11.9 ms for bound 4 against bound 1's 15.4
    p = {1: 15_400, 2: 14_000, 4: 11_900, 8: 30_000, 16: 50_000, 32: 80_000}
    assert list(tail_floor(p).values()) == [15_400, 15_400, 15_400, 30_000, 50_000, 80_000]
    # 4-8 is wide only once floored, and its target is below 2.5x bound 1's
    assert gap_for_target(p, BW)[:2] == (8, 16)


def test_a_larger_bound_shorter_than_the_gap_keeps_the_pick_below_the_top() -> None:
    """Where a larger bound measured a shorter tail than the gap's upper
    bound, the target goes below that one too: `bench select` (the largest
    bound whose p99.9 is within the target) then picks the gap's lower
    bound, not 32, which adaptive K2 (up to 32) could not out-deliver."""
    p = {1: 10_000, 2: 11_000, 4: 14_000, 8: 20_000, 16: 64_000, 32: 60_000}
    assert list(tail_ceiling(p).values()) == [10_000, 11_000, 14_000, 20_000, 60_000, 60_000]
    lo, hi, target = gap_for_target(p, BW)
    assert (lo, hi) == (8, 16) and target == int(0.95 * 60_000)
    assert max(b for b in SWEEP if p[b] <= target) == 8


def test_a_gap_whose_upper_bound_buys_no_bandwidth_is_no_candidate() -> None:
    """6.1, here: bound 1's p99.9 high (no gap clear of the floor), and
    bound 32 delivered less than 16: the highest gap that gains is 8-16,
    and `bench select` then picks 8, below the device's peak."""
    p = {1: 19_500, 2: 13_600, 4: 17_200, 8: 27_400, 16: 35_900, 32: 42_200}
    bw = {1: 1.08, 2: 1.98, 4: 3.43, 8: 5.28, 16: 7.46, 32: 7.05}
    lo, hi, target = gap_for_target(p, bw)
    assert (lo, hi, target) == (8, 16, int(0.95 * 35_900))
    assert max(b for b in SWEEP if p[b] <= target) == 8
