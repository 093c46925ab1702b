"""fio JSON output: the numbers the tests and the reports need."""
from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class JobStats:
    """One fio job (or group) summed over reads and writes."""
    name: str
    error: int
    io_bytes: int
    ios: int
    iops: float
    bw_kib: float
    clat_pct_us: dict[float, float]  # completion-latency percentile -> us
    lat_mean_us: float
    clat_mean_us: float = 0.0
    #: completion-latency histogram, bin value in ns -> I/Os (only with
    #: fio --output-format=json+)
    clat_bins: dict[int, int] = field(default_factory=dict)


def parse(text: str) -> dict[str, Any]:
    """fio's JSON output; fio may print notices before the JSON object."""
    start = text.find("{")
    if start < 0:
        raise ValueError("no JSON object in fio output")
    return json.loads(text[start:])  # type: ignore[no-any-return]


def _dirs(job: dict[str, Any], ddir: str | None) -> list[dict[str, Any]]:
    names = ("read", "write", "trim") if ddir is None else (ddir,)
    return [job[d] for d in names if d in job and job[d].get("total_ios", 0) > 0]


def total_ios(result: dict[str, Any], name: str | None = None,
              ddirs: Iterable[str] = ("read", "write", "trim")) -> int:
    """I/Os completed by every job called @name (every job when None), in
    @ddirs: job_stats() reads the first job of a name only, and numjobs=N
    gives N of them."""
    dd = tuple(ddirs)
    return sum(int(j.get(d, {}).get("total_ios", 0)) for j in result["jobs"]
               if name is None or j["jobname"] == name for d in dd)


def job_stats(result: dict[str, Any], name: str, ddir: str | None = None) -> JobStats:
    """Statistics of the job called @name (reads and writes, or only @ddir).

    Percentiles of a mixed job are taken from its busiest direction."""
    jobs = [j for j in result["jobs"] if j["jobname"] == name]
    if not jobs:
        raise KeyError(f"no fio job {name!r}")
    job = jobs[0]
    dirs = _dirs(job, ddir)
    pct: dict[float, float] = {}
    bins: dict[int, int] = {}
    mean = cmean = 0.0
    if dirs:
        main = max(dirs, key=lambda d: d.get("total_ios", 0))
        clat = main.get("clat_ns", {})
        for k, v in clat.get("percentile", {}).items():
            pct[float(k)] = v / 1000.0
        bins = {int(k): int(v) for k, v in clat.get("bins", {}).items()}
        mean = main.get("lat_ns", {}).get("mean", 0.0) / 1000.0
        cmean = clat.get("mean", 0.0) / 1000.0
    return JobStats(
        name=name,
        error=int(job.get("error", 0)),
        io_bytes=sum(int(d["io_bytes"]) for d in dirs),
        ios=sum(int(d["total_ios"]) for d in dirs),
        iops=sum(float(d["iops"]) for d in dirs),
        bw_kib=sum(float(d["bw"]) for d in dirs),
        clat_pct_us=pct,
        lat_mean_us=mean,
        clat_mean_us=cmean,
        clat_bins=bins,
    )


def percentile(stats: JobStats, p: float) -> float:
    """The completion-latency percentile @p in us (fio must have reported it)."""
    for k, v in stats.clat_pct_us.items():
        if abs(k - p) < 1e-6:
            return v
    raise KeyError(f"fio did not report percentile {p} (have {sorted(stats.clat_pct_us)})")


def merge_bins(hists: Iterable[Mapping[int, int]]) -> dict[int, int]:
    """One histogram from several jobs' clat_bins."""
    out: dict[int, int] = {}
    for h in hists:
        for k, v in h.items():
            out[k] = out.get(k, 0) + v
    return out


def hist_percentile(bins: Mapping[int, int], p: float) -> float:
    """The percentile @p in us of a clat_bins histogram, as fio computes its
    own: the first bin at which the running count reaches p % of the I/Os."""
    total = sum(bins.values())
    if not total:
        raise ValueError("empty latency histogram")
    run = 0
    for k in sorted(bins):
        run += bins[k]
        if run >= p / 100.0 * total:
            return k / 1000.0
    return max(bins) / 1000.0


def count_above(bins: Mapping[int, int], us: float) -> int:
    """The I/Os of a clat_bins histogram whose latency fio put above @us
    (each bin counted at its value, as fio's own percentiles are)."""
    return sum(v for k, v in bins.items() if k / 1000.0 > us)


def tail_allowance(ios: int, p: float, alpha: float = 0.01) -> int:
    """The most I/Os of @ios that may lie above a latency whose true
    percentile is @p (each I/O above it with probability 1 - p/100) before
    that is less likely than @alpha: the smallest k with
    P(Binomial(ios, 1 - p/100) > k) <= alpha.  A test of "the p-th
    percentile is at most L" that allows this many I/Os above L fails a
    device exactly at L with probability alpha at most; the p-th sample
    percentile itself allows ios x (1 - p/100) and fails it about half the
    time."""
    q = 1.0 - p / 100.0
    if not 0.0 < q < 1.0 or not 0.0 < alpha < 1.0 or ios < 0:
        raise ValueError(f"tail_allowance({ios}, {p}, {alpha})")
    cdf, k = 0.0, 0
    while True:
        cdf += math.comb(ios, k) * q ** k * (1.0 - q) ** (ios - k)
        if 1.0 - cdf <= alpha or k >= ios:
            return k
        k += 1


def merged_percentile(stats: Iterable[JobStats], p: float) -> float:
    """The completion-latency percentile @p in us over several jobs (or one
    job's directions, job_stats with ddir): from their merged histograms
    (fio json+); without them, the largest of their own; NaN when none of
    them completed an I/O."""
    done = [s for s in stats if s.ios]
    if not done:
        return float("nan")
    if all(s.clat_bins for s in done):
        return hist_percentile(merge_bins(s.clat_bins for s in done), p)
    return max(percentile(s, p) for s in done)
