"""Per-request latency breakdown from a scheduler trace (ftrace text or LTTng CTF),
and the die usage of an ssdsim trace.

Every scheduler's trace system follows one life cycle, which is what this
module joins on: <sys>_insert (a request enters a staging queue),
<sys>_dispatch (it leaves for the device), <sys>_complete (it finished),
<sys>_requeue (the driver gave it back), each carrying dev, hctx, tag,
sector, nr_sector, rwbs and queue; a request is (dev, hctx, tag) while it
lives.  Other events of the system are decisions and are counted.  Times
come from the trace's own timestamps, so staged + device = total exactly;
the kernel's staged_ns/device_ns fields are reported beside them as a check.

ssdsim (the emulated SSD, not a scheduler) has its own events: requests
(ssdsim_queue, ssdsim_complete) and the flash work of its dies
(ssdsim_die_op, ssdsim_gc), which die_usage() sums per die.
"""
from __future__ import annotations

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
    queue: int
    rwbs: str
    sector: int
    nr_sector: int
    insert_ns: int
    dispatch_ns: int = -1
    complete_ns: int = -1
    requeues: int = 0
    kernel_staged_ns: int = -1
    kernel_device_ns: int = -1

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
    """A CTF trace directory, or an ftrace text file."""
    if path.is_dir():
        return read_ctf(path, system)
    return read_ftrace(path.read_text(errors="replace"), system)


# -- joining -----------------------------------------------------------------------

LIFECYCLE = ("insert", "dispatch", "complete", "requeue")


def breakdown(trace: Trace, system: str) -> Breakdown:
    live: dict[tuple[Value, Value, Value], Request] = {}
    done: list[Request] = []
    orphans = 0
    decisions: Counter[str] = Counter()
    for ev in sorted(trace.events, key=lambda e: e.ts_ns):
        kind = ev.name[len(system) + 1:]
        f = ev.fields
        if kind not in LIFECYCLE:
            decisions[kind] += 1
            continue
        key = (f["dev"], f["hctx"], f["tag"])
        rq = live.get(key)
        if kind == "insert":
            if rq is None:   # a re-insert after a requeue keeps its first time
                live[key] = Request(str(f["dev"]), int(f["queue"]), str(f["rwbs"]),
                                    int(f["sector"]), int(f["nr_sector"]), ev.ts_ns)
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
    return Breakdown(done, len(live), orphans, decisions, trace.lost)


# -- statistics and the report ----------------------------------------------------------

PCTS = (50.0, 90.0, 99.0, 99.9)


def queue_name(q: int) -> str:
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
        rqs = groups[name]
        row: dict[str, Any] = {"count": len(rqs)}
        for what in ("staged", "device", "total"):
            vals = sorted(getattr(r, what + "_ns") for r in rqs)
            row[what] = {p: percentile(vals, p) for p in PCTS} | {"max": float(vals[-1])}
        out[name] = row
    return out


def markdown(bd: Breakdown, system: str, title: str = "") -> str:
    lines = [f"# {title or system + ' trace report'}", ""]
    lines.append(f"Requests completed: {len(bd.requests)}; still staged or in the device at "
                 f"the end: {bd.unfinished}; events without their request's insert: "
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
    bounds = [(e.ts_ns, int(e.fields["bound"])) for e in trace.events if "bound" in e.fields]
    if pts:
        t0 = pts[0][0]
        fig, ax = plt.subplots(figsize=(10, 3.5))
        ax.step([(t - t0) / 1e9 for t, _ in pts], [v for _, v in pts], where="post",
                label="in flight", lw=0.8)
        if bounds:
            ax.scatter([(t - t0) / 1e9 for t, _ in bounds], [b for _, b in bounds], s=4,
                       color="red", label="bound (when it held requests back)")
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
