"""fio JSON parsing used by the tests and the reports."""
from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from bench import fio

JSONPLUS = Path(__file__).resolve().parents[2] / "bench/tests/fixtures/fio-jsonplus.json"

SAMPLE = {
    "fio version": "fio-3.33",
    "jobs": [
        {"jobname": "rt", "error": 0,
         "read": {"io_bytes": 4096 * 100, "total_ios": 100, "iops": 50.0, "bw": 200.0,
                  "clat_ns": {"percentile": {"99.000000": 2000000, "99.900000": 3500000}},
                  "lat_ns": {"mean": 1500000.0}},
         "write": {"io_bytes": 0, "total_ios": 0, "iops": 0.0, "bw": 0.0}},
        {"jobname": "be", "error": 0,
         "read": {"io_bytes": 8192, "total_ios": 2, "iops": 1.0, "bw": 4.0,
                  "clat_ns": {"percentile": {"99.900000": 10}}, "lat_ns": {"mean": 5.0}},
         "write": {"io_bytes": 40960, "total_ios": 10, "iops": 5.0, "bw": 20.0,
                   "clat_ns": {"percentile": {"99.900000": 7000}}, "lat_ns": {"mean": 6000.0}}},
    ],
}


def test_parse_skips_notices_before_json() -> None:
    text = "fio: note: something\n" + json.dumps(SAMPLE)
    assert fio.parse(text)["jobs"][0]["jobname"] == "rt"


def test_job_stats_and_percentiles_in_us() -> None:
    st = fio.job_stats(SAMPLE, "rt")
    assert st.ios == 100 and st.io_bytes == 409600 and st.iops == 50.0
    assert fio.percentile(st, 99.9) == 3500.0
    assert st.lat_mean_us == 1500.0


def test_total_ios_sums_every_job_of_a_name() -> None:
    two = {"jobs": SAMPLE["jobs"] + [SAMPLE["jobs"][1]]}
    assert fio.job_stats(two, "be").ios == 12  # the first "be" only
    assert fio.total_ios(two, "be") == 24
    assert fio.total_ios(two, "be", ("read",)) == 4
    assert fio.total_ios(two) == 124
    assert fio.total_ios(two, "none") == 0


def test_mixed_job_sums_directions_and_takes_busiest_percentiles() -> None:
    st = fio.job_stats(SAMPLE, "be")
    assert st.ios == 12 and st.io_bytes == 49152 and st.iops == 6.0
    assert fio.percentile(st, 99.9) == 7.0  # from the write side
    assert fio.job_stats(SAMPLE, "be", "read").ios == 2


def test_missing_job_and_percentile_are_errors() -> None:
    with pytest.raises(KeyError, match="no fio job 'nope'"):
        fio.job_stats(SAMPLE, "nope")
    with pytest.raises(KeyError,
                       match=r"fio did not report percentile 50.0 \(have \[99.0, 99.9\]\)"):
        fio.percentile(fio.job_stats(SAMPLE, "rt"), 50.0)
    with pytest.raises(ValueError, match="no JSON object in fio output"):
        fio.parse("no json here")


def test_count_above_agrees_with_fios_percentiles() -> None:
    """At fio's own p-th percentile of a job (bench/tests/fixtures/fio-jsonplus.json),
    at most the (100 - p) % of its I/Os lie above it, and more than that
    just below it; every I/O lies above 0."""
    st = fio.job_stats(fio.parse(JSONPLUS.read_text()), "r4k-0")
    assert fio.count_above(st.clat_bins, 0) == st.ios
    for p, v in st.clat_pct_us.items():
        if p >= 100:
            continue
        tail = (100 - p) / 100 * st.ios
        assert fio.count_above(st.clat_bins, v) <= tail
        below = max(k for k in st.clat_bins if k / 1000 < v) / 1000
        assert fio.count_above(st.clat_bins, below) > tail or p <= 0


def test_tail_allowance_is_the_binomial_quantile() -> None:
    """The smallest k with P(Binomial(n, q) > k) <= alpha, checked against
    sums of the binomial terms; 1000 I/Os at a true p99.9: Poisson(1)
    gives P(> 3) = 0.019 and P(> 4) = 0.0037."""
    assert fio.tail_allowance(1000, 99.9) == 4
    assert fio.tail_allowance(1000, 99.9, alpha=0.02) == 3
    assert fio.tail_allowance(0, 99.9) == 0
    for n, p, alpha in ((200, 99.0, 0.05), (2700, 99.9, 0.01), (50, 90.0, 0.001)):
        q = 1 - p / 100
        k = fio.tail_allowance(n, p, alpha)

        def above(j: int) -> float:
            return 1 - sum(math.comb(n, i) * q ** i * (1 - q) ** (n - i) for i in range(j + 1))
        assert above(k) <= alpha < (above(k - 1) if k else 1.0)
    for bad in ((100, 100.0, 0.01), (100, 99.9, 0.0), (-1, 99.9, 0.01)):
        with pytest.raises(ValueError, match="tail_allowance"):
            fio.tail_allowance(*bad)
