"""scripts/tbprof: the plugin builds and exports what QEMU loads; snapshots,
their difference, symbols and the per-I/O table."""
from __future__ import annotations

import re
import subprocess
from collections import Counter
from pathlib import Path

import pytest

from scripts import tbprof

KALLSYMS = """\
ffffffff81000000 T _stext
ffffffff81000100 t helper
ffffffff81000200 D some_data
ffffffff81000300 W weak_fn
ffffffffc0000000 t ffq_refresh\t[flashfq_iosched]
ffffffffc0000400 T ffq_insert_requests\t[flashfq_iosched]
"""


def test_snapshot_lines_parse_and_junk_is_refused() -> None:
    assert tbprof.parse_counts("ffffffff81000010 5 7\n\n400000 3 2\n") == {
        (0xffffffff81000010, 5): 7, (0x400000, 3): 2}
    with pytest.raises(ValueError, match="not a snapshot line: 'ffffffff81000010 5'"):
        tbprof.parse_counts("ffffffff81000010 5\n")


def test_difference_keeps_only_blocks_that_ran_between() -> None:
    before = {(0x10, 4): 5, (0x20, 2): 1}
    after = {(0x10, 4): 9, (0x20, 2): 1, (0x30, 1): 3}
    assert tbprof.diff_counts(after, before) == {(0x10, 4): 4, (0x30, 1): 3}
    with pytest.raises(ValueError, match="block 0x10 ran fewer times in the later snapshot"):
        tbprof.diff_counts(before, after)


def test_symbols_name_text_addresses_with_their_module() -> None:
    s = tbprof.Symbols.parse([KALLSYMS])
    assert s.name(0xffffffff81000000) == "_stext"
    assert s.name(0xffffffff81000150) == "helper"
    # data symbols are not functions: the text symbol below counts
    assert s.name(0xffffffff81000250) == "helper"
    assert s.name(0xffffffff81000300) == "weak_fn"
    assert s.name(0xffffffffc0000010) == "ffq_refresh[flashfq_iosched]"
    assert s.name(0xffffffffc0000400) == "ffq_insert_requests[flashfq_iosched]"
    assert s.name(0x400000) == "user"


def test_instructions_per_symbol_weigh_blocks_by_size() -> None:
    s = tbprof.Symbols.parse([KALLSYMS])
    per = tbprof.per_symbol({(0xffffffff81000100, 5): 10, (0xffffffff81000180, 2): 3,
                             (0x401000, 7): 1}, s)
    assert per == Counter({"helper": 56, "user": 7})


def test_blocks_of_a_function_by_offset_per_io() -> None:
    """--blocks: a function's blocks at their offsets from its start (to
    read beside objdump), how often each ran per I/O, and their total."""
    s = tbprof.Symbols.parse([KALLSYMS])
    delta = {(0xffffffffc0000420, 3): 20, (0xffffffffc0000400, 6): 10,
             (0xffffffffc0000010, 4): 99, (0x401000, 7): 1}
    blocks = tbprof.blocks_of(delta, s, "ffq_insert_requests[flashfq_iosched]", 10)
    assert blocks == [(0x0, 6, 1.0), (0x20, 3, 2.0)]
    text = tbprof.render_blocks("ffq_insert_requests[flashfq_iosched]", "flashfq", blocks)
    assert text.splitlines()[1].split() == ["+0x0000", "6", "1.00", "6.0"]
    assert text.splitlines()[-1].split() == ["total", "12.0"]
    assert s.start(0x400000) is None


def test_table_puts_the_largest_difference_first() -> None:
    results = {"fifo-ref": (100, Counter({"a": 1000, "b": 5000, "fifo_x": 300})),
               "flashfq": (50, Counter({"a": 500, "b": 5000, "ffq_y": 4000}))}
    lines = tbprof.render(results, top=10).splitlines()
    assert lines[0].split() == ["instructions", "per", "I/O", "fifo-ref", "flashfq"]
    assert lines[1].split() == ["I/Os", "100", "50"]
    assert lines[2].split() == ["all", "63.0", "190.0"]
    # per I/O: b 50 / 100, ffq_y 0 / 80, b ..., a 10 / 10
    assert [ln.split()[0] for ln in lines[3:]] == ["ffq_y", "b", "fifo_x", "a"]
    assert lines[3].split()[1:] == ["0.0", "80.0"]
    assert len(tbprof.render(results, top=2).splitlines()) == 5


def test_tune_items_by_scheduler() -> None:
    assert tbprof.parse_tune(["flashfq:depth=256", "flashfq:throttle_us=0", "k2:max_inflight=8"]) \
        == {"flashfq": [("depth", "256"), ("throttle_us", "0")], "k2": [("max_inflight", "8")]}
    for bad in ("flashfq", "flashfq:depth", ":depth=1", "flashfq:=1", "flashfq:a/b=1",
                "flashfq:depth="):
        with pytest.raises(ValueError, match=f"^--tune '{re.escape(bad)}': SCHED:NAME=VALUE$"):
            tbprof.parse_tune([bad])


def test_plugin_builds_and_exports_what_qemu_looks_up(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tbprof, "CACHE", tmp_path)
    so = tbprof.build_plugin()
    assert so.exists()
    dyn = subprocess.run(["nm", "-D", "--defined-only", str(so)], capture_output=True,
                         text=True, check=True).stdout.split()
    assert "qemu_plugin_install" in dyn and "qemu_plugin_version" in dyn
    # nothing else leaks out of the plugin
    assert not [s for s in dyn if s.startswith(("block_", "snapshot", "watch", "table"))]
    # built once: a second call keeps it
    mtime = so.stat().st_mtime_ns
    assert tbprof.build_plugin() == so and so.stat().st_mtime_ns == mtime
