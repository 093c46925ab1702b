"""The benchmark runner end to end in the VM: the k2 suite, shortened (none
and k2 at bounds 1 and 64, random reads, a few seconds per point), on ssdsim
when it is built, otherwise on the throttled NVMe device; its report must
say that the RT tail latency falls as the bound falls."""
from __future__ import annotations

import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from bench.cli import parse
from bench.session import run_suite
from bench.target import VMTarget
from conftest import Guest


# ssdsim slower than its default (20): the device's latencies then stand
# well above the TCG host's scheduling hiccups of a few tens of ms, which
# otherwise decide a short run's p99.9 (fio's p99.9 of a few hundred I/Os is
# their maximum).  At 60, beside the debug tier, k2 at bound 1 measured
# 28-47 ms against 103-104 ms at bound 64 (and failed once in CI on 7.3);
# at 200, in the same boot, 39-53 ms against 204-279 ms.
TIME_SCALE = 200


def ssdsim_loaded(g: Guest) -> bool:
    return any(ln.split()[0] == "ssdsim" for ln in g.sh("cat /proc/modules").splitlines()
               if ln.strip())


@contextmanager
def ssdsim(guest: Guest, time_scale: int) -> Iterator[str]:
    """ssdsim0 at @time_scale, removed afterwards."""
    if ssdsim_loaded(guest):
        guest.sh("rmmod ssdsim")
    guest.sh(f"modprobe ssdsim time_scale={time_scale} && test -b /dev/ssdsim0")
    try:
        yield "ssdsim0"
    finally:
        if not guest.dead and ssdsim_loaded(guest):
            guest.sh("rmmod ssdsim")


@pytest.fixture
def bench_device(guest: Guest) -> Iterator[str]:
    """ssdsim0 (TIME_SCALE) when ssdsim is built, else the throttled NVMe
    device; ssdsim is removed afterwards."""
    if "ssdsim" not in guest.vm.modules:
        yield guest.throttled
        return
    with ssdsim(guest, TIME_SCALE) as dev:
        yield dev


def test_k2_suite_report_shows_tail_latency_falling_with_bound(
        guest: Guest, bench_device: str, tmp_path: Path) -> None:
    if "k2-iosched" not in guest.vm.modules:
        pytest.skip("k2-iosched is not built for this kernel")
    t = VMTarget(guest.vm)
    dev = bench_device
    before = guest.scheduler(dev)
    out = tmp_path / "k2"
    argv = ["run", "k2", "--device", dev, "--ops", "randread", "--bounds", "1,64",
            "--occupancy", "asis", "--reps", "1", "--runtime", "4", "--ramp", "0.5",
            "--tag-pressure", "randread", "--seed", "1", "--out", str(out)]
    run_suite(t, parse(argv), command=argv)
    text = (out / "report.md").read_text()
    print(text)
    assert f"/dev/{dev}" in text and guest.kernel in text
    if dev == "ssdsim0":
        assert f"time_scale = {TIME_SCALE}" in text
    assert "random read, asis: RT p99.9 latency falls as the bound falls: **yes**" in text
    s = json.loads((out / "summary.json").read_text())["k2"]["asis"]["randread"]
    p1 = s["bounds"]["1"]["p999_us"]["mean"]
    p64 = s["bounds"]["64"]["p999_us"]["mean"]
    none = s["none"]["p999_us"]["mean"]
    print(f"RT p99.9: none {none / 1000:.1f} ms, k2 64 {p64 / 1000:.1f} ms, "
          f"k2 1 {p1 / 1000:.1f} ms")
    assert p1 < p64 and p1 < none
    # the runner put the device back
    assert guest.scheduler(dev) == before
    m = json.loads((out / "manifest.json").read_text())
    assert m["status"] == "complete" and len(m["runs"]) == 7
    assert {r["tunables"].get("max_inflight") for r in m["runs"]} == {None, "1", "64"}
    # the tag-pressure workload ran with the module's reserve and without
    # one (how much it helps is test_k2's timing test)
    pressure = [r for r in m["runs"] if r["key"].startswith("pressure/")]
    assert [r["tunables"].get("rt_tags") for r in pressure if r["scheduler"] == "k2"].count(
        "0") == 1 and len(pressure) == 4
    assert "## Tag pressure (rt_tags)" in text and "tag pressure, random read: RT p99.9" in text
    assert "tag_pressure" in json.loads((out / "summary.json").read_text())["k2"]
    assert re.search(r"\| none \| [\d.]+ \| 1× \|", text)

