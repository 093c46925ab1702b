"""Loop devices for the tests (this machine, as root)."""
from __future__ import annotations

import os
import shutil
import struct
import subprocess
import time
from pathlib import Path

import pytest


def sh(*cmd: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(cmd), capture_output=True, text=True)


def loop_unavailable() -> str | None:
    if os.geteuid() != 0:
        return "needs root to create loop devices"
    if not shutil.which("losetup"):
        return "losetup is not installed"
    return None


class Loop:
    def __init__(self, tmp: Path, size_mb: int = 64, mbr: bool = False):
        self.img = tmp / "disk.img"
        with self.img.open("wb") as f:
            f.truncate(size_mb << 20)
            if mbr:
                f.seek(446)
                # two primary Linux partitions: 1 MiB-17 MiB and 17 MiB-33 MiB
                for start in (2048, 2048 + 32768):
                    f.write(struct.pack("<B3sB3sII", 0, b"\0\0\0", 0x83, b"\0\0\0",
                                        start, 32768))
                f.seek(510)
                f.write(b"\x55\xaa")
        r = sh("losetup", "--find", "--show", *(["--partscan"] if mbr else []), str(self.img))
        if r.returncode != 0:
            pytest.skip(f"cannot create a loop device: {r.stderr.strip()}")
        self.path = r.stdout.strip()
        self.name = self.path.rsplit("/", 1)[-1]
        self.mnt: Path | None = None

    def mkfs(self, dev: str | None = None) -> None:
        r = sh("mkfs.ext4", "-q", "-F", dev or self.path)
        if r.returncode != 0:
            pytest.skip(f"mkfs.ext4 failed: {r.stderr.strip()}")

    def mount(self, where: Path) -> None:
        where.mkdir()
        r = sh("mount", self.path, str(where))
        if r.returncode != 0:
            pytest.skip(f"cannot mount a loop device here: {r.stderr.strip()}")
        self.mnt = where

    def close(self) -> None:
        if self.mnt is not None:
            sh("umount", str(self.mnt))
        for _ in range(20):
            if sh("losetup", "-d", self.path).returncode == 0:
                break
            time.sleep(0.1)
