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
"""
from __future__ import annotations

import argparse
import base64
import bisect
import gzip
import os
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PLUGIN_SRC = ROOT / "scripts" / "tbprof-plugin.c"
CACHE = Path(os.environ.get("BUILD_CACHE", ROOT / ".cache")) / "tbprof"
BS = 4096

# A block's key: its guest virtual address and instruction count.
Block = tuple[int, int]


def parse_counts(text: str) -> dict[Block, int]:
    """The plugin's snapshot: "VADDR_HEX INSNS COUNT" lines."""
    out: dict[Block, int] = {}
    for line in text.splitlines():
        f = line.split()
        if not f:
            continue
        if len(f) != 3:
            raise ValueError(f"not a snapshot line: {line!r}")
        out[(int(f[0], 16), int(f[1]))] = int(f[2])
    return out


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

    def start(self, addr: int) -> int | None:
        """The address of the symbol at or below @addr (None: "user")."""
        i = bisect.bisect_right(self.addrs, addr) - 1
        return self.addrs[i] if i >= 0 else None


def per_symbol(delta: dict[Block, int], syms: Symbols) -> Counter[str]:
    """Instructions run per symbol (a block counts for the symbol it starts in)."""
    out: Counter[str] = Counter()
    for (addr, insns), n in delta.items():
        out[syms.name(addr)] += insns * n
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


def render_blocks(func: str, sched: str, blocks: list[tuple[int, int, float]]) -> str:
    """Per block of @func: where, how long, how often, instructions per I/O."""
    lines = [f"{func} under {sched}: offset  instructions  runs/IO  instructions/IO"]
    lines += [f"  +{off:#06x}  {insns:12d}  {runs:7.2f}  {insns * runs:15.1f}"
              for off, insns, runs in blocks]
    lines.append(f"  total {sum(i * r for _, i, r in blocks):.1f}")
    return "\n".join(lines)


def render(results: dict[str, tuple[int, Counter[str]]], top: int) -> str:
    """A table of instructions per I/O: the functions that differ most
    between the schedulers first (all of them with one scheduler), and the
    total."""
    scheds = list(results)
    names = set().union(*(per for _, per in results.values()))

    def row(name: str) -> list[float]:
        return [results[s][1].get(name, 0) / max(results[s][0], 1) for s in scheds]

    def spread(name: str) -> float:
        v = row(name)
        return max(v) - min(v) if len(v) > 1 else v[0]

    width = max([len(n) for n in names] + [8])
    lines = ["instructions per I/O".ljust(width) + "".join(f"{s:>12}" for s in scheds),
             "I/Os".ljust(width) + "".join(f"{results[s][0]:>12}" for s in scheds),
             "all".ljust(width) + "".join(
                 f"{sum(results[s][1].values()) / max(results[s][0], 1):>12.1f}"
                 for s in scheds)]
    for name in sorted(names, key=lambda n: (-spread(n), n))[:top]:
        lines.append(name.ljust(width) + "".join(f"{x:>12.1f}" for x in row(name)))
    return "\n".join(lines)


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


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python3 -m scripts.tbprof",
                                description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--kernel", required=True, help="test kernel release")
    p.add_argument("--schedulers", default="fifo-ref,flashfq",
                   help="compared, in one boot (default fifo-ref,flashfq)")
    p.add_argument("--tune", action="append", default=[], metavar="SCHED:NAME=VALUE",
                   help="a tunable written before that scheduler's run, e.g. "
                        "flashfq:depth=256 flashfq:throttle_us=0 (the overhead suite's)")
    p.add_argument("--runtime", type=float, default=2.0, help="fio seconds (default 2)")
    p.add_argument("--iodepth", type=int, default=32, help="(default 32)")
    p.add_argument("--top", type=int, default=40, help="functions shown (default 40)")
    p.add_argument("--blocks", action="append", default=[], metavar="FUNC",
                   help="also each translated block of FUNC (as the table names it, e.g. "
                        "'k2_dispatch_request[k2_iosched]'): its offset in the function, "
                        "to read beside objdump -d, and how often it ran per I/O")
    a = p.parse_args(argv)
    try:
        tunes = parse_tune(a.tune)
    except ValueError as e:
        p.error(str(e))
    scheds = [s for s in a.schedulers.split(",") if s]

    from bench import modules
    from bench.suites.overhead import NULL_BLK
    from bench.vm import booted

    plugin = build_plugin()
    trigger = CACHE / f"trigger-{os.getpid()}"
    snap = CACHE / f"snapshot-{os.getpid()}"

    def snapshot() -> dict[Block, int]:
        snap.unlink(missing_ok=True)
        trigger.write_text(f"{snap}\n")
        deadline = time.monotonic() + 120
        while not snap.exists():
            if time.monotonic() > deadline:
                raise RuntimeError("the plugin wrote no snapshot (is it loaded?)")
            time.sleep(0.05)
        out = parse_counts(snap.read_text())
        snap.unlink()
        return out

    params = " ".join(f"{k}={v}" for k, v in NULL_BLK.items())
    job = (f"fio --name=j --filename=/dev/nullb0 --direct=1 --ioengine=io_uring "
           f"--rw=randread --bs={BS} --iodepth={a.iodepth} --time_based --norandommap "
           f"--randrepeat=0 --output-format=terse --terse-version=3")
    with booted(a.kernel, smp=1, icount=3,
                extra_qemu=["-plugin", f"{plugin},trigger={trigger}"]) as target:
        vm = target.vm
        mods = " ".join(f"modprobe {m};" for m in modules.elevators().values())
        r = vm.run(f"modprobe null_blk {params} && {mods} "
                   "echo 0 > /proc/sys/kernel/kptr_restrict && grep -F '[' /proc/kallsyms")
        if not r.ok:
            raise RuntimeError(f"setting up the guest failed: {r.out[-2000:]}")
        kallsyms = CACHE / f"kallsyms-{a.kernel}.gz"
        if not kallsyms.exists():
            k = vm.run("grep -E ' [tTwW] ' /proc/kallsyms | grep -vF '[' | gzip -1 | base64 -w 0",
                       timeout=1200)
            kallsyms.write_bytes(base64.b64decode(k.out.strip()))
        syms = Symbols.parse([r.out, gzip.decompress(kallsyms.read_bytes()).decode()])
        results: dict[str, tuple[int, Counter[str]]] = {}
        for s in scheds:
            setup = f"echo {s} > /sys/block/nullb0/queue/scheduler"
            for name, value in tunes.get(s, []):
                setup += f" && echo {value} > /sys/block/nullb0/queue/iosched/{name}"
            r = vm.run(setup + f" && {job} --runtime=1 > /dev/null")
            if not r.ok:
                raise RuntimeError(f"{s}: {r.out[-2000:]}")
            before = snapshot()
            r = vm.run(f"{job} --runtime={a.runtime:g} | cut -d';' -f6", timeout=600)
            after = snapshot()
            kib = int(r.out.strip().split()[-1])
            ios = kib * 1024 // BS
            delta = diff_counts(after, before)
            results[s] = (ios, per_symbol(delta, syms))
            print(f"{s}: {ios} I/Os", flush=True)
            for func in a.blocks:
                blocks = blocks_of(delta, syms, func, ios)
                if blocks:
                    print(render_blocks(func, s, blocks), flush=True)
        print(render(results, a.top))
    return 0


if __name__ == "__main__":
    sys.exit(main())
