"""The build refuses private headers of another kernel version and says why."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from bench import modules

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


def build_root() -> tuple[Path, str]:
    """The trixie build root (scripts/buildroot) and its kernel release."""
    br = ROOT / "scripts" / "buildroot"
    path = subprocess.run([str(br), "path"], capture_output=True, text=True)
    if path.returncode != 0:
        pytest.fail("no build root: run scripts/setup")
    rel = subprocess.run([str(br), "release"], capture_output=True, text=True, check=True)
    return Path(path.stdout.strip()), rel.stdout.strip()


def in_build_root(binds: list[Path], cmd: str) -> subprocess.CompletedProcess[str]:
    args = [str(ROOT / "scripts" / "buildroot"), "run"]
    for b in binds:
        args += ["-b", str(b)]
    return subprocess.run([*args, "--", "bash", "-c", cmd], capture_output=True, text=True)


def test_trixie_machine_builds_with_its_own_headers(tmp_path: Path) -> None:
    """A user on Debian 13 with the 7.3 headers and linux-source-7.3
    installed runs `make KVER=<7.3>`: inside the build root, where those are
    the machine's own (the build root itself is not there), the modules
    build, with the private headers extracted from /usr/src's tarball."""
    _, rel = build_root()
    r = in_build_root([ROOT, tmp_path], f"""
! {ROOT}/scripts/buildroot path || exit 9    # no build root in there
env BUILD_CACHE={tmp_path}/cache make -C {ROOT} KVER={rel} BUILD_ROOT={tmp_path}/out modules
""")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert (tmp_path / "cache" / "ksrc").is_dir()
    built = sorted(p.name for p in (tmp_path / "out" / rel).rglob("*.ko"))
    assert built == sorted(f"{m.name}.ko" for m in modules.modules())


def test_dkms_builds_for_the_build_roots_kernel() -> None:
    """dkms.conf and the source tree `make install-src` ships (the Debian
    package's) work with trixie's DKMS (3.2) for 7.3: add, build and
    remove in the build root leave the four installable modules built
    and nothing behind."""
    root, rel = build_root()
    m = re.search(r'^PACKAGE_VERSION="([^"]+)"', (ROOT / "dkms.conf").read_text(), re.M)
    assert m
    mod = f"ssd-iosched/{m.group(1)}"
    src = root / "usr" / "src" / f"ssd-iosched-{m.group(1)}"
    shutil.rmtree(src, ignore_errors=True)
    try:
        # the tree the Debian package ships (make deb uses the same target)
        subprocess.run(["make", "-s", "-C", str(ROOT), "install-src", f"DESTDIR={src}"],
                       check=True)
        r = in_build_root([], f"""
set -e
dkms add {mod}
dkms build {mod} -k {rel}
find /var/lib/dkms/{mod}/{rel} -name '*.ko*' -printf '%f\\n' | sort
""")
    finally:
        in_build_root([], f"dkms remove {mod} --all")
        shutil.rmtree(src, ignore_errors=True)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    built = sorted(ln.split(".ko")[0] for ln in r.stdout.splitlines() if ".ko" in ln)
    assert built == sorted(m.name for m in modules.modules() if m.shipped), r.stdout
    assert not (root / "var" / "lib" / "dkms" / "ssd-iosched").exists()
