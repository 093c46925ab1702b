"""python3 -m bench calibrate flashfq --device DEV: FlashFQ's cost model
measured on the device and written to its tunables.

The four cost points (cost_read_4k_ns, cost_read_128k_ns, cost_write_4k_ns,
cost_write_128k_ns) are the mean completion latencies, in ns, of 4 KiB and
128 KiB random reads and writes at queue depth 1: one fio run each (the
flashfq suite's task of that class alone: psync, direct I/O, random offsets
over the whole device), reads first, under none (no scheduler in the way),
the device's write cache flushed before each.

Measuring writes to the raw device, so it goes through the runner's safety
check first (session.check_device: a device holding data is refused unless
--destroy-data names it again).  The cost tunables belong to the elevator
instance, so flashfq is then selected (its module loaded if need be), the
values written and read back, and flashfq is left selected with them.
After an error or Ctrl-C the device gets its scheduler and tunables back
(and a module loaded here is unloaded).
"""
from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import TextIO

from bench import device as devmod
from bench import fio, prep
from bench.device import DeviceError
from bench.runner import Cleanups, RunError, check_fio, run_fio, sigterm_as_interrupt
from bench.session import check_device, ensure_scheduler, restorer
from bench.suites import OURS, Sched
from bench.suites import flashfq
from bench.target import Target


@dataclass(frozen=True)
class Calibration:
    elevator: str
    module: str
    points: dict[str, str]          # tunable -> flashfq task class measuring it
    limits: tuple[int, int]         # a tunable's range


CALIBRATIONS = {"flashfq": Calibration("flashfq", OURS["flashfq"], flashfq.COST_POINTS,
                                       flashfq.COST_RANGE)}


def measure(target: Target, path: str, size_bytes: int, cls: str, runtime: float,
            ramp: float) -> fio.JobStats:
    """One task of flashfq's class @cls alone on @path; its statistics."""
    prep.flush(target, path)
    text = flashfq.jobfile(path, size_bytes, [(cls, 1)], 1, runtime, ramp, None,
                           comment=f"calibrate: {flashfq.CLASSES[cls].one} alone, queue depth 1")
    rc, out, log = run_fio(target, text, (runtime + ramp) * 3 + 120,
                           f"{target.tmpdir}/calibrate-{cls}")
    st = fio.job_stats(check_fio(rc, out, log), f"{cls}-0")
    if not st.ios:
        raise RunError(f"calibrate: the {flashfq.CLASSES[cls].one} completed no I/O in "
                       f"{runtime:g} s")
    return st


def calibrate(target: Target, scheduler: str, device: str, destroy_data: str | None,
              runtime: float = 5.0, ramp: float = 1.0, out: TextIO = sys.stdout
              ) -> dict[str, str]:
    """Measure @scheduler's cost points on @device, write them to its
    tunables (selecting it), read them back; the values read back."""
    cal = CALIBRATIONS[scheduler]
    if runtime <= 0 or ramp < 0:
        raise ValueError("--runtime must be > 0, --ramp >= 0")
    dev = devmod.resolve(target, device)
    check_device(target, dev, destroy_data, out)
    info = devmod.info(target, dev)
    saved = devmod.save_state(target, dev)
    cleanups = Cleanups(out)
    try:
        with sigterm_as_interrupt():
            why = ensure_scheduler(target, dev, Sched(cal.elevator, cal.module), cleanups)
            if why is not None:
                raise DeviceError(f"cannot calibrate {cal.elevator} on /dev/{dev}: {why}")
            cleanups.add(*restorer(target, saved))
            devmod.set_scheduler(target, dev, "none")
            print(f"calibrating {cal.elevator} on {info.path} ({info.model}): fio, one request "
                  f"at a time (psync, direct I/O, random offsets), under none, {runtime:g} s "
                  f"per point after a {ramp:g} s ramp", file=out, flush=True)
            values: dict[str, int] = {}
            for tunable, cls in cal.points.items():
                st = measure(target, info.path, info.size_bytes, cls, runtime, ramp)
                values[tunable] = min(cal.limits[1], max(cal.limits[0],
                                                         round(st.clat_mean_us * 1000)))
                print(f"  {flashfq.CLASSES[cls].one:15s} mean completion latency "
                      f"{st.clat_mean_us:10.1f} us ({st.ios} I/Os)", file=out, flush=True)
            print(f"selecting {cal.elevator} on /dev/{dev} (the costs belong to the elevator: "
                  "selecting another one drops them) and writing its tunables", file=out)
            devmod.set_scheduler(target, dev, cal.elevator)
            for k, v in values.items():
                devmod.set_tunable(target, dev, k, v)
            back = {k: devmod.read_attr(target, dev, k) for k in values}
    except BaseException:
        cleanups.run()
        raise
    finally:
        target.remove_tmpdir()
    print(f"{devmod.iosched_dir(dev)}/ (read back; {cal.elevator} stays selected):", file=out)
    for k, v in back.items():
        print(f"  {k} = {v}", file=out)
    print(f"flashfq suite with these costs: python3 -m bench run {cal.elevator} --device "
          f"{info.path} --flashfq-tunables '" + " ".join(f"{k}={v}" for k, v in back.items())
          + "'", file=out, flush=True)
    return back
