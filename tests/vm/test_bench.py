"""The benchmark runner end to end in the VM: the k2 suite, shortened (none
and k2 at bounds 1 and 64, random reads, a few seconds per point), on ssdsim
when it is built, otherwise on the throttled NVMe device; its report must
say that the RT tail latency falls as the bound falls."""
from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.cli import parse
from bench.results import Results
from bench.session import run_suite
from bench.target import VMTarget
from adaptive_target import ADAPTIVE_TIME_SCALE, SWEEP, gap_for_target
from conftest import Guest, need_modules, ssdsim


# ssdsim slower than its default (20): the device's latencies then stand
# well above the TCG host's scheduling hiccups of a few tens of ms, which
# otherwise decide a short run's p99.9 (fio's p99.9 of a few hundred I/Os is
# their maximum).  At 60, beside the debug tier, k2 at bound 1 measured
# 28-47 ms against 103-104 ms at bound 64 (and failed once in CI on 7.3);
# at 200, in the same boot, 39-53 ms against 204-279 ms.
TIME_SCALE = 200


@pytest.fixture
def bench_device(guest: Guest) -> Iterator[str]:
    """ssdsim0 (TIME_SCALE) when ssdsim is built, else the throttled NVMe
    device; ssdsim is removed afterwards."""
    if "ssdsim" not in guest.vm.modules:
        yield guest.throttled
        return
    with ssdsim(guest, TIME_SCALE) as dev:
        yield dev


# user space: the runner and its report (tests/run: the first test kernel
# only); the adaptive test below runs on every kernel (issue 16)
@pytest.mark.userspace
def test_k2_suite_report_shows_tail_latency_falling_with_bound(
        guest: Guest, bench_device: str, tmp_path: Path) -> None:
    need_modules(guest, "k2-iosched")
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
    # bound 1 at most half of bound 64's and none's (6.1: a quarter and a
    # sixth)
    assert p1 <= 0.5 * p64 and p1 <= 0.5 * none
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


# The adaptive bound against `bench select`: ssdsim faster than TIME_SCALE
# (ADAPTIVE_TIME_SCALE), and the adaptive run longer than the sweep's, so
# that its p99.9 is about the 4th largest of its reads, not the largest.


@pytest.mark.timing
@pytest.mark.first_kernel  # test_k2's adaptive test covers each kernel's side
@pytest.mark.minutes(15)  # 14.1 min on 7.3 here with two busy loops beside
def test_adaptive_k2_meets_a_target_with_more_bandwidth_than_the_selected_bound(
        icount_guest: Guest, tmp_path: Path) -> None:
    """Issue 16's test: the k2 suite's random-read sweep on ssdsim (none and
    bounds 1-32), then a target between bound 1's and none's RT p99.9, just
    below (0.95 of) the p99.9 of the upper bound of the gap in which a bound
    buys the most bandwidth (gap_for_target()).  `bench select` picks the
    lower bound of that gap (O1: the largest bound whose RT p99.9 is at most
    alpha = target / none's); the adaptive bound (up to 32) can go up to
    nearly the upper one.  Both then run in one suite run, longer: adaptive
    K2's RT p99.9 in the block layer (k2's trace of the run) is within 20 %
    of the target, fio's is below none's, and its total bandwidth is above
    the pick's.

    How the gap and the target are chosen (the gap with the largest
    ratio, only where its upper bound gains bandwidth; the target below
    every measured p99.9 from the gap's upper bound up) is in
    adaptive_target.py, checked in tests/python; how the controller climbs
    and cuts is in k2-core.h (k2_adapt_decide(), k2_adapt_slope(),
    k2_adapt_lone()).  The test runs in a VM of its own whose clock counts
    instructions (icount_guest): a busy host's stalls are not in the
    guest's time, so the sweep measures the device.  git log of this file
    has the failures that shaped it."""
    from bench.results import load
    from bench.suites.k2 import collect, collect_adaptive, points, select

    guest = icount_guest
    need_modules(guest, "k2-iosched", "ssdsim")
    t = VMTarget(guest.vm)
    ramp = 4  # s, the adaptive run's
    common = ["--ops", "randread", "--occupancy", "asis", "--reps", "1",
              "--tag-pressure", "off"]
    with ssdsim(guest, ADAPTIVE_TIME_SCALE) as dev:
        argv = ["run", "k2", "--device", dev, *common, "--bounds", ",".join(map(str, SWEEP)),
                "--runtime", "8", "--ramp", "3", "--seed", "1", "--out", str(tmp_path / "sweep")]
        run_suite(t, parse(argv), command=argv)
        none, pts = points(collect(load(tmp_path / "sweep"))["asis"]["randread"])
        assert none is not None
        p = {pt.bound: pt.p999_us for pt in pts}
        bw = {pt.bound: pt.bw_kib for pt in pts}
        # what a failure in CI (whose log carries only the assertion) needs
        said = ["sweep, RT p99.9 (ms): none %.1f, " % (none.p999_us / 1000)
                + ", ".join(f"{pt.bound}: {pt.p999_us / 1000:.1f} at {pt.bw_kib / 1024:.2f} MiB/s"
                            for pt in pts)]
        print(said[-1])
        lo, hi, target = gap_for_target(p, bw)
        assert p[1] < target < none.p999_us, (p, none, target)
        pick = select(none, pts, 100.0 * target / none.p999_us, 0.0).o1
        assert pick is not None
        said.append(f"target {target / 1000:.1f} ms (below bound {hi}'s, above {lo}'s; "
                    f"{bw[hi] / bw[lo]:.2f}x the bandwidth); bench select picks bound {pick}")
        print(said[-1])

        argv = ["run", "k2", "--device", dev, *common,
                "--bounds", ",".join(map(str, sorted({pick, SWEEP[-1]}))),
                "--targets-us", str(target), "--runtime", "24", "--ramp", str(ramp), "--seed", "2",
                "--out", str(tmp_path / "adaptive")]
        run_suite(t, parse(argv), command=argv)
        res = load(tmp_path / "adaptive")
    print((tmp_path / "adaptive" / "report.md").read_text())
    unbound, fixed = points(collect(res)["asis"]["randread"])
    assert unbound is not None
    chosen = next(pt for pt in fixed if pt.bound == pick)
    ad = collect_adaptive(res)["asis"]["randread"][target][0]
    assert "k2_p999_us" in ad, "the adaptive run's k2 trace is not whole: " + str(
        next(r.rec.get("trace") for r in res.runs if "target_us" in r.labels))
    said.append(f"adaptive: RT p99.9 {ad['k2_p999_us'] / 1000:.1f} ms in the block layer "
                f"({ad['k2_p999_us'] / target:.2f} of the target), fio's {ad['p999_us'] / 1000:.1f} "
                f"ms over {ad['rt_ios']:.0f} reads, {ad['bw_kib'] / 1024:.2f} MiB/s; "
                f"bound {pick}: {chosen.p999_us / 1000:.1f} ms, {chosen.bw_kib / 1024:.2f} MiB/s; "
                f"none: {unbound.p999_us / 1000:.1f} ms")
    print(said[-1])
    said.append(f"the controller's decisions (k2_adjust; seconds from the run's start, whose "
                f"first {ramp} are fio's ramp): " + _decisions(res))
    print(said[-1])
    # The target is the block layer's (K2 measures from a request's
    # allocation to its completion), and so is the check: the RT reads'
    # insert to completion in k2's trace of the run (traced_rt_p999()).
    # fio's adds the reader's system call and its wake-up on a guest CPU it
    # shares with a best-effort job, which no I/O scheduler governs: in a
    # TCG guest on a busy host (this tier runs beside static, unit and the
    # debug tier's VM) that costs milliseconds now and then, and a p99.9 of
    # about 2000 reads is their third largest.  Measured on 6.1 beside
    # those tiers, against a 28.5 ms target: the trace had one read above
    # it (33.9 ms) of 2467 and a p99.9 of 25.2 ms after the ramp, fio's
    # p99.9 was 34.3 ms (1.20).  CI failed three times on 6.1 on fio's
    # alone (1.22, 1.24 and 1.26 of the target) with a witness for the
    # host, a fixed bound's gain over its sweep, that had a stall or not as
    # its own run did (1.2 ms in the last, 26 ms here).  fio's tail still answers to K2:
    # it must stay below none's in the same run.  (Not below bound 32's:
    # where the target's gap ends at 32, adaptive K2 may rightly run at 32,
    # and did once here, 56.4 ms against 32's 57.9.)
    assert ad["k2_p999_us"] <= 1.2 * target, "\n".join(said)
    assert ad["p999_us"] < unbound.p999_us, "\n".join(said)
    assert ad["bw_kib"] > chosen.bw_kib, "\n".join(said)


def _decisions(res: Results) -> str:
    """The adaptive run's k2_adjust decisions in one line, from its kept
    trace."""
    from bench.suites.k2 import kept_trace
    from tracepoints import report as tr

    run = next(r for r in res.runs if "target_us" in r.labels)
    f = kept_trace(res, run)
    return tr.adjust_history(tr.read_trace(f, "k2")) if f else "(no trace kept)"
