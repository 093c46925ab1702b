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


@pytest.mark.parametrize("unread", [True, False])
def test_guest_that_died_is_reported_with_its_console(unread: bool) -> None:
    """QEMU exiting (a guest panic with -no-reboot) closes the agent socket,
    or resets it when our last bytes were unread: either way a VMError with
    QEMU's exit status and the console's tail, not a bare socket error."""
    import socket
    import time
    vm = vmbed.VM(vmbed.VMConfig(kernel="none"))
    ours, qemu = socket.socketpair()
    try:
        vm.console.write_text("boot\nKernel panic - not syncing: test\n")
        with (vm.workdir / "qemu.err").open("wb") as err:
            # still exiting when the socket goes, as QEMU is
            vm.proc = subprocess.Popen(["sh", "-c", "echo qemu-said >&2; sleep 0.5; exit 3"],
                                       stderr=err)
        vm.sock = ours
        if unread:
            ours.sendall(b"\nPING\n")
        qemu.close()
        with pytest.raises(vmbed.VMError) as e:
            vm._readline(time.monotonic() + 10, "the guest to boot")
        assert "status 3" in str(e.value)
        assert "qemu-said" in str(e.value)
        assert "Kernel panic - not syncing: test" in str(e.value)
        assert vm.dead
    finally:
        vm.cleanup()
