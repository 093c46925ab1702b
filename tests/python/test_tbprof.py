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


def test_footprint_counts_block_runs_and_the_hot_blocks() -> None:
    """Blocks run per I/O, the runs of blocks left through a lookup, and
    the blocks that ran at least once per HOT_IOS I/Os (a block run 9
    times in 100 I/Os is not hot)."""
    delta = {(0x1000, 3): 250, (0x1010, 2): 10, (0x1020, 5): 9, (0x1030, 1): 0}
    f = tbprof.footprint(delta, 100, {(0x1010, 2), (0x1020, 5), (0x2000, 1)})
    assert (f.runs, f.hot, f.indirect) == (269, 2, 19)
    assert tbprof.footprint(delta, 0).hot == 0
    assert tbprof.footprint(delta, 100).indirect == 0
    results = {"fifo-ref": (100, Counter({"a": 1000})), "flashfq": (50, Counter({"a": 800}))}
    lines = tbprof.render(results, top=10, feet={"fifo-ref": f, "flashfq": tbprof.Footprint(
        100, 7, 40, 25)}).splitlines()
    assert lines[3].split() == ["blocks", "run", "2.7", "2.0"]
    assert lines[4].split() == ["indirect", "exits", "(ret,", "jmp/call", "*)", "0.2", "0.8"]
    assert lines[5].split() == ["exits", "to", "another", "page", "(jmp,", "call)", "0.0",
                                "0.5"]
    assert lines[6].split() == ["hot", "blocks", "(>=", "1", "per", "10", "I/Os)", "2", "7"]
    assert lines[7].split()[0] == "a"


def test_exits_to_another_page_count_as_lookups_of_the_block_left() -> None:
    """QEMU chains a block only to one on its own page: "pex" lines count
    the other exits, by the block left; with the indirect ones they are
    the lookups, by block and by function."""
    before = tbprof.parse_snapshot("1000 3 5\n2000 2 1\nind 2000 2\npex 1000 3 2\n")
    after = tbprof.parse_snapshot("1000 3 9\n2000 2 4\nind 2000 2\npex 1000 3 5\n"
                                  "pex 2000 2 7\n")
    d = tbprof.diff_snapshot(after, before)
    assert d.pexits == {(0x1000, 3): 3, (0x2000, 2): 7}
    assert tbprof.footprint(d.blocks, 4, d.indirect, d.pexits).pexits == 10
    # 2000: 3 indirect executions and 7 exits to another page
    assert tbprof.lookups(d) == {(0x1000, 3): 3, (0x2000, 2): 10}
    syms = tbprof.Symbols.parse(["0000000000001000 T f\n0000000000002000 T g\n"])
    assert tbprof.lookups_per_symbol(d, syms) == Counter({"f": 3, "g": 10})
    with pytest.raises(ValueError):
        tbprof.parse_snapshot("pex 1000 3\n")


def test_tlb_fills_and_victim_hits_are_counted_by_instruction() -> None:
    """tlb= lines: fills and victim hits by instruction; a snapshot pair
    gives what grew, by function (the table's Counter)."""
    before = tbprof.parse_snapshot("1000 3 5\ntlb 1004 2 7\n")
    after = tbprof.parse_snapshot("1000 3 9\ntlb 1004 5 7\ntlb 2008 0 4\n")
    d = tbprof.diff_snapshot(after, before)
    assert d.fills == {0x1004: 3}
    assert d.victims == {0x2008: 4}
    syms = tbprof.Symbols.parse(["0000000000001000 T f\n0000000000002000 T g\n"])
    assert tbprof.insn_counts_per_symbol(d.fills, syms) == Counter({"f": 3})
    assert tbprof.insn_counts_of(d.victims, syms, "g", 2) == [(8, 2.0)]
    with pytest.raises(ValueError):
        tbprof.parse_snapshot("tlb 1004 2\n")


def test_blocks_left_through_a_lookup_are_listed_and_kept() -> None:
    before = tbprof.parse_snapshot("1000 3 5\nind 1000 3\n")
    after = tbprof.parse_snapshot("1000 3 9\n2000 2 4\nind 1000 3\nind 2000 2\n")
    d = tbprof.diff_snapshot(after, before)
    assert d.indirect == {(0x1000, 3), (0x2000, 2)}
    assert tbprof.footprint(d.blocks, 4, d.indirect).indirect == 8


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


# --locks ------------------------------------------------------------------

LOCKSYMS = KALLSYMS + """\
ffffffff81100000 T _raw_spin_lock
ffffffff81100040 T _raw_spin_lock_irq
ffffffff81100080 T _raw_spin_unlock
ffffffff811000c0 T _raw_spin_unlock_irq
ffffffff81100100 T _raw_spin_trylock
ffffffff81100140 T queued_spin_lock_slowpath
ffffffff81200000 T blk_mq_sched_dispatch_requests
ffffffffc0100000 t dd_insert_requests\t[mq_deadline]
ffffffffc0100200 t dd_dispatch_request\t[mq_deadline]
ffffffffc0100400 t dd_finish_request\t[mq_deadline]
ffffffffc0200000 t kyber_insert_requests\t[kyber_iosched]
ffffffffc0200200 t kyber_dispatch_request\t[kyber_iosched]
ffffffffc0300000 t k2_dispatch_request\t[k2_iosched]
"""
LOCK = 0xffff888001234540        # dd->lock, on line ...4540
LINE = LOCK & ~63


def test_a_snapshot_with_locks_parses_and_differences() -> None:
    """locks=on adds lock, atomic and unmatched lines; a difference keeps
    what changed between two snapshots."""
    before = tbprof.parse_snapshot(
        "ffffffff81000100 5 1\n"
        f"lock ffffffffc0100010 {LOCK:x} ffffffff81100000 10 300 0\n"
        "atomic ffffffffc0100410 4 0 ffff888001234580:4\n"
        "unmatched 1 0\n")
    after = tbprof.parse_snapshot(
        "ffffffff81000100 5 3\n"
        f"lock ffffffffc0100010 {LOCK:x} ffffffff81100000 30 900 5\n"
        f"lock ffffffffc0100210 {LOCK:x} ffffffff81100000 7 70 0\n"
        "atomic ffffffffc0100410 10 2 ffff888001234580:9 ffff8880012345c0:1\n"
        "unmatched 3 1\n")
    assert after.blocks == {(0xffffffff81000100, 5): 3}
    assert after.holds[(0xffffffffc0100210, LOCK, 0xffffffff81100000)] == (7, 70, 0)
    assert after.atomics[0xffffffffc0100410] == tbprof.Atomic(
        10, 2, {0xffff888001234580: 9, 0xffff8880012345c0: 1})
    d = tbprof.diff_snapshot(after, before)
    assert d.blocks == {(0xffffffff81000100, 5): 2}
    assert d.holds == {(0xffffffffc0100010, LOCK, 0xffffffff81100000): (20, 600, 5),
                       (0xffffffffc0100210, LOCK, 0xffffffff81100000): (7, 70, 0)}
    assert d.atomics == {0xffffffffc0100410: tbprof.Atomic(
        6, 2, {0xffff888001234580: 5, 0xffff8880012345c0: 1})}
    assert (d.unmatched, d.dropped) == (2, 1)
    # the plain snapshot's reader still reads the blocks alone
    assert tbprof.parse_counts("ffffffff81000100 5 3\nunmatched 0 0\n") == {
        (0xffffffff81000100, 5): 3}
    for bad in ("lock 1 2 3 4 5", "atomic 1", "unmatched 1", "atomic x 1 0"):
        with pytest.raises(ValueError, match="not a snapshot line"):
            tbprof.parse_snapshot(bad + "\n")


def test_the_primitives_command_names_each_entry_and_what_it_does() -> None:
    syms = tbprof.Symbols.parse([LOCKSYMS])
    lines = tbprof.primitives_command(syms).splitlines()
    assert lines[0] == "locks"
    assert sorted(lines[1:]) == ["ffffffff81100000 1", "ffffffff81100040 1",
                                 "ffffffff81100080 3", "ffffffff811000c0 3",
                                 "ffffffff81100100 2"]
    with pytest.raises(ValueError, match="none of the lock primitives"):
        tbprof.primitives_command(tbprof.Symbols.parse([KALLSYMS]))
    assert syms.address("dd_insert_requests[mq_deadline]") == 0xffffffffc0100000
    assert syms.address("nothing") is None


PATHS = {
    "dd_insert_requests[mq_deadline]": "insert",
    "dd_bio_merge[mq_deadline]": "insert",
    "bfq_limit_depth[bfq]": "insert",
    "blk_mq_submit_bio": "insert",
    "blk_mq_dispatch_plug_list": "insert",
    "__blk_mq_sched_dispatch_requests": "dispatch",
    "dd_dispatch_request[mq_deadline]": "dispatch",
    "kyber_has_work[kyber_iosched]": "dispatch",
    "bfq_finish_requeue_request[bfq]": "completion",
    "kyber_completed_request[kyber_iosched]": "completion",
    "blk_mq_end_request_batch": "completion",
    "try_to_wake_up": "other",
}


def test_a_site_is_put_on_its_path_by_its_name() -> None:
    assert {f: tbprof.path_of(f) for f in PATHS} == PATHS


def test_a_lock_is_the_elevators_when_its_code_takes_it() -> None:
    assert tbprof.elevator_of("dd_insert_requests[mq_deadline]", "mq-deadline", None)
    # 6.1: mq-deadline built in
    assert tbprof.elevator_of("dd_insert_requests", "mq-deadline", None)
    assert not tbprof.elevator_of("blk_mq_submit_bio", "mq-deadline", None)
    assert tbprof.elevator_of("k2_dispatch_request[k2_iosched]", "k2", "k2-iosched")
    assert not tbprof.elevator_of("k2_dispatch_request[k2_iosched]", "flashfq", "flashfq-iosched")
    assert not tbprof.elevator_of("k2_dispatch_request", "k2", "k2-iosched")
    assert tbprof.scope_of(["dd_insert_requests[mq_deadline]", "blk_mq_x"], "mq-deadline",
                           None) == "queue"
    assert tbprof.scope_of(["blk_mq_sched_dispatch_requests"], "mq-deadline", None) == "core"
    assert tbprof.scope_of(["kyber_insert_requests[kyber_iosched]"], "kyber", None) == "cpu"
    assert tbprof.scope_of(["kyber_dispatch_request[kyber_iosched]"], "kyber", None) == "hctx"
    assert tbprof.scope_of(["dd_insert_requests[mq_deadline]"], "none", None) == "core"
    # BFQ takes the task's io_context lock too: one per task
    assert tbprof.scope_of(["bfq_limit_depth[bfq]", "ioc_find_get_icq"], "bfq", None) == "task"
    assert tbprof.scope_of(["kyber_completed_request[kyber_iosched]"], "kyber", None,
                           tbprof.ATOMIC_SCOPE_EXCEPTIONS) == "cpu"
    assert tbprof.scope_of(["cars_post_release[cars_iosched]"], "cars", "cars-iosched",
                           tbprof.ATOMIC_SCOPE_EXCEPTIONS) == "cpu"


def _locks_delta() -> tbprof.Snapshot:
    return tbprof.parse_snapshot(
        # dd->lock: insert twice per 10 I/Os, 50 instructions each...
        f"lock ffffffffc0100010 {LOCK:x} ffffffff81100000 20 1000 0\n"
        # ... dispatch once per I/O, 30 each, 10 of them with interrupts off already
        f"lock ffffffffc0100210 {LOCK:x} ffffffff81100000 100 3000 10\n"
        # hctx->lock in the core, with interrupts off by the primitive
        "lock ffffffff81200010 ffff888002000000 ffffffff81100040 50 500 0\n"
        # an atomic on dd's stats (one line), one on a request (many), one in a primitive
        "atomic ffffffffc0100410 100 0 ffff888001234580:200\n"
        "atomic ffffffffc0300010 100 7 1000:1 2000:1 3000:1 4000:1\n"
        "atomic ffffffff81100010 170 0 ffff888001234540:170\n")


def test_lock_sites_per_io_with_path_scope_and_interrupts() -> None:
    syms = tbprof.Symbols.parse([LOCKSYMS])
    sites = tbprof.lock_sites(_locks_delta(), syms, 100, "mq-deadline", None)
    assert [(s.func, s.primitive, s.scope, s.path) for s in sites] == [
        ("dd_dispatch_request[mq_deadline]", "_raw_spin_lock", "queue", "dispatch"),
        ("blk_mq_sched_dispatch_requests", "_raw_spin_lock_irq", "core", "dispatch"),
        ("dd_insert_requests[mq_deadline]", "_raw_spin_lock", "queue", "insert")]
    d, h, i = sites
    assert (d.acquisitions, d.held, d.held_each, d.irqoff) == (1.0, 30.0, 30.0, 0.1)
    assert h.irqoff == 1.0         # _irq: all of them
    assert (i.acquisitions, i.held, i.held_each, i.irqoff) == (0.2, 10.0, 50.0, 0.0)


def test_atomics_leave_out_the_primitives_and_spread_over_their_lines() -> None:
    syms = tbprof.Symbols.parse([LOCKSYMS])
    ats = tbprof.atomic_sites(_locks_delta(), syms, 100)
    assert [(a.func, a.execs) for a in ats] == [("dd_finish_request[mq_deadline]", 1.0),
                                                ("k2_dispatch_request[k2_iosched]", 1.0)]
    assert ats[0].lines == {0xffff888001234580: 1.0}
    assert ats[1].lines is None    # more lines than the plugin keeps


def test_the_model_moves_lines_by_distance_and_bounds_iops() -> None:
    m = tbprof.Model(ghz=4.0, ipc=1.0, near_ns=20.0, far_ns=80.0, ccx=8)
    assert m.transfer_ns(1) == 0.0
    assert m.transfer_ns(8) == pytest.approx(7 * 20 / 8)
    assert m.transfer_ns(32) == pytest.approx((7 * 20 + 24 * 80) / 32)
    # 40 instructions held (10 ns) and one transfer per I/O
    assert m.ceiling(1.0, 40.0, 1) == pytest.approx(1e8)
    assert m.ceiling(1.0, 40.0, 8) == pytest.approx(1e9 / (10 + 17.5))
    assert m.ceiling(0.0, 0.0, 32) == float("inf")


def test_shared_lines_join_a_lock_and_the_elevators_atomics() -> None:
    syms = tbprof.Symbols.parse([LOCKSYMS])
    delta = _locks_delta()
    delta.atomics[0xffffffffc0100420] = tbprof.Atomic(50, 0, {LOCK + 8: 50})  # dd's line
    sites = tbprof.lock_sites(delta, syms, 100, "mq-deadline", None)
    ats = tbprof.atomic_sites(delta, syms, 100)
    lines = tbprof.shared_lines(sites, ats, "mq-deadline", None)
    assert [(ln.addr, ln.scope, ln.acquisitions, ln.held, ln.atomics) for ln in lines] == [
        (LINE, "queue", 1.2, 40.0, 0.5), (0xffff888001234580, "queue", 0.0, 0.0, 1.0)]
    assert lines[0].what == "dd_dispatch_request, dd_finish_request (atomic), dd_insert_requests"
    assert lines[0].transfers == pytest.approx(1.7)
    # none has no elevator: nothing of its own is shared
    none = tbprof.lock_sites(delta, syms, 100, "none", None)
    assert {s.scope for s in none} == {"core"}
    assert tbprof.shared_lines(none, ats, "none", None) == []
    m = tbprof.Model(ghz=4.0, ipc=1.0, near_ns=20.0, far_ns=80.0, ccx=8)
    text = tbprof.render_ceilings({"mq-deadline": lines, "none": []}, m, cpus=(1, 8))
    out = text.splitlines()
    assert out[1].split()[:7] == ["scheduler", "scope", "acq/IO", "atomic/IO", "held/IO",
                                  "1", "CPU"]
    # 40 instructions: 10 ns, 100M at 1 CPU; + 1.7 x 17.5 ns at 8
    assert out[2].split()[:7] == ["mq-deadline", "queue", "1.200", "0.500", "40.0",
                                  "100.00M", f"{1e9 / (10 + 1.7 * 17.5) / 1e6:.2f}M"]
    assert out[3].split()[:4] == ["none", "-", "no", "limit"]
    # a line of one CPU's or task's bounds nothing
    own = [tbprof.Line(LINE, "cpu", 1.0, 100.0, 0.0, "x"),
           tbprof.Line(0, "task", 1.0, 9.0, 0.0, "y")]
    assert "no line of the elevator's shared" in tbprof.render_ceilings({"k": own}, m, cpus=(1,))
    # an hctx line is shown, a queue line preferred
    both = own + [tbprof.Line(64, "hctx", 1.0, 400.0, 0.0, "h"),
                  tbprof.Line(128, "queue", 1.0, 4.0, 0.0, "q")]
    assert tbprof.render_ceilings({"k": both}, m, cpus=(1,)).splitlines()[2].split()[1] == "queue"
    assert tbprof.render_ceilings({"k": both[:3]}, m, cpus=(1,)).splitlines()[2].split()[1] \
        == "hctx"


def test_the_lock_table_shows_each_site_and_the_atomics() -> None:
    syms = tbprof.Symbols.parse([LOCKSYMS])
    delta = _locks_delta()
    sites = tbprof.lock_sites(delta, syms, 100, "mq-deadline", None)
    ats = tbprof.atomic_sites(delta, syms, 100)
    out = tbprof.render_locks("mq-deadline", 100, sites, ats, delta, 0.3).splitlines()
    assert out[0].startswith("mq-deadline: 100 I/Os;")
    assert out[2].split() == ["01234540", "queue", "dd_dispatch_request[mq_deadline]",
                              "_raw_spin_lock", "dispatch", "10%", "1.000", "30.0", "30.0"]
    assert out[3].split()[2] == "blk_mq_sched_dispatch_requests"
    # below --least: not shown, but in the total
    assert out[4].split() == ["total", "1.700", "45.0"]
    assert out[6].split() == ["dd_finish_request[mq_deadline]", "1.000", "0.000"]
    assert out[7].split() == ["k2_dispatch_request[k2_iosched]", "1.000", "1.000"]


HARNESS = r"""
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <stdbool.h>
#include <stddef.h>
#include "PLUGIN"

/* QEMU's side, as far as the plugin uses it */
struct qemu_plugin_insn { uint64_t vaddr; uint8_t bytes[16]; size_t len; };
struct qemu_plugin_tb { uint64_t vaddr; size_t n; struct qemu_plugin_insn insn[16]; };
static uint64_t regs[3];	/* rdi, rsp, eflags */
static uint64_t stack_top;	/* what [rsp] holds */
static void *exec_data;
static gbytes_t bufs[4];
static uint8_t bufmem[4][64];
static unsigned int nbufs;

void qemu_plugin_register_vcpu_tb_trans_cb(qemu_plugin_id_t id,
					   qemu_plugin_vcpu_tb_trans_cb_t cb) {}
void qemu_plugin_register_vcpu_tb_exec_cb(struct qemu_plugin_tb *tb,
					  qemu_plugin_vcpu_udata_cb_t cb, int flags,
					  void *userdata)
{ exec_data = userdata; }
size_t qemu_plugin_tb_n_insns(const struct qemu_plugin_tb *tb) { return tb->n; }
uint64_t qemu_plugin_tb_vaddr(const struct qemu_plugin_tb *tb) { return tb->vaddr; }
void qemu_plugin_register_vcpu_init_cb(qemu_plugin_id_t id,
				       qemu_plugin_vcpu_simple_cb_t cb) {}
struct qemu_plugin_insn *qemu_plugin_tb_get_insn(const struct qemu_plugin_tb *tb,
						 size_t idx)
{ return (struct qemu_plugin_insn *)&tb->insn[idx]; }
size_t qemu_plugin_insn_data(const struct qemu_plugin_insn *insn, void *dest,
			     size_t len)
{ len = len < insn->len ? len : insn->len; memcpy(dest, insn->bytes, len); return len; }
uint64_t qemu_plugin_insn_vaddr(const struct qemu_plugin_insn *insn) { return insn->vaddr; }
void qemu_plugin_register_vcpu_mem_cb(struct qemu_plugin_insn *insn,
				      qemu_plugin_vcpu_mem_cb_t cb, int flags,
				      int rw, void *userdata) {}
static reg_descriptor_t descs[] = {
	{ (struct qemu_plugin_register *)1, "rax", 0 },
	{ (struct qemu_plugin_register *)2, "rdi", 0 },
	{ (struct qemu_plugin_register *)3, "rsp", 0 },
	{ (struct qemu_plugin_register *)4, "eflags", 0 },
};
static garray_t regarray = { (char *)descs, 4 };
garray_t *qemu_plugin_get_registers(void) { return &regarray; }
int qemu_plugin_read_register(struct qemu_plugin_register *handle, gbytes_t *buf)
{
	uintptr_t h = (uintptr_t)handle;
	uint64_t v = h == 2 ? regs[0] : h == 3 ? regs[1] : regs[2];
	int n = h == 4 ? 4 : 8;

	memcpy(buf->data + buf->len, &v, n);
	buf->len += n;
	return n;
}
bool qemu_plugin_read_memory_vaddr(uint64_t addr, gbytes_t *data, size_t len)
{
	if (addr != regs[1] || len != 8)
		return false;
	memcpy(data->data, &stack_top, 8);
	data->len = 8;
	return true;
}
gbytes_t *g_byte_array_new(void)
{ bufs[nbufs].data = bufmem[nbufs]; return &bufs[nbufs++]; }
gbytes_t *g_byte_array_set_size(gbytes_t *a, unsigned int len) { a->len = len; return a; }
/* the harness's meminfo: bit 0 set for a store */
bool qemu_plugin_mem_is_store(qemu_plugin_meminfo_t info) { return info & 1; }

/* @hex's bytes into @b; returns how many */
static size_t unhex(const char *hex, uint8_t *b)
{
	size_t n = strlen(hex) / 2, j;

	for (j = 0; j < n; j++)
		sscanf(hex + 2 * j, "%2hhx", &b[j]);
	return n;
}

static struct block *translate(uint64_t vaddr, size_t n, const char *bytes)
{
	struct qemu_plugin_tb tb = { .vaddr = vaddr, .n = n };
	size_t i;

	for (i = 0; i < n; i++) {
		tb.insn[i].vaddr = vaddr + i * 4;
		tb.insn[i].len = 1;
		tb.insn[i].bytes[0] = 0x90;
	}
	if (bytes)	/* the first instruction's bytes, as hex */
		tb.insn[0].len = unhex(bytes, tb.insn[0].bytes);
	block_translated(0, &tb);
	return exec_data;
}

static void call(struct block *b, uint64_t rdi, uint64_t site, int irqs_on)
{
	regs[0] = rdi;
	regs[1] = 0x1000;
	regs[2] = irqs_on ? 0x202 : 0x2;
	stack_top = site;
	block_ran_locks(0, b);
}

int main(int argc, char **argv)
{
	static const char *atomics[] = {
		"f00fb111", "3e0fb111", "3eff00", "3e833800", "8703", "87c3", "480107",
		"f0480fc107", "6548ff00", "3e0fba2805", "3e0fba2005", "3ef718", "3ef700", 0 };
	FILE *f = fmemopen("a0000 1\na0100 2\na0200 3\n", 23, "r");
	struct block *caller, *lock, *trylock, *unlock, *body, *atom;
	unsigned int i;

	for (i = 0; atomics[i]; i++) {
		uint8_t b[16];
		size_t n = unhex(atomics[i], b);

		printf("is_atomic %s %d\n", atomics[i], is_atomic(b, n));
	}
	locks = true;
	vcpu_init(0, 0);
	/* a block translated before the primitives are known is marked then */
	lock = translate(0xa0000, 3, 0);
	set_primitives(f);
	trylock = translate(0xa0100, 3, 0);
	unlock = translate(0xa0200, 2, 0);
	caller = translate(0x50000, 10, 0);
	body = translate(0x60000, 5, 0);
	atom = translate(0x70000, 2, "f00fb111");
	printf("codes %d %d %d %d\n", lock->code, trylock->code, unlock->code, caller->code);
	{
		static const char *ends[] = { "c3", "f3c3", "c20800", "ffe0", "41ffd3",
					      "ff1500000000", "e800000000", "ebfe", "ffc0", 0 };

		for (i = 0; ends[i]; i++) {
			uint8_t b[16];
			size_t n = unhex(ends[i], b);

			printf("is_indirect %s %d\n", ends[i], is_indirect(b, n));
		}
	}

	/* lock A at site 0x5000a with interrupts on; 2 blocks of 5; unlock */
	block_ran_locks(0, caller);
	call(lock, 0xA0, 0x5000a, 1);
	block_ran_locks(0, body);
	block_ran_locks(0, body);
	call(unlock, 0xA0, 0x5000b, 1);
	/* a trylock of B that fails, then B taken with interrupts off,
	   nesting C (taken inside: held 3 + 5); B held 3 + 3 + 5 + 2 */
	call(trylock, 0xB0, 0x5000c, 1);
	call(lock, 0xB0, 0x5000d, 0);
	call(lock, 0xC0, 0x5000e, 0);
	block_ran_locks(0, body);
	call(unlock, 0xC0, 0x5000f, 0);
	call(unlock, 0xB0, 0x50010, 0);
	/* a release of a lock not held */
	call(unlock, 0xD0, 0x50011, 1);
	/* an atomic on two lines */
	block_ran_locks(0, atom);
	block_ran_locks(0, atom);
	atomic_access(0, 0, 0xffff888000001008, atom->atomics[0]);
	atomic_access(0, 0, 0xffff888000001010, atom->atomics[0]);
	atomic_access(0, 0, 0xffff888000002000, atom->atomics[0]);
	snapshot(argv[1]);
	return 0;
}
"""


def test_the_plugin_follows_locks_and_atomics(tmp_path: Path) -> None:
    """The plugin's own logic, with QEMU's side stubbed: which instructions
    are atomic, the primitives' codes (blocks translated before they were
    known too), holds per site and lock (nested, after a failed trylock,
    with interrupts off), a release of no lock held, an atomic's lines."""
    src = tmp_path / "harness.c"
    src.write_text(HARNESS.replace("PLUGIN", str(tbprof.PLUGIN_SRC)))
    exe = tmp_path / "harness"
    subprocess.run(["gcc", "-O1", "-Wall", "-Wno-unused-function", "-o", str(exe), str(src),
                    "-lpthread"], check=True)
    out = subprocess.run([str(exe), str(tmp_path / "snap")], capture_output=True, text=True,
                         check=True).stdout.splitlines()
    verdicts = dict(ln.split()[1:] for ln in out if ln.startswith("is_atomic"))
    assert verdicts == {
        "f00fb111": "1",     # lock cmpxchg
        "3e0fb111": "1",     # the same, patched for one CPU
        "3eff00": "1",       # ds inc
        "3e833800": "0",     # ds cmp: not lockable
        "8703": "1",         # xchg with memory
        "87c3": "0",         # xchg of registers
        "480107": "0",       # add without a prefix
        "f0480fc107": "1",   # lock xadd
        "6548ff00": "0",     # a per-CPU inc
        "3e0fba2805": "1",   # ds bts
        "3e0fba2005": "0",   # ds bt: not lockable
        "3ef718": "1",       # ds neg
        "3ef700": "0",       # ds test
    }
    assert "codes 1 2 3 0" in out
    ends = dict(ln.split()[1:] for ln in out if ln.startswith("is_indirect"))
    assert ends == {
        "c3": "1",            # ret
        "f3c3": "1",          # rep ret
        "c20800": "1",        # ret 8
        "ffe0": "1",          # jmp *%rax
        "41ffd3": "1",        # call *%r11
        "ff1500000000": "1",  # call *mem
        "e800000000": "0",    # call rel32: chained
        "ebfe": "0",          # jmp rel8
        "ffc0": "0",          # inc %eax
    }
    snap = tbprof.parse_snapshot((tmp_path / "snap").read_text())
    assert snap.holds == {
        (0x5000a, 0xA0, 0xa0000): (1, 3 + 5 + 5, 0),
        (0x5000d, 0xB0, 0xa0000): (1, 3 + 3 + 5 + 2, 1),
        (0x5000e, 0xC0, 0xa0000): (1, 3 + 5, 1),
    }
    assert (snap.unmatched, snap.dropped) == (1, 0)
    assert snap.atomics == {0x70000: tbprof.Atomic(
        2, 0, {0xffff888000001000: 2, 0xffff888000002000: 1})}
    assert snap.blocks[(0x50000, 10)] == 1 and snap.blocks[(0x60000, 5)] == 3


LINES_MAIN = r"""
/* vcpu @v loads (0) or stores (1) the byte at @addr, by instruction @x */
static void touch(unsigned int v, int store, uint64_t addr, struct insn *x)
{
	line_access(v, store, addr, x);
}

int main(int argc, char **argv)
{
	struct insn *x, *y;
	uint64_t l = 0xffff888000001000ULL, m = 0xffff888000002040ULL;

	lines = true;
	if (lines_init())
		return 1;
	x = insn_at(0xffffffffc0001000ULL);
	y = insn_at(0xffffffffc0001004ULL);
	touch(0, 1, l, x);		/* first touch: none */
	touch(0, 0, l + 8, x);		/* its own line: none */
	touch(1, 0, l, x);		/* modified by 0: 1 */
	touch(0, 0, l, x);		/* shared by both now: none */
	touch(1, 0, l + 63, x);	/* the same line: none */
	touch(0, 1, l, y);		/* 1 holds a copy: 1 (y) */
	touch(0, 1, l, y);		/* exclusive: none */
	touch(1, 1, l + 32, x);	/* 0 holds it: 2 */
	touch(1, 0, m, x);		/* another line, first touch: none */
	touch(0, 0, l + 64, y);	/* the next line, first touch: none */
	touch(0, 1, m, y);		/* 1 holds a copy: 2 (y) */
	touch(2, 0, m, y);		/* modified by 0: 3 (y) */
	snapshot(argv[1]);
	return 0;
}
"""


def test_the_plugins_coherence_model_counts_transfers(tmp_path: Path) -> None:
    """lines=on: a load of a line another vCPU modified and a store to a
    line another vCPU holds are transfers, by the instruction that made
    them; first touches and a vCPU's own lines are not."""
    src = tmp_path / "lines.c"
    src.write_text(HARNESS.split("int main")[0].replace("PLUGIN", str(tbprof.PLUGIN_SRC))
                   + LINES_MAIN)
    exe = tmp_path / "lines"
    subprocess.run(["gcc", "-O1", "-Wall", "-Wno-unused-function", "-o", str(exe), str(src),
                    "-lpthread"], check=True)
    subprocess.run([str(exe), str(tmp_path / "snap")], check=True)
    snap = tbprof.parse_snapshot((tmp_path / "snap").read_text())
    assert snap.xfers == {0xffffffffc0001000: 2, 0xffffffffc0001004: 3}


def test_transfers_difference_and_go_to_their_functions() -> None:
    before = tbprof.parse_snapshot("xfer ffffffffc0100010 5\nxfer ffffffffc0100020 1\n")
    after = tbprof.parse_snapshot("xfer ffffffffc0100010 9\nxfer ffffffffc0100020 1\n"
                                  "xfer ffffffff81000004 2\n")
    d = tbprof.diff_snapshot(after, before)
    assert d.xfers == {0xffffffffc0100010: 4, 0xffffffff81000004: 2}
    syms = tbprof.Symbols.parse([KALLSYMS])
    per = tbprof.insn_counts_per_symbol(d.xfers, syms)
    assert sum(per.values()) == 6
    assert tbprof.insn_counts_of(d.xfers, syms, syms.name(0xffffffffc0100010), 2) == [
        (0xffffffffc0100010 - syms.start(0xffffffffc0100010), 2.0)]


def test_the_job_sums_its_jobs_on_one_line() -> None:
    one = tbprof.fio_job(32, 1)
    assert "--iodepth=32" in one and "--numjobs" not in one
    two = tbprof.fio_job(8, 2)
    assert "--numjobs=2 --group_reporting" in two and "--iodepth=8" in two
    assert "--output-format=terse --terse-version=3" in two
    assert "cpus_allowed" not in two


def test_the_job_pins_one_job_to_a_vcpu_on_several() -> None:
    assert tbprof.fio_job(32, 2, 2).endswith(
        " --cpus_allowed=0-1 --cpus_allowed_policy=split")
    assert tbprof.fio_job(32, 1, 2).endswith(
        " --cpus_allowed=0-0 --cpus_allowed_policy=split")



def test_select_command_writes_the_schedulers_tunables() -> None:
    tunes = tbprof.parse_tune(["flashfq:depth=256", "flashfq:throttle_us=0"])
    assert tbprof.select_command("flashfq", tunes) == (
        "echo flashfq > /sys/block/nullb0/queue/scheduler"
        " && echo 256 > /sys/block/nullb0/queue/iosched/depth"
        " && echo 0 > /sys/block/nullb0/queue/iosched/throttle_us")
    assert tbprof.select_command("k2", tunes) == "echo k2 > /sys/block/nullb0/queue/scheduler"


def test_load_command_loads_null_blk_then_the_elevators() -> None:
    assert tbprof.load_command({"queue_mode": 2, "gb": 16}, ["k2-iosched", "flashfq-iosched"]) \
        == "modprobe null_blk queue_mode=2 gb=16 && modprobe k2-iosched; modprobe flashfq-iosched;"
