"""python3 -m bench calibrate flashfq|cars --device DEV: a scheduler's model
of the device, written to its tunables.

cars: the geometry and timing of an ssdsim disk, read from its sysfs
(/sys/block/ssdsimN/ssdsim/, nothing written to the device): nr_dies and
page_kb as ssdsim's, read_us = (read_ns + xfer_ns) x time_scale, write_us =
(program_ns + xfer_ns) x time_scale, erase_us = erase_ns x time_scale (in
us), depth = dies, max_hold_us = write_us (a request is held at most one
program), the mapping cache as ssdsim's (cmt_pages translation pages of
page_size / 4 entries each, or off) and the write pointer at ssdsim's
(write_die: where its next written page goes).  A real SSD publishes none
of this: on any other device (and on ssdsim with --probe) they are
measured with fio (bench/probe.py: nr_dies, depth, page_kb, read_us,
write_us, max_hold_us), which writes, so the device goes through the
runner's safety check.

flashfq: the cost model measured on the device.

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
(flashfq/README.md) the flashfq suite's scenario (a) missed its goal with
QD32 costs and met it with QD1 costs.

Measuring writes to the raw device, so it goes through the runner's safety
check first (device.check_device: a device holding data is refused unless
--destroy-data names it again).  The cost tunables belong to the elevator
instance, so flashfq is then selected (its module loaded if need be), the
values written and read back, and flashfq is left selected with them.
After an error or Ctrl-C the device gets its scheduler and tunables back
(and a module loaded here is unloaded).
"""
from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TextIO

from bench import device as devmod
from bench import fio, prep, probe
from bench.probe import CARS_MAX_HOLD_US, CARS_MAX_OP_US, CARS_PAGE_KB
from bench.device import DeviceError
from bench.runner import Cleanups, RunError, check_fio, run_fio, sigterm_as_interrupt
from bench.suites import OURS
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


#: the schedulers `calibrate` takes
SCHEDULERS = ("cars", *CALIBRATIONS)

#: ssdsim's sysfs attributes (/sys/block/<dev>/ssdsim/) cars_tunables() reads
SSDSIM_ATTRS = ("dies", "page_size", "read_ns", "program_ns", "erase_ns", "xfer_ns",
                "time_scale", "cmt_pages", "write_buffer_pages", "write_die")


def cars_tunables(ss: Mapping[str, str]) -> dict[str, int]:
    """CARS's tunables for an ssdsim disk whose sysfs attributes are @ss
    (SSDSIM_ATTRS), in the order to write them: nr_dies and page_kb first
    (changing them forgets the record of writes), cmt_region_kb before
    cmt_regions, the write pointer last.  ValueError for a geometry CARS
    cannot take."""
    ts = int(ss["time_scale"])
    page = int(ss["page_size"])
    if not CARS_PAGE_KB[0] * 1024 <= page <= CARS_PAGE_KB[1] * 1024:
        raise ValueError(f"ssdsim's page_size {page} is outside cars's page_kb range "
                         f"{CARS_PAGE_KB[0]}-{CARS_PAGE_KB[1]} KiB")

    def us(ns: int) -> int:
        return max(1, min(CARS_MAX_OP_US, round(ns * ts / 1000)))

    dies = int(ss["dies"])
    write_us = us(int(ss["program_ns"]) + int(ss["xfer_ns"]))
    out = {"nr_dies": dies, "page_kb": page // 1024,
           "read_us": us(int(ss["read_ns"]) + int(ss["xfer_ns"])), "write_us": write_us,
           "erase_us": us(int(ss["erase_ns"])), "depth": dies,
           "max_hold_us": min(CARS_MAX_HOLD_US, write_us)}
    cmt = int(ss["cmt_pages"])
    if cmt:
        out["cmt_region_kb"] = page // 4 * page // 1024
    out["cmt_regions"] = cmt
    out["write_pointer"] = int(ss["write_die"]) % dies
    return out


def read_ssdsim(target: Target, dev: str) -> dict[str, str]:
    """SSDSIM_ATTRS of ssdsim disk /dev/@dev."""
    d = f"{devmod.SYS}/{dev}/ssdsim"
    out = target.check(f"cd {d} && for f in {' '.join(SSDSIM_ATTRS)}; do "
                       "printf '%s=%s\\n' $f \"$(cat $f)\"; done",
                       what=f"reading {d}").splitlines()
    got = dict(ln.split("=", 1) for ln in out if "=" in ln)
    missing = [a for a in SSDSIM_ATTRS if not got.get(a, "").strip().isdigit()]
    if missing:
        raise DeviceError(f"{d} lacks {', '.join(missing)} (an older ssdsim?)")
    return got


def calibrate_cars(target: Target, device: str, out: TextIO = sys.stdout,
                   destroy_data: str | None = None, probed: bool = False) -> dict[str, str]:
    """Select cars on @device (loading its module), write the tunables that
    match it, read them back; those.  An ssdsim disk's are read from its
    sysfs (cars_tunables) unless @probed; any other device's are measured
    (bench/probe.py: it writes, so the device goes through the runner's
    safety check first)."""
    dev = devmod.resolve(target, device)
    info = devmod.info(target, dev)
    if info.kind != "ssdsim" or probed:
        devmod.check_device(target, dev, destroy_data, out)
        return _cars_written(target, dev, out, lambda: probed_tunables(target, dev, info, out))
    ss = read_ssdsim(target, dev)
    values = cars_tunables(ss)

    def read() -> dict[str, int]:
        print(f"ssdsim /dev/{dev}: " + ", ".join(f"{a} {ss[a]}" for a in SSDSIM_ATTRS),
              file=out)
        if int(ss["write_buffer_pages"]):
            print(f"note: ssdsim buffers {ss['write_buffer_pages']} pages of writes and "
                  "programs them as the buffer drains, later than cars predicts; load it "
                  "with write_buffer_kb=0 for the device cars models", file=out)
        return values
    return _cars_written(target, dev, out, read)


def probed_tunables(target: Target, dev: str, info: devmod.DeviceInfo,
                    out: TextIO) -> dict[str, int]:
    """cars's tunables measured on /dev/@dev under none (bench/probe.py),
    in the order to write them; the device has been through the safety
    check.  Callers: calibrate_cars(), the cars suite's cars-probed."""
    devmod.set_scheduler(target, dev, "none")
    start = target.clock()
    print(f"probing {info.path} ({info.model}) for cars with fio under none "
          f"(bench/probe.py); it writes the device's first {probe.REGION_MIB} MiB",
          file=out, flush=True)
    values = probe.probe(target, info.path, info.size_bytes, out).tunables()
    nr = devmod.nr_requests(target, dev)
    if values["depth"] > nr:
        print(f"depth {nr}: nr_requests, the most cars takes (the dies are "
              f"{values['depth']})", file=out)
        values["depth"] = nr
    print(f"probed in {target.clock() - start:.0f} s; not measured, left as cars has "
          "them: erase_us, the mapping cache, the write pointer", file=out)
    return values


def _cars_written(target: Target, dev: str, out: TextIO,
                  values: Callable[[], dict[str, int]]) -> dict[str, str]:
    """Select cars on /dev/@dev (loading its module), write what @values()
    gives, which runs with cars's module loaded and the device's scheduler
    and tunables given back should it fail or be interrupted, read them
    back and print them; those."""
    cleanups = Cleanups(out)
    try:
        with sigterm_as_interrupt():
            why = devmod.ensure_scheduler(target, dev, "cars", OURS["cars"], cleanups.add)
            if why is not None:
                raise DeviceError(f"cannot calibrate cars on /dev/{dev}: {why}")
            cleanups.add(*devmod.restorer(target, devmod.save_state(target, dev)))
            back = write_tunables(target, dev, "cars", values())
    except BaseException:
        cleanups.run()
        raise
    finally:
        target.remove_tmpdir()
    print_back(dev, "cars", back, out)
    return back


def write_tunables(target: Target, dev: str, elevator: str,
                   values: Mapping[str, int]) -> dict[str, str]:
    """Select @elevator on /dev/@dev, write @values in their order, and read
    them back."""
    devmod.set_scheduler(target, dev, elevator)
    for k, v in values.items():
        devmod.set_tunable(target, dev, k, v)
    return devmod.read_attrs(target, dev, values)


def print_back(dev: str, elevator: str, back: Mapping[str, str], out: TextIO) -> None:
    print(f"{devmod.iosched_dir(dev)}/ (read back; {elevator} stays selected):", file=out)
    for k, v in back.items():
        print(f"  {k} = {v}", file=out)


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
              iodepth: int = IODEPTH, probed: bool = False) -> dict[str, str]:
    """Measure @scheduler's cost points on @device, write them to its
    tunables (selecting it), read them back; the values read back.  cars:
    calibrate_cars (@runtime, @ramp and @iodepth unused)."""
    if scheduler == "cars":
        return calibrate_cars(target, device, out, destroy_data, probed)
    cal = CALIBRATIONS[scheduler]
    if runtime <= 0 or ramp < 0:
        raise ValueError("--runtime must be > 0, --ramp >= 0")
    if iodepth < 1:
        raise ValueError("--iodepth must be at least 1")
    dev = devmod.resolve(target, device)
    devmod.check_device(target, dev, destroy_data, out)
    info = devmod.info(target, dev)
    saved = devmod.save_state(target, dev)
    cleanups = Cleanups(out)
    try:
        with sigterm_as_interrupt():
            why = devmod.ensure_scheduler(target, dev, cal.elevator, cal.module, cleanups.add)
            if why is not None:
                raise DeviceError(f"cannot calibrate {cal.elevator} on /dev/{dev}: {why}")
            cleanups.add(*devmod.restorer(target, saved))
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
            back = write_tunables(target, dev, cal.elevator, values)
    except BaseException:
        cleanups.run()
        raise
    finally:
        target.remove_tmpdir()
    print_back(dev, cal.elevator, back, out)
    print(f"flashfq suite with these costs: python3 -m bench run {cal.elevator} --device "
          f"{info.path} --flashfq-tunables '" + " ".join(f"{k}={v}" for k, v in back.items())
          + "'", file=out, flush=True)
    return back
