"""kyber-tune auto: keep a read-latency objective on a live device by
adjusting Kyber's targets, from Kyber's own latency histograms.

Signal.  Kyber keeps, per domain, a histogram of each request's total
latency in eight buckets of a quarter of that domain's target, and about
every 100 ms (once it has 500 samples, or after 1 s) reports its p99
bucket in the kyber_latency trace event: "READ total p99 N/4" means that
99% of the reads completed within N/4 of read_lat_nsec (N = 8: beyond
7/4).  (It reports the total p99 only once 500 reads have completed, see
read_ratio(); the device-latency p90, every second, stands in as a lower
bound when it is over the target.)  The tuner sets read_lat_nsec to the objective, so that these
events measure the read P99 against it directly (and Kyber's own
congestion check, a domain's p90 device latency above its target, aims at
it too), and records them in an ftrace instance of its own; every period
it reads them and clears them.  The period's estimate is the mean of the
reported bucket bounds, weighted by their samples: the ratio r of the read
P99 to the objective, in steps of 1/4.  No fio, no extra instrumentation.
The block layer's mean read latency over the period (/sys/block/<dev>/stat:
from a request's allocation to its completion, so with the time it waits
in Kyber) is logged beside it and stands in when it is over the objective
and Kyber's figure is not (signal()): a slow reader (a few reads a second
while a writer holds the device) can go many periods without a Kyber
report, and Kyber's bucket tops out at 2x the objective anyway.  A mean
over the objective is not a strict bound of the P99 (1% of reads far
slower than the rest could make it so with the P99 under the objective),
but a reader whose mean is over its P99 objective is in trouble by any
measure, and the mean comes every period that completes a read.
A period that completes no read at all while writes complete, right after
periods that completed reads, is a stall (Stall): a reader that was
there is most likely waiting for a tag behind the writer, where neither
Kyber nor the block layer's counters see it, and has waited the whole
period; the period's length over the objective stands in for r.  At most
STALL_PERIODS such periods in a row count (then the reader may simply have
stopped: idle).  A reader that stops costs little: with no reads Kyber
sees no read latency to protect and does not throttle writes, whatever
the write target.

Lever.  The write target.  When Kyber sees congestion it throttles the
domains whose latency is good against their own target and lets the others
deepen (block/kyber-iosched.c, kyber_timer_fn): a write target well above
the writes' latency makes writes "good", so they are the ones throttled
when reads suffer; a write target below it makes them "bad", and they get
more depth.  So raising write_lat_nsec protects reads, lowering it gives
writes their bandwidth back.

Controller (multiplicative, with a dead band and a memory):
- r > 1 (the P99 bucket, or the mean, is above the objective): write
  target x max(UP, min(r, MAX_UP)) (2 to 8: far over, the step is as large
  as the miss), at once, and remember: for MEMORY periods (30) the write target does not
  go back below 1.25 x the value that just missed;
- r <= 3/4 for QUIET (3) periods in a row: write target x DOWN (0.8),
  or x DEEP (0.5) when none of them was over 1/2 (two buckets of margin
  or more), never below that floor nor --write-min-us;
- 3/4 < r <= 1 (the bucket just under the objective): hold;
- a period without read samples: hold (nothing to judge);
- a calm period (reads completed, the block layer's mean read latency at
  most CALM (1/4) of the objective, and no figure from Kyber, as a reader
  of a few reads a second has for good, since Kyber reports its total p99
  only after 500 reads): MEMORY of them in a row are a step down (x DOWN),
  never below the floor.  A mean says nothing strict of the P99, so calm
  periods only probe, at the pace the memory probes at: at most one
  missed period per MEMORY, and without them a slow reader's write target
  could only ever rise.
- the lever's reach: Kyber throttles a congested device's domains whose
  total p99 is under their target by the p99's bucket, (bucket + 1) / 4
  of their depth a window, so once the writes' p99 is in the first bucket
  (at most 1/4 of the write target) any higher target throttles them
  exactly as hard.  The WRITE domain's own p99 reports bound that reach:
  4 x their bound (p99 <= num/4 of the target in force).  A step up stops
  there (hold at it): with the reader stalled behind the writer for tags,
  where no write target helps, steps of up to 8x had taken the target
  from 45 ms to 37 s in 7 periods, a value that three-period steps of 0.8
  take minutes to bring back to where it acts again (writes whose p99 is
  over their target get depth back).
Why it does not oscillate: the dead band is a whole bucket wide, so one
write target cannot satisfy both the up and the down rule; a step down
needs three quiet periods and is 5x smaller (in log terms) than a step up
(as large as the smallest one only with two buckets of margin in all three),
so after a miss the target settles above the value that missed instead of
hunting around it; and the memory keeps it there for 30 periods.  When the
memory ends the tuner probes lower again: in a steady load that costs at
most one missed period per MEMORY periods, and gives write bandwidth back
when the load has become lighter.  When the load rises, the first period
over the objective at least doubles the write target (log2(range) periods
at most to reach the top of the range, log8(range) when far over)."""
from __future__ import annotations

import csv
import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TextIO

from bench import device as devmod
from bench.device import DeviceError
from bench.runner import Cleanups, sigterm_as_interrupt
from bench.target import Target, q
from bench.trace import EventSpec, Ftrace

UP, MAX_UP, DOWN, QUIET, MEMORY, FLOOR_MARGIN = 2.0, 8.0, 0.8, 3, 30, 1.25
DEEP, DEEP_BELOW = 0.5, 0.5   # the step down when every quiet r was at most DEEP_BELOW
REACH_BUCKETS = 4       # Kyber's buckets per target (KYBER_LATENCY_SHIFT 2)
CALM = 0.25              # mean read latency / objective at most this: calm
IN_BAND = 0.75           # r above this (and up to 1): hold
STALL_PERIODS = 3        # readless periods in a row that count as a stall
EVENTS = [EventSpec("kyber", "kyber_latency"), EventSpec("kyber", "kyber_adjust")]
LINE = re.compile(r"kyber_latency: (\d+),(\d+) (\w+) (\S+) p(\d+) (\d+)/(\d+) samples=(\d+)")
ADJUST = re.compile(r"kyber_adjust: (\d+),(\d+) (\w+) (\d+)")


@dataclass
class Controller:
    """The write target's controller (module docstring); targets in ns."""
    w_ns: int
    w_min_ns: int
    w_max_ns: int
    up: float = UP
    down: float = DOWN
    quiet_needed: int = QUIET
    memory: int = MEMORY
    quiet: int = 0
    floor_ns: int = 0
    floor_left: int = 0
    calm: int = 0           # calm periods in a row (update(calm=True))
    quiet_max: float = 0.0  # the largest r of the quiet periods in a row
    reach_ns: float | None = None   # a higher write target throttles writes no harder

    def __post_init__(self) -> None:
        if not 0 < self.w_min_ns <= self.w_max_ns:
            raise ValueError("write target range: need 0 < min <= max")
        if not (self.up > 1 and 0 < self.down < 1 and self.quiet_needed >= 1):
            raise ValueError("controller steps: need up > 1, 0 < down < 1, quiet >= 1")
        self.w_ns = min(max(self.w_ns, self.w_min_ns), self.w_max_ns)

    def update(self, ratio: float | None, calm: bool = False,
               write_p99_ns: float | None = None) -> str:
        """One period's read-P99-to-objective ratio (None: no samples) and,
        without one, whether the period was calm, and the largest bound of
        the writes' p99 Kyber reported in it (write_bound(); None: none,
        the last one stands; infinity: no bound, no reach); the action
        taken: up, down, hold, idle."""
        if write_p99_ns is not None:
            self.reach_ns = REACH_BUCKETS * write_p99_ns
        if self.floor_left > 0:
            self.floor_left -= 1
        if ratio is None:
            self.calm = self.calm + 1 if calm else 0
            if self.calm < self.memory:
                return "hold" if calm else "idle"
            self.calm = 0
            return self._down(self.down)
        self.calm = 0
        if ratio > 1.0:
            self.quiet = 0
            self.floor_ns = min(self.w_max_ns, math.ceil(self.w_ns * FLOOR_MARGIN))
            self.floor_left = self.memory
            step = max(self.up, min(ratio, MAX_UP))
            new = min(self.w_max_ns, math.ceil(self.w_ns * step))
            if self.reach_ns is not None and self.reach_ns < new:
                new = max(self.w_ns, math.ceil(self.reach_ns))
            moved = new != self.w_ns
            self.w_ns = new
            return "up" if moved else "hold"
        if ratio > IN_BAND:
            self.quiet = 0
            return "hold"
        self.quiet += 1
        self.quiet_max = ratio if self.quiet == 1 else max(self.quiet_max, ratio)
        if self.quiet < self.quiet_needed:
            return "hold"
        self.quiet = 0
        return self._down(DEEP if self.quiet_max <= DEEP_BELOW else self.down)

    def _down(self, factor: float) -> str:
        low = max(self.w_min_ns, self.floor_ns if self.floor_left > 0 else 0)
        new = max(low, int(self.w_ns * factor))
        if new >= self.w_ns:
            return "hold"
        self.w_ns = new
        return "down"


@dataclass(frozen=True)
class Window:
    """One kyber_latency report: domain, type, percentile, bucket bound
    (numerator / denominator of the target), samples."""
    domain: str
    kind: str
    pct: int
    num: int
    den: int
    samples: int


def parse(text: str, devt: tuple[int, int]) -> tuple[list[Window], dict[str, int]]:
    """The kyber_latency reports and the last kyber_adjust depth per domain
    for device @devt (major, minor) in a trace's text."""
    wins, depth = [], {}
    for line in text.splitlines():
        m = LINE.search(line)
        if m and (int(m.group(1)), int(m.group(2))) == devt:
            wins.append(Window(m.group(3), m.group(4), int(m.group(5)), int(m.group(6)),
                               int(m.group(7)), int(m.group(8))))
            continue
        m = ADJUST.search(line)
        if m and (int(m.group(1)), int(m.group(2))) == devt:
            depth[m.group(3)] = int(m.group(4))
    return wins, depth


def write_bound(wins: list[Window], w_ns: int) -> float | None:
    """The largest bound of the writes' total p99 in Kyber's reports
    @wins, made while the write target was @w_ns (ns); None without one,
    infinity when one was in the last bucket (beyond 7/4: no bound)."""
    rep = _reports(wins, "WRITE", "total", 99)
    if not rep:
        return None
    if any(w.num >= 2 * w.den for w in rep):
        return math.inf
    return max(math.ceil(w_ns * w.num / w.den) for w in rep)


def _reports(wins: list[Window], domain: str, kind: str, pct: int) -> list[Window]:
    """@domain's reports of its @kind latency's @pct percentile in @wins."""
    return [w for w in wins if w.domain == domain and w.kind == kind and w.pct == pct
            and w.den > 0]


def _weighted(wins: list[Window], kind: str, pct: int) -> tuple[float | None, int]:
    rd = _reports(wins, "READ", kind, pct)
    n = sum(w.samples for w in rd)
    if not rd or n == 0:
        return None, 0
    return sum(w.num / w.den * w.samples for w in rd) / n, n


def read_ratio(wins: list[Window]) -> tuple[float | None, int]:
    """The period's read P99 as a ratio of the read target and the samples
    behind it: the reported total-latency p99 bucket bounds' mean weighted
    by samples.  Kyber reports that p99 only once 500 reads have completed
    (its one-second timeout is shared with the device-latency p90 of the same
    domain, which is computed first and restarts it), so a slow reader can
    go many periods without one; the device-latency p90 comes every second.
    It is a lower bound of the total p99: above the target, the P99 is too,
    and that value counts.  Otherwise no figure (None)."""
    p99, n = _weighted(wins, "total", 99)
    p90, m = _weighted(wins, "I/O", 90)
    if p90 is not None and p90 > 1.0 and (p99 is None or p90 > p99):
        return p90, m
    return p99, n


@dataclass
class Stall:
    """Periods that complete no read while writes complete, after periods
    that completed reads (module docstring)."""
    limit: int = STALL_PERIODS
    reading: bool = False       # the last period with completions had reads
    run: int = 0

    def update(self, reads: int, writes: int, seconds: float, objective_us: float
               ) -> float | None:
        """The stall's ratio for this period (its length over the
        objective) or None."""
        if reads > 0:
            self.reading, self.run = True, 0
            return None
        if writes == 0 or not self.reading:
            return None
        self.run += 1
        if self.run > self.limit:
            self.reading = False
            return None
        return seconds * 1e6 / objective_us


def signal(kyber: float | None, mean: float | None, stall: float | None = None
           ) -> tuple[float | None, str]:
    """The controller's input for a period and where it came from: a stall
    (@stall, a ratio: no read completed), Kyber's figure (read_ratio()),
    or the block layer's mean read latency over the objective (@mean, a
    ratio) when that is over 1 and above Kyber's (or Kyber has none).  A
    mean under the objective alone says nothing of the P99: no figure then,
    "calm" when it is at most CALM (Controller.update(calm=True))."""
    if stall is not None:
        return stall, "stall"
    if mean is not None and mean > 1.0 and (kyber is None or mean > kyber):
        return mean, "mean"
    if kyber is None and mean is not None and mean <= CALM:
        return None, "calm"
    return kyber, "kyber" if kyber is not None else ""


class Source(Protocol):
    def poll(self) -> tuple[list[Window], dict[str, int]]: ...


class KyberEvents:
    """kyber_latency and kyber_adjust of one device, recorded in an ftrace
    instance of the tuner's own (removed at the end)."""

    def __init__(self, target: Target, dev: str, on_exit: Callable[[str, Callable[[], None]],
                                                                      None]):
        self.t = target
        mm = target.check(f"cat /sys/class/block/{q(dev)}/dev", what="reading dev_t").strip()
        major, minor = mm.split(":")
        self.devt = (int(major), int(minor))
        self.ft = Ftrace(target, buffer_kb=1024)
        self.ft.tag = f"kyber-tune-{dev}"
        avail = self.ft.setup(on_exit)
        if "kyber_latency" not in avail.get("kyber", set()):
            raise DeviceError("the kernel has no kyber trace events (kyber_latency): "
                              "load kyber-iosched first")
        self.ft.prepare(EVENTS, "auto")
        self.t.check(self.ft.start_cmd(), what="starting the trace")

    def poll(self) -> tuple[list[Window], dict[str, int]]:
        i = self.ft.inst
        text = self.t.check(f"cat {i}/trace; echo > {i}/trace", what="reading the trace")
        return parse(text, self.devt)


@dataclass
class Row:
    t: float
    read_lat_nsec: int
    write_lat_nsec: int
    ratio: float | None
    p99_bound_us: float | None
    samples: int
    mean_read_ms: float | None
    read_depth: int | None
    write_depth: int | None
    action: str
    signal: str = ""        # where ratio came from: kyber, mean, stall; calm, "" (none)
    write_p99_us: float | None = None   # Kyber's bound of the writes' p99 (write_bound())


@dataclass
class AutoResult:
    rows: list[Row] = field(default_factory=list)
    restored: list[str] = field(default_factory=list)
    stopped_by: str = "duration"


def _stat(target: Target, dev: str) -> tuple[int, int, int]:
    """(reads completed, ms spent reading, writes completed) from
    /sys/block/<dev>/stat."""
    f = target.check(f"cat /sys/class/block/{q(dev)}/stat").split()
    return int(f[0]), int(f[3]), int(f[4])


def run(target: Target, device: str, objective_us: float, period: float = 1.0,
        duration: float = 0.0, w_min_us: float | None = None, w_max_us: float | None = None,
        select: bool = False, out: TextIO | None = None,
        source: Callable[[Target, str, Callable[[str, Callable[[], None]], None]], Source]
        | None = None, sleep: Callable[[float], None] | None = None,
        log: Path | None = None, clock: Callable[[], float] | None = None,
        memory: int = MEMORY) -> AutoResult:
    """Tune /dev/@device until @duration seconds have passed (0: until
    Ctrl-C or SIGTERM); the targets and the scheduler are put back at the
    end, also after an error.  @memory: the controller's memory in periods
    (module docstring).  Each period's row goes to @out and to the
    CSV @log as it happens.  Periods and @duration are of the target's
    clock (@sleep and @clock, by default the target's: a VM's own, which
    with --icount counts instructions)."""
    sleep = sleep or target.sleep
    clock = clock or target.clock
    if objective_us <= 0 or period <= 0 or duration < 0:
        raise ValueError("--read-p99-us and --period must be > 0, --duration >= 0")
    dev = devmod.resolve(target, device)
    obj_ns = round(objective_us * 1000)
    w_min = round((w_min_us if w_min_us is not None else objective_us) * 1000)
    w_max = round((w_max_us if w_max_us is not None else 1000 * objective_us) * 1000)
    cleanups = Cleanups(out) if out is not None else Cleanups()
    res = AutoResult()
    saved = devmod.save_state(target, dev)
    try:
        with sigterm_as_interrupt():
            if saved.scheduler != "kyber":
                if not select:
                    raise DeviceError(f"/dev/{dev} uses {saved.scheduler}, not kyber: select "
                                      "kyber first, or pass --select (the scheduler is put "
                                      "back at the end)")
                if devmod.offer_scheduler(target, dev, "kyber", "kyber-iosched"):
                    cleanups.add("module kyber-iosched unloaded (if unused)",
                                 lambda: _unload(target))
                cleanups.add(f"/dev/{dev} back to {saved.scheduler}",
                             lambda: _restore(target, saved))
                devmod.set_scheduler(target, dev, "kyber")
            else:
                cleanups.add(f"/dev/{dev}'s kyber targets back to "
                             f"read_lat_nsec={saved.tunables.get('read_lat_nsec')} "
                             f"write_lat_nsec={saved.tunables.get('write_lat_nsec')}",
                             lambda: _restore(target, saved))
            w0 = int(devmod.read_attr(target, dev, "write_lat_nsec"))
            ctl = Controller(w0, w_min, w_max, memory=memory)
            devmod.set_tunable(target, dev, "read_lat_nsec", obj_ns)
            devmod.set_tunable(target, dev, "write_lat_nsec", ctl.w_ns)
            src = (source or KyberEvents)(target, dev, cleanups.add)
            writer = _csv(log)
            t0 = clock()
            last = _stat(target, dev)
            t_last = clock()
            stall = Stall()
            depth: dict[str, int] = {}
            due = t_last
            while duration == 0 or t_last - t0 < duration:
                # periods start every @period: the reads and writes of the
                # one before (guest commands, in the VM) come off the wait
                due = max(due + period, t_last)
                if due > t_last:
                    sleep(due - t_last)
                wins, d = src.poll()
                depth.update(d)
                kyber, n = read_ratio(wins)
                now, t_now = _stat(target, dev), clock()
                reads, ms, writes = (now[i] - last[i] for i in range(3))
                stalled = stall.update(reads, writes, t_now - t_last, objective_us)
                last, t_last = now, t_now
                mean_ms = ms / reads if reads > 0 else None
                ratio, sig = signal(kyber, None if mean_ms is None
                                    else mean_ms * 1000 / objective_us, stalled)
                w_before = ctl.w_ns
                wb = write_bound(wins, w_before)
                action = ctl.update(ratio, calm=sig == "calm", write_p99_ns=wb)
                if ctl.w_ns != w_before:
                    devmod.set_tunable(target, dev, "write_lat_nsec", ctl.w_ns)
                row = Row(round(t_now - t0, 2), obj_ns, ctl.w_ns, ratio,
                          None if kyber is None else kyber * objective_us, n, mean_ms,
                          depth.get("READ"), depth.get("WRITE"), action, sig,
                          None if wb is None or math.isinf(wb) else wb / 1000)
                res.rows.append(row)
                if writer is not None:
                    writer(row)
                if out is not None:
                    print(fmt_row(row), file=out, flush=True)
    except KeyboardInterrupt:
        res.stopped_by = "signal"
    finally:
        res.restored = cleanups.run()
    return res


def _unload(target: Target) -> None:
    devmod.unload_module(target, "kyber-iosched")


def _restore(target: Target, saved: devmod.SavedState) -> None:
    failed = devmod.restore_state(target, saved)
    if failed:
        raise DeviceError("; ".join(failed))


FIELDS = ["t", "read_lat_nsec", "write_lat_nsec", "ratio", "p99_bound_us", "samples",
          "mean_read_ms", "read_depth", "write_depth", "action", "signal", "write_p99_us"]


def _csv(path: Path | None) -> Callable[[Row], None] | None:
    if path is None:
        return None
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as f:
        csv.writer(f).writerow(FIELDS)

    def write(row: Row) -> None:
        with path.open("a", newline="") as f:
            csv.writer(f).writerow(["" if getattr(row, k) is None else getattr(row, k)
                                    for k in FIELDS])
    return write


def fmt_row(r: Row) -> str:
    if r.signal == "calm":
        p = "no P99, mean read calm"
    elif r.ratio is None:
        p = "no reads" if r.mean_read_ms is None else "no P99 figure"
    elif r.signal == "mean":
        p = f"mean read over objective ({r.ratio:.2f})"
    elif r.signal == "stall":
        p = f"no read completed ({r.ratio:.2f})"
    else:
        p = f"read P99 <= {r.p99_bound_us:.0f} us ({r.ratio:.2f})"
    return (f"{r.t:7.1f} s  {p:32s} write_lat_nsec {r.write_lat_nsec:>11d}  {r.action}"
            + (f"  (mean read {r.mean_read_ms:.2f} ms)" if r.mean_read_ms is not None else ""))


def load_log(path: Path) -> list[Row]:
    rows = []
    with path.open() as f:
        for rec in csv.DictReader(f):
            def num(k: str, cast: Callable[[str], Any] = float) -> Any:
                return cast(rec[k]) if rec[k] != "" else None
            rows.append(Row(float(rec["t"]), int(rec["read_lat_nsec"]),
                            int(rec["write_lat_nsec"]), num("ratio"), num("p99_bound_us"),
                            int(rec["samples"]), num("mean_read_ms"), num("read_depth", int),
                            num("write_depth", int), rec["action"], rec.get("signal", ""),
                            num("write_p99_us") if rec.get("write_p99_us") else None))
    return rows


def plot(rows: list[Row], objective_us: float, path: Path) -> Path:
    """Targets and the measured read P99 bound over time (PNG)."""
    from bench.plot import figure, save
    fig, ax = figure(1, 2, width=7.5, height=2.6)
    t = [r.t for r in rows]
    a = ax[0][0]
    a.step(t, [r.p99_bound_us / 1000 if r.p99_bound_us is not None else math.nan
               for r in rows], where="post", label="read P99 (Kyber's bucket bound)")
    a.plot(t, [r.mean_read_ms if r.mean_read_ms is not None else math.nan for r in rows],
           lw=0.8, alpha=0.7, label="mean read latency (block layer)")
    a.axhline(objective_us / 1000, color="tab:red", ls="--", lw=1, label="objective")
    a.set_ylabel("ms")
    a.legend(fontsize=7)
    a.grid(alpha=0.3)
    b = ax[1][0]
    b.step(t, [r.write_lat_nsec / 1e6 for r in rows], where="post", color="tab:green",
           label="write_lat_nsec")
    b.step(t, [r.read_lat_nsec / 1e6 for r in rows], where="post", color="tab:purple",
           label="read_lat_nsec")
    b.plot(t, [r.write_p99_us / 1000 if r.write_p99_us is not None else math.nan
               for r in rows], ".", ms=3, color="tab:olive",
           label="writes' p99 (Kyber's bucket bound)")
    b.set_yscale("log")
    b.set_ylabel("target (ms)")
    b.set_xlabel("time (s)")
    b.legend(fontsize=7)
    b.grid(alpha=0.3)
    save(fig, path)
    return path


def summary(rows: list[Row], objective_us: float, settle: float = 0.0) -> dict[str, Any]:
    """After @settle seconds: the share of periods over the objective, the
    write target's range and its median."""
    after = [r for r in rows if r.t >= settle and r.ratio is not None]
    ws = sorted(r.write_lat_nsec for r in after)
    return {"objective_us": objective_us, "periods": len(after),
            "over": sum(1 for r in after if r.ratio is not None and r.ratio > 1.0),
            "write_lat_nsec": {"min": ws[0], "median": ws[len(ws) // 2], "max": ws[-1]}
            if ws else None,
            "actions": {a: sum(1 for r in rows if r.action == a)
                        for a in ("up", "down", "hold", "idle")}}


def dumps(d: dict[str, Any]) -> str:
    return json.dumps(d, indent=1)
