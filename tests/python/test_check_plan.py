"""tests/run's rules for a green run (tests/runner.py): every planned test
ran and passed, nothing ran unplanned, a skip is allowed by tests/skips.txt
or fails, a test left out for time fails, a C unit test counts once, and
pytest finding nothing or a missing test path fail."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests import runner
from tests.runner import Group, Tally

G = Group("vm 6.12", "vm[6.12.117+deb12-cloud-amd64]")


def test_the_plan_reads_back_what_it_writes() -> None:
    plan = {"static": ["checkpatch k2/k2-core.h"], "vm 6.12": ["tests/vm/a.py::t[x]", "b"]}
    assert runner.read_plan(runner.format_plan(plan)) == plan


def test_a_plan_whose_count_is_off_is_refused() -> None:
    with pytest.raises(ValueError, match=r"\[unit\] says 3 tests and lists 2"):
        runner.read_plan("[unit] 3 tests\na\nb\n")
    with pytest.raises(ValueError, match="lists a test twice"):
        runner.read_plan("[unit] 2 tests\na\na\n")
    with pytest.raises(ValueError, match="before any"):
        runner.read_plan("a\n[unit] 1 test\nb\n")


def test_the_committed_plan_reads() -> None:
    plan = runner.read_plan(runner.PLAN.read_text())
    assert {"static", "unit", "debug"} <= set(plan) and any(k.startswith("vm ") for k in plan)
    # this file's own tests are in it
    assert "tests/python/test_check_plan.py::test_the_committed_plan_reads" in plan["unit"]


def _lines(capsys: pytest.CaptureFixture[str]) -> list[str]:
    return capsys.readouterr().out.splitlines()


def test_a_planned_test_that_did_not_run_fails_by_name(capsys: pytest.CaptureFixture[str]) -> None:
    t = Tally()
    t.test(G, "a", True)
    counts = runner.check_plan(t, {"vm 6.12": ["a", "b", "c"]}, [G])
    assert counts == ["vm 6.12 1/3"]
    assert t.passed == 1 and t.failed == 2
    assert t.failures == [f"{G.label}: b", f"{G.label}: c"]
    out = _lines(capsys)
    assert f"FAIL: {G.label}: b" in out and "    planned, not run" in out


def test_with_k_only_unplanned_tests_are_failures() -> None:
    t = Tally()
    t.test(G, "a", True)
    t.test(G, "new", True)
    runner.check_plan(t, {"vm 6.12": ["a", "b"]}, [G], missing_too=False)
    assert t.failures == [f"{G.label}: new"]


def test_a_group_the_plan_lacks_fails() -> None:
    t = Tally()
    runner.check_plan(t, {}, [G])
    assert t.failed == 1 and "the plan has no group [vm 6.12]" in t.failures[0]


def test_a_test_left_out_for_time_fails(capsys: pytest.CaptureFixture[str]) -> None:
    skips = runner.read_skips("vm * *: allowed everywhere\n")
    t = Tally()
    t.test(G, "a", None, "time budget: not started by tests/run's deadline", skips)
    assert (t.passed, t.failed, t.skipped) == (0, 1, 0)
    assert "    not run for time: time budget: not started" in "\n".join(_lines(capsys))


def test_a_skip_fails_unless_allowed(capsys: pytest.CaptureFixture[str]) -> None:
    skips = runner.read_skips("# comment\n\nvm * tests/vm/x.py::t[*]: no such device here\n")
    assert skips == [runner.AllowedSkip("vm *", "tests/vm/x.py::t[*]", "no such device here")]
    t = Tally()
    t.test(G, "tests/vm/x.py::t[k2]", None, "needs a disk", skips)
    t.test(G, "tests/vm/y.py::t", None, "needs a disk", skips)
    t.test(runner.UNIT, "tests/vm/x.py::t[k2]", None, "needs a disk", skips)
    assert (t.skipped, t.failed) == (1, 2)
    assert t.allowed == [f"{G.label}: tests/vm/x.py::t[k2] (no such device here)"]
    assert t.ran == {"vm 6.12": {"tests/vm/x.py::t[k2]": "skipped",
                                 "tests/vm/y.py::t": "failed"},
                     "unit": {"tests/vm/x.py::t[k2]": "failed"}}
    assert "which tests/skips.txt does not allow" in "\n".join(_lines(capsys))
    with pytest.raises(ValueError, match="skips line 1"):
        runner.read_skips("no reason here\n")


def test_the_committed_skips_read() -> None:
    if runner.SKIPS.exists():
        runner.read_skips(runner.SKIPS.read_text())


def test_held_lines_and_results_merge() -> None:
    main, lane = Tally(), Tally(held=[])
    lane.test(G, "a", True)
    lane.test(G, "b", False, "why")
    assert lane.held and lane.held[0] == f"PASS: {G.label}: a"
    main.merge(lane)
    assert (main.passed, main.failed) == (1, 1)
    assert main.ran == {"vm 6.12": {"a": "passed", "b": "failed"}}


def test_series_names_the_plans_kernel() -> None:
    assert runner.series("6.12.117+deb12-cloud-amd64") == "6.12"
    assert runner.series("6.1.0-57-cloud-amd64") == "6.1"
    assert runner.series("7.3.4+deb13-cloud-amd64") == "7.3"
    assert runner.series("6.12.117-ssd-debug") == "debug"


UNIT_SRC = """\
#include "unit.h"
TEST(test_good) { CHECK(1 == 1); }
TEST(test_bad) { CHECK_EQ(1 + 1, 3); }
UNIT_MAIN(UNIT(test_good), UNIT(test_bad))
"""


def test_a_failing_c_unit_test_counts_once(tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    src = tmp_path / "demo_test.c"
    src.write_text(UNIT_SRC)
    assert runner.unit_c_ids(src) == ["demo_test.c:test_good", "demo_test.c:test_bad"]
    t = Tally()
    runner.run_c_test(t, src, tmp_path, [])
    assert (t.passed, t.failed) == (1, 1), capsys.readouterr().out
    assert t.failures == ["unit: demo_test.c:test_bad"]
    assert t.ran == {"unit": {"demo_test.c:test_good": "passed",
                              "demo_test.c:test_bad": "failed"}}


def test_the_c_results_are_named_by_file_not_path() -> None:
    out = "PASS: /tmp/x/tests/unit/k2_test.c:test_a\nFAIL: k2_test.c:test_b\nnoise\n"
    assert runner.unit_c_results(out) == [("k2_test.c:test_a", True), ("k2_test.c:test_b", False)]


def test_a_missing_test_path_fails(capsys: pytest.CaptureFixture[str]) -> None:
    t = Tally()
    runner.pytest_run(t, runner.UNIT, ["tests/vm/test_no_such_file.py"])
    assert t.failures == ["unit: tests/vm/test_no_such_file.py"]


def test_pytest_collecting_nothing_fails(tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "test_empty.py").write_text("X = 1\n")
    t = Tally()
    runner.pytest_run(t, runner.UNIT, [str(tmp_path / "test_empty.py")])
    assert t.failures == ["unit: pytest collected no test"], capsys.readouterr().out


def test_results_are_named_by_node_id_as_collected(capsys: pytest.CaptureFixture[str]) -> None:
    f = "tests/python/test_tbprof.py"
    t = Tally()
    runner.pytest_run(t, runner.UNIT, [f])
    ran = t.ran["unit"]
    assert ran and set(ran.values()) == {"passed"}, capsys.readouterr().out
    assert all(i.startswith(f + "::test_") for i in ran), ran
    assert sorted(ran) == sorted(runner.pytest_collect([f], []))


def test_the_vm_parts_run_each_kernels_plan_once() -> None:
    """The lanes' parts (vm_parts()): the other kernels' tiers whole first,
    the first kernel's in parts whose tests, as pytest collects them, are
    its plan group's, each once."""
    kernels, _ = runner.test_kernels()
    if len(kernels) < 2:
        pytest.fail("needs two test kernels installed (scripts/setup)")
    parts = runner.vm_parts(kernels, kernels)
    n = 2 + len(runner.FIRST_KERNEL_APART)
    assert [p.kernel for p in parts] == kernels[1:] + [kernels[0]] * n
    assert all(p.name == "" for p in parts[:-n]) and len({p.label for p in parts}) == len(parts)
    plan = runner.read_plan(runner.PLAN.read_text())
    got: list[str] = []
    for p in parts[-n:]:
        extra = [f"--kernel={p.kernel}", "-m", p.marks, *(f"--ignore={i}" for i in p.ignore)]
        ids = runner.pytest_collect(list(p.paths), extra)
        assert ids, p
        got += ids
    assert sorted(got) == sorted(plan[runner.vm_group(kernels[0]).key])
    for f in runner.FIRST_KERNEL_APART:
        assert any(i.startswith(f + "::") for i in got), f


def test_a_kernel_chosen_alone_runs_its_own_plan() -> None:
    """tests/run --kernel K: a kernel that is not the plan's first runs
    its tier whole, without the first kernel's own tests (which its plan
    group does not hold); the first runs its parts as in a full run."""
    kernels = ["6.1-x", "6.12-x", "7.3-x"]
    parts = runner.vm_parts(["7.3-x"], kernels)
    assert [(p.kernel, p.name, p.marks) for p in parts] == [
        ("7.3-x", "", runner.EVERY_KERNEL)]
    alone = runner.vm_parts(["6.1-x"], kernels)
    assert alone == runner.vm_parts(kernels, kernels)[-len(alone):]
    assert {p.kernel for p in alone} == {"6.1-x"}
    assert {p.marks for p in alone} == {runner.EVERY_KERNEL, runner.FIRST_KERNEL_ONLY}


def test_a_part_under_k_may_collect_nothing(tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    """A part of a kernel's tier that -k leaves empty is no failure (its
    other parts ran what -k chose); nothing else may be empty."""
    (tmp_path / "test_empty.py").write_text("X = 1\n")
    t = Tally()
    runner.pytest_run(t, runner.UNIT, [str(tmp_path / "test_empty.py")], empty_ok=True)
    assert not t.failures and not t.passed, capsys.readouterr().out
