"""What cars needs to know of a drive that publishes nothing, measured with
fio under `none` (`python3 -m bench calibrate cars --device DEV` on any
device but ssdsim, or with --probe on ssdsim too).

Four steps, each printed with what it found:

1. **Fill.** The region probed, the device's first REGION_MIB MiB (at
   most half of it), is written in order: a real drive serves reads of
   unwritten blocks without touching flash, and stripes what is written in
   order over its dies.
2. **Parallelism.** 4 KiB random reads at iodepth 1, 2, 4, ...
   until a doubling gains less than KNEE_GAIN (or at MAX_DEPTH; both
   depths are run again first, each keeping its quicker run: a slow spell
   of the host fakes a knee).  A die serves one read at a time for a
   fixed time; the host's own time per request (submission, completion)
   overlaps other requests' once several are in flight.  The fit's dies are those whose simulation
   (closed_rate(), with the host's time) fits IOPS by depth best in the
   least-squares sense of their logarithms.  read_us, when step 3 finds
   no pairs to take it from, is read_time(): the least over the depths of
   the latency per request in flight on a busy die (Little's law), where
   the host's time hides most.  KNEE_GAIN: with
   fixed times a doubling gains less than 1.1 only from about 8 x nr_dies
   requests on, where IOPS are within 6 % of the device's most, and 1.1
   is about the noise of two short runs' ratio.
3. **The die of a page.** Pairs of 4 KiB reads issued together (iodepth
   2, submitted and reaped as a pair), one pair at a time, at a stride
   apart: a pair whose two pages share a die takes about twice one read
   (a low quantile of their latency, PAIR_QUANTILE, against depth 1's
   mean: the host's delays only add to a pair's time, the die's is its
   floor).  A pass replays its pairs of every stride in a random order
   (pair_plan()), so every stride has pairs in the host's quiet spells.
   Strides of 4 to 128 KiB find the page (two reads in one page share its
   die: page_kb is the first stride whose pairs do not), strides of 1 to
   2 x max(the fit's dies, PERIOD_PAGES) pages the striping period (the
   one whose multiples match the conflicting strides best).  Static
   striping (die = page mod dies) holds when they match at nine strides in
   ten, and then the period is nr_dies (the fit's otherwise); depth is
   nr_dies.  read_us is what a pair on one die takes beyond a pair on two
   (pair_read_time()): the host's time is in both and cancels (a period
   too near the second pass's end to give MIN_STRIDES strides on one die
   has its next multiples measured for it).
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
from collections.abc import Callable, Mapping, Sequence
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
#: the quantile of a stride's pair latencies that stands for it
PAIR_QUANTILE = 0.1
#: the second pass of pairs tries strides of 1 to 2 x this many pages at
#: least (2 x the fit's dies when more): a low fit must not hide the period
PERIOD_PAGES = 16
#: the strides of each kind (on one die, on two) pair_read_time() needs
MIN_STRIDES = 2
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


def pair_read_time(pair_us: Mapping[int, float], stripes: Striping) -> float | None:
    """A die's time per read from the pairs, us: a pair on one die takes
    two reads' time and the host's, a pair on two dies one read's and the
    host's, so the median of the strides that shared a die less that of
    those that did not is one read's time, the host's cancelled (at depth
    1 it adds to the latency in full; under TCG beside another VM it put
    depth 1's mean 40 % above ssdsim's read time).  None unless each kind
    has MIN_STRIDES strides (no conflict found: the page or the period
    above the strides)."""
    same = [pair_us[s] for s, hit in stripes.conflicts.items() if hit]
    apart = [pair_us[s] for s, hit in stripes.conflicts.items() if not hit]
    if len(same) < MIN_STRIDES or len(apart) < MIN_STRIDES:
        return None
    t = statistics.median(same) - statistics.median(apart)
    return t if t > 0 else None


def knee_reached(points: Sequence[DepthPoint], gain: float = KNEE_GAIN) -> bool:
    """Whether the last doubling of the depth gained less than @gain."""
    if len(points) < 2:
        return False
    a, b = points[-2], points[-1]
    return a.iops > 0 and b.iops / a.iops < gain


def depth_sweep(reads: Callable[[int], DepthPoint], say: Callable[[str], None]
                ) -> list[DepthPoint]:
    """The depth sweep of probe() with @reads(depth) measuring one depth:
    1, 2, 4, ... until a doubling gains less than KNEE_GAIN, or MAX_DEPTH.
    A slow spell of the host fakes a knee, so on one both depths are run
    again, each keeping its quicker run (a spell only slows), and the
    sweep goes on unless the knee is still there."""
    points: list[DepthPoint] = []

    def show(p: DepthPoint, again: str = "") -> None:
        prev = [q for q in points if q.depth == p.depth // 2]
        gain = f", x{p.iops / prev[0].iops:.2f} on half the depth" if prev else ""
        say(f"probe 2/4: iodepth {p.depth:3d}: {p.iops:9.0f} IOPS, mean completion latency "
            f"{p.clat_mean_us:9.1f} us{gain}{again}")

    depth = 1
    while depth <= MAX_DEPTH:
        points.append(reads(depth))
        show(points[-1])
        if knee_reached(points):
            for i in (-2, -1):
                p = reads(points[i].depth)
                if p.iops > points[i].iops:
                    points[i] = p
            for p in points[-2:]:
                show(p, " (again: the quicker of two runs)")
            if knee_reached(points):
                break
        depth *= 2
    return points


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
    """The page and striping period from pairs' latency by stride
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


def pair_plan(strides_kb: Sequence[int], region: int, page_kb: int | None = None,
              pairs: int = PAIRS, seed: int = 1) -> list[tuple[int, int]]:
    """The pairs of one pass, as (stride KiB, first read's offset in
    bytes), in a seeded random order: each stride's @pairs pairs are
    spread over the whole pass, so that a slow spell of the host (another
    VM beside it, a daemon) slows every stride alike instead of the few
    measured during it.  A pair starts at a multiple of @page_kb KiB, or
    of twice its stride without it (a stride below the page then keeps
    both reads in one page), and ends within the first @region bytes."""
    rnd = random.Random(seed)
    plan: list[tuple[int, int]] = []
    for s in strides_kb:
        step = (page_kb or 2 * s) * 1024
        starts = range(0, region - (s + 4) * 1024 + 1, step)
        if not starts:
            raise ValueError(f"pairs {s} KiB apart do not fit in {region} bytes")
        picks = rnd.sample(starts, min(pairs, len(starts)))
        plan += [(s, a) for a in picks + [rnd.choice(starts) for _ in range(pairs - len(picks))]]
    rnd.shuffle(plan)
    return plan


def pairs_iolog(path: str, plan: Sequence[tuple[int, int]]) -> str:
    """fio's replay log (version 2) of @plan's reads, 4 KiB each, in order."""
    out = ["fio version 2 iolog", f"{path} add", f"{path} open"]
    for s, a in plan:
        out += [f"{path} read {a} 4096", f"{path} read {a + s * 1024} 4096"]
    out.append(f"{path} close")
    return "\n".join(out) + "\n"


def pairs_job(iolog: str, lat_log: str) -> str:
    """A replay of @iolog two reads at a time, submitted and reaped
    together (so both of a pair carry its latency), every read's total
    latency and offset logged to @lat_log_lat.1.log (and fio's slat and
    clat logs beside it)."""
    return ("[global]\ndirect=1\nioengine=io_uring\niodepth=2\niodepth_batch_submit=2\n"
            f"iodepth_batch_complete_min=2\nreplay_no_stall=1\nread_iolog={iolog}\n"
            f"write_lat_log={lat_log}\nlog_offset=1\n[pairs]\n")


def pair_latency(plan: Sequence[tuple[int, int]], log: str,
                 quantile: float = PAIR_QUANTILE) -> dict[int, float]:
    """The @quantile (nearest rank) of each stride's pair latencies, us, in
    @plan from fio's per-read total latency log (time ms, latency ns,
    direction, size, offset, ...): a pair completes as one (reaped
    together), in the plan's order, so its reads are the log's next two.
    A low quantile, since what the host adds (another VM on its CPUs, an
    interrupt) only lengthens a pair, while the die's own time is a floor:
    beside another VM under TCG, 6 of 28 strides on two dies had a median
    above 1.4 times the quickest stride's.  Total latency, not completion
    latency: fio's io_uring engine takes a read's issue time after
    io_uring_enter() returns, so a submission the guest was slow to return
    from (the reads already in the device) shortens clat and breaks the
    floor (on 6.12, three or more of 24 pairs 8 KiB apart, on one die,
    showed one read's time in clat, and the page was found at 8 KiB)."""
    rows = []
    for ln in log.splitlines():
        f = [x.strip() for x in ln.split(",")]
        if len(f) >= 5 and f[0].isdigit():
            rows.append((int(f[1]) / 1000.0, int(f[4])))
    if len(rows) != 2 * len(plan):
        raise RunError(f"probe: fio logged {len(rows)} reads of the pairs' {2 * len(plan)}")
    by: dict[int, list[float]] = {}
    for i, (s, a) in enumerate(plan):
        (l1, o1), (l2, o2) = rows[2 * i], rows[2 * i + 1]
        if {o1, o2} != {a, a + s * 1024}:
            raise RunError(f"probe: fio's latency log does not follow the pairs (pair {i}: "
                           f"offsets {o1} and {o2}, planned {a} and {a + s * 1024})")
        by.setdefault(s, []).append(max(l1, l2))
    return {s: sorted(v)[max(0, math.ceil(quantile * len(v)) - 1)] for s, v in by.items()}


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


def _pairs(target: Target, path: str, plan: list[tuple[int, int]], name: str
           ) -> dict[int, float]:
    """Each stride's pair latency (pair_latency()), us, measured by
    replaying @plan."""
    base = f"{target.tmpdir}/probe-{name}"
    target.write_file(f"{base}.iolog", pairs_iolog(path, plan).encode())
    _fio(target, pairs_job(f"{base}.iolog", base), name, 600)
    return pair_latency(plan, target.read_file(f"{base}_lat.1.log").decode())


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

    def reads(depth: int) -> DepthPoint:
        st = fio.job_stats(_fio(target, depth_job(path, region, depth, runtime, ramp),
                                f"qd{depth}", (runtime + ramp) * 3 + 120), f"reads-qd{depth}")
        if not st.ios:
            raise RunError(f"probe: no read completed at iodepth {depth}")
        return DepthPoint(depth, st.iops, st.clat_mean_us)

    points = depth_sweep(reads, say)
    fit = fit_dies(points)
    say(f"  {fit.dies} dies: with a time per read of {fit.service_us:.0f} us and the host's "
        f"{fit.think_us:.0f} us (overlapping at depth), what fits IOPS by depth best")

    # the pairs before the writes: random writes move pages off the stripes
    pair_us = _pairs(target, path, pair_plan(PAGE_STRIDES_KB, region), "pairs")
    first = striping(pair_us, points[0].clat_mean_us)
    if first.page_kb is not None:
        top = min(2 * max(fit.dies, PERIOD_PAGES), (region >> 10) // (2 * first.page_kb))
        more = [first.page_kb * j for j in range(1, top + 1)]
        pair_us.update(_pairs(target, path, pair_plan(more, region, first.page_kb), "pairs2"))
    stripes = striping(pair_us, points[0].clat_mean_us)
    if stripes.page_kb is not None and stripes.period and \
            pair_read_time(pair_us, stripes) is None:
        # a period near the second pass's end: its multiples, for read_us
        more = [stripes.page_kb * stripes.period * j for j in range(2, 2 + MIN_STRIDES)]
        more = [x for x in more if x not in pair_us and x * 1024 * 2 <= region]
        if more:
            pair_us.update(_pairs(target, path, pair_plan(more, region, stripes.page_kb),
                                  "pairs3"))
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
    say(f"  pairs' latency by stride, {PAIR_QUANTILE:.0%} quantile, us (* shared a die): "
        + ", ".join(f"{s}k {pair_us[s]:.0f}{'*' if stripes.conflicts[s] else ''}"
                    for s in sorted(pair_us)))

    dies = fit.dies
    if stripes.static and stripes.period:
        dies = stripes.period
        say(f"  nr_dies {dies}, depth {dies}: the striping period, where cars's model "
            f"(die = page mod nr_dies) holds (the IOPS fit said {fit.dies})")
    little = read_time(points, dies)
    paired = pair_read_time(pair_us, stripes)
    if paired is not None:
        read_us = paired
        say(f"  read_us {read_us:.0f}: what a pair on one die took beyond a pair on two "
            f"(medians of the strides; by Little's law over the depths {little:.0f})")
    else:
        read_us = little
        say(f"  read_us {read_us:.0f}: {dies} dies' time per read by Little's law, the least "
            "over the depths (the pairs found no stride on one die and two on two)")
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
