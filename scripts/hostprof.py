"""Where the host's time goes per I/O when QEMU runs the overhead suite's
job in its multi-threaded VM: python3 -m scripts.hostprof --kernel RELEASE
--schedulers fifo-ref,flashfq [--tune flashfq:depth=256 ...] [--jobs 2].

tbprof counts the guest's instructions on one vCPU; the overhead suite
times them on two, where TCG's cost per instruction is far from even.
This profiles QEMU itself from the host (perf record -e cpu-clock on its
process, for a window inside each fio run) and sorts its samples by kind:
the translated code (perf's [JIT] maps), the lookups of the next block
after a return, an indirect call or jump, or a missed chain
(helper_lookup_tb_ptr, its hash-table fallback qht_lookup_custom,
curr_cflags), the guest's clock (cpu_get_ticks: rdtsc), atomic
instructions' helpers, the guest's TLB (softmmu: a translated load or
store whose page misses TCG's direct-mapped TLB, the victim TLB and the
page walk that fills it), the rest of QEMU (translation, interrupts,
timers, the main loop), the host kernel and the libraries.  QEMU's binary
is stripped of its static functions, whose samples perf shows by address:
one is put with the exported functions on either side of it (nm -D), so
that the softmmu's statics (victim_tlb_hit, mmu_lookup, ...) count as
softmmu.  QEMU's CPU time in
the window (from /proc/PID/stat) over the I/Os done in it gives each
kind in host microseconds per I/O.  The job is tbprof's (fio_job()),
each job pinned to its own vCPU (cpus_allowed_policy=split).  Timed
figures move 10-15 % from run to run: compare schedulers in the same
boot, over --reps.  Needs perf (Debian's linux-perf).

With --spin the guest also times, in each whole fio run, every call of
the spinlock slow path (native_queued_spin_lock_slowpath, where a CPU
waits for a contended spinlock or its queue: any lock's, the elevator's
and the rest of the kernel's) with ftrace's function_graph tracer, and
each run's line gives its contended acquisitions per 1000 I/Os and the
guest microseconds spent in them per I/O: what lock waiting costs,
including waits for a holder whose vCPU the host descheduled.  Enabling
the tracer patches one call site of kernel text, which multi-threaded
TCG now and then gets wrong (tests/README.md, The VM test bed): a guest
that dies so is a run to repeat.
"""
from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterable
from pathlib import Path

from bench import trace
from scripts import tbprof, vmbed

#: the kinds, in the table's order
KINDS = ("translated", "lookup", "clock", "atomics", "softmmu", "qemu", "host kernel",
         "libs")
LOOKUP = ("helper_lookup_tb_ptr", "qht_lookup_custom", "curr_cflags")
#: QEMU's exported softmmu functions (accel/tcg/cputlb.c, the x86 page walk)
SOFTMMU = re.compile(r"(tlb_\w+|probe_access\w*|get_page_addr_code\w*|helper_(ld|st)\w*_mmu"
                     r"|cpu_(ld|st)\w*|x86_cpu_tlb_fill)")
_LINE = re.compile(r"\s*[\d.]+%\s+(\d+)\s+(.+?)\s+\[(.)\]\s+(.*\S)\s*$")
#: where a guest CPU waits for a contended spinlock (--spin)
SPIN_FUNC = "native_queued_spin_lock_slowpath"
TRACEFS = "/sys/kernel/tracing"
#: function_graph's line of a call without callees traced: "CPU) [marker] D us | f();"
_GRAPH = re.compile(r"^\s*\d+\)\s+(?:[-+!#*@$]\s+)?([\d.]+) us\s+\|\s+(\w+)\(\);")


def parse_exports(nm_text: str) -> tbprof.Symbols:
    """The functions of `nm -D --defined-only` output by address, their
    symbol versions dropped."""
    return tbprof.Symbols.parse([re.sub(r"@\S*", "", nm_text)])


def exported(binary: str) -> tbprof.Symbols:
    """QEMU's exported functions by address, to place a static function
    perf shows only by its address."""
    return parse_exports(subprocess.run(["nm", "-D", "--defined-only", binary], check=True,
                                        capture_output=True, text=True).stdout)


def kind_of(dso: str, sym: str, exports: tbprof.Symbols | None = None) -> str:
    """The kind of a perf sample in @dso's @sym (module docstring); a
    static function's address is placed by @exports (exported())."""
    if dso.startswith("[JIT]"):
        return "translated"
    if dso.startswith("[kernel"):
        return "host kernel"
    if not dso.startswith("qemu-system"):
        return "libs"
    if sym in LOOKUP:
        return "lookup"
    if sym == "cpu_get_ticks":
        return "clock"
    if "atomic" in sym:
        return "atomics"
    if SOFTMMU.fullmatch(sym):
        return "softmmu"
    if exports is not None and re.fullmatch(r"0x[0-9a-f]+", sym):
        addr = int(sym, 16)
        if any(SOFTMMU.fullmatch(n or "")
               for n in (exports.name(addr), exports.following(addr))):
            return "softmmu"
    return "qemu"


def parse_report(text: str, exports: tbprof.Symbols | None = None) -> dict[str, float]:
    """Per kind, the share (percent) of the samples in `perf report --stdio
    --no-children -n --sort dso,sym` output, from the sample counts (the
    percentages are rounded: the translated code's thousands of addresses
    show mostly as 0.00 %); QEMU's static functions placed by @exports."""
    n = dict.fromkeys(KINDS, 0)
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        m = _LINE.match(line)
        if m:
            n[kind_of(m.group(2), m.group(4), exports)] += int(m.group(1))
    total = sum(n.values())
    return {k: 100 * v / total if total else 0.0 for k, v in n.items()}


def spin_setup_command() -> str:
    """The guest's command that readies function_graph on SPIN_FUNC alone,
    with tracing off (spin_run_command() turns it on around a run)."""
    t = TRACEFS
    return (f"{{ [ -e {t}/trace ] || mount -t tracefs nodev {t}; }} && "
            f"echo 0 > {t}/tracing_on && echo {SPIN_FUNC} > {t}/set_ftrace_filter && "
            f"echo function_graph > {t}/current_tracer && echo 16384 > {t}/buffer_size_kb")


def spin_run_command(job: str) -> str:
    """The guest's command that runs @job (fio, terse) traced: a line "kib
    N", its read KiB, then the trace, then each CPU's buffer statistics
    (bench.trace.stats_command())."""
    t = TRACEFS
    return (f"echo > {t}/trace && echo 1 > {t}/tracing_on && {job} > /tmp/hostprof.fio; "
            f"rc=$?; echo 0 > {t}/tracing_on; [ $rc = 0 ] || exit $rc; "
            f"echo kib $(cut -d';' -f6 /tmp/hostprof.fio) && grep ' us ' {t}/trace; "
            f"{trace.stats_command(t)}")


def parse_spin(text: str) -> tuple[int, int, float]:
    """spin_run_command()'s output @text: fio's read KiB, the calls of
    SPIN_FUNC in the trace and the microseconds they took.  A buffer that
    lost events (overrun, dropped: bench.trace.stats_summary()) is an
    error, as calls would be missing, and so is output without the KiB."""
    lines = text.splitlines()
    first = next((i for i, ln in enumerate(lines) if re.fullmatch(r"== \d+", ln.strip())),
                 len(lines))
    lost = trace.stats_summary(trace.parse_stats("\n".join(lines[first:])))["lost"]
    if lost:
        raise ValueError(f"the trace buffer overran ({lost} events lost): calls are missing")
    kib, calls, us = None, 0, 0.0
    for line in lines[:first]:
        if line.startswith("kib "):
            kib = int(line.split()[1])
        m = _GRAPH.match(line)
        if m and m.group(2) == SPIN_FUNC:
            calls += 1
            us += float(m.group(1))
    if kib is None:
        raise ValueError(f"no fio result in the output: {text[-500:]}")
    return kib, calls, us


def per_io(shares: dict[str, float], cpu_s: float, ios: float) -> dict[str, float]:
    """@shares (percent) of @cpu_s host CPU seconds over @ios I/Os, in us."""
    if ios <= 0:
        return dict.fromkeys(shares, 0.0)
    return {k: v / 100 * cpu_s * 1e6 / ios for k, v in shares.items()}


Row = tuple[str, float, dict[str, float], tuple[float, float] | None]


def render(rows: Iterable[Row], spin: bool = False) -> str:
    """One line per run: its label, IOPS, host us per I/O by kind, total;
    with @spin the guest's contended spinlock acquisitions per 1000 I/Os
    and the guest us an I/O waited in them (a row's last item)."""
    lines = ["host us per I/O".ljust(28) + f"{'IOPS':>9}"
             + "".join(f"{k:>12}" for k in KINDS) + f"{'total':>9}"
             + (f"{'spins/1k IO':>13}{'spin us/IO':>12}" if spin else "")]
    for label, iops, us, sp in rows:
        lines.append(label.ljust(28) + f"{iops:>9.0f}"
                     + "".join(f"{us[k]:>12.2f}" for k in KINDS) + f"{sum(us.values()):>9.2f}"
                     + (f"{sp[0]:>13.2f}{sp[1]:>12.3f}" if spin and sp else ""))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python3 -m scripts.hostprof",
                                description=(__doc__ or "").split("\n\n")[0])
    tbprof.add_run_args(p)
    p.add_argument("--jobs", type=int, default=2,
                   help="fio jobs, each pinned to its own vCPU (default 2; 1 or 2)")
    p.add_argument("--runtime", type=float, default=6.0,
                   help="fio seconds (default 6; the window is this less 2)")
    p.add_argument("--reps", type=int, default=2, help="runs of each scheduler (default 2)")
    p.add_argument("--iodepth", type=int, default=32, help="per job (default 32)")
    p.add_argument("--keep", type=Path, metavar="DIR",
                   help="keep each run's perf.data in DIR (REP-SCHED.data) for perf report")
    p.add_argument("--no-build", action="store_true",
                   help="boot with the modules already in .build/KERNEL")
    p.add_argument("--spin", action="store_true",
                   help="also time the guest's contended spinlock acquisitions in each run "
                        "(ftrace function_graph on " + SPIN_FUNC + ")")
    a = p.parse_args(argv)
    if a.jobs not in (1, 2) or a.runtime < 3 or a.reps < 1:
        p.error("--jobs 1 or 2, --runtime at least 3, --reps at least 1")
    try:
        tunes = tbprof.parse_tune(a.tune)
    except ValueError as e:
        p.error(str(e))
    perf = shutil.which("perf")
    if perf is None:
        p.error("perf not found (Debian's linux-perf; scripts/setup installs it)")
    scheds = [s for s in a.schedulers.split(",") if s]

    from bench import modules
    from bench.suites.overhead import NULL_BLK
    from bench.vm import booted

    job = tbprof.fio_job(a.iodepth, a.jobs, vcpus=2)
    exports = exported(next(c for c in vmbed.qemu_command()
                            if c.endswith("qemu-system-x86_64")))
    window = a.runtime - 2
    rows: list[Row] = []
    with booted(a.kernel, build=not a.no_build, tcg_thread="multi", smp=2) as target, \
            tempfile.TemporaryDirectory(prefix="hostprof-") as tmp:
        out_dir = a.keep or Path(tmp)
        out_dir.mkdir(parents=True, exist_ok=True)
        vm = target.vm
        assert vm.proc is not None
        pid = vm.proc.pid
        r = vm.run(tbprof.load_command(NULL_BLK, modules.elevators().values()) + " true"
                   + (" && " + spin_setup_command() if a.spin else ""))
        if not r.ok:
            raise RuntimeError(f"setting up the guest failed: {r.out[-2000:]}")
        for rep in range(a.reps):
            for s in scheds:
                r = vm.run(tbprof.select_command(s, tunes) + f" && {job} --runtime=1 > /dev/null")
                if not r.ok:
                    raise RuntimeError(f"{s}: {r.out[-2000:]}")
                data = out_dir / f"{rep + 1}-{s}.data"
                cpu: list[float] = []
                rec: list[subprocess.CompletedProcess[str]] = []

                def record(data: Path = data, cpu: list[float] = cpu,
                           rec: list[subprocess.CompletedProcess[str]] = rec) -> None:
                    time.sleep(1.0)
                    c0 = vmbed.cpu_seconds(pid)
                    rec.append(subprocess.run(
                        [perf, "record", "-q", "-e", "cpu-clock", "-p", str(pid),
                         "-o", str(data), "--", "sleep", f"{window:g}"],
                        capture_output=True, text=True))
                    cpu.append(vmbed.cpu_seconds(pid) - c0)

                th = threading.Thread(target=record)
                th.start()
                run = f"{job} --runtime={a.runtime:g}"
                r = vm.run(spin_run_command(run) if a.spin else f"{run} | cut -d';' -f6",
                           timeout=600)
                th.join()
                if not r.ok:
                    raise RuntimeError(f"{s}: fio failed: {r.out[-2000:]}")
                if not rec or rec[0].returncode != 0:
                    raise RuntimeError(f"{s}: perf record failed: "
                                       + (rec[0].stderr[-2000:] if rec else "no result"))
                sp = None
                if a.spin:
                    kib, calls, spin_us = parse_spin(r.out)
                    ios = kib * 1024 / tbprof.BS
                    sp = (calls * 1000 / ios, spin_us / ios)
                else:
                    kib = int(r.out.strip().split()[-1])
                iops = kib * 1024 / tbprof.BS / a.runtime
                rep_out = subprocess.run([perf, "report", "-i", str(data), "--stdio",
                                          "--no-children", "-n", "--sort", "dso,sym"],
                                         check=True, capture_output=True, text=True).stdout
                us = per_io(parse_report(rep_out, exports), cpu[0], iops * window)
                rows.append((f"{s} (run {rep + 1})", iops, us, sp))
                print(render(rows[-1:], a.spin).splitlines()[1], flush=True)
    print(render(rows, a.spin))
    return 0


if __name__ == "__main__":
    sys.exit(main())
