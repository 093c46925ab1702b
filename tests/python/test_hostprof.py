"""scripts/hostprof: perf's report sorted into kinds, per I/O, and the table."""
from __future__ import annotations

import pytest

from bench import trace
from scripts import hostprof

REPORT = """\
# To display the perf.data header info, please use --header/--header-only options.
#
# Samples: 15K of event 'cpu-clock'
#
# Overhead       Samples  Shared Object            Symbol
# ........  ............  .......................  ....................
#
    24.50%          2450  qemu-system-x86_64       [.] helper_lookup_tb_ptr
     5.50%           550  qemu-system-x86_64       [.] qht_lookup_custom
     3.00%           300  qemu-system-x86_64       [.] curr_cflags
     4.00%           400  qemu-system-x86_64       [.] cpu_get_ticks
    20.00%          2000  [JIT] tid 24551          [.] 0x00007f543ad35e80
    15.99%          1599  [JIT] tid 24551          [.] 0x00007f543ad36000
     0.00%             1  [JIT] tid 24551          [.] 0x00007f543ad36100
     0.50%            50  qemu-system-x86_64       [.] helper_atomic_cmpxchgl_le
     0.50%            50  qemu-system-x86_64       [.] cpu_atomic_fetch_orq_le_mmu
    20.00%          2000  qemu-system-x86_64       [.] 0x0000000000914757
     3.00%           300  qemu-system-x86_64       [.] tlb_set_page_full
     4.00%           400  qemu-system-x86_64       [.] 0x000000000091c051
     1.00%           100  qemu-system-x86_64       [.] 0x000000000091d000
     4.00%           400  [kernel.kallsyms]        [k] finish_task_switch.isra.0
     2.00%           200  libc.so.6                [.] __sigsetjmp

"""


# nm -D --defined-only of a QEMU: the exported functions around the addresses above
NM = """\
0000000000913e40 T accel_supported_gdbstub_sstep_flags
00000000009155d0 T helper_lookup_tb_ptr
000000000091b000 T plugin_gen_tb_end
000000000091c800 T tlb_init
000000000091cff0 T tlb_set_page_full
000000000091fae0 T tlb_set_page_with_attrs
                 U memcpy@GLIBC_2.14
000000000091fc20 T probe_access_full@@Base
"""


def test_report_lines_sort_into_kinds() -> None:
    """By the sample counts: a line rounded to 0.00 % still counts; without
    the exported functions a static one is QEMU's rest."""
    k = hostprof.parse_report(REPORT)
    n = {"translated": 3600, "lookup": 3300, "clock": 400, "atomics": 100, "softmmu": 300,
         "qemu": 2500, "host kernel": 400, "libs": 200}
    assert k == pytest.approx({x: 100 * v / 10800 for x, v in n.items()})
    assert list(k) == list(hostprof.KINDS)


def test_static_functions_go_with_their_neighbours() -> None:
    """0x91c051 lies before tlb_init (the softmmu's statics at the start of
    its file), 0x91d000 after tlb_set_page_full, 0x914757 between two
    exported functions that are not the softmmu's."""
    ex = hostprof.parse_exports(NM)
    assert (ex.name(0x91c051), ex.following(0x91c051)) == ("plugin_gen_tb_end", "tlb_init")
    assert (ex.name(0x91fd00), ex.following(0x91fd00)) == ("probe_access_full", None)
    assert ex.following(0x100) == "accel_supported_gdbstub_sstep_flags"
    assert ex.start(0x100) is None
    k = hostprof.parse_report(REPORT, ex)
    assert k["softmmu"] == pytest.approx(100 * 800 / 10800)
    assert k["qemu"] == pytest.approx(100 * 2000 / 10800)
    assert hostprof.kind_of("qemu-system-x86_64", "0x914757", ex) == "qemu"
    assert hostprof.kind_of("qemu-system-x86_64", "cpu_atomic_fetch_orq_le_mmu", ex) == "atomics"
    assert hostprof.kind_of("qemu-system-x86_64", "helper_ldq_mmu") == "softmmu"
    assert hostprof.parse_report("# Samples: 0\n\n") == dict.fromkeys(hostprof.KINDS, 0.0)


def test_shares_become_host_microseconds_per_io() -> None:
    # 8 s of CPU in the window over 100000 I/Os: 80 us an I/O
    us = hostprof.per_io({"translated": 50.0, "lookup": 25.0}, 8.0, 100000)
    assert us == pytest.approx({"translated": 40.0, "lookup": 20.0})
    assert hostprof.per_io({"lookup": 25.0}, 8.0, 0) == {"lookup": 0.0}


def test_table_has_a_line_per_run_and_totals() -> None:
    us = dict.fromkeys(hostprof.KINDS, 1.0)
    lines = hostprof.render([("fifo-ref (run 1)", 120000.4, us, None)]).splitlines()
    assert lines[0].split()[:5] == ["host", "us", "per", "I/O", "IOPS"]
    assert lines[1].split() == ["fifo-ref", "(run", "1)", "120000"] + ["1.00"] * 8 + ["8.00"]
    # --spin: two columns more
    lines = hostprof.render([("cars (run 2)", 90000.0, us, (0.81, 0.0425))],
                            spin=True).splitlines()
    assert lines[0].split()[-4:] == ["spins/1k", "IO", "spin", "us/IO"]
    assert lines[1].split()[-3:] == ["8.00", "0.81", "0.043"]


# spin_run_command()'s output: fio's KiB, function_graph's lines, each CPU's stats
SPIN = """\
kib 600000
 0)   9.870 us    |  native_queued_spin_lock_slowpath();
 1) + 12.250 us   |  native_queued_spin_lock_slowpath();
 1) ! 150.500 us  |  native_queued_spin_lock_slowpath();
 0)   0.900 us    |  some_other_function();
== 0
entries: 2
overrun: 0
commit overrun: 0
dropped events: 0
== 1
entries: 2
overrun: 0
commit overrun: 0
dropped events: 0
"""


def test_spin_sums_the_slow_paths_calls_and_time() -> None:
    kib, calls, us = hostprof.parse_spin(SPIN)
    assert (kib, calls) == (600000, 3)
    assert us == pytest.approx(9.87 + 12.25 + 150.5)


def test_spin_refuses_an_overrun_buffer_and_a_missing_result() -> None:
    with pytest.raises(ValueError, match="overran"):
        hostprof.parse_spin(SPIN.replace("overrun: 0", "overrun: 12", 1))
    with pytest.raises(ValueError, match="overran"):
        hostprof.parse_spin(SPIN.replace("dropped events: 0", "dropped events: 3", 1))
    with pytest.raises(ValueError, match="no fio result"):
        hostprof.parse_spin(SPIN.replace("kib 600000\n", ""))


def test_spin_commands_trace_the_slow_path_around_the_job_only() -> None:
    setup = hostprof.spin_setup_command()
    assert f"echo {hostprof.SPIN_FUNC} > /sys/kernel/tracing/set_ftrace_filter" in setup
    assert "function_graph > /sys/kernel/tracing/current_tracer" in setup
    assert "echo 0 > /sys/kernel/tracing/tracing_on" in setup
    run = hostprof.spin_run_command("fio --name=j")
    on, job, off = (run.index(x) for x in ("echo 1 > /sys/kernel/tracing/tracing_on",
                                           "fio --name=j", "echo 0 > /sys/kernel/tracing/tracing_on"))
    assert on < job < off
    assert "echo kib" in run and trace.stats_command("/sys/kernel/tracing") in run


def test_bad_arguments_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (["--kernel", "k", "--jobs", "3"], ["--kernel", "k", "--runtime", "2"],
                 ["--kernel", "k", "--tune", "flashfq:depth"]):
        with pytest.raises(SystemExit) as e:
            hostprof.main(argv)
        assert e.value.code == 2
    assert "SCHED:NAME=VALUE" in capsys.readouterr().err
