"""kyber-tune bench without a kernel: its job file, the static points it
compares with, the goals and the report."""
from __future__ import annotations

from pathlib import Path

import pytest

from bench import results as resmod
from bench.jobs import parse_options
from bench.suites.kyber_baseline import Workload
from kybertune import auto, versus

from test_grid import KyberTarget, grid_run  # noqa: F401  (fixture)


def test_jobfile_reader_alone_then_beside_the_writer() -> None:
    o = parse_options(versus.jobfile("/dev/x", Workload.parse("R1+W256"), 60, 10))
    assert o["global"]["filename"] == "/dev/x" and o["global"]["runtime"] == "60s"
    assert o["before"] == {"rw": "randread", "iodepth": "1", "runtime": "30s"}
    # a reader all along: the same reader between the writer's start and 'after'
    assert o["settling"] == {"rw": "randread", "iodepth": "1", "startdelay": "30s",
                             "runtime": "10s"}
    assert o["after"] == {"rw": "randread", "iodepth": "1", "startdelay": "40s",
                          "runtime": "20s"}
    assert o["writer"] == {"rw": "randwrite", "iodepth": "256", "startdelay": "30s",
                           "runtime": "30s"}
    assert "settling" not in parse_options(
        versus.jobfile("/dev/x", Workload.parse("R1+W256"), 60, 0))
    settle = "--settle must be at least 0 and less than half of --runtime"
    for bad, msg in (((Workload.parse("R1"), 60, 10), "R1: bench needs a reader and a writer"),
                     ((Workload.parse("R1+W1"), 60, 30), settle),
                     ((Workload.parse("R1+W1"), 60, -1), settle)):
        with pytest.raises(ValueError, match=msg):
            versus.jobfile("/dev/x", *bad)  # type: ignore[arg-type]


def test_static_points_goals_and_report(grid_run: tuple[Path, KyberTarget, str],
                                        tmp_path: Path) -> None:
    out, _, _ = grid_run
    res = resmod.load(out)
    # within 0.5 ms of read P99 the best write IOPS are 2500 (any target from
    # 1 ms); the defaults give 2500 too
    best, name, default = versus.static(res, "R1+W256", 500.0)
    assert best == {"read_p99_us": pytest.approx(199.0), "write_iops": pytest.approx(2500.0)}
    assert name.startswith("r") and default is not None
    assert versus.static(res, "R1+W256", 10.0)[:2] == (None, "none meets it")
    with pytest.raises(ValueError, match="no R1\\+W1"):
        versus.static(res, "R1+W1", 500.0)
    rows = [auto.Row(float(t), 500000, 10 ** 6 * (1 + t), 0.9, 450.0, 500, 0.3, 10, 2, "hold")
            for t in range(5)]
    o = versus.Outcome(500.0, 540.0, 200.0, 2300.0, best, name, default, rows)
    assert o.goals() == {"read P99 within 10% of the objective": True,
                         "write IOPS >= 90% of the best static point's": True,
                         "write IOPS above Kyber's defaults'": False}
    path = versus.write_report(o, tmp_path, res, "R1+W256", 60, 10)
    text = path.read_text()
    assert "| auto (reader from the writer's start + settle) | 0.540 | 2300 |" in text
    assert "- write IOPS above Kyber's defaults': **no**" in text
    assert (tmp_path / "auto.png").read_bytes()[:4] == b"\x89PNG"
    assert "no" in versus.summarize_goals(o)


def test_demo_objective_lies_between_the_best_point_and_the_defaults() -> None:
    from kybertune.demo import objective_us
    from bench.suites.kyber_grid import Cell, Grid

    def cell(p99: float) -> Cell:
        c = Cell(1, 1)
        c.add("read_p99_us", p99)
        return c
    g = Grid("R1+W256", [100.0], [100.0, 1000.0], {(0, 0): cell(10_000), (0, 1): cell(40_000)},
             cell(90_000), set())
    assert objective_us(g) == pytest.approx(30_000)          # sqrt(10 ms x 90 ms)
    g.default = cell(11_000)                                  # the targets hardly matter
    assert objective_us(g) is None
    g.default = None
    assert objective_us(g) is None
