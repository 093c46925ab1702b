"""Benchmark suites.  A suite is one module here that defines `SUITE`, an
instance of a Suite subclass (all_suites() lists them), saying:

- which schedulers it needs (name, module, whether it can do without),
- its own command-line options (add_arguments) and default durations,
- its configurations and fio jobs (plan), grouped in phases,
- its tables and plots (report), and optionally a `select` command.

Everything else (device checks, scheduler switching, tunables read back,
randomised order, results folder, progress, Ctrl-C) is the runner's.
"""
from __future__ import annotations

import argparse
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from bench import modules
from scripts.vmbed import ICOUNT_SHIFTS

if TYPE_CHECKING:
    from bench.results import Results
    from bench.runner import Config, Plan, RunContext
    from bench.target import Target


@dataclass(frozen=True)
class SuiteReport:
    body: str                   # Markdown below the common header
    summary: dict[str, Any]     # numbers for summary.json
    headline: str = ""          # a few lines for the demo's index page


@dataclass(frozen=True)
class Sched:
    """An elevator a suite runs: its name, the module that provides it
    (None: always there), and whether the suite can run without it."""
    name: str
    module: str | None = None
    required: bool = True


#: upstream elevators and their modules
UPSTREAM = {"mq-deadline": "mq-deadline", "kyber": "kyber-iosched", "bfq": "bfq"}
#: the project's elevators and their modules, in Kbuild's order (fifo-ref,
#: the overhead suite's reference, first): bench/modules.py
OURS = modules.elevators()


def assignments(text: str, option: str) -> dict[str, str]:
    """'name=value name=value' (an option such as --null-blk) as a dict."""
    out: dict[str, str] = {}
    for kv in text.split():
        k, sep, v = kv.partition("=")
        if not sep or not k:
            raise ValueError(f"{option}: {kv!r} is not name=value")
        out[k] = v
    return out


def extra_tunables(text: str, option: str, elevator: str,
                   sched_info: dict[str, dict[str, Any]]) -> tuple[tuple[str, str], ...]:
    """Tunables given on the command line ('name=value ...', an option such
    as --flashfq-tunables), checked against the ones @elevator has (its
    defaults in @sched_info)."""
    tun = tuple(assignments(text, option).items())
    known = sched_info.get(elevator, {}).get("defaults", {})
    bad = [k for k, _ in tun if k not in known]
    if bad:
        raise ValueError(f"{option}: {elevator} has no tunable {', '.join(bad)} "
                         f"(it has: {', '.join(sorted(known)) or 'none'})")
    return tun


class Suite:
    name: str = ""
    title: str = ""
    description: str = ""
    schedulers: tuple[Sched, ...] = ()
    #: the suite writes to the device (so the safety check applies)
    writes: bool = True
    #: the suite takes --device (False: it makes its own, e.g. null_blk)
    needs_device: bool = True
    #: (runtime s, ramp s, repetitions) normally and with --short
    durations: tuple[float, float, int] = (30.0, 5.0, 3)
    short_durations: tuple[float, float, int] = (3.0, 0.5, 1)

    def add_arguments(self, p: argparse.ArgumentParser) -> None:
        """Suite-specific options."""

    def vm_config(self, args: argparse.Namespace) -> dict[str, Any]:
        """With --vm: what the suite's VM needs other than the bed's
        defaults, as scripts.vmbed.VMConfig's fields (tcg_thread, icount,
        smp).  By default, --icount where the suite takes it
        (add_icount_argument): the bed's vCPUs on an instruction-counting
        clock, in one host thread."""
        icount = getattr(args, "icount", None)
        return {} if icount is None else {"icount": icount}

    def make_device(self, target: Target, args: argparse.Namespace,
                    on_exit: Callable[[str, Callable[[], None]], None]) -> tuple[str, list[str]]:
        """For suites that bring their own device: set it up (registering its
        removal with @on_exit); its name and notes for the report."""
        raise NotImplementedError

    def plan(self, ctx: RunContext) -> Plan:
        raise NotImplementedError

    def brief(self, c: Config, result: dict[str, Any]) -> str:
        """One line about a finished run, for the progress output."""
        return ""

    def report(self, res: Results, plots: Path) -> SuiteReport:
        """Tables and plots (PNG files written into @plots)."""
        raise NotImplementedError

    def has_select(self) -> bool:
        return False


def add_icount_argument(p: argparse.ArgumentParser, what: str) -> None:
    """--icount SHIFT (with --vm): the guest's clock counts instructions;
    @what: what that makes of the suite's figures."""
    p.add_argument("--icount", type=int, metavar="SHIFT", choices=ICOUNT_SHIFTS,
                   help="with --vm: the guest's clock counts instructions (QEMU "
                        f"-icount shift=SHIFT, 2^SHIFT ns an instruction; 0..10): {what} "
                        "(default: off)")


def refuse_icount_here(icount: int | None, local: bool) -> None:
    """ValueError for --icount @icount asked of this machine (@local), whose
    clock is its own."""
    if icount is not None and local:
        raise ValueError("--icount is for the VM test bed (--vm): this machine's "
                         "clock is its own")


def icount_note(args: argparse.Namespace, target: Target, runtime: float) -> list[str]:
    """The report's note on --icount (none without it); ValueError on this
    machine (refuse_icount_here())."""
    if args.icount is None:
        return []
    refuse_icount_here(args.icount, target.is_local)
    return [f"the guest's clock counts instructions (QEMU icount shift {args.icount}): a "
            f"run of {runtime:g} s is {runtime * 1e9 / (1 << args.icount):.3g} of the "
            "guest's instructions"]


K = TypeVar("K", str, int)


def ordered(keys: Iterable[K], ref: Collection[K]) -> list[K]:
    """@keys in @ref's order (the order a suite names its schedulers,
    operations, ...), then those @ref lacks, sorted: a report's rows and
    series."""
    have = set(keys)
    return [k for k in ref if k in have] + sorted(k for k in have if k not in ref)


def all_suites() -> dict[str, Suite]:
    """Every suite, by name (imported here rather than at the top: each
    suite's module imports this one)."""
    from bench.suites import cars, flashfq, k2, kyber_baseline, kyber_grid, overhead
    found: tuple[Suite, ...] = (k2.SUITE, kyber_baseline.SUITE, overhead.SUITE,
                                flashfq.SUITE, cars.SUITE, kyber_grid.SUITE)
    return {s.name: s for s in found}


def get(name: str) -> Suite:
    suites = all_suites()
    if name not in suites:
        raise KeyError(f"no suite {name!r} (suites: {', '.join(sorted(suites))})")
    return suites[name]
