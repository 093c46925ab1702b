"""Per-request latency breakdown from a scheduler trace (ftrace text or LTTng CTF),
each task's share of a FlashFQ device, and the die usage of an ssdsim trace.

Every scheduler's trace system follows one life cycle, which is what this
module joins on: <sys>_insert (a request enters a staging queue),
<sys>_dispatch (it leaves for the device), <sys>_complete (it finished),
<sys>_requeue (the driver gave it back), each carrying dev, hctx, tag,
sector, nr_sector and rwbs, and queue where the scheduler has classes (k2;
a system without one, flashfq, has the one class "all"); a request is
(dev, hctx, tag) while it lives.  Other events of the system are decisions
and are counted.  Times come from the trace's own timestamps, so staged +
device = total exactly; the kernel's staged_ns/device_ns fields are
reported beside them as a check.

flashfq's events also carry the task (the pid that created the request's
I/O context) and the request's charge: service() sums the charges each
task was dispatched per time window against its fair share, and counts the
scheduler's holds, anticipations and virtual time (service_markdown(),
service_plot()).

cars's events carry the flow (the I/O context's creator, as flashfq's
task) and the request's predicted dies; cars_markdown() counts its
predictions per die, its skips per reason, forced dispatches, and each
flow's requests and latency.

ssdsim (the emulated SSD, not a scheduler) has its own events: requests
(ssdsim_queue, ssdsim_complete) and the flash work of its dies
(ssdsim_die_op, ssdsim_gc), which die_usage() sums per die.
"""
from __future__ import annotations

import gzip
import math
import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

Value = int | str


@dataclass(frozen=True)
class Event:
    ts_ns: int
    name: str
    fields: dict[str, Value]


@dataclass
class Trace:
    events: list[Event]
    lost: int = 0            # events the tracer reported as lost or discarded
    source: str = ""


@dataclass
class Request:
    dev: str
    queue: int                         # -1: the system has no classes
    rwbs: str
    sector: int
    nr_sector: int
    insert_ns: int
    dispatch_ns: int = -1
    complete_ns: int = -1
    requeues: int = 0
    kernel_staged_ns: int = -1
    kernel_device_ns: int = -1
    task: int = -1                     # flashfq task, cars flow: the I/O context's creator

    @property
    def staged_ns(self) -> int:
        return self.dispatch_ns - self.insert_ns

    @property
    def device_ns(self) -> int:
        return self.complete_ns - self.dispatch_ns

    @property
    def total_ns(self) -> int:
        return self.complete_ns - self.insert_ns


@dataclass
class Breakdown:
    requests: list[Request]            # complete ones, in completion order
    unfinished: int                    # inserted but not completed in the trace
    orphans: int                       # dispatch/complete without an insert
    decisions: Counter[str] = field(default_factory=Counter)
    lost: int = 0
    merged: int = 0                    # inserted, then gone undispatched (merged away)


# -- reading ----------------------------------------------------------------------

# "   fio-215   [001] d..1.   123.456789: k2_insert: 259,1 hctx=0 ..."
FTRACE_LINE = re.compile(r"^\s*(?P<task>.+?)-(?P<pid>\d+)\s+\[(?P<cpu>\d+)\]\s+(?:\S+\s+)?"
                         r"(?P<ts>\d+\.\d+):\s+(?P<name>\w+):\s+(?P<body>.*)$")
# perf script: "   fio   215 [001]   123.456789:   k2:k2_insert: 259,1 hctx=0 ..."
PERF_LINE = re.compile(r"^\s*(?P<task>.+?)\s+(?P<pid>\d+)\s+\[(?P<cpu>\d+)\]\s+"
                       r"(?P<ts>\d+\.\d+):\s+\w+:(?P<name>\w+):\s+(?P<body>.*)$")
FTRACE_LOST = re.compile(r"\[LOST (\d+) EVENTS\]")
RQ_PREFIX = re.compile(r"^(?P<dev>\d+,\d+) hctx=(?P<hctx>\d+) tag=(?P<tag>-?\d+) "
                       r"(?P<rwbs>\S+) (?P<sector>\d+)\+(?P<nr_sector>\d+) (?P<rest>.*)$")
DEV_PREFIX = re.compile(r"^(?P<dev>\d+,\d+) (?P<rest>.*)$")
KV = re.compile(r"(\w+)=(\S+)")


def _num(v: str) -> Value:
    try:
        return int(v)
    except ValueError:
        return v


def parse_ftrace_body(body: str) -> dict[str, Value]:
    """Fields of one event's printed text (the format of the TP_printk lines)."""
    fields: dict[str, Value] = {}
    m = RQ_PREFIX.match(body)
    if m:
        fields.update({k: _num(v) for k, v in m.groupdict().items() if k not in ("rest", "dev")})
        fields["dev"] = m.group("dev")
        rest = m.group("rest")
    else:
        m = DEV_PREFIX.match(body)
        if m:
            fields["dev"] = m.group("dev")
            rest = m.group("rest")
        else:
            rest = body
    for k, v in KV.findall(rest):
        fields[k] = _num(v)
    return fields


def read_ftrace(text: str, system: str) -> Trace:
    """ftrace's text (tracefs trace or trace_pipe), or `perf script` output."""
    events: list[Event] = []
    lost = 0
    for line in text.splitlines():
        lm = FTRACE_LOST.search(line)
        if lm:
            lost += int(lm.group(1))
            continue
        m = FTRACE_LINE.match(line) or PERF_LINE.match(line)
        if not m or not m.group("name").startswith(system + "_"):
            continue
        secs, frac = m.group("ts").split(".")
        ts = int(secs) * 1_000_000_000 + int(frac.ljust(9, "0")[:9])
        events.append(Event(ts, m.group("name"), parse_ftrace_body(m.group("body"))))
    return Trace(events, lost, "ftrace")


def read_ctf(path: Path, system: str) -> Trace:
    """An LTTng kernel trace (CTF), through babeltrace2's Python bindings."""
    import bt2  # Debian python3-bt2

    events: list[Event] = []
    lost = 0
    for msg in bt2.TraceCollectionMessageIterator(str(path)):
        if type(msg) is bt2._EventMessageConst:
            name = msg.event.name
            if not name.startswith(system + "_"):
                continue
            fields: dict[str, Value] = {}
            for k, v in msg.event.payload_field.items():
                if isinstance(v, bt2._StringFieldConst):
                    fields[str(k)] = str(v)
                elif isinstance(v, bt2._EnumerationFieldConst) and v.labels:
                    fields[str(k)] = str(v.labels[0])  # as ftrace prints it
                else:
                    fields[str(k)] = int(v)
            dev = fields.get("dev")
            if isinstance(dev, int):  # dev_t as the kernel encodes it
                fields["dev"] = f"{dev >> 20},{dev & 0xfffff}"
            ts = msg.default_clock_snapshot.ns_from_origin
            events.append(Event(ts, name, fields))
        elif type(msg) is bt2._DiscardedEventsMessageConst:
            lost += msg.count or 1
    return Trace(events, lost, "lttng")


def read_trace(path: Path, system: str) -> Trace:
    """A CTF trace directory, or an ftrace text file (gzip'd if it ends in .gz)."""
    if path.is_dir():
        return read_ctf(path, system)
    if path.suffix == ".gz":
        with gzip.open(path, "rt", errors="replace") as f:
            return read_ftrace(f.read(), system)
    return read_ftrace(path.read_text(errors="replace"), system)


# -- joining -----------------------------------------------------------------------

LIFECYCLE = ("insert", "dispatch", "complete", "requeue")
RqKey = tuple[Value, Value, Value]


def rq_key(f: dict[str, Value]) -> RqKey:
    """A request while it lives: (dev, hctx, tag)."""
    return (f["dev"], f["hctx"], f["tag"])


def reused(rq: Request | None) -> bool:
    """An insert on @rq's key is a new request, @rq having left undispatched
    (merged into another: no event says so).  A re-insert after a requeue
    is the same request, which keeps its first time."""
    return rq is not None and rq.dispatch_ns < 0 and not rq.requeues


def breakdown(trace: Trace, system: str) -> Breakdown:
    live: dict[RqKey, Request] = {}
    done: list[Request] = []
    orphans = merged = 0
    decisions: Counter[str] = Counter()
    for ev in sorted(trace.events, key=lambda e: e.ts_ns):
        kind = ev.name[len(system) + 1:]
        f = ev.fields
        if kind not in LIFECYCLE:
            decisions[kind] += 1
            continue
        key = rq_key(f)
        rq = live.get(key)
        if kind == "insert":
            if reused(rq):
                merged += 1
                rq = None
            if rq is None:   # a re-insert after a requeue keeps its first time
                live[key] = Request(str(f["dev"]), int(f.get("queue", -1)), str(f["rwbs"]),
                                    int(f["sector"]), int(f["nr_sector"]), ev.ts_ns,
                                    task=int(f.get("task", f.get("flow", -1))))
        elif rq is None:
            orphans += 1
        elif kind == "dispatch":
            rq.dispatch_ns = ev.ts_ns
            rq.kernel_staged_ns = int(f.get("staged_ns", -1))
        elif kind == "requeue":
            rq.requeues += 1
            decisions["requeue"] += 1
        elif kind == "complete":
            if rq.dispatch_ns < 0:
                orphans += 1
            else:
                rq.complete_ns = ev.ts_ns
                rq.kernel_device_ns = int(f.get("device_ns", -1))
                done.append(rq)
            del live[key]
    return Breakdown(done, len(live), orphans, decisions, trace.lost, merged)


# -- statistics and the report ----------------------------------------------------------

PCTS = (50.0, 90.0, 99.0, 99.9)


def queue_name(q: int) -> str:
    if q < 0:
        return "all"
    return f"rt{q}" if q < 8 else "be"


def percentile(sorted_vals: list[int], p: float) -> float:
    """Nearest-rank percentile of a sorted list."""
    if not sorted_vals:
        return math.nan
    k = max(0, math.ceil(p / 100.0 * len(sorted_vals)) - 1)
    return float(sorted_vals[min(k, len(sorted_vals) - 1)])


def per_class(bd: Breakdown) -> dict[str, dict[str, Any]]:
    groups: dict[str, list[Request]] = defaultdict(list)
    for rq in bd.requests:
        groups[queue_name(rq.queue)].append(rq)
    out: dict[str, dict[str, Any]] = {}
    for name in sorted(groups, key=lambda n: (n == "be", n)):
        out[name] = latencies(groups[name])
    return out


def latencies(rqs: list[Request]) -> dict[str, Any]:
    """Count, and staged / device / total percentiles and max of @rqs (not empty)."""
    row: dict[str, Any] = {"count": len(rqs)}
    for what in ("staged", "device", "total"):
        vals = sorted(getattr(r, what + "_ns") for r in rqs)
        row[what] = {p: percentile(vals, p) for p in PCTS} | {"max": float(vals[-1])}
    return row


def markdown(bd: Breakdown, system: str, title: str = "") -> str:
    lines = [f"# {title or system + ' trace report'}", ""]
    lines.append(f"Requests completed: {len(bd.requests)}; still staged or in the device at "
                 f"the end: {bd.unfinished}; merged away before dispatch: {bd.merged}; "
                 f"events without their request's insert: "
                 f"{bd.orphans}; events lost by the tracer: {bd.lost}"
                 + (" (**the numbers below miss those requests**)" if bd.lost else "") + ".")
    lines.append("")
    lines.append("| class | requests | staged p50 / p99 / p99.9 (ms) | device p50 / p99 / p99.9 "
                 "(ms) | total p50 / p99 / p99.9 / max (ms) |")
    lines.append("|---|---|---|---|---|")
    for name, row in per_class(bd).items():
        def ms(what: str, keys: tuple[Any, ...]) -> str:
            return " / ".join(f"{row[what][k] / 1e6:.3f}" for k in keys)
        lines.append(f"| {name} | {row['count']} | {ms('staged', (50.0, 99.0, 99.9))} | "
                     f"{ms('device', (50.0, 99.0, 99.9))} | "
                     f"{ms('total', (50.0, 99.0, 99.9, 'max'))} |")
    lines.append("")
    if bd.decisions:
        lines.append("Decisions: " + ", ".join(f"{k} {v}" for k, v in sorted(bd.decisions.items())))
        lines.append("")
    return "\n".join(lines)


def plot(bd: Breakdown, trace: Trace, system: str, outdir: Path) -> list[Path]:
    """Latency CDFs per class, and the in-flight count over time against the bound."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    outs = []
    fig, axes = plt.subplots(1, 3, figsize=(13, 4), sharey=True)
    groups: dict[str, list[Request]] = defaultdict(list)
    for rq in bd.requests:
        groups[queue_name(rq.queue)].append(rq)
    for ax, what in zip(axes, ("staged", "device", "total")):
        for name, rqs in sorted(groups.items()):
            vals = sorted(getattr(r, what + "_ns") / 1e6 for r in rqs)
            ys = [(i + 1) / len(vals) for i in range(len(vals))]
            ax.plot(vals, ys, label=name)
        ax.set_xscale("symlog", linthresh=0.1)
        ax.set_xlabel(f"{what} time (ms)")
        ax.grid(True, alpha=0.3)
    axes[0].set_ylabel("fraction of requests")
    axes[-1].legend()
    fig.suptitle(f"{system}: latency CDF per class")
    fig.tight_layout()
    p = outdir / f"{system}-latency-cdf.png"
    fig.savefig(p, dpi=110)
    plt.close(fig)
    outs.append(p)

    pts = [(e.ts_ns, int(e.fields["inflight"])) for e in sorted(trace.events, key=lambda e: e.ts_ns)
           if "inflight" in e.fields and e.name.endswith(("_dispatch", "_complete", "_requeue"))]
    # k2: its bound, flashfq: the count in flight, when dispatch held requests back
    held = [e for e in trace.events if e.name == f"{system}_throttled"]
    what = "bound" if held and "bound" in held[0].fields else "inflight"
    bounds = [(e.ts_ns, int(e.fields[what])) for e in held if what in e.fields]
    if pts:
        t0 = pts[0][0]
        fig, ax = plt.subplots(figsize=(10, 3.5))
        ax.step([(t - t0) / 1e9 for t, _ in pts], [v for _, v in pts], where="post",
                label="in flight", lw=0.8)
        if bounds:
            ax.scatter([(t - t0) / 1e9 for t, _ in bounds], [b for _, b in bounds], s=4,
                       color="red", label=("bound" if what == "bound" else "in flight")
                       + " (when dispatch held requests back)")
        ax.set_xlabel("time (s)")
        ax.set_ylabel("requests")
        ax.legend(loc="upper right")
        ax.grid(True, alpha=0.3)
        fig.tight_layout()
        p = outdir / f"{system}-inflight.png"
        fig.savefig(p, dpi=110)
        plt.close(fig)
        outs.append(p)
    return outs


# -- k2: the adaptive bound (target_latency_us) --------------------------------------------

# k2_adjust's reason: ftrace prints the name, a CTF trace carries the number
ADAPT_REASONS = ("hold", "down", "up", "up_fast", "idle", "return", "up_double",
                 "no_gain")


@dataclass
class Adjust:
    ts_ns: int
    old: int
    new: int
    est_us: int
    reason: str


def adjustments(trace: Trace, system: str = "k2") -> list[Adjust]:
    """The adaptive bound's decisions (k2_adjust), in time order."""
    out = []
    for e in sorted(trace.events, key=lambda e: e.ts_ns):
        if e.name != f"{system}_adjust":
            continue
        r = e.fields.get("reason", "")
        reason = ADAPT_REASONS[r] if isinstance(r, int) and 0 <= r < len(ADAPT_REASONS) \
            else str(r)
        out.append(Adjust(e.ts_ns, int(e.fields["old"]), int(e.fields["new"]),
                          int(e.fields["est_us"]), reason))
    return out


def adjust_history(trace: Trace, system: str = "k2") -> str:
    """The adaptive bound's decisions in one line, each as "seconds from
    @system's first event: old->new estimate reason" ("" without any)."""
    t0 = _span(trace, system)[0]
    return "; ".join(f"{(a.ts_ns - t0) / 1e9:.1f} s: {a.old}->{a.new} {a.est_us / 1000:.1f} ms "
                     f"{a.reason}" for a in adjustments(trace, system))


def _rt(bd: Breakdown) -> list[Request]:
    return sorted((r for r in bd.requests if 0 <= r.queue < 8), key=lambda r: r.complete_ns)


def bound_steps(adj: list[Adjust], t0_ns: int) -> list[tuple[float, int]]:
    """The bound in force as steps (seconds from @t0_ns, the bound from
    then on): the first decision's old bound from that decision, then each
    new one."""
    if not adj:
        return []
    return [((adj[0].ts_ns - t0_ns) / 1e9, adj[0].old)] + \
        [((a.ts_ns - t0_ns) / 1e9, a.new) for a in adj]


def adaptive_markdown(trace: Trace, bd: Breakdown) -> str:
    """The adaptive bound's decisions and the bound in force over the trace,
    beside the real-time latencies; empty without k2_adjust events."""
    adj = adjustments(trace)
    if not adj:
        return ""
    counts: dict[str, int] = defaultdict(int)
    for a in adj:
        counts[a.reason] += 1
    bounds = [a.new for a in adj]
    lines = ["## Adaptive bound (k2_adjust)", "",
             f"Decisions: {len(adj)} (" + ", ".join(f"{k} {counts[k]}" for k in ADAPT_REASONS
                                                    if counts[k]) + "); "
             f"bound in force from {adj[0].old} to {bounds[-1]}, between {min(bounds)} and "
             f"{max(bounds)}."]
    rt = _rt(bd)
    if rt:
        tot = sorted(r.total_ns for r in rt)
        lines.append(f"Real-time requests: {len(rt)}, latency (insert to completion) p50 "
                     f"{percentile(tot, 50) / 1e6:.3f} ms, p99.9 "
                     f"{percentile(tot, 99.9) / 1e6:.3f} ms.")
    lines.append("")
    return "\n".join(lines)


def adaptive_plot(trace: Trace, bd: Breakdown, outdir: Path, system: str = "k2") -> list[Path]:
    """The bound in force over time above the real-time latencies and the
    controller's estimates; nothing without k2_adjust events."""
    adj = adjustments(trace, system)
    if not adj:
        return []
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rt = _rt(bd)
    t0 = min([adj[0].ts_ns] + [r.insert_ns for r in rt])
    fig, (top, bot) = plt.subplots(2, 1, figsize=(10, 6), sharex=True)
    steps = bound_steps(adj, t0)
    top.step([t for t, _ in steps], [b for _, b in steps], where="post", label="bound in force")
    top.set_ylabel("requests")
    top.legend(loc="upper right")
    top.grid(True, alpha=0.3)
    if rt:
        bot.scatter([(r.complete_ns - t0) / 1e9 for r in rt], [r.total_ns / 1e6 for r in rt],
                    s=3, alpha=0.5, label="real-time latency (insert to completion)")
    est = [a for a in adj if a.est_us]
    if est:
        bot.scatter([(a.ts_ns - t0) / 1e9 for a in est], [a.est_us / 1e3 for a in est],
                    s=12, marker="x", color="red", label="controller's p99.9 estimate")
    bot.set_xlabel("time (s)")
    bot.set_ylabel("ms")
    bot.legend(loc="upper right")
    bot.grid(True, alpha=0.3)
    fig.suptitle(f"{system}: adaptive bound and real-time latency")
    fig.tight_layout()
    p = outdir / f"{system}-adaptive.png"
    fig.savefig(p, dpi=110)
    plt.close(fig)
    return [p]


@dataclass
class Timeline:
    """A k2 trace over time, in seconds from its first event, and in windows
    of window_ns from there (the windows that end within the trace)."""
    window_ns: int
    span_s: float                          # first to last event
    bound: list[tuple[float, int]]         # steps from 0: empty without k2_adjust
    rt: list[tuple[float, float]]          # each RT request: completion (s), latency (ms)
    rt_p99_ms: list[float]                 # per window: its RT completions' p99 (nan: none)
    bw_mib_s: list[float]                  # per window: every class's completions, MiB/s

    @property
    def window_s(self) -> float:
        return self.window_ns / 1e9

    def starts(self) -> list[float]:
        """Each window's start (s)."""
        return [i * self.window_s for i in range(len(self.bw_mib_s))]


def timeline(trace: Trace, window_ns: int = 0, system: str = "k2") -> Timeline:
    """@trace over time from its first event: the adaptive bound in force
    (k2_adjust; before the first, its old bound), each real-time request's
    latency (insert to completion) at its completion, and per window of
    @window_ns (0: auto_window() for about 40 windows) the nearest-rank
    p99 of the real-time latencies completed in it and the bandwidth
    completed in it (nr_sector * 512 bytes of each request of any class,
    reads and writes).  Requests that are not whole in the trace are left
    out; a last window cut short by the trace's end is dropped."""
    if window_ns < 0:
        raise ValueError(f"window of {window_ns} ns")
    t0, span = _span(trace, system)
    window_ns = window_ns or auto_window(span, 40)
    n = span // window_ns
    bd = breakdown(trace, system)
    adj = adjustments(trace, system)
    bound = [(0.0, adj[0].old)] + bound_steps(adj, t0)[1:] if adj else []
    lat: list[list[int]] = [[] for _ in range(n)]
    done = [0] * n
    for r in bd.requests:
        i = (r.complete_ns - t0) // window_ns
        if i < n:
            done[i] += r.nr_sector * 512
            if 0 <= r.queue < 8:
                lat[i].append(r.total_ns)
    return Timeline(
        window_ns, span / 1e9, bound,
        _rt_points(bd, t0),
        [percentile(sorted(v), 99.0) / 1e6 for v in lat],
        [b / (1 << 20) / (window_ns / 1e9) for b in done])


def _span(trace: Trace, system: str) -> tuple[int, int]:
    """The first event of @system in @trace (ns) and the time to its last."""
    evs = [e.ts_ns for e in trace.events if e.name.startswith(system + "_")]
    return (min(evs), max(evs) - min(evs)) if evs else (0, 0)


def _rt_points(bd: Breakdown, t0_ns: int) -> list[tuple[float, float]]:
    return [((r.complete_ns - t0_ns) / 1e9, r.total_ns / 1e6) for r in _rt(bd)]


def rt_latencies(trace: Trace, system: str = "k2") -> list[tuple[float, float]]:
    """Each real-time request whole in @trace, in completion order: its
    completion, in seconds from the first event of @system, and its latency,
    insert to completion, in ms (what timeline() gives as .rt, without its
    windows and bound)."""
    return _rt_points(breakdown(trace, system), _span(trace, system)[0])


# -- flashfq: each task's share of the device -------------------------------------------
#
# Service is counted in charge, not device_ns: a dispatched request's charge
# (finish minus start tag) is what FlashFQ equalises, its cost model's
# device time scaled by normal weight / the task's weight, so the fair share
# of it is 1 / (active tasks) with or without ioprio_weights, and it is
# granted at dispatch, where the scheduler decides.  device_ns (dispatch to
# completion) is no exclusive use of the device: with several requests in
# flight they overlap and each includes the wait behind the others inside
# the device, so a task with more in flight collects more of it whatever
# the scheduler does.  Its share is reported beside as a check of the cost
# model, not plotted.

@dataclass
class TaskService:
    """One task's service in a flashfq trace.  task: the pid that created
    its I/O context (0: requests with none)."""
    charge_w: list[int]          # charge dispatched per window
    active_w: list[bool]         # a request outstanding or anticipated in the window
    requests: int = 0            # dispatched
    charge: int = 0              # their charges, in all
    completions: int = 0
    device_ns: int = 0           # device_ns of its completions, in all


@dataclass
class Service:
    """A flashfq device's service per task in windows of window_ns from
    t0_ns, and the scheduler's decisions there."""
    dev: str
    t0_ns: int
    span_ns: int                 # t0 to the trace's last event
    window_ns: int
    windows: int
    tasks: dict[int, TaskService] = field(default_factory=dict)
    holds: Counter[str] = field(default_factory=Counter)    # throttle, antic
    antic: Counter[str] = field(default_factory=Counter)    # start, expire, cancel
    vtime_delta: int = 0         # charge units, summed over the advances
    vtime_from: int = -1         # before the first advance
    vtime_pts: list[tuple[int, int]] = field(default_factory=list)   # ts, vtime after

    def task(self, pid: int) -> TaskService:
        if pid not in self.tasks:
            self.tasks[pid] = TaskService([0] * self.windows, [False] * self.windows)
        return self.tasks[pid]

    def active(self, pid: int, since_ns: int, until_ns: int) -> None:
        w = self.task(pid).active_w
        first = max(0, (since_ns - self.t0_ns) // self.window_ns)
        for i in range(first, min(self.windows - 1, (until_ns - self.t0_ns) // self.window_ns) + 1):
            w[i] = True

    def shares(self) -> dict[int, list[float]]:
        """Each task's fraction of the charge dispatched in each window
        (nan in a window without any)."""
        totals = [sum(t.charge_w[i] for t in self.tasks.values()) for i in range(self.windows)]
        return {pid: [c / n if n else math.nan for c, n in zip(t.charge_w, totals)]
                for pid, t in self.tasks.items()}

    def fair(self) -> list[float]:
        """1 / (tasks active) per window (nan in a window without any)."""
        n = [sum(t.active_w[i] for t in self.tasks.values()) for i in range(self.windows)]
        return [1 / k if k else math.nan for k in n]


def auto_window(span_ns: int, windows: int = 50) -> int:
    """A round window length (1, 2 or 5 x 10^k ns, at least 1 us) giving
    about @windows windows over @span_ns."""
    raw = max(span_ns / windows, 1000.0)
    unit = 10 ** math.floor(math.log10(raw))
    return int(next(m * unit for m in (1, 2, 5, 10) if m * unit >= raw))


def service(trace: Trace, window_ns: int = 0, system: str = "flashfq") -> dict[str, Service]:
    """Per device: each task's charge dispatched and activity per window of
    @window_ns (0: auto_window() over the trace), its device_ns completed,
    and the holds, anticipations and virtual time advances.  A task is
    active in a window if it had a request there from its insert (or first
    event in the trace) to its completion (or the trace's end), or an
    anticipation running from its start to its expiry or cancellation."""
    evs = sorted((e for e in trace.events if e.name.startswith(system + "_")),
                 key=lambda e: e.ts_ns)
    if not evs:
        return {}
    t0, end = evs[0].ts_ns, evs[-1].ts_ns
    window_ns = window_ns or auto_window(end - t0)
    devs: dict[str, Service] = {}
    live: dict[RqKey, tuple[int, int, bool]] = {}   # task, since, dispatched or requeued
    antic: dict[tuple[str, int], int] = {}          # (dev, task) -> since
    for ev in evs:
        f = ev.fields
        dev = str(f["dev"])
        s = devs.setdefault(dev, Service(dev, t0, end - t0, window_ns,
                                                (end - t0) // window_ns + 1))
        kind = ev.name[len(system) + 1:]
        pid = int(f.get("task", 0))
        if kind in LIFECYCLE:
            key = rq_key(f)
            known = live.pop(key, None)
            # since the trace's start if its insert came before
            since = known[1] if known else ev.ts_ns if kind == "insert" else t0
            if kind == "complete":
                s.active(pid, since, ev.ts_ns)
                t = s.task(pid)
                t.completions += 1
                t.device_ns += int(f.get("device_ns", 0))
                continue
            if kind == "insert" and known and not known[2]:   # merged away; a new request
                s.active(known[0], since, ev.ts_ns)
                since = ev.ts_ns
            live[key] = (pid, since, kind != "insert" or bool(known and known[2]))
            if kind == "dispatch":
                t = s.task(pid)
                t.requests += 1
                t.charge += int(f["charge"])
                t.charge_w[(ev.ts_ns - t0) // window_ns] += int(f["charge"])
        elif kind == "throttled":
            s.holds["antic" if int(f["antic"]) else "throttle"] += 1
        elif kind.startswith("antic_"):
            what = kind.removeprefix("antic_")
            s.antic[what] += 1
            if what == "start":
                antic.setdefault((dev, pid), ev.ts_ns)
            else:
                s.active(pid, antic.pop((dev, pid), t0), ev.ts_ns)
        elif kind == "vtime":
            if not s.vtime_pts:
                s.vtime_from = int(f["vtime"]) - int(f["delta"])
            s.vtime_delta += int(f["delta"])
            s.vtime_pts.append((ev.ts_ns, int(f["vtime"])))
    for key, (task, since, _) in live.items():
        devs[str(key[0])].active(task, since, end)
    for (dev, pid), since in antic.items():
        devs[dev].active(pid, since, end)
    return dict(sorted(devs.items()))


def _mean(xs: list[float]) -> str:
    return f"{sum(xs) / len(xs):.3f}" if xs else "–"


def task_name(pid: int) -> str:
    return f"{pid}" if pid else "0 (no I/O context)"


def service_markdown(svcs: dict[str, Service], bd: Breakdown | None = None) -> str:
    """Per device and task: requests, charge and its share, the share of
    device time, the windows active and the mean share there against the
    fair one, staged time (from @bd); then holds, anticipations and the
    virtual time."""
    if not svcs:
        return ""
    w = next(iter(svcs.values())).window_ns
    lines = ["## Each task's share of the device", "",
             f"Per window of {w / 1e6:g} ms, each task's share of the charge dispatched (a "
             "request's finish minus start tag: the cost model's device time scaled by normal "
             "weight / the task's weight, which FlashFQ equalises) against the fair share, 1 / "
             "the tasks active (a request outstanding or an anticipation running). The device "
             "time share (dispatch to completion, summed) checks the cost model; with several "
             "requests in flight those times overlap and include waiting inside the device.",
             ""]
    for dev, s in svcs.items():
        shares, fair = s.shares(), s.fair()
        charge = sum(t.charge for t in s.tasks.values()) or 1
        device = sum(t.device_ns for t in s.tasks.values()) or 1
        lines += [f"### {dev}", "",
                  "| task | requests | charge (ms) | share of charge | share of device time | "
                  "windows active | share while active | fair share while active | "
                  "staged p50 / p99 (ms) |", "|---|---|---|---|---|---|---|---|---|"]
        for pid, t in sorted(s.tasks.items(), key=lambda kv: (-kv[1].charge, kv[0])):
            on = [i for i in range(s.windows) if t.active_w[i] and not math.isnan(shares[pid][i])]
            rqs = [r for r in (bd.requests if bd else []) if r.dev == dev and r.task == pid]
            staged = "–"
            if rqs:
                row = latencies(rqs)["staged"]
                staged = f"{row[50.0] / 1e6:.3f} / {row[99.0] / 1e6:.3f}"
            lines.append(f"| {task_name(pid)} | {t.requests} | {t.charge / 1e6:.3f} | "
                         f"{t.charge / charge:.3f} | {t.device_ns / device:.3f} | "
                         f"{sum(t.active_w)} of {s.windows} | "
                         f"{_mean([shares[pid][i] for i in on])} | "
                         f"{_mean([fair[i] for i in on])} | {staged} |")
        lines += ["", f"Dispatch held back {s.holds['throttle']} time(s) by the throttle "
                  f"(antic=0) and {s.holds['antic']} by an anticipation (antic=1). "
                  f"Anticipations: {s.antic['start']} started, {s.antic['expire']} expired, "
                  f"{s.antic['cancel']} cancelled. Virtual time: {len(s.vtime_pts)} advance(s), "
                  + (f"{s.vtime_delta / 1e6:.3f} ms in all (from {s.vtime_from / 1e6:.3f} to "
                     f"{s.vtime_pts[-1][1] / 1e6:.3f} ms), "
                     f"{s.vtime_delta / 1e6 / max(s.span_ns / 1e9, 1e-9):.3f} ms per second "
                     "of trace."
                     if s.vtime_pts else "none."), ""]
    return "\n".join(lines)


def service_plot(svcs: dict[str, Service], outdir: Path, system: str = "flashfq",
                 most: int = 8) -> list[Path]:
    """Per device: each task's share of the charge per window where it was
    active (the @most largest tasks, the rest summed as one line) with the
    fair share, and the virtual time."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    outs = []
    for dev, s in svcs.items():
        edges = [i * s.window_ns / 1e9 for i in range(s.windows + 1)]
        mids = [(a + b) / 2 for a, b in zip(edges, edges[1:])]
        shares = {pid: [x if s.tasks[pid].active_w[i] else math.nan for i, x in enumerate(xs)]
                  for pid, xs in s.shares().items()}
        order = sorted(s.tasks, key=lambda pid: (-s.tasks[pid].charge, pid))
        fig, (ax, av) = plt.subplots(2, 1, figsize=(10, 6), sharex=True,
                                     gridspec_kw={"height_ratios": [2, 1]})
        for pid in order[:most]:
            ax.plot(mids, shares[pid], marker=".", lw=1, label=f"task {task_name(pid)}")
        rest = order[most:]
        if rest:
            on = [[shares[p][i] for p in rest if s.tasks[p].active_w[i]] for i in range(s.windows)]
            other = [sum(xs) if xs else math.nan for xs in on]
            ax.plot(mids, other, marker=".", lw=1, color="grey", label=f"{len(rest)} other tasks")
        fair = s.fair()
        ax.step(edges, fair + fair[-1:], where="post", color="black", ls="--", lw=1.2,
                label="fair share (1 / active tasks)")
        ax.set_ylim(0, 1.05)
        ax.set_ylabel("share of charge dispatched")
        ax.set_title(f"{system} {dev}: each task's share per {s.window_ns / 1e6:g} ms window")
        ax.legend(loc="upper right", fontsize="small")
        ax.grid(True, alpha=0.3)
        if s.vtime_pts:
            pts = [(s.t0_ns, s.vtime_from), *s.vtime_pts]
            av.step([(t - s.t0_ns) / 1e9 for t, _ in pts], [v / 1e6 for _, v in pts],
                    where="post", lw=1)
        av.set_ylabel("virtual time (ms)")
        av.set_xlabel("time (s)")
        av.grid(True, alpha=0.3)
        fig.tight_layout()
        name = f"{system}-share.png" if len(svcs) == 1 else \
            f"{system}-share-{dev.replace(',', '_')}.png"
        p = outdir / name
        fig.savefig(p, dpi=110)
        plt.close(fig)
        outs.append(p)
    return outs


# -- cars: die predictions, skips and flows ---------------------------------------------

#: cars_skip's reason and cars_dispatch's op (tracepoints/trace/events/cars.h)
CARS_SKIP_REASONS = ("die busy", "mapping-cache miss", "throttle")
CARS_OPS = ("read", "write", "erase")


def cars_markdown(trace: Trace, bd: Breakdown) -> str:
    """Per device: dispatches per predicted die and op, forced dispatches
    and predicted mapping-cache misses; the picks that passed over flows'
    heads, per reason of the first one passed over; each flow's requests
    and latency (from @bd)."""
    dies: dict[str, dict[int, Counter[str]]] = defaultdict(lambda: defaultdict(Counter))
    disp: dict[str, Counter[str]] = defaultdict(Counter)
    skips: dict[str, Counter[str]] = defaultdict(Counter)
    for ev in trace.events:
        f = ev.fields
        dev = str(f.get("dev"))
        if ev.name == "cars_dispatch":
            op = int(f["op"])
            name = CARS_OPS[op] if 0 <= op < len(CARS_OPS) else f"op {op}"
            dies[dev][int(f["die"])][name] += 1
            disp[dev]["dispatched"] += 1
            disp[dev]["forced"] += int(f["forced"])
            disp[dev]["cmt_miss"] += int(f["cmt_miss"])
            disp[dev]["multi-die"] += int(f["ndies"]) > 1
        elif ev.name == "cars_skip":
            r = int(f["reason"])
            skips[dev][CARS_SKIP_REASONS[r] if 0 <= r < len(CARS_SKIP_REASONS)
                       else f"reason {r}"] += 1
            skips[dev]["heads passed over"] += int(f["skipped"])
            skips[dev]["then dispatched another"] += int(f["dispatched"])
            skips[dev]["picks"] += 1
    lines = ["## cars: predicted dies, skips and flows", ""]
    for dev in sorted(set(dies) | set(skips)):
        d, k = disp[dev], skips[dev]
        lines += [f"### {dev}", "",
                  f"Dispatched {d['dispatched']} request(s): {d['forced']} forced (every head "
                  f"conflicted for max_hold_us), {d['cmt_miss']} predicted to miss the mapping "
                  f"cache, {d['multi-die']} on more than one die. Picks that passed over a "
                  f"flow's head: {k['picks']} ({k['heads passed over']} heads in all), "
                  f"{k['then dispatched another']} of them dispatched another request; by the "
                  "first head's reason: " + (", ".join(
                      f"{r} {k[r]}" for r in CARS_SKIP_REASONS if k[r]) or "none") + ".", "",
                  "| predicted die | " + " | ".join(CARS_OPS) + " | share of dispatches |",
                  "|---|" + "---|" * (len(CARS_OPS) + 1)]
        total = max(d["dispatched"], 1)
        for die, c in sorted(dies[dev].items()):
            lines.append(f"| {die} | " + " | ".join(str(c[o]) for o in CARS_OPS)
                         + f" | {sum(c.values()) / total:.3f} |")
        flows: dict[int, list[Request]] = defaultdict(list)
        for rq in bd.requests:
            if rq.dev == dev:
                flows[rq.task].append(rq)
        if flows:
            lines += ["", "| flow | requests | staged p50 / p99 (ms) | total p50 / p99 (ms) |",
                      "|---|---|---|---|"]
            for pid, rqs in sorted(flows.items(), key=lambda kv: (-len(kv[1]), kv[0])):
                row = latencies(rqs)
                lines.append(f"| {task_name(pid)} | {len(rqs)} | "
                             f"{row['staged'][50.0] / 1e6:.3f} / {row['staged'][99.0] / 1e6:.3f} | "
                             f"{row['total'][50.0] / 1e6:.3f} / {row['total'][99.0] / 1e6:.3f} |")
        lines.append("")
    return "\n".join(lines)


# -- ssdsim: the emulated SSD's dies and requests ----------------------------------------

@dataclass
class DieUse:
    """One die's work in an ssdsim trace, counted as ssdsim's sysfs files
    die_reads, die_programs, die_erases and die_busy_ns count it (GC
    copybacks are a read and a program each, each GC victim an erase)."""
    ops: Counter[str] = field(default_factory=Counter)   # ssdsim_die_op per op
    gc_runs: int = 0
    reads: int = 0
    programs: int = 0
    erases: int = 0
    busy_ns: int = 0


def die_usage(trace: Trace) -> dict[tuple[str, int], DieUse]:
    """ssdsim_die_op and ssdsim_gc events summed per (dev, die)."""
    dies: dict[tuple[str, int], DieUse] = defaultdict(DieUse)
    for ev in trace.events:
        if ev.name not in ("ssdsim_die_op", "ssdsim_gc"):
            continue
        f = ev.fields
        u = dies[(str(f["dev"]), int(f["die"]))]
        u.busy_ns += int(f["end_ns"]) - int(f["start_ns"])
        if ev.name == "ssdsim_gc":
            u.gc_runs += 1
            u.erases += int(f["victims"])
            u.reads += int(f["copied"])
            u.programs += int(f["copied"])
        else:
            u.ops[str(f["op"])] += 1
            if f["op"] in ("read", "map_read"):
                u.reads += 1
            else:
                u.programs += 1
    return dict(sorted(dies.items()))


def ssdsim_markdown(trace: Trace, title: str = "") -> str:
    """Requests per direction with the model's device time and the measured
    latency (ssdsim_complete), and the work of each die."""
    lines = [f"# {title or 'ssdsim trace report'}", ""]
    done: dict[str, list[Event]] = defaultdict(list)
    for ev in trace.events:
        if ev.name == "ssdsim_complete":
            done[str(ev.fields["rwbs"])[:1]].append(ev)
    lines.append(f"Requests completed: {sum(map(len, done.values()))}; events lost by the "
                 f"tracer: {trace.lost}" + (" (**the numbers below miss them**)" if trace.lost
                                            else "") + ".")
    lines += ["", "| op | requests | device p50 / p99 (ms) | latency p50 / p99 (ms) |",
              "|---|---|---|---|"]
    for op, evs in sorted(done.items()):
        def ms(key: str) -> str:
            vals = sorted(int(e.fields[key]) for e in evs)
            return " / ".join(f"{percentile(vals, p) / 1e6:.3f}" for p in (50.0, 99.0))
        lines.append(f"| {op} | {len(evs)} | {ms('device_ns')} | {ms('latency_ns')} |")
    lines += ["", "| dev | die | reads | programs | erases | GC runs | busy (ms) |",
              "|---|---|---|---|---|---|---|"]
    for (dev, die), u in die_usage(trace).items():
        lines.append(f"| {dev} | {die} | {u.reads} | {u.programs} | {u.erases} | "
                     f"{u.gc_runs} | {u.busy_ns / 1e6:.3f} |")
    lines.append("")
    return "\n".join(lines)
