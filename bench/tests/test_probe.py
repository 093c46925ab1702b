"""bench/probe.py's models on synthetic measurements whose truth is known:
the dies from IOPS by depth, the write buffer's step, the page and the
striping period from pairs of reads; and its job files."""
from __future__ import annotations

import math
import random

import pytest

from bench import probe
from bench.probe import DepthPoint, WriteRun


def sweep(dies: int, noise: float = 0.0, seed: int = 3, s_us: float = 1200.0,
          think: float = 0.0) -> list[DepthPoint]:
    """The depth sweep probe() runs, on a device of @dies fixed-time dies
    (@s_us each read) with the host's @think of that per request, each
    point's IOPS off by up to @noise (a fraction) at random."""
    rnd = random.Random(seed)
    out: list[DepthPoint] = []
    depth = 1
    while depth <= probe.MAX_DEPTH:
        iops = 1e6 / s_us * probe.closed_rate(dies, depth, think, seed=seed + depth)
        iops *= 1 + rnd.uniform(-noise, noise)
        out.append(DepthPoint(depth, iops, depth * 1e6 / iops))
        if probe.knee_reached(out):
            break
        depth *= 2
    return out


@pytest.mark.parametrize("dies", [1, 2, 4, 8, 16, 32, 64])
def test_fit_finds_the_dies_of_a_fixed_time_device(dies: int) -> None:
    """On another random draw of the same model: within 25 % (or 1); with
    each point off by up to 5 %, within 40 % (or 1); with the host taking
    30 % as long again per request, within 25 %; the service time within
    25 % (fewer dies a little faster, and the host's time, fit a sweep
    almost as well).  The probe takes nr_dies from the striping period
    where static striping holds."""
    fit = probe.fit_dies(sweep(dies))
    assert abs(fit.dies - dies) <= max(1.0, 0.25 * dies), (dies, fit)
    assert fit.service_us == pytest.approx(1200, rel=0.25)
    for seed in (1, 2):
        got = probe.fit_dies(sweep(dies, noise=0.05, seed=seed)).dies
        assert abs(got - dies) <= max(1.0, 0.4 * dies), (dies, seed, got)
    fit = probe.fit_dies(sweep(dies, think=0.3))
    assert abs(fit.dies - dies) <= max(1.0, 0.25 * dies), (dies, fit)
    assert fit.service_us == pytest.approx(1200, rel=0.25)


def test_fit_with_the_dies_known() -> None:
    """Given the dies (the striping period), the service time and the
    host's are fitted alone: within 10 % with the host at 30 %."""
    fit = probe.fit_dies(sweep(8, think=0.3), dies=8)
    assert fit.dies == 8 and fit.service_us == pytest.approx(1200, rel=0.1)
    assert fit.think_us == pytest.approx(360, rel=0.35)


def test_read_time_sees_past_the_hosts_time() -> None:
    """With the host adding 30 % per request, depth 1's latency is 30 %
    high; the least over the depths by Little's law is within 10 %."""
    pts = sweep(8, think=0.3)
    assert pts[0].clat_mean_us == pytest.approx(1560, rel=0.01)
    assert probe.read_time(pts, 8) == pytest.approx(1200, rel=0.1)
    assert probe.read_time(sweep(16), 16) == pytest.approx(1200, rel=0.05)
    with pytest.raises(ValueError):
        probe.read_time([], 8)


def test_sweep_ends_at_the_knee() -> None:
    """A doubling gains less than KNEE_GAIN from about 8 dies' depth on."""
    for dies in (4, 8, 16):
        pts = sweep(dies)
        assert probe.knee_reached(pts)
        assert 4 * dies <= pts[-1].depth <= 16 * dies, (dies, [p.depth for p in pts])
    assert not probe.knee_reached(sweep(8)[:3])


def test_fit_needs_a_point_at_depth_one() -> None:
    with pytest.raises(ValueError, match="depth 1"):
        probe.fit_dies([DepthPoint(2, 100.0, 1.0)])
    assert probe.fit_dies([DepthPoint(1, 100.0, 1.0)]).dies == 1


def write_run(buffer_writes: int, dies: int = 8, program_ms: float = 10.0,
              buffered_iops: float = 20000.0, seconds: float = 3.0) -> WriteRun:
    """The IOPS log (LOG_MS windows) of writes at a fixed depth on a drive
    whose buffer of @buffer_writes takes writes at @buffered_iops until
    full, then as fast as @dies dies drain it."""
    drain = dies / (program_ms / 1000)
    w = probe.LOG_MS / 1000
    iops = []
    held = 0.0
    for i in range(1, int(seconds / w) + 1):
        room = buffer_writes - held
        if room > 0:
            took = min(room, (buffered_iops - drain) * w)
            held += took
            rate = drain + took / w
        else:
            rate = drain
        iops.append((i * w, rate))
    return WriteRun(iops)


def test_write_step_finds_the_buffer_and_the_sustained_rate() -> None:
    st = probe.write_step(write_run(buffer_writes=4096))   # about 0.2 s
    assert st.step_s is not None and 0.15 < st.step_s < 0.3
    assert st.sustained_iops == pytest.approx(800, rel=0.02)
    assert st.buffered == pytest.approx(4096, rel=0.02)
    assert st.programming(8) == 8
    # smaller than a window's writes, and fewer than the dies
    st = probe.write_step(write_run(buffer_writes=16, dies=32, program_ms=60.0))
    assert st.step_s is not None and st.buffered == pytest.approx(16, rel=0.1)
    assert st.programming(32) == 16


def test_write_step_without_a_buffer() -> None:
    st = probe.write_step(write_run(buffer_writes=0))
    assert st.step_s is None and st.buffered == 0 and st.programming(8) == 8
    assert st.sustained_iops == pytest.approx(800, rel=0.02)
    # windows with no completion are not logged: the rate is still I/Os / time
    sparse = WriteRun(write_run(buffer_writes=0).iops[::2])
    assert probe.write_step(sparse).sustained_iops == pytest.approx(400, rel=0.05)
    with pytest.raises(ValueError, match="too little"):
        probe.write_step(WriteRun([]))


def test_write_step_first_window_covers_fios_start() -> None:
    """fio's first IOPS value is the rate since the job started (111 ms
    into the run on ssdsim in the VM, its buffer of 64 writes in it)."""
    log = [(0.111, 1236.0)] + [(0.111 + 0.01 * i, 786.0) for i in range(1, 300)]
    st = probe.write_step(WriteRun(log))
    assert st.step_s is not None and st.buffered == pytest.approx(1236 * 0.111 - 786 * 0.111,
                                                                  rel=0.1)


def pairs(page_kb: int, dies: int, strides: list[int], static: bool = True
          ) -> dict[int, float]:
    """Mean latency of pairs of reads @stride KiB apart on a drive of
    @page_kb pages striped page mod @dies (else by a map with no period): 2 when
    the two share a die, 1 when not, with a little noise."""
    rnd = random.Random(5)
    out = {}
    for s in strides:
        pages = s // page_kb if s >= page_kb else 0
        if static:
            same = pages % dies == 0
        else:
            same = pages in (0, 3, 5, 11, 12)   # no period
        out[s] = (2.0 if same else 1.0) * (1 + rnd.uniform(-0.05, 0.05))
    return out


@pytest.mark.parametrize("page_kb,dies", [(4, 8), (16, 8), (16, 32), (8, 4)])
def test_striping_finds_page_and_period(page_kb: int, dies: int) -> None:
    strides = sorted(set(probe.PAGE_STRIDES_KB) | {page_kb * j for j in range(1, 2 * dies + 1)})
    st = probe.striping(pairs(page_kb, dies, strides), 1.0)
    assert (st.page_kb, st.period, st.static) == (page_kb, dies, True)


def test_striping_survives_one_hiccup() -> None:
    """One stride of 32 misread (a pair delayed by the host): the period
    and static striping still come out."""
    strides = sorted(set(probe.PAGE_STRIDES_KB) | {16 * j for j in range(1, 33)})
    lat = pairs(16, 8, strides)
    lat[16 * 5] = 2.0                       # 5 pages apart: no shared die
    st = probe.striping(lat, 1.0)
    assert (st.page_kb, st.period, st.static) == (16, 8, True)
    lat[16 * 16] = 1.0                      # and 16 pages apart: two in 32
    assert probe.striping(lat, 1.0).period == 8


def test_striping_not_static_and_not_found() -> None:
    strides = sorted(set(probe.PAGE_STRIDES_KB) | {4 * j for j in range(1, 17)})
    st = probe.striping(pairs(4, 8, strides, static=False), 1.0)
    assert st.page_kb == 4 and not st.static
    # one read alone took longer than the pairs on two dies (the host's
    # time varies between runs): the quickest pair is the reference
    st = probe.striping(pairs(16, 16, [4, 8, 16, 32, 64, 128] + [16 * j for j in range(1, 33)]),
                        1.6)
    assert (st.page_kb, st.period, st.static) == (16, 16, True)
    # every stride shares a die: no page
    st = probe.striping({s: 2.0 for s in probe.PAGE_STRIDES_KB}, 1.0)
    assert st.page_kb is None and st.period is None
    # only 128 KiB apart on two dies: a page cars cannot take
    hit = {s: (1.0 if s == 128 else 2.0) for s in probe.PAGE_STRIDES_KB}
    assert probe.striping(hit, 1.0).page_kb is None


def test_tunables_of_a_result() -> None:
    st = probe.Striping(16, 8, True)
    res = probe.ProbeResult(sweep(8), 8, 1234.4, probe.WriteStep(800.0, 0.2, 64.0),
                            10_000.4, st)
    assert res.tunables() == {"nr_dies": 8, "page_kb": 16, "read_us": 1234,
                              "write_us": 10000, "depth": 8, "max_hold_us": 10000}
    res = probe.ProbeResult(sweep(8), 8, 0.2, probe.WriteStep(800.0, None, 0.0), 2e6,
                            probe.Striping(None, None, False))
    assert res.tunables() == {"nr_dies": 8, "read_us": 1, "write_us": 2_000_000,
                              "depth": 8, "max_hold_us": 1_000_000}


def test_job_files() -> None:
    job = probe.pairs_job("/tmp/p.iolog", "/tmp/p")
    assert "read_iolog=/tmp/p.iolog\n" in job and "write_lat_log=/tmp/p\n" in job
    assert "iodepth=2\n" in job and "iodepth_batch_submit=2\n" in job
    assert "iodepth_batch_complete_min=2\n" in job and "log_offset=1\n" in job
    log = probe.pairs_iolog("/dev/x", [(16, 0), (4, 8192)])
    assert log.splitlines() == ["fio version 2 iolog", "/dev/x add", "/dev/x open",
                                "/dev/x read 0 4096", "/dev/x read 16384 4096",
                                "/dev/x read 8192 4096", "/dev/x read 12288 4096",
                                "/dev/x close"]
    w = probe.write_job("/dev/x", 1 << 24, 32, 4, "/tmp/l")
    assert f"log_avg_msec={probe.LOG_MS}" in w and "write_iops_log=/tmp/l" in w
    assert "iodepth=32" in probe.depth_job("/dev/x", 1 << 24, 32, 1.5, 0.5)


def test_parse_log() -> None:
    text = "10, 2000, 1, 4096, 0, 0\n20, 1500, 1, 4096, 0, 0\nnoise\n"
    assert probe.parse_log(text) == [(0.01, 2000.0), (0.02, 1500.0)]
    assert probe.parse_log(text, 1e-3)[0] == (0.01, 2.0)
    assert math.isclose(probe.closed_rate(8, 8), probe.closed_rate(8, 8))
    assert probe.closed_rate(8, 1, 0.5) == pytest.approx(1 / 1.5)
    with pytest.raises(ValueError):
        probe.closed_rate(0, 1)


def test_pair_plan_spreads_each_stride_over_the_pass() -> None:
    """Every stride has its pairs, all in the region, a stride below the
    page in one page (its start a multiple of twice it), a multiple of
    the page from a page boundary; each stride's pairs spread over the
    pass (none has all of them in one half); the same plan every call."""
    region = 16 << 20
    plan = probe.pair_plan(probe.PAGE_STRIDES_KB, region)
    assert plan == probe.pair_plan(probe.PAGE_STRIDES_KB, region)
    assert sorted({s for s, _ in plan}) == list(probe.PAGE_STRIDES_KB)
    for s in probe.PAGE_STRIDES_KB:
        starts = [a for t, a in plan if t == s]
        assert len(starts) == probe.PAIRS and len(set(starts)) == probe.PAIRS
        assert all(a % (2 * s * 1024) == 0 and a + (s + 4) * 1024 <= region for a in starts)
        where = [i for i, (t, _) in enumerate(plan) if t == s]
        assert min(where) < len(plan) / 2 <= max(where)
    more = probe.pair_plan([16 * j for j in range(1, 33)], region, page_kb=16)
    assert all(a % 16384 == 0 for _, a in more)
    # a region that holds fewer starts than pairs: starts come again
    few = probe.pair_plan([512], 2 << 20)
    assert len(few) == probe.PAIRS and {a for _, a in few} == {0, 1 << 20}
    with pytest.raises(ValueError, match="do not fit"):
        probe.pair_plan([4096], 1 << 20)


def lat_log(plan: list[tuple[int, int]], lat_us: list[float]) -> str:
    """fio 3.33's per-read total latency log of @plan's pairs, a pair
    taking @lat_us[i] (both reads: reaped together), the second read of a
    pair logged first when i is odd (fio logs a reaped batch in its order)."""
    rows = []
    for i, ((s, a), lat) in enumerate(zip(plan, lat_us)):
        ns = int(lat * 1000)
        two = [f"{i}, {ns}, 0, 4096, {a}, 0", f"{i}, {ns}, 0, 4096, {a + s * 1024}, 0"]
        rows += two[::-1] if i % 2 else two
    return "\n".join(rows) + "\n"


def test_pair_latency_reads_fios_log() -> None:
    plan = [(16, 0), (4, 8192), (16, 65536), (16, 32768)]
    log = lat_log(plan, [1000.0, 2000.0, 1300.0, 1100.0])
    assert probe.pair_latency(plan, log) == {16: pytest.approx(1000.0), 4: pytest.approx(2000.0)}
    assert probe.pair_latency(plan, log, 0.5)[16] == pytest.approx(1100.0)
    with pytest.raises(probe.RunError, match="logged 4 reads of the pairs' 8"):
        probe.pair_latency(plan, "\n".join(log.splitlines()[:4]))
    with pytest.raises(probe.RunError, match="does not follow the pairs"):
        probe.pair_latency(plan[::-1], log)


def test_the_hosts_slow_spells_leave_the_striping() -> None:
    """What failed on 6.12 beside another VM: the host added half a read's
    time or more to every pair for most of the pass, in spells.  Measured
    a stride after another, the strides of a spell read as sharing a die
    and the period was lost; with the pairs of every stride in a random
    order, each stride has pairs in the quiet spells, and its low quantile
    is the die's time (its median is not: the spells are 60 % of the
    pass)."""
    page, dies, region = 16, 8, 16 << 20
    strides = [page * j for j in range(1, 2 * probe.PERIOD_PAGES + 1)]

    def latencies(plan: list[tuple[int, int]]) -> list[float]:
        return [(2.0 if (s // page) % dies == 0 else 1.0) * 1200
                + (700 if (i // 50) % 5 in (1, 2, 4) else 0) for i, (s, _) in enumerate(plan)]

    plan = probe.pair_plan(strides, region, page)
    log = lat_log(plan, latencies(plan))
    st = probe.striping(probe.pair_latency(plan, log), 1300.0)
    assert (st.period, st.static) == (dies, True)
    assert not probe.striping(probe.pair_latency(plan, log, 0.5), 1300.0).static
    # the same spells over the strides one after another (the old order)
    plan.sort()
    st = probe.striping(probe.pair_latency(plan, lat_log(plan, latencies(plan))), 1300.0)
    assert not st.static


def test_depth_sweep_measures_a_knee_again() -> None:
    """A slow run at depth 2 (what a host's spell did on 6.12: x0.97 on
    depth 1, the sweep stopped and the fit said 1 die) is run again and
    the sweep goes on to the knee of 8 dies; a real knee stays one."""
    truth = {p.depth: p for p in sweep(8)}
    runs: list[int] = []

    def reads(depth: int) -> DepthPoint:
        runs.append(depth)
        p = truth[depth]
        if runs == [1, 2]:          # the first run at depth 2 is slow
            return DepthPoint(depth, p.iops / 2, p.clat_mean_us * 2)
        return p

    said: list[str] = []
    got = probe.depth_sweep(reads, said.append)
    assert [p.depth for p in got] == [p.depth for p in sweep(8)]
    assert got == sweep(8)
    assert runs[:4] == [1, 2, 1, 2] and runs[-2:] == [got[-2].depth, got[-1].depth]
    assert probe.fit_dies(got).dies == probe.fit_dies(sweep(8)).dies
    assert sum("again" in ln for ln in said) == 4     # the fake knee and the real one


def test_pair_read_time_cancels_the_hosts_time() -> None:
    """A read's time from the pairs: what the host adds to every pair (here
    480 us, what put depth 1's mean 40 % above ssdsim's 1200 us in CI's
    failure on 6.1) is in both kinds and cancels; a stride misread either
    way does not move the medians far; without strides of both kinds there
    is no figure."""
    page, dies = 16, 8
    strides = sorted(set(probe.PAGE_STRIDES_KB) | {page * j for j in range(1, 33)})
    rnd = random.Random(7)
    lat = {s: (2400.0 if (s < page or (s // page) % dies == 0) else 1200.0) + 480
           + rnd.uniform(0, 60) for s in strides}
    lat[page * 5] += 1200                   # one pair on two dies slowed by the host
    st = probe.striping(lat, 1680.0)
    assert (st.page_kb, st.period, st.static) == (page, dies, True)
    got = probe.pair_read_time(lat, st)
    assert got == pytest.approx(1200, rel=0.05)
    # Little's law at depth 1 alone carries the host's time in full
    assert probe.read_time([DepthPoint(1, 1e6 / 1680, 1680.0)], dies) == pytest.approx(1680)
    # the figures of a probe of 8 dies of 16 KiB pages beside another VM
    # (10 % quantiles, us): 1 us in 20 of ssdsim's 1200
    seen = {4: 2464, 8: 2453, 16: 1364, 32: 1322, 48: 1319, 64: 1502, 80: 1353, 96: 1351,
            112: 1326, 128: 2520, 144: 1337, 160: 1340, 176: 1321, 192: 1478, 208: 1328,
            224: 1319, 240: 1313, 256: 2515, 272: 1304, 288: 1342, 304: 1303, 320: 1456}
    seen_f = {s: float(v) for s, v in seen.items()}
    st = probe.striping(seen_f, 1512.9)
    assert probe.pair_read_time(seen_f, st) == pytest.approx(1200, rel=0.05)
    # no stride on one die: no figure, and none from a single stride of a kind
    assert probe.pair_read_time({s: 1300.0 for s in strides},
                                probe.striping({s: 1300.0 for s in strides}, 1300.0)) is None
    one = {4: 1300.0, 8: 2600.0, 16: 1300.0}
    assert probe.pair_read_time(one, probe.striping(one, 1300.0)) is None
