"""fio JSON output: the numbers the tests and the reports need."""
from __future__ import annotations

import json
from dataclasses import dataclass
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


def parse(text: str) -> dict[str, Any]:
    """fio's JSON output; fio may print notices before the JSON object."""
    start = text.find("{")
    if start < 0:
        raise ValueError("no JSON object in fio output")
    return json.loads(text[start:])  # type: ignore[no-any-return]


def _dirs(job: dict[str, Any], ddir: str | None) -> list[dict[str, Any]]:
    names = ("read", "write", "trim") if ddir is None else (ddir,)
    return [job[d] for d in names if d in job and job[d].get("total_ios", 0) > 0]


def job_stats(result: dict[str, Any], name: str, ddir: str | None = None) -> JobStats:
    """Statistics of the job called @name (reads and writes, or only @ddir).

    Percentiles of a mixed job are taken from its busiest direction."""
    jobs = [j for j in result["jobs"] if j["jobname"] == name]
    if not jobs:
        raise KeyError(f"no fio job {name!r}")
    job = jobs[0]
    dirs = _dirs(job, ddir)
    pct: dict[float, float] = {}
    mean = 0.0
    if dirs:
        main = max(dirs, key=lambda d: d.get("total_ios", 0))
        for k, v in main.get("clat_ns", {}).get("percentile", {}).items():
            pct[float(k)] = v / 1000.0
        mean = main.get("lat_ns", {}).get("mean", 0.0) / 1000.0
    return JobStats(
        name=name,
        error=int(job.get("error", 0)),
        io_bytes=sum(int(d["io_bytes"]) for d in dirs),
        ios=sum(int(d["total_ios"]) for d in dirs),
        iops=sum(float(d["iops"]) for d in dirs),
        bw_kib=sum(float(d["bw"]) for d in dirs),
        clat_pct_us=pct,
        lat_mean_us=mean,
    )


def percentile(stats: JobStats, p: float) -> float:
    """The completion-latency percentile @p in us (fio must have reported it)."""
    for k, v in stats.clat_pct_us.items():
        if abs(k - p) < 1e-6:
            return v
    raise KeyError(f"fio did not report percentile {p} (have {sorted(stats.clat_pct_us)})")
