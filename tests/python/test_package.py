"""`make deb` builds a DKMS package that installs, builds for every kernel
with headers (including one whose headers come later) and removes cleanly.

The package is installed in a throw-away root, not on this machine: a
bookworm root made once with Debian's mmdebstrap (dkms and the first test
kernel's headers installed, the second's downloaded for later) and kept in
$IOSCHED_BUILDROOT_CACHE (default /var/cache/ssd-iosched) like the trixie
build root.  Each run mounts an overlay on it, so the cached root stays as
made.  The distribution source tarballs (/usr/src/linux-source-X.Y.tar.xz,
which scripts/setup installs and `scripts/kernels check` matches to the
kernels) are bind-mounted at the same path, where a user's linux-source
package puts them.
"""
from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from bench import modules

ROOT = Path(__file__).resolve().parents[2]
CACHE = Path(os.environ.get("IOSCHED_BUILDROOT_CACHE", "/var/cache/ssd-iosched"))
ROOT_VERSION = 2    # of what make_root() puts in the root
# The modules DKMS installs (dkms.conf's BUILT_MODULE_NAME), and the
# elevator each registers.
MODULES = {m.name: m.elevator for m in modules.modules() if m.shipped}


def run(cmd: list[str], **kw: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, **kw)  # type: ignore[call-overload]


def deb12_kernels() -> list[str]:
    """Debian 12's test kernels (the third, 7.3, has no bookworm headers)."""
    out = run([str(ROOT / "scripts" / "kernels"), "test"], check=True).stdout.split()
    return [k for k in out if "deb13" not in k]


def dkms_version() -> str:
    m = re.search(r'^PACKAGE_VERSION="(.*)"$', (ROOT / "dkms.conf").read_text(), re.M)
    assert m, "dkms.conf has no PACKAGE_VERSION"
    return m.group(1)


def make_root(kernels: list[str]) -> Path:
    """The cached bookworm root for kernels (made if missing)."""
    key = hashlib.sha256(f"{kernels} {ROOT_VERSION}".encode()).hexdigest()[:12]
    root = CACHE / f"pkgtest-bookworm-{key}"
    if root.is_dir():
        return root
    if shutil.which("mmdebstrap") is None:
        pytest.fail("mmdebstrap is not installed (scripts/setup installs it)")
    for old in CACHE.glob("pkgtest-bookworm-*"):
        shutil.rmtree(old)
    tmp = CACHE / f".pkgtest-new-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    CACHE.mkdir(parents=True, exist_ok=True)
    first, later = kernels[0], kernels[1:]
    # the machine's own apt sources, read, not changed
    # the machine's own apt sources, read, not changed; the later kernels'
    # headers and what they need, downloaded, not installed
    later_pkgs = " ".join("linux-headers-" + k for k in later)
    r = run(["mmdebstrap", "--quiet", "--variant=apt",
             f"--include=dkms,xz-utils,linux-headers-{first}",
             "--customize-hook=chroot \"$1\" sh -c 'mkdir -p /root/later && apt-get clean && "
             f"apt-get -qq -y --download-only install {later_pkgs} && "
             "mv /var/cache/apt/archives/*.deb /root/later/'",
             "bookworm", str(tmp), "/etc/apt/sources.list.d/debian.sources"])
    if r.returncode != 0:
        shutil.rmtree(tmp, ignore_errors=True)
        pytest.fail(f"mmdebstrap failed:\n{r.stderr[-3000:]}")
    tmp.rename(root)
    return root


@dataclass
class Root:
    """An overlay on the cached root, entered once per step."""
    lower: Path
    work: Path
    binds: list[Path]

    def sh(self, script: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
        merged, upper, wd = self.work / "merged", self.work / "upper", self.work / "wd"
        for d in (merged, upper, wd):
            d.mkdir(exist_ok=True)
        setup = [f"mount -t overlay overlay -o lowerdir={self.lower},upperdir={upper},"
                 f"workdir={wd} {merged}",
                 f"mount -t proc proc {merged}/proc",
                 f"mount --rbind /dev {merged}/dev"]
        for b in self.binds:
            setup += [f"mkdir -p {merged}{b.parent}", f"touch {merged}{b}",
                      f"mount --bind {b} {merged}{b}"]
        outer = "set -e\n" + "\n".join(setup) + \
            f'\nexec chroot {merged} /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin ' \
            f'HOME=/root DEBIAN_FRONTEND=noninteractive /bin/sh -c "$1"'
        return run(["unshare", "--mount", "--propagation", "private", "sh", "-c", outer,
                    "-", "set -e\n" + script], timeout=timeout)

    def check(self, script: str, timeout: float = 900) -> str:
        r = self.sh(script, timeout)
        assert r.returncode == 0, f"{script}\n-> exit {r.returncode}\n{r.stdout[-4000:]}\n{r.stderr[-4000:]}"
        return r.stdout + r.stderr


@pytest.fixture(scope="module")
def deb(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("deb")
    r = run(["make", "-C", str(ROOT), f"BUILD_ROOT={out}", "deb"])
    assert r.returncode == 0, r.stdout + r.stderr
    path = out / "deb" / f"ssd-iosched-dkms_{dkms_version()}_all.deb"
    assert path.is_file(), r.stdout
    assert f"built: {path}" in r.stdout
    return path


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory, deb: Path) -> Iterator[Root]:
    kernels = deb12_kernels()
    if len(kernels) < 2:
        pytest.skip("needs Debian 12's two test kernels")
    srcs = [Path(f"/usr/src/linux-source-{run([str(ROOT / 'scripts' / 'kernels'), 'version', k], check=True).stdout.strip().rsplit('.', 1)[0]}.tar.xz")
            for k in kernels]
    for s in srcs:
        if not s.is_file():
            pytest.fail(f"{s} is missing (scripts/setup installs the linux-source packages)")
    lower = make_root(kernels)
    work = tmp_path_factory.mktemp("pkgroot")
    yield Root(lower, work, srcs + [deb])


def test_deb_names_its_version_and_carries_the_source(deb: Path) -> None:
    v = dkms_version()
    fields = run(["dpkg-deb", "-f", str(deb), "Package", "Version", "Architecture", "Depends"],
                 check=True).stdout
    assert "Package: ssd-iosched-dkms" in fields
    assert f"Version: {v}\n" in fields
    assert "Architecture: all" in fields
    assert "dkms" in fields
    files = run(["dpkg-deb", "-c", str(deb)], check=True).stdout
    for f in ("dkms.conf", "Makefile", "Kbuild", "k2/k2-iosched.c", "scripts/ksrc",
              "compat/iosched-compat.h", "tracepoints/trace/events/k2.h"):
        assert f"./usr/src/ssd-iosched-{v}/{f}\n" in files, f
    for f in ("60-ssd-iosched.rules", "ssd-iosched.conf"):
        assert f"./usr/share/doc/ssd-iosched-dkms/examples/{f}\n" in files, f
    # examples only: nothing active is installed
    assert "./etc/" not in files and "/lib/udev/rules.d/" not in files


def installed(r: Root, kernel: str) -> dict[str, dict[str, str]]:
    """modinfo of each of the project's modules DKMS installed for kernel."""
    out: dict[str, dict[str, str]] = {}
    for m in MODULES:
        text = r.check(f"""
f=$(ls /lib/modules/{kernel}/updates/dkms/{m}.ko* 2>/dev/null || true)
[ -n "$f" ] || exit 0
modinfo "$f"
""")
        info: dict[str, str] = {}
        for line in text.splitlines():
            k, _, v = line.partition(":")
            info[k] = (info[k] + "\n" if k in info else "") + v.strip()
        if text.strip():
            out[m] = info
    return out


def test_install_builds_for_each_kernel_and_remove_leaves_nothing(deb: Path, root: Root) -> None:
    first, *later = deb12_kernels()
    v = dkms_version()
    transcript = []
    # 1. install: DKMS builds for the kernel whose headers are there
    out = root.check(f"apt-get install -y --no-install-recommends {deb} 2>&1; dkms status")
    transcript.append(out)
    assert re.search(rf"ssd-iosched/{re.escape(v)}, {re.escape(first)}, x86_64: installed", out), out
    mods = installed(root, first)
    assert set(mods) == set(MODULES), out
    for m, elv in MODULES.items():
        info = mods[m]
        assert info["vermagic"].split()[0] == first, info["vermagic"]
        assert info["version"] == v
        assert info["description"]
        if elv:
            assert info["elevator"] == elv, info
    # every ssdsim parameter says its unit (its name's suffix) and default
    parms = dict(p.split(":", 1) for p in mods["ssdsim"]["parm"].splitlines())
    assert len(parms) >= 15, parms
    units = {"_mb": "MiB", "_kb": "KiB", "_ns": "ns", "_percent": "percent", "_size": "bytes"}
    for name, desc in parms.items():
        assert "(default " in desc, (name, desc)
        for suffix, unit in units.items():
            if name.endswith(suffix):
                assert unit in desc, (name, desc)
    # 2. a kernel whose headers come later: DKMS's hook builds for it
    out = root.check("apt-get install -y --no-install-recommends /root/later/*.deb 2>&1; dkms status")
    transcript.append(out)
    for k in later:
        assert re.search(rf"ssd-iosched/{re.escape(v)}, {re.escape(k)}, x86_64: installed", out), out
        mods = installed(root, k)
        assert set(mods) == set(MODULES), out
        assert all(i["vermagic"].split()[0] == k for i in mods.values())
    # 3. remove: nothing of the project's is left under any kernel
    out = root.check(f"""
apt-get remove -y ssd-iosched-dkms 2>&1
echo "dkms status: [$(dkms status)]"
echo "left: [$(find /lib/modules/*/updates -name '*iosched*' -o -name 'ssdsim*' 2>/dev/null)]"
echo "source: [$(ls -d /usr/src/ssd-iosched-* /var/lib/dkms/ssd-iosched 2>/dev/null || true)]"
""")
    transcript.append(out)
    assert "dkms status: []" in out
    assert "left: []" in out
    assert "source: []" in out
    print("\n".join(transcript))
