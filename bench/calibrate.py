"""python3 -m bench calibrate flashfq --device DEV: FlashFQ's cost model
measured on the device and written to its tunables.

The four cost points (cost_read_4k_ns, cost_read_128k_ns, cost_write_4k_ns,
cost_write_128k_ns) are the device time, in ns, of a 4 KiB and a 128 KiB
random read and write: one fio run each, reads first, under none (no
scheduler in the way), the device's write cache flushed before each.  By
default one request at a time (psync, direct I/O, random offsets over the
whole device: the flashfq suite's task alone, the paper's calibration), a
point being the mean completion latency.  With --iodepth N (io_uring) N
requests are kept in flight and a point is the mean completion latency over
N (Little's law: one completes every latency / N), the device time a
request takes from the others once the device's parallelism is busy.  That
charges a large request what all of its pages take, but a synchronous
task's small reads far less than their latency, and the throttle, which
equalises charge, then holds a writer to such a reader's pace: on ssdsim
(README, FlashFQ) the flashfq suite's scenario (a) missed its goal with
QD32 costs and met it with QD1 costs.

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


#: requests in flight while measuring, unless --iodepth says otherwise
IODEPTH = 1


def measure(target: Target, path: str, size_bytes: int, cls: str, runtime: float,
            ramp: float, iodepth: int = IODEPTH) -> fio.JobStats:
    """One task of flashfq's class @cls alone on @path, @iodepth requests
    in flight; its statistics."""
    prep.flush(target, path)
    text = flashfq.jobfile(path, size_bytes, [(cls, 1)], 1, runtime, ramp, None,
                           comment=f"calibrate: {flashfq.CLASSES[cls].one} alone, queue depth "
                           f"{iodepth}", iodepth=iodepth)
    rc, out, log = run_fio(target, text, (runtime + ramp) * 3 + 120,
                           f"{target.tmpdir}/calibrate-{cls}")
    st = fio.job_stats(check_fio(rc, out, log), f"{cls}-0")
    if not st.ios:
        raise RunError(f"calibrate: the {flashfq.CLASSES[cls].one} completed no I/O in "
                       f"{runtime:g} s")
    return st


def cost_ns(clat_mean_us: float, iodepth: int, limits: tuple[int, int]) -> int:
    """A cost point: the device time per request, in ns, of requests whose
    mean completion latency is @clat_mean_us with @iodepth of them in
    flight, within the tunable's @limits."""
    return min(limits[1], max(limits[0], round(clat_mean_us * 1000 / iodepth)))


def calibrate(target: Target, scheduler: str, device: str, destroy_data: str | None,
              runtime: float = 5.0, ramp: float = 1.0, out: TextIO = sys.stdout,
              iodepth: int = IODEPTH) -> dict[str, str]:
    """Measure @scheduler's cost points on @device, write them to its
    tunables (selecting it), read them back; the values read back."""
    cal = CALIBRATIONS[scheduler]
    if runtime <= 0 or ramp < 0:
        raise ValueError("--runtime must be > 0, --ramp >= 0")
    if iodepth < 1:
        raise ValueError("--iodepth must be at least 1")
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
            how = ("one request at a time (psync" if iodepth == 1 else
                   f"{iodepth} requests in flight (io_uring")
            print(f"calibrating {cal.elevator} on {info.path} ({info.model}): fio, {how}, "
                  f"direct I/O, random offsets), under none, {runtime:g} s per point after a "
                  f"{ramp:g} s ramp; cost = mean completion latency / {iodepth}",
                  file=out, flush=True)
            values: dict[str, int] = {}
            for tunable, cls in cal.points.items():
                st = measure(target, info.path, info.size_bytes, cls, runtime, ramp, iodepth)
                values[tunable] = cost_ns(st.clat_mean_us, iodepth, cal.limits)
                print(f"  {flashfq.CLASSES[cls].one:15s} mean completion latency "
                      f"{st.clat_mean_us:10.1f} us ({st.ios} I/Os): {values[tunable]} ns",
                      file=out, flush=True)
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
