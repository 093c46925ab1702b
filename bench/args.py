"""The command line of python3 -m bench: run benchmark suites, write reports,
select K2 bounds, calibrate FlashFQ's cost model and CARS's device model, and
the VM demonstration (its parser only: bench.cli runs the commands)."""
from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from bench import suites
from bench.trace import DEFAULT_BUFFER_KB, TRACERS

ROOT = Path(__file__).resolve().parent.parent

DESCRIPTION = ("python3 -m bench: run benchmark suites, write reports, combine the "
               "overhead suite's boots, select K2 bounds, calibrate FlashFQ's cost model "
               "and CARS's device model, and the VM demonstration.")

EPILOG = """\
examples:
  python3 -m bench run k2 --device /dev/nvme0n1            # a real, empty NVMe drive
  python3 -m bench run k2 --device /dev/nvme0n1 --short --bounds 1,8,64 --ops randread
  python3 -m bench run kyber-baseline --device /dev/nvme0n1 --destroy-data /dev/nvme0n1
  python3 -m bench run overhead --allow-null-blk
  python3 -m bench run k2 --vm --device ssdsim0 --short  # in the VM test bed
  python3 -m bench run k2 --device /dev/nvme0n1 --short --trace ftrace   # with k2's events
  python3 -m bench run overhead --allow-null-blk --schedulers k2 --traced # tracing's cost
  python3 -m bench report results/k2-nvme0n1-20250101-120000
  python3 -m bench select results/k2-nvme0n1-20250101-120000 --alpha 50 --beta 80
  python3 -m bench boots results/overhead-nullb0-A results/overhead-nullb0-B  # over boots
  python3 -m bench run flashfq --device /dev/nvme0n1       # FlashFQ's fairness scenarios
  python3 -m bench calibrate flashfq --device /dev/nvme0n1 # its cost model, into sysfs
  python3 -m bench calibrate cars --vm --device ssdsim0    # ssdsim's geometry, into sysfs
  python3 -m bench calibrate cars --device /dev/nvme1n1    # a drive's, measured (writes it)
  python3 -m bench demo                                    # VM, short suites, reports

The suites write to the raw device: a device with partitions, a file-system
or other signature, a mount, swap, holders, or the root file system is
refused unless --destroy-data names the same device again.
"""


def _device(g: argparse._ActionsContainer) -> None:
    g.add_argument("--device", "-d", required=False,
                   help="whole block device to benchmark (/dev/nvme0n1, nvme0n1, a "
                        "symlink); its contents are destroyed")
    g.add_argument("--destroy-data", metavar="DEVICE",
                   help="overwrite DEVICE even though it holds partitions, a signature "
                        "or mounts (must name the --device again)")


def _vm(p: argparse.ArgumentParser, what: str) -> None:
    v = p.add_argument_group("VM test bed")
    v.add_argument("--vm", action="store_true",
                   help=f"{what} inside the VM test bed (scripts/vmbed.py) instead of on this "
                        "machine; devices are the guest's (nvme0n1, vm-throttled, ssdsim0)")
    v.add_argument("--kernel", help="with --vm: kernel release (default: first test kernel)")
    v.add_argument("--ssdsim", metavar="PARAMS", default="",
                   help="with --vm and an ssdsim device: its module parameters, e.g. "
                   "'time_scale=20 write_buffer_kb=0' (default: ssdsim's own)")


def _common(p: argparse.ArgumentParser, suite: suites.Suite) -> None:
    g = p.add_argument_group("device and durations")
    if suite.needs_device:
        _device(g)
    g.add_argument("--runtime", type=float, help=f"seconds per run (default "
                   f"{suite.durations[0]:g}, --short {suite.short_durations[0]:g})")
    g.add_argument("--ramp", type=float, help=f"fio ramp_time seconds, not measured (default "
                   f"{suite.durations[1]:g}, --short {suite.short_durations[1]:g})")
    g.add_argument("--reps", type=int, help=f"repetitions of every configuration (default "
                   f"{suite.durations[2]}, --short {suite.short_durations[2]})")
    g.add_argument("--short", action="store_true",
                   help="short durations (a quick look, as in the demo)")
    g.add_argument("--seed", type=int, help="seed of the random order (default: random, "
                   "recorded in the manifest)")
    g.add_argument("--ioengine", choices=["io_uring", "libaio"], default="io_uring",
                   help="engine of the asynchronous jobs (default io_uring)")
    g.add_argument("--no-pin", action="store_true", help="do not pin jobs to CPUs")
    t = p.add_argument_group("tracing")
    t.add_argument("--trace", choices=TRACERS,
                   help="record a trace beside each fio run (runs/NNN-*.trace.txt with "
                        "ftrace, runs/NNN-*.lttng/ with LTTng): the trace systems of the "
                        "measured schedulers (k2, ...) and of ssdsim when the device is "
                        "ssdsim; the report adds staged/device time per configuration")
    t.add_argument("--trace-events", metavar="SYS[:EVENT],...",
                   help="with --trace: more events to record, e.g. block:block_rq_issue")
    t.add_argument("--trace-buffer-kb", type=int, default=DEFAULT_BUFFER_KB,
                   help=f"trace buffer per CPU in KiB (default {DEFAULT_BUFFER_KB}); lost "
                        "events are counted in the manifest and the report")
    o = p.add_argument_group("output")
    o.add_argument("--results-dir", default=str(ROOT / "results"),
                   help="parent of the results folder (default: results/ in the project)")
    o.add_argument("--out", help="exact results folder (default: "
                   "<results-dir>/<suite>-<device>-<UTC time>)")
    o.add_argument("--no-report", action="store_true", help="do not write report.md")
    _vm(p, "run")


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="python3 -m bench", description=DESCRIPTION,
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True, metavar="COMMAND")
    all_suites = suites.all_suites()
    run = sub.add_parser("run", help="run a suite and write its results folder and report",
                         description="Run a benchmark suite: for each configuration (in "
                         "seeded random order, repeated), select the scheduler, write its "
                         "tunables (read back), run fio; results and report into a folder. "
                         "`python3 -m bench run SUITE --help` for a suite's options.")
    rsub = run.add_subparsers(dest="suite", required=True, metavar="SUITE")
    for name, s in sorted(all_suites.items()):
        sp = rsub.add_parser(name, help=s.description.replace("%", "%%"), description=s.title)
        _common(sp, s)
        s.add_arguments(sp)
    rep = sub.add_parser("report", help="(re)write report.md and plots of results folders")
    rep.add_argument("results", nargs="+", help="results folder(s), or a demo folder")
    sel = sub.add_parser("select", help="K2's objective selection (O1, O2) from k2 results",
                         description="O1: the largest bound whose RT p99.9 latency is at "
                         "most alpha%% of none's; O2: the smallest bound that keeps at least "
                         "beta%% of none's bandwidth; per operation type and occupancy.")
    sel.add_argument("results", help="a k2 results folder")
    sel.add_argument("--alpha", type=float, default=50.0,
                     help="RT p99.9 target, %% of none's (default 50)")
    sel.add_argument("--beta", type=float, default=80.0,
                     help="bandwidth to keep, %% of none's (default 80)")
    boots = sub.add_parser(
        "boots", help="the overhead suite's figures over several runs, one a boot: each "
        "run's, their median and range, how often each goal is met",
        description="Combine runs of the overhead suite of one kernel, reference and clock "
        "(typically one a boot, each with --count of the same instruction-counting run): "
        "per job count each scheduler's median ratio to the reference in each run, their "
        "median (min-max), with --count each run's quotient by its count, and each "
        "comparison's judged value per run with the runs that meet its goal. Markdown on "
        "stdout.")
    boots.add_argument("results", nargs="+", help="overhead results folders")
    boots.add_argument("--out", help="also write the table to this file")
    demo = sub.add_parser("demo", help="boot the VM test bed, run short versions of every "
                          "suite, write the reports (bench/README.md, The demo)")
    demo.add_argument("--kernel", action="append",
                      help="kernel release (repeatable; default: the first test kernel)")
    demo.add_argument("--all-kernels", action="store_true",
                      help="every test kernel (scripts/kernels test), one after the other")
    demo.add_argument("--out", help="demo folder (default: results/demo-<UTC time>)")
    demo.add_argument("--no-build", action="store_true",
                      help="use the modules already in .build/<kernel>/")
    demo.add_argument("--seed", type=int, default=1, help="seed of the random orders (1)")
    demo.add_argument("--suites", help="comma-separated: only these of the demo's suites "
                      "(default: all of k2, kyber-baseline, overhead, flashfq, cars, kyber-grid)")
    from bench.calibrate import IODEPTH, SCHEDULERS
    cal = sub.add_parser(
        "calibrate", help="write a scheduler's model of the device to its tunables: flashfq's "
        "cost model (measured) or cars's geometry and timing (read from ssdsim)",
        description="flashfq: measure the scheduler's four cost points on the device: the "
        "device time (ns) of a 4 KiB and a 128 KiB random read and write, i.e. fio's mean "
        "completion latency one request at a time (psync, direct I/O; with --iodepth N, "
        "io_uring with N in flight, the latency over N), under none, reads first, the write "
        "cache flushed before each. Then select the scheduler on the device (loading its "
        "module if need be; its costs belong to the elevator, so it stays selected), write "
        "cost_read_4k_ns, cost_read_128k_ns, cost_write_4k_ns and cost_write_128k_ns, read "
        "them back and print them. The writes go to the raw device: like `run`, a device "
        "holding data is refused unless --destroy-data names it again. After an error or "
        "Ctrl-C the device gets its scheduler and tunables back. "
        "cars: read an ssdsim disk's geometry and timing from its sysfs (nothing is written "
        "to the device), select cars and write nr_dies, page_kb, read_us, write_us, "
        "erase_us, depth, max_hold_us, the mapping cache and the write pointer to match "
        "(bench/calibrate.py). On any other device, or with --probe, measure them with fio "
        "under none instead (bench/probe.py: parallelism from IOPS by iodepth, read and "
        "write times, the write buffer, the page and the striping from pairs of reads), "
        "which writes the device's first 16 MiB and so is refused on a device holding data "
        "unless --destroy-data names it; then select cars and write nr_dies, depth, "
        "page_kb, read_us, write_us and max_hold_us. --runtime, --ramp and --iodepth apply "
        "to flashfq only.")
    cal.add_argument("scheduler", choices=SCHEDULERS,
                     help="the scheduler whose model to write: " + ", ".join(SCHEDULERS))
    _device(cal)
    cal.add_argument("--runtime", type=float, default=5.0,
                     help="seconds per cost point (default 5)")
    cal.add_argument("--ramp", type=float, default=1.0,
                     help="fio ramp_time seconds before each, not measured (default 1)")
    cal.add_argument("--iodepth", type=int, default=IODEPTH,
                     help=f"requests in flight while measuring (default {IODEPTH}, the paper's "
                     "one at a time); N > 1 charges each request its latency over N, what it "
                     "takes from a busy device, which undercharges a synchronous task's small "
                     "reads (bench/README.md)")
    cal.add_argument("--probe", action="store_true",
                     help="cars on ssdsim: measure the model with fio as on a real drive "
                     "instead of reading ssdsim's sysfs (to compare the two)")
    _vm(cal, "calibrate")
    sub.add_parser("list", help="list the suites")
    return ap


def parse(argv: Sequence[str]) -> argparse.Namespace:
    return build_parser().parse_args(list(argv))
