"""scripts/hostprof: perf's report sorted into kinds, per I/O, and the table."""
from __future__ import annotations

import os

import pytest

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
     4.00%           400  [kernel.kallsyms]        [k] finish_task_switch.isra.0
     2.00%           200  libc.so.6                [.] __sigsetjmp

"""


def test_report_lines_sort_into_kinds() -> None:
    """By the sample counts: a line rounded to 0.00 % still counts."""
    k = hostprof.parse_report(REPORT)
    assert k == pytest.approx({"translated": 36.0, "lookup": 33.0, "clock": 4.0,
                               "atomics": 1.0, "qemu": 20.0, "host kernel": 4.0,
                               "libs": 2.0})
    assert list(k) == list(hostprof.KINDS)
    assert hostprof.parse_report("# Samples: 0\n\n") == dict.fromkeys(hostprof.KINDS, 0.0)


def test_shares_become_host_microseconds_per_io() -> None:
    # 8 s of CPU in the window over 100000 I/Os: 80 us an I/O
    us = hostprof.per_io({"translated": 50.0, "lookup": 25.0}, 8.0, 100000)
    assert us == pytest.approx({"translated": 40.0, "lookup": 20.0})
    assert hostprof.per_io({"lookup": 25.0}, 8.0, 0) == {"lookup": 0.0}


def test_table_has_a_line_per_run_and_totals() -> None:
    us = dict.fromkeys(hostprof.KINDS, 1.0)
    lines = hostprof.render([("fifo-ref (run 1)", 120000.4, us)]).splitlines()
    assert lines[0].split()[:5] == ["host", "us", "per", "I/O", "IOPS"]
    assert lines[1].split() == ["fifo-ref", "(run", "1)", "120000"] + ["1.00"] * 7 + ["7.00"]


def test_cpu_seconds_of_this_process_grow() -> None:
    a = hostprof.cpu_seconds(os.getpid())
    sum(i * i for i in range(2_000_000))
    assert hostprof.cpu_seconds(os.getpid()) > a >= 0


def test_bad_arguments_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (["--kernel", "k", "--jobs", "3"], ["--kernel", "k", "--runtime", "2"],
                 ["--kernel", "k", "--tune", "flashfq:depth"]):
        with pytest.raises(SystemExit) as e:
            hostprof.main(argv)
        assert e.value.code == 2
    assert "SCHED:NAME=VALUE" in capsys.readouterr().err
