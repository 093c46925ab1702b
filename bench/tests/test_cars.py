"""`bench calibrate cars`: CARS's tunables from an ssdsim disk's sysfs
(the whole path, selection and read-back included, runs in the VM:
tests/vm/test_cars.py).  The cars suite (bench/suites/cars.py) without a
kernel: plan and job files, options, flow statistics on synthetic fio
JSON, a whole run on a simulated ssdsim with cars (report, plots,
summary)."""
from __future__ import annotations

import json
import math
import re
import shlex
import shutil
import statistics
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bench import prep, report
from bench.calibrate import cars_tunables
from bench.cli import main
from bench.jobs import parse_options
from bench.runner import RunContext
from bench.session import durations
from bench.suites import cars as cs
from bench.suites import get
from bench.tests.fake import FakeTarget, Validator, fio_json, run_fake
from bench.tests.test_report import is_png
from bench.tests.test_runner import context
from scripts.vmbed import Result

#: ssdsim's defaults (ssdsim/README.md), as its sysfs shows them
SSDSIM = {"dies": "8", "page_size": "4096", "read_ns": "50000", "program_ns": "500000",
          "erase_ns": "3000000", "xfer_ns": "10000", "time_scale": "20", "cmt_pages": "0",
          "write_buffer_pages": "64", "write_die": "5"}


def test_cars_tunables_scale_ssdsim_times_and_keep_its_geometry() -> None:
    t = cars_tunables(SSDSIM)
    assert t == {"nr_dies": 8, "page_kb": 4, "read_us": 1200, "write_us": 10200,
                 "erase_us": 60000, "depth": 8, "max_hold_us": 10200, "cmt_regions": 0,
                 "write_pointer": 5}
    # the order they are written in: geometry first (it resets the record of
    # writes), the write pointer last
    assert list(t)[:2] == ["nr_dies", "page_kb"] and list(t)[-1] == "write_pointer"


def test_cars_tunables_mapping_cache_and_limits() -> None:
    t = cars_tunables({**SSDSIM, "cmt_pages": "64", "page_size": "16384", "time_scale": "1"})
    # 16 KiB pages hold 4096 4-byte entries: one translation page maps 64 MiB
    assert t["cmt_region_kb"] == 65536 and t["cmt_regions"] == 64
    assert list(t).index("cmt_region_kb") < list(t).index("cmt_regions")
    assert t["page_kb"] == 16 and t["read_us"] == 60 and t["write_us"] == 510
    # times beyond cars's range are clamped to it; the hold to 1 s
    slow = cars_tunables({**SSDSIM, "time_scale": "100000"})
    assert slow["erase_us"] == 10_000_000 and slow["write_us"] == 10_000_000
    assert slow["max_hold_us"] == 1_000_000
    assert cars_tunables({**SSDSIM, "write_die": "13"})["write_pointer"] == 5
    with pytest.raises(ValueError, match="page_size 512 is outside cars's page_kb range"):
        cars_tunables({**SSDSIM, "page_size": "512"})


# ---------------------------------------------------------------------------
# the cars suite

def _range(lo: int, hi: int) -> Validator:
    return lambda v: v.isdigit() and lo <= int(v) <= hi


#: cars's tunables as its sysfs has them (cars-iosched.c's header)
CARS: dict[str, tuple[str, Validator]] = {
    "nr_dies": ("8", _range(1, 255)), "page_kb": ("4", _range(1, 64)),
    "read_us": ("60", _range(1, 10 ** 7)), "write_us": ("600", _range(1, 10 ** 7)),
    "erase_us": ("3000", _range(1, 10 ** 7)), "depth": ("8", _range(1, 1024)),
    "throttle_size": ("4", _range(0, 1024)), "max_hold_us": ("2000", _range(0, 10 ** 6)),
    "filter": ("1", _range(0, 1)), "cmt_regions": ("0", _range(0, 4096)),
    "cmt_region_kb": ("2048", _range(4, 1048576)), "write_pointer": ("0", _range(0, 7))}

#: ssdsim's module parameters (/sys/module/ssdsim/parameters), as loaded
MODULE = {"channels": "4", "dies_per_channel": "2", "page_size": "4096", "read_ns": "50000",
          "program_ns": "500000", "erase_ns": "3000000", "xfer_ns": "10000",
          "time_scale": "20", "write_buffer_kb": "256", "cmt_pages": "0", "fill_percent": "0",
          "capacity_mb": "256"}

#: mean response time (us) of a read and a write alone, and each
#: configuration's factor on them per flow beyond the first in a mix
ALONE_US = {"read": 1200.0, "write": 10200.0}
FACTOR = {"none": {"read": 1.0, "write": 0.3}, "mq-deadline": {"read": 0.9, "write": 0.3},
          "cars-rr": {"read": 0.8, "write": 0.3}, "cars": {"read": 0.3, "write": 0.35},
          "cars-probed": {"read": 0.32, "write": 0.35}}
#: what the probe finds in test_cars_probed_*: 7 dies, which is how the
#: fake tells cars-probed from cars
PROBED = {"nr_dies": 7, "page_kb": 4, "read_us": 1150, "write_us": 9800, "depth": 7,
          "max_hold_us": 9800}


def fake_latency(sched: str, flows: int, ddir: str) -> float:
    return ALONE_US[ddir] * (1 + (flows - 1) * FACTOR[sched][ddir]) if flows > 1 \
        else ALONE_US[ddir]


class Ssdsim(FakeTarget):
    """ssdsim0 with cars-iosched as a module: module reloads (every one
    puts the write pointer at a new die, so that the test sees it read
    afresh), its sysfs, and fio latencies by FACTOR."""

    def __init__(self) -> None:
        super().__init__(dev="ssdsim0", scheduler="none")
        self.size_bytes = 256 << 20
        self.loadable["cars-iosched"] = ("cars", CARS)
        self.params = dict(MODULE)
        self.loads: list[dict[str, str]] = []
        self.write_die = 3
        self.at_fio: list[tuple[str, int, dict[str, str]]] = []   # (sched, write_die, values)
        self.on_fio = lambda t: self.at_fio.append((t.current, self.write_die, dict(t.values)))

    def config(self) -> str:
        if self.current == "cars":
            if self.values["filter"] == "0":
                return "cars-rr"
            return "cars-probed" if self.values["nr_dies"] == "7" else "cars"
        return self.current

    def latency_us(self, name: str, opts: dict[str, Any]) -> float:
        n = len(parse_options(self.last_jobfile)) - 1
        return fake_latency(self.config(), n, str(opts.get("ddir") or
                                                  ("write" if opts["rwmixread"] == "0" else
                                                   "read")))

    def run(self, script: str, timeout: float = 300.0) -> Result:
        s = script.strip()
        if s.startswith("cd /sys/module/ssdsim/parameters"):
            return Result(0, "".join(f"{k}={v}\n" for k, v in self.params.items()))
        if s == "modprobe -r ssdsim 2>&1 || rmmod ssdsim":
            self.current, self.values = "none", {}
            return Result(0, "")
        m = re.fullmatch(r"modprobe ssdsim (.*)", s)
        if m:
            self.params = dict(kv.split("=", 1) for kv in shlex.split(m.group(1)))
            self.loads.append(dict(self.params))
            self.write_die = len(self.loads) % 8
            return Result(0, "")
        if s.startswith("[ -b /dev/ssdsim0 ]"):
            return Result(0, "")
        if s.startswith("cd /sys/class/block/ssdsim0/ssdsim && for f in"):
            p = self.params
            attrs = {"dies": int(p["channels"]) * int(p["dies_per_channel"]),
                     "write_buffer_pages": int(p["write_buffer_kb"]) * 1024 // int(p["page_size"]),
                     "write_die": self.write_die,
                     **{k: p[k] for k in ("page_size", "read_ns", "program_ns", "erase_ns",
                                          "xfer_ns", "time_scale", "cmt_pages")}}
            return Result(0, "".join(f"{k}={v}\n" for k, v in attrs.items()))
        return super().run(script, timeout)


def cars_ctx(argv: list[str], t: Ssdsim | None = None) -> RunContext:
    t = t or Ssdsim()
    ctx = context(t, ["run", "cars", "--device", "ssdsim0", "--short", *argv])
    ctx.params = dict(zip(("runtime", "ramp", "reps"), durations(get("cars"), ctx.args)))
    ctx.device.kind, ctx.device.name, ctx.device.path = "ssdsim", "ssdsim0", "/dev/ssdsim0"
    ctx.device.size_bytes = t.size_bytes
    ctx.device.module_params = dict(t.params)
    ctx.sched_info = {"mq-deadline": {"nr_requests": 64, "defaults": {}},
                      "cars": {"nr_requests": 64,
                               "defaults": {k: v for k, (v, _) in CARS.items()}}}
    return ctx


def test_plan_measures_each_workload_once_under_every_configuration() -> None:
    plan = get("cars").plan(cars_ctx([]))
    cfgs = plan.configs()
    mixes = [c for c in cfgs if c.label("kind") == cs.MIX]
    wls = ["r50-r50", "r50-r0", "r50-r25", "r50-r75", "r50-r100", "r50-r50-r50-r50",
           "-".join(["r50"] * 8)]
    # the pair, the sweep's 50% point and 2 flows are one workload
    assert [c.key for c in mixes] == [f"mix/{w}/{s}" for w in wls for s in cs.DEFAULT_SCHEDS]
    assert plan.params["workloads"] == {
        "pair": ["r50-r50"], "sweep": ["r50-r0", "r50-r25", "r50-r50", "r50-r75", "r50-r100"],
        "flows": ["r50-r50", wls[5], wls[6]]}
    alone = [c for c in cfgs if c.label("kind") == cs.ALONE]
    assert [(c.key, c.scheduler, c.label("reads")) for c in alone] == [
        (f"alone/r{r}", "none", r) for r in (50, 0, 25, 75, 100)]
    for c in cfgs:
        s = c.label("sched")
        assert c.scheduler == cs.CONFIGS[str(s)][0] and c.fio_output == "json+"
        if s in ("cars", "cars-rr"):
            assert c.tunables == (("filter", 1 if s == "cars" else 0),)
            assert c.live_tunables is cs.ssdsim_model
        else:
            assert c.tunables == () and c.live_tunables is None
        assert c.seconds == 3.5
    assert len(cfgs) == 7 * 4 + 5 and len(plan.phases) == 1
    ph = plan.phases[0]
    assert ph.setup is cs.write_through and ph.settle is prep.empty_again
    assert plan.params["regions"] == 8 and plan.params["region_mib"] == 32
    assert plan.params["cars_model"]["write_pointer"] == 3
    assert any("nr_dies=8 page_kb=4 read_us=1200 write_us=10200" in n for n in plan.notes)


def test_plan_options_and_their_checks(capsys: pytest.CaptureFixture[str]) -> None:
    ctx = cars_ctx(["--experiments", "sweep", "--read-ratios", "0,100", "--schedulers",
                    "cars-rr,cars", "--iodepth", "2", "--cars-tunables", "throttle_size=8",
                    "--ioengine", "libaio"])
    plan = get("cars").plan(ctx)
    assert [c.key for c in plan.configs()] == [
        "mix/r50-r0/cars-rr", "mix/r50-r0/cars", "mix/r50-r100/cars-rr", "mix/r50-r100/cars",
        "alone/r50", "alone/r0", "alone/r100"]
    assert {c.tunables for c in plan.configs() if c.scheduler == "cars"} == \
        {(("filter", 0), ("throttle_size", "8")), (("filter", 1), ("throttle_size", "8"))}
    g = parse_options(plan.configs()[0].jobfile)["global"]
    assert (g["iodepth"], g["ioengine"]) == ("2", "libaio")
    ctx = cars_ctx(["--experiments", "flows", "--flows", "3", "--fairness-reads", "0,100"])
    del ctx.sched_info["mq-deadline"]                # its module could not be loaded
    cfgs = get("cars").plan(ctx).configs()
    assert [c.key for c in cfgs] == [f"mix/r0-r100-r0/{s}" for s in ("none", "cars-rr", "cars")] \
        + ["alone/r0", "alone/r100"]
    for argv, msg in ((["--iodepth", "0"], "--iodepth must be at least 1"),
                      (["--cars-tunables", "nope=1"], "cars has no tunable nope"),
                      (["--cars-tunables", "depth"], "'depth' is not name=value"),
                      (["--trace", "lttng"], "use --trace ftrace")):
        with pytest.raises(ValueError, match=msg):
            get("cars").plan(cars_ctx(argv))
    ctx = cars_ctx([])
    ctx.device.kind = "nvme"
    with pytest.raises(ValueError, match="runs on ssdsim"):
        get("cars").plan(ctx)
    for argv in (["--flows", "1"], ["--read-ratios", "101"], ["--experiments", "pairs"],
                 ["--schedulers", "kyber"]):
        with pytest.raises(SystemExit) as e:
            cars_ctx(argv)
        assert e.value.code == 2
        err = capsys.readouterr().err
        assert f"error: argument {argv[0]}: '{argv[1]}': choose from" in err, err


def test_jobs_are_one_mixed_flow_per_process_in_disjoint_regions() -> None:
    o = parse_options(cs.jobfile("/dev/ssdsim0", 256 << 20, (50, 0, 100), 8, 10, 1,
                                 "io_uring", 4, 2, comment="x"))
    g = o.pop("global")
    assert (g["rw"], g["bs"], g["iodepth"], g["direct"], g["ioengine"]) == \
        ("randrw", "4k", "4", "1", "io_uring")
    assert list(o) == ["flow1-r50", "flow2-r0", "flow3-r100"]
    assert [(v["rwmixread"], v["offset"], v["size"], v["cpus_allowed"]) for v in o.values()] \
        == [("50", "0M", "32M", "0"), ("0", "32M", "32M", "1"), ("100", "64M", "32M", "0")]
    assert [cs.flow_reads(n) for n in o] == [50, 0, 100]
    with pytest.raises(ValueError, match="3 flows for 2 regions"):
        cs.jobfile("/dev/x", 256 << 20, (1, 2, 3), 2, 10, 1, "io_uring", 4, None)
    with pytest.raises(ValueError, match="too small"):
        cs.jobfile("/dev/x", 4 << 20, (50, 50), 8, 10, 1, "io_uring", 4, None)
    with pytest.raises(ValueError, match="iodepth 0"):
        cs.jobfile("/dev/x", 256 << 20, (50,), 1, 10, 1, "io_uring", 0, None)
    assert cs.workload_title("r50-r0") == "2 flows: 50%, 0% reads"
    assert cs.workload_title("r50-r50-r50") == "3 flows, 50% reads each"


def mixed_json(flows: dict[str, tuple[float, float]]) -> dict[str, Any]:
    """fio json+ of mixed flows: name -> (read, write) latency in us."""
    text = "[global]\nrw=randrw\n" + "".join(
        f"[{n}]\nrwmixread={cs.flow_reads(n)}\n" for n in flows)
    return fio_json(text, lambda n, o: flows[n][0 if o.get("ddir") == "read" else 1], True)


def test_flow_response_time_is_over_reads_and_writes() -> None:
    res = mixed_json({"flow1-r75": (1000.0, 9000.0), "flow2-r0": (0.0, 5000.0)})
    f = cs.flow_stats(res, "flow1-r75", {75: 2000.0, 0: 2500.0}, 3.0)
    # 750 reads at 1 ms, 250 writes at 9 ms
    assert (f.ios, f.reads) == (1000, 75)
    assert f.mean_us == pytest.approx(0.75 * 1000 + 0.25 * 9000)
    assert (f.read_us, f.write_us) == (1000.0, 9000.0)
    assert f.slowdown == pytest.approx(3000 / 2000)
    assert f.iops == pytest.approx(1e6 / 1000 * 0.75 + 1e6 / 9000 * 0.25)
    # the 99th percentile of both sides' merged histograms: 1000 I/Os, the
    # 990th is a write at 9 ms (reads: 749 at 1 ms, one at 10 ms; writes:
    # 249 at 9 ms, one at 90 ms)
    assert f.p99_us == pytest.approx(9000.0)
    w = cs.flow_stats(res, "flow2-r0", {0: 2500.0})
    assert math.isnan(w.read_us) and w.mean_us == 5000.0 and w.slowdown == 2.0
    m = cs.mix_metrics(res, {75: 2000.0, 0: 2500.0}, 3.0)
    assert m.n == 2 and m.max_slowdown == 2.0
    assert m.mean_slowdown == pytest.approx(1.75)
    assert m.fairness == pytest.approx(1 / 1.5 + 1 / 2)
    # a flow without I/O: the run time as its response time
    starved = cs.flow_stats(mixed_json({"flow1-r50": (0.0, 0.0)}), "flow1-r50", {50: 1e3}, 2.0)
    assert starved.starved and starved.slowdown == pytest.approx(2000.0)
    assert math.isnan(starved.p99_us)
    # no alone run of its read ratio: unknown
    assert math.isnan(cs.flow_stats(res, "flow1-r75", {}).slowdown)


# ---------------------------------------------------------------------------
# a whole run on the simulated ssdsim

@pytest.fixture(scope="module")
def cars_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Ssdsim, str]]:
    out = tmp_path_factory.mktemp("cars") / "res"
    t = Ssdsim()
    log = run_fake(t, ["run", "cars", "--device", "/dev/ssdsim0", "--short", "--seed", "5",
                       "--read-ratios", "0,50,100", "--flows", "2,4"], out)
    yield out, t, log


def test_run_reloads_ssdsim_write_through_and_reads_the_write_pointer(
        cars_run: tuple[Path, Ssdsim, str]) -> None:
    out, t, log = cars_run
    m = json.loads((out / "manifest.json").read_text())
    runs = m["runs"]
    assert m["status"] == "complete" and len(runs) == 4 * 4 + 3
    # write-through for the phase, then a fresh device before every run; the
    # original parameters at the end
    assert [ld["write_buffer_kb"] for ld in t.loads] == ["0"] * (1 + len(runs)) + ["256"]
    assert "restored: ssdsim reloaded with its original parameters (write_buffer_kb=256)" in log
    assert "ssdsim reloaded write-through" in m["phases"]["cars"]["note"]
    fios = iter(t.at_fio)
    for r in runs:
        sched, die, values = next(fios)
        assert sched == r["scheduler"]
        if r["scheduler"] == "cars":
            # ssdsim's model, the write pointer as ssdsim had it at that run
            assert r["tunables"] == {
                "nr_dies": "8", "page_kb": "4", "read_us": "1200", "write_us": "10200",
                "erase_us": "60000", "depth": "8", "max_hold_us": "10200", "cmt_regions": "0",
                "write_pointer": str(die),
                "filter": "1" if r["labels"]["sched"] == "cars" else "0"}
            assert values["write_pointer"] == str(die)
        else:
            assert r["tunables"] == {}
    assert t.current == "none" and "cars" not in t.scheds
    assert "flow1-r50 " in log and " IOPS, " in log


def test_cars_probed_is_calibrated_by_the_probe_once_and_compared_with_cars(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """--schedulers cars,cars-probed: the probe runs once, in the set-up,
    on the write-through device; cars-probed gets what it found and the
    write pointer from ssdsim (modulo its dies), cars ssdsim's model; the
    report compares the two with the 5 % goal."""
    t = Ssdsim()
    calls: list[tuple[str, str]] = []

    def probe(target: Ssdsim, dev: str, info: Any, out: Any) -> dict[str, int]:
        calls.append((dev, target.params["write_buffer_kb"]))
        print("probe 1/4: writing", file=out)
        return dict(PROBED)
    monkeypatch.setattr(cs, "probed_tunables", probe)
    out = tmp_path / "res"
    log = run_fake(t, ["run", "cars", "--device", "/dev/ssdsim0", "--short", "--seed", "5",
                       "--experiments", "pair", "--schedulers", "cars,cars-probed"], out)
    assert calls == [("ssdsim0", "0")] and "probe 1/4: writing" in log
    m = json.loads((out / "manifest.json").read_text())
    assert m["phases"]["cars"]["probed"] == PROBED
    fios = iter(t.at_fio)
    for r in m["runs"]:
        sched, die, _ = next(fios)
        if r["labels"]["sched"] == "cars-probed":
            assert r["tunables"] == {**{k: str(v) for k, v in PROBED.items()},
                                     "write_pointer": str(die % 7), "filter": "1"}
        elif r["labels"]["sched"] == "cars":
            assert r["tunables"]["nr_dies"] == "8" and r["tunables"]["write_pointer"] == str(die)
    s = json.loads((out / "summary.json").read_text())["cars"]
    g = s["probed_vs_cars"]["r50-r50"]
    sd = {x: expected_mean(x, 2, 50) / expected_mean("none", 1, 50)
          for x in ("cars", "cars-probed")}
    assert g["slowdown"] == pytest.approx(sd["cars-probed"] / sd["cars"] - 1)
    assert g["within"] == (abs(g["slowdown"]) <= 0.05 and abs(g["iops"]) <= 0.05)
    assert s["probed"] == PROBED
    text = (out / "report.md").read_text()
    assert "## cars calibrated by the probe against cars from ssdsim's sysfs" in text
    assert "| nr_dies | 8 | 7 |" in text and "| erase_us | 60000 | cars's default |" in text
    assert "cars calibrated by the probe against cars from ssdsim's sysfs: within 5%" in text


def test_cars_probed_without_the_probe_is_an_error() -> None:
    ctx = cars_ctx(["--schedulers", "cars-probed"])
    plan = get("cars").plan(ctx)
    assert plan.phases[0].setup is cs.write_through_probed
    c = plan.configs()[0]
    assert c.live_tunables is cs.probed_model
    with pytest.raises(cs.RunError, match="cars-probed runs before the phase's probe"):
        cs.probed_model(ctx)


def expected_mean(sched: str, flows: int, reads: int) -> float:
    r = reads / 100
    return r * fake_latency(sched, flows, "read") + (1 - r) * fake_latency(sched, flows, "write")


def test_report_numbers_plots_and_headline(cars_run: tuple[Path, Ssdsim, str]) -> None:
    out, _, _ = cars_run
    text = (out / "report.md").read_text()
    s = json.loads((out / "summary.json").read_text())["cars"]
    assert s["baseline"] == "none" and s["goal"] == {"slowdown": 0.23, "iops": 0.12}
    assert s["alone_us"]["50"]["mean"] == pytest.approx(expected_mean("none", 1, 50))

    def sd(sched: str, wl: tuple[int, ...]) -> list[float]:
        return [expected_mean(sched, len(wl), r) / expected_mean("none", 1, r) for r in wl]
    pair = s["workloads"]["r50-r50"]
    assert pair["experiments"] == ["pair", "sweep", "flows"]
    for sched in cs.DEFAULT_SCHEDS:
        v = pair["schedulers"][sched]
        assert v["mean_slowdown"]["mean"] == pytest.approx(statistics.fmean(sd(sched, (50, 50))))
        assert v["fairness"]["mean"] == pytest.approx(sum(1 / x for x in sd(sched, (50, 50))))
        assert v["flows"][0]["p99_us"]["mean"] == pytest.approx(
            fake_latency(sched, 2, "write"))
    sweep = s["workloads"]["r50-r0"]["schedulers"]["cars"]
    assert [f["name"] for f in sweep["flows"]] == ["flow1-r50", "flow2-r0"]
    assert sweep["flows"][1]["slowdown"]["mean"] == pytest.approx(sd("cars", (50, 0))[1])
    assert math.isnan(sweep["flows"][1]["read_us"]["mean"])
    # cars against cars-rr, the goal's verdict
    g = s["cars_vs_rr"]["r50-r50"]
    c, r = pair["schedulers"]["cars"], pair["schedulers"]["cars-rr"]
    assert g["slowdown"] == pytest.approx(1 - c["mean_slowdown"]["mean"] /
                                          r["mean_slowdown"]["mean"])
    assert g["iops"] == pytest.approx(c["iops"]["mean"] / r["iops"]["mean"] - 1)
    assert g["goal_met"] == (g["slowdown"] >= 0.23 and g["iops"] >= 0.12)
    assert s["pair"]["slowdown"] == g["slowdown"]
    assert s["best"]["fairness"] == max(v["fairness"] for v in s["cars_vs_rr"].values())
    for png in ("cars-pair", "cars-sweep", "cars-flows", "cars-vs-rr"):
        assert f"](plots/{png}.png)" in text and is_png(out / "plots" / f"{png}.png")
    for sec in ("## Alone (under none)", "## Two flows, 50% reads each",
                "## Flow 2's read ratio swept", "### 2 flows: 50%, 100% reads",
                "## N flows, weighted fairness", "### 4 flows, 50% reads each",
                "## cars against cars filter=0 (round-robin)"):
        assert sec in text, sec
    head = (out / "headline.md").read_text()
    first = head.splitlines()[0]
    assert first.startswith("- 2 flows, 50% reads each, cars against cars filter=0")
    assert f"**{cs.pct(-g['slowdown'])}**" in first and f"**{cs.pct(g['iops'])}**" in first
    assert f"goal **{'met' if g['goal_met'] else 'not met'}**" in first
    assert "Where it comes from" in head and "4 flows, 50% reads each: weighted fairness" in head


def test_report_rewrite_without_cars_rr(cars_run: tuple[Path, Ssdsim, str],
                                        tmp_path: Path) -> None:
    out, _, _ = cars_run
    folder = tmp_path / "res"
    shutil.copytree(out, folder)
    m = json.loads((folder / "manifest.json").read_text())
    m["runs"] = [r for r in m["runs"] if r["labels"]["sched"] != "cars-rr"]
    (folder / "manifest.json").write_text(json.dumps(m))
    assert main(["report", str(folder)]) == 0
    assert "no comparison" in (folder / "headline.md").read_text()
    s = json.loads((folder / "summary.json").read_text())["cars"]
    assert s["cars_vs_rr"] == {} and s["pair"] is None
    assert "Not measured" in report.write(folder).read_text()


def test_demo_runs_the_short_cars_suite() -> None:
    from bench import demo
    s = [d for d in demo.DEMO if d.suite == "cars"][0]
    assert s.needs_module == "cars-iosched" and s.on_device
    cfgs = get("cars").plan(cars_ctx(list(s.args))).configs()
    # the demo's share per kernel
    assert len(cfgs) == 5 * 4 + 3 and sum(c.seconds for c in cfgs) == 23 * 3.5


def check_report_against_fio(folder: Path) -> dict[str, Any]:
    """Recompute from fio's JSON alone, independently of the suite's code,
    every workload's mean slowdown, total IOPS and weighted fairness per
    configuration (one repetition each, or the mean over them), and compare
    with summary.json; the summary."""
    m = json.loads((folder / "manifest.json").read_text())

    def side(job: dict[str, Any], d: str) -> tuple[int, float]:
        x = job[d]
        return x["total_ios"], x["clat_ns"]["mean"] / 1000 if x["total_ios"] else 0.0

    def flow_mean(job: dict[str, Any]) -> float:
        (nr, r), (nw, w) = side(job, "read"), side(job, "write")
        return (nr * r + nw * w) / (nr + nw)
    alone: dict[int, list[float]] = {}
    mixes: dict[tuple[str, str], list[list[dict[str, Any]]]] = {}
    for r in m["runs"]:
        jobs = json.loads((folder / r["json"]).read_text())["jobs"]
        if r["labels"]["kind"] == "alone":
            alone.setdefault(int(r["labels"]["reads"]), []).append(flow_mean(jobs[0]))
        else:
            mixes.setdefault((r["labels"]["workload"], r["labels"]["sched"]), []).append(jobs)
    base = {k: sum(v) / len(v) for k, v in alone.items()}
    s = json.loads((folder / "summary.json").read_text())["cars"]
    assert mixes
    for (w, sched), runs in mixes.items():
        got = s["workloads"][w]["schedulers"][sched]
        sds = [[flow_mean(j) / base[int(j["jobname"].rsplit("-r", 1)[1])] for j in jobs]
               for jobs in runs]
        assert got["mean_slowdown"]["mean"] == pytest.approx(
            statistics.fmean(statistics.fmean(x) for x in sds))
        assert got["fairness"]["mean"] == pytest.approx(
            statistics.fmean(sum(1 / v for v in x) for x in sds))
        assert got["iops"]["mean"] == pytest.approx(statistics.fmean(
            sum(j["read"]["iops"] + j["write"]["iops"] for j in jobs) for jobs in runs))
    for w, g in s["cars_vs_rr"].items():
        c, rr = (s["workloads"][w]["schedulers"][x] for x in ("cars", "cars-rr"))
        assert g["slowdown"] == pytest.approx(1 - c["mean_slowdown"]["mean"] /
                                              rr["mean_slowdown"]["mean"])
    return s


def test_report_agrees_with_fio_json(cars_run: tuple[Path, Ssdsim, str]) -> None:
    check_report_against_fio(cars_run[0])
