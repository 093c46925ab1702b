"""Pieces of the VM test bed that need no VM."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from scripts import vmbed


def test_accel_env_override(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VM_ACCEL", "kvm")
    assert vmbed.accel() == "kvm"
    monkeypatch.setenv("VM_ACCEL", "tcg")
    assert vmbed.accel() == "tcg"


def test_accel_refuses_nested_pvm(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("VM_ACCEL", raising=False)
    if Path("/sys/module/kvm_pvm").exists():
        assert vmbed.accel() == "tcg"
    elif not Path("/dev/kvm").exists():
        assert vmbed.accel() == "tcg"


def test_overlay_carries_modules_and_index(tmp_path: Path) -> None:
    kernel = subprocess.run([str(vmbed.ROOT / "scripts" / "kernels"), "test"],
                            capture_output=True, text=True, check=True).stdout.split()[0]
    built = vmbed.ROOT / ".build" / kernel
    if not list(built.rglob("*.ko")):
        subprocess.run(["make", "-s", "-C", str(vmbed.ROOT), f"KVER={kernel}", "modules"],
                       check=True, capture_output=True)
    out = tmp_path / "ov.cpio"
    names = vmbed.overlay_initramfs(kernel, built, out)
    assert "fifo-iosched" in names
    listing = subprocess.run(["cpio", "-t", "--quiet"], stdin=out.open("rb"),
                             capture_output=True, text=True, check=True).stdout.split()
    assert f"lib/modules/{kernel}/extra/fifo-iosched.ko" in listing
    dep = subprocess.run(["cpio", "-i", "--to-stdout", "--quiet",
                          f"lib/modules/{kernel}/modules.dep"], stdin=out.open("rb"),
                         capture_output=True, text=True, check=True).stdout
    assert "extra/fifo-iosched.ko:" in dep
    assert "null_blk.ko:" in dep
