"""The kernel modules the project builds, read from the tree: Kbuild's obj-m
folders are the one list, each folder's Kbuild names its module, and the
module's C source the elevator it registers (.elevator_name).  Adding a
scheduler is its folder and one obj-m line; dkms.conf, the benchmark's
elevators (bench.suites.OURS), the VM tests' schedulers and the package's
tests follow from here.

A folder under tests/ holds a test fixture (fifo-ref): built and tested,
not shipped (dkms.conf leaves it out, as `make install` does).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

_OBJ_DIR = re.compile(r"^obj-m\s*\+=\s*(\S+)/\s*$", re.M)
_OBJ_KO = re.compile(r"^obj-m\s*[:+]=\s*(\S+)\.o\s*$", re.M)
_ELEVATOR = re.compile(r'\.elevator_name\s*=\s*"([^"]+)"')


@dataclass(frozen=True)
class Module:
    """One module of the project: its folder (relative to the tree's top),
    its name (modprobe's), the elevator it registers (None: not a
    scheduler, e.g. ssdsim), the C file that registers it, and whether it
    registers sysfs tunables (.elevator_attrs)."""
    folder: str
    name: str
    elevator: str | None
    source: Path | None
    tunables: bool

    @property
    def shipped(self) -> bool:
        """Installed by the package (and `make install`): not a test fixture."""
        return not self.folder.startswith("tests/")


def folders(root: Path = ROOT) -> list[str]:
    """Kbuild's obj-m folders, in its order."""
    return _OBJ_DIR.findall((root / "Kbuild").read_text())


def modules(root: Path = ROOT) -> list[Module]:
    """Every module the project builds, in Kbuild's order.  ValueError when
    a folder's Kbuild does not name exactly one module."""
    out = []
    for d in folders(root):
        names = _OBJ_KO.findall((root / d / "Kbuild").read_text())
        if len(names) != 1:
            raise ValueError(f"{d}/Kbuild: expected one 'obj-m := <module>.o', found {names}")
        elevator, source, tunables = None, None, False
        for c in sorted((root / d).glob("*.c")):
            text = c.read_text()
            m = _ELEVATOR.search(text)
            if m:
                elevator, source = m.group(1), c
                tunables = re.search(r"\.elevator_attrs\s*=", text) is not None
                break
        out.append(Module(d, names[0], elevator, source, tunables))
    return out


def elevators(root: Path = ROOT) -> dict[str, str]:
    """The project's elevators, shipped or not: elevator name -> module."""
    return {m.elevator: m.name for m in modules(root) if m.elevator}
