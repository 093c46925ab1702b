"""The tools' imports point down: a module imports only from its own layer
or the ones below it (LAYERS, lowest first), and no library module loads
code by importlib or by changing sys.path.

KNOWN lists the imports allowed to break the rule (none: issue 43 undid
the last); a new one fails here, and so does an entry that no longer
exists (remove it with the change that undoes it)."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# package -> its folder
PACKAGES = {"bench": ROOT / "bench", "kybertune": ROOT / "kyber-tune" / "kybertune",
            "tracepoints": ROOT / "tracepoints", "scripts": ROOT / "scripts"}

LAYERS: list[set[str]] = [
    # what reads the tree, formats, and drives a VM: no project imports
    {"bench", "bench.modules", "bench.markdown", "bench.fio", "bench.jobs",
     "scripts", "scripts.vmbed", "scripts.cpucap", "tracepoints", "tracepoints.report"},
    # where commands run (the machine or a VM), devices, stored results
    {"bench.target", "bench.device", "bench.results"},
    # running fio plans and recording traces
    {"bench.runner", "bench.trace", "bench.vm", "bench.prep", "bench.probe"},
    # the suites and what they share (bench.plot); kyber-grid's module holds
    # the grids kyber-tune reads, kyber_dead their dead space
    {"bench.suites", "bench.suites.k2", "bench.suites.kyber_baseline", "bench.suites.flashfq",
     "bench.suites.cars", "bench.suites.overhead", "bench.suites.kyber_grid",
     "bench.suites.kyber_dead", "bench.plot", "bench.calibrate"},
    # reports, sessions and the command line
    {"bench.report", "bench.session", "bench.args", "bench.demo", "bench.cli"},
    # kyber-tune, a user of bench
    {"kybertune", "kybertune.recommend", "kybertune.auto", "kybertune.versus",
     "kybertune.demo", "kybertune.cli"},
    # entry points over everything (python3 -m bench hands kyber-tune's steps
    # to bench's demo)
    {"bench.__main__", "scripts.tbprof", "scripts.hostprof"},
]

# (importer, imported) pairs allowed against the rule
KNOWN: set[tuple[str, str]] = set()
# library modules allowed to load code by importlib or sys.path
KNOWN_DYNAMIC: set[str] = set()
# entry points may put the tree on sys.path (they run as scripts)
ENTRY_POINTS = {"bench.__main__", "scripts.tbprof", "scripts.hostprof"}


def modules() -> dict[str, Path]:
    out = {}
    for pkg, folder in PACKAGES.items():
        for f in folder.rglob("*.py"):
            rel = f.relative_to(folder)
            if "tests" in rel.parts:
                continue
            parts = [pkg, *rel.with_suffix("").parts]
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join(parts)] = f
    return out


MODULES = modules()


def imports(name: str) -> set[str]:
    """The project modules @name imports (from X import y: X.y where that
    is a module, else X)."""
    tree = ast.parse(MODULES[name].read_text())
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for a in node.names:
                sub = f"{node.module}.{a.name}"
                out.add(sub if sub in MODULES else node.module)
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
    return {m for m in out if m in MODULES}


def layer(name: str) -> int:
    found = [i for i, mods in enumerate(LAYERS) if name in mods]
    assert len(found) == 1, f"{name} is in {len(found)} layers of LAYERS: give it one"
    return found[0]


def test_every_module_has_a_layer() -> None:
    for name in MODULES:
        layer(name)
    assert set().union(*LAYERS) <= set(MODULES), set().union(*LAYERS) - set(MODULES)


def upward() -> set[tuple[str, str]]:
    return {(m, i) for m in MODULES for i in imports(m) if layer(i) > layer(m)}


def test_imports_point_down() -> None:
    new = upward() - KNOWN
    assert not new, "imports from a higher layer (tests/python/test_layers.py LAYERS):\n" + \
        "\n".join(f"  {m} imports {i}" for m, i in sorted(new))


def test_known_exceptions_still_exist() -> None:
    gone = KNOWN - upward()
    assert not gone, f"no longer imported upward, remove from KNOWN: {sorted(gone)}"


def dynamic(name: str) -> bool:
    text = MODULES[name].read_text()
    return "importlib" in text or "sys.path" in text


@pytest.mark.parametrize("name", sorted(set(MODULES) - ENTRY_POINTS))
def test_no_loading_by_importlib_or_sys_path(name: str) -> None:
    assert dynamic(name) == (name in KNOWN_DYNAMIC), \
        f"{name}: importlib or sys.path in a library module" if dynamic(name) else \
        f"{name} no longer loads code dynamically: remove it from KNOWN_DYNAMIC"
