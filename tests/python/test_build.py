"""The build refuses private headers of another kernel version and says why."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def kernels() -> list[str]:
    return subprocess.run([str(ROOT / "scripts" / "kernels"), "test"], capture_output=True,
                          text=True, check=True).stdout.split()


def ksrc(kernel: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(ROOT / "scripts" / "ksrc"), kernel], capture_output=True,
                          text=True, env={**os.environ, **env})


def test_each_test_kernel_gets_matching_private_headers() -> None:
    for k in kernels():
        r = ksrc(k)
        assert r.returncode == 0, r.stderr
        tree = Path(r.stdout.strip())
        assert (tree / "block" / "elevator.h").is_file()
        version = subprocess.run([str(ROOT / "scripts" / "kernels"), "version", k],
                                 capture_output=True, text=True, check=True).stdout.strip()
        assert tree.name == version


def test_build_refuses_source_of_other_version(tmp_path: Path) -> None:
    ks = kernels()
    if len(ks) < 2:
        pytest.skip("needs two test kernels")
    other = Path(ksrc(ks[0]).stdout.strip())   # e.g. 6.1.192
    r = subprocess.run(["make", "-C", str(ROOT), f"KVER={ks[1]}", f"BUILD_ROOT={tmp_path}",
                        "modules"], capture_output=True, text=True,
                       env={**os.environ, "KSRC": str(other)})
    assert r.returncode != 0
    assert f"is kernel source {other.name} but kernel {ks[1]} is" in r.stderr, r.stderr
    assert not list(tmp_path.rglob("*.ko"))


def test_tarball_of_other_version_is_refused(tmp_path: Path) -> None:
    """A distribution tarball whose Makefile says another version is refused."""
    k = kernels()[0]
    src = tmp_path / "src" / "linux-source-x"
    (src / "block").mkdir(parents=True)
    (src / "block" / "elevator.h").write_text("/* */\n")
    (src / "Makefile").write_text("VERSION = 5\nPATCHLEVEL = 10\nSUBLEVEL = 1\n")
    r = ksrc(k, KSRC=str(src))
    assert r.returncode != 0
    assert "is kernel source 5.10.1 but kernel" in r.stderr


def test_make_without_headers_lists_buildable_kernels() -> None:
    r = subprocess.run(["make", "-C", str(ROOT), "KVER=0.0.0-nonexistent", "modules"],
                       capture_output=True, text=True)
    assert r.returncode != 0
    assert "No build headers for kernel 0.0.0-nonexistent" in r.stdout
    for k in kernels():
        assert k in r.stdout
