"""What cars needs to know of a drive that publishes nothing, measured with
fio under `none` (`python3 -m bench calibrate cars --device DEV` on any
device but ssdsim, or with --probe on ssdsim too).

Four steps, each printed with what it found:

1. **Fill.** The region probed, the device's first REGION_MIB MiB (at
   most half of it), is written in order: a real drive serves reads of
   unwritten blocks without touching flash, and stripes what is written in
   order over its dies.
2. **Parallelism and read_us.** 4 KiB random reads at iodepth 1, 2, 4, ...
   until a doubling gains less than KNEE_GAIN (or at MAX_DEPTH).  A die
   serves one read at a time for a fixed time; the host's own time per
   request (submission, completion) overlaps other requests' once several
   are in flight.  The fit's dies are those whose simulation
   (closed_rate(), with the host's time) fits IOPS by depth best in the
   least-squares sense of their logarithms.  read_us is read_time(): the
   least over the depths of the latency per request in flight on a busy
   die (Little's law), where the host's time hides most.  KNEE_GAIN: with
   fixed times a doubling gains less than 1.1 only from about 8 x nr_dies
   requests on, where IOPS are within 6 % of the device's most, and 1.1
   is about the noise of two short runs' ratio.
3. **The die of a page.** Pairs of 4 KiB reads issued together (iodepth
   2, submitted and reaped as a pair), one pair at a time, at a stride
   apart: a pair whose two pages share a die takes about twice one read
   (their median latency against depth 1's mean).
   Strides of 4 to 128 KiB find the page (two reads in one page share its
   die: page_kb is the first stride whose pairs do not), strides of 1 to
   2 x nr_dies pages the striping period (the first that conflicts
   again, the one whose multiples match the conflicts best).  Static
   striping (die = page mod dies) holds when they match at nine strides in
   ten, and then the period is nr_dies (the fit's otherwise); depth is
   nr_dies.
   Before the writes, which move pages.
4. **write_us and the write buffer.** 4 KiB random writes at iodepth
   4 x nr_dies, fio's IOPS logged every LOG_MS: once a DRAM write buffer
   is full, writes complete as fast as the dies program them, and the
   count of writes completed runs on a line whose intercept is what the
   buffer took ahead of the dies (write_step()).  write_us is the dies
   programming at once (nr_dies, or fewer when the buffer holds fewer
   writes: it caps the programs in flight) over the sustained IOPS: a
   die's time per program, its transfer included.  Latency at iodepth 1
   equals it only without a buffer.

Not found, and left as cars has them: erase_us, the mapping cache
(cmt_regions) and the write pointer.
"""
from __future__ import annotations

import heapq
import math
import random
import statistics
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, TextIO

from bench import fio
from bench.runner import RunError, check_fio, run_fio
from bench.target import Target

#: a doubling of the depth that gains less than this ends the depth sweep
KNEE_GAIN = 1.1
#: the deepest iodepth the sweep tries
MAX_DEPTH = 256
#: the region probed, MiB (at most half the device)
REGION_MIB = 16
#: fio's log window for the write run, ms
LOG_MS = 10
#: a pair of reads this many times one read's latency shares a die
CONFLICT_RATIO = 1.4
#: pairs of reads per stride
PAIRS = 24
#: the share of strides that must match the period's multiples for static
#: striping (one stride in ten may be a host hiccup)
STATIC_AGREE = 0.9
#: cars-core.h's CARS_MAX_OP_US, CARS_MAX_HOLD_US, CARS_MAX_DEPTH and
#: CARS_MAX_DIES, and the range of page_kb
CARS_MAX_OP_US = 10_000_000
CARS_MAX_HOLD_US = 1_000_000
CARS_MAX_DEPTH = 1024
CARS_MAX_DIES = 255
CARS_PAGE_KB = (1, 64)
#: the strides that find the page, KiB (cars's page_kb is at most
#: CARS_PAGE_KB[1]: 128 is there for a stride whose pages are on two dies)
PAGE_STRIDES_KB = (4, 8, 16, 32, 64, 128)


@dataclass(frozen=True)
class DepthPoint:
    depth: int
    iops: float
    clat_mean_us: float


@dataclass(frozen=True)
class WriteRun:
    """fio's IOPS log of the write run: (end of window in s, IOPS) pairs."""
    iops: list[tuple[float, float]]


@dataclass(frozen=True)
class WriteStep:
    sustained_iops: float
    step_s: float | None        # when the buffer was full (None: no buffer found)
    buffered: float             # 4 KiB writes the buffer held (0: none found)

    def programming(self, dies: int) -> int:
        """Dies programming at once at the sustained rate: a buffer of
        fewer writes than dies keeps no more programs in flight."""
        return max(1, min(dies, round(self.buffered))) if self.step_s is not None else dies


@dataclass(frozen=True)
class Striping:
    page_kb: int | None         # None: not found (every stride shared a die)
    period: int | None          # pages; None: no stride conflicted
    static: bool                # exactly the multiples of the period conflicted
    conflicts: dict[int, bool] = field(default_factory=dict)  # stride KiB -> shared a die


@dataclass(frozen=True)
class ProbeResult:
    depths: list[DepthPoint]
    nr_dies: int
    read_us: float
    write: WriteStep
    write_us: float
    striping: Striping

    def tunables(self) -> dict[str, int]:
        """cars's tunables, in the order calibrate writes them."""
        out = {"nr_dies": self.nr_dies}
        if self.striping.page_kb is not None:
            out["page_kb"] = self.striping.page_kb
        out["read_us"] = max(1, min(CARS_MAX_OP_US, round(self.read_us)))
        out["write_us"] = max(1, min(CARS_MAX_OP_US, round(self.write_us)))
        out["depth"] = self.nr_dies
        out["max_hold_us"] = min(1_000_000, out["write_us"])
        return out


# ---------------------------------------------------------------------------
# the models, pure


@lru_cache(maxsize=65536)
def closed_rate(dies: int, depth: int, think: float = 0.0, completions: int = 3000,
                seed: int = 1) -> float:
    """Completions per service time of @dies dies that each serve one
    request at a time for a fixed time (the unit), with @depth requests
    always outstanding: each, once served, spends @think units in the host
    (submission and completion, overlapping other requests') before it
    goes to a die drawn at random.  A simulation of @completions
    completions, seeded: the same answer every call."""
    if dies < 1 or depth < 1 or think < 0:
        raise ValueError(f"closed_rate({dies}, {depth}, {think})")
    if depth == 1:
        return 1.0 / (1.0 + think)
    rnd = random.Random(seed)
    free = [0.0] * dies
    ends: list[float] = []
    for _ in range(depth):
        k = rnd.randrange(dies)
        free[k] += 1.0
        heapq.heappush(ends, free[k])
    now = 0.0
    for _ in range(completions):
        now = heapq.heappop(ends)
        k = rnd.randrange(dies)
        free[k] = max(free[k], now + think) + 1.0
        heapq.heappush(ends, free[k])
    return completions / now


#: the host's share of a request's time at iodepth 1 the fit considers
THINKS = tuple(i / 20 for i in range(13))


@dataclass(frozen=True)
class DieFit:
    dies: int
    service_us: float       # a die's time per 4 KiB read
    think_us: float         # the host's per request, overlapping at depth


def fit_dies(points: Sequence[DepthPoint], dies: int | None = None) -> DieFit:
    """The dies (@dies if known), their service time and the host's time
    per request whose closed_rate() fits @points' IOPS best (least squares
    of the logarithms): depth 1's mean completion latency is the service
    time plus the host's, which overlaps other requests' at depth, so IOPS
    grow faster than the dies alone would make them."""
    base = [p for p in points if p.depth == 1]
    if not base or base[0].iops <= 0 or base[0].clat_mean_us <= 0:
        raise ValueError("the depth sweep needs a point at depth 1 with I/O")
    lat1 = base[0].clat_mean_us
    rest = [p for p in points if p.depth > 1 and p.iops > 0]
    if not rest:
        return DieFit(dies or 1, lat1, 0.0)
    top = max(p.iops for p in rest) / base[0].iops
    best: tuple[float, int, float] | None = None
    hi = min(CARS_MAX_DIES, math.ceil(top * 1.5) + 1)
    for n in [dies] if dies else range(max(1, math.floor(top / 2)), hi + 1):
        for th in THINKS:
            s_us = lat1 / (1.0 + th)
            err = sum((math.log(p.iops) - math.log(closed_rate(n, p.depth, th) * 1e6 / s_us))
                      ** 2 for p in [*base, *rest])
            if best is None or err < best[0] - 1e-12:
                best = (err, n, th)
    assert best is not None
    _, n, th = best
    return DieFit(n, lat1 / (1.0 + th), lat1 * th / (1.0 + th))


def read_time(points: Sequence[DepthPoint], dies: int) -> float:
    """A die's time per read, us: by Little's law a depth's mean latency
    over the requests in flight per die busy (closed_rate() of @dies with
    no host time), the least over the depths, where the host's own time
    per request hides most behind the others' (at depth 1 it adds to the
    latency in full; under TCG it was 10-45 % of it)."""
    if not points:
        raise ValueError("no depth measured")
    return min(p.clat_mean_us * closed_rate(dies, p.depth) / p.depth for p in points)


def knee_reached(points: Sequence[DepthPoint], gain: float = KNEE_GAIN) -> bool:
    """Whether the last doubling of the depth gained less than @gain."""
    if len(points) < 2:
        return False
    a, b = points[-2], points[-1]
    return a.iops > 0 and b.iops / a.iops < gain


def write_step(run: WriteRun) -> WriteStep:
    """The write buffer in a write run at a fixed depth (fio's IOPS log,
    LOG_MS windows, the first from fio's start; a window without a
    completion is not logged): the
    writes completed by time t are about sustained x t + buffered once
    the buffer is full.  The line is fitted to the run's second half;
    buffered is its intercept, a buffer when above two windows' writes
    and 4; the step, the first window whose count is within two windows'
    writes below the line (some of the second half's are above it)."""
    iops = sorted(run.iops)
    if len(iops) < 4:
        raise ValueError("the write run logged too little I/O")
    w = LOG_MS / 1000.0
    t, c, done, prev = [], [], 0.0, 0.0
    for ti, v in iops:
        # a value is the rate over the time since the last: fio's first
        # covers its start-up too; a gap of 1.5 windows or more is
        # windows without a completion, not logged
        dt = ti - prev
        done += v * (w if prev and dt > 1.5 * w else dt)
        prev = ti
        t.append(ti)
        c.append(done)
    half = [i for i in range(len(t)) if t[i] >= (t[0] + t[-1]) / 2]
    if len(half) < 2:
        raise ValueError("the write run logged too little I/O")
    mt = statistics.fmean(t[i] for i in half)
    mc = statistics.fmean(c[i] for i in half)
    var = sum((t[i] - mt) ** 2 for i in half)
    rate = sum((t[i] - mt) * (c[i] - mc) for i in half) / var if var else 0.0
    if rate <= 0:
        raise ValueError("the write run completed no writes in its second half")
    buffered = mc - rate * mt
    slack = 2 * rate * w
    if buffered <= max(slack, 4.0):
        return WriteStep(rate, None, 0.0)
    # the count nears the line from below while the buffer fills
    step = next(t[i] for i in range(len(t)) if c[i] >= rate * t[i] + buffered - slack)
    return WriteStep(rate, step, buffered)


def striping(pair_us: Mapping[int, float], single_us: float,
             ratio: float = CONFLICT_RATIO) -> Striping:
    """The page and striping period from pairs' median latency by stride
    (KiB): a stride conflicts when its latency is at least @ratio times
    the lower of @single_us, one read's alone, and the quickest pair's (a
    pair on two dies takes about as long as one read, one on one die
    twice; the host's time per read varies between runs, and the strides
    hold pairs on two dies unless the page is above them all).  page_kb: the first of
    PAGE_STRIDES_KB that does not conflict; the period, in pages: the one
    whose multiples of the page match the conflicting strides best; static
    when they match at STATIC_AGREE of the strides."""
    if not pair_us:
        raise ValueError("no pairs measured")
    low = min(single_us, *pair_us.values())
    hit = {s: v >= ratio * low for s, v in pair_us.items()}
    page = next((s for s in PAGE_STRIDES_KB if s in hit and not hit[s]), None)
    if page is None or page > CARS_PAGE_KB[1]:
        return Striping(None, None, False, hit)
    js = sorted(s // page for s in hit if s >= page and s % page == 0)
    if not any(hit[j * page] for j in js):
        return Striping(page, None, False, hit)

    def agree(p: int) -> int:
        return sum(hit[j * page] == (j % p == 0) for j in js)
    # the period whose multiples match the conflicts best (the smallest of
    # equals): one pair's hiccup must not move it or hide it
    period = max(range(1, js[-1] + 1), key=lambda p: (agree(p), -p))
    static = agree(period) >= STATIC_AGREE * len(js) and hit.get(period * page, False)
    return Striping(page, period, static, hit)


# ---------------------------------------------------------------------------
# fio job files


def depth_job(path: str, region: int, depth: int, runtime: float, ramp: float) -> str:
    return (f"[global]\nfilename={path}\ndirect=1\nbs=4k\nrw=randread\nsize={region}\n"
            f"ioengine=io_uring\niodepth={depth}\n"
            f"time_based=1\nruntime={runtime:g}\nramp_time={ramp:g}\nrandrepeat=1\n"
            f"norandommap=1\n[reads-qd{depth}]\n")


def write_job(path: str, region: int, depth: int, runtime: float, log: str) -> str:
    return (f"[global]\nfilename={path}\ndirect=1\nbs=4k\nrw=randwrite\nsize={region}\n"
            f"ioengine=io_uring\niodepth={depth}\ntime_based=1\nruntime={runtime:g}\n"
            f"norandommap=1\nwrite_iops_log={log}\n"
            f"log_avg_msec={LOG_MS}\n[writes-qd{depth}]\n")


def fill_job(path: str, region: int) -> str:
    return (f"[global]\nfilename={path}\ndirect=1\nbs=128k\nrw=write\nsize={region}\n"
            "ioengine=io_uring\niodepth=8\nend_fsync=1\n[fill]\n")


def pairs_job(path: str, strides_kb: Sequence[int], region: int, pairs: int = PAIRS) -> str:
    """One job per stride, one after another (stonewall): @pairs pairs of
    4 KiB reads @stride apart (fewer where they would leave the first
    @region bytes), each pair submitted and reaped together."""
    out = [f"[global]\nfilename={path}\ndirect=1\nbs=4k\nioengine=io_uring\niodepth=2\n"
           "iodepth_batch_submit=2\niodepth_batch_complete_min=2\n"]
    for s in strides_kb:
        n = max(2, min(pairs, region // (2 * s * 1024)))
        rw = "read" if s == 4 else f"read:{s - 4}k"
        out.append(f"[stride-{s}k]\nstonewall\nrw={rw}\nnumber_ios={2 * n}\n")
    return "".join(out)


def parse_log(text: str, scale: float = 1.0) -> list[tuple[float, float]]:
    """fio's log lines (time ms, value, ...) as (s, value x @scale)."""
    out = []
    for ln in text.splitlines():
        f = [x.strip() for x in ln.split(",")]
        if len(f) >= 2 and f[0].isdigit():
            out.append((int(f[0]) / 1000.0, float(f[1]) * scale))
    return out


# ---------------------------------------------------------------------------
# the probe


def _fio(target: Target, job: str, name: str, timeout: float) -> dict[str, Any]:
    rc, text, log = run_fio(target, job, timeout, f"{target.tmpdir}/probe-{name}")
    return check_fio(rc, text, log)


def pair_median(res: dict[str, Any], stride_kb: int) -> float:
    """The median completion latency of the pairs @stride_kb apart: a
    timer or host hiccup in one pair moves a mean of them across the
    conflict threshold, not the median."""
    return fio.percentile(fio.job_stats(res, f"stride-{stride_kb}k"), 50.0)


def probe(target: Target, path: str, size_bytes: int, out: TextIO = sys.stdout,
          runtime: float = 1.5, ramp: float = 0.5, write_s: float = 4.0) -> ProbeResult:
    """Measure what cars needs on @path (nothing else may use it: it is
    written) under the scheduler already selected (the caller selects
    none), printing each step."""
    region = min(REGION_MIB << 20, size_bytes // 2) // (1 << 20) << 20
    if region < 1 << 20:
        raise RunError(f"{path}: {size_bytes} bytes is too small to probe")

    def say(msg: str) -> None:
        print(msg, file=out, flush=True)

    say(f"probe 1/4: writing the first {region >> 20} MiB in order (what is read later)")
    _fio(target, fill_job(path, region), "fill", 600)

    points: list[DepthPoint] = []
    depth = 1
    while depth <= MAX_DEPTH:
        st = fio.job_stats(_fio(target, depth_job(path, region, depth, runtime, ramp),
                                f"qd{depth}", (runtime + ramp) * 3 + 120), f"reads-qd{depth}")
        if not st.ios:
            raise RunError(f"probe: no read completed at iodepth {depth}")
        points.append(DepthPoint(depth, st.iops, st.clat_mean_us))
        gain = "" if depth == 1 else f", x{st.iops / points[-2].iops:.2f} on half the depth"
        say(f"probe 2/4: iodepth {depth:3d}: {st.iops:9.0f} IOPS, mean completion latency "
            f"{st.clat_mean_us:9.1f} us{gain}")
        if knee_reached(points):
            break
        depth *= 2
    fit = fit_dies(points)
    say(f"  {fit.dies} dies: with a time per read of {fit.service_us:.0f} us and the host's "
        f"{fit.think_us:.0f} us (overlapping at depth), what fits IOPS by depth best")

    # the pairs before the writes: random writes move pages off the stripes
    strides = sorted(set(PAGE_STRIDES_KB))
    res = _fio(target, pairs_job(path, strides, region), "pairs", 600)
    pair_us = {s: pair_median(res, s) for s in strides}
    first = striping(pair_us, points[0].clat_mean_us)
    if first.page_kb is not None:
        more = [first.page_kb * j for j in range(1, 2 * fit.dies + 1)]
        res = _fio(target, pairs_job(path, more, region), "pairs2", 600)
        pair_us.update({s: pair_median(res, s) for s in more})
    stripes = striping(pair_us, points[0].clat_mean_us)
    if stripes.page_kb is None:
        say(f"probe 3/4: pairs of reads up to {CARS_PAGE_KB[1]} KiB apart all shared a die: the "
            "page was not found (page_kb left as it is)")
    else:
        say(f"probe 3/4: page_kb {stripes.page_kb}: pairs of reads {stripes.page_kb} KiB "
            f"apart were the first not to share a die; striping period "
            f"{stripes.period} pages"
            + ("; static striping (page mod dies) holds" if stripes.static
               else "; static striping (page mod dies) does not hold exactly"))

    dies = fit.dies
    if stripes.static and stripes.period:
        dies = stripes.period
        say(f"  nr_dies {dies}, depth {dies}: the striping period, where cars's model "
            f"(die = page mod nr_dies) holds (the IOPS fit said {fit.dies})")
    read_us = read_time(points, dies)
    say(f"  read_us {read_us:.0f}: {dies} dies' time per read by Little's law, the least "
        "over the depths")
    wdepth = max(4, min(MAX_DEPTH, 4 * dies))
    log = f"{target.tmpdir}/probe-wlog"
    _fio(target, write_job(path, region, wdepth, write_s, log), "write", write_s * 3 + 120)
    step = write_step(WriteRun(parse_log(target.read_file(f"{log}_iops.1.log").decode())))
    busy = step.programming(dies)
    write_us = busy * 1e6 / step.sustained_iops
    if step.step_s is None:
        buf = f"no write buffer found in {write_s:g} s"
    else:
        buf = (f"a write buffer that took about {step.buffered:.0f} writes ahead of the "
               f"dies, full after {step.step_s:.2f} s")
    say(f"probe 4/4: 4 KiB random writes at iodepth {wdepth}: {buf}; sustained "
        f"{step.sustained_iops:.0f} IOPS: write_us {write_us:.0f} ({busy} dies programming "
        "at once / that)")
    return ProbeResult(points, dies, read_us, step, write_us, stripes)
