"""The runner on a simulated device: order, tunables read back, manifest,
restoring the device after an error or Ctrl-C."""
from __future__ import annotations

import io
import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from bench import device as devmod
from bench import jobs, results
from bench.cli import parse
from bench.device import DeviceInfo, TunableError
from bench.runner import (Cleanups, Config, Manifest, Phase, Plan, Progress, RunContext,
                          apply, execute, order)
from bench.suites import get
from bench.target import LocalTarget, Target, TargetError, host_window
from bench.tests.fake import FakeTarget, Result


def cfg(key: str, sched: str = "none", tun: tuple[tuple[str, Any], ...] = ()) -> Config:
    return Config(key, sched, f"[global]\nrw=randread\n[{key.replace('/', '_')}]\n", 1.0,
                  tunables=tun, labels=(("k", key),))


def dev_info(name: str = "fake0") -> DeviceInfo:
    return DeviceInfo(name=name, path=f"/dev/{name}", given=name, size_bytes=1 << 30,
                      model="Fake SSD", kind="nvme", hw_queues=2, hw_depth=64,
                      logical_block=512, schedulers=["none", "mq-deadline", "k2"],
                      scheduler="mq-deadline")


def context(t: FakeTarget, argv: list[str] | None = None) -> RunContext:
    args = parse(argv or ["run", "k2", "--device", "fake0", "--short"])
    return RunContext(target=t, device=dev_info(t.dev), args=args, cleanups=Cleanups(io.StringIO()),
                      sched_info={"k2": {"nr_requests": t.nr_requests}},
                      params={"runtime": 1.0, "ramp": 0.0, "reps": 1}, out=io.StringIO())


def test_order_is_seeded_complete_and_keeps_blocks() -> None:
    blocks = [[cfg("a")], [cfg("b")], [cfg("x1"), cfg("x2"), cfg("x3")], [cfg("c")]]
    plan = Plan([Phase("p1", blocks), Phase("p2", [[cfg("d")], [cfg("e")]])])
    o1 = order(plan, 3, seed=7)
    assert o1 == order(plan, 3, seed=7)
    assert [k for _, _, b in o1 for k in [c.key for c in b]] != \
        [k for _, _, b in order(plan, 3, seed=8) for k in [c.key for c in b]]
    assert len(o1) == 3 * 4 + 3 * 2
    # phases stay in their order; each (block, rep) exactly once
    names = [ph.name for ph, _, _ in o1]
    assert names == sorted(names)
    seen = sorted((ph.name, rep, b[0].key) for ph, rep, b in o1)
    assert len(set(seen)) == len(seen)
    for _, _, b in o1:
        if b[0].key == "x1":
            assert [c.key for c in b] == ["x1", "x2", "x3"]


def test_progress_estimates_from_plan_then_from_runs() -> None:
    c = cfg("a")
    units = [(Phase("p", [[c]]), 0, [c])] * 4
    p = Progress(units, io.StringIO())
    first = p.left()
    assert first >= 4.0
    p.start("a")
    p.finish(3.0)   # a 1 s configuration took 3 s: the rest should take ~3x
    assert p.left() == pytest.approx(9.0)


def test_apply_writes_and_reads_back_tunables() -> None:
    t = FakeTarget()
    ctx = context(t)
    got = apply(ctx, cfg("k", "k2", (("max_inflight", 8),)))
    assert t.current == "k2" and got == {"max_inflight": "8"}
    # same scheduler again: re-selected, so earlier tunables do not leak
    got = apply(ctx, cfg("k", "k2", (("starvation_ms", 5),)))
    assert t.values["max_inflight"] == "32" and got == {"starvation_ms": "5"}


def test_live_tunables_are_asked_for_at_apply_and_written_first() -> None:
    t = FakeTarget()
    ctx = context(t)
    asked: list[str] = []

    def live(c: RunContext) -> tuple[tuple[str, Any], ...]:
        asked.append(t.current)           # before the scheduler is selected
        return (("max_inflight", 4), ("starvation_ms", 7))
    c = Config("k", "k2", cfg("k").jobfile, 1.0, tunables=(("max_inflight", 16),),
               live_tunables=live)
    assert not asked                      # not at plan time
    got = apply(ctx, c)
    assert asked == ["mq-deadline"] and t.current == "k2"
    # written in order, live first: a fixed tunable overrides a live one
    assert got == {"max_inflight": "16", "starvation_ms": "7"}
    assert t.values == {"max_inflight": "16", "starvation_ms": "7"}
    # live tunables alone also re-select the elevator (its defaults first)
    t.values["max_inflight"] = "2"
    got = apply(ctx, Config("k", "k2", c.jobfile, 1.0,
                            live_tunables=lambda c: (("starvation_ms", 9),)))
    assert got == {"starvation_ms": "9"} and t.values["max_inflight"] == "32"


def test_tunable_out_of_range_or_not_holding_is_an_error() -> None:
    t = FakeTarget()
    ctx = context(t)
    with pytest.raises(TunableError, match="writing 99 to max_inflight failed"):
        apply(ctx, cfg("k", "k2", (("max_inflight", 99),)))
    t.sticky.add("max_inflight")
    with pytest.raises(TunableError, match="max_inflight=8 did not hold: it reads back 32"):
        apply(ctx, cfg("k", "k2", (("max_inflight", 8),)))
    with pytest.raises(TunableError, match="has no tunable 'nope'"):
        apply(ctx, cfg("k", "k2", (("nope", 1),)))


def test_unknown_scheduler_says_which_exist() -> None:
    t = FakeTarget()
    with pytest.raises(TunableError, match="not registered.*available: none mq-deadline k2"):
        devmod.set_scheduler(t, "fake0", "flashfq")


def _execute(t: FakeTarget, tmp_path: Path, plan: Plan,
             reps: int = 2) -> tuple[RunContext, Manifest]:
    ctx = context(t)
    saved = devmod.save_state(t, "fake0")
    ctx.on_exit("restore", lambda: devmod.restore_state(t, saved) and None)
    m = Manifest(tmp_path, {"format": 1, "suite": "k2", "runs": [], "phases": {},
                            "params": {}})
    try:
        execute(ctx, plan, tmp_path, m, reps, seed=3)
    finally:
        m.data["restored"] = ctx.cleanups.run()
        m.save()
    return ctx, m


def test_execute_records_every_run_and_restores(tmp_path: Path) -> None:
    t = FakeTarget()
    t.values["read_expire"] = "250"   # a non-default tunable of the original scheduler
    plan = Plan([Phase("empty", [[cfg("n")], [cfg("k8", "k2", (("max_inflight", 8),))]])])
    _, m = _execute(t, tmp_path, plan)
    data = json.loads((tmp_path / "manifest.json").read_text())
    assert data["status"] == "complete"
    assert len(data["runs"]) == 4
    assert sorted(r["key"] for r in data["runs"]) == ["k8", "k8", "n", "n"]
    for r in data["runs"]:
        assert (tmp_path / r["job"]).read_text().startswith("[global]")
        assert json.loads((tmp_path / r["json"]).read_text())["jobs"]
        assert (tmp_path / r["log"]).read_text() == "fio: a notice"
        assert r["tunables"] == ({"max_inflight": "8"} if r["key"] == "k8" else {})
    assert ("k2", {"max_inflight": "8", "starvation_ms": "0"}) in t.fio_runs
    assert t.current == "mq-deadline" and t.values["read_expire"] == "250"
    assert data["restored"] == ["restore"]


def test_a_run_records_what_the_host_gave_the_vm(tmp_path: Path) -> None:
    """A target that reports host times (the VM bed) gets each run's
    window in its record: the difference of the samples around fio; one
    that does not (a real box) gets none."""
    class HostTarget(FakeTarget):
        def __init__(self) -> None:
            super().__init__()
            self.n = 0

        def host_times(self) -> dict[str, Any] | None:
            self.n += 1
            return {"clock": 10.0 * self.n, "qemu": 15.0 * self.n,
                    "vcpus": {"CPU 0/TCG": 6.0 * self.n, "CPU 1/TCG": 7.0 * self.n},
                    "steal": 0.5 * self.n}

    plan = Plan([Phase("empty", [[cfg("n")]])])
    _execute(HostTarget(), tmp_path, plan)
    runs = json.loads((tmp_path / "manifest.json").read_text())["runs"]
    assert [r["host"] for r in runs] == [
        {"seconds": 10.0, "qemu_s": 15.0, "vcpu_s": 13.0, "steal_s": 0.5}] * 2
    (tmp_path / "real").mkdir()
    _execute(FakeTarget(), tmp_path / "real", plan)
    runs = json.loads((tmp_path / "real" / "manifest.json").read_text())["runs"]
    assert runs and all("host" not in r for r in runs)


def test_host_window_needs_both_samples_and_counts_new_threads() -> None:
    a = {"clock": 1.0, "qemu": 2.0, "vcpus": {"CPU 0/TCG": 1.0}, "steal": 0.0}
    b = {"clock": 3.0, "qemu": 5.5, "vcpus": {"CPU 0/TCG": 2.0, "CPU 1/TCG": 0.5},
         "steal": 0.25}
    assert host_window(a, b) == {"seconds": 2.0, "qemu_s": 3.5, "vcpu_s": 1.5,
                                 "steal_s": 0.25}
    assert host_window(None, b) is None and host_window(a, None) is None


def test_ctrl_c_restores_scheduler_and_tunables(tmp_path: Path) -> None:
    t = FakeTarget()
    t.values["fifo_batch"] = "4"
    calls = []

    def interrupt(tt: FakeTarget) -> None:
        calls.append(tt.current)
        if len(calls) == 2:
            raise KeyboardInterrupt
    t.on_fio = interrupt
    plan = Plan([Phase("empty", [[cfg("n")], [cfg("k1", "k2", (("max_inflight", 1),))]])])
    with pytest.raises(KeyboardInterrupt):
        _execute(t, tmp_path, plan)
    data = json.loads((tmp_path / "manifest.json").read_text())
    assert data["status"] == "interrupted"
    assert t.current == "mq-deadline" and t.values["fifo_batch"] == "4"
    assert data["restored"] == ["restore"]
    # the completed run is still readable
    assert len(results.load(tmp_path).runs) == 1


def test_k2_plan_clamps_bounds_and_pins(tmp_path: Path) -> None:
    t = FakeTarget(nr_requests=16)
    ctx = context(t, ["run", "k2", "--device", "fake0", "--short", "--bounds", "1,8,32,64",
                      "--ops", "randread,write", "--occupancy", "asis",
                      "--tag-pressure", "off"])
    plan = get("k2").plan(ctx)
    keys = [c.key for c in plan.configs()]
    assert keys == ["asis/randread/none", "asis/randread/k2-1", "asis/randread/k2-8",
                    "asis/randread/k2-16", "asis/write/none", "asis/write/k2-1",
                    "asis/write/k2-8", "asis/write/k2-16"]
    assert any("max_inflight 32 clamped to 16" in n for n in plan.notes)
    assert any("max_inflight 64 clamped to 16" in n for n in plan.notes)
    c = plan.configs()[2]
    assert c.tunables == (("max_inflight", 8),) and c.label("bound") == 8
    assert "cpus_allowed=1" in c.jobfile and "cpus_allowed=0" in c.jobfile

    # one phase per operation type, each prepared afresh and settled per run
    assert [ph.name for ph in plan.phases] == ["asis/randread", "asis/write"]
    assert all(ph.settle is not None for ph in plan.phases)


def test_k2_plan_empties_the_device_before_each_write_run() -> None:
    """On an empty device, every write run starts from an emptied device
    again (the runs before would otherwise fill it and start its garbage
    collection); reads and a full device only flush."""
    from bench import prep
    t = FakeTarget(nr_requests=16)
    ctx = context(t, ["run", "k2", "--device", "fake0", "--short", "--bounds", "1,8",
                      "--ops", "randread,randwrite,write", "--occupancy", "empty,full",
                      "--full-ops", "randwrite", "--tag-pressure", "off"])
    plan = get("k2").plan(ctx)
    settle = {ph.name: ph.settle for ph in plan.phases}
    assert settle == {"empty/randread": prep.settle, "empty/randwrite": prep.empty_again,
                      "empty/write": prep.empty_again, "full/randwrite": prep.settle}
    assert "emptied again before each run" in plan.phases[1].describe


def test_k2_plan_tag_pressure(tmp_path: Path) -> None:
    """The tag-pressure workload: after the bound sweep, one phase per
    operation type with the light load at the pressure bound, then 4 jobs at
    iodepth nr_requests under none, k2 with rt_tags=0 and k2 at its default
    reserve, every job on CPU 0 (one hardware queue's tags)."""
    t = FakeTarget(nr_requests=64)
    ctx = context(t, ["run", "k2", "--device", "fake0", "--short", "--bounds", "1,8",
                      "--ops", "randread", "--occupancy", "empty,full"])
    plan = get("k2").plan(ctx)
    assert [ph.name for ph in plan.phases] == ["empty/randread", "full/randread",
                                               "pressure/randread"]
    pressure = plan.phases[-1]
    keys = [c.key for b in pressure.blocks for c in b]
    assert keys == ["pressure/randread/light/k2-1-rt_tags-default",
                    "pressure/randread/flood/none",
                    "pressure/randread/flood/k2-1-rt_tags-0",
                    "pressure/randread/flood/k2-1-rt_tags-default"]
    light, none, off, on = (c for b in pressure.blocks for c in b)
    assert light.tunables == on.tunables == (("max_inflight", 1),)
    assert off.tunables == (("max_inflight", 1), ("rt_tags", 0))
    assert none.scheduler == "none" and none.tunables == ()
    o = jobs.parse_options(on.jobfile)
    assert [n for n in o if n.startswith("be")] == ["be1", "be2", "be3", "be4"]
    assert o["be1"]["iodepth"] == "64" and o["rt"]["prioclass"] == "1"
    assert jobs.parse_options(light.jobfile)["be1"]["iodepth"] == "32"
    assert all(v.get("cpus_allowed") == "0" for v in o.values() if "iodepth" in v)
    # the sweep's runs are not mixed with the pressure runs'
    assert all("pressure" not in dict(c.labels) for ph in plan.phases[:-1]
               for b in ph.blocks for c in b)
    assert plan.params["pressure_iodepth"] == 64

    ctx = context(t, ["run", "k2", "--device", "fake0", "--short", "--tag-pressure",
                      "randread,write", "--pressure-iodepth", "100", "--pressure-bound", "99",
                      "--occupancy", "asis", "--ops", "read", "--bounds", "1", "--no-pin"])
    plan = get("k2").plan(ctx)
    assert [ph.name for ph in plan.phases] == ["asis/read", "pressure/randread",
                                               "pressure/write"]
    assert plan.phases[1].setup is None
    c = plan.phases[1].blocks[-1][0]
    assert c.tunables == (("max_inflight", 64),) and "iodepth=100" in c.jobfile
    assert "cpus_allowed" not in c.jobfile
    assert any("max_inflight 99 clamped to 64" in n for n in plan.notes)


def test_settle_runs_before_every_configuration(tmp_path: Path) -> None:
    t = FakeTarget()
    seen: list[int] = []

    def settle(ctx: RunContext) -> None:
        seen.append(len(t.fio_runs))
    plan = Plan([Phase("p", [[cfg("a")], [cfg("b")]], settle=settle)])
    _execute(t, tmp_path, plan, reps=2)
    assert seen == [0, 1, 2, 3]


def test_overhead_plan_is_none_x_x_none_blocks() -> None:
    t = FakeTarget(nr_requests=256)
    ctx = context(t, ["run", "overhead", "--short", "--jobs", "1,2",
                      "--schedulers", "mq-deadline,k2"])
    ctx.sched_info = {"mq-deadline": {"nr_requests": 256}, "k2": {"nr_requests": 256}}
    plan = get("overhead").plan(ctx)
    blocks = plan.phases[0].blocks
    assert len(blocks) == 4
    for b in blocks:
        x = b[0].label("pair")
        assert [c.scheduler for c in b] == ["none", x, x, "none"]
        assert len({c.key for c in b}) == 4
    k2 = [c for b in blocks for c in b if c.scheduler == "k2"]
    assert k2 and all(c.tunables == (("max_inflight", 256),) for c in k2)
    two = [c for b in blocks for c in b if c.label("jobs") == 2][0]
    assert "[j0]" in two.jobfile and "[j1]" in two.jobfile


def test_overhead_reference_takes_none_s_place_in_every_block() -> None:
    """--reference fifo-ref: blocks fifo-ref/X/X/fifo-ref, fifo-ref not
    measured as an X, the reference in the plan's parameters; an
    elevator the device does not have is refused."""
    t = FakeTarget(nr_requests=256)
    ctx = context(t, ["run", "overhead", "--short", "--jobs", "2",
                      "--schedulers", "fifo-ref,k2", "--reference", "fifo-ref"])
    ctx.sched_info = {"fifo-ref": {"nr_requests": 256}, "k2": {"nr_requests": 256}}
    plan = get("overhead").plan(ctx)
    blocks = plan.phases[0].blocks
    assert [[c.scheduler for c in b] for b in blocks] == [["fifo-ref", "k2", "k2", "fifo-ref"]]
    assert [c.label("sched") for c in blocks[0]] == ["fifo-ref", "k2", "k2", "fifo-ref"]
    assert blocks[0][0].tunables == () and plan.params["reference"] == "fifo-ref"
    bad = context(t, ["run", "overhead", "--short", "--schedulers", "k2",
                      "--reference", "fifo-ref"])
    bad.sched_info = {"k2": {"nr_requests": 256}}
    with pytest.raises(ValueError, match="--reference fifo-ref"):
        get("overhead").plan(bad)


def test_overhead_count_is_kept_in_the_plan_s_parameters(tmp_path: Path) -> None:
    """--count DIR, an overhead run on the instruction-counting clock with
    the same reference and kernel: its ratios go into the plan's
    parameters (the manifest's), so that the report stands alone; refused
    with --icount, and for a run on another kernel, before any run."""
    src = Path(__file__).parent / "fixtures" / "overhead"
    count = tmp_path / "overhead-count"
    shutil.copytree(src, count)
    m = json.loads((count / "manifest.json").read_text())
    m["params"]["icount"] = 3
    m["target"]["kernel"] = FakeTarget().describe()["kernel"]
    (count / "manifest.json").write_text(json.dumps(m))
    t = FakeTarget(nr_requests=256)
    argv = ["run", "overhead", "--short", "--jobs", "1", "--schedulers", "k2",
            "--count", str(count)]
    ctx = context(t, argv)
    ctx.sched_info = {"k2": {"nr_requests": 256}}
    plan = get("overhead").plan(ctx)
    c = plan.params["count"]
    assert c["from"] == "overhead-count" and c["icount"] == 3
    assert set(c["ratios"]["1"]) == {"mq-deadline", "fifo-ref", "k2"}
    bad = context(t, argv + ["--icount", "3"])
    bad.sched_info = ctx.sched_info
    with pytest.raises(ValueError, match="not with --icount"):
        get("overhead").plan(bad)
    m["target"]["kernel"] = "6.12.118+deb12-cloud-amd64"
    (count / "manifest.json").write_text(json.dumps(m))
    with pytest.raises(ValueError, match="measured on kernel 6.12.118"):
        get("overhead").plan(ctx)


def test_overhead_k2_adaptive_block_is_real_time() -> None:
    """--k2-target-us adds a k2-adaptive block: k2 with the bound and the
    target, and every job of its block real-time, none's runs too; the
    other blocks stay best effort.  Without k2 it is an error."""
    t = FakeTarget(nr_requests=256)
    ctx = context(t, ["run", "overhead", "--short", "--jobs", "2", "--schedulers",
                      "fifo-ref,k2", "--k2-target-us", "5000"])
    ctx.sched_info = {"fifo-ref": {"nr_requests": 256}, "k2": {"nr_requests": 256}}
    plan = get("overhead").plan(ctx)
    blocks = {b[0].label("pair"): b for b in plan.phases[0].blocks}
    assert set(blocks) == {"fifo-ref", "k2", "k2-adaptive"}
    ad = blocks["k2-adaptive"]
    assert [c.scheduler for c in ad] == ["none", "k2", "k2", "none"]
    assert ad[1].tunables == (("max_inflight", 256), ("target_latency_us", 5000))
    for c in ad:
        o = jobs.parse_options(c.jobfile)
        assert o["j0"]["prioclass"] == "1" and o["j1"]["prioclass"] == "1"
    assert "prioclass" not in blocks["k2"][1].jobfile
    assert plan.params["k2_target_us"] == 5000
    with pytest.raises(ValueError, match="needs k2"):
        bad = context(t, ["run", "overhead", "--short", "--schedulers", "fifo-ref",
                          "--k2-target-us", "5000"])
        bad.sched_info = {"fifo-ref": {"nr_requests": 256}}
        get("overhead").plan(bad)


def test_overhead_asks_for_a_multi_threaded_vm_unless_traced(
        capsys: pytest.CaptureFixture[str]) -> None:
    """The overhead suite's VM runs a host thread per vCPU (2 jobs at once);
    with --traced the bed's choice (trace events patch kernel text); with
    --icount one vCPU on an instruction-counting clock; the k2 suite with
    --icount the bed's vCPUs on one; otherwise the bed's choice."""
    ov = get("overhead")
    assert ov.vm_config(parse(["run", "overhead", "--vm"])) == {"tcg_thread": "multi"}
    assert ov.vm_config(parse(["run", "overhead", "--vm", "--traced"])) == {}
    assert ov.vm_config(parse(["run", "overhead", "--vm", "--icount", "2"])) == {
        "icount": 2, "smp": 1}
    with pytest.raises(SystemExit) as e:
        parse(["run", "overhead", "--vm", "--icount", "11"])
    assert e.value.code == 2
    assert "argument --icount: invalid choice: 11" in capsys.readouterr().err
    assert get("k2").vm_config(parse(["run", "k2", "--vm"])) == {}
    assert get("k2").vm_config(parse(["run", "k2", "--vm", "--icount", "3"])) == {"icount": 3}
    assert get("flashfq").vm_config(parse(["run", "flashfq", "--vm"])) == {}
    assert get("flashfq").vm_config(parse(["run", "flashfq", "--vm", "--icount", "3"])) == {
        "icount": 3}
    assert get("cars").vm_config(parse(["run", "cars", "--vm", "--icount", "2"])) == {
        "icount": 2}


class LocalFake(FakeTarget):
    @property
    def is_local(self) -> bool:
        return True


def test_overhead_icount_only_in_the_vm() -> None:
    """--icount on this machine is refused (its clock is its own); in the
    VM the plan notes what a run's length is in instructions."""
    argv = ["run", "overhead", "--short", "--allow-null-blk", "--icount", "2",
            "--schedulers", "k2"]
    with pytest.raises(ValueError, match="--icount is for the VM"):
        get("overhead").plan(context(LocalFake(nr_requests=256), argv))
    plan = get("overhead").plan(context(FakeTarget(nr_requests=256), argv))
    # 1 s (context()'s runtime) at 4 ns an instruction
    assert any("icount shift 2" in n and "2.5e+08" in n for n in plan.notes), plan.notes
    # the k2 suite's the same way (the shared add_icount_argument/icount_note)
    argv = ["run", "k2", "--device", "fake0", "--short", "--bounds", "1", "--ops", "randread",
            "--occupancy", "asis", "--tag-pressure", "off", "--icount", "3"]
    with pytest.raises(ValueError, match="--icount is for the VM"):
        get("k2").plan(context(LocalFake(nr_requests=64), argv))
    plan = get("k2").plan(context(FakeTarget(nr_requests=64), argv))
    assert any("icount shift 3" in n and "1.25e+08" in n for n in plan.notes), plan.notes
    assert plan.params["icount"] == 3
    # and the flashfq suite's
    argv = ["run", "flashfq", "--device", "fake0", "--short", "--scenarios", "a",
            "--icount", "3"]
    with pytest.raises(ValueError, match="--icount is for the VM"):
        get("flashfq").plan(context(LocalFake(nr_requests=64), argv))
    plan = get("flashfq").plan(context(FakeTarget(nr_requests=64), argv))
    assert any("icount shift 3" in n for n in plan.notes), plan.notes
    assert plan.params["icount"] == 3


def test_every_suite_help_renders(capsys: pytest.CaptureFixture[str]) -> None:
    """A suite's description goes through argparse's %-formatting (the cars
    suite's "50% reads" once printed the parser's internals)."""
    with pytest.raises(SystemExit) as e:
        parse(["run", "--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    assert "50% reads" in " ".join(out.split())
    assert "option_strings" not in out


def test_every_suite_module_is_listed() -> None:
    """all_suites() names its suites' modules (no discovery by importlib):
    each module of bench/suites/ that defines SUITE is among them."""
    from bench.suites import all_suites
    folder = Path(__file__).resolve().parent.parent / "suites"
    defining = {f.stem for f in folder.glob("*.py")
                if re.search(r"^SUITE\b.*=", f.read_text(), re.M)}
    listed = {type(s).__module__.removeprefix("bench.suites.") for s in all_suites().values()}
    assert defining and listed == defining


def test_k2_plan_adaptive_rows_and_changing_load(tmp_path: Path) -> None:
    """--targets-us adds a k2 row per target (max_inflight the largest
    bound, then the target) to each sweep; --changing-load adds a phase with
    every fixed bound and the first target, whose jobs change halfway."""
    t = FakeTarget(nr_requests=64)
    ctx = context(t, ["run", "k2", "--device", "fake0", "--short", "--bounds", "1,8",
                      "--ops", "randread", "--occupancy", "asis", "--tag-pressure", "off",
                      "--targets-us", "5000,20000", "--changing-load", "randread",
                      "--changing-be-jobs", "2"])
    plan = get("k2").plan(ctx)
    assert [ph.name for ph in plan.phases] == ["asis/randread", "changing/randread"]
    keys = [c.key for b in plan.phases[0].blocks for c in b]
    assert keys == ["asis/randread/none", "asis/randread/k2-1", "asis/randread/k2-8",
                    "asis/randread/k2-adaptive-5000", "asis/randread/k2-adaptive-20000"]
    ad = plan.phases[0].blocks[3][0]
    assert ad.scheduler == "k2"
    assert ad.tunables == (("max_inflight", 8), ("target_latency_us", 5000))
    assert ad.label("target_us") == 5000 and ad.label("bound") == "adaptive"
    ch = [c for b in plan.phases[1].blocks for c in b]
    assert [c.key for c in ch] == ["changing/randread/k2-1", "changing/randread/k2-8",
                                   "changing/randread/adaptive-5000"]
    assert ch[-1].tunables == (("max_inflight", 8), ("target_latency_us", 5000))
    # each from an emptied device: the runs before would have filled it
    from bench import prep
    assert plan.phases[1].settle is prep.empty_again
    assert "emptied again before each run" in plan.phases[1].describe
    # the changing-load runs and the adaptive rows, and only they, record
    # k2's events and keep them (the block layer's RT tail: traced_rt_p999())
    assert all(c.record_events == ("k2",) and c.keep_trace for c in ch)
    sweep = [c for b in plan.phases[0].blocks for c in b]
    assert [c.key for c in sweep if c.record_events == ("k2",) and c.keep_trace] == keys[3:]
    assert not any(c.record_events or c.keep_trace for c in sweep[:3])
    o = jobs.parse_options(ch[0].jobfile)
    assert list(o)[1:] == ["rt1", "be1-1", "rt2", "be2-1", "be2-2"]
    # each half runs for the suite's run time; the second starts after the first
    assert o["global"]["runtime"] == "1s"
    assert "startdelay" not in o["rt1"] and o["rt2"]["startdelay"] == "1s"
    assert o["rt2"]["prioclass"] == "1" and o["be2-2"]["prioclass"] == "2"
    # the second half's best effort writes (--changing-be-op's default); RT still reads
    assert o["be2-1"]["rw"] == "randwrite" and o["be2-2"]["startdelay"] == "1s"
    assert "rw" not in o["rt2"] and "rw" not in o["be1-1"] and o["global"]["rw"] == "randread"
    assert [o[n].get("cpus_allowed") for n in ("rt1", "be1-1", "rt2", "be2-1", "be2-2")] == \
        ["0", "1", "0", "1", "0"]
    assert plan.params["targets_us"] == [5000, 20000]

    with pytest.raises(ValueError, match="needs --targets-us"):
        get("k2").plan(context(t, ["run", "k2", "--device", "fake0", "--short",
                                   "--changing-load", "randread"]))


def test_demo_runs_the_overhead_suite_on_its_own_vm() -> None:
    """The demo boots a VM per suite configuration (Suite.vm_config()): the
    overhead suite on an instruction-counting clock with one vCPU, every
    other suite on the bed's default VM."""
    from bench import demo
    cfgs = {s.suite: demo._vm_config(s) for s in demo.DEMO}
    assert cfgs.pop("overhead") == {"icount": 3, "smp": 1}
    assert cfgs and all(c == {} for c in cfgs.values())


def test_demo_reloads_ssdsim_for_a_suite_that_asks_and_puts_it_back(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A demo suite with its own ssdsim parameters (kyber-grid: time_scale
    20) runs, with its follow-up steps, on ssdsim reloaded with them, and
    ssdsim is reloaded as it was afterwards, also when the suite fails; on
    another device nothing is reloaded, nor on a VM that stopped answering."""
    from bench import demo
    s = next(x for x in demo.DEMO if x.suite == "kyber-grid")
    assert dict(s.ssdsim) == {"time_scale": "20"}
    calls: list[Any] = []

    class T:
        answering = True

    orig = {"time_scale": "60", "fill_percent": "0"}
    monkeypatch.setattr(demo.prep.devmod, "module_params", lambda t, m: dict(orig))
    monkeypatch.setattr(demo.prep, "load_ssdsim_again",
                        lambda t, dev, p: calls.append(("load", dev, p)) or p)

    def ran(fail: bool) -> Any:
        def run(*a: Any) -> bool:
            calls.append(("run", a[1].suite))
            if fail:
                raise RuntimeError("suite failed")
            return True
        return run

    monkeypatch.setattr(demo, "_run_loaded", ran(False))
    d = demo.Done("k", "ssdsim0", "")
    assert demo._run_one(T(), s, "k", "ssdsim0", Path("/nonexistent"), 1, d)  # type: ignore[arg-type]
    assert calls == [("load", "ssdsim0", {"time_scale": "20", "fill_percent": "0"}),
                     ("run", "kyber-grid"), ("load", "ssdsim0", orig)]
    calls.clear()
    monkeypatch.setattr(demo, "_run_loaded", ran(True))
    with pytest.raises(RuntimeError, match="suite failed"):
        demo._run_one(T(), s, "k", "ssdsim0", Path("/nonexistent"), 1, d)  # type: ignore[arg-type]
    assert calls[-1] == ("load", "ssdsim0", orig)
    calls.clear()
    monkeypatch.setattr(demo, "_run_loaded", ran(False))
    demo._run_one(T(), s, "k", "vm-throttled", Path("/nonexistent"), 1, d)  # type: ignore[arg-type]
    assert calls == [("run", "kyber-grid")]
    calls.clear()
    gone = T()
    gone.answering = False
    assert demo._run_one(gone, s, "k", "ssdsim0", Path("/nonexistent"), 1, d)  # type: ignore[arg-type]
    assert calls == [("load", "ssdsim0", {"time_scale": "20", "fill_percent": "0"}),
                     ("run", "kyber-grid")]


class Uptime(FakeTarget):
    """The base class's clock and sleep, through the target's shell."""

    def __init__(self, uptime: str) -> None:
        super().__init__()
        self.uptime = uptime

    def clock(self) -> float:
        return Target.clock(self)

    def sleep(self, seconds: float) -> None:
        Target.sleep(self, seconds)

    def run(self, script: str, timeout: float = 300.0) -> Result:
        self.log.append(script)
        if script == "cut -d' ' -f1 /proc/uptime":
            return Result(0, self.uptime)
        if script.startswith("sleep "):
            return Result(0, "")
        return Result(127, "unknown")


def test_a_targets_clock_is_its_own() -> None:
    """A VM's clock is the guest's (/proc/uptime; with --icount it counts
    instructions) and its sleep waits in the guest; this machine's are
    the host's."""
    t = Uptime("1234.56\n")
    assert t.clock() == 1234.56
    t.sleep(0.25)
    assert t.log[-1] == "sleep 0.25"
    with pytest.raises(TargetError, match="uptime"):
        Uptime("garbage\n").clock()
    local = LocalTarget()
    a = local.clock()
    local.sleep(0.01)
    assert local.clock() - a >= 0.01
