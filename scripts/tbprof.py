"""Exact instruction profile of the guest kernel per I/O, by function, for
the overhead suite's job: python3 -m scripts.tbprof --kernel RELEASE
--schedulers fifo-ref,flashfq [--tune flashfq:depth=256 ...].

perf cannot profile the overhead suite's guest: on an instruction-counting
clock its cpu-clock samples land in the idle loop or, when the guest is
busy, where interrupts are enabled again, i.e. on the unlock of every
section an elevator runs with them off.  This counts instead: a QEMU TCG
plugin (scripts/tbprof-plugin.c, built here with gcc) counts the
executions of every translated block, the guest runs null_blk as the
overhead suite loads it (bench/suites/overhead.py NULL_BLK) and fio's job
(4 KiB random reads, io_uring, iodepth 32, one vCPU, icount shift 3), and
the counts of a snapshot before and after one fio run per scheduler, named
from the guest's kallsyms, give the instructions each function ran per
I/O.  The figures are exact and repeat; they include everything the guest
ran during the run (fio, the agent's polling, timer ticks), so compare
schedulers in the same boot, function by function.

The guest's kernel symbols are fetched once per kernel (about 1 MB over the
serial agent, gzip and base64) and kept in .cache/tbprof/.

With --locks the plugin also follows the guest's spinlocks and atomic
instructions (see tbprof-plugin.c): per scheduler, each lock primitive's
call site, the lock, the request path its function belongs to, whether
interrupts were off, acquisitions and instructions held per I/O; and a
model of the IOPS ceiling that the busiest cache line shared by all
submitting CPUs (the elevator's lock and the elevator's atomics on a few
lines) allows at N CPUs: 1 / (transfers x cache-line transfer + held
instructions / (IPC x GHz)), per I/O.  One vCPU: nothing contends, so the
counts are exact; the model turns them into a bound.

With --vcpus 2 the guest runs on two vCPUs under multi-threaded TCG, as
the overhead suite's VM does (no instruction-counting clock; each job
pinned to its vCPU); with --lines too, the plugin's coherence model counts
the cache lines that move between the vCPUs, by the kernel function that
made them move (tbprof-plugin.c).

With --tlb BITS the plugin also runs the kernel's loads and stores through
a model of TCG's softmmu TLB (2^BITS entries a vCPU, direct-mapped by 4 KiB
page, with QEMU's victim TLB of 8): the fills (page walks) and victim hits
per I/O, by the kernel function whose instruction missed.  What an
elevator adds in pages shows there, and which pages evict each other;
QEMU's own TLB resizes and is flushed, which the model is not
(tbprof-plugin.c).
"""
from __future__ import annotations

import argparse
import base64
import bisect
import gzip
import os
import re
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PLUGIN_SRC = ROOT / "scripts" / "tbprof-plugin.c"
CACHE = Path(os.environ.get("BUILD_CACHE", ROOT / ".cache")) / "tbprof"
BS = 4096

# A block's key: its guest virtual address and instruction count.
Block = tuple[int, int]


def parse_counts(text: str) -> dict[Block, int]:
    """The plugin's snapshot: "VADDR_HEX INSNS COUNT" lines (and, with
    locks=on, the lock and atomic lines parse_snapshot() reads)."""
    return parse_snapshot(text).blocks


#: (call site, lock, primitive's entry) -> (acquisitions, instructions
#: held, acquisitions with interrupts off)
HoldKey = tuple[int, int, int]


@dataclass
class Atomic:
    """An atomic instruction: how often it ran, the cache lines it touched
    (the first four, with their accesses) and the accesses to other lines."""
    execs: int
    other: int = 0
    lines: dict[int, int] = field(default_factory=dict)


@dataclass
class Snapshot:
    """All a snapshot holds: block executions and, with locks=on, each
    (site, lock, primitive)'s totals, the atomic instructions, releases of
    no lock held and records dropped."""
    blocks: dict[Block, int] = field(default_factory=dict)
    holds: dict[HoldKey, tuple[int, int, int]] = field(default_factory=dict)
    atomics: dict[int, Atomic] = field(default_factory=dict)
    unmatched: int = 0
    dropped: int = 0
    #: lines=on: instruction address -> cache-line transfers it caused
    xfers: dict[int, int] = field(default_factory=dict)
    #: blocks that end in a return or an indirect jump or call
    indirect: set[Block] = field(default_factory=set)
    #: tlb=: instruction address -> fills (misses of the TLB and its victims)
    fills: dict[int, int] = field(default_factory=dict)
    #: tlb=: instruction address -> hits in the victim TLB
    victims: dict[int, int] = field(default_factory=dict)
    #: block -> times it was left for a block on another page, not through
    #: an indirect exit (a lookup too: QEMU chains blocks within a page)
    pexits: dict[Block, int] = field(default_factory=dict)


def parse_snapshot(text: str) -> Snapshot:
    """The plugin's snapshot (tbprof-plugin.c says what each line holds)."""
    out = Snapshot()
    for line in text.splitlines():
        f = line.split()
        if not f:
            continue
        try:
            if f[0] == "lock" and len(f) == 7:
                site, lock, fn = (int(x, 16) for x in f[1:4])
                out.holds[(site, lock, fn)] = (int(f[4]), int(f[5]), int(f[6]))
            elif f[0] == "atomic" and len(f) >= 4:
                lines = {}
                for item in f[4:]:
                    addr, _, hits = item.partition(":")
                    lines[int(addr, 16)] = int(hits)
                out.atomics[int(f[1], 16)] = Atomic(int(f[2]), int(f[3]), lines)
            elif f[0] == "ind" and len(f) == 3:
                out.indirect.add((int(f[1], 16), int(f[2])))
            elif f[0] == "pex" and len(f) == 4:
                out.pexits[(int(f[1], 16), int(f[2]))] = int(f[3])
            elif f[0] == "xfer" and len(f) == 3:
                out.xfers[int(f[1], 16)] = int(f[2])
            elif f[0] == "tlb" and len(f) == 4:
                addr = int(f[1], 16)
                out.fills[addr], out.victims[addr] = int(f[2]), int(f[3])
            elif f[0] == "unmatched" and len(f) == 3:
                out.unmatched, out.dropped = int(f[1]), int(f[2])
            elif len(f) == 3:
                out.blocks[(int(f[0], 16), int(f[1]))] = int(f[2])
            else:
                raise ValueError
        except ValueError:
            raise ValueError(f"not a snapshot line: {line!r}") from None
    return out


def diff_snapshot(after: Snapshot, before: Snapshot) -> Snapshot:
    """What ran between two snapshots."""
    holds = {}
    for k, (a, h, i) in after.holds.items():
        a0, h0, i0 = before.holds.get(k, (0, 0, 0))
        if a < a0:
            raise ValueError(f"lock record {k[0]:#x} counts less in the later snapshot")
        if a - a0:
            holds[k] = (a - a0, h - h0, i - i0)
    atomics = {}
    for addr, at in after.atomics.items():
        old = before.atomics.get(addr, Atomic(0))
        if at.execs - old.execs > 0:
            lines = {ln: n - old.lines.get(ln, 0) for ln, n in at.lines.items()
                     if n - old.lines.get(ln, 0) > 0}
            atomics[addr] = Atomic(at.execs - old.execs, at.other - old.other, lines)
    def grown(now: dict[int, int], then: dict[int, int]) -> dict[int, int]:
        return {a: n - then.get(a, 0) for a, n in now.items() if n - then.get(a, 0) > 0}

    xfers = grown(after.xfers, before.xfers)
    return Snapshot(diff_counts(after.blocks, before.blocks), holds, atomics,
                    after.unmatched - before.unmatched, after.dropped - before.dropped,
                    xfers, after.indirect | before.indirect,
                    grown(after.fills, before.fills), grown(after.victims, before.victims),
                    diff_counts(after.pexits, before.pexits))


def diff_counts(after: dict[Block, int], before: dict[Block, int]) -> dict[Block, int]:
    """Executions between two snapshots (blocks that ran in between)."""
    out = {}
    for k, n in after.items():
        d = n - before.get(k, 0)
        if d < 0:
            raise ValueError(f"block {k[0]:#x} ran fewer times in the later snapshot")
        if d:
            out[k] = d
    return out


@dataclass
class Symbols:
    """Text symbols (kallsyms lines), looked up by address."""
    addrs: list[int]
    names: list[str]

    @classmethod
    def parse(cls, texts: Iterable[str]) -> Symbols:
        pairs = []
        for text in texts:
            for line in text.splitlines():
                f = line.split()
                if len(f) < 3 or f[1] not in ("t", "T", "w", "W"):
                    continue
                name = f[2] + (f[3] if len(f) > 3 and f[3].startswith("[") else "")
                pairs.append((int(f[0], 16), name))
        pairs.sort()
        return cls([a for a, _ in pairs], [n for _, n in pairs])

    def name(self, addr: int) -> str:
        """The symbol at or below @addr; "user" below every kernel symbol
        (fio, the agent)."""
        i = bisect.bisect_right(self.addrs, addr) - 1
        return self.names[i] if i >= 0 else "user"

    def following(self, addr: int) -> str | None:
        """The first symbol above @addr (None: none)."""
        i = bisect.bisect_right(self.addrs, addr)
        return self.names[i] if i < len(self.names) else None

    def start(self, addr: int) -> int | None:
        """The address of the symbol at or below @addr (None: "user")."""
        i = bisect.bisect_right(self.addrs, addr) - 1
        return self.addrs[i] if i >= 0 else None

    def address(self, name: str) -> int | None:
        """The (first) address of the symbol @name."""
        try:
            return self.addrs[self.names.index(name)]
        except ValueError:
            return None


def per_symbol(delta: dict[Block, int], syms: Symbols) -> Counter[str]:
    """Instructions run per symbol (a block counts for the symbol it starts in)."""
    out: Counter[str] = Counter()
    for (addr, insns), n in delta.items():
        out[syms.name(addr)] += insns * n
    return out


def lookups(snap: Snapshot) -> dict[Block, int]:
    """Block -> the times it was left through a lookup of the next block:
    each execution of a block that ends indirectly, and each exit of
    another to a block on another page than its own start."""
    out = {b: n for b, n in snap.blocks.items() if b in snap.indirect}
    for b, n in snap.pexits.items():
        out[b] = out.get(b, 0) + n
    return out


def lookups_per_symbol(snap: Snapshot, syms: Symbols) -> Counter[str]:
    """Lookups (lookups()) per symbol of the block left."""
    out: Counter[str] = Counter()
    for (addr, _), n in lookups(snap).items():
        out[syms.name(addr)] += n
    return out


def insn_counts_per_symbol(counts: dict[int, int], syms: Symbols) -> Counter[str]:
    """Counts kept by instruction (cache-line transfers, lines=on; TLB
    fills or victim hits, tlb=) per symbol of the instruction."""
    out: Counter[str] = Counter()
    for addr, n in counts.items():
        out[syms.name(addr)] += n
    return out


def blocks_of(delta: dict[Block, int], syms: Symbols, func: str,
              ios: int) -> list[tuple[int, int, float]]:
    """The blocks of @func that ran: (offset from its start, as objdump of
    its module or vmlinux shows past the function's own address;
    instructions; executions per I/O), by offset."""
    out = []
    for (addr, insns), n in delta.items():
        if syms.name(addr) == func:
            start = syms.start(addr)
            assert start is not None
            out.append((addr - start, insns, n / max(ios, 1)))
    return sorted(out)


def insn_counts_of(counts: dict[int, int], syms: Symbols, func: str,
                   ios: int) -> list[tuple[int, float]]:
    """The instructions of @func with counts (insn_counts_per_symbol()):
    (offset from its start, as blocks_of(); count per I/O), by offset."""
    out = []
    for addr, n in counts.items():
        if syms.name(addr) == func:
            start = syms.start(addr)
            assert start is not None
            out.append((addr - start, n / max(ios, 1)))
    return sorted(out)


def render_insn_counts(func: str, sched: str, counts: list[tuple[int, float]],
                       what: str = "transfers/IO") -> str:
    """Per instruction of @func (insn_counts_of()): where, cache-line
    transfers (or @what) per I/O."""
    lines = [f"{func} under {sched}: offset  {what}"]
    lines += [f"  +{off:#06x}  {n:12.2f}" for off, n in counts if n >= 0.01]
    lines.append(f"  total {sum(n for _, n in counts):.2f}")
    return "\n".join(lines)


def render_blocks(func: str, sched: str, blocks: list[tuple[int, int, float]]) -> str:
    """Per block of @func: where, how long, how often, instructions per I/O."""
    lines = [f"{func} under {sched}: offset  instructions  runs/IO  instructions/IO"]
    lines += [f"  +{off:#06x}  {insns:12d}  {runs:7.2f}  {insns * runs:15.1f}"
              for off, insns, runs in blocks]
    lines.append(f"  total {sum(i * r for _, i, r in blocks):.1f}")
    return "\n".join(lines)


@dataclass
class Footprint:
    """What a run's translated blocks cost beyond their instructions: each
    block run is an entry into translated code, and the blocks that ran
    at all are the code QEMU must find again.  It looks a block up in a
    per-vCPU cache of 4096 entries (hashed by address) and, on a miss, in
    its global hash table; a return or an indirect call or jump always
    takes the lookup, and so does a direct one to another page than the
    block's start (QEMU chains blocks only within a page).  Under TCG
    these lookups are about a third of a run's host time, whatever the
    instructions (scripts/README.md)."""
    runs: int       # block executions
    hot: int        # blocks that ran at least once per HOT_IOS I/Os
    indirect: int = 0   # executions of blocks that end indirectly
    pexits: int = 0     # direct exits to another page (a lookup each)


#: a block is hot if it ran at least once per this many I/Os
HOT_IOS = 10


def footprint(delta: dict[Block, int], ios: int,
              indirect: set[Block] | None = None,
              pexits: dict[Block, int] | None = None) -> Footprint:
    return Footprint(sum(delta.values()),
                     sum(1 for n in delta.values() if n * HOT_IOS >= ios > 0),
                     sum(n for b, n in delta.items() if indirect and b in indirect),
                     sum(pexits.values()) if pexits else 0)


def render(results: dict[str, tuple[int, Counter[str]]], top: int,
           feet: dict[str, Footprint] | None = None,
           title: str = "instructions per I/O") -> str:
    """A table of instructions (or what @title names) per I/O: the
    functions that differ most between the schedulers first (all of them
    with one scheduler), and the total; with @feet, also the blocks run
    per I/O and the hot blocks (Footprint)."""
    scheds = list(results)
    names = set().union(*(per for _, per in results.values()))

    def row(name: str) -> list[float]:
        return [results[s][1].get(name, 0) / max(results[s][0], 1) for s in scheds]

    def spread(name: str) -> float:
        v = row(name)
        return max(v) - min(v) if len(v) > 1 else v[0]

    width = max([len(n) for n in names] + [8])
    lines = [title.ljust(width) + "".join(f"{s:>12}" for s in scheds),
             "I/Os".ljust(width) + "".join(f"{results[s][0]:>12}" for s in scheds),
             "all".ljust(width) + "".join(
                 f"{sum(results[s][1].values()) / max(results[s][0], 1):>12.1f}"
                 for s in scheds)]
    if feet:
        lines += ["blocks run".ljust(width) + "".join(
                      f"{feet[s].runs / max(results[s][0], 1):>12.1f}" for s in scheds),
                  "indirect exits (ret, jmp/call *)".ljust(width) + "".join(
                      f"{feet[s].indirect / max(results[s][0], 1):>12.1f}" for s in scheds),
                  "exits to another page (jmp, call)".ljust(width) + "".join(
                      f"{feet[s].pexits / max(results[s][0], 1):>12.1f}" for s in scheds),
                  f"hot blocks (>= 1 per {HOT_IOS} I/Os)".ljust(width) + "".join(
                      f"{feet[s].hot:>12}" for s in scheds)]
    for name in sorted(names, key=lambda n: (-spread(n), n))[:top]:
        lines.append(name.ljust(width) + "".join(f"{x:>12.1f}" for x in row(name)))
    return "\n".join(lines)


# --locks ------------------------------------------------------------------

#: The kernel's lock primitives (kernel/locking/spinlock.c; 6.1 and 6.12
#: call every one out of line, spin_unlock too: CONFIG_UNINLINE_SPIN_UNLOCK):
#: name -> (what it does, whether it turns interrupts off for the hold).
PRIMITIVES: dict[str, tuple[str, bool]] = {}
for _kind in ("spin", "read", "write"):
    PRIMITIVES.update({
        f"_raw_{_kind}_lock": ("lock", False), f"_raw_{_kind}_lock_bh": ("lock", False),
        f"_raw_{_kind}_lock_irq": ("lock", True), f"_raw_{_kind}_lock_irqsave": ("lock", True),
        f"_raw_{_kind}_trylock": ("trylock", False),
        f"_raw_{_kind}_unlock": ("unlock", False), f"_raw_{_kind}_unlock_bh": ("unlock", False),
        f"_raw_{_kind}_unlock_irq": ("unlock", False),
        f"_raw_{_kind}_unlock_irqrestore": ("unlock", False)})
PRIMITIVES["_raw_spin_trylock_bh"] = ("trylock", False)
_CODES = {"lock": 1, "trylock": 2, "unlock": 3}


def primitives_command(syms: Symbols) -> str:
    """The plugin's "locks" trigger: each primitive's entry and code."""
    lines = ["locks"]
    for name, (op, _) in PRIMITIVES.items():
        addr = syms.address(name)
        if addr is not None:
            lines.append(f"{addr:x} {_CODES[op]}")
    if len(lines) == 1:
        raise ValueError("none of the lock primitives is in the guest's kallsyms")
    return "\n".join(lines) + "\n"


#: Which part of a request's life a function belongs to, by the words of
#: its name (the first that matches; its module and leading underscores
#: left out).  Named exceptions first.
PATH_NAMES: dict[str, str] = {
    "blk_mq_dispatch_plug_list": "insert", "blk_mq_flush_plug_list": "insert",
    "blk_mq_sched_bio_merge": "insert", "blk_mq_sched_try_insert_merge": "insert",
}
PATH_WORDS: list[tuple[str, tuple[str, ...]]] = [
    ("completion", ("finish", "complet", "end_request", "free_request", "requeue",
                    "softirq", "_done", "end_io", "put_request")),
    ("insert", ("insert", "merge", "prepare", "limit_depth", "submit", "plug",
                "get_tag", "alloc_request", "bio")),
    ("dispatch", ("dispatch", "has_work", "run_hw_queue", "run_work", "queue_rq",
                  "issue", "commit_rqs", "start_request")),
]


def base_name(func: str) -> tuple[str, str | None]:
    """A function's name without its module, and its module (None: vmlinux)."""
    m = re.fullmatch(r"(.*)\[(\w+)\]", func)
    return (m.group(1), m.group(2)) if m else (func, None)


def path_of(func: str) -> str:
    """insert, dispatch, completion or other (PATH_NAMES, PATH_WORDS)."""
    name = base_name(func)[0].lstrip("_").lower()
    if name in PATH_NAMES:
        return PATH_NAMES[name]
    for path, words in PATH_WORDS:
        if any(w in name for w in words):
            return path
    return "other"


#: The upstream elevators' modules (6.12; mq-deadline is built in on 6.1)
#: and the prefix of their functions' names.
UPSTREAM_ELEVATORS: dict[str, tuple[str, str]] = {
    "mq-deadline": ("mq_deadline", "dd_"), "bfq": ("bfq", "bfq_"),
    "kyber": ("kyber_iosched", "kyber_")}
#: Locks and atomics of an elevator's that are not one per queue, by the
#: functions that take them (from the 6.12 sources): the io_context's lock
#: (one per task; BFQ takes it to find its bfq_io_cq), kyber's kcq->lock
#: (one per hardware queue and CPU) and khd->lock (one per hardware
#: queue), kyber's latency histograms (per CPU) and kcq bitmap (per
#: hardware queue); the io_context reference that FlashFQ's and CARS's
#: prepare_request take (elevator/iosched-icq.h: one per task); CARS's
#: release records (per CPU: cars-host/cars-iosched.c, "Completions"; a
#: dispatch applies its own CPU's, another CPU's only when a release could
#: change its decision).
SCOPE_EXCEPTIONS: list[tuple[str, str]] = [
    (r"ioc_|bfq_bic_lookup", "task"),
    (r"kyber_(insert_requests|bio_merge)|flush_busy_kcq", "cpu"),
    (r"kyber_", "hctx")]
ATOMIC_SCOPE_EXCEPTIONS: list[tuple[str, str]] = [
    (r"(ffq|cars)_prepare_request", "task"),
    (r"kyber_(completed_request|timer_fn)|cars_(post_release|apply_record)", "cpu"),
    (r"kyber_", "hctx")]


def elevator_of(func: str, sched: str, module: str | None) -> bool:
    """Whether @func is @sched's own code: in its module (@module,
    kallsyms' spelling), or built in with its prefix."""
    name, mod = base_name(func)
    if sched in UPSTREAM_ELEVATORS:
        umod, prefix = UPSTREAM_ELEVATORS[sched]
        return mod == umod or (mod is None and name.startswith(prefix))
    return module is not None and mod == module.replace("-", "_")


def scope_of(sites: Iterable[str], sched: str, module: str | None,
             exceptions: Sequence[tuple[str, str]] = SCOPE_EXCEPTIONS) -> str:
    """A lock's (or an atomic's) scope from the functions that take it:
    "queue" (the elevator's, one per queue: every submitting CPU shares
    it), "task", "cpu" or "hctx" (@exceptions), or "core" (the block
    layer's or another part of the kernel's: not judged here)."""
    sites = list(sites)
    if not any(elevator_of(f, sched, module) for f in sites):
        return "core"
    for pattern, scope in exceptions:
        if any(re.match(pattern, base_name(f)[0]) for f in sites):
            return scope
    return "queue"


@dataclass(frozen=True)
class Site:
    """One call site of a lock primitive on one lock, per I/O."""
    func: str
    primitive: str
    lock: int
    scope: str
    path: str
    acquisitions: float
    held: float              # instructions, per I/O
    irqoff: float            # share of the acquisitions with interrupts off

    @property
    def held_each(self) -> float:
        return self.held / self.acquisitions if self.acquisitions else 0.0


def lock_sites(delta: Snapshot, syms: Symbols, ios: int, sched: str,
               module: str | None) -> list[Site]:
    """Every (calling function, primitive, lock) that ran, per I/O, the
    most acquired first."""
    ios = max(ios, 1)
    agg: dict[tuple[str, str, int], list[int]] = {}
    for (site, lock, fn), (acq, held, irqoff) in delta.holds.items():
        prim = syms.name(fn)
        if PRIMITIVES.get(prim, ("", False))[1]:
            irqoff = acq
        a = agg.setdefault((syms.name(site), prim, lock), [0, 0, 0])
        a[0] += acq
        a[1] += held
        a[2] += irqoff
    by_lock: dict[int, set[str]] = {}
    for func, _, lock in agg:
        by_lock.setdefault(lock, set()).add(func)
    scopes = {lock: scope_of(funcs, sched, module) for lock, funcs in by_lock.items()}
    out = [Site(func, prim, lock, scopes[lock], path_of(func), acq / ios, held / ios,
                irqoff / acq if acq else 0.0)
           for (func, prim, lock), (acq, held, irqoff) in agg.items()]
    return sorted(out, key=lambda s: (-s.acquisitions, s.func, s.lock))


@dataclass(frozen=True)
class AtomicSite:
    """An atomic instruction's function, executions per I/O, and the
    cache lines it touched (all its accesses on them; None: more lines
    than the plugin keeps, e.g. one per request)."""
    func: str
    addr: int
    execs: float
    lines: dict[int, float] | None


def atomic_sites(delta: Snapshot, syms: Symbols, ios: int) -> list[AtomicSite]:
    """The atomic instructions that ran, but those of the lock primitives
    themselves (counted as acquisitions), most executed first; each line's
    executions per I/O in proportion to its accesses."""
    ios = max(ios, 1)
    out = []
    for addr, at in delta.atomics.items():
        func = syms.name(addr)
        if func in PRIMITIVES or func.startswith(("queued_spin_lock", "native_queued_spin",
                                                  "__pv_queued_spin", "pv_queued_spin")):
            continue
        total = sum(at.lines.values())
        lines = None if at.other or not total else {
            ln: at.execs * n / total / ios for ln, n in at.lines.items()}
        out.append(AtomicSite(func, addr, at.execs / ios, lines))
    return sorted(out, key=lambda a: (-a.execs, a.func, a.addr))


@dataclass(frozen=True)
class Model:
    """The ceiling model's assumptions: instructions become time at @ipc
    instructions a cycle at @ghz; the next acquirer of a line is any of
    the N CPUs alike, the same one (no transfer), one of the @ccx - 1
    sharing its L3 (@near_ns), or one beyond (@far_ns)."""
    ghz: float = 4.5
    ipc: float = 1.0
    near_ns: float = 17.0
    far_ns: float = 80.0
    ccx: int = 8

    def transfer_ns(self, cpus: int) -> float:
        """The expected cost of moving a line to its next user."""
        if cpus <= 1:
            return 0.0
        near = min(cpus, self.ccx) - 1
        return (near * self.near_ns + (cpus - 1 - near) * self.far_ns) / cpus

    def ns(self, insns: float) -> float:
        return insns / (self.ipc * self.ghz)

    def ceiling(self, transfers: float, held: float, cpus: int) -> float:
        """IOPS that a line taken @transfers times per I/O, and held for
        @held instructions per I/O, allows at @cpus CPUs (inf: no limit)."""
        ns = self.ns(held) + transfers * self.transfer_ns(cpus)
        return 1e9 / ns if ns > 0 else float("inf")


@dataclass(frozen=True)
class Line:
    """A cache line shared by every submitting CPU, per I/O: the locks on
    it (their acquisitions and instructions held) and the elevator's
    atomics on it."""
    addr: int
    scope: str
    acquisitions: float
    held: float
    atomics: float
    what: str

    @property
    def transfers(self) -> float:
        return self.acquisitions + self.atomics


@dataclass
class _LineSum:
    scope: str
    acquisitions: float = 0.0
    held: float = 0.0
    atomics: float = 0.0
    what: set[str] = field(default_factory=set)


def shared_lines(sites: Sequence[Site], atomics: Sequence[AtomicSite], sched: str,
                 module: str | None) -> list[Line]:
    """The elevator's lines: its locks' (scope queue, or hctx and cpu
    too) and those that its own atomic instructions touch on at most a few
    lines (per-queue data: a per-request field would touch many), by
    scope (queue first), then by instructions held and transfers."""
    acc: dict[int, _LineSum] = {}
    for s in sites:
        if s.scope == "core":
            continue
        e = acc.setdefault(s.lock & ~63, _LineSum(s.scope))
        e.acquisitions += s.acquisitions
        e.held += s.held
        e.what.add(base_name(s.func)[0])
    for a in atomics:
        scope = scope_of([a.func], sched, module, ATOMIC_SCOPE_EXCEPTIONS)
        if a.lines is None or scope == "core":
            continue
        for ln, n in a.lines.items():
            e = acc.setdefault(ln & ~63, _LineSum(scope))
            e.atomics += n
            e.what.add(base_name(a.func)[0] + " (atomic)")
    order = {"queue": 0, "hctx": 1, "cpu": 2, "task": 3}
    out = [Line(addr, e.scope, e.acquisitions, e.held, e.atomics, ", ".join(sorted(e.what)))
           for addr, e in acc.items()]
    return sorted(out, key=lambda ln: (order.get(ln.scope, 3), -ln.held, -ln.transfers,
                                       ln.addr))


def render_locks(sched: str, ios: int, sites: Sequence[Site],
                 atomics: Sequence[AtomicSite], delta: Snapshot, least: float,
                 module: str | None = None, others: int = 10) -> str:
    """Per call site and lock: scope, path, interrupts off, acquisitions
    and instructions held per I/O (those acquired at least @least times
    per I/O); then the atomic instructions by function: the elevator's
    and the @others most run of the rest."""
    shown = [s for s in sites if s.acquisitions >= least]
    width = max([len(s.func) for s in shown] + [20])
    lines = [f"{sched}: {ios} I/Os; locks per I/O (acquired >= {least:g} times per I/O; "
             f"releases of no lock held: {delta.unmatched}, records dropped: {delta.dropped})",
             f"  {'lock':>8} {'scope':5} {'site'.ljust(width)} {'primitive':28} {'path':10} "
             f"{'irq-off':>7} {'acq/IO':>7} {'held/acq':>8} {'held/IO':>8}"]
    for s in shown:
        lines.append(f"  {s.lock & 0xffffffff:08x} {s.scope:5} {s.func.ljust(width)} "
                     f"{s.primitive:28} {s.path:10} {s.irqoff:>7.0%} {s.acquisitions:>7.3f} "
                     f"{s.held_each:>8.1f} {s.held:>8.1f}")
    lines.append(f"  total{'':>{width + 57}} {sum(s.acquisitions for s in sites):>7.3f} "
                 f"{'':>8} {sum(s.held for s in sites):>8.1f}")
    per_func: dict[str, list[float]] = {}
    for a in atomics:
        e = per_func.setdefault(a.func, [0.0, 0.0, 0.0])
        e[0] += a.execs
        if a.lines is None:
            e[2] += a.execs
        else:
            e[1] = max(e[1], len(a.lines))
    rows = sorted(((f, *v) for f, v in per_func.items() if v[0] >= least),
                  key=lambda r: (-r[1], r[0]))
    mine = [r for r in rows if elevator_of(r[0], sched, module)]
    rows = mine + [r for r in rows if r not in mine][:others]
    if rows:
        title = "atomic instructions per I/O, by function"
        w = max([len(r[0]) for r in rows] + [len(title)])
        lines.append(f"  {title.ljust(w)} {'execs/IO':>8} {'on many lines':>13}")
        lines += [f"  {f.ljust(w)} {n:>8.3f} {many:>13.3f}" for f, n, _, many in rows]
    return "\n".join(lines)


CPUS = (1, 8, 32, 128)


def render_ceilings(lines_by_sched: dict[str, list[Line]], model: Model,
                    cpus: Sequence[int] = CPUS) -> str:
    """Per scheduler, its costliest shared line (scope queue; else, marked,
    hctx: shared only by the CPUs of one hardware queue, all of them on a
    single-queue device) and the IOPS ceiling it allows at each count of
    CPUs."""
    head = (f"{'scheduler':12} {'scope':5} {'acq/IO':>7} {'atomic/IO':>9} {'held/IO':>8} "
            + "".join(f"{f'{n} CPU' + ('s' if n > 1 else ''):>10}" for n in cpus)
            + "  line")
    out = [f"IOPS ceiling of the costliest shared cache line: 1 / (transfers x t(N) + "
           f"held / ({model.ipc:g} IPC x {model.ghz:g} GHz)); t(N) = "
           + ", ".join(f"{model.transfer_ns(n):.1f} ns at {n}" for n in cpus), head]
    for sched, all_lines in lines_by_sched.items():
        lines = [x for x in all_lines if x.scope in ("queue", "hctx")]
        if not lines:
            out.append(f"{sched:12} {'-':5} {'':>7} {'':>9} {'':>8} "
                       + "".join(f"{'no limit':>10}" for _ in cpus)
                       + "  no line of the elevator's shared across CPUs")
            continue
        ln = min(lines, key=lambda x: (x.scope != "queue",
                                       model.ceiling(x.transfers, x.held, max(cpus))))
        cells = []
        for n in cpus:
            c = model.ceiling(ln.transfers, ln.held, n)
            cells.append(f"{'no limit' if c == float('inf') else f'{c / 1e6:.2f}M':>10}")
        out.append(f"{sched:12} {ln.scope:5} {ln.acquisitions:>7.3f} {ln.atomics:>9.3f} "
                   f"{ln.held:>8.1f} " + "".join(cells) + f"  {ln.what}")
    return "\n".join(out)


def build_plugin() -> Path:
    """scripts/tbprof-plugin.c built into .cache/tbprof/ (again if newer)."""
    out = CACHE / "tbprof-plugin.so"
    if out.exists() and out.stat().st_mtime >= PLUGIN_SRC.stat().st_mtime:
        return out
    CACHE.mkdir(parents=True, exist_ok=True)
    r = subprocess.run(["gcc", "-O2", "-shared", "-fPIC", "-fvisibility=hidden",
                        "-Wall", "-Wextra", "-Wno-unused-parameter", "-Werror", "-o", str(out), str(PLUGIN_SRC),
                        "-lpthread"], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"building the plugin failed:\n{r.stderr}")
    return out


def parse_tune(items: Iterable[str]) -> dict[str, list[tuple[str, str]]]:
    """--tune SCHED:NAME=VALUE items, by scheduler."""
    out: dict[str, list[tuple[str, str]]] = {}
    for item in items:
        sched, sep, rest = item.partition(":")
        name, eq, value = rest.partition("=")
        if not sep or not eq or not sched or not name or not value or "/" in name:
            raise ValueError(f"--tune {item!r}: SCHED:NAME=VALUE")
        out.setdefault(sched, []).append((name, value))
    return out


def fio_job(iodepth: int, jobs: int, vcpus: int = 1) -> str:
    """The overhead suite's job on nullb0 (fio terse v3, one line: with
    @jobs > 1 the jobs' sum, --group_reporting); --runtime is the
    caller's.  On one vCPU the jobs share it: against one job the
    difference is what a second task costs the elevator, not a second
    CPU.  With @vcpus > 1 the jobs are pinned one to a vCPU, as the
    overhead suite pins them, over the first min(@jobs, @vcpus)."""
    job = (f"fio --name=j --filename=/dev/nullb0 --direct=1 --ioengine=io_uring "
           f"--rw=randread --bs={BS} --iodepth={iodepth} --time_based --norandommap "
           f"--randrepeat=0 --output-format=terse --terse-version=3"
           + (f" --numjobs={jobs} --group_reporting" if jobs > 1 else ""))
    if vcpus > 1:
        job += f" --cpus_allowed=0-{min(jobs, vcpus) - 1} --cpus_allowed_policy=split"
    return job


def add_run_args(p: argparse.ArgumentParser) -> None:
    """The arguments tbprof and hostprof share: the kernel, the schedulers
    compared in one boot and their tunables (parse_tune())."""
    p.add_argument("--kernel", required=True, help="test kernel release")
    p.add_argument("--schedulers", default="fifo-ref,flashfq",
                   help="compared, in one boot (default fifo-ref,flashfq)")
    p.add_argument("--tune", action="append", default=[], metavar="SCHED:NAME=VALUE",
                   help="a tunable written before that scheduler's runs, e.g. "
                        "flashfq:depth=256 flashfq:throttle_us=0 (the overhead suite's)")


def load_command(null_blk: dict[str, int | str], elevators: Iterable[str]) -> str:
    """The guest's command that loads null_blk with @null_blk's parameters
    (the overhead suite's NULL_BLK) and the project's @elevators' modules;
    it ends with "&&" or ";", for the caller's next command."""
    params = " ".join(f"{k}={v}" for k, v in null_blk.items())
    return f"modprobe null_blk {params} && " + " ".join(f"modprobe {m};" for m in elevators)


def select_command(sched: str, tunes: dict[str, list[tuple[str, str]]]) -> str:
    """The guest's command that selects @sched on nullb0 and writes its
    tunables."""
    cmd = f"echo {sched} > /sys/block/nullb0/queue/scheduler"
    for name, value in tunes.get(sched, []):
        cmd += f" && echo {value} > /sys/block/nullb0/queue/iosched/{name}"
    return cmd


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python3 -m scripts.tbprof",
                                description=(__doc__ or "").split("\n\n")[0])
    add_run_args(p)
    p.add_argument("--runtime", type=float, default=2.0, help="fio seconds (default 2)")
    p.add_argument("--iodepth", type=int, default=32, help="(default 32)")
    p.add_argument("--jobs", type=int, default=1,
                   help="fio jobs, each its own task, on the one vCPU (default 1)")
    p.add_argument("--vcpus", type=int, choices=(1, 2), default=1,
                   help="2: the overhead suite's multi-threaded VM (two vCPUs, no "
                        "instruction-counting clock, each job pinned to its vCPU, as "
                        "hostprof runs it): counts what concurrency adds (lock spinning, "
                        "queue runs finding nothing); figures then move between runs "
                        "(default 1)")
    p.add_argument("--top", type=int, default=40, help="functions shown (default 40)")
    p.add_argument("--blocks", action="append", default=[], metavar="FUNC",
                   help="also each translated block of FUNC (as the table names it, e.g. "
                        "'k2_dispatch_request[k2_iosched]'): its offset in the function, "
                        "to read beside objdump -d, and how often it ran per I/O")
    p.add_argument("--no-build", action="store_true",
                   help="boot with the modules already in .build/KERNEL, not built again")
    p.add_argument("--locks", action="store_true",
                   help="also each scheduler's lock acquisitions, instructions held and "
                        "atomic instructions per I/O, and the IOPS ceiling model")
    p.add_argument("--lines", action="store_true",
                   help="with --vcpus 2: also the cache-line transfers between the vCPUs "
                        "per I/O, by the kernel function that caused them (a coherence "
                        "model in the plugin: tbprof-plugin.c)")
    p.add_argument("--tlb", type=int, default=0, metavar="BITS",
                   help="also the guest TLB's fills and victim hits per I/O, by the kernel "
                        "function that missed, in a model of TCG's TLB with 2^BITS "
                        "entries (6-22; QEMU starts at 8) and 8 victims (tbprof-plugin.c)")
    p.add_argument("--least", type=float, default=0.05,
                   help="--locks: sites and atomics shown from this many per I/O "
                        "(default 0.05)")
    p.add_argument("--ghz", type=float, default=Model.ghz,
                   help=f"model: clock (default {Model.ghz:g})")
    p.add_argument("--ipc", type=float, default=Model.ipc,
                   help=f"model: instructions per cycle held (default {Model.ipc:g})")
    p.add_argument("--near-ns", type=float, default=Model.near_ns,
                   help=f"model: line transfer within an L3 (default {Model.near_ns:g})")
    p.add_argument("--far-ns", type=float, default=Model.far_ns,
                   help=f"model: line transfer beyond it (default {Model.far_ns:g})")
    p.add_argument("--ccx", type=int, default=Model.ccx,
                   help=f"model: cores sharing an L3 (default {Model.ccx})")
    a = p.parse_args(argv)
    if a.jobs < 1:
        p.error("--jobs: at least 1")
    if a.vcpus > 1 and a.locks:
        p.error("--locks follows one vCPU's holds: not with --vcpus 2")
    if a.lines and a.vcpus < 2:
        p.error("--lines counts transfers between vCPUs: it needs --vcpus 2")
    if a.tlb and not 6 <= a.tlb <= 22:
        p.error("--tlb: QEMU's TLB has 2^6 to 2^22 entries")
    try:
        tunes = parse_tune(a.tune)
    except ValueError as e:
        p.error(str(e))
    scheds = [s for s in a.schedulers.split(",") if s]
    model = Model(a.ghz, a.ipc, a.near_ns, a.far_ns, a.ccx)

    from bench import modules
    from bench.suites.overhead import NULL_BLK
    from bench.vm import booted

    plugin = build_plugin()
    trigger = CACHE / f"trigger-{os.getpid()}"
    snap = CACHE / f"snapshot-{os.getpid()}"

    def wait_for(done: Callable[[], bool], failure: str) -> None:
        """Poll the plugin's side of the trigger file for up to 120 s."""
        deadline = time.monotonic() + 120
        while not done():
            if time.monotonic() > deadline:
                raise RuntimeError(failure)
            time.sleep(0.05)

    def snapshot() -> Snapshot:
        snap.unlink(missing_ok=True)
        trigger.write_text(f"{snap}\n")
        wait_for(snap.exists, "the plugin wrote no snapshot (is it loaded?)")
        out = parse_snapshot(snap.read_text())
        snap.unlink()
        return out

    def set_primitives(command: str) -> None:
        trigger.write_text(command)
        wait_for(lambda: not trigger.exists(), "the plugin did not take the lock primitives")

    job = fio_job(a.iodepth, a.jobs, a.vcpus)
    plugin_args = (f"{plugin},trigger={trigger}" + (",locks=on" if a.locks else "")
                   + (f",tlb={a.tlb}" if a.tlb else ""))
    vm_cfg: dict[str, object] = {"smp": 1, "icount": 3}
    if a.vcpus > 1:
        plugin_args += ",smp=on" + (",lines=on" if a.lines else "")
        vm_cfg = {"smp": a.vcpus, "tcg_thread": "multi"}
    mods_of = modules.elevators()
    with booted(a.kernel, build=not a.no_build, extra_qemu=["-plugin", plugin_args],
                **vm_cfg) as target:
        vm = target.vm
        r = vm.run(load_command(NULL_BLK, mods_of.values()) + " "
                   "echo 0 > /proc/sys/kernel/kptr_restrict && grep -F '[' /proc/kallsyms")
        if not r.ok:
            raise RuntimeError(f"setting up the guest failed: {r.out[-2000:]}")
        kallsyms = CACHE / f"kallsyms-{a.kernel}.gz"
        if not kallsyms.exists():
            k = vm.run("grep -E ' [tTwW] ' /proc/kallsyms | grep -vF '[' | gzip -1 | base64 -w 0",
                       timeout=1200)
            kallsyms.write_bytes(base64.b64decode(k.out.strip()))
        syms = Symbols.parse([r.out, gzip.decompress(kallsyms.read_bytes()).decode()])
        if a.locks:
            set_primitives(primitives_command(syms))
        results: dict[str, tuple[int, Counter[str]]] = {}
        transfers: dict[str, tuple[int, Counter[str]]] = {}
        looked: dict[str, tuple[int, Counter[str]]] = {}
        fills: dict[str, tuple[int, Counter[str]]] = {}
        victims: dict[str, tuple[int, Counter[str]]] = {}
        feet: dict[str, Footprint] = {}
        lock_reports: list[str] = []
        lines_by_sched: dict[str, list[Line]] = {}
        for s in scheds:
            r = vm.run(select_command(s, tunes) + f" && {job} --runtime=1 > /dev/null")
            if not r.ok:
                raise RuntimeError(f"{s}: {r.out[-2000:]}")
            before = snapshot()
            r = vm.run(f"{job} --runtime={a.runtime:g} | cut -d';' -f6", timeout=600)
            after = snapshot()
            kib = int(r.out.strip().split()[-1])
            ios = kib * 1024 // BS
            whole = diff_snapshot(after, before)
            delta = whole.blocks
            results[s] = (ios, per_symbol(delta, syms))
            feet[s] = footprint(delta, ios, whole.indirect, whole.pexits)
            looked[s] = (ios, lookups_per_symbol(whole, syms))
            if a.lines:
                transfers[s] = (ios, insn_counts_per_symbol(whole.xfers, syms))
            if a.tlb:
                fills[s] = (ios, insn_counts_per_symbol(whole.fills, syms))
                victims[s] = (ios, insn_counts_per_symbol(whole.victims, syms))
            print(f"{s}: {ios} I/Os", flush=True)
            for func in a.blocks:
                blocks = blocks_of(delta, syms, func, ios)
                if blocks:
                    print(render_blocks(func, s, blocks), flush=True)
                if a.lines and (xf := insn_counts_of(whole.xfers, syms, func, ios)):
                    print(render_insn_counts(func, s, xf), flush=True)
                if a.tlb and (xf := insn_counts_of(whole.fills, syms, func, ios)):
                    print(render_insn_counts(func, s, xf, "TLB fills/IO"), flush=True)
                if a.tlb and (xf := insn_counts_of(whole.victims, syms, func, ios)):
                    print(render_insn_counts(func, s, xf, "victim TLB hits/IO"), flush=True)
            if a.locks:
                sites = lock_sites(whole, syms, ios, s, mods_of.get(s))
                atomics = atomic_sites(whole, syms, ios)
                lock_reports.append(render_locks(s, ios, sites, atomics, whole, a.least,
                                                 mods_of.get(s)))
                lines_by_sched[s] = shared_lines(sites, atomics, s, mods_of.get(s))
        print(render(results, a.top, feet))
        print("\n" + render(looked, a.top, title="lookups per I/O (indirect exits and "
                             "exits to another page, by the function left)"))
        if a.lines:
            print("\n" + render(transfers, a.top, title="cache-line transfers per I/O"))
        if a.tlb:
            print("\n" + render(fills, a.top, title=f"TLB fills per I/O (model: 2^{a.tlb} "
                                 "entries, 8 victims)"))
            print("\n" + render(victims, a.top, title="victim TLB hits per I/O"))
        if a.locks:
            print("\n" + "\n\n".join(lock_reports))
            print("\n" + render_ceilings(lines_by_sched, model))
    return 0


if __name__ == "__main__":
    sys.exit(main())
