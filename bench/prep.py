"""Device preconditioning for the suites' phases: an empty device, or a
fully occupied one (K2 paper, Section 4).

- ssdsim: reloaded with module parameter fill_percent=0 or 100 (its other
  parameters kept); the original parameters are reloaded at the end.
- any other device: "full" is one sequential 1 MiB write pass over the
  whole device; "empty" is a discard of the whole device (blkdiscard) when
  the device supports it, so a real SSD starts from its trimmed state.
Between runs, settle() flushes the device's write cache, so that a run does
not pay for the writes the one before left buffered (on ssdsim the flush
completes when its write buffer has drained to flash, GC included).
"""
from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from bench import device as devmod
from bench import jobs
from bench.device import DeviceError
from bench.runner import RunContext, check_fio, run_fio
from bench.target import Target, q


def reload_ssdsim(ctx: RunContext, params: dict[str, str]) -> None:
    """Unload ssdsim and load it again with @params; wait for the disk."""
    ctx.device.module_params = load_ssdsim_again(ctx.target, ctx.dev, params)


def load_ssdsim_again(t: Target, dev: str, params: dict[str, str]) -> dict[str, str]:
    """Unload ssdsim and load it again with @params; wait for /dev/@dev;
    its parameters now."""
    r = t.run("modprobe -r ssdsim 2>&1 || rmmod ssdsim")
    if r.rc != 0:
        raise DeviceError(f"cannot unload ssdsim to change its parameters (is /dev/{dev} "
                          f"open or mounted?): {r.out.strip()}")
    args = " ".join(f"{k}={q(v)}" for k, v in sorted(params.items()))
    devmod.load_module(t, "ssdsim", args)
    for _ in range(100):
        if t.run(f"[ -b /dev/{dev} ] && [ -e /sys/class/block/{dev}/queue/scheduler ]").rc == 0:
            break
        time.sleep(0.1)
    else:
        raise DeviceError(f"ssdsim reloaded with {args} but /dev/{dev} did not come back")
    return devmod.module_params(t, "ssdsim")


@contextmanager
def ssdsim_loaded_with(t: Target, dev: str, changes: dict[str, str]) -> Iterator[None]:
    """ssdsim reloaded with @changes to its current parameters for the
    block, then with those again, unless the target stopped answering
    (nothing is reloaded without changes).  Outside a suite run: a run's
    own changes go through reconfigure_ssdsim()."""
    if not changes:
        yield
        return
    orig = devmod.module_params(t, "ssdsim")
    load_ssdsim_again(t, dev, {**orig, **changes})
    try:
        yield
    finally:
        if t.answering:
            load_ssdsim_again(t, dev, orig)


def reconfigure_ssdsim(ctx: RunContext, changes: dict[str, str]) -> dict[str, str]:
    """Reload ssdsim with @changes to its current parameters; the first time
    in a run, register reloading it with its original parameters at the
    end.  Its parameters now."""
    orig = dict(ctx.device.module_params)
    if not ctx.state.get("ssdsim_reloaded"):
        ctx.state["ssdsim_reloaded"] = True
        was = ", ".join(f"{k}={orig[k]}" for k in changes if k in orig)
        ctx.on_exit(f"ssdsim reloaded with its original parameters ({was})",
                    lambda: reload_ssdsim(ctx, orig))
    reload_ssdsim(ctx, {**orig, **changes})
    return dict(ctx.device.module_params)


def write_through(ctx: RunContext, note: str) -> dict[str, Any]:
    """A phase set-up: ssdsim reloaded write-through (write_buffer_kb=0: a
    write completes when its page is programmed); what was done, with
    @note for the report."""
    params = reconfigure_ssdsim(ctx, {"write_buffer_kb": "0"})
    return {"method": "ssdsim reload", "module_params": params, "note": note}


def occupy(ctx: RunContext, full: bool) -> dict[str, Any]:
    """Bring the device to the empty or the fully occupied state; what was
    done (for the manifest; "note" goes into the report)."""
    t, d = ctx.target, ctx.device
    if d.kind == "ssdsim":
        if "fill_percent" not in d.module_params:
            raise DeviceError("ssdsim has no readable fill_percent parameter: cannot "
                              "precondition it")
        want = "100" if full else "0"
        params = reconfigure_ssdsim(ctx, {"fill_percent": want})
        return {"method": "ssdsim reload", "fill_percent": want, "module_params": params,
                "note": f"ssdsim reloaded with fill_percent={want}"}
    if full:
        text = jobs.render(
            {"filename": d.path, "direct": 1, "ioengine": ctx.args.ioengine, "bs": "1M",
             "iodepth": 16, "rw": "write", "size": "100%"},
            [jobs.Job("fill")], comment="precondition: write the whole device once")
        t0 = time.monotonic()
        rc, out, log = run_fio(t, text, 24 * 3600, f"{t.tmpdir}/fill")
        res = check_fio(rc, out, log)
        secs = time.monotonic() - t0
        written = sum(int(j["write"]["io_bytes"]) for j in res["jobs"])
        return {"method": "fio sequential write pass", "bytes": written, "job": text,
                "note": f"preconditioned full: {written >> 20} MiB written sequentially "
                        f"(1 MiB writes) in {secs:.0f} s"}
    r = t.run(f"blkdiscard /dev/{d.name}", timeout=3600)
    if r.rc == 0:
        return {"method": "blkdiscard", "note": "whole device discarded (trimmed) first"}
    return {"method": "none", "note": "the device could not be discarded "
            f"({r.out.strip()[:120]}): 'empty' is the state it was in"}


def empty_again(ctx: RunContext) -> None:
    """A phase's settle for writes on an empty device: before every run the
    device emptied again (occupy(): on ssdsim a reload, elsewhere
    blkdiscard), then flushed (settle()).  Emptied once per phase, a
    256 MiB ssdsim took 16 random-write runs of the k2 suite at 1.2 MiB/s
    and filled up: its garbage collection slowed the last five runs of the
    phase to 0.7-1.1 MiB/s, whatever their bound."""
    occupy(ctx, False)
    settle(ctx)


def flush(target: Target, dev: str) -> None:
    """Flush the write cache of block device @dev (a path) and wait for it
    (fsync on the block device sends a flush); a no-op on an idle device."""
    r = target.run(f"dd if=/dev/zero of={q(dev)} bs=4096 count=0 conv=notrunc,fsync "
                   "2>&1", timeout=3600)
    if r.rc != 0:
        raise DeviceError(f"cannot flush {dev} between runs: {r.out.strip()[:200]}")


def settle(ctx: RunContext) -> None:
    """Before a run: flush the device's volatile write cache (flush())."""
    flush(ctx.target, ctx.device.path)
