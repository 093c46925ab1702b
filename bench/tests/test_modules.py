"""bench/modules.py: Kbuild's obj-m folders are the one list of the
project's modules, and dkms.conf, read by bash as DKMS reads it, ships the
same ones."""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from bench import modules

ROOT = Path(__file__).resolve().parents[2]


def test_the_trees_modules() -> None:
    mods = {m.name: m for m in modules.modules()}
    assert set(mods) == {"fifo-iosched", "k2-iosched", "flashfq-iosched", "cars-iosched",
                         "ssdsim"}
    assert modules.elevators() == {"fifo-ref": "fifo-iosched", "k2": "k2-iosched",
                                   "flashfq": "flashfq-iosched", "cars": "cars-iosched"}
    assert not mods["fifo-iosched"].shipped and not mods["fifo-iosched"].tunables
    assert mods["k2-iosched"].shipped and mods["k2-iosched"].tunables
    assert mods["ssdsim"].elevator is None and mods["ssdsim"].shipped
    assert mods["cars-iosched"].source == ROOT / "cars-host" / "cars-iosched.c"


def _tree(tmp: Path) -> Path:
    """A copy of what the readers read: Kbuild, dkms.conf and each module
    folder's Kbuild and C files."""
    shutil.copy(ROOT / "Kbuild", tmp)
    shutil.copy(ROOT / "dkms.conf", tmp)
    for d in modules.folders():
        (tmp / d).mkdir(parents=True)
        for f in [ROOT / d / "Kbuild", *(ROOT / d).glob("*.c")]:
            shutil.copy(f, tmp / d)
    return tmp


def _add(tmp: Path, folder: str, module: str, elevator: str) -> None:
    (tmp / folder).mkdir(parents=True)
    (tmp / folder / "Kbuild").write_text(f"obj-m := {module}.o\n")
    (tmp / folder / f"{module}.c").write_text(
        f'static struct elevator_type t = {{\n\t.elevator_name = "{elevator}",\n}};\n')
    with open(tmp / "Kbuild", "a") as f:
        f.write(f"obj-m += {folder}/\n")


def dkms_modules(top: Path) -> list[tuple[str, str]]:
    """BUILT_MODULE_NAME and BUILT_MODULE_LOCATION as DKMS's bash sees them
    once it has sourced @top/dkms.conf (from another directory)."""
    script = ('. "$1"; for i in "${!BUILT_MODULE_NAME[@]}"; do '
              'echo "${BUILT_MODULE_NAME[i]} ${BUILT_MODULE_LOCATION[i]} '
              '${DEST_MODULE_LOCATION[i]}"; done')
    r = subprocess.run(["bash", "-c", script, "bash", str(top / "dkms.conf")], cwd="/",
                       capture_output=True, text=True, env=dict(os.environ, kernelver="6.1.0-x"))
    assert r.returncode == 0 and not r.stderr, r.stderr
    out = []
    for line in r.stdout.splitlines():
        name, loc, dest = line.split()
        assert dest == "/updates/dkms", line
        out.append((name, loc))
    return out


def test_dkms_conf_ships_kbuilds_modules_but_the_fixtures() -> None:
    assert dkms_modules(ROOT) == [(m.name, f".build/6.1.0-x/{m.folder}")
                                  for m in modules.modules() if m.shipped]


def test_a_new_scheduler_is_its_folder_and_one_line(tmp_path: Path) -> None:
    top = _tree(tmp_path)
    _add(top, "newsched", "new-iosched", "new")
    mods = modules.modules(top)
    assert mods[-1] == modules.Module("newsched", "new-iosched", "new",
                                      top / "newsched" / "new-iosched.c", False)
    assert modules.elevators(top)["new"] == "new-iosched"
    assert ("new-iosched", ".build/6.1.0-x/newsched") in dkms_modules(top)


def test_a_folder_of_two_modules_is_refused(tmp_path: Path) -> None:
    top = _tree(tmp_path)
    _add(top, "two", "one-iosched", "one")
    with open(top / "two" / "Kbuild", "a") as f:
        f.write("obj-m += other.o\n")
    with pytest.raises(ValueError, match=r"two/Kbuild: expected one 'obj-m := <module>\.o'"):
        modules.modules(top)
