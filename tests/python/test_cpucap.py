"""scripts/cpucap: the cgroup it finds for v1 and v2 hierarchies and what it
writes there, on fake cgroup trees."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from scripts import cpucap

ROOT = Path(__file__).resolve().parents[2]

# /proc/self/mountinfo of this project's test hosts (cgroup v1 beside v2)
MOUNTINFO_V1 = """\
25 20 0:22 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
26 25 0:23 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
27 25 0:24 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct
28 25 0:25 / /sys/fs/cgroup/cpuset rw,relatime - cgroup cgroup rw,cpuset
34 25 0:31 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
"""
CGROUP_V1 = "3:cpuset:/\n2:cpuacct:/\n1:cpu:/ci/job\n0::/\n"
MOUNTINFO_V2 = "30 20 0:26 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n"
CGROUP_V2 = "0::/ci.slice\n"


def test_quota_is_the_fraction_of_all_cpus_in_a_period() -> None:
    assert cpucap.quota_us(2, 0.95, 10_000) == 19_000
    assert cpucap.quota_us(16, 0.95, 10_000) == 152_000
    assert cpucap.quota_us(1, 0.01, 10_000) == 1000  # the kernel's minimum
    for bad in (0.0, -0.5, 1.5):
        with pytest.raises(ValueError, match=rf"fraction {bad}: not in \(0, 1\]"):
            cpucap.quota_us(2, bad, 10_000)


def test_fraction_is_a_share_or_zero_for_off() -> None:
    assert cpucap.parse_fraction("0.95") == 0.95
    assert cpucap.parse_fraction("1") == 1.0
    assert cpucap.parse_fraction("0") == 0.0
    for bad in ("", "x"):
        with pytest.raises(ValueError, match=f"CPUCAP_FRACTION '{bad}': not a number"):
            cpucap.parse_fraction(bad)
    for bad in ("-0.5", "1.5", "nan", "inf"):
        with pytest.raises(ValueError, match=rf"fraction {bad}: not in \(0, 1\]"):
            cpucap.parse_fraction(bad)


def test_v1_cpu_controller_under_own_cgroup(tmp_path: Path) -> None:
    cap = cpucap.find(MOUNTINFO_V1, CGROUP_V1, tmp_path)
    assert cap == cpucap.Cap(tmp_path / "sys/fs/cgroup/cpu/ci/job" / cpucap.GROUP, v2=False)
    cap.path.parent.mkdir(parents=True)
    assert cpucap.apply(cap, 1234, cpus=2) == 19_000
    assert (cap.path / "cpu.cfs_period_us").read_text() == "10000"
    assert (cap.path / "cpu.cfs_quota_us").read_text() == "19000"
    assert (cap.path / "cgroup.procs").read_text() == "1234"


def test_v2_enables_cpu_for_its_children_first(tmp_path: Path) -> None:
    base = tmp_path / "sys/fs/cgroup/ci.slice"
    base.mkdir(parents=True)
    (base / "cgroup.controllers").write_text("cpuset cpu io memory pids\n")
    (base / "cgroup.subtree_control").write_text("memory\n")
    cap = cpucap.find(MOUNTINFO_V2, CGROUP_V2, tmp_path)
    assert cap == cpucap.Cap(base / cpucap.GROUP, v2=True)
    assert cpucap.apply(cap, 99, cpus=4, fraction=0.5) == 20_000
    assert (base / "cgroup.subtree_control").read_text() == "+cpu"
    assert (cap.path / "cpu.max").read_text() == "20000 10000"
    assert (cap.path / "cgroup.procs").read_text() == "99"


def test_no_cpu_controller_is_no_cap(tmp_path: Path) -> None:
    base = tmp_path / "sys/fs/cgroup/ci.slice"
    base.mkdir(parents=True)
    (base / "cgroup.controllers").write_text("memory pids\n")
    assert cpucap.find(MOUNTINFO_V2, CGROUP_V2, tmp_path) is None
    assert cpucap.find("", "", tmp_path) is None


def test_command_runs_with_its_exit_status_and_bad_fraction_is_refused() -> None:
    cmd = [str(ROOT / "scripts" / "cpucap"), "sh", "-c", "exit 7"]
    r = subprocess.run(cmd, capture_output=True, text=True,
                       env=dict(os.environ, CPUCAP_FRACTION="0"))
    assert r.returncode == 7 and "cpucap: off" in r.stderr
    r = subprocess.run(cmd, capture_output=True, text=True,
                       env=dict(os.environ, CPUCAP_FRACTION="2"))
    assert r.returncode == 2 and "CPUCAP_FRACTION='2'" in r.stderr
