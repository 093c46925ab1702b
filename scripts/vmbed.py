"""The VM test bed: boot a Debian test kernel under QEMU with the project's
freshly built modules and run shell commands inside it.

Design (measured and argued in tests/README.md, "The VM test bed"):
- A hand-made initramfs, not a shared root: busybox, fio and its libraries,
  e2fsprogs, and the kernel's own modules the tests need, packed once per
  kernel into .cache/vm/<release>/base.cpio.  The project's modules go into
  a small second cpio appended per boot (the kernel unpacks concatenated
  archives), so a rebuild never repacks the base.
- Software emulation (TCG) unless KVM is known to work: on this workplace
  /dev/kvm is a nested PVM hypervisor (kvm_pvm loaded) that hangs a stock
  kernel.  VM_ACCEL=kvm|tcg overrides.
- Devices: a plain NVMe controller (serial "fast", nvme0n1), a second NVMe
  controller whose backing drive QEMU throttles to a fixed IOPS, so that
  requests queue inside the device (serial "throttled"; /dev/vm-throttled),
  and null_blk (loaded by the tests with the parameters they need).
- Commands travel over a second serial port (ttyS1) to a small agent
  (scripts/guest/agent), which acknowledges each at once; the kernel console
  (ttyS0) goes to a log file.  (A virtio console was tried: on 6.1 it lost
  the first lines now and then.)
"""

from __future__ import annotations

import base64
import fcntl
import functools
import gzip
import hashlib
import json
import os
import re
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import termios
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

ROOT = Path(__file__).resolve().parent.parent
GUEST = ROOT / "scripts" / "guest"
CACHE = Path(os.environ.get("BUILD_CACHE", ROOT / ".cache")) / "vm"

# Kernel modules every VM carries (with their dependencies).
GUEST_KMODS = ["null_blk", "kyber-iosched", "bfq", "mq-deadline", "loop",
               "xfs", "f2fs", "nvmet-tcp", "nvme-tcp"]
# Userspace programs every VM carries (with their shared libraries).
GUEST_PROGS = ["/usr/bin/fio", "/sbin/mkfs.ext4", "/sbin/e2fsck",
               "/sbin/mke2fs", "/sbin/mkfs.xfs", "/usr/bin/lttng", "/usr/bin/lttng-sessiond",
               "/usr/lib/x86_64-linux-gnu/lttng/libexec/lttng-consumerd",
               "/bin/udevadm", "/bin/kmod"]
# Other names of those programs (link -> program): udev's daemon is udevadm
# run under its own name, as on Debian.  Nothing starts it at boot: the
# tests of the example udev rule do (tests/vm/test_udev.py).  kmod is
# there for the modprobe the kernel runs (request_module) in those tests;
# everywhere else modprobe is busybox's.
GUEST_LINKS = {"/lib/systemd/systemd-udevd": "/bin/udevadm"}
# Data files those programs need.
GUEST_FILES = ["/usr/share/xml/lttng/session.xsd"]


# Kernel log lines that mean a kernel problem (a test during which one
# appears fails; a dead VM's report starts at the first of them).
KERNEL_PROBLEM = re.compile(
    r"WARNING:|BUG:|Oops|Call Trace|general protection|kernel BUG|Kernel panic|"
    r"blocked for more than|hung_task|soft lockup|rcu_sched self-detected|"
    r"rcu: INFO|list_(add|del) corruption|UBSAN|KASAN|refcount_t:")


# How long the guest's agent may take to acknowledge a command.
ACK_SECONDS = 60.0
# How long a guest that stopped answering gets to print each SysRq's
# backtraces (VM.stuck_report())
SYSRQ_SECONDS = 3.0


class VMError(RuntimeError):
    """The VM could not be built, booted, or stopped answering."""


@dataclass
class Result:
    rc: int
    out: str

    @property
    def ok(self) -> bool:
        return self.rc == 0


@dataclass
class VMConfig:
    kernel: str
    smp: int = 2
    mem_mb: int = 2048
    nvme_mb: int = 1024
    throttle_iops: int = 250
    nvme_queues: int = 4
    modules_dir: Path | None = None
    append: str = ""
    extra_qemu: list[str] = field(default_factory=list)
    # TCG threading, 'single' or 'multi'; '': tcg_threads()'s choice for
    # the kernel (VM_TCG_THREAD overrides either)
    tcg_thread: str = ""
    # QEMU's -icount shift (0..10): the guest's clock counts instructions,
    # 2^shift ns each, so what the guest measures in time is a count of
    # instructions, whatever else the host runs (accel_args()); None: off
    icount: int | None = None
    # Offer the Doorbell Buffer Config (shadow doorbells) on the emulated
    # NVMe controllers (QEMU's dbcs).  Off, as on real SSDs: Debian's 6.1
    # nvme-pci re-sends the buffer's address only after nvme_wait_freeze() in
    # nvme_reset_work() (6.12 before unquiescing), while QEMU stops reading
    # the buffer at a reset.  The shadow tail and event index are zeroed then,
    # so the first submission after the reset rings the MMIO doorbell and
    # every later one skips it until the buffer is set again.  Requests
    # dispatched in a second batch during the freeze never reach the device,
    # the freeze never ends, and the I/O timeout removes the controller.  Any
    # elevator meets it, by chance (requeues after the cancel come back in
    # batches): with it on, test_generic's two resets under verified writes
    # hung in 2 CI runs of 2 (fifo-ref in one, k2 in the other) and in the
    # first reset of 1 boot of 5 with fifo-ref; off, 0 of 40 resets hung
    # (fifo-ref, k2, flashfq, cars).
    shadow_doorbells: bool = False


def accel() -> str:
    """'kvm' where it works, else 'tcg'."""
    env = os.environ.get("VM_ACCEL")
    if env in ("kvm", "tcg"):
        return env
    if Path("/sys/module/kvm_pvm").exists():
        return "tcg"  # nested PVM: a stock kernel hangs under it
    if os.access("/dev/kvm", os.R_OK | os.W_OK):
        return "kvm"
    return "tcg"


def tcg_threads(kernel: str, want: str = "") -> str:
    """QEMU's TCG threading for a guest running @kernel (a release):
    'single' (the vCPUs take turns in one host thread) or 'multi' (a host
    thread per vCPU); @want (a caller's choice, e.g. the overhead suite's)
    if given, and VM_TCG_THREAD=multi|single overrides both.  Under
    multi-threaded TCG a guest now and then executes the INT3 of a kernel
    text patch (a static key) after the patching CPU has put the new
    instruction back and synced every CPU: 7.3 died of "Oops: int3" in
    about 1 boot in 20 here, and once in a CI test; a 6.1 guest in CI
    spun at asm_exc_int3 on a jmp of __schedule being patched while a test
    enabled trace events, until RCU stalled and the VM stopped answering.
    With one thread no vCPU runs while another patches code: the whole
    7.3 VM suite, timing tests included, took 10.2 min that way against
    9.5-9.8 multi-threaded.  The debug kernel (-ssd-debug) stays
    multi-threaded: under KASAN and lockdep its guest is CPU-bound, and its
    tier already takes half an hour with both host cores."""
    env = os.environ.get("VM_TCG_THREAD")
    if env in ("single", "multi"):
        return env
    if want:
        if want not in ("single", "multi"):
            raise ValueError(f"TCG threading {want!r}: single or multi")
        return want
    return "multi" if kernel.endswith("-ssd-debug") else "single"


ICOUNT_SHIFTS = range(0, 11)


def accel_args(cfg: VMConfig) -> list[str]:
    """QEMU's -accel arguments for @cfg, and -icount's when it asks for an
    instruction-counting clock: then TCG with one thread for every vCPU
    (QEMU runs icount only so; VM_TCG_THREAD does not apply) and
    sleep=off, so that an idle guest's clock jumps to its next timer
    instead of following the host's: a guest's figure of time is then the
    same whatever the host's load or speed.  KVM runs real CPUs, with no
    icount: such a guest takes TCG even where KVM works, and only an
    explicit VM_ACCEL=kvm is refused."""
    if cfg.icount is not None:
        if cfg.icount not in ICOUNT_SHIFTS:
            raise ValueError(f"icount shift {cfg.icount}: 0..{ICOUNT_SHIFTS[-1]}")
        if os.environ.get("VM_ACCEL") == "kvm":
            raise VMError("an instruction-counting clock (icount) needs TCG, and VM_ACCEL "
                          "asks for KVM")
        return ["-accel", "tcg,thread=single", "-icount", f"shift={cfg.icount},sleep=off"]
    if accel() == "kvm":
        return ["-accel", "kvm", "-cpu", "host"]
    return ["-accel", f"tcg,thread={tcg_threads(cfg.kernel, cfg.tcg_thread)}"]


def describe_accel(cfg: VMConfig) -> str:
    """How @cfg's vCPUs run, for reports: 'KVM', 'TCG, single-threaded',
    'TCG, icount shift 2 (the guest's clock: 4 ns an instruction)'."""
    if cfg.icount is not None:
        return (f"TCG, icount shift {cfg.icount} (the guest's clock: {1 << cfg.icount} ns "
                "an instruction)")
    if accel() == "kvm":
        return "KVM"
    return f"TCG, {tcg_threads(cfg.kernel, cfg.tcg_thread)}-threaded"


def _run_bytes(cmd: list[str], **kw: object) -> bytes:
    p = subprocess.run(cmd, capture_output=True, **kw)  # type: ignore[call-overload]
    if p.returncode != 0:
        raise VMError(f"{' '.join(cmd)} failed: {p.stderr.decode().strip()}")
    return bytes(p.stdout)


def _run(cmd: list[str], **kw: object) -> str:
    return _run_bytes(cmd, **kw).decode()


def _libs(prog: str) -> list[str]:
    out = _run(["ldd", prog])
    libs = []
    for line in out.splitlines():
        m = re.search(r"(/\S+) \(0x", line)
        if m:
            libs.append(m.group(1))
    return libs


def _copy_into(root: Path, path: str) -> None:
    dst = root / path.lstrip("/")
    dst.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(os.path.realpath(path), dst)


@functools.lru_cache(maxsize=None)
def kernel_root(kernel: str) -> Path:
    """Where @kernel's image and modules live: / for a kernel installed on
    this machine, the trixie build root for the one Debian 12 cannot install
    (scripts/buildroot).  Asked once per kernel (a boot needs it four
    times)."""
    out = _run([str(ROOT / "scripts" / "kernels"), "root", kernel]).strip()
    return Path(out or "/")


@functools.lru_cache(maxsize=None)
def qemu_command() -> tuple[str, ...]:
    """The command that runs QEMU: VM_QEMU (a path or name, e.g.
    qemu-system-x86_64 for this machine's) if set, else trixie's QEMU 10.0
    from the build root (scripts/buildroot qemu).  Not bookworm's 7.2: its
    TCG leaves out the guest's memory barriers when one host thread runs
    the vCPUs (as here, tcg_threads()), though QEMU's I/O threads read and
    write guest memory meanwhile; upstream emits them since 8.1 ("tcg: Do
    not elide memory barriers for !CF_PARALLEL in system mode").  NVMe's
    shadow doorbells depend on one: the driver stores the new SQ tail in
    the doorbell buffer, then reads the controller's event index to decide
    whether to ring the MMIO doorbell.  Without the barrier the read could
    pass the store, both sides missed the update, and a burst of requests
    sat in the SQ until the 30 s I/O timeout.  A controller reset under
    fio (iodepth 32, 2 jobs) issues exactly such a burst: on 6.12 with the
    scheduler none, 7.2 lost it in 4 boots of 4 within the first three
    resets (guest memory then: SQ 1's shadow tail 245, its event index 213,
    32 commands unseen; SQ 2 the same); multi-threaded TCG, 0 of 15; 10.0,
    single-threaded, 0 of 15."""
    env = os.environ.get("VM_QEMU")
    if env:
        return (env,)
    try:
        out = _run([str(ROOT / "scripts" / "buildroot"), "qemu"])
    except VMError as e:
        raise VMError(f"no QEMU in the trixie build root: run scripts/setup ({e})") from None
    return tuple(out.splitlines())


@functools.lru_cache(maxsize=None)
def nvme_has_dbcs() -> bool:
    """Whether QEMU's NVMe controller has the dbcs property (10.0 on; 7.2
    always offers shadow doorbells)."""
    return "dbcs=" in _run([*qemu_command(), "-device", "nvme,help"])


def kernel_image(kernel: str) -> Path:
    """@kernel's bootable image: /boot/vmlinuz-<release>, or, unpacked from
    Debian 13's linux-binary package, usr/lib/modules/<release>/vmlinuz."""
    kroot = kernel_root(kernel)
    for p in (kroot / "boot" / f"vmlinuz-{kernel}",
              kroot / "usr" / "lib" / "modules" / kernel / "vmlinuz"):
        if p.exists():
            return p
    raise VMError(f"no image for kernel {kernel} under {kroot}: run scripts/setup")


def _kmod_files(kernel: str) -> list[Path]:
    """The guest's kernel modules and their dependencies, as paths relative
    to the kernel's root (lib/modules/<release>/...)."""
    kroot = kernel_root(kernel)
    files: list[Path] = []
    for mod in GUEST_KMODS:
        # (modprobe -d / would print //lib/...)
        base = ["-d", str(kroot)] if kroot != Path("/") else []
        p = subprocess.run(["modprobe", *base, "-S", kernel, "--show-depends", mod],
                           capture_output=True, text=True)
        for line in p.stdout.splitlines():
            parts = line.split()
            if len(parts) >= 2 and parts[0] == "insmod":
                files.append(Path(parts[1]).relative_to(kroot))
    return list(dict.fromkeys(files))


def _install_kmod(root: Path, kroot: Path, rel: Path) -> None:
    """Copy module @kroot/@rel into the staging tree @root at @rel,
    decompressed (busybox insmod)."""
    src = kroot / rel
    dst = root / rel
    for ext in (".xz", ".zst", ".gz"):
        if dst.name.endswith(ext):
            dst = dst.with_name(dst.name[: -len(ext)])
    dst.parent.mkdir(parents=True, exist_ok=True)
    unpack = {".xz": "xz", ".zst": "zstd", ".gz": "gzip"}.get(src.suffix)
    if unpack:
        dst.write_bytes(_run_bytes([unpack, "-dc", str(src)]))
    else:
        shutil.copy2(src, dst)


def _cpio(staging: Path, out: Path) -> None:
    files = _run(["find", ".", "-mindepth", "1"], cwd=staging)
    p = subprocess.run(["cpio", "-o", "-H", "newc", "-R", "0:0", "--quiet"],
                       input=files.encode(), cwd=staging, capture_output=True)
    if p.returncode != 0:
        raise VMError(f"cpio failed: {p.stderr.decode()}")
    out.write_bytes(p.stdout)


def _base_key(kernel: str) -> str:
    h = hashlib.sha256()
    h.update(kernel.encode())
    for f in sorted(GUEST.iterdir()):
        h.update(f.name.encode() + f.read_bytes())
    for prog in GUEST_PROGS + GUEST_FILES:
        st = os.stat(os.path.realpath(prog))
        h.update(f"{prog}:{st.st_size}:{st.st_mtime_ns}".encode())
    kdir = kernel_root(kernel) / "lib" / "modules" / kernel
    h.update(str(kdir.stat().st_mtime_ns).encode())
    h.update(" ".join(GUEST_KMODS).encode())
    h.update(repr(sorted(GUEST_LINKS.items())).encode())
    return h.hexdigest()[:16]


def base_initramfs(kernel: str) -> Path:
    """The per-kernel base initramfs, built once and cached."""
    kernel_image(kernel)  # raises if there is none
    kroot = kernel_root(kernel)
    d = CACHE / kernel
    key = _base_key(kernel)
    out = d / f"base-{key}.cpio"
    if out.exists():
        return out
    d.mkdir(parents=True, exist_ok=True)
    for old in d.glob("base-*.cpio"):
        old.unlink()
    with tempfile.TemporaryDirectory(dir=d) as tmp:
        root = Path(tmp)
        for sub in ("bin", "sbin", "usr/bin", "usr/sbin", "proc", "sys", "dev",
                    "tmp", "etc", "root", "mnt", "var/tmp", "var/run/lttng"):
            (root / sub).mkdir(parents=True, exist_ok=True)
        shutil.copy2("/bin/busybox", root / "bin" / "busybox")
        (root / "bin" / "sh").symlink_to("busybox")
        for prog in GUEST_PROGS:
            _copy_into(root, prog)
            for lib in _libs(prog):
                if not (root / lib.lstrip("/")).exists():
                    _copy_into(root, lib)
        for f in GUEST_FILES:
            _copy_into(root, f)
        for link, target in GUEST_LINKS.items():
            (root / link.lstrip("/")).parent.mkdir(parents=True, exist_ok=True)
            (root / link.lstrip("/")).symlink_to(target)
        # fio looks its ioengines up by name; libaio and io_uring are built in.
        kmods = _kmod_files(kernel)
        for m in kmods:
            _install_kmod(root, kroot, m)
        mdir = kroot / "lib" / "modules" / kernel
        for f in ("modules.order", "modules.builtin", "modules.builtin.modinfo"):
            if (mdir / f).exists():
                dst = root / "lib" / "modules" / kernel / f
                dst.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(mdir / f, dst)
        _run(["depmod", "-b", str(root), kernel])
        for name in ("init", "agent"):
            shutil.copy2(GUEST / name, root / name)
            os.chmod(root / name, 0o755)
        (root / "etc" / "passwd").write_text("root:x:0:0:root:/root:/bin/sh\n")
        (root / "etc" / "group").write_text("root:x:0:\n")
        (root / "etc" / "mtab").symlink_to("/proc/mounts")
        _cpio(root, out)
    return out


def overlay_initramfs(kernel: str, modules_dir: Path, out: Path) -> list[str]:
    """A cpio with the project's modules under /lib/modules/<kernel>/extra
    and the module index rebuilt to include them.  Returns module names."""
    kos = sorted(modules_dir.rglob("*.ko"))
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        # depmod needs the whole tree: rebuild the index over base + extra
        base = base_initramfs(kernel)
        subprocess.run(["cpio", "-i", "-d", "--quiet", "lib/modules/*"],
                       stdin=base.open("rb"), cwd=root, check=True)
        extra = root / "lib" / "modules" / kernel / "extra"
        extra.mkdir(parents=True, exist_ok=True)
        for ko in kos:
            shutil.copy2(ko, extra / ko.name)
        _run(["depmod", "-b", str(root), kernel])
        # only the new files go into the overlay
        keep = root / "keep"
        kdir = keep / "lib" / "modules" / kernel
        kdir.mkdir(parents=True)
        shutil.copytree(extra, kdir / "extra")
        for f in (root / "lib" / "modules" / kernel).glob("modules.*"):
            shutil.copy2(f, kdir / f.name)
        _cpio(keep, out)
    return [k.stem for k in kos]


def cpu_seconds(pid: int, tid: int | None = None) -> float:
    """User and system time of process @pid (all its threads), or of its
    thread @tid, in s."""
    path = f"/proc/{pid}/stat" if tid is None else f"/proc/{pid}/task/{tid}/stat"
    f = Path(path).read_text().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")


def steal_seconds(stat_text: str) -> float:
    """The host's steal time so far, summed over its CPUs, in s: the
    steal column of /proc/stat's text (its first line, "cpu ...")."""
    f = stat_text.split("\n", 1)[0].split()
    return int(f[8]) / os.sysconf("SC_CLK_TCK") if f and f[0] == "cpu" and len(f) > 8 else 0.0


class VM:
    """A running test VM.  Use as a context manager."""

    def __init__(self, cfg: VMConfig):
        self.cfg = cfg
        self.workdir = Path(tempfile.mkdtemp(prefix="vmbed-"))
        self.console = self.workdir / "console.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self.sock: socket.socket | None = None
        self._buf = b""
        self._seq = 0
        self.boot_seconds = 0.0
        self.modules: list[str] = []
        self.dead = False
        self.resends = 0           # command lines the agent had to get twice
        # VM_AGENT_LOG=1: keep what the agent sent in <workdir>/agent.log
        self._trace = (self.workdir / "agent.log").open("wb", buffering=0) \
            if os.environ.get("VM_AGENT_LOG") else None

    # -- lifetime -----------------------------------------------------------
    def start(self, timeout: float = 180.0) -> "VM":
        cfg = self.cfg
        t0 = time.monotonic()
        base = base_initramfs(cfg.kernel)
        initrd = self.workdir / "initrd.cpio"
        with initrd.open("wb") as f:
            f.write(base.read_bytes())
            if cfg.modules_dir is not None:
                ov = self.workdir / "overlay.cpio"
                self.modules = overlay_initramfs(cfg.kernel, cfg.modules_dir, ov)
                f.write(ov.read_bytes())
        drives = []
        for name in ("fast", "throttled"):
            img = self.workdir / f"{name}.img"
            with img.open("wb") as f:
                f.truncate(cfg.nvme_mb << 20)
            drives.append(img)
        agent_path = self.workdir / "agent.sock"
        dbcs = f",dbcs={'on' if cfg.shadow_doorbells else 'off'}" if nvme_has_dbcs() else ""
        cmd = [
            *qemu_command(), "-machine", "q35", *accel_args(cfg),
            "-smp", str(cfg.smp), "-m", str(cfg.mem_mb),
            "-kernel", str(kernel_image(cfg.kernel)), "-initrd", str(initrd),
            "-append", "console=ttyS0 rdinit=/init panic=-1 oops=panic "
            # nvme_core.multipath=N: a fabrics namespace (the tests'
            # loopback NVMe/TCP controller) is then a plain disk whose
            # queue has an elevator, not a bio-based multipath head
            # sysrq_always_enabled: stuck_report()'s SysRq l and w
            "nokaslr loglevel=5 nvme_core.multipath=N sysrq_always_enabled " + cfg.append,
            # debug-threads: the vCPU threads are named ("CPU 0/TCG"), which
            # host_times() reads
            "-name", "ssd-iosched,debug-threads=on",
            "-display", "none", "-no-reboot", "-nodefaults",
            "-serial", f"file:{self.console}",
            "-chardev", f"socket,id=agent,path={agent_path},server=on,wait=off",
            "-serial", "chardev:agent",
            "-qmp", f"unix:{self.workdir / 'qmp.sock'},server=on,wait=off",
            "-drive", f"file={drives[0]},if=none,id=nvfast,format=raw,"
            "cache=unsafe,aio=threads",
            "-device", f"nvme,serial=fast0,drive=nvfast,"
            f"max_ioqpairs={cfg.nvme_queues}{dbcs}",
            "-drive", f"file={drives[1]},if=none,id=nvthrot,format=raw,"
            f"cache=unsafe,aio=threads,throttling.iops-total={cfg.throttle_iops}",
            "-device", f"nvme,serial=throttled1,drive=nvthrot,"
            f"max_ioqpairs={cfg.nvme_queues}{dbcs}",
        ]
        cmd += cfg.extra_qemu
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL,
                                     stderr=(self.workdir / "qemu.err").open("wb"))
        deadline = t0 + timeout
        while True:  # until QEMU has bound the socket and listens on it
            self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                self.sock.connect(str(agent_path))
                break
            except (FileNotFoundError, ConnectionRefusedError):
                self.sock.close()
                self._check_alive()
                if time.monotonic() > deadline:
                    raise VMError("QEMU's agent socket did not accept a connection") from None
                time.sleep(0.02)
        while True:  # the greeting can be lost too: ask again
            ping = min(deadline, time.monotonic() + 3.0)
            line = self._readline_or_none(ping, "the guest to boot", fatal=ping >= deadline)
            if line is not None and line.startswith("READY"):
                break
            if line is None:
                self._send(b"\nPING\n")
        self.boot_seconds = time.monotonic() - t0
        return self

    def stop(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.kill()
            self.proc.wait()
            self.proc = None

    def host_times(self) -> dict[str, Any] | None:
        """What the host has given this VM so far, for a caller that takes
        the difference over a window: "clock" (the host's monotonic clock),
        QEMU's CPU time ("qemu"), each TCG vCPU thread's by its name ("CPU
        0/TCG"; single-threaded TCG has one, "ALL CPUs/TCG"), and the
        host's steal time over its CPUs ("steal"), all in s.  None when
        QEMU is not running."""
        if self.proc is None or self.proc.poll() is not None:
            return None
        pid = self.proc.pid
        try:
            vcpus: dict[str, float] = {}
            for task in Path(f"/proc/{pid}/task").iterdir():
                name = (task / "comm").read_text().strip()
                if name.endswith("/TCG"):
                    vcpus[name] = cpu_seconds(pid, int(task.name))
            return {"clock": time.monotonic(), "qemu": cpu_seconds(pid),
                    "vcpus": vcpus, "steal": steal_seconds(Path("/proc/stat").read_text())}
        except OSError:  # QEMU exited meanwhile
            return None

    def cleanup(self) -> None:
        self.stop()
        if self.dead:
            self.keep_console()
        shutil.rmtree(self.workdir, ignore_errors=True)

    def keep_console(self) -> Path | None:
        """Copy the whole console log of a VM that died to
        <cache>/vm/dead/<kernel>-<time>.log (a failure message quotes only
        part of it); its path, or None if there was none."""
        if not self.console.exists():
            return None
        dest = CACHE / "dead" / f"{self.cfg.kernel}-{time.strftime('%Y%m%d-%H%M%S')}.log"
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(self.console, dest)
        print(f"vmbed: the console of the VM that died is in {dest}", file=sys.stderr)
        return dest

    def __enter__(self) -> "VM":
        try:
            return self.start()
        except BaseException:
            self.cleanup()  # no QEMU left behind by a boot that failed
            raise

    def __exit__(self, *exc: object) -> None:
        if os.environ.get("VM_KEEP"):
            self.stop()
            print(f"vmbed: kept {self.workdir}")
        else:
            self.cleanup()

    # -- commands -------------------------------------------------------------
    def run(self, script: str, timeout: float = 300.0) -> Result:
        """Run a shell script in the guest; its output and exit status."""
        if self.dead or self.sock is None:
            raise VMError("the VM is not running")
        self._seq += 1
        sid = str(self._seq)
        payload = base64.b64encode(script.encode()).decode()
        guest_tmo = max(1, int(timeout))
        # The emulated UART drops bytes now and then, both ways: see the
        # protocol in scripts/guest/agent.  A command line goes again on NAK
        # or silence; a result counts only whole (its length checked), and
        # the agent sends it again until GOT.  The leading newline ends any
        # fragment left before the line.
        cmd = f"\nRUN {sid} {guest_tmo} {len(payload)} {payload}\n".encode()
        self._send(cmd)
        try:
            ack_deadline = time.monotonic() + ACK_SECONDS
            unread, progress = -1, 0.0
            while True:
                retry = min(ack_deadline, time.monotonic() + 2.0)
                line = self._readline_or_none(retry, "the agent to take the command",
                                              fatal=retry >= ack_deadline)
                if line == f"ACK {sid}":
                    break
                if line is None and (left := self._unread()):
                    # A long line (a binary for the guest) takes a loaded
                    # guest seconds to read through its UART: sending it
                    # again then only piles copies up in the socket until
                    # a send times out.  Wait while the guest reads, up to
                    # ACK_SECONDS after the last bytes it took.
                    if left != unread:
                        unread, progress = left, time.monotonic()
                    ack_deadline = max(ack_deadline, progress + ACK_SECONDS)
                elif line is None or line == "NAK":
                    self.resends += 1
                    self._send(cmd)
            deadline = time.monotonic() + timeout + 60
            chunks: list[str] | None = None
            while True:
                line = self._readline(deadline, f"the command to end ({timeout:.0f} s)")
                if line == f"BEGIN {sid}":
                    chunks = []
                elif line.startswith(f"END {sid} ") and chunks is not None:
                    f = line.split()
                    if len(f) == 4 and f[3].isdigit() and int(f[3]) == sum(map(len, chunks)):
                        rc = int(f[2])
                        self._send(f"GOT {sid}\n".encode())
                        break
                    self.resends += 1
                    chunks = None
                elif chunks is not None:
                    chunks.append(line)
        except VMError:
            self.dead = True
            raise
        out = base64.b64decode("".join(chunks)).decode(errors="replace")
        return Result(rc, out)

    def check(self, script: str, timeout: float = 300.0) -> str:
        """Run a script that must succeed; its output."""
        r = self.run(script, timeout)
        if r.rc != 0:
            raise AssertionError(f"guest command failed (exit {r.rc}):\n"
                                 f"{script}\n--- output ---\n{r.out}")
        return r.out

    def read_file(self, path: str, compress: bool = False) -> bytes:
        """A file of the guest's.  compress: gzip it on the way, for a large
        text such as an ftrace buffer (a 1.1 MB trace took the debug
        kernel's UART 28 s, base64 twice over), not for small files (the
        gzip costs a command about 0.2 s there)."""
        if not compress:
            r = self.run(f"base64 '{path}'")
        else:
            r = self.run(f"set -o pipefail; gzip -c '{path}' | base64")
        if r.rc != 0:
            raise VMError(f"cannot read {path}: {r.out}")
        data = base64.b64decode(r.out)
        return gzip.decompress(data) if compress else data

    def console_text(self) -> str:
        try:
            return self.console.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def console_tail(self, lines: int = 40) -> str:
        """The console's last @lines lines; when the console holds a kernel
        problem (KERNEL_PROBLEM), first the lines from the first one on
        (what a panic's tail, a backtrace of another CPU, does not say)."""
        text = self.console_text().splitlines()
        first = next((i for i, ln in enumerate(text) if KERNEL_PROBLEM.search(ln)), None)
        tail = "\n".join(text[-lines:])
        if first is None or first >= len(text) - lines:
            return tail
        start = max(0, first - 3)
        return ("first kernel problem on the console:\n"
                + "\n".join(text[start:start + lines])
                + f"\n[...]\nlast {lines} lines:\n{tail}")

    def stuck_report(self) -> str:
        """For a guest that stopped answering its agent: each vCPU's
        instruction pointer, privilege level and halt state (QEMU's
        monitor, `info registers -a`), then SysRq 9, l and w pressed on its
        keyboard (all messages to the console; the backtraces of the CPUs
        that run something, and of the blocked tasks), which land in the
        console that the caller's tail then quotes.  One line of QEMU's
        problem when the monitor does not answer."""
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
                s.settimeout(10.0)
                s.connect(str(self.workdir / "qmp.sock"))
                f = s.makefile("rw", encoding="utf-8", newline="\n")

                def call(cmd: str, **args: object) -> object:
                    f.write(json.dumps({"execute": cmd, "arguments": args}) + "\n")
                    f.flush()
                    while True:  # past events
                        line = f.readline()
                        if not line:
                            raise OSError("it closed the connection")
                        msg = json.loads(line)
                        if "error" in msg:
                            raise OSError(f"{cmd}: {msg['error'].get('desc')}")
                        if "return" in msg:
                            return msg["return"]

                f.readline()  # the greeting
                call("qmp_capabilities")
                regs = str(call("human-monitor-command", **{"command-line": "info registers -a"}))
                # 9: every console message (this bed boots with loglevel=5,
                # and w's task lines are KERN_INFO)
                for key in ("9", "l", "w"):
                    call("send-key", keys=[{"type": "qcode", "data": k}
                                           for k in ("alt", "sysrq", key)])
                    time.sleep(SYSRQ_SECONDS)
        except (OSError, ValueError) as e:
            return f"QEMU's monitor: {e}\n"
        cpus = []
        for n, part in enumerate(re.split(r"^CPU#\d+", regs, flags=re.M)[1:]):
            m = re.search(r"^RIP=([0-9a-f]+).*?CPL=(\d).*?HLT=(\d)", part, re.M)
            cpus.append(f"vCPU {n}: " + (f"RIP {m[1]}, CPL {m[2]}, HLT {m[3]}" if m else "?"))
        return ("; ".join(cpus) or "QEMU's monitor gave no registers") + \
            " (SysRq l and w sent: their backtraces are on the console)\n"

    # -- plumbing ---------------------------------------------------------------
    def _check_alive(self) -> None:
        if self.proc is not None and self.proc.poll() is not None:
            self.dead = True
            err = (self.workdir / "qemu.err").read_text(errors="replace")
            raise VMError(f"the VM exited (status {self.proc.returncode}); "
                          f"qemu: {err.strip()}\nconsole tail:\n{self.console_tail()}")

    def _send(self, data: bytes) -> None:
        assert self.sock is not None
        self.sock.settimeout(ACK_SECONDS)
        try:
            self.sock.sendall(data)
        except (BrokenPipeError, ConnectionResetError):
            self._died("broke")
        except socket.timeout:
            self.dead = True
            raise VMError(f"the guest did not read {len(data)} bytes sent to its agent in "
                          f"{ACK_SECONDS:.0f} s; {self.stuck_report()}"
                          f"console tail:\n{self.console_tail()}") from None

    def _unread(self) -> int:
        """Bytes sent to the agent that QEMU has not taken from the socket
        yet (it takes them as the guest reads its UART)."""
        assert self.sock is not None
        buf = fcntl.ioctl(self.sock.fileno(), termios.TIOCOUTQ, b"\0" * 4)
        return int(struct.unpack("i", buf)[0])

    def _died(self, how: str) -> NoReturn:
        """The agent connection @how (closed, was reset): QEMU is exiting,
        e.g. the guest panicked (panic=-1 with -no-reboot).  A VMError with
        its exit status, its stderr and the console's tail."""
        self.dead = True
        if self.proc is not None:
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        self._check_alive()
        raise VMError(f"the agent connection {how} (QEMU still running); console tail:\n"
                      f"{self.console_tail()}")

    def _readline(self, deadline: float, waiting_for: str = "the guest") -> str:
        """The next line from the agent; a VMError at @deadline."""
        line = self._readline_or_none(deadline, waiting_for, fatal=True)
        assert line is not None
        return line

    def _readline_or_none(self, deadline: float, waiting_for: str,
                          fatal: bool) -> str | None:
        """The next line from the agent; at @deadline a VMError, or None
        if not @fatal."""
        assert self.sock is not None
        while b"\n" not in self._buf:
            self._check_alive()
            left = deadline - time.monotonic()
            if left <= 0 and not fatal:
                return None
            if left <= 0:
                self.dead = True
                raise VMError(f"timed out waiting for {waiting_for}; {self.stuck_report()}"
                              f"console tail:\n{self.console_tail()}")
            self.sock.settimeout(min(left, 1.0))
            try:
                data = self.sock.recv(65536)
            except socket.timeout:
                continue
            except ConnectionResetError:
                # QEMU closed the socket with our bytes unread: it exited
                self._died("was reset")
            if not data:
                self._died("closed")
            self._buf += data
            if self._trace is not None:
                self._trace.write(data)
        line, self._buf = self._buf.split(b"\n", 1)
        return line.decode(errors="replace").rstrip("\r")
