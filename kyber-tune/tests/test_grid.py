"""kyber-tune's grid, dead space, recommendation and command line without a
kernel: the runner's simulated target with a Kyber whose latencies follow
its targets."""
from __future__ import annotations

import argparse
import json
import math
import re
from pathlib import Path
from typing import Any

import pytest

from bench import results as resmod
from bench.jobs import parse_options
from bench.tests.fake import FakeTarget, Result, Validator, run_fake
from bench.suites import kyber_dead as dead
from bench.suites import kyber_grid as grid
from bench.tests.test_report import is_png
from kybertune.cli import compare, main, ssdsim_params, verify_argv, vm_icount
from kybertune.recommend import Objective, recommend


def _ns(v: str) -> bool:
    return v.isdigit() and int(v) > 0


KYBER: dict[str, tuple[str, Validator]] = {"read_lat_nsec": ("2000000", _ns),
                                           "write_lat_nsec": ("10000000", _ns)}


class KyberTarget(FakeTarget):
    """A device with kyber as a module.  Reads take longer the more depth
    Kyber gives the writer, i.e. the lower the write target, down to 1 ms
    of write target; above it nothing changes (a dead region).  Writes are
    the reverse.  The read target does not matter."""

    def __init__(self, dev: str = "fake0", params: dict[str, str] | None = None) -> None:
        super().__init__(dev=dev, scheduler="none")
        self.loadable["kyber-iosched"] = ("kyber", KYBER)
        self.params = params or {}
        self.scripts: list[str] = []
        self.loads: list[dict[str, str]] = []

    def latency_us(self, name: str, opts: dict[str, Any]) -> float:
        w_ms = int(self.values["write_lat_nsec"]) / 1e6 / int(self.params.get("time_scale", 1))
        slow = 1 + 3 * (1 - min(w_ms, 1.0))       # 4x at a write target near 0, 1x from 1 ms
        return 100.0 * slow if name == "R" else 400.0 / slow

    def run(self, script: str, timeout: float = 300.0) -> Result:
        s = script.strip()
        self.scripts.append(s)
        if s.startswith("cd /sys/module/ssdsim/parameters"):
            return Result(0, "".join(f"{k}={v}\n" for k, v in self.params.items()))
        if "mkfs." in s or s.startswith("! awk") or "/proc/filesystems" in s:
            return Result(0, "")
        if s == "modprobe -r ssdsim 2>&1 || rmmod ssdsim":
            return Result(0, "")
        if s.startswith("modprobe ssdsim "):
            self.params = dict(kv.split("=", 1) for kv in s.split()[2:])
            self.loads.append(dict(self.params))
            return Result(0, "")
        if s.startswith("[ -b /dev/ssdsim0 ]"):
            return Result(0, "")
        return super().run(script, timeout)


def test_axis_log_spaced_lists_and_errors() -> None:
    assert grid.axis("100:100000:4") == [100.0, 1000.0, 10000.0, 100000.0]
    assert grid.axis("50:5000:5") == [50.0, 158.0, 500.0, 1580.0, 5000.0]
    assert grid.axis("7:7:1") == [7.0]
    assert grid.axis("250, 1000,4000") == [250.0, 1000.0, 4000.0]
    for bad in ("0:10:3", "10:1:3", "1:10:0", "1:10", "a,b", "1:10:1"):
        with pytest.raises(ValueError, match=f"^--read-us: '{bad}' is neither LO:HI:N"):
            grid.axis(bad, "--read-us")
    for bad in ("", "5,5", "9,3", "-1,2"):
        with pytest.raises(ValueError,
                           match=f"^--read-us: '{bad}': give increasing positive values in us"):
            grid.axis(bad, "--read-us")


def test_indistinguishable_by_welch_or_the_floor() -> None:
    same = [100.0, 104.0, 96.0, 101.0]
    assert dead.indistinguishable(same, [103.0, 99.0, 97.0, 102.0])
    # 20% apart with a spread of 1%: different
    assert not dead.indistinguishable(same, [120.0, 121.0, 119.0, 120.5])
    # 20% apart, but the spread is as large: the t-test cannot tell
    assert dead.indistinguishable([80.0, 120.0, 100.0], [100.0, 140.0, 120.0])
    # one repetition: the 5% floor alone
    assert dead.indistinguishable([100.0], [104.0])
    assert not dead.indistinguishable([100.0], [106.0])
    assert not dead.indistinguishable([100.0, 100.0], [110.0, 110.0])   # no spread at all
    assert dead.indistinguishable([100.0], [])
    assert dead.t_critical(1) == 12.706 and dead.t_critical(2.9) == 4.303
    assert dead.t_critical(1000) == 1.980 and dead.t_critical(0.5) == math.inf


def test_dead_points_need_every_neighbour_and_metric() -> None:
    # 3 x 3: a metric that changes along j up to j = 1, flat from there
    s = {(i, j): {"a": [10.0 * min(j, 1) + 5], "b": [7.0]} for i in range(3) for j in range(3)}
    assert dead.dead_points(s) == {(0, 2), (1, 2), (2, 2)}
    s[(1, 2)]["b"] = [9.0]          # one metric of one point moves: it and its neighbours live
    assert dead.dead_points(s) == set()
    assert dead.dead_points({(0, 0): {"a": [1.0]}}) == set()


@pytest.fixture(scope="module")
def grid_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, KyberTarget, str]:
    t = KyberTarget()
    out = tmp_path_factory.mktemp("kg") / "g"
    log = run_fake(t, ["run", "kyber-grid", "--device", "fake0", "--short", "--seed", "3",
                       "--read-us", "100:1000:2", "--write-us", "100:10000:3",
                       "--workloads", "R1+W256,R256+W1"], out)
    return out, t, log


def test_every_point_reloads_kyber_and_reads_its_targets_back(
        grid_run: tuple[Path, KyberTarget, str]) -> None:
    out, t, log = grid_run
    m = json.loads((out / "manifest.json").read_text())
    assert m["status"] == "complete" and m["params"]["seed"] == 3
    runs = m["runs"]
    # 2 workloads x (2 x 3 points + the defaults) x 2 repetitions (--short)
    assert len(runs) == 2 * 7 * 2
    keys = [r["key"] for r in runs]
    assert sorted(set(keys)) == sorted(f"{w}/{p}" for w in ("R1+W256", "R256+W1") for p in
                                       ["default"] + [f"r{r}-w{w_}" for r in (100, 1000)
                                                      for w_ in (100, 1000, 10000)])
    assert keys != sorted(keys)                      # a random order
    for r in runs:
        lab = r["labels"]
        assert r["tunables"] == {"read_lat_nsec": str(lab["read_ns"]),
                                 "write_lat_nsec": str(lab["write_ns"])}
    assert {(r["labels"]["read_ns"], r["labels"]["write_ns"]) for r in runs
            if r["labels"].get("point") == "default"} == {(2000000, 10000000)}
    # before each fio: none, then kyber again (a fresh instance), then the targets
    sel = [s for s in t.scripts if "/queue/scheduler; echo;" in s or "fio --output" in s]
    for k, s in enumerate(sel):
        if "fio --output" in s:
            assert "echo kyber >" in sel[k - 1] and "echo none >" in sel[k - 2]
    assert all(sched == "kyber" for sched, _ in t.fio_runs)
    assert "[" in log and "R: " in log


def test_report_heatmaps_tables_and_dead_space(grid_run: tuple[Path, KyberTarget, str]) -> None:
    out, _, _ = grid_run
    text = (out / "report.md").read_text()
    summary = json.loads((out / "summary.json").read_text())["kyber-grid"]
    for wl in ("R1+W256", "R256+W1"):
        png = out / "plots" / f"kyber-grid-{wl.replace('+', '_')}.png"
        assert is_png(png) and f"](plots/{png.name})" in text
        pts = {(p["i"], p["j"]): p for p in summary[wl]["points"]}
        assert len(pts) == 6 and summary[wl]["read_us"] == [100.0, 1000.0]
        # reads: 100 us x (1 + 3 (1 - w_ms)); fio's p99 in the fake is 1.99 x
        for (i, j), p in pts.items():
            w_ms = [0.1, 1.0, 10.0][j]
            lat = 100 * (1 + 3 * (1 - min(w_ms, 1.0)))
            assert p["read_p99_us"]["mean"] == pytest.approx(int(lat * 1000 * 1.99) / 1000)
            assert p["read_p99_us"]["n"] == 2
        # flat from 1 ms of write target on: the 10 ms points are dead; the 1 ms
        # ones differ from their 0.1 ms neighbours
        assert {ij for ij, p in pts.items() if p["dead"]} == {(0, 2), (1, 2)}
        assert summary[wl]["default"]["read_lat_nsec"] == 2000000
        assert f"## {wl}\n\n2 of 6 points dead." in text
    assert "Welch's two-sided t-test" in text and "†" in text
    assert "| 100 | 10000 | 0.199 ± 0.000 (0.199–0.199) | 10000 ± 0 (10000–10000) | " \
        "2500 ± 0 (2500–2500) | † |" in text


def test_ssdsim_targets_scale_with_time_scale(tmp_path: Path) -> None:
    t = KyberTarget("ssdsim0", {"time_scale": "20"})
    run_fake(t, ["run", "kyber-grid", "--device", "ssdsim0", "--short", "--reps", "1",
                 "--read-us", "100", "--write-us", "1000", "--workloads", "R1+W1"],
             tmp_path / "g")
    m = json.loads((tmp_path / "g" / "manifest.json").read_text())
    pt = next(r for r in m["runs"] if r["labels"].get("point") != "default")
    assert pt["tunables"] == {"read_lat_nsec": "2000000", "write_lat_nsec": "20000000"}
    assert any("time_scale 20" in n for n in m["notes"])
    assert "ssdsim's time_scale 20 multiplies" in (tmp_path / "g" / "report.md").read_text()


def test_write_through_reloads_ssdsim_and_puts_it_back(tmp_path: Path) -> None:
    t = KyberTarget("ssdsim0", {"time_scale": "20", "write_buffer_kb": "256"})
    log = run_fake(t, ["run", "kyber-grid", "--device", "ssdsim0", "--short", "--reps", "1",
                       "--read-us", "100", "--write-us", "1000", "--workloads", "R1+W1",
                       "--write-through"], tmp_path / "g")
    # write-through, then again before each of the 2 runs, then as it was
    assert [ld["write_buffer_kb"] for ld in t.loads] == ["0", "0", "0", "256"]
    assert all(ld["time_scale"] == "20" for ld in t.loads)
    assert "restored: ssdsim reloaded with its original parameters (write_buffer_kb=256)" in log
    assert "ssdsim reloaded write-through" in (tmp_path / "g" / "report.md").read_text()
    with pytest.raises(ValueError, match="ssdsim only"):
        run_fake(KyberTarget(), ["run", "kyber-grid", "--device", "fake0", "--short",
                                 "--write-through"], tmp_path / "h")
    with pytest.raises(ValueError, match="dead-tolerance"):
        run_fake(KyberTarget(), ["run", "kyber-grid", "--device", "fake0", "--short",
                                 "--dead-tolerance", "1.5"], tmp_path / "i")


def test_fresh_file_system_before_every_run(tmp_path: Path) -> None:
    t = KyberTarget()
    run_fake(t, ["run", "kyber-grid", "--device", "fake0", "--short", "--reps", "1",
                 "--read-us", "100", "--write-us", "1000,2000", "--workloads", "R1+W1",
                 "--fs", "xfs", "--fs-size", "64m"], tmp_path / "g")
    mk = [i for i, s in enumerate(t.scripts) if "mkfs.xfs -f -q /dev/fake0" in s]
    fios = [i for i, s in enumerate(t.scripts) if "fio --output" in s]
    assert len(mk) == len(fios) == 3
    assert all(a < b for a, b in zip(mk, fios)) and all(a < b for a, b in zip(fios, mk[1:]))
    o = parse_options(t.last_jobfile)
    assert "filename" not in o["global"] and o["global"]["size"] == "64m"
    assert o["global"]["directory"].endswith("/fs")
    # the file system's module loaded before each mkfs; unmounted at the end
    assert sum("modprobe xfs" in s for s in t.scripts) == 3
    assert any(s.startswith("! awk") and "/proc/mounts || umount" in s
               for s in t.scripts[fios[-1]:])


def test_user_job_file(tmp_path: Path) -> None:
    jf = tmp_path / "pair.fio"
    jf.write_text("[global]\nbs=8k\n[R]\nrw=randread\niodepth=4\n[W]\nrw=randwrite\n")
    t = KyberTarget()
    run_fake(t, ["run", "kyber-grid", "--device", "fake0", "--short", "--reps", "1",
                 "--read-us", "100", "--write-us", "1000", "--job-file", str(jf)], tmp_path / "g")
    o = parse_options(t.last_jobfile)
    assert o["global"]["bs"] == "8k" and o["global"]["filename"] == "/dev/fake0"
    assert o["R"]["iodepth"] == "4"
    jf.write_text("[R]\nrw=randread\nfilename=/dev/sda\n")
    with pytest.raises(ValueError, match="leave filename"):
        run_fake(KyberTarget(), ["run", "kyber-grid", "--device", "fake0", "--short",
                                 "--job-file", str(jf)], tmp_path / "h")


def test_recommend_objectives(grid_run: tuple[Path, KyberTarget, str]) -> None:
    out, _, _ = grid_run
    g = grid.grids(resmod.load(out))["R1+W256"]
    # the lowest read P99: any write target from 1 ms on (all the same)
    r = recommend(g, Objective("min-read-p99"))
    assert r.best is not None and r.best.write_us >= 1000
    assert r.feasible == r.considered == 7
    assert {a.name for a in r.alternatives} | {r.best.name} == {
        "r100-w1000", "r100-w10000", "r1000-w1000", "r1000-w10000", "default"}
    # keep the writer fast: only the 0.1 ms write target does
    w_fast = 9000.0     # 0.1 ms: 400 / 3.7 us a write, 9250 IOPS; from 1 ms 2500
    r = recommend(g, Objective("min-read-p99", min_write_iops=w_fast))
    assert r.best is not None and r.best.write_us == 100 and r.feasible == 2
    r = recommend(g, Objective("max-iops", max_read_p99_us=100.0))
    assert r.best is None and r.feasible == 0 and "no point meets it" in r.text()
    # the most IOPS: from 1 ms, 10000 + 2500; at 0.1 ms, 1e6 / 370 + 9250
    r = recommend(g, Objective("max-iops"))
    assert r.best is not None and r.best.write_us >= 1000
    assert "Kyber's defaults" in r.text()
    # the most write IOPS within a read P99 of 0.8 ms: the 0.1 ms write
    # targets (0.736 ms); within 0.5 ms, what the rest leave (2500)
    r = recommend(g, Objective("max-write-iops", max_read_p99_us=800.0))
    assert r.best is not None and r.best.write_us == 100 and r.feasible == 7
    assert "maximise write IOPS subject to read P99 <= 800 us" in r.text()
    r = recommend(g, Objective("max-write-iops", max_read_p99_us=500.0))
    assert r.best is not None and r.best.write_us >= 1000 and r.feasible == 5
    assert r.best.predicted()["write_iops"].mean == pytest.approx(2500)
    ceiling = r"takes a read-P99 ceiling \(--max-read-p99-us\), not a write-IOPS floor"
    for bad, msg in ((dict(kind="fastest"), "objective 'fastest': one of min-read-p99, "),
                     (dict(kind="max-iops", min_write_iops=5.0), "max-iops " + ceiling),
                     (dict(kind="min-read-p99", max_read_p99_us=5.0),
                      r"min-read-p99 takes a write-IOPS floor \(--min-write-iops\)"),
                     (dict(kind="max-iops", max_read_p99_us=-1.0),
                      "objective bound -1.0: must be a finite number >= 0"),
                     (dict(kind="max-write-iops", min_write_iops=1.0),
                      "max-write-iops " + ceiling)):
        with pytest.raises(ValueError, match=msg):
            Objective(**bad)  # type: ignore[arg-type]


def test_recommend_and_verify_command_lines(grid_run: tuple[Path, KyberTarget, str],
                                            capsys: pytest.CaptureFixture[str]) -> None:
    out, _, _ = grid_run
    assert main(["recommend", str(out), "--workload", "R1+W256", "--objective",
                 "min-read-p99"]) == 0
    text = capsys.readouterr().out
    assert "R1+W256: minimise read P99; 7 of 7 points meet the constraint" in text
    assert "predicted: read P99" in text
    assert main(["recommend", str(out), "--objective", "max-iops", "--max-read-p99-us", "1",
                 "--json"]) == 3
    js = json.loads(capsys.readouterr().out)
    assert [r["workload"] for r in js] == ["R1+W256", "R256+W1"] and js[0]["best"] is None
    assert main(["recommend", str(out), "--workload", "R9", "--objective", "max-iops"]) == 1
    assert "--workload R9: the grid has R1+W256, R256+W1" in capsys.readouterr().err
    assert main(["recommend", str(out), "--objective", "max-iops", "--min-write-iops", "3"]) == 1
    assert main(["recommend", str(out.parent / "nothing"), "--objective", "max-iops"]) == 1
    # verify re-runs the point with the grid's durations on its device
    res, gs = resmod.load(out), grid.grids(resmod.load(out))
    rec = recommend(gs["R1+W256"], Objective("max-iops"))
    argv = verify_argv(res, rec, device=None, reps=3, out="/tmp/v", destroy_data=None,
                       vm=False, kernel=None)
    assert argv[:2] == ["run", "kyber-grid"]
    assert argv[argv.index("--read-us") + 1] == f"{rec.best.read_us:g}"     # type: ignore
    assert argv[argv.index("--runtime") + 1] == "3" and argv[argv.index("--reps") + 1] == "3"
    assert argv[argv.index("--device") + 1] == "/dev/fake0" and "--vm" not in argv
    res.manifest["device"].update(kind="ssdsim", module_params={"time_scale": "20",
                                                                 "write_buffer_kb": "0"})
    argv = verify_argv(res, rec, device=None, reps=3, out="/tmp/v", destroy_data=None,
                       vm=True, kernel="k")
    assert argv[-5:] == ["--vm", "--kernel", "k", "--ssdsim", "time_scale=20 write_buffer_kb=0"]
    # a write-through grid: the parameters its runs had (the phase's reload),
    # and the re-run reloads the same way
    res.manifest["device"]["module_params"]["write_buffer_kb"] = "256"
    res.manifest["params"]["write_through"] = True
    res.manifest["phases"] = {"grid": {"module_params": {"time_scale": "20",
                                                         "write_buffer_kb": "0"}}}
    argv = verify_argv(res, rec, device=None, reps=3, out="/tmp/v", destroy_data=None,
                       vm=True, kernel="k")
    assert argv[-6:] == ["--vm", "--kernel", "k", "--ssdsim", "time_scale=20 write_buffer_kb=0",
                         "--write-through"]
    # a grid on the instruction-counting clock: the re-run on the same clock
    res.manifest["params"]["icount"] = 3
    argv = verify_argv(res, rec, device=None, reps=3, out="/tmp/v", destroy_data=None,
                       vm=True, kernel="k")
    assert argv[-3:] == ["--icount", "3", "--write-through"]
    assert "--icount" not in verify_argv(res, rec, device=None, reps=3, out="/tmp/v",
                                         destroy_data=None, vm=False, kernel=None)
    assert ssdsim_params({"device": {"kind": "nvme"}}) == ""
    cmp = compare(rec, {"read_p99_us": rec.best.cell.samples["read_p99_us"],  # type: ignore
                        "read_iops": [1.0], "write_iops": rec.best.cell.samples["write_iops"]})  # type: ignore
    assert re.search(r"read P99 ms .* yes", cmp) and re.search(r"read IOPS .* NO", cmp)


def test_bench_and_auto_take_the_grids_clock(grid_run: tuple[Path, KyberTarget, str]) -> None:
    """kyber-tune bench --vm runs on the clock its grid was measured on
    (--icount overrides); --icount without --vm is refused."""
    out, _, _ = grid_run
    res = resmod.load(out)
    ns = argparse.Namespace
    assert vm_icount(ns(vm=True, icount=None), res) is None
    res.manifest["params"]["icount"] = 3
    assert vm_icount(ns(vm=True, icount=None), res) == 3
    assert vm_icount(ns(vm=True, icount=2), res) == 2
    assert vm_icount(ns(vm=False, icount=None), res) is None
    with pytest.raises(ValueError, match="--icount is for the VM"):
        vm_icount(ns(vm=False, icount=3), None)
    assert main(["auto", "--device", "fake0", "--read-p99-us", "100", "--icount", "3"]) == 1


def test_grid_asks_for_an_icount_vm() -> None:
    """The grid suite takes --icount: its VM's clock then counts
    instructions (on this machine icount_note() refuses it)."""
    from bench.args import parse
    from bench.suites import get
    a = parse(["run", "kyber-grid", "--vm", "--icount", "3"])
    assert get("kyber-grid").vm_config(a) == {"icount": 3}
