"""Tracing beside the benchmark runs (`bench run ... --trace ftrace|lttng`),
and the tracepoints' cost (the overhead suite's `--traced`).

Which events: the trace system of every scheduler the suite measures that
has one (an elevator `X` whose events are in tracefs as `events/X/`: k2,
flashfq, cars, the kernel's kyber), `ssdsim` when
the device is ssdsim and that system exists, and whatever `--trace-events
SYS[:EVENT],...` adds (those must exist).  Systems found later (a new
scheduler's or ssdsim's events) are picked up without a change here.

ftrace: an instance of its own (`<tracefs>/instances/bench-<pid>`) with its
own ring buffer, events, buffer size and clock (`mono`: CLOCK_MONOTONIC, the
clock of the events' own staged_ns/device_ns), so nothing of the
machine's top-level tracing (tracing_on, events, buffer size, trace_clock)
is touched; removing the instance at the end (also after Ctrl-C) puts
everything back.  tracefs is mounted if it is not.  Per run: clear the
buffer, enable the chosen events, `tracing_on` right before fio and off right
after in the same shell, read the per-CPU `stats` (overrun, dropped and
commit-overrun events are lost ones), save the text as
`runs/NNN-<key>.trace.txt.gz` (gzip).

lttng: a kernel session per run (`lttng create --output`, one channel of
`--trace-buffer-kb` per CPU, `lttng enable-event -k '<sys>_*'`), started
and stopped around fio, destroyed after; the CTF trace is copied to
`runs/NNN-<key>.lttng/`.  Needs lttng-tools, lttng-modules and the project's
probes (`lttng-probe-<sys>`, `make lttng-probes`); a session daemon is
started (and stopped at the end) if none runs, the probes loaded (and
unloaded) as needed.
"""
from __future__ import annotations

import gzip
import io
import os
import re
import tarfile
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench import device as devmod
from bench import modules
from bench.device import DeviceError
from bench.markdown import table
from bench.target import Target, TargetError, q

if TYPE_CHECKING:
    from bench.results import Results, Run

TRACERS = ("ftrace", "lttng")
DEFAULT_BUFFER_KB = 16384          # per CPU
TRACEFS = ("/sys/kernel/tracing", "/sys/kernel/debug/tracing")


class TraceError(TargetError):
    """Tracing was asked for and cannot be set up, or an event does not exist
    (a TargetError: the command line reports it, clean-ups carry on after it)."""


# ---------------------------------------------------------------------------
# which events

@dataclass(frozen=True, order=True)
class EventSpec:
    """A whole trace system (`k2`) or one of its events (`k2:k2_complete`)."""
    system: str
    event: str | None = None

    def __str__(self) -> str:
        return self.system if self.event is None else f"{self.system}:{self.event}"


NAME = re.compile(r"^[A-Za-z0-9_]+$")


def parse_events(text: str | Iterable[str]) -> list[EventSpec]:
    """'k2,block:block_rq_issue' (or its items) as EventSpecs, in order, once each."""
    items = text.split(",") if isinstance(text, str) else list(text)
    out: list[EventSpec] = []
    for item in (i.strip() for i in items):
        if not item:
            continue
        sys_, sep, ev = item.partition(":")
        if not NAME.match(sys_) or (sep and not NAME.match(ev)):
            raise ValueError(f"--trace-events: {item!r} is not SYSTEM or SYSTEM:EVENT")
        spec = EventSpec(sys_, ev if sep else None)
        if spec not in out:
            out.append(spec)
    return out


#: the project's shipped elevators: a missing trace system of theirs is
#: worth a note
OWN = tuple(m.elevator for m in modules.modules() if m.elevator and m.shipped)


def system_of(elevator: str) -> str:
    """The trace system an elevator's events would have (kyber -> kyber)."""
    return re.sub(r"[^A-Za-z0-9_]", "_", elevator)


def select_events(available: dict[str, set[str]], schedulers: Iterable[str],
                  device_kind: str, extra: Iterable[EventSpec] = ()
                  ) -> tuple[list[EventSpec], list[str]]:
    """The events to record and notes on what was left out.

    @available: trace system -> its event names, as the tracer offers them.
    The schedulers' systems and ssdsim's (when the device is ssdsim) are
    taken when they exist; @extra (the user's) must exist."""
    chosen: list[EventSpec] = []
    notes: list[str] = []
    auto = [system_of(s) for s in schedulers if s != "none"]
    if device_kind == "ssdsim":
        auto.append("ssdsim")
    for sys_ in dict.fromkeys(auto):
        if available.get(sys_):
            chosen.append(EventSpec(sys_))
        elif sys_ in ("ssdsim", *OWN):
            notes.append(f"no {sys_} events to record (its trace system does not exist "
                         "in this kernel or tracer)")
    for spec in extra:
        evs = available.get(spec.system)
        if not evs:
            raise TraceError(f"--trace-events {spec}: no trace system {spec.system!r} "
                             f"(have: {', '.join(sorted(available)[:40]) or 'none'})")
        if spec.event is not None and spec.event not in evs:
            raise TraceError(f"--trace-events {spec}: system {spec.system} has no event "
                             f"{spec.event!r} (it has: {', '.join(sorted(evs))})")
        whole = EventSpec(spec.system)
        if spec not in chosen and whole not in chosen:
            chosen.append(spec)
    if not chosen:
        raise TraceError("nothing to trace: none of the measured schedulers has a trace "
                         "system here; name events with --trace-events SYS[:EVENT],...")
    return chosen, notes


# ---------------------------------------------------------------------------
# ftrace's per-CPU statistics

LOST_KEYS = ("overrun", "commit overrun", "dropped events")


def parse_stats(text: str) -> dict[int, dict[str, int]]:
    """'== CPU' headers each followed by that CPU's tracefs `stats` file ->
    cpu -> counter -> value (the integer counters only)."""
    out: dict[int, dict[str, int]] = {}
    cur: dict[str, int] | None = None
    for line in text.splitlines():
        m = re.match(r"^== (\d+)$", line.strip())
        if m:
            cur = out.setdefault(int(m.group(1)), {})
            continue
        k, sep, v = line.partition(":")
        if cur is not None and sep and re.fullmatch(r"\s*\d+\s*", v):
            cur[k.strip()] = int(v)
    return out


def stats_command(root: str) -> str:
    """The shell command that prints, for parse_stats(), the per-CPU
    `stats` of the ftrace buffer at @root (tracefs or an instance)."""
    return f"for c in {root}/per_cpu/cpu*; do echo \"== ${{c##*cpu}}\"; cat $c/stats; done"


def stats_summary(per_cpu: dict[int, dict[str, int]]) -> dict[str, int]:
    """Totals over CPUs: events in the buffer, events lost (overwritten,
    dropped, or lost to nested writes), events written."""
    entries = sum(c.get("entries", 0) for c in per_cpu.values())
    lost = sum(c.get(k, 0) for c in per_cpu.values() for k in LOST_KEYS)
    return {"entries": entries, "lost": lost,
            "written": entries + sum(c.get("overrun", 0) for c in per_cpu.values())}


LTTNG_DISCARDED = re.compile(r"(\d+) events? (?:were|was) discarded")
LTTNG_LOST_PACKETS = re.compile(r"(\d+) packets? (?:were|was) lost")


def lttng_lost(stop_output: str) -> dict[str, int]:
    """Discarded events and lost packets from `lttng stop`'s warnings."""
    d = sum(int(x) for x in LTTNG_DISCARDED.findall(stop_output))
    p = sum(int(x) for x in LTTNG_LOST_PACKETS.findall(stop_output))
    return {"lost": d, "lost_packets": p}


# ---------------------------------------------------------------------------
# tracers

OnExit = Callable[[str, Callable[[], None]], None]


class Tracer(ABC):
    """Records chosen events on a target around each fio run."""
    kind: str = ""

    def __init__(self, target: Target, buffer_kb: int):
        if buffer_kb < 64:
            raise ValueError("--trace-buffer-kb must be at least 64")
        self.t = target
        self.buffer_kb = buffer_kb
        self.tag = f"bench-{os.getpid()}"
        self.missing: list[str] = []    # what setup could not find (an LTTng probe)

    @abstractmethod
    def setup(self, on_exit: OnExit, candidates: Iterable[str]) -> dict[str, set[str]]:
        """Make tracing possible (registering its undoing with @on_exit); the
        events offered, system -> names.  @candidates: systems worth loading
        a probe for."""

    @abstractmethod
    def prepare(self, specs: list[EventSpec], run: str) -> None:
        """Before run @run's fio (every run, @specs empty for one that records
        nothing): an empty buffer recording @specs, not yet on."""

    @abstractmethod
    def start_cmd(self) -> str:
        """Shell text that starts recording, right before fio."""

    @abstractmethod
    def stop_cmd(self) -> str:
        """Shell text that stops it, right after fio."""

    @abstractmethod
    def finish(self, dest: Path | None) -> dict[str, Any]:
        """After fio: stop recording those events, copy the trace to @dest
        (None: do not keep it); what to record in the run's manifest entry."""

    def describe(self) -> dict[str, Any]:
        return {"tracer": self.kind, "buffer_kb_per_cpu": self.buffer_kb}


class Ftrace(Tracer):
    kind = "ftrace"

    def __init__(self, target: Target, buffer_kb: int = DEFAULT_BUFFER_KB):
        super().__init__(target, buffer_kb)
        self.roots = TRACEFS        # where tracefs may be, the first is where to mount it
        self.root = ""
        self.mounted = False
        self.enabled: tuple[list[EventSpec], int] = ([], 0)   # events on, set_event lines

    @property
    def inst(self) -> str:
        return f"{self.root}/instances/{self.tag}"

    def find_tracefs(self) -> str:
        for d in self.roots:
            if self.t.run(f"[ -e {d}/instances ]").rc == 0:
                return d
        root = self.roots[0]
        r = self.t.run(f"mount -t tracefs nodev {root}")
        if r.rc != 0 or self.t.run(f"[ -e {root}/instances ]").rc != 0:
            raise TraceError(f"no tracefs: it is not mounted and `mount -t tracefs nodev "
                             f"{root}` failed ({r.out.strip()}); a kernel with "
                             "CONFIG_FTRACE and root are needed")
        self.mounted = True
        return root

    def setup(self, on_exit: OnExit, candidates: Iterable[str] = ()) -> dict[str, set[str]]:
        self.root = self.find_tracefs()
        if self.mounted:
            on_exit(f"tracefs unmounted from {self.root}", self.unmount)
        self.keep_top_expansion(on_exit)
        i = self.inst
        self.t.check(f"mkdir {q(i)}", what="creating an ftrace instance")
        on_exit(f"ftrace instance {i} removed", self.remove)
        self.t.check(f"echo {self.buffer_kb} > {i}/buffer_size_kb && "
                     f"echo mono > {i}/trace_clock && grep -q '\\[mono\\]' {i}/trace_clock",
                     what="sizing the ftrace buffer and choosing the mono clock")
        out = self.t.check(f"cd {i}/events && for s in */; do s=${{s%/}}; "
                           "for e in $s/*/; do e=${e%/}; echo \"$s ${e#*/}\"; done; done",
                           what="listing the trace events")
        avail: dict[str, set[str]] = {}
        for line in out.splitlines():
            f = line.split()
            if len(f) == 2 and f[1] != "*":
                avail.setdefault(f[0], set()).add(f[1])
        return avail

    def unmount(self) -> None:
        self.t.check(f"umount {self.root}", what="unmounting tracefs")

    def keep_top_expansion(self, on_exit: OnExit) -> None:
        """The kernel allocates its top-level buffer lazily ("7 (expanded:
        1408)" until first used); sizing any instance's buffer marks it
        expanded for good (6.1), leaving the top-level buffer at its small
        size.  Put the size it would have grown to back at the end."""
        top = f"{self.root}/buffer_size_kb"
        m = re.fullmatch(r"(\d+) \(expanded: (\d+)\)",
                         self.t.check(f"cat {top}", what="reading the buffer size").strip())
        if m:
            small, full = m.groups()

            def expand() -> None:
                if self.t.check(f"cat {top}").strip() == small:
                    self.t.check(f"echo {full} > {top}", what="restoring the buffer size")
            on_exit(f"top-level ftrace buffer back to its default {full} KiB per CPU", expand)

    def remove(self) -> None:
        i = self.inst
        self.t.check(f"[ -d {q(i)} ] || exit 0; echo 0 > {i}/tracing_on; echo > {i}/set_event; "
                     f"rmdir {q(i)}", what=f"removing the ftrace instance {i}")

    def prepare(self, specs: list[EventSpec], run: str) -> None:
        """Events stay enabled from one run to the next that wants the same:
        switching a tracepoint on or off patches the kernel's code (and the
        first event switches the scheduler's sched_switch hook too), which
        under QEMU's TCG now and then livelocks the guest.  An event set that
        a module reload dropped is seen from set_event's length."""
        i = self.inst
        n = int(self.t.check(f"echo 0 > {i}/tracing_on && echo > {i}/trace && "
                             f"grep -c . {i}/set_event || true",
                             what="clearing the trace buffer").split()[-1])
        if (specs, n) == self.enabled:
            return
        enable = "".join(f"; echo {q(f'{s.system}:' + (s.event or '*'))} >> {i}/set_event"
                         for s in specs)
        out = self.t.check(f"echo > {i}/set_event{enable}; grep -c . {i}/set_event || true",
                           what="enabling the trace events")
        self.enabled = (list(specs), int(out.split()[-1]))

    def start_cmd(self) -> str:
        return f"echo 1 > {self.inst}/tracing_on"

    def stop_cmd(self) -> str:
        return f"echo 0 > {self.inst}/tracing_on"

    def finish(self, dest: Path | None) -> dict[str, Any]:
        i = self.inst
        tmp = f"{self.t.tmpdir}/trace.txt.gz"
        out = self.t.check(
            f"mkdir -p {q(self.t.tmpdir)}; echo 0 > {i}/tracing_on; {stats_command(i)}"
            + (f"; gzip -1 -c {i}/trace > {q(tmp)}" if dest is not None else ""),
            what="reading the ftrace statistics")
        per_cpu = parse_stats(out)
        info: dict[str, Any] = {**stats_summary(per_cpu), "per_cpu": per_cpu}
        if dest is not None:
            data = self.t.read_file(tmp)      # kept compressed: text is 8-10x larger
            dest.write_bytes(data)
            info["lost_marks"] = sum(int(n) for n in re.findall(
                rb"\[LOST (\d+) EVENTS\]", gzip.decompress(data)))
            self.t.run(f"rm -f {q(tmp)}")
        return info

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "clock": "mono", "tracefs": self.root,
                "instance": self.inst}


class Lttng(Tracer):
    kind = "lttng"
    ENV = "export HOME=${HOME:-/root}; "   # the VM's shell has no HOME; lttng wants one

    def __init__(self, target: Target, buffer_kb: int = DEFAULT_BUFFER_KB):
        super().__init__(target, buffer_kb)
        self.session = ""
        self.remote = ""
        self.n = 0

    def lttng(self, args: str, what: str) -> str:
        return self.t.check(self.ENV + f"lttng {args}", what=what)

    def subbuf(self) -> tuple[int, int]:
        """(sub-buffer size in bytes, count): powers of two, about buffer_kb in all."""
        size = 4096
        while size * 2 * 8 <= self.buffer_kb * 1024:
            size *= 2
        return size, 8

    def setup(self, on_exit: OnExit, candidates: Iterable[str] = ()) -> dict[str, set[str]]:
        t = self.t
        missing = [p for p in ("lttng", "lttng-sessiond")
                   if t.run(f"command -v {p}").rc != 0]
        if missing:
            raise TraceError(f"--trace lttng: {', '.join(missing)} not found on "
                             f"{t.name()} (Debian: apt install lttng-tools)")
        daemon: list[str] = []   # pids of the session daemon we start (and its run-as helper)
        if t.run("pidof lttng-sessiond").rc != 0:
            r = t.run(self.ENV + "lttng-sessiond --daemonize > /tmp/bench-sessiond.log 2>&1; "
                      "rc=$?; cat /tmp/bench-sessiond.log; exit $rc", timeout=120)
            pid = t.run("pidof lttng-sessiond").out.split()
            if r.rc != 0 or not pid:
                raise TraceError(f"--trace lttng: lttng-sessiond did not start: {r.out.strip()}")
            daemon = pid
        if not devmod.module_loaded(t, "lttng_tracer") and daemon:
            self._stop_daemon(daemon)
        if not devmod.module_loaded(t, "lttng_tracer"):
            raise TraceError(
                "--trace lttng: LTTng's kernel tracer (lttng-modules: lttng-tracer.ko) is not "
                f"loaded on {t.name()}; build it and the project's probes with `make "
                "lttng-probes KVER=$(uname -r)` and install them as tracepoints/README.md's LTTng "
                "section says, then run again")
        for sys_ in dict.fromkeys(candidates):
            mod = f"lttng-probe-{sys_}"
            try:
                if devmod.load_module(t, mod):
                    on_exit(f"module {mod} unloaded", self._unloader(mod))
            except DeviceError as e:
                # its events stay unavailable; said if they were wanted
                self.missing.append(f"{sys_}: {e} (make lttng-probes, then install "
                                    "the probes as tracepoints/README.md says)")
        # undone last first: sessions, then the daemon we started (it holds the
        # probes), then the probes
        if daemon:
            on_exit(f"lttng-sessiond (pid {' '.join(daemon)}) stopped",
                    lambda: self._stop_daemon(daemon))
        on_exit("LTTng sessions of this run destroyed", self.cleanup)
        out = self.lttng("list -k", "listing LTTng's kernel events")
        avail: dict[str, set[str]] = {}
        names = re.findall(r"^\s+(\w+) \(loglevel", out, re.M)
        for sys_ in candidates:
            evs = {n for n in names if n.startswith(sys_ + "_")}
            if evs:
                avail[sys_] = evs
        return avail

    def _unloader(self, module: str) -> Callable[[], None]:
        def unload() -> None:
            if self.t.run(f"for i in $(seq 20); do modprobe -r {q(module)} 2>/dev/null && "
                          "exit 0; sleep 0.2; done; exit 1").rc != 0:
                raise DeviceError(f"cannot unload {module} (in use by LTTng)")
        return unload

    def _stop_daemon(self, pids: list[str]) -> None:
        p = " ".join(q(x) for x in pids)
        if self.t.run(f"kill {p} 2>/dev/null; for i in $(seq 100); do alive=; "
                      f"for x in {p}; do kill -0 $x 2>/dev/null && alive=1; done; "
                      "[ -z \"$alive\" ] && exit 0; sleep 0.1; done; exit 1").rc != 0:
            raise TraceError(f"lttng-sessiond ({p}) did not stop")

    def prepare(self, specs: list[EventSpec], run: str) -> None:
        if not specs:
            return
        self.n += 1
        self.session = f"{self.tag}-{self.n}"
        self.remote = f"{self.t.tmpdir}/lttng/{self.session}"
        size, num = self.subbuf()
        evs = "; ".join(f"lttng enable-event -k -c bench {q(s.event or s.system + '_*')} "
                        ">/dev/null || exit 3" for s in specs)
        self.t.check(self.ENV + f"rm -rf {q(self.remote)}; "
                     f"lttng create {self.session} --output={q(self.remote)} >/dev/null "
                     "|| exit 2; "
                     f"lttng enable-channel -k --subbuf-size={size} --num-subbuf={num} bench "
                     f">/dev/null || exit 3; {evs}", what="creating the LTTng session")

    def start_cmd(self) -> str:
        return self.ENV + f"lttng start {self.session} >/dev/null"

    def stop_cmd(self) -> str:
        return self.ENV + f"lttng stop {self.session} > {q(self.remote)}.stop 2>&1"

    def finish(self, dest: Path | None) -> dict[str, Any]:
        tar = f"{self.remote}.tar"
        out = self.t.check(
            self.ENV + f"lttng stop {self.session} >/dev/null 2>&1; cat {q(self.remote)}.stop; "
            f"lttng destroy {self.session} >/dev/null || exit 2; "
            + (f"tar -C {q(self.remote)} -cf {q(tar)} ." if dest is not None else "true"),
            what="stopping the LTTng session")
        self.session = ""
        info: dict[str, Any] = lttng_lost(out)
        if dest is not None:
            data = self.t.read_file(tar)
            dest.mkdir(parents=True, exist_ok=True)
            with tarfile.open(fileobj=io.BytesIO(data)) as tf:
                for m in tf.getmembers():
                    if not (m.isfile() or m.isdir()) or ".." in Path(m.name).parts \
                            or m.name.startswith("/"):
                        raise TraceError(f"unexpected member {m.name!r} in the LTTng trace")
                tf.extractall(dest)  # noqa: S202 - members checked above
        self.t.run(f"rm -rf {q(self.remote)} {q(self.remote)}.stop {q(tar)}")
        return info

    def cleanup(self) -> None:
        if self.session:
            self.t.run(self.ENV + f"lttng destroy {self.session} >/dev/null 2>&1")


# ---------------------------------------------------------------------------
# the runner's view

@dataclass
class Tracing:
    """What the runner records per run: with --trace, @events in every run
    (and a configuration's own record_events), saved beside its fio JSON;
    otherwise only configurations that ask for events themselves (a
    configuration's record_events), not saved (their cost is the
    measurement) unless the configuration keeps them (keep_trace: @kept
    says some do)."""
    tracer: Tracer
    events: list[EventSpec]
    save: bool
    notes: list[str] = field(default_factory=list)
    kept: bool = False

    def events_for(self, record_events: Sequence[str]) -> list[EventSpec]:
        """The events of a run whose configuration asks for @record_events:
        those, and with --trace every run's besides."""
        own = parse_events(record_events)
        if not self.save:
            return own
        return self.events + [e for e in own
                              if e not in self.events and EventSpec(e.system) not in self.events]

    def suffix(self) -> str:
        return ".trace.txt.gz" if self.tracer.kind == "ftrace" else ".lttng"

    def describe(self) -> dict[str, Any]:
        return {**self.tracer.describe(), "events": [str(e) for e in self.events],
                "saved": self.save, "kept": self.kept, "notes": self.notes}


def make_tracer(kind: str, target: Target, buffer_kb: int) -> Tracer:
    if kind == "ftrace":
        return Ftrace(target, buffer_kb)
    if kind == "lttng":
        return Lttng(target, buffer_kb)
    raise ValueError(f"--trace: {kind!r} is not one of {', '.join(TRACERS)}")


def setup(target: Target, kind: str | None, extra: str, buffer_kb: int,
          schedulers: list[str], device_kind: str, record: list[str], on_exit: OnExit,
          tracer: Tracer | None = None, keep: bool = False) -> Tracing | None:
    """The tracing of one `bench run`: with @kind (--trace) every run's
    events; else, when configurations ask for @record events, an ftrace
    instance recording only those (@keep: some configurations keep them);
    else None."""
    if kind is None and not record:
        if extra:
            raise ValueError("--trace-events needs --trace ftrace|lttng")
        return None
    tracer = tracer or make_tracer(kind or "ftrace", target, buffer_kb)
    user = parse_events(extra)
    wanted = parse_events(record) if kind is None else user
    candidates = [system_of(s) for s in schedulers if s != "none"] + \
        (["ssdsim"] if device_kind == "ssdsim" else []) + [s.system for s in wanted]
    avail = tracer.setup(on_exit, candidates)
    try:
        if kind is None:
            chosen, notes = select_events(avail, [], "", wanted)
        else:
            chosen, notes = select_events(avail, schedulers, device_kind, user)
    except TraceError as e:
        raise TraceError("; ".join([str(e), *tracer.missing])) from None
    gone = {n.split()[1] for n in notes}       # "no <sys> events to record ..."
    notes += [m for m in tracer.missing if m.split(":")[0] in gone]
    return Tracing(tracer, chosen, save=kind is not None, notes=notes,
                   kept=keep and kind is None)


# ---------------------------------------------------------------------------
# the report's section

def _systems(rec: dict[str, Any]) -> list[str]:
    return list(dict.fromkeys(s.system for s in parse_events(rec.get("events", []))))


def report_section(res: Results) -> tuple[str, dict[str, Any]]:
    """Per configuration (repetitions together) and trace system with
    requests: staged and device time per class, through tracepoints/report.py;
    and the events the tracer lost.  ('', {}) when no run kept a trace."""
    runs = [r for r in res.runs if r.rec.get("trace", {}).get("file")]
    if not runs:
        return "", {}
    from tracepoints import report as tr

    by_key: dict[str, list[Run]] = {}
    for r in runs:
        by_key.setdefault(r.key, []).append(r)
    rows: list[list[object]] = []
    summary: dict[str, Any] = {}
    lost_runs = lost_total = unfinished = orphans = 0
    problems: list[str] = []
    for key in sorted(by_key):
        rs = by_key[key]
        lost = 0
        per_sys: dict[str, list[Any]] = {}
        counts: dict[str, int] = {}
        for r in rs:
            rec = r.rec["trace"]
            path = res.folder / rec["file"]
            run_lost = int(rec.get("lost", 0))
            for sys_ in _systems(rec):
                try:
                    trace = tr.read_trace(path, sys_)
                except (OSError, ImportError) as e:
                    problems.append(f"{rec['file']}: {e}")
                    break
                run_lost = max(run_lost, trace.lost)
                counts[sys_] = counts.get(sys_, 0) + len(trace.events)
                try:
                    per_sys.setdefault(sys_, []).append(tr.breakdown(trace, sys_))
                except (KeyError, ValueError):
                    pass     # not a scheduler's life cycle (e.g. a device's events)
            lost += run_lost
            lost_runs += run_lost > 0
        lost_total += lost
        summary[key] = {"lost": lost, "runs": len(rs), "events": counts, "classes": {}}
        shown = False
        for sys_, bds in per_sys.items():
            merged = tr.Breakdown([q for b in bds for q in b.requests],
                                  sum(b.unfinished for b in bds), sum(b.orphans for b in bds))
            unfinished += merged.unfinished
            orphans += merged.orphans
            for cls, row in tr.per_class(merged).items():
                shown = True
                rows.append([key, rs[0].scheduler, sys_, cls, row["count"],
                             _ms(row["staged"]), _ms(row["device"]),
                             f"{row['total'][99.0] / 1e6:.3f}", lost])
                summary[key]["classes"][f"{sys_}/{cls}"] = {
                    "requests": row["count"],
                    **{f"{w}_p{p:g}_ms": row[w][p] / 1e6 for w in ("staged", "device", "total")
                       for p in (50.0, 99.0)}}
        if not shown:
            what = ", ".join(f"{s} {n}" for s, n in counts.items() if n)
            rows.append([key, rs[0].scheduler, "–", f"(no requests; events: {what})" if what
                         else "(no event recorded)", "–", "–", "–", "–", lost])
    params = res.manifest.get("params", {}).get("trace", {})
    tracer = params.get("tracer", "?")
    where = ("each run" if params.get("saved", True) else
             "the runs of the configurations that keep their events")
    out = ["\n## Traces: staged and device time\n\n"
           f"Recorded with {tracer} beside {where} (the `trace` entry of each run in "
           "`manifest.json`; `scripts/trace-report FILE` reports one run in full). Per "
           "configuration, its repetitions together: requests completed in the trace, "
           "staged time (insert to dispatch) and device time (dispatch to completion) "
           "p50 / p99, total p99, in ms, from tracepoints/report.py. The traces cover "
           "the whole fio run, ramp included.\n\n",
           table(["configuration", "scheduler", "system", "class", "requests",
                  "staged p50 / p99", "device p50 / p99", "total p99", "events lost"], rows,
                 "llllrrrrr")]
    if lost_total:
        out.append(f"\n**The tracer lost {lost_total} event(s) in {lost_runs} run(s)**: their "
                   "requests are missing above (a larger --trace-buffer-kb helps).\n")
    else:
        out.append("\nThe tracer lost no event.\n")
    if unfinished or orphans:
        out.append(f"\n{unfinished} request(s) were still staged or in the device when "
                   f"tracing stopped and {orphans} event(s) belonged to requests inserted "
                   "before it started; they are left out.\n")
    for p in problems:
        out.append(f"\n- could not read {p}\n")
    return "".join(out), {"tracer": tracer, "lost": lost_total, "configurations": summary}


def _ms(row: dict[Any, float]) -> str:
    return f"{row[50.0] / 1e6:.3f} / {row[99.0] / 1e6:.3f}"
