"""`python3 -m bench run` on this machine, on a loop device: a short run
end to end, and Ctrl-C in the middle of fio putting the device's scheduler
and tunables back."""
from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.tests.loopdev import Loop, loop_unavailable

ROOT = Path(__file__).resolve().parents[2]
Q = "/sys/class/block/{}/queue"


@pytest.fixture
def loop(tmp_path: Path) -> Iterator[Loop]:
    why = loop_unavailable() or (None if shutil.which("fio") else "fio is not installed")
    if why:
        pytest.skip(why)
    lo = Loop(tmp_path)
    q = Path(Q.format(lo.name))
    if "mq-deadline" not in (q / "scheduler").read_text():
        lo.close()
        pytest.skip("mq-deadline is not available on this machine")
    (q / "scheduler").write_text("mq-deadline")
    (q / "iosched" / "read_expire").write_text("123")   # not the default (500)
    yield lo
    lo.close()


def bench(*args: str) -> list[str]:
    return [sys.executable, "-m", "bench", *args]


def read_expire(lo: Loop) -> str:
    """mq-deadline keeps jiffies: 123 ms may read back as 124."""
    return (Path(Q.format(lo.name)) / "iosched" / "read_expire").read_text().strip()


def sched(lo: Loop) -> str:
    return (Path(Q.format(lo.name)) / "scheduler").read_text().split("[")[1].split("]")[0]


def test_short_run_on_a_loop_device(loop: Loop, tmp_path: Path) -> None:
    out = tmp_path / "res"
    expire = read_expire(loop)
    r = subprocess.run(bench("run", "kyber-baseline", "--device", loop.path, "--workloads",
                             "R1,R1+W1", "--runtime", "1", "--ramp", "0", "--reps", "2",
                             "--seed", "5", "--out", str(out)),
                       cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "[4/4]" in r.stdout and "left)" in r.stdout
    m = json.loads((out / "manifest.json").read_text())
    assert m["status"] == "complete" and m["params"]["seed"] == 5
    assert m["device"]["kind"] == "loop" and m["target"]["kind"] == "local"
    assert [r["scheduler"] for r in m["runs"]] == ["none"] * 4
    job = (out / m["runs"][0]["job"]).read_text()
    assert f"filename={loop.path}" in job and "direct=1" in job
    text = (out / "report.md").read_text()
    assert "| R1+W1 |" in text
    assert sched(loop) == "mq-deadline" and read_expire(loop) == expire


def test_ctrl_c_restores_scheduler_and_tunables(loop: Loop, tmp_path: Path) -> None:
    out = tmp_path / "res"
    expire = read_expire(loop)
    # Ctrl-C as a terminal delivers it: a test run in the background of a
    # shell without job control inherits SIGINT ignored, and a Python started
    # so leaves it ignored (no KeyboardInterrupt), so the child gets it back.
    p = subprocess.Popen(bench("run", "kyber-baseline", "--device", loop.path, "--workloads",
                               "R1", "--runtime", "60", "--ramp", "0", "--reps", "1",
                               "--out", str(out)),
                         cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            mf = out / "manifest.json"
            # fio running its job file (the runner's own command line names
            # the results folder, so only the job file tells that fio runs)
            if mf.exists() and json.loads(mf.read_text()).get("status") == "running" and \
                    subprocess.run(["pgrep", "-f", f"fio .*/tmp/bench-{p.pid}/run.fio"],
                                   capture_output=True).returncode == 0:
                break
            time.sleep(0.1)
        time.sleep(1.0)
        assert sched(loop) == "none"           # the run switched it
        p.send_signal(signal.SIGINT)
        stdout, _ = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 130, stdout
    assert f"restored: /dev/{loop.name} back to scheduler mq-deadline" in stdout
    assert sched(loop) == "mq-deadline" and read_expire(loop) == expire
    m = json.loads((out / "manifest.json").read_text())
    assert m["status"] == "interrupted"
    assert subprocess.run(["pgrep", "-f", f"/tmp/bench-{p.pid}/"],
                          capture_output=True).returncode != 0, "fio left running"


def _ext4(lo: Loop) -> None:
    lo.mkfs()
    assert sh_blkid(lo) == "ext4"


def sh_blkid(lo: Loop) -> str:
    return subprocess.run(["blkid", "-p", "-o", "value", "-s", "TYPE", lo.path],
                          capture_output=True, text=True).stdout.strip()


def test_a_device_holding_a_file_system_is_refused_then_overridden(
        loop: Loop, tmp_path: Path) -> None:
    """Through the real command line: a device holding ext4 is refused,
    with what would be lost and the override to give, before anything
    writes to it; --destroy-data naming it again runs, says so, and the
    manifest records what was found and the override."""
    _ext4(loop)
    out = tmp_path / "refused"
    args = ("run", "kyber-baseline", "--device", loop.path, "--workloads", "R1+W1",
            "--runtime", "1", "--ramp", "0", "--reps", "1", "--seed", "5")
    r = subprocess.run(bench(*args, "--out", str(out)), cwd=ROOT, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 1, r.stdout + r.stderr
    assert f"bench: refusing to write to {loop.path}" in r.stderr
    assert "ext4 file system" in r.stderr and f"--destroy-data {loop.path}" in r.stderr
    assert not out.exists()
    assert sh_blkid(loop) == "ext4", "the refused run wrote to the device"
    out = tmp_path / "overridden"
    r = subprocess.run(bench(*args, "--destroy-data", loop.path, "--out", str(out)), cwd=ROOT,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"--destroy-data {loop.path}: overwriting /dev/{loop.name} although" in r.stdout
    safety = json.loads((out / "manifest.json").read_text())["safety"]
    assert safety["checked"] is True and safety["overridden_by"] == loop.path
    assert len(safety["found"]) == 1 and "ext4 file system" in safety["found"][0], safety


def test_calibrate_cars_probe_refuses_a_device_holding_a_file_system(loop: Loop) -> None:
    """`calibrate cars` on a device that is not ssdsim measures it with fio,
    which writes: through the real command line a device holding ext4 is
    refused before anything is written or any module is loaded."""
    _ext4(loop)
    r = subprocess.run(bench("calibrate", "cars", "--device", loop.path), cwd=ROOT,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 1, r.stdout + r.stderr
    assert f"bench: refusing to write to {loop.path}" in r.stderr
    assert "ext4 file system" in r.stderr and f"--destroy-data {loop.path}" in r.stderr
    assert sh_blkid(loop) == "ext4", "the refused probe wrote to the device"


def test_a_blank_device_is_recorded_as_checked(loop: Loop, tmp_path: Path) -> None:
    out = tmp_path / "res"
    r = subprocess.run(bench("run", "kyber-baseline", "--device", loop.path, "--workloads",
                             "R1", "--runtime", "1", "--ramp", "0", "--reps", "1",
                             "--out", str(out)),
                       cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert json.loads((out / "manifest.json").read_text())["safety"] == \
        {"checked": True, "found": [], "overridden_by": None}


def test_kyber_tune_refuses_a_device_holding_a_file_system(loop: Loop, tmp_path: Path) -> None:
    """kyber-tune's commands that write (grid, through bench's runner, and
    bench) refuse a device holding ext4 and take --destroy-data."""
    kt = [sys.executable, str(ROOT / "kyber-tune" / "kyber-tune")]
    grid = tmp_path / "grid"
    gargs = ["grid", "--device", loop.path, "--workloads", "R1+W1", "--read-us", "1000",
             "--write-us", "10000", "--reps", "1", "--runtime", "1", "--ramp", "0"]
    r = subprocess.run(kt + gargs + ["--out", str(grid)], cwd=ROOT, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    _ext4(loop)
    r = subprocess.run(kt + gargs + ["--out", str(tmp_path / "grid2")], cwd=ROOT,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 1 and f"refusing to write to {loop.path}" in r.stderr, r.stderr
    bargs = ["bench", str(grid), "--workload", "R1+W1", "--read-p99-us", "100000",
             "--runtime", "2", "--settle", "0",
             "--period", "0.5"]
    r = subprocess.run(kt + bargs + ["--out", str(tmp_path / "b1")], cwd=ROOT,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 1, r.stdout + r.stderr
    assert f"refusing to write to {loop.path}" in r.stderr and "ext4 file system" in r.stderr
    assert not (tmp_path / "b1").exists() and sh_blkid(loop) == "ext4"
    r = subprocess.run(kt + bargs + ["--destroy-data", loop.path, "--out", str(tmp_path / "b2")],
                       cwd=ROOT, capture_output=True, text=True, timeout=180)
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"--destroy-data {loop.path}: overwriting" in r.stdout
    assert (tmp_path / "b2" / "report.md").exists()
