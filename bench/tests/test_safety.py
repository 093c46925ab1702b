"""The device safety checks, on real loop devices of this machine (skipped,
with the reason, where loop devices cannot be made)."""
from __future__ import annotations

import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench import device as devmod
from bench.device import DeviceError, UnsafeDevice
from bench.target import LocalTarget
from bench.tests.loopdev import Loop, loop_unavailable, sh

T = LocalTarget()


@pytest.fixture
def loop(tmp_path: Path) -> Iterator[Loop]:
    why = loop_unavailable()
    if why:
        pytest.skip(why)
    lo = Loop(tmp_path)
    yield lo
    lo.close()


@pytest.fixture
def partitioned(tmp_path: Path) -> Iterator[Loop]:
    why = loop_unavailable()
    if why:
        pytest.skip(why)
    lo = Loop(tmp_path, mbr=True)
    for i in range(50):
        if Path(f"/sys/class/block/{lo.name}p2").exists() and Path(f"/dev/{lo.name}p1").exists():
            break
        if i == 5 and shutil.which("partx"):
            # some kernels do not scan at LOOP_CONFIGURE: add them (BLKPG)
            sh("partx", "-a", lo.path)
        time.sleep(0.1)
    else:
        lo.close()
        pytest.skip("the kernel did not scan the loop device's partitions")
    yield lo
    lo.close()


def test_blank_loop_device_is_accepted(loop: Loop) -> None:
    assert devmod.resolve(T, loop.path) == loop.name
    occ = devmod.check_safe(T, loop.name, None)
    assert occ.problems() == []


def test_file_system_is_refused_with_what_would_be_lost(loop: Loop) -> None:
    loop.mkfs()
    with pytest.raises(UnsafeDevice) as e:
        devmod.check_safe(T, loop.name, None)
    msg = str(e.value)
    assert f"refusing to write to {loop.path}" in msg
    assert "ext4 file system" in msg
    assert f"--destroy-data {loop.path}" in msg


def test_destroy_data_must_name_the_same_device(loop: Loop) -> None:
    loop.mkfs()
    occ = devmod.check_safe(T, loop.name, loop.path)
    assert occ.signatures[loop.name].startswith("ext4")
    assert devmod.check_safe(T, loop.name, loop.name).problems()   # bare name works too
    with pytest.raises(UnsafeDevice, match="must be the same device"):
        devmod.check_safe(T, loop.name, "/dev/vda" if loop.name != "vda" else "/dev/sda")


def test_mounted_device_names_its_mount_point(loop: Loop, tmp_path: Path) -> None:
    loop.mkfs()
    loop.mount(tmp_path / "mnt")
    with pytest.raises(UnsafeDevice) as e:
        devmod.check_safe(T, loop.name, None)
    assert f"{loop.path} is mounted on {tmp_path / 'mnt'}" in str(e.value)


def test_partitions_are_listed_with_their_contents(partitioned: Loop) -> None:
    lo = partitioned
    lo.mkfs(f"/dev/{lo.name}p1")
    occ = devmod.occupancy(T, lo.name)
    assert occ.partitions == [f"{lo.name}p1", f"{lo.name}p2"]
    assert occ.signatures[f"{lo.name}p1"].startswith("ext4")
    assert occ.signatures[lo.name] == "dos partition table"
    with pytest.raises(UnsafeDevice) as e:
        devmod.check_safe(T, lo.name, None)
    msg = str(e.value)
    assert f"2 partition(s): /dev/{lo.name}p1 (ext4 file system" in msg
    assert f"/dev/{lo.name}p2" in msg


def test_a_partition_is_not_a_benchmark_device(partitioned: Loop) -> None:
    with pytest.raises(DeviceError, match=f"is a partition of {partitioned.name}"):
        devmod.resolve(T, f"/dev/{partitioned.name}p1")


def test_without_blkid_the_builtin_probe_finds_ext4(loop: Loop) -> None:
    """The VM's busybox has no blkid: the magic-number probe stands in."""
    loop.mkfs()
    assert devmod.signature(T, loop.name, have_blkid=False) == "ext2/3/4 file system"


def test_root_disk_is_recognised() -> None:
    r = sh("findmnt", "-n", "-o", "SOURCE", "/")
    src = r.stdout.strip()
    if r.returncode != 0 or not src.startswith("/dev/"):
        pytest.skip(f"the root file system is not on a block device ({src or r.stderr})")
    real = os.path.realpath(src).rsplit("/", 1)[-1]
    disk = real
    part = Path(f"/sys/class/block/{real}/partition")
    if part.exists():
        disk = Path(f"/sys/class/block/{real}").resolve().parent.name
    elif Path(f"/sys/class/block/{real}/slaves").is_dir() and \
            list(Path(f"/sys/class/block/{real}/slaves").iterdir()):
        pytest.skip(f"root is on a stacked device ({real}); not checked here")
    occ = devmod.occupancy(T, disk)
    assert occ.root
    assert "it holds the root file system (/)" in occ.problems()


def test_missing_device_is_a_clear_error() -> None:
    with pytest.raises(DeviceError, match="/dev/nvme9n9: no such block device"):
        devmod.resolve(T, "/dev/nvme9n9")


def test_magic_probe() -> None:
    head = bytearray(68 * 1024)
    assert devmod._magic_signature(bytes(head)) == ""
    gpt = bytearray(head)
    gpt[512:520] = b"EFI PART"
    assert devmod._magic_signature(bytes(gpt)) == "gpt partition table"
    xfs = bytearray(head)
    xfs[0:4] = b"XFSB"
    assert devmod._magic_signature(bytes(xfs)) == "xfs file system"
    swap = bytearray(head)
    swap[4086:4096] = b"SWAPSPACE2"
    assert devmod._magic_signature(bytes(swap)) == "swap"
    mbr = bytearray(head)
    mbr[510:512] = b"\x55\xaa"
    assert devmod._magic_signature(bytes(mbr)) == ""          # no partition entry
    mbr[446 + 4] = 0x83
    assert devmod._magic_signature(bytes(mbr)) == "dos partition table"


def test_blkid_export_descriptions() -> None:
    assert devmod._describe_blkid("TYPE=ext4\nUSAGE=filesystem\nLABEL=data\n") == \
        "ext4 file system, label 'data'"
    assert devmod._describe_blkid("PTUUID=x\nPTTYPE=gpt\n") == "gpt partition table"
    assert devmod._describe_blkid("TYPE=crypto_LUKS\nUSAGE=crypto\n") == \
        "crypto_LUKS encrypted volume"
