"""tests/run's time budget: a VM test not started by its deadline is skipped
with the reason tests/run fails it for (tests/runner.py), before any fixture
boots a VM."""
from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

ROOT = Path(__file__).resolve().parents[2]
TEST = "tests/vm/test_generic.py::test_load_lists_scheduler"


def test_a_test_past_the_deadline_is_skipped_without_a_vm(tmp_path: Path) -> None:
    t0 = time.monotonic()
    env = dict(os.environ, VM_TEST_DEADLINE=str(time.time() - 1))
    p = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-rs", "-q",
                        f"--junitxml={tmp_path / 'out.xml'}", "--kernel=6.1.0-56-cloud-amd64",
                        TEST], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    rc, out = p.returncode, p.stdout + p.stderr
    assert rc == 0, out
    # one per scheduler (the sched fixture's parameters), none booted
    assert "skipped" in out and "passed" not in out and "failed" not in out, out
    assert "time budget: not started by tests/run's deadline" in out, out
    xml = (tmp_path / "out.xml").read_text()
    assert 'message="time budget:' in xml, xml
    assert time.monotonic() - t0 < 60  # a boot of the VM alone takes longer


def test_the_hook_skips_only_past_the_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(ROOT / "tests" / "vm"))
    # not as "conftest": that is this directory's
    spec = importlib.util.spec_from_file_location("vm_conftest", ROOT / "tests/vm/conftest.py")
    assert spec is not None and spec.loader is not None
    conftest = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "vm_conftest", conftest)  # for its dataclasses
    spec.loader.exec_module(conftest)
    hook = conftest.pytest_runtest_setup
    plain, long = _Item(None), _Item(15)
    monkeypatch.delenv(conftest.DEADLINE_ENV, raising=False)
    hook(plain)  # no deadline: tests/run did not start this run
    hook(long)
    monkeypatch.setenv(conftest.DEADLINE_ENV, str(time.time() + 3600))
    hook(plain)
    hook(long)
    # 10 min left: enough for any unmarked test, not for one of 15 min
    monkeypatch.setenv(conftest.DEADLINE_ENV, str(time.time() + 600))
    hook(plain)
    with pytest.raises(pytest.skip.Exception, match="^time budget: .*less its 15 min"):
        hook(long)
    monkeypatch.setenv(conftest.DEADLINE_ENV, str(time.time() - 1))
    for item in (plain, long):
        with pytest.raises(pytest.skip.Exception, match="^time budget: "):
            hook(item)


class _Item:
    """What the hook reads of a pytest item: its minutes() mark."""

    def __init__(self, minutes: int | None):
        self.minutes = minutes

    def get_closest_marker(self, name: str) -> SimpleNamespace | None:
        if name != "minutes" or self.minutes is None:
            return None
        return SimpleNamespace(args=(self.minutes,))  # a Mark, as far as the hook reads
