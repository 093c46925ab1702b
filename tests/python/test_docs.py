"""A scheduler's interface is documented once, in its folder's README.md:
its Tunables table names exactly the sysfs attributes the module registers
(its struct elv_fs_entry array), its debugfs table exactly the files of its
blk_mq_debugfs_attr arrays, and its Tracepoints table exactly the events of
its trace header."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from bench import modules

ROOT = Path(__file__).resolve().parents[2]


def elevators() -> dict[str, Path]:
    """Elevator name -> its .c file, for each shipped module's elevator."""
    return {m.elevator: m.source for m in modules.modules()
            if m.elevator and m.source and m.shipped}


def _array(src: str, kind: str) -> list[str]:
    """The bodies of every `<kind> name[] = { ... };` array in @src."""
    return re.findall(rf"{kind}\s+\w+\[\]\s*=\s*\{{(.*?)\n\}};", src, re.S)


def _macro_names(src: str, call: str, arg: str) -> str:
    """The name a macro call @call(@arg) in an attribute array gives, from
    its #define: its first argument stringified (#x) with literal text
    before or after, or as an identifier."""
    m = re.search(rf"#define\s+{call}\((\w+)\)\s*(.*?)(?<!\\)\n", src, re.S)
    assert m, f"no #define of {call}"
    param, body = m.group(1), m.group(2).replace("\\\n", " ")
    s = re.search(rf'(?:"([^"]*)"\s*)?#{param}\b(?:\s*"([^"]*)")?', body)
    if s:
        return (s.group(1) or "") + arg + (s.group(2) or "")
    # __ATTR(x, ...) style: the attribute is named by the identifier
    assert re.search(rf"__ATTR\w*\(\s*{param}\b", body), f"{call}: cannot read its name"
    return arg


def sysfs_attrs(c: Path) -> set[str]:
    src = c.read_text()
    names: set[str] = set()
    for body in _array(src, "struct elv_fs_entry"):
        for call, arg in re.findall(r"(\w+)\(\s*(\w+)\s*[,)]", body):
            names.add(arg if call.startswith("__ATTR") else _macro_names(src, call, arg))
    return names


def debugfs_files(c: Path) -> set[str]:
    src = c.read_text()
    names: set[str] = set()
    for body in _array(src, "const struct blk_mq_debugfs_attr"):
        names.update(re.findall(r'\{\s*"([^"]+)"', body))
        for call, arg in re.findall(r"^\s*([A-Z][A-Z0-9_]+)\((\w+)\)", body, re.M):
            names.add(_macro_names(src, call, arg))
    return names


def trace_events(system: str) -> set[str]:
    h = ROOT / "tracepoints" / "trace" / "events" / f"{system}.h"
    return set(re.findall(r"^(?:TRACE_EVENT|DEFINE_EVENT)\((?:\w+,\s*)?(\w+),", h.read_text(),
                          re.M)) - {""}


def doc_table(readme: Path, heading: str) -> list[list[str]]:
    """The rows (cells stripped) of the first table under '## @heading'."""
    text = readme.read_text()
    m = re.search(rf"^## {re.escape(heading)}\s*$(.*?)(?=^## |\Z)", text, re.M | re.S)
    assert m, f"{readme.relative_to(ROOT)} has no '## {heading}' section"
    rows, started = [], False
    for line in m.group(1).splitlines():
        if line.startswith("|"):
            started = True
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if not set("".join(cells)) <= set("-: "):
                rows.append(cells)
        elif started:
            break
    assert rows, f"{readme.relative_to(ROOT)}: no table under '## {heading}'"
    return rows[1:]  # the header row


def names(rows: list[list[str]]) -> set[str]:
    out = set()
    for r in rows:
        m = re.fullmatch(r"`([^`]+)`", r[0])
        assert m, f"a first cell that is not one `name`: {r[0]!r}"
        out.add(m.group(1))
    return out


ELEVATORS = elevators()


def test_the_elevators_are_found() -> None:
    assert {"k2", "flashfq", "cars"} <= set(ELEVATORS)


@pytest.mark.parametrize("elevator", sorted(ELEVATORS))
def test_tunables_table_is_the_modules_sysfs(elevator: str) -> None:
    c = ELEVATORS[elevator]
    doc = names(doc_table(c.parent / "README.md", "Tunables"))
    assert doc == sysfs_attrs(c)


@pytest.mark.parametrize("elevator", sorted(ELEVATORS))
def test_debugfs_table_is_the_modules_debugfs(elevator: str) -> None:
    c = ELEVATORS[elevator]
    doc = names(doc_table(c.parent / "README.md", "debugfs"))
    assert doc == debugfs_files(c)


@pytest.mark.parametrize("elevator", sorted(ELEVATORS))
def test_tracepoints_table_is_the_trace_header(elevator: str) -> None:
    c = ELEVATORS[elevator]
    doc = names(doc_table(c.parent / "README.md", "Tracepoints"))
    assert doc == trace_events(elevator)


def test_the_parsers_read_what_they_are_given(tmp_path: Path) -> None:
    """The C readers above, on a made-up elevator."""
    c = tmp_path / "x.c"
    c.write_text('''
#define X_ATTR(name) __ATTR(name, 0644, x_##name##_show, x_##name##_store)
static struct elv_fs_entry x_attrs[] = {
	X_ATTR(depth),
	__ATTR(other, 0444, x_other_show, NULL),
	__ATTR_NULL
};
#define X_LIST(name) {#name "_list", 0400, .seq_ops = &x_##name##_seq_ops}
static const struct blk_mq_debugfs_attr x_queue_debugfs_attrs[] = {
	{"inflight", 0400, x_inflight_show},
	X_LIST(rt0),
	{},
};
''')
    assert sysfs_attrs(c) == {"depth", "other"}
    assert debugfs_files(c) == {"inflight", "rt0_list"}


def front_table(elevator: str) -> list[list[str]]:
    """The tunables table under README.md's '## <Name> (`elevator`)'."""
    text = (ROOT / "README.md").read_text()
    m = re.search(rf"^## [^\n]*\(`{re.escape(elevator)}`\)\s*$", text, re.M)
    assert m, f"README.md has no section for `{elevator}`"
    heading = text[m.start() + 3:m.end()].strip()
    return doc_table(ROOT / "README.md", heading)


@pytest.mark.parametrize("elevator", sorted(ELEVATORS))
def test_the_front_doors_tunables_agree_with_the_folders(elevator: str) -> None:
    """README.md's short table per scheduler: the module's tunables, each
    with the default its folder's document gives."""
    c = ELEVATORS[elevator]
    front = {r[0].strip("`"): r for r in front_table(elevator)}
    assert set(front) == sysfs_attrs(c)
    folder = {r[0].strip("`"): r for r in doc_table(c.parent / "README.md", "Tunables")}
    for name, row in front.items():
        want = folder[name][3]
        default = row[2]
        if default == "read-only":
            assert folder[name][2] == "read-only", name
        else:
            assert want.startswith(default), f"{name}: README.md says {default}, " \
                f"{c.parent.name}/README.md {want}"


def test_folder_documents_exist() -> None:
    """Each folder README.md's front door links to exists."""
    text = (ROOT / "README.md").read_text()
    for link in set(re.findall(r"\]\(([\w-]+/README\.md)(?:#[\w-]+)?\)", text)):
        assert (ROOT / link).is_file(), link
