"""Pieces of the VM test bed that need no VM."""
from __future__ import annotations

import socket
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


def test_qemu_is_the_build_roots_or_vm_qemu(monkeypatch: pytest.MonkeyPatch) -> None:
    """VM_QEMU wins; else the build root's QEMU 10 through its loader (not
    bookworm's 7.2, which drops barriers under single-threaded TCG)."""
    vmbed.qemu_command.cache_clear()
    monkeypatch.setenv("VM_QEMU", "/opt/q/qemu-system-x86_64")
    try:
        assert vmbed.qemu_command() == ("/opt/q/qemu-system-x86_64",)
        vmbed.qemu_command.cache_clear()
        monkeypatch.delenv("VM_QEMU")
        root = subprocess.run([str(vmbed.ROOT / "scripts" / "buildroot"), "path"],
                              capture_output=True, text=True)
        if root.returncode != 0:
            with pytest.raises(vmbed.VMError, match="scripts/setup"):
                vmbed.qemu_command()
            return
        cmd = vmbed.qemu_command()
        r = root.stdout.strip()
        assert f"QEMU_MODULE_DIR={r}/usr/lib/x86_64-linux-gnu/qemu" in cmd
        assert cmd[cmd.index(f"{r}/usr/bin/qemu-system-x86_64") - 2] == "--library-path"
        out = subprocess.run([*cmd, "--version"], capture_output=True, text=True,
                             check=True).stdout
        major, minor = map(int, out.split("version ")[1].split(".")[:2])
        assert (major, minor) >= (8, 1), out  # the barrier fix
        # the test bed turns shadow doorbells off (VMConfig.shadow_doorbells)
        vmbed.nvme_has_dbcs.cache_clear()
        assert vmbed.nvme_has_dbcs()
    finally:
        vmbed.qemu_command.cache_clear()
        vmbed.nvme_has_dbcs.cache_clear()


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
def test_guest_that_died_is_reported_with_its_console(
        unread: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """QEMU exiting (a guest panic with -no-reboot) closes the agent socket,
    or resets it when our last bytes were unread: either way a VMError with
    QEMU's exit status and the console's tail, not a bare socket error."""
    import socket
    import time
    monkeypatch.setattr(vmbed, "CACHE", tmp_path)
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


def test_dead_guest_report_starts_at_the_first_kernel_problem(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A panic's last lines are often another CPU's backtrace: the report of
    a VM that died quotes the console from its first kernel problem on as
    well as its tail, and the whole console is kept after cleanup."""
    monkeypatch.setattr(vmbed, "CACHE", tmp_path)
    vm = vmbed.VM(vmbed.VMConfig(kernel="k"))
    lines = [f"[ {i}.0] boot line {i}" for i in range(100)]
    lines += ["[ 66.0] BUG: kernel NULL pointer dereference, address: 0000000000000008",
              "[ 66.1] RIP: 0010:k2_finish_request+0x1c/0x90 [k2_iosched]"]
    lines += [f"[ 66.{i}] other CPU frame {i}" for i in range(2, 80)]
    vm.console.write_text("\n".join(lines) + "\n")
    text = vm.console_tail()
    assert text.index("BUG: kernel NULL pointer") < text.index("other CPU frame 79")
    assert "k2_finish_request" in text and "boot line 97" in text
    assert "boot line 50" not in text
    quiet = vmbed.VM(vmbed.VMConfig(kernel="k"))
    quiet.console.write_text("\n".join(lines[:100]) + "\n")
    assert quiet.console_tail(10).splitlines() == lines[90:100]
    quiet.cleanup()
    vm.dead = True
    vm.cleanup()
    kept = list((tmp_path / "dead").glob("k-*.log"))
    assert len(kept) == 1 and "k2_finish_request" in kept[0].read_text()


def test_tcg_threads_single_but_for_the_debug_kernel(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """One host thread for the vCPUs (TCG's text-patching race), a thread
    per vCPU for the CPU-bound debug kernel, unless VM_TCG_THREAD says."""
    monkeypatch.delenv("VM_TCG_THREAD", raising=False)
    assert vmbed.tcg_threads("6.1.0-56-cloud-amd64") == "single"
    assert vmbed.tcg_threads("6.12.117+deb12-cloud-amd64") == "single"
    assert vmbed.tcg_threads("7.3.4+deb13-cloud-amd64") == "single"
    assert vmbed.tcg_threads("6.12.117-ssd-debug") == "multi"
    monkeypatch.setenv("VM_TCG_THREAD", "single")
    assert vmbed.tcg_threads("6.12.117-ssd-debug") == "single"
    monkeypatch.setenv("VM_TCG_THREAD", "multi")
    assert vmbed.tcg_threads("7.3.4+deb13-cloud-amd64") == "multi"


def test_tcg_threads_a_callers_choice(monkeypatch: pytest.MonkeyPatch) -> None:
    """A caller (the overhead suite) may ask for a threading; VM_TCG_THREAD
    still overrides it, and a word that is neither is an error."""
    monkeypatch.delenv("VM_TCG_THREAD", raising=False)
    assert vmbed.tcg_threads("6.1.0-56-cloud-amd64", "multi") == "multi"
    assert vmbed.tcg_threads("6.12.117-ssd-debug", "single") == "single"
    assert vmbed.tcg_threads("6.1.0-56-cloud-amd64", "") == "single"
    with pytest.raises(ValueError, match="TCG threading 'many': single or multi"):
        vmbed.tcg_threads("6.1.0-56-cloud-amd64", "many")
    monkeypatch.setenv("VM_TCG_THREAD", "single")
    assert vmbed.tcg_threads("6.1.0-56-cloud-amd64", "multi") == "single"


def test_icount_runs_single_threaded_tcg(monkeypatch: pytest.MonkeyPatch) -> None:
    """An instruction-counting clock: TCG in one thread whatever
    VM_TCG_THREAD says, sleep=off, even where KVM works; a shift out of
    0..10 is an error, and icount with VM_ACCEL=kvm is refused."""
    monkeypatch.setenv("VM_ACCEL", "tcg")
    monkeypatch.setenv("VM_TCG_THREAD", "multi")
    cfg = vmbed.VMConfig(kernel="6.12.117+deb12-cloud-amd64", icount=2)
    assert vmbed.accel_args(cfg) == ["-accel", "tcg,thread=single",
                                     "-icount", "shift=2,sleep=off"]
    assert "4 ns an instruction" in vmbed.describe_accel(cfg)
    assert vmbed.accel_args(vmbed.VMConfig(kernel="k")) == ["-accel", "tcg,thread=multi"]
    with pytest.raises(ValueError, match=r"icount shift 11: 0\.\.10"):
        vmbed.accel_args(vmbed.VMConfig(kernel="k", icount=11))
    # a machine whose KVM works: icount's guest still takes TCG
    monkeypatch.delenv("VM_ACCEL")
    monkeypatch.setattr(vmbed, "accel", lambda: "kvm")
    assert vmbed.accel_args(cfg) == ["-accel", "tcg,thread=single",
                                     "-icount", "shift=2,sleep=off"]
    assert vmbed.accel_args(vmbed.VMConfig(kernel="k")) == ["-accel", "kvm", "-cpu", "host"]
    monkeypatch.setenv("VM_ACCEL", "kvm")
    with pytest.raises(vmbed.VMError, match="needs TCG, and VM_ACCEL asks for KVM"):
        vmbed.accel_args(cfg)
    assert vmbed.accel_args(vmbed.VMConfig(kernel="k")) == ["-accel", "kvm", "-cpu", "host"]


def _agent_vm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[vmbed.VM, socket.socket]:
    """A VM object talking to the other end of a socket pair (the agent's
    side, played by the test), with no QEMU."""
    import socket
    monkeypatch.setattr(vmbed, "CACHE", tmp_path)
    vm = vmbed.VM(vmbed.VMConfig(kernel="none"))
    ours, agent = socket.socketpair()
    vm.sock = ours
    return vm, agent


def test_long_command_read_slowly_is_not_sent_again(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A 40 KB command line that the guest takes 5 s to read (a binary sent
    to a loaded guest) is sent once and runs: sending it again every 2 s
    filled the socket until a send timed out (CI, 7.3, test_flashfq's
    CLONE_IO binary)."""
    import base64
    import threading
    import time
    vm, agent = _agent_vm(tmp_path, monkeypatch)
    got: list[bytes] = []

    def guest() -> None:
        buf = b""
        start = time.monotonic()
        while buf.count(b"\n") < 2:          # the leading newline, the line
            time.sleep(0.25)
            buf += agent.recv(2048)
        got.append(buf)
        assert time.monotonic() - start > 4
        sid = buf.split()[1].decode()
        out = base64.b64encode(b"ran\n")
        agent.sendall(f"ACK {sid}\nBEGIN {sid}\n".encode() + out
                      + f"\nEND {sid} 0 {len(out)}\n".encode())
        agent.recv(100)                      # GOT

    t = threading.Thread(target=guest)
    t.start()
    try:
        r = vm.run("echo " + "x" * 30000, timeout=30)
        t.join()
        assert r.rc == 0 and r.out == "ran\n"
        assert vm.resends == 0
        assert len(got) == 1 and got[0].count(b"RUN") == 1
    finally:
        agent.close()
        vm.cleanup()


def test_guest_that_reads_nothing_is_a_vm_error(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A guest that stops reading its agent's port: a VMError that says so,
    not a bare socket timeout."""
    monkeypatch.setattr(vmbed, "ACK_SECONDS", 1.0)
    vm, agent = _agent_vm(tmp_path, monkeypatch)
    try:
        with pytest.raises(vmbed.VMError, match="did not read|take the command"):
            vm.run("echo " + "x" * 400000, timeout=5)
        assert vm.dead
    finally:
        agent.close()
        vm.cleanup()


def test_guest_that_stops_answering_is_reported_with_its_cpus(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A guest whose agent takes no command: the VMError gives each vCPU's
    instruction pointer from QEMU's monitor (QMP) and presses SysRq l and w,
    whose backtraces the console then holds (twice in a CI run the debug
    kernel's agent stopped answering with nothing on the console)."""
    import json
    import threading
    monkeypatch.setattr(vmbed, "ACK_SECONDS", 1.0)
    monkeypatch.setattr(vmbed, "SYSRQ_SECONDS", 0.0)
    vm, agent = _agent_vm(tmp_path, monkeypatch)
    regs = ("CPU#0\nRAX=0000000000000000 RBX=0000000000000001\n"
            "RIP=ffffffff81a0b2c3 RFL=00000246 [---Z-P-] CPL=0 II=0 A20=1 SMM=0 HLT=1\n"
            "CPU#1\nRAX=0000000000000002\n"
            "RIP=0000555555555000 RFL=00000202 [-------] CPL=3 II=0 A20=1 SMM=0 HLT=0\n")
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(str(vm.workdir / "qmp.sock"))
    srv.listen(1)
    asked: list[dict[str, object]] = []

    def monitor() -> None:
        conn, _ = srv.accept()
        f = conn.makefile("rw", encoding="utf-8", newline="\n")
        f.write('{"QMP": {"version": {}, "capabilities": []}}\n')
        f.flush()
        for line in f:
            msg = json.loads(line)
            asked.append(msg)
            if msg["execute"] == "human-monitor-command":
                f.write('{"event": "SOMETHING", "data": {}}\n')  # events come between
                f.write(json.dumps({"return": regs}) + "\n")
            else:
                f.write('{"return": {}}\n')
            f.flush()
        conn.close()

    t = threading.Thread(target=monitor)
    t.start()
    try:
        with pytest.raises(vmbed.VMError) as e:
            vm.run("true", timeout=5)
        assert "take the command" in str(e.value)
        assert ("vCPU 0: RIP ffffffff81a0b2c3, CPL 0, HLT 1; "
                "vCPU 1: RIP 0000555555555000, CPL 3, HLT 0") in str(e.value)
        keys = [[k["data"] for k in m["arguments"]["keys"]]  # type: ignore[index]
                for m in asked if m["execute"] == "send-key"]
        assert keys == [["alt", "sysrq", k] for k in ("9", "l", "w")]
    finally:
        agent.close()
        vm.cleanup()
        t.join(timeout=10)
        srv.close()


def test_guest_with_no_monitor_is_still_a_vm_error(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No QMP socket (QEMU gone, or a bed without one): the report says so
    in a line and the VMError is the agent's, as before."""
    monkeypatch.setattr(vmbed, "ACK_SECONDS", 1.0)
    vm, agent = _agent_vm(tmp_path, monkeypatch)
    try:
        with pytest.raises(vmbed.VMError, match="take the command; QEMU's monitor: "):
            vm.run("true", timeout=5)
    finally:
        agent.close()
        vm.cleanup()


def test_cpu_seconds_of_this_process_and_thread_grow() -> None:
    import os
    import threading
    pid, tid = os.getpid(), threading.get_native_id()
    a, b = vmbed.cpu_seconds(pid), vmbed.cpu_seconds(pid, tid)
    sum(i * i for i in range(2_000_000))
    assert vmbed.cpu_seconds(pid) > a >= 0
    assert vmbed.cpu_seconds(pid, tid) > b >= 0


def test_steal_seconds_is_the_cpu_lines_eighth_column() -> None:
    import os
    tck = os.sysconf("SC_CLK_TCK")
    text = "cpu  10 0 20 300 4 0 1 250 0 0\ncpu0 5 0 10 150 2 0 1 125 0 0\n"
    assert vmbed.steal_seconds(text) == 250 / tck
    assert vmbed.steal_seconds("intr 1 2 3\n") == 0.0


def test_host_times_of_a_running_process_and_of_none(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """host_times() reads QEMU's process: here a sleep, which has no TCG
    threads; None before start and after the process ended."""
    monkeypatch.setattr(vmbed, "CACHE", tmp_path)
    vm = vmbed.VM(vmbed.VMConfig(kernel="none"))
    assert vm.host_times() is None
    vm.proc = subprocess.Popen(["sleep", "30"])
    try:
        h = vm.host_times()
        assert h is not None and h["vcpus"] == {}
        assert isinstance(h["qemu"], float) and h["qemu"] >= 0
        assert isinstance(h["steal"], float) and isinstance(h["clock"], float)
    finally:
        vm.proc.kill()
        vm.proc.wait()
    assert vm.host_times() is None
    vm.proc = None
    vm.cleanup()
