"""The block device under test: what it is, whether it is safe to overwrite,
and its scheduler and tunables (written through sysfs and read back).

Everything goes through a Target's shell, so the same code runs on a real
box and in the busybox guest of the VM bed (which has no blkid: there a small
built-in probe of the common on-disk signatures stands in, see
`_magic_signature`).
"""
from __future__ import annotations

import base64
import os
import re
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from bench.target import Target, TargetError, q

SYS = "/sys/class/block"


class DeviceError(RuntimeError):
    """The device is missing, unsuitable, or refused a setting."""


class UnsafeDevice(DeviceError):
    """The device holds data (partitions, a signature, a mount, ...)."""


class TunableError(DeviceError):
    """A scheduler or tunable write failed or did not hold."""


# ---------------------------------------------------------------------------
# what the device is

@dataclass
class DeviceInfo:
    name: str                 # kernel name: nvme0n1
    path: str                 # /dev/nvme0n1
    given: str                # what the user named (/dev/vm-throttled)
    size_bytes: int
    model: str
    kind: str                 # nvme, ssdsim, null_blk, loop, virtio, scsi, other
    hw_queues: int
    hw_depth: int             # tags per hardware queue
    logical_block: int
    schedulers: list[str]     # what queue/scheduler offers
    scheduler: str            # the one selected
    module_params: dict[str, str] = field(default_factory=dict)  # ssdsim, null_blk

    def as_dict(self) -> dict[str, object]:
        return dict(self.__dict__)


def _kind(name: str, driver: str) -> str:
    for prefix, kind in (("ssdsim", "ssdsim"), ("nullb", "null_blk"), ("nvme", "nvme"),
                         ("loop", "loop"), ("vd", "virtio"), ("sd", "scsi")):
        if name.startswith(prefix):
            return kind
    return driver or "other"


def resolve(target: Target, device: str) -> str:
    """The kernel name of a whole-disk block device given as /dev/X, X or a
    symlink such as /dev/vm-throttled; a clear error if it is not one."""
    path = device if device.startswith("/") else f"/dev/{device}"
    r = target.run(f"p=$(readlink -f {q(path)}) && [ -b \"$p\" ] && echo \"$p\"")
    if r.rc != 0 or not r.out.strip():
        have = target.run(f"ls {SYS} 2>/dev/null").out.split()
        disks = [d for d in have if not d.startswith(("ram", "zram"))]
        raise DeviceError(f"{device}: no such block device on {target.name()} "
                          f"(block devices there: {', '.join(disks) or 'none'})")
    name = r.out.strip().splitlines()[-1].rsplit("/", 1)[-1]
    r = target.run(f"[ -e {SYS}/{name}/partition ] && "
                   f"basename $(readlink -f {SYS}/{name}/..)")
    if r.rc == 0:
        raise DeviceError(f"{device} is a partition of {r.out.strip()}: the benchmarks need "
                          f"a whole device (its scheduler is per disk), e.g. /dev/{r.out.strip()}")
    if target.run(f"[ -e {SYS}/{name}/queue/scheduler ]").rc != 0:
        raise DeviceError(f"{device} ({name}) has no queue/scheduler in sysfs: not a blk-mq "
                          "disk whose scheduler can be chosen")
    return name


def info(target: Target, device: str) -> DeviceInfo:
    name = resolve(target, device)
    s = f"{SYS}/{name}"
    out = target.check(
        f"cat {s}/size; cat {s}/queue/logical_block_size; cat {s}/queue/scheduler; "
        f"ls -d {s}/mq/* 2>/dev/null | wc -l; cat {s}/mq/0/nr_tags 2>/dev/null || echo 0; "
        f"cat {s}/device/model 2>/dev/null || echo; "
        f"basename \"$(readlink -f {s}/device/driver 2>/dev/null)\" 2>/dev/null || echo",
        what=f"reading {name}'s sysfs").splitlines()
    out += [""] * 7
    scheds = out[2].replace("[", " ").replace("]", " ").split()
    m = re.search(r"\[([^\]]+)\]", out[2])
    kind = _kind(name, out[6].strip())
    model = out[5].strip() or {"ssdsim": "ssdsim (emulated flash SSD)",
                               "null_blk": "null_blk (no media)",
                               "loop": "loop device"}.get(kind, kind)
    params: dict[str, str] = {}
    module = {"ssdsim": "ssdsim", "null_blk": "null_blk"}.get(kind)
    if module:
        params = module_params(target, module)
    return DeviceInfo(name=name, path=f"/dev/{name}", given=device,
                      size_bytes=int(out[0]) * 512, model=model, kind=kind,
                      hw_queues=int(out[3] or 0), hw_depth=int(out[4] or 0),
                      logical_block=int(out[1] or 512), schedulers=scheds,
                      scheduler=m.group(1) if m else "none", module_params=params)


def module_params(target: Target, module: str) -> dict[str, str]:
    """A loaded module's readable parameters."""
    r = target.run(f"cd /sys/module/{q(module)}/parameters 2>/dev/null && "
                   "for f in *; do [ -r \"$f\" ] && "
                   "printf '%s=%s\\n' \"$f\" \"$(cat \"$f\")\"; done")
    params = {}
    for line in r.out.splitlines():
        k, sep, v = line.partition("=")
        if sep and k != "*":
            params[k] = v
    return params


# ---------------------------------------------------------------------------
# is it safe to overwrite?

@dataclass
class Occupancy:
    """What writing to a device would destroy or disturb."""
    device: str
    partitions: list[str] = field(default_factory=list)
    signatures: dict[str, str] = field(default_factory=dict)  # dev -> "ext4 file system"
    mounts: list[tuple[str, str]] = field(default_factory=list)  # (dev, mount point)
    holders: list[str] = field(default_factory=list)           # dm-0 (LVM, crypt, md)
    swaps: list[str] = field(default_factory=list)
    root: bool = False

    def problems(self) -> list[str]:
        p = []
        if self.root:
            p.append("it holds the root file system (/)")
        for dev, mnt in self.mounts:
            p.append(f"/dev/{dev} is mounted on {mnt}")
        for dev in self.swaps:
            p.append(f"/dev/{dev} is in use as swap")
        for h in self.holders:
            p.append(f"it is in use by /dev/{h} (device mapper, md or similar)")
        if self.partitions:
            p.append(f"it has {len(self.partitions)} partition(s): "
                     + ", ".join(f"/dev/{x}" + (f" ({self.signatures[x]})"
                                                if x in self.signatures else "")
                                 for x in self.partitions))
        if self.device in self.signatures:
            p.append(f"it carries a {self.signatures[self.device]} signature")
        return p


_PROBE = r"""
d={name}
s=/sys/class/block
echo "dev $d $(cat $s/$d/dev)"
for p in $s/$d/$d*; do
	[ -e "$p/partition" ] && echo "part ${{p##*/}} $(cat $p/dev)"
done
walk() {{
	local h
	for h in $s/$1/holders/*; do
		[ -e "$h" ] || continue
		echo "holder ${{h##*/}} $(cat $h/dev) $1"
		walk "${{h##*/}}"
	done
}}
walk $d
for p in $s/$d/$d*; do [ -e "$p/partition" ] && walk "${{p##*/}}"; done
while read -r _ _ mm _ mnt _; do echo "mount $mm $mnt"; done < /proc/self/mountinfo
while read -r src mnt _; do
	case $src in /dev/*) echo "msrc $(readlink -f "$src") $mnt" ;; esac
done < /proc/mounts
echo "rootdev $(stat -c '%d' / 2>/dev/null)"
tail -n +2 /proc/swaps 2>/dev/null | while read -r f _; do echo "swap $(readlink -f "$f")"; done
echo "blkid $(command -v blkid >/dev/null 2>&1 && echo yes || echo no)"
"""

_BLKID_TYPES = {"PTTYPE": "partition table", "TYPE": "file system"}


def _describe_blkid(export: str) -> str:
    kv = dict(line.split("=", 1) for line in export.splitlines() if "=" in line)
    if "PTTYPE" in kv and "TYPE" not in kv:
        return f"{kv['PTTYPE']} partition table"
    if "TYPE" in kv:
        usage = kv.get("USAGE", "filesystem")
        what = {"filesystem": "file system", "raid": "RAID member", "crypto": "encrypted volume",
                "other": "data"}.get(usage, usage)
        label = f", label {kv['LABEL']!r}" if "LABEL" in kv else ""
        return f"{kv['TYPE']} {what}{label}"
    return ""


def _magic_signature(head: bytes) -> str:
    """The common signatures in the first 68 KiB, for targets without blkid
    (the VM's busybox).  blkid, where present, is authoritative."""
    def at(off: int, magic: bytes) -> bool:
        return head[off:off + len(magic)] == magic
    if at(512, b"EFI PART"):
        return "gpt partition table"
    if at(1080, b"\x53\xef"):
        return "ext2/3/4 file system"
    if at(0, b"XFSB"):
        return "xfs file system"
    if at(65600, b"_BHRfS_M"):
        return "btrfs file system"
    if at(1024, b"\x10\x20\xf5\xf2"):
        return "f2fs file system"
    if at(0, b"LUKS\xba\xbe"):
        return "crypto_LUKS encrypted volume"
    if at(536, b"LVM2 001") or at(24, b"LVM2 001"):
        return "LVM2_member"
    if at(4086, b"SWAPSPACE2") or at(4086, b"SWAP-SPACE"):
        return "swap"
    if at(3, b"NTFS    "):
        return "ntfs file system"
    if at(54, b"FAT") or at(82, b"FAT32"):
        return "vfat file system"
    if at(510, b"\x55\xaa") and any(head[446 + 16 * i + 4] for i in range(4)):
        return "dos partition table"
    return ""


def signature(target: Target, name: str, have_blkid: bool | None = None) -> str:
    """'' or a description of the signature at the start of /dev/<name>."""
    if have_blkid is None:
        have_blkid = target.run("command -v blkid").rc == 0
    if have_blkid:
        r = target.run(f"blkid -p -o export /dev/{name}")
        if r.rc == 0:
            return _describe_blkid(r.out)
        if r.rc == 2:  # nothing found
            return ""
        # ambiguous probes (rc 8) and others: fall back to the magic numbers
    r = target.run(f"dd if=/dev/{name} bs=4096 count=17 2>/dev/null | base64")
    if r.rc != 0:
        raise DeviceError(f"cannot read /dev/{name}: {r.out.strip()}")
    return _magic_signature(base64.b64decode(r.out))


def occupancy(target: Target, name: str) -> Occupancy:
    """Partitions, signatures, mounts, holders, swap and root use of a disk."""
    out = target.check(_PROBE.format(name=name), what=f"probing {name}")
    occ = Occupancy(device=name)
    numbers: dict[str, str] = {}
    mounts: list[tuple[str, str]] = []
    sources: list[tuple[str, str]] = []
    rootdev = ""
    have_blkid = False
    for line in out.splitlines():
        f = line.split()
        if not f:
            continue
        if f[0] == "dev" and len(f) == 3:
            numbers[f[2]] = f[1]
        elif f[0] == "part" and len(f) == 3:
            occ.partitions.append(f[1])
            numbers[f[2]] = f[1]
        elif f[0] == "holder" and len(f) >= 3:
            if f[1] not in occ.holders:
                occ.holders.append(f[1])
            numbers[f[2]] = f[1]
        elif f[0] == "mount" and len(f) >= 3:
            mounts.append((f[1], f[2].replace("\\040", " ")))
        elif f[0] == "msrc" and len(f) >= 3:
            sources.append((f[1].rsplit("/", 1)[-1], f[2].replace("\\040", " ")))
        elif f[0] == "rootdev" and len(f) == 2:
            rootdev = f[1]
        elif f[0] == "swap" and len(f) == 2:
            sw = f[1].rsplit("/", 1)[-1]
            if sw in numbers.values():
                occ.swaps.append(sw)
        elif f[0] == "blkid":
            have_blkid = len(f) > 1 and f[1] == "yes"
    # by device number (mountinfo), and by source name for file systems such
    # as btrfs whose mounts carry an anonymous device number
    names = set(numbers.values())
    for mm, mnt in mounts:
        if mm in numbers and (numbers[mm], mnt) not in occ.mounts:
            occ.mounts.append((numbers[mm], mnt))
    for src, mnt in sources:
        if src in names and (src, mnt) not in occ.mounts:
            occ.mounts.append((src, mnt))
    if rootdev.isdigit():
        dev = int(rootdev)
        occ.root = f"{os.major(dev)}:{os.minor(dev)}" in numbers
    occ.root = occ.root or any(mnt == "/" for _, mnt in occ.mounts)
    for dev in [name] + occ.partitions:
        sig = signature(target, dev, have_blkid)
        if sig:
            occ.signatures[dev] = sig
    return occ


def check_safe(target: Target, name: str, destroy_data: str | None) -> Occupancy:
    """Refuse to write to a disk that holds anything, unless @destroy_data
    names that same disk again.  Returns what was found (and overridden)."""
    occ = occupancy(target, name)
    problems = occ.problems()
    if not problems:
        return occ
    if destroy_data is not None:
        try:
            confirmed = resolve(target, destroy_data) == name
        except DeviceError:
            confirmed = False
        if confirmed:
            return occ
        raise UnsafeDevice(f"--destroy-data names {destroy_data}, but the benchmark device "
                           f"is /dev/{name}: they must be the same device")
    lines = "\n".join(f"  - {p}" for p in problems)
    raise UnsafeDevice(
        f"refusing to write to /dev/{name}: the benchmark overwrites the raw device, and\n"
        f"{lines}\n"
        f"Everything on /dev/{name} would be destroyed. If that is what you want, "
        f"pass --destroy-data /dev/{name}.")


def check_device(target: Target, dev: str, destroy_data: str | None,
                 out: TextIO = sys.stdout) -> dict[str, Any]:
    """Before anything writes to the raw device /dev/@dev: refuse it if it
    holds data (check_safe) unless @destroy_data names it again; what was
    found, for the manifest."""
    occ = check_safe(target, dev, destroy_data)
    if occ.problems():
        print(f"--destroy-data {destroy_data}: overwriting /dev/{dev} although "
              + "; ".join(occ.problems()), file=out)
    return {"checked": True, "found": occ.problems(),
            "overridden_by": destroy_data if occ.problems() else None}


# ---------------------------------------------------------------------------
# scheduler and tunables

def iosched_dir(name: str) -> str:
    return f"{SYS}/{name}/queue/iosched"


def current_scheduler(target: Target, name: str) -> str:
    line = target.check(f"cat {SYS}/{name}/queue/scheduler", what="reading the scheduler")
    m = re.search(r"\[([^\]]+)\]", line)
    return m.group(1) if m else "none"


def available_schedulers(target: Target, name: str) -> list[str]:
    line = target.check(f"cat {SYS}/{name}/queue/scheduler", what="reading the scheduler")
    return line.replace("[", " ").replace("]", " ").split()


def set_scheduler(target: Target, name: str, sched: str) -> None:
    """Select an elevator and check that it is the one in place."""
    f = f"{SYS}/{name}/queue/scheduler"
    r = target.run(f"echo {q(sched)} > {f}; echo; cat {f}")
    lines = r.out.strip().splitlines()
    m = re.search(r"\[([^\]]+)\]", lines[-1] if lines else "")
    now = m.group(1) if m else "?"
    if now != sched:
        have = lines[-1].replace("[", " ").replace("]", " ").split() if lines else []
        hint = "" if sched in have else (f" (it is not registered: load its module; "
                                         f"available: {' '.join(have)})")
        err = " ".join(lines[:-1]).strip()
        raise TunableError(f"/dev/{name}: selecting scheduler {sched!r} failed, "
                           f"{now!r} is in place{hint}{': ' + err if err else ''}")


def read_tunables(target: Target, name: str) -> dict[str, str]:
    """The current scheduler's writable tunables (name -> value)."""
    d = iosched_dir(name)
    # by mode: root passes `test -w` on read-only attributes too
    r = target.run(f"cd {d} 2>/dev/null || exit 0; for f in *; do "
                   "[ -f \"$f\" ] && printf '%s %s=%s\\n' \"$(stat -c %a \"$f\")\" \"$f\" "
                   "\"$(cat \"$f\" 2>/dev/null)\"; done")
    out = {}
    for line in r.out.splitlines():
        mode, _, kv = line.partition(" ")
        k, sep, v = kv.partition("=")
        if sep and k != "*" and mode.isdigit() and int(mode, 8) & 0o200:
            out[k] = v.strip()
    return out


def read_attr(target: Target, name: str, attr: str) -> str:
    return target.check(f"cat {iosched_dir(name)}/{q(attr)}",
                        what=f"reading {attr} of /dev/{name}").strip()


def read_attrs(target: Target, name: str, attrs: Iterable[str]) -> dict[str, str]:
    """Several of the current scheduler's attributes, read in one command
    (each command is a round trip to the target: about 1 s on the debug
    kernel's VM, an SSH connection's on a test box)."""
    attrs = list(attrs)
    d = iosched_dir(name)
    r = target.check(f"cd {d} && for f in {' '.join(q(a) for a in attrs)}; do "
                     "v=$(cat \"$f\") || exit 1; printf '%s=%s\\n' \"$f\" \"$v\"; done",
                     what=f"reading {', '.join(attrs)} of /dev/{name}")
    got = dict(line.partition("=")[::2] for line in r.splitlines() if "=" in line)
    return {a: got[a].strip() for a in attrs}


#: tunables whose 0 asks the elevator to choose the value, which they then
#: read back (FlashFQ's costs, learnt: flashfq/README.md)
CHOSEN_AT_ZERO = frozenset({"cost_read_4k_ns", "cost_read_128k_ns", "cost_write_4k_ns",
                            "cost_write_128k_ns"})


def set_tunable(target: Target, name: str, attr: str, value: object) -> str:
    """Write one tunable and read it back; TunableError unless it holds
    (a 0 written to one of CHOSEN_AT_ZERO holds whatever it reads back)."""
    path = q(f"{iosched_dir(name)}/{attr}")
    r = target.run(f"[ -e {path} ] || exit 100; echo {q(value)} > {path}; rc=$?; "
                   f"echo; echo \"=$(cat {path})\"; exit $rc")
    if r.rc == 100:
        sched = current_scheduler(target, name)
        have = sorted(read_tunables(target, name))
        raise TunableError(f"/dev/{name}: scheduler {sched} has no tunable {attr!r} "
                           f"(it has: {', '.join(have) or 'none'})")
    lines = r.out.strip().splitlines()
    back = lines[-1][1:].strip() if lines and lines[-1].startswith("=") else "?"
    if r.rc != 0:
        msg = " ".join(lines[:-1]).strip()
        err = msg.rsplit(":", 1)[-1].strip() or f"exit {r.rc}"
        raise TunableError(f"/dev/{name}: writing {value} to {attr} failed ({err}); "
                           f"it reads {back}")
    if back != str(value) and not (attr in CHOSEN_AT_ZERO and str(value) == "0"):
        raise TunableError(f"/dev/{name}: {attr}={value} did not hold: it reads back {back}")
    return back


def nr_requests(target: Target, name: str) -> int:
    return int(target.check(f"cat {SYS}/{name}/queue/nr_requests").strip())


@dataclass
class SavedState:
    """A device's scheduler and that scheduler's tunables, to put back."""
    name: str
    scheduler: str
    tunables: dict[str, str]


def save_state(target: Target, name: str) -> SavedState:
    return SavedState(name, current_scheduler(target, name), read_tunables(target, name))


def restore_state(target: Target, st: SavedState) -> list[str]:
    """Put the scheduler and its tunables back; what could not be restored."""
    failed = []
    try:
        if current_scheduler(target, st.name) != st.scheduler:
            set_scheduler(target, st.name, st.scheduler)
        now = read_tunables(target, st.name)
        for k, v in st.tunables.items():
            if now.get(k) != v:
                try:
                    set_tunable(target, st.name, k, v)
                except DeviceError as e:
                    failed.append(str(e))
    except (DeviceError, TargetError) as e:
        failed.append(str(e))
    return failed


def restorer(target: Target, saved: SavedState) -> tuple[str, Callable[[], None]]:
    """A clean-up putting the device's scheduler and tunables back."""
    def restore() -> None:
        failed = restore_state(target, saved)
        if failed:
            raise DeviceError("; ".join(failed))
    tun = ", ".join(f"{k}={v}" for k, v in saved.tunables.items())
    return (f"/dev/{saved.name} back to scheduler {saved.scheduler}"
            + (f" and its tunables ({tun})" if tun else ""), restore)


# ---------------------------------------------------------------------------
# modules

def module_loaded(target: Target, module: str) -> bool:
    return target.run(f"[ -d /sys/module/{q(module.replace('-', '_'))} ]").rc == 0


def load_module(target: Target, module: str, params: str = "") -> bool:
    """modprobe a module; on this machine, fall back to the project's
    freshly built one (.build/<release>/.../<module>.ko) when it is not
    installed.  True if this call loaded it; DeviceError if it cannot."""
    if module_loaded(target, module) and not params:
        return False
    r = target.run(f"modprobe {q(module)} {params}")
    if r.rc == 0:
        return True
    err = r.out.strip()
    if target.is_local:
        kernel = target.kernel()
        built = sorted((Path(__file__).resolve().parent.parent / ".build" / kernel)
                       .rglob(f"{module}.ko"))
        if built:
            r = target.run(f"insmod {q(built[0])} {params}")
            if r.rc == 0:
                return True
            err += f"; insmod {built[0]}: {r.out.strip()}"
        else:
            err += (f"; not built for {kernel} either (make KVER={kernel} modules, "
                    "or make install)")
    raise DeviceError(f"cannot load module {module}: {err}")


def offer_scheduler(target: Target, dev: str, sched: str, module: str) -> bool:
    """Make elevator @sched selectable on /dev/@dev: nothing if the kernel
    offers it already (built in, or loaded), else load @module.  True if
    this call loaded it; DeviceError if it cannot."""
    if sched in available_schedulers(target, dev):
        return False
    return load_module(target, module)


def unload_module(target: Target, module: str) -> bool:
    return target.run(f"modprobe -r {q(module)} 2>/dev/null || rmmod {q(module)}").rc == 0


def ensure_scheduler(target: Target, dev: str, sched: str, module: str | None,
                     on_exit: Callable[[str, Callable[[], None]], None]) -> str | None:
    """Make elevator @sched selectable on /dev/@dev, loading @module (None:
    the kernel's own) if need be, its unloading registered with @on_exit;
    None, or why it cannot be."""
    if module is None:
        return None if sched in available_schedulers(target, dev) else \
            f"elevator {sched} is not offered by /dev/{dev}"
    try:
        loaded = offer_scheduler(target, dev, sched, module)
    except DeviceError as e:
        return str(e)
    if loaded:
        def unload(module: str = module) -> None:
            if not unload_module(target, module):
                print(f"note: module {module} left loaded (in use)")
        on_exit(f"module {module} unloaded", unload)
    if sched not in available_schedulers(target, dev):
        return f"module {module} is loaded but /dev/{dev} does not offer elevator {sched}"
    return None
