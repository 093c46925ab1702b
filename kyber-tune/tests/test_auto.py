"""kyber-tune auto: the controller against a simulated plant, the trace
parsing, and the tuning loop on the runner's simulated target (restored
on a signal, on an error; refused without kyber)."""
from __future__ import annotations

import math
import random
from pathlib import Path

import pytest

from bench.device import DeviceError
from bench.tests.fake import Result
from kybertune import auto
from kybertune.auto import Controller, Stall, Window, read_ratio, signal, write_bound

from test_grid import KyberTarget

R = 1_000_000      # the objective, ns


def plant(w_ns: int, load: float, rng: random.Random, sigma: float) -> tuple[list[Window], float]:
    """Ten Kyber windows of a period: the read P99 (in objectives) falls as
    the write target rises, 2 x load near 0, 0.5 x load far above R, times
    log-normal noise; Kyber reports its bucket's bound in quarters.  Also
    the period's true mean P99."""
    wins, true = [], []
    for _ in range(10):
        p = load * (0.5 + 1.5 / (1 + w_ns / R)) * math.exp(rng.gauss(0, sigma))
        true.append(p)
        wins.append(Window("READ", "total", 99, min(8, math.ceil(p * 4)), 4, 500))
    return wins, sum(true) / len(true)


def simulate(periods: int, load: list[float], seed: int, sigma: float = 0.1
             ) -> list[tuple[int, float, str]]:
    """(write target, true P99 / objective, action) per period."""
    rng = random.Random(seed)
    c = Controller(R, R, 1000 * R)
    out = []
    for t in range(periods):
        wins, p = plant(c.w_ns, load[t], rng, sigma)
        action = c.update(read_ratio(wins)[0])
        out.append((c.w_ns, plant(c.w_ns, load[t], random.Random(seed * 1000 + t), 0)[1], action))
    return out


@pytest.mark.parametrize("seed", range(5))
def test_converges_and_stays_in_band(seed: int) -> None:
    """From the lowest write target, under a load that needs 2 x R of it:
    the read P99 meets the objective within 5 periods and then stays in
    [0.6, 1.0] x objective, the write target within [2, 16] x R."""
    h = simulate(200, [1.0] * 200, seed)
    first = next(t for t, (_, p, _) in enumerate(h) if p <= 1.0)
    assert first < 5
    for w, p, _ in h[first:]:
        assert 0.6 <= p <= 1.0 and 2 * R <= w <= 16 * R


@pytest.mark.parametrize("seed", range(5))
def test_no_oscillation_under_noise(seed: int) -> None:
    """Window noise of 30%: in 280 steady periods at most one step up per
    MEMORY periods (plus one), and the objective is never missed by the
    noise-free plant at the target in force."""
    h = simulate(300, [1.0] * 300, seed, sigma=0.3)[20:]
    ups = sum(1 for _, _, a in h if a == "up")
    assert ups <= len(h) // auto.MEMORY + 1
    assert all(p <= 1.0 for _, p, _ in h)
    reversals = sum(1 for a, b in zip(h, h[1:]) if {a[2], b[2]} == {"up", "down"})
    assert reversals <= 2


@pytest.mark.parametrize("seed", range(5))
def test_reacts_to_a_step_in_load(seed: int) -> None:
    """Load 1.3 x from period 100 to 199: back within the objective in two
    periods; when it falls back, the write target comes down again (write
    bandwidth given back) within 60 periods."""
    load = [1.0] * 100 + [1.3] * 100 + [1.0] * 100
    h = simulate(300, load, seed)
    back = next(t for t in range(100, 200) if h[t][1] <= 1.0)
    assert back - 100 <= 2
    assert all(p <= 1.0 for _, p, _ in h[back:200])
    assert min(w for w, _, _ in h[200:260]) < h[199][0]


def test_idle_periods_hold_and_steps_respect_the_range() -> None:
    c = Controller(5 * R, R, 8 * R)
    assert c.update(None) == "idle" and c.w_ns == 5 * R
    assert c.update(1.25) == "up" and c.w_ns == 8 * R          # clamped to the maximum
    assert c.update(2.0) == "hold" and c.w_ns == 8 * R
    for _ in range(auto.MEMORY - 1):
        c.update(0.5)
    # the memory of the miss at 8 R keeps it at its floor (min(8R, 1.25 x 8R))
    assert c.w_ns == 8 * R
    for _ in range(3 * auto.MEMORY):
        c.update(0.5)
    assert c.w_ns == R                                          # then down to the minimum
    with pytest.raises(ValueError, match="write target range: need 0 < min <= max"):
        Controller(R, 2 * R, R)
    with pytest.raises(ValueError, match="controller steps: need up > 1"):
        Controller(R, R, 2 * R, up=0.9)


def test_calm_periods_probe_down_at_the_memory_pace() -> None:
    """Without a figure, MEMORY calm periods in a row are one step down; a
    period that is not calm (no reads, or a mean above CALM) or that has a
    figure starts the count again, so the first probe after a miss comes
    when its memory ends."""
    c = Controller(8 * R, R, 1000 * R)
    for _ in range(auto.MEMORY - 1):
        assert c.update(None, calm=True) == "hold"
    assert c.update(None) == "idle" and c.w_ns == 8 * R        # not calm: again
    for _ in range(auto.MEMORY - 1):
        c.update(None, calm=True)
    assert c.update(0.8) == "hold" and c.w_ns == 8 * R          # a figure: again
    for _ in range(auto.MEMORY - 1):
        c.update(None, calm=True)
    assert c.update(None, calm=True) == "down" and c.w_ns == int(8 * R * auto.DOWN)
    c = Controller(R, R, 1000 * R)
    assert c.update(1.5) == "up" and c.w_ns == 2 * R
    for _ in range(auto.MEMORY - 1):
        c.update(None, calm=True)
    assert c.w_ns == 2 * R                      # not before the memory of the miss ends
    assert c.update(None, calm=True) == "down" and c.w_ns == int(2 * R * auto.DOWN)


def test_slow_reader_write_target_comes_down_after_the_load_falls() -> None:
    """A reader too slow for Kyber's p99 (no figure ever): only the block
    layer's mean, 0.3 x its P99 here, speaks.  A load that puts the mean
    over the objective raises the write target until the mean is under
    it; when the load falls to an eighth, the calm periods bring the write
    target back to the minimum, one step per MEMORY periods, without ever
    putting the mean over the objective."""
    c = Controller(R, R, 1000 * R)
    hist = []
    for t in range(600):
        load = 4.0 if t < 100 else 0.5
        p99 = plant(c.w_ns, load, random.Random(t), 0.1)[1]
        ratio, sig = signal(None, 0.3 * p99)
        hist.append((c.w_ns, 0.3 * p99, c.update(ratio, calm=sig == "calm")))
    high = hist[99][0]
    assert high >= 3 * R and all(m <= 1.0 for _, m, _ in hist[20:100])
    assert all(m <= 1.0 for _, m, _ in hist[100:])
    assert hist[-1][0] == R
    downs = [t for t, (_, _, a) in enumerate(hist) if a == "down"]
    assert downs and all(b - a >= auto.MEMORY for a, b in zip(downs, downs[1:]))


def test_far_over_rises_with_the_miss() -> None:
    """A miss by r > 2 (the block layer's mean says so) steps the write
    target by r, up to 8x: from R to 500 R takes 3 periods at r = 8, where
    doublings take 9; a miss within Kyber's buckets (r <= 2) still doubles."""
    def periods(r: float) -> int:
        c = Controller(R, R, 1000 * R)
        n = 0
        while c.w_ns < 500 * R:
            assert c.update(r) == "up"
            n += 1
        return n
    assert periods(8.0) == 3 and periods(20.0) == 3
    assert periods(1.25) == periods(2.0) == 9
    assert periods(3.6) == 5
    c = Controller(R, R, 1000 * R)
    c.update(3.0)
    assert c.w_ns == 3 * R


def writes_report(p99_ns: int, w_ns: int) -> list[Window]:
    """Kyber's report of writes whose total p99 is @p99_ns under write
    target @w_ns: the bucket's bound in quarters, the last bucket beyond 7/4."""
    return [Window("WRITE", "total", 99, min(8, math.ceil(p99_ns * 4 / w_ns)), 4, 500)]


def test_write_bound_is_the_largest_reported_and_none_beyond_the_buckets() -> None:
    w = 8 * R
    assert write_bound([], w) is None
    assert write_bound([Window("READ", "total", 99, 1, 4, 500)], w) is None
    assert write_bound(writes_report(R, w) + writes_report(3 * R, w), w) == 4 * R  # 1/4, 2/4
    assert write_bound([Window("WRITE", "I/O", 90, 1, 4, 500)], w) is None
    assert write_bound(writes_report(2 * w, w), w) == math.inf      # beyond 7/4: no bound


def test_steps_up_stop_at_the_levers_reach() -> None:
    """Reads missing by 3x whatever the write target (a reader stalled for
    tags): without the writes' reports the target climbs to the top of its
    range; with them it stops once the writes' p99 is in the first bucket,
    at most 4 x the bound of that p99 (here 18 R for a 3 R p99), and holds."""
    blind = Controller(R, R, 1000 * R)
    for _ in range(10):
        blind.update(3.0)
    assert blind.w_ns == 1000 * R
    c = Controller(R, R, 1000 * R)
    actions = []
    for _ in range(10):
        actions.append(c.update(3.0, write_p99_ns=write_bound(writes_report(3 * R, c.w_ns),
                                                               c.w_ns)))
    assert actions[:3] == ["up"] * 3 and set(actions[3:]) == {"hold"}
    assert c.w_ns == 18 * R
    # the writes slower (more throttled, longer waits for tokens): room again
    assert c.update(3.0, write_p99_ns=write_bound(writes_report(9 * R, c.w_ns), c.w_ns)) == "up"
    assert c.w_ns == 36 * R
    # beyond Kyber's last bucket: no bound, so no reach to hold at
    assert c.update(3.0, write_p99_ns=write_bound(writes_report(80 * R, c.w_ns), c.w_ns)) == "up"
    assert c.w_ns == 108 * R


def test_quiet_periods_with_two_buckets_of_margin_step_down_by_half() -> None:
    c = Controller(16 * R, R, 1000 * R)
    assert [c.update(0.5) for _ in range(3)] == ["hold", "hold", "down"]
    assert c.w_ns == 8 * R
    assert [c.update(r) for r in (0.5, 0.75, 0.25)] == ["hold", "hold", "down"]
    assert c.w_ns == int(8 * R * auto.DOWN)


def test_signal_mean_stands_in_when_kyber_is_blind_or_lower() -> None:
    assert signal(None, 3.6) == (3.6, "mean")          # no Kyber report, mean over
    assert signal(1.25, 3.6) == (3.6, "mean")          # Kyber's bucket tops out at 2
    assert signal(2.0, 1.5) == (2.0, "kyber")
    assert signal(0.5, 0.9) == (0.5, "kyber")          # a mean under: Kyber's figure
    assert signal(None, 0.9) == (None, "")             # says nothing of the P99
    assert signal(None, 0.25) == (None, "calm")        # ... at most a quarter: calm
    assert signal(0.5, 0.1) == (0.5, "kyber")
    assert signal(None, None) == (None, "")
    assert signal(0.75, None) == (0.75, "kyber")


def test_stall_counts_readless_periods_after_reads() -> None:
    """No read completed while writes did, after periods with reads: the
    period's length over the objective, for at most 3 periods in a row;
    no reads before, or no writes either, is no figure."""
    st = Stall()
    assert st.update(0, 500, 1.0, 45000) is None           # no reader yet
    assert st.update(700, 0, 1.0, 45000) is None           # reads: fine
    assert st.update(0, 0, 1.0, 45000) is None             # nothing at all: idle device
    assert st.update(0, 800, 1.5, 45000) == pytest.approx(1.5e6 / 45000)
    assert st.update(0, 800, 1.0, 45000) == pytest.approx(1e6 / 45000)
    assert st.update(0, 800, 1.0, 45000) is not None
    assert st.update(0, 800, 1.0, 45000) is None           # a 4th: the reader may have gone
    assert st.update(0, 800, 1.0, 45000) is None
    assert st.update(3, 800, 1.0, 45000) is None           # back: counting starts again
    assert st.update(0, 800, 1.0, 45000) is not None
    assert signal(None, None, 22.0) == (22.0, "stall")
    assert signal(0.5, 0.2, None) == (0.5, "kyber")


def test_parse_and_ratio() -> None:
    text = """# tracer: nop
      kworker/0:1-12 [000] ..s1.  10.1: kyber_latency: 259,0 READ total p99 3/4 samples=500
      kworker/0:1-12 [000] ..s1.  10.1: kyber_latency: 259,0 READ I/O p90 2/4 samples=500
      kworker/0:1-12 [000] ..s1.  10.2: kyber_latency: 259,1 READ total p99 8/4 samples=900
      kworker/0:1-12 [000] ..s1.  10.2: kyber_latency: 259,0 WRITE total p99 8/4 samples=60
      kworker/0:1-12 [000] ..s1.  10.3: kyber_adjust: 259,0 WRITE 12
      kworker/0:1-12 [000] ..s1.  10.3: kyber_latency: 259,0 READ total p99 5/4 samples=1500
"""
    wins, depth = auto.parse(text, (259, 0))
    assert len(wins) == 4 and depth == {"WRITE": 12}
    r, n = read_ratio(wins)
    assert n == 2000 and r == pytest.approx((0.75 * 500 + 1.25 * 1500) / 2000)
    assert read_ratio([w for w in wins if w.domain == "WRITE"]) == (None, 0)
    # a slow reader: no total p99 yet, the device p90 over the target stands
    # in (a lower bound); under it, nothing is known
    io = [Window("READ", "I/O", 90, 7, 4, 12)]
    assert read_ratio(io) == (1.75, 12)
    assert read_ratio([Window("READ", "I/O", 90, 3, 4, 12)]) == (None, 0)
    assert read_ratio(io + [Window("READ", "total", 99, 8, 4, 500)]) == (2.0, 500)


class Live(KyberTarget):
    """kyber selected on fake0, with its block statistics."""

    def __init__(self, scheduler: str = "kyber") -> None:
        super().__init__()
        self.scheds["kyber"] = dict(self.loadable["kyber-iosched"][1])
        self.current = scheduler
        self.values = self._defaults(scheduler)
        self.reads = 0

    def run(self, script: str, timeout: float = 300.0) -> Result:
        s = script.strip()
        if s == "cat /sys/class/block/fake0/stat":
            self.reads += 1000
            return Result(0, f"{self.reads} 0 0 {self.reads // 2} 0 0 0 0 0 0 0\n")
        return super().run(script, timeout)


class Source:
    """The plant, read through the fake target's current write target;
    interrupts (as SIGTERM does) or fails after @n polls."""

    def __init__(self, t: Live, n: int, fail: BaseException = KeyboardInterrupt()) -> None:
        self.t, self.n, self.fail = t, n, fail
        self.rng = random.Random(1)
        self.seen: list[str] = []

    def poll(self) -> tuple[list[Window], dict[str, int]]:
        self.n -= 1
        if self.n < 0:
            raise self.fail
        self.seen.append(self.t.values["read_lat_nsec"])
        w = int(self.t.values["write_lat_nsec"])
        return plant(w, 1.0, self.rng, 0.1)[0], {"READ": 200, "WRITE": 3}


def test_run_tunes_logs_and_restores_on_a_signal(tmp_path: Path) -> None:
    t = Live()
    src = Source(t, 12)
    log = tmp_path / "log.csv"
    res = auto.run(t, "fake0", R / 1000, period=0.01, source=lambda *_: src,
                   sleep=lambda s: None, log=log)
    assert res.stopped_by == "signal" and len(res.rows) == 12
    assert set(src.seen) == {str(R)}                       # read target = the objective
    # 10 ms default write target: over the objective's 2 R need, held there
    assert res.rows[0].write_lat_nsec == 10 * R and res.rows[-1].read_depth == 200
    assert res.rows[0].mean_read_ms == 0.5
    # put back at the end: Kyber's defaults
    assert t.values == {"read_lat_nsec": "2000000", "write_lat_nsec": "10000000"}
    assert any("kyber targets back" in r for r in res.restored)
    rows = auto.load_log(log)
    assert [r.write_lat_nsec for r in rows] == [r.write_lat_nsec for r in res.rows]
    png = auto.plot(rows, R / 1000, tmp_path / "auto.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    s = auto.summary(rows, R / 1000)
    assert s["periods"] == 12 and s["over"] == 0


class Slow(Live):
    """Reading the statistics takes 0.3 s of the target's clock."""

    def run(self, script: str, timeout: float = 300.0) -> Result:
        if script.strip() == "cat /sys/class/block/fake0/stat":
            self.now += 0.3
        return super().run(script, timeout)


def test_periods_keep_their_cadence_on_the_targets_clock() -> None:
    """Periods start every --period of the target's clock (by default the
    target's own sleep and clock: the guest's in the VM), however long the
    period's own commands take, and --duration ends the run on that clock."""
    t = Slow()
    res = auto.run(t, "fake0", R / 1000, period=1.0, duration=5.0,
                   source=lambda *_: Source(t, 100))
    # a row's time is its statistics' (read 0.3 s after the first at 0.3)
    assert [r.t for r in res.rows] == [1.6, 2.6, 3.6, 4.6, 5.6]
    # commands longer than the period: the next starts at once
    t = Slow()
    res = auto.run(t, "fake0", R / 1000, period=0.2, duration=1.0,
                   source=lambda *_: Source(t, 100))
    assert [r.t for r in res.rows] == [0.8, 1.1]


def test_run_restores_after_an_error_and_needs_kyber(tmp_path: Path) -> None:
    t = Live()
    t.values["write_lat_nsec"] = "300"
    with pytest.raises(RuntimeError, match="boom"):
        auto.run(t, "fake0", 50, source=lambda *_: Source(t, 3, RuntimeError("boom")),
                 sleep=lambda s: None)
    assert t.values == {"read_lat_nsec": "2000000", "write_lat_nsec": "300"}
    other = Live("mq-deadline")
    with pytest.raises(DeviceError, match="uses mq-deadline, not kyber"):
        auto.run(other, "fake0", 50, source=lambda *_: Source(other, 3), sleep=lambda s: None)
    assert other.current == "mq-deadline"
    sel = Live("mq-deadline")
    del sel.scheds["kyber"]
    res = auto.run(sel, "fake0", 50, select=True, source=lambda *_: Source(sel, 2),
                   sleep=lambda s: None)
    assert len(res.rows) == 2 and sel.current == "mq-deadline"
    assert "kyber-iosched" not in sel.loaded
    with pytest.raises(ValueError, match="--read-p99-us and --period must be > 0"):
        auto.run(Live(), "fake0", 0)
