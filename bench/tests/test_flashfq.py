"""The flashfq suite, `bench calibrate flashfq` and the overhead suite's
flashfq comparisons, without a kernel: plans and job files, slowdowns and
class percentiles on synthetic fio JSON, a whole run on the simulated
device (report, plots, summary), calibrate's safety refusal and its sysfs
writes on the simulated sysfs."""
from __future__ import annotations

import io
import re
import json
import shutil
import statistics
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bench import fio, prep, report, results
from bench.calibrate import calibrate, cost_ns
from bench.cli import main
from bench.device import TunableError, UnsafeDevice, set_tunable
from bench.jobs import parse_options
from bench.runner import RunContext
from bench.session import durations
from bench.suites import flashfq as ffq
from bench.suites import get, overhead
from bench.tests.fake import FLASHFQ, FakeTarget, fio_json, run_fake
from bench.tests.loopdev import Loop
from bench.tests.test_safety import loop  # noqa: F401 - the fixture
from bench.tests.test_report import copy, is_png
from bench.tests.test_runner import context

FIX = Path(__file__).parent / "fixtures"
ROOT = Path(__file__).resolve().parents[2]
INFO = {s: {"nr_requests": 64, "defaults": {}} for s in ("mq-deadline", "kyber", "bfq")}

#: mean response time alone (us), and each scheduler's factor over the
#: proportional slowdown per class, for the simulated device
ALONE_US = {"r4k": 100.0, "w4k": 50.0, "r128k": 400.0, "w128k": 900.0}
FACTOR = {"none": {"r4k": 3.0, "w4k": 0.5, "r128k": 1.2, "w128k": 0.9},
          "mq-deadline": {"r4k": 2.0, "w4k": 0.7, "r128k": 1.2, "w128k": 0.9},
          "kyber": {"r4k": 1.5, "w4k": 0.8, "r128k": 1.1, "w128k": 1.0},
          "bfq": {"r4k": 1.3, "w4k": 1.2, "r128k": 1.0, "w128k": 1.6},
          "flashfq": {"r4k": 1.05, "w4k": 1.1, "r128k": 1.0, "w128k": 1.0}}


class Device(FakeTarget):
    """The simulated device, with kyber, bfq and flashfq as modules; a task
    alone takes ALONE_US, in a mix of n tasks n x FACTOR times that."""

    def __init__(self, **kw: Any):
        super().__init__(**kw)
        self.loadable.update({"kyber-iosched": ("kyber", {}),
                              "bfq": ("bfq", {"slice_idle": ("8", str.isdigit)})})

    def latency_us(self, name: str, opts: dict[str, Any]) -> float:
        n = len(parse_options(self.last_jobfile)) - 1
        c = ffq.task_class(name)
        return ALONE_US[c] * (1 if n == 1 else n * FACTOR[self.current][c])


def plan_ctx(argv: list[str], flashfq: bool = True) -> RunContext:
    t = Device()
    ctx = context(t, ["run", "flashfq", "--device", "fake0", "--short", *argv])
    ctx.params = dict(zip(("runtime", "ramp", "reps"), durations(get("flashfq"), ctx.args)))
    ctx.sched_info = dict(INFO)
    if flashfq:
        ctx.sched_info["flashfq"] = {"nr_requests": 32,
                                     "defaults": {k: v for k, (v, _) in FLASHFQ.items()}}
    return ctx


# ---------------------------------------------------------------------------
# plan and job files

def test_plan_has_every_scenario_under_every_scheduler_and_each_class_alone() -> None:
    plan = get("flashfq").plan(plan_ctx([]))
    cs = plan.configs()
    mixes = [c for c in cs if c.label("scenario") != ffq.ALONE]
    assert sorted(c.key for c in mixes) == sorted(f"{scn}/{s}" for scn in "abcd"
                                                  for s in ffq.SCHEDS)
    for c in mixes:
        assert c.scheduler == c.label("sched") and c.tunables == ()
    alone = [c for c in cs if c.label("scenario") == ffq.ALONE]
    assert [(c.scheduler, c.label("class")) for c in alone] == \
        [("none", "r4k"), ("none", "w4k"), ("none", "r128k"), ("none", "w128k")]
    assert all(c.fio_output == "json+" and c.seconds == 2.5 for c in cs)
    # one phase: every configuration in one shuffled order, the device
    # emptied (and flushed) before each run: the scenarios' writes would
    # otherwise fill it, and its garbage collection slow the runs after
    assert len(plan.phases) == 1 and plan.phases[0].settle is prep.empty_again
    assert plan.phases[0].describe == "empty device"
    assert len(plan.phases[0].blocks) == len(cs) == 24
    assert plan.params["baseline"] == "none" and plan.params["regions"] == 32
    assert plan.params["ioengine"] == "psync"


def test_plan_baseline_same_scenarios_and_missing_schedulers() -> None:
    ctx = plan_ctx(["--scenarios", "a,d", "--baseline", "same"])
    del ctx.sched_info["kyber"]                     # its module could not be loaded
    cs = get("flashfq").plan(ctx).configs()
    scheds = ["none", "mq-deadline", "bfq", "flashfq"]
    assert [c.key for c in cs if c.label("scenario") != ffq.ALONE] == \
        [f"{scn}/{s}" for scn in "ad" for s in scheds]
    assert sorted(c.key for c in cs if c.label("scenario") == ffq.ALONE) == \
        sorted(f"alone/{s}/{c}" for s in scheds for c in ("r4k", "w4k", "w128k"))
    ctx = plan_ctx(["--scenarios", "c", "--occupancy", "full", "--schedulers", "none,flashfq"])
    plan = get("flashfq").plan(ctx)
    assert [c.key for c in plan.configs()] == ["c/none", "c/flashfq", "alone/none/r4k",
                                               "alone/none/r128k"]
    assert plan.phases[0].setup is not None and plan.phases[0].describe == \
        "fully occupied device"
    assert plan.phases[0].settle is prep.settle       # filled once, then steady
    plan = get("flashfq").plan(plan_ctx(["--occupancy", "asis"]))
    assert plan.phases[0].setup is None and plan.phases[0].settle is prep.settle


def test_flashfq_tunables_go_to_its_runs_only() -> None:
    ctx = plan_ctx(["--flashfq-tunables", "depth=8 cost_read_4k_ns=3600000"])
    cs = get("flashfq").plan(ctx).configs()
    for c in cs:
        assert c.tunables == ((("depth", "8"), ("cost_read_4k_ns", "3600000"))
                              if c.scheduler == "flashfq" else ())
    with pytest.raises(ValueError, match="flashfq has no tunable nope"):
        get("flashfq").plan(plan_ctx(["--flashfq-tunables", "nope=1"]))
    with pytest.raises(ValueError, match="'depth' is not name=value"):
        get("flashfq").plan(plan_ctx(["--flashfq-tunables", "depth"]))


def test_jobs_are_one_synchronous_process_per_task_in_disjoint_regions() -> None:
    o = parse_options(ffq.jobfile("/dev/ssdsim0", 256 << 20, ffq.scenario_tasks("c", 16), 32,
                                  10, 1, 2))
    g = o.pop("global")
    assert (g["ioengine"], g["iodepth"], g["direct"], g["filename"]) == \
        ("psync", "1", "1", "/dev/ssdsim0")
    assert list(o) == [f"r4k-{i}" for i in range(16)] + [f"r128k-{i}" for i in range(16)]
    assert {(v["rw"], v["bs"]) for k, v in o.items() if k.startswith("r4k")} == \
        {("randread", "4k")}
    assert {(v["rw"], v["bs"]) for k, v in o.items() if k.startswith("r128k")} == \
        {("randread", "128k")}
    regions = [(int(str(v["offset"]).rstrip("M")), int(str(v["size"]).rstrip("M")))
               for v in o.values()]
    assert regions == [(8 * k, 8) for k in range(32)]
    assert [v["cpus_allowed"] for v in o.values()] == ["0", "1"] * 16
    a = parse_options(ffq.jobfile("/dev/x", 256 << 20, ffq.scenario_tasks("a", 16), 32, 10, 1,
                                  None))
    assert list(a) == ["global", "r4k-0", "w4k-0"]
    assert (a["w4k-0"]["rw"], a["w4k-0"]["offset"]) == ("randwrite", "8M")
    assert "cpus_allowed" not in a["r4k-0"]
    with pytest.raises(ValueError, match="too small"):
        ffq.jobfile("/dev/x", 16 << 20, ffq.scenario_tasks("b", 16), 32, 10, 1, None)
    assert ffq.scenario_title("d", 16) == "(d) 16 4 KiB writers + 16 128 KiB writers"
    assert ffq.scenario_title("a", 16) == "(a) one 4 KiB reader + one 4 KiB writer"


# ---------------------------------------------------------------------------
# slowdowns and percentiles

def synthetic(lat_us: dict[str, float], histogram: bool = True) -> dict[str, Any]:
    text = "[global]\n" + "".join(
        f"[{name}]\nrw={'randwrite' if name.startswith('w') else 'randread'}\n"
        for name in lat_us)
    return fio_json(text, lambda name, _: lat_us[name], histogram)


def test_hist_percentile_is_fios_own_on_real_json_plus() -> None:
    """fixtures/fio-jsonplus.json: fio 3.33 --output-format=json+ of
    fixtures/fio-jsonplus.fio (psync, a 4 KiB reader and a 128 KiB writer
    on a file)."""
    res = fio.parse((FIX / "fio-jsonplus.json").read_text())
    for name in ("r4k-0", "w128k-0"):
        st = fio.job_stats(res, name)
        assert st.clat_bins and sum(st.clat_bins.values()) == st.ios
        for p, v in st.clat_pct_us.items():
            assert fio.hist_percentile(st.clat_bins, p) == v
        assert st.clat_mean_us < st.lat_mean_us
    a, b = (fio.job_stats(res, n).clat_bins for n in ("r4k-0", "w128k-0"))
    merged = fio.merge_bins([a, b])
    assert sum(merged.values()) == sum(a.values()) + sum(b.values())
    with pytest.raises(ValueError, match="empty latency histogram"):
        fio.hist_percentile({}, 99.9)


def test_slowdowns_worst_task_and_class_p999() -> None:
    lat = {**{f"r4k-{i}": 100.0 * (i + 1) for i in range(4)},
           **{f"w4k-{i}": 50.0 for i in range(4)}}
    res = synthetic(lat)
    m = ffq.mix_metrics(res, {"r4k": 50.0, "w4k": 25.0}, 2.0)
    assert m.n == 8
    # fio's lat_ns mean is the fake's clat + 0.5 us
    r = [(100.0 * (i + 1) + 0.5) / 50.0 for i in range(4)]
    assert m.classes["r4k"]["slowdown"] == pytest.approx(statistics.fmean(r))
    assert m.classes["r4k"]["worst"] == pytest.approx(max(r))
    assert m.classes["w4k"]["slowdown"] == pytest.approx(50.5 / 25.0)
    assert m.worst.name == "r4k-3" and m.worst.slowdown == pytest.approx(400.5 / 50)
    # 4000 I/Os of the readers: 999 each at 100..400 us, one each at 10x;
    # the 99.9th percentile (3996 of 4000) is the first 10x bin, 1 ms
    assert m.classes["r4k"]["p999_us"] == pytest.approx(1000.0)
    assert m.classes["r4k"]["ios_per_task"] == 1000 and m.classes["r4k"]["starved"] == 0
    # without histograms (plain json): the largest of the tasks' own p99.9
    m2 = ffq.mix_metrics(synthetic(lat, histogram=False), {"r4k": 50.0, "w4k": 25.0}, 2.0)
    assert m2.classes["r4k"]["p999_us"] == pytest.approx(400 * 1.999, abs=1)


def test_a_task_without_io_counts_with_the_run_time() -> None:
    res = synthetic({"r4k-0": 100.0, "w128k-0": 0.0, "w128k-1": 300.0})
    m = ffq.mix_metrics(res, {"r4k": 100.0, "w128k": 1000.0}, 3.0)
    starved = [t for t in m.tasks if t.starved]
    assert [t.name for t in starved] == ["w128k-0"]
    assert starved[0].slowdown == pytest.approx(3e6 / 1000.0)
    assert m.worst.name == "w128k-0"
    assert m.classes["w128k"]["starved"] == 1
    assert m.classes["w128k"]["p999_us"] == pytest.approx(3000.0)   # from w128k-1 only
    # no baseline for a class: its slowdowns are unknown, not the worst
    m = ffq.mix_metrics(res, {"w128k": 1000.0}, 3.0)
    assert m.worst.cls == "w128k" and ffq.math.isnan(m.classes["r4k"]["slowdown"])


# ---------------------------------------------------------------------------
# a whole run on the simulated device

@pytest.fixture(scope="module")
def ran(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Device, str]]:
    out = tmp_path_factory.mktemp("ffq") / "res"
    t = Device()
    log = run_fake(t, ["run", "flashfq", "--device", "/dev/fake0", "--short", "--seed", "3",
                       "--occupancy", "asis"],  # the fake has no blkdiscard
                   out)
    yield out, t, log


def test_run_restores_the_device_and_records_json_plus(ran: tuple[Path, Device, str]) -> None:
    out, t, log = ran
    m = json.loads((out / "manifest.json").read_text())
    assert m["status"] == "complete" and len(m["runs"]) == 24
    assert {r["scheduler"] for r in m["runs"]} == set(ffq.SCHEDS)
    assert m["params"]["ioengine"] == "psync" and m["params"]["tasks"] == 16
    assert t.current == "mq-deadline" and "flashfq" not in t.scheds
    assert "restored: module flashfq-iosched unloaded" in log
    assert sum("fio --output-format=json+ " in s for s in t.log) == 24
    assert sum("conv=notrunc,fsync" in s for s in t.log) == 24
    assert "mean response time per task: r4k " in log


def test_report_summary_and_plots(ran: tuple[Path, Device, str]) -> None:
    out, _, _ = ran
    text = (out / "report.md").read_text()
    assert "alone under none (the device's own response time)" in text
    assert "| 4 KiB reader | none | 0.101 |" in text
    for scn in "abcd":
        assert f"](plots/flashfq-{scn}.png)" in text and is_png(out / "plots" / f"flashfq-{scn}.png")
    assert "Proportional slowdown: **2** (2 concurrent tasks)" in text
    assert "Proportional slowdown: **32** (32 concurrent tasks)" in text
    s = json.loads((out / "summary.json").read_text())["flashfq"]
    assert s["baseline"] == "none"
    b = s["scenarios"]["b"]
    assert b["proportional"] == 32
    ff, bfq = b["schedulers"]["flashfq"], b["schedulers"]["bfq"]
    assert ff["classes"]["r4k"]["slowdown"]["mean"] == pytest.approx(
        (ALONE_US["r4k"] * 32 * 1.05 + 0.5) / (ALONE_US["r4k"] + 0.5))
    assert ff["within_fair_factor"] is True
    assert b["schedulers"]["none"]["within_fair_factor"] is False    # readers at 3x
    assert ff["worst_task_name"].startswith("w4k")
    assert ff["classes"]["w4k"]["p999_us"]["mean"] == pytest.approx(50 * 32 * 1.1 * 10)
    d = s["scenarios"]["d"]["schedulers"]
    assert d["bfq"]["within_fair_factor"] is False                 # 128 KiB writers at 1.6x
    head = (out / "headline.md").read_text()
    line = [ln for ln in head.splitlines() if ln.startswith("- (b)")][0]
    assert "flashfq keeps every class within 1.5× of it: **yes**" in line
    assert "lowest worst-task slowdown: **flashfq**" in line
    assert "p99.9 flashfq vs bfq: 4 KiB readers 33.60 vs 41.60 ms" in line
    d_line = [ln for ln in head.splitlines() if ln.startswith("- (d)")][0]
    assert "lowest worst-task slowdown: **none**" in d_line


def test_report_rewrite_and_without_bfq(ran: tuple[Path, Device, str], tmp_path: Path) -> None:
    out, _, _ = ran
    folder = tmp_path / "res"
    shutil.copytree(out, folder)
    m = json.loads((folder / "manifest.json").read_text())
    m["runs"] = [r for r in m["runs"] if r["scheduler"] not in ("bfq", "flashfq")]
    (folder / "manifest.json").write_text(json.dumps(m))
    assert main(["report", str(folder)]) == 0
    head = (folder / "headline.md").read_text()
    assert "flashfq not measured" in head
    assert sorted(p.name for p in (folder / "plots").iterdir()) == \
        [f"flashfq-{s}.png" for s in "abcd"]


def test_sfq_delay_bound_is_one_requests_cost_of_every_task() -> None:
    costs = {k: str(v) for k, v in ffq.ssdsim_costs({**SSDSIM, "time_scale": "60"}).items()}
    assert ffq.sfq_bound_us(ffq.scenario_tasks("c", 16), costs) == 16 * 14400 + 16 * 3600
    assert ffq.sfq_bound_us(ffq.scenario_tasks("d", 16), costs) == 16 * 122400 + 16 * 3825
    assert ffq.sfq_bound_us(ffq.scenario_tasks("a", 16), costs) == 3600 + 3825
    del costs["cost_write_128k_ns"]
    assert ffq.sfq_bound_us(ffq.scenario_tasks("d", 16), costs) is None


def test_report_gives_the_delay_bound_at_flashfqs_recorded_costs(
        ran: tuple[Path, Device, str], tmp_path: Path) -> None:
    out, _, _ = ran
    assert "delay bound" not in (out / "report.md").read_text()     # no costs given
    folder = tmp_path / "res"
    shutil.copytree(out, folder)
    m = json.loads((folder / "manifest.json").read_text())
    m["params"]["flashfq_tunables"] = {k: str(v) for k, v in ffq.ssdsim_costs(
        {**SSDSIM, "time_scale": "60"}).items()}
    (folder / "manifest.json").write_text(json.dumps(m))
    assert main(["report", str(folder)]) == 0
    assert "delay bound at flashfq's costs: **2019.6 ms**" in (folder / "report.md").read_text()
    s = json.loads((folder / "summary.json").read_text())["flashfq"]["scenarios"]
    assert s["c"]["sfq_bound_us"] == 288000 and s["a"]["sfq_bound_us"] == 7425
    d_line = [ln for ln in (folder / "headline.md").read_text().splitlines()
              if ln.startswith("- (d)")][0]
    assert "(start-time fair queueing's delay bound 2019.6 ms)" in d_line


def test_demo_runs_the_short_flashfq_suite() -> None:
    from bench import demo
    s = [d for d in demo.DEMO if d.suite == "flashfq"][0]
    assert s.needs_module == "flashfq-iosched" and s.on_device
    ctx = plan_ctx(list(s.args))
    cs = get("flashfq").plan(ctx).configs()
    # the demo's share per kernel: 24 fio runs of 2.5 s
    assert len(cs) == 24 and sum(c.seconds for c in cs) == 60.0


# ---------------------------------------------------------------------------
# costs on ssdsim

#: ssdsim's module parameters at their defaults, time_scale 1
SSDSIM = {"channels": "4", "dies_per_channel": "2", "page_size": "4096", "read_ns": "50000",
          "program_ns": "500000", "xfer_ns": "10000", "time_scale": "1",
          "write_buffer_kb": "256"}


def test_ssdsim_costs_at_its_defaults_are_flashfqs_defaults() -> None:
    main_c = (ROOT / "ssdsim/ssdsim-main.c").read_text()
    for k, v in SSDSIM.items():
        if k != "time_scale":
            m = re.search(rf'MODULE_PARM_DESC\({k},.*?\(default (\d+)\)', main_c)
            assert m and m.group(1) == v, k
    core = (ROOT / "flashfq/flashfq-core.h").read_text()
    c = {f"cost_{m.group(1).lower()}_{m.group(2).lower()}_ns": int(m.group(3)) for m in
         re.finditer(r"#define FFQ_DEFAULT_COST_(READ|WRITE)_(4K|128K)\s+(\d+)U", core)}
    assert len(c) == 4 and ffq.ssdsim_costs(SSDSIM) == c


def test_ssdsim_costs_follow_its_parameters() -> None:
    base = ffq.ssdsim_costs(SSDSIM)
    assert ffq.ssdsim_costs({**SSDSIM, "time_scale": "60"}) == {k: v * 60 for k, v in base.items()}
    # 16 dies: a 128 KiB read is 2 pages per die, a buffered write spreads wider
    wide = ffq.ssdsim_costs({**SSDSIM, "dies_per_channel": "4"})
    assert wide == {"cost_read_4k_ns": 60000, "cost_read_128k_ns": 120000,
                    "cost_write_4k_ns": 31875, "cost_write_128k_ns": 1020000}
    # write-through: a write holds its die like a read, for its program
    wt = ffq.ssdsim_costs({**SSDSIM, "write_buffer_kb": "0"})
    assert wt["cost_write_4k_ns"] == 510000 and wt["cost_write_128k_ns"] == 4 * 510000
    # 16 KiB pages: a 4 KiB request is one page
    big = ffq.ssdsim_costs({**SSDSIM, "page_size": "16384"})
    assert big["cost_read_4k_ns"] == 60000 and big["cost_read_128k_ns"] == 60000
    assert ffq.ssdsim_costs({**SSDSIM, "time_scale": "100000"})["cost_write_128k_ns"] == \
        ffq.COST_RANGE[1]


def test_plan_on_ssdsim_charges_ssdsims_costs_at_its_depth_unless_given() -> None:
    ctx = plan_ctx([])
    ctx.device.kind = "ssdsim"
    ctx.device.module_params = {**SSDSIM, "time_scale": "60"}
    plan = get("flashfq").plan(ctx)
    ffq_cfgs = [c for c in plan.configs() if c.scheduler == "flashfq"]
    assert ffq_cfgs and all(dict(c.tunables) == {
        "cost_read_4k_ns": "3600000", "cost_read_128k_ns": "14400000",
        "cost_write_4k_ns": "3825000", "cost_write_128k_ns": "122400000",
        "depth": "8"} for c in ffq_cfgs)
    assert any("ssdsim's, from its module parameters (time_scale 60" in n for n in plan.notes)
    assert any("depth: ssdsim's 8 dies" in n for n in plan.notes)
    ctx = plan_ctx(["--flashfq-tunables", "cost_read_4k_ns=5 depth=8"])
    ctx.device.kind = "ssdsim"
    ctx.device.module_params = dict(SSDSIM)
    plan = get("flashfq").plan(ctx)
    assert {c.tunables for c in plan.configs() if c.scheduler == "flashfq"} == \
        {(("cost_read_4k_ns", "5"), ("depth", "8"))}


# ---------------------------------------------------------------------------
# calibrate

#: device time per request of each class, us
CAL_US = {"r4k": 3600.0, "r128k": 15000.0, "w4k": 3750.0, "w128k": 2e6}


class CalDevice(FakeTarget):
    """A device that serves one request at a time: N requests in flight
    wait N times as long."""
    def latency_us(self, name: str, opts: dict[str, Any]) -> float:
        assert self.current == "none"
        return CAL_US[ffq.task_class(name)] * int(opts.get("iodepth", 1))


def engines(t: CalDevice) -> set[tuple[str | None, str | None]]:
    """(ioengine, iodepth) of the job files calibrate ran."""
    return {(g["ioengine"], g["iodepth"]) for g in
            (parse_options(t.files[j].decode())["global"] for j in t.files if j.endswith(".fio"))}


def test_calibrate_writes_the_costs_and_leaves_flashfq_selected() -> None:
    t = CalDevice()
    out = io.StringIO()
    back = calibrate(t, "flashfq", "/dev/fake0", None, 3, 0.5, out)
    assert back == {"cost_read_4k_ns": "3600000", "cost_read_128k_ns": "15000000",
                    "cost_write_4k_ns": "3750000", "cost_write_128k_ns": "1000000000"}
    assert t.current == "flashfq" and t.values["cost_write_128k_ns"] == "1000000000"
    assert t.values["depth"] == "16"                           # the rest untouched
    assert "flashfq-iosched" in t.loaded
    # one fio run per point, one request at a time, reads first, each after
    # a flush, under none
    jobs = [j for j in t.files if j.endswith(".fio")]
    assert engines(t) == {("psync", "1")}
    fio_at = [i for i, s in enumerate(t.log) if "fio --output-format" in s]
    assert len(fio_at) == 4 and all("conv=notrunc,fsync" in t.log[i - 1] for i in fio_at)
    assert [sec for j in jobs for sec in parse_options(t.files[j].decode()) if sec != "global"] \
        == ["r4k-0", "r128k-0", "w4k-0", "w128k-0"]
    text = out.getvalue()
    assert "one request at a time (psync" in text
    assert "under none" in text and "cost_read_4k_ns = 3600000" in text
    assert "4 KiB reader    mean completion latency     3600.0 us (1000 I/Os): 3600000 ns" in text
    assert "--flashfq-tunables 'cost_read_4k_ns=3600000 " in text


def test_calibrate_at_a_depth_charges_the_latency_over_it() -> None:
    t = CalDevice()
    out = io.StringIO()
    back = calibrate(t, "flashfq", "/dev/fake0", None, 3, 0.5, out, iodepth=32)
    assert back["cost_read_4k_ns"] == "3600000" and back["cost_write_4k_ns"] == "3750000"
    assert engines(t) == {("io_uring", "32")}
    text = out.getvalue()
    assert "32 requests in flight (io_uring" in text
    assert "4 KiB reader    mean completion latency   115200.0 us (1000 I/Os): 3600000 ns" in text
    with pytest.raises(ValueError, match="--iodepth must be at least 1"):
        calibrate(CalDevice(), "flashfq", "/dev/fake0", None, 3, 0.5, out, iodepth=0)


def test_cost_is_the_latency_over_the_depth_within_the_limits() -> None:
    assert cost_ns(115.2, 32, (1, 10 ** 9)) == 3600
    assert cost_ns(115.2, 1, (1, 10 ** 9)) == 115200
    assert cost_ns(0.0001, 32, (1, 10 ** 9)) == 1
    assert cost_ns(5e6, 1, (1, 10 ** 9)) == 10 ** 9


def test_calibrate_refuses_a_mounted_or_formatted_device() -> None:
    t = CalDevice()
    t.mounts = [("259:0", "/srv/data")]
    with pytest.raises(UnsafeDevice, match="/dev/fake0 is mounted on /srv/data"):
        calibrate(t, "flashfq", "fake0", None, 1, 0)
    assert not t.fio_runs and not t.loaded and t.current == "mq-deadline"
    t = CalDevice()
    t.signature = "ext4"
    with pytest.raises(UnsafeDevice, match="--destroy-data /dev/fake0"):
        calibrate(t, "flashfq", "fake0", None, 1, 0)
    with pytest.raises(UnsafeDevice, match="must be the same device"):
        calibrate(t, "flashfq", "fake0", "/dev/other", 1, 0)
    assert not t.fio_runs
    calibrate(t, "flashfq", "fake0", "/dev/fake0", 1, 0, io.StringIO())   # confirmed
    assert len(t.fio_runs) == 4 and t.current == "flashfq"


def test_a_cost_of_zero_holds_whatever_it_reads_back() -> None:
    """0 asks flashfq to learn the cost, which then reads back the cost in
    force; any other value, and a 0 to another tunable, must read back."""
    t = FakeTarget(scheds={"none": {}, "flashfq": FLASHFQ}, scheduler="flashfq")
    t.sticky |= {"cost_read_4k_ns", "depth"}
    assert set_tunable(t, "fake0", "cost_read_4k_ns", 0) == "60000"
    with pytest.raises(TunableError, match="cost_read_4k_ns=5 did not hold: it reads back 60000"):
        set_tunable(t, "fake0", "cost_read_4k_ns", 5)
    with pytest.raises(TunableError, match="depth=8 did not hold"):
        set_tunable(t, "fake0", "depth", 8)


def test_calibrate_puts_the_device_back_when_a_write_fails() -> None:
    t = CalDevice()
    t.sticky.add("cost_read_128k_ns")
    out = io.StringIO()
    with pytest.raises(TunableError, match="cost_read_128k_ns=15000000 did not hold"):
        calibrate(t, "flashfq", "fake0", None, 1, 0, out)
    assert t.current == "mq-deadline" and "flashfq" not in t.scheds
    assert "restored: /dev/fake0 back to scheduler mq-deadline" in out.getvalue()


def test_calibrate_command_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["calibrate", "flashfq"]) == 1
    assert "calibrate flashfq needs --device" in capsys.readouterr().err
    assert main(["calibrate", "flashfq", "--device", "/dev/nvme9n9"]) == 1
    assert "/dev/nvme9n9: no such block device" in capsys.readouterr().err
    r = subprocess.run([sys.executable, "-m", "bench", "calibrate", "--help"], cwd=ROOT,
                       capture_output=True, text=True)
    assert r.returncode == 0 and "cost_read_4k_ns" in r.stdout and "--destroy-data" in r.stdout
    assert "ssdsim disk's geometry" in r.stdout     # and cars's
    r = subprocess.run([sys.executable, "-m", "bench", "calibrate", "k2", "-d", "x"],
                       cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 2 and "invalid choice" in r.stderr


def test_calibrate_refuses_a_mounted_loop_device(loop: Loop, tmp_path: Path) -> None:
    loop.mkfs()
    loop.mount(tmp_path / "mnt")
    r = subprocess.run([sys.executable, "-m", "bench", "calibrate", "flashfq", "--device",
                        loop.path], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 1, r.stdout + r.stderr
    assert f"refusing to write to {loop.path}" in r.stderr
    assert f"{loop.path} is mounted on {tmp_path / 'mnt'}" in r.stderr
    assert "calibrating" not in r.stdout


# ---------------------------------------------------------------------------
# overhead: flashfq beside fifo-ref and bfq

def test_overhead_plan_measures_flashfq_with_a_depth_and_throttle_that_never_limit() -> None:
    t = FakeTarget(nr_requests=512)
    ctx = context(t, ["run", "overhead", "--short", "--jobs", "2"])
    ctx.sched_info = {s: {"nr_requests": 512} for s in overhead.SCHEDS}
    plan = get("overhead").plan(ctx)
    pairs = [b[0].label("pair") for b in plan.phases[0].blocks]
    assert pairs == ["mq-deadline", "kyber", "bfq", "fifo-ref", "k2", "flashfq", "cars"]
    ff = [c for b in plan.phases[0].blocks for c in b if c.scheduler == "flashfq"]
    assert len(ff) == 2 and all(c.tunables == (("depth", 256), ("throttle_us", 0)) for c in ff)
    # cars: every die it can tell apart, the whole queue, no throttle
    cs = [c for b in plan.phases[0].blocks for c in b if c.scheduler == "cars"]
    assert len(cs) == 2 and all(c.tunables == (("nr_dies", 255), ("depth", 512),
                                               ("throttle_size", 0), ("read_us", 1),
                                               ("write_us", 1), ("erase_us", 1))
                                for c in cs)
    assert "flashfq" in overhead.SCHEDS and "bfq" in overhead.SCHEDS
    assert {s.name for s in get("overhead").schedulers} >= {"flashfq", "bfq", "fifo-ref"}


def test_overhead_report_gives_flashfq_against_fifo_ref_and_bfq(tmp_path: Path) -> None:
    # the fixture's k2 and mq-deadline blocks stand in for flashfq and bfq
    folder = copy("overhead", tmp_path)
    m = json.loads((folder / "manifest.json").read_text())
    rename = {"k2": "flashfq", "mq-deadline": "bfq"}
    for r in m["runs"]:
        for k in ("pair", "sched"):
            r["labels"][k] = rename.get(r["labels"][k], r["labels"][k])
        r["scheduler"] = rename.get(r["scheduler"], r["scheduler"])
    (folder / "manifest.json").write_text(json.dumps(m))
    text = report.write(folder).read_text()
    data = overhead.block_ratios(results.load(folder))[1]
    vs_fifo = statistics.median(overhead.relative(data["flashfq"], data["fifo-ref"]))
    vs_bfq = statistics.median(overhead.relative(data["flashfq"], data["bfq"]))
    line = [ln for ln in text.splitlines() if ln.startswith("- FlashFQ / fifo-ref: ")][0]
    assert f"{vs_fifo:.3f} (" in line
    assert f"goal ≥ 0.90: **{'met' if vs_fifo >= 0.9 else 'not met'}**" in line
    line = [ln for ln in text.splitlines() if ln.startswith("- FlashFQ / bfq: ")][0]
    assert f"{vs_bfq:.3f} (" in line
    assert f"goal > 1.00: **{'met' if vs_bfq > 1 else 'not met'}**" in line
    assert "same boot" in text and "- K2 / " not in text
    s = json.loads((folder / "summary.json").read_text())["overhead"]["1"]
    assert s["flashfq_vs_fifo-ref"]["median"] == pytest.approx(vs_fifo)
    assert s["flashfq_vs_bfq"]["goal_met"] == (vs_bfq > 1)
    assert "- FlashFQ / bfq: " in (folder / "headline.md").read_text()
