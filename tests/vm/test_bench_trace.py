"""The benchmark runner's --trace (ftrace and LTTng) and the overhead suite's
--traced, end to end in the VM: a trace beside each run with one
k2_complete per fio I/O, the report's staged/device breakdown, and the
machine's tracing left as it was."""
from __future__ import annotations

import json
import re
import sys
from collections import Counter
from pathlib import Path

import pytest

from bench import fio
from bench.cli import parse
from bench.session import run_suite
from bench.target import VMTarget
from conftest import ROOT, Guest

sys.path.insert(0, str(ROOT))
from tracepoints import report  # noqa: E402

# user space: the runner's tracing; each kernel's tracepoints and LTTng probes are
# test_trace's and test_lttng's (tests/run: the first test kernel only)
pytestmark = pytest.mark.userspace

T = "/sys/kernel/tracing"


def _tracing_state(g: Guest) -> str:
    """The top-level tracing settings.  The kernel allocates its default
    buffer lazily ("7 (expanded: 1408)"), and sizing any instance's buffer
    gives up that laziness (6.1), so the runner sizes the top-level buffer to
    that default at the end: the kernel rounds it to whole pages (1410)."""
    out = g.sh(f"cat {T}/tracing_on {T}/trace_clock {T}/buffer_size_kb {T}/set_event; "
               f"ls {T}/instances")
    out = re.sub(r"^(\d+) \(expanded: (\d+)\)$", r"\2", out, flags=re.M)
    return re.sub(r"^14(08|10)$", "1408 or 1410", out, flags=re.M)


def _run_k2_traced(g: Guest, tracer: str, out: Path) -> dict[str, object]:
    """The k2 suite cut down to none and k2 at bound 2, random reads on the
    throttled NVMe device, every request one fio I/O (nomerges), traced."""
    if "k2-iosched" not in g.vm.modules:
        pytest.fail(f"k2-iosched is not built for {g.kernel}")
    dev = g.throttled
    before = _tracing_state(g)
    g.sh(f"echo 2 > /sys/block/{dev}/queue/nomerges")
    try:
        argv = ["run", "k2", "--device", dev, "--ops", "randread", "--bounds", "2",
                "--occupancy", "asis", "--reps", "1", "--runtime", "3", "--ramp", "0",
                "--tag-pressure", "off",
                "--seed", "1", "--trace", tracer, "--out", str(out)]
        run_suite(VMTarget(g.vm), parse(argv), command=argv)
    finally:
        g.sh(f"echo 0 > /sys/block/{dev}/queue/nomerges")
    assert _tracing_state(g) == before
    m: dict[str, object] = json.loads((out / "manifest.json").read_text())
    assert m["status"] == "complete"
    return m


def _check_k2_runs(m: dict[str, object], out: Path, tracer: str) -> None:
    """Each run kept its trace; k2's run has one complete per fio I/O."""
    runs = m["runs"]
    assert isinstance(runs, list) and len(runs) == 2
    for r in runs:
        tr = r["trace"]
        path = out / tr["file"]
        assert path.exists(), path
        assert tr["tracer"] == tracer and tr["lost"] == 0 and "k2" in tr["events"]
        res = fio.parse((out / r["json"]).read_text())
        ios = sum(fio.job_stats(res, j["jobname"]).ios for j in res["jobs"])
        trace = report.read_trace(path, "k2")
        names = Counter(e.name for e in trace.events)
        print(r["key"], dict(names), ios)
        if r["scheduler"] == "k2":
            assert names["k2_complete"] == ios
            bd = report.breakdown(trace, "k2")
            assert bd.orphans == 0 and bd.unfinished == 0
            assert set(report.per_class(bd)) == {"rt0", "be"}
        else:
            assert not names


def _check_report(out: Path) -> None:
    text = (out / "report.md").read_text()
    sec = text[text.index("## Traces: staged and device time"):]
    print(sec)
    assert "| asis/randread/k2-2 | k2 | k2 | rt0 |" in sec
    assert "| asis/randread/k2-2 | k2 | k2 | be |" in sec
    assert "| asis/randread/none | none | – | (no event recorded) |" in sec
    assert "The tracer lost no event." in sec
    s = json.loads((out / "summary.json").read_text())["traces"]
    assert s["lost"] == 0
    rt = s["configurations"]["asis/randread/k2-2"]["classes"]["k2/rt0"]
    be = s["configurations"]["asis/randread/k2-2"]["classes"]["k2/be"]
    # strict priority under a bound of 2: the RT request waits less than best effort
    assert rt["staged_p50_ms"] < be["staged_p50_ms"]


def test_bench_trace_ftrace(guest: Guest, tmp_path: Path) -> None:
    """--trace ftrace: runs/NNN-*.trace.txt per run, one k2_complete per fio
    I/O, the report's breakdown, top-level tracing untouched."""
    out = tmp_path / "k2"
    m = _run_k2_traced(guest, "ftrace", out)
    params = m["params"]
    assert isinstance(params, dict) and params["trace"]["clock"] == "mono"
    _check_k2_runs(m, out, "ftrace")
    _check_report(out)


def test_bench_trace_lttng(guest: Guest, tmp_path: Path) -> None:
    """--trace lttng: runs/NNN-*.lttng/ (CTF) per run, one k2_complete per
    fio I/O, the report's breakdown; the session daemon the runner started is
    stopped again."""
    if guest.run("test -e /lib/modules/$(uname -r)/extra/lttng-probe-k2.ko").rc != 0:
        pytest.fail("the LTTng modules were not built: make lttng-probes KVER=" + guest.kernel)
    daemon = guest.run("pidof lttng-sessiond").out.strip()
    out = tmp_path / "k2"
    m = _run_k2_traced(guest, "lttng", out)
    _check_k2_runs(m, out, "lttng")
    _check_report(out)
    assert guest.run("pidof lttng-sessiond").out.strip() == daemon


def test_overhead_traced(guest: Guest, tmp_path: Path) -> None:
    """overhead --traced: k2+trace runs record k2's events (about three per
    I/O: insert, dispatch, complete) and the report compares K2 traced with
    K2 untraced."""
    if "k2-iosched" not in guest.vm.modules:
        pytest.fail(f"k2-iosched is not built for {guest.kernel}")
    before = _tracing_state(guest)
    out = tmp_path / "overhead"
    argv = ["run", "overhead", "--schedulers", "k2", "--traced", "--jobs", "1",
            "--reps", "1", "--runtime", "1", "--ramp", "0", "--seed", "1", "--out", str(out)]
    run_suite(VMTarget(guest.vm), parse(argv), command=argv)
    assert _tracing_state(guest) == before
    m = json.loads((out / "manifest.json").read_text())
    traced = [r for r in m["runs"] if r["labels"]["sched"] == "k2+trace"]
    assert len(traced) == 2 and all(r["scheduler"] == "k2" for r in traced)
    assert all("trace" not in r for r in m["runs"] if r["labels"]["sched"] != "k2+trace")
    for r in traced:
        assert r["trace"]["file"] is None and r["trace"]["events"] == ["k2"]
        res = fio.parse((out / r["json"]).read_text())
        ios = fio.job_stats(res, "j0").ios
        assert r["trace"]["written"] >= 3 * ios
    text = (out / "report.md").read_text()
    print(text)
    assert "- K2 traced / K2 untraced: " in text
    assert "## Traces" not in text
