"""--trace and --traced without a kernel: event selection, the ftrace
instance's shell commands on a simulated tracefs (a directory with the
kernel's semantics where they matter) and its removal, lost-event parsing,
the runner's calls around fio, the report's trace section on a small
committed results folder, and the overhead suite's k2+trace."""
from __future__ import annotations

import gzip
import io
import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from bench import report, results, trace
from bench.cli import parse
from bench.runner import Cleanups, Config, Manifest, Phase, Plan, execute
from bench.suites import get
from bench.suites import overhead
from bench.target import LocalTarget
from bench.tests.fake import FakeTarget
from bench.tests.test_runner import cfg, context
from bench.trace import EventSpec, Ftrace, TraceError, Tracer, Tracing
from scripts.vmbed import Result

FIX = Path(__file__).parent / "fixtures"

STATS = """entries: {entries}
overrun: {overrun}
commit overrun: 0
bytes: 4080
oldest event ts:    12.443775
now ts:    15.901234
dropped events: {dropped}
read events: 0
"""
TRACE = "# tracer: nop\n#\n     fio-544  [000] ...1.  12.443775: k2_insert: 254,0 hctx=0 tag=32 RS " \
        "180256+8 queue=0 class=1 level=0 head=0 pid=544 comm=fio\n"


# ---------------------------------------------------------------------------
# event selection

def test_parse_events() -> None:
    assert trace.parse_events("k2, block:block_rq_issue,k2,,") == [
        EventSpec("k2"), EventSpec("block", "block_rq_issue")]
    assert str(EventSpec("block", "block_rq_issue")) == "block:block_rq_issue"
    for bad in ("k2:", "k2:*", "a b", "../x"):
        with pytest.raises(ValueError, match="SYSTEM or SYSTEM:EVENT"):
            trace.parse_events(bad)


AVAIL = {"k2": {"k2_insert", "k2_dispatch", "k2_complete"}, "kyber": {"kyber_latency"},
         "block": {"block_rq_issue", "block_rq_complete"}, "ssdsim": {"ssdsim_read"}}


def test_select_takes_the_schedulers_and_ssdsims_systems_when_they_exist() -> None:
    got, notes = trace.select_events(AVAIL, ["none", "k2", "mq-deadline", "kyber"], "nvme")
    assert got == [EventSpec("k2"), EventSpec("kyber")] and notes == []
    got, _ = trace.select_events(AVAIL, ["none", "k2"], "ssdsim")
    assert got == [EventSpec("k2"), EventSpec("ssdsim")]
    # ssdsim's events do not exist yet, or k2's (module without tracepoints): a note
    got, notes = trace.select_events({"k2": AVAIL["k2"]}, ["k2", "fifo-ref"], "ssdsim")
    assert got == [EventSpec("k2")]
    assert notes == ["no ssdsim events to record (its trace system does not exist in this "
                     "kernel or tracer)"]


def test_select_adds_the_users_events_which_must_exist() -> None:
    extra = trace.parse_events("block:block_rq_issue,k2:k2_insert")
    got, _ = trace.select_events(AVAIL, ["k2"], "nvme", extra)
    assert got == [EventSpec("k2"), EventSpec("block", "block_rq_issue")]   # k2 already whole
    with pytest.raises(TraceError, match="no trace system 'nope'"):
        trace.select_events(AVAIL, ["k2"], "nvme", trace.parse_events("nope"))
    with pytest.raises(TraceError, match="system block has no event 'block_nope'"):
        trace.select_events(AVAIL, ["k2"], "nvme", trace.parse_events("block:block_nope"))
    with pytest.raises(TraceError, match="nothing to trace"):
        trace.select_events(AVAIL, ["none", "mq-deadline"], "nvme")


# ---------------------------------------------------------------------------
# lost events

def test_parse_stats_and_lost_events() -> None:
    text = ("== 0\n" + STATS.format(entries=100, overrun=7, dropped=0)
            + "== 1\n" + STATS.format(entries=50, overrun=0, dropped=3))
    per_cpu = trace.parse_stats(text)
    assert per_cpu[0]["entries"] == 100 and per_cpu[1]["dropped events"] == 3
    assert "oldest event ts" not in per_cpu[0]          # not a counter
    assert trace.stats_summary(per_cpu) == {"entries": 150, "lost": 10, "written": 157}


def test_lttng_stop_warnings() -> None:
    out = ("Waiting for data availability\nWarning: 1234 events were discarded, please refer "
           "to the documentation on channel configuration.\nWarning: 2 packets were lost, "
           "please refer to the documentation on channel configuration.\n")
    assert trace.lttng_lost(out) == {"lost": 1234, "lost_packets": 2}
    assert trace.lttng_lost("Tracing stopped for session s\n") == {"lost": 0,
                                                                  "lost_packets": 0}


def test_lttng_sub_buffers_are_powers_of_two() -> None:
    lt = trace.Lttng(FakeTarget(), 16384)
    assert lt.subbuf() == (2 * 1024 * 1024, 8)
    assert trace.Lttng(FakeTarget(), 100).subbuf() == (8192, 8)


# ---------------------------------------------------------------------------
# ftrace on a simulated tracefs

class TracefsTarget(LocalTarget):
    """This machine's shell over a directory standing in for tracefs: a new
    instance gets events, per-CPU stats and a trace; a clock written is
    shown selected; rmdir removes an instance with its files; sizing an
    instance's buffer marks the top-level one expanded (as 6.1 does)."""

    def __init__(self, root: Path):
        super().__init__(str(root.parent / "tmp"))
        self.root = root
        self.log: list[str] = []
        (root / "instances").mkdir(parents=True)
        for f, v in (("tracing_on", "1"), ("trace_clock", "[local] global mono"),
                     ("buffer_size_kb", "7 (expanded: 1408)"), ("set_event", "sched:sched_switch")):
            (root / f).write_text(v + "\n")

    def run(self, script: str, timeout: float = 300.0) -> Result:
        self.log.append(script)
        script = re.sub(r"echo mono > (\S+)/trace_clock", r"echo 'local global [mono]' > \1/trace_clock",
                        script)
        script = script.replace("rmdir ", "rm -r ")
        r = super().run(script, timeout)
        for inst in (self.root / "instances").iterdir():
            if not (inst / "events").exists():
                for sys_, evs in AVAIL.items():
                    for e in evs:
                        (inst / "events" / sys_ / e).mkdir(parents=True)
                    (inst / "events" / sys_ / "enable").write_text("0\n")
                for cpu, (overrun, dropped) in enumerate(((5, 0), (0, 2))):
                    d = inst / "per_cpu" / f"cpu{cpu}"
                    d.mkdir(parents=True)
                    (d / "stats").write_text(STATS.format(entries=10, overrun=overrun,
                                                          dropped=dropped))
                (inst / "trace").write_text(TRACE)
                for f in ("tracing_on", "set_event", "buffer_size_kb"):
                    (inst / f).write_text("")
            if (inst / "buffer_size_kb").read_text().strip():
                (self.root / "buffer_size_kb").write_text("7\n")
        return r


def _lines(p: Path) -> list[str]:
    return [ln for ln in p.read_text().splitlines() if ln.strip()]


def test_ftrace_instance_commands_and_restore(tmp_path: Path) -> None:
    tfs = tmp_path / "tracefs"
    t = TracefsTarget(tfs)
    top = {f: (tfs / f).read_text() for f in ("tracing_on", "trace_clock", "set_event")}
    cleanups = Cleanups(io.StringIO())
    ft = Ftrace(t, 4096)
    ft.roots = (str(tfs),)
    tr = trace.setup(t, "ftrace", "block:block_rq_issue", 4096, ["none", "k2"], "ssdsim", [],
                     cleanups.add, tracer=ft)
    assert tr is not None and tr.save
    assert [str(e) for e in tr.events] == ["k2", "ssdsim", "block:block_rq_issue"]
    inst = Path(ft.inst)
    assert inst.parent == tfs / "instances" and inst.name.startswith("bench-")
    assert (inst / "buffer_size_kb").read_text().strip() == "4096"
    assert "[mono]" in (inst / "trace_clock").read_text()

    ft.prepare(tr.events, "001-x")
    assert _lines(inst / "set_event") == ["k2:*", "ssdsim:*", "block:block_rq_issue"]
    assert (inst / "tracing_on").read_text().strip() == "0"
    t.check(ft.start_cmd())
    assert (inst / "tracing_on").read_text().strip() == "1"
    (inst / "trace").write_text(TRACE)          # what the kernel recorded
    t.check(ft.stop_cmd())
    assert (inst / "tracing_on").read_text().strip() == "0"
    info = ft.finish(tmp_path / "001-x.trace.txt.gz")
    assert gzip.decompress((tmp_path / "001-x.trace.txt.gz").read_bytes()).decode() == TRACE
    assert info["lost"] == 7 and info["entries"] == 20 and info["written"] == 25
    assert info["per_cpu"][1]["dropped events"] == 2
    # the next run with the same events leaves them on (no code patching
    # between runs); one without events switches them off
    assert len(_lines(inst / "set_event")) == 3
    n = len(t.log)
    ft.prepare(tr.events, "002-x")
    assert len(t.log) == n + 1 and "set_event;" not in t.log[-1]
    assert len(_lines(inst / "set_event")) == 3
    (inst / "set_event").write_text("k2:*\n")        # a module reload dropped some
    ft.prepare(tr.events, "003-x")
    assert _lines(inst / "set_event") == ["k2:*", "ssdsim:*", "block:block_rq_issue"]
    ft.prepare([], "004-x")
    assert _lines(inst / "set_event") == []

    done = cleanups.run()
    assert not inst.exists()
    assert done == [f"ftrace instance {inst} removed",
                    "top-level ftrace buffer back to its default 1408 KiB per CPU"]
    assert (tfs / "buffer_size_kb").read_text().strip() == "1408"
    assert {f: (tfs / f).read_text() for f in top} == top   # the top level was not touched


def test_ftrace_record_only_keeps_no_trace(tmp_path: Path) -> None:
    tfs = tmp_path / "tracefs"
    t = TracefsTarget(tfs)
    ft = Ftrace(t, 1024)
    ft.roots = (str(tfs),)
    cleanups = Cleanups(io.StringIO())
    tr = trace.setup(t, None, "", 1024, ["none", "k2"], "null_blk", ["k2"], cleanups.add,
                     tracer=ft)
    assert tr is not None and not tr.save and tr.events == [EventSpec("k2")]
    plain = cfg("n")
    traced = Config("t", "k2", plain.jobfile, 1.0, record_events=("k2",))
    assert tr.events_for(plain.record_events) == []
    assert tr.events_for(traced.record_events) == [EventSpec("k2")]
    ft.prepare(tr.events_for(traced.record_events), "002")
    info = ft.finish(None)
    assert info["written"] == 25 and not list(tmp_path.glob("*.trace.txt*"))
    cleanups.run()
    assert not Path(ft.inst).exists()


def test_no_tracing_unless_asked() -> None:
    t = FakeTarget()
    assert trace.setup(t, None, "", 1024, ["k2"], "nvme", [], lambda *a: None) is None
    with pytest.raises(ValueError, match="--trace-events needs --trace"):
        trace.setup(t, None, "k2", 1024, ["k2"], "nvme", [], lambda *a: None)


# ---------------------------------------------------------------------------
# the runner around fio

class FakeTracer(Tracer):
    kind = "ftrace"

    def __init__(self, target: FakeTarget):
        super().__init__(target, 1024)
        self.calls: list[str] = []

    def setup(self, on_exit: Any, candidates: Any = ()) -> dict[str, set[str]]:
        return AVAIL

    def prepare(self, specs: list[EventSpec], run: str) -> None:
        self.calls.append(f"prepare {run} {','.join(map(str, specs))}")

    def start_cmd(self) -> str:
        return ": START"

    def stop_cmd(self) -> str:
        return ": STOP"

    def finish(self, dest: Path | None) -> dict[str, Any]:
        self.calls.append(f"finish {dest.name if dest else None}")
        if dest is not None:
            dest.write_bytes(gzip.compress(TRACE.encode()))
        return {"lost": 0, "written": 3}


def test_runner_traces_each_run_beside_its_json(tmp_path: Path) -> None:
    t = FakeTarget()
    ctx = context(t)
    tracer = FakeTracer(t)
    ctx.tracing = Tracing(tracer, [EventSpec("k2")], save=True)
    plan = Plan([Phase("p", [[cfg("n")], [cfg("k8", "k2", (("max_inflight", 8),))]])])
    m = Manifest(tmp_path, {"format": 1, "suite": "k2", "runs": [], "phases": {}, "params": {}})
    execute(ctx, plan, tmp_path, m, 1, seed=3)
    runs = json.loads((tmp_path / "manifest.json").read_text())["runs"]
    for r in runs:
        base = r["json"].removesuffix(".json")
        assert r["trace"] == {"tracer": "ftrace", "events": ["k2"],
                              "file": f"{base}.trace.txt.gz", "lost": 0, "written": 3}
        assert gzip.decompress((tmp_path / r["trace"]["file"]).read_bytes()).decode() == TRACE
    # prepared before fio, started and stopped in fio's own script, finished after
    fio_scripts = [s for s in t.log if "fio --output-format=json" in s]
    assert len(fio_scripts) == 2
    for s in fio_scripts:
        assert re.search(r": START \|\| \{ echo 'bench: could not start tracing'; exit 97; \}; "
                         r"fio .*; rc=\$\?; : STOP; cat ", s)
    names = [Path(r["json"]).stem for r in runs]
    assert tracer.calls == [c for n in names for c in
                            (f"prepare {n} k2", f"finish {n}.trace.txt.gz")]


def test_runner_records_only_the_configurations_that_ask(tmp_path: Path) -> None:
    t = FakeTarget()
    ctx = context(t)
    tracer = FakeTracer(t)
    ctx.tracing = Tracing(tracer, [EventSpec("k2")], save=False)
    plan = Plan([Phase("p", [[cfg("n"), Config("k", "k2", cfg("k").jobfile, 1.0,
                                               record_events=("k2",))]])])
    m = Manifest(tmp_path, {"format": 1, "suite": "k2", "runs": [], "phases": {}, "params": {}})
    execute(ctx, plan, tmp_path, m, 1, seed=3)
    runs = {r["key"]: r for r in json.loads((tmp_path / "manifest.json").read_text())["runs"]}
    assert "trace" not in runs["n"]
    assert runs["k"]["trace"] == {"tracer": "ftrace", "events": ["k2"], "file": None,
                                  "lost": 0, "written": 3}
    assert tracer.calls == ["prepare 001-n ", "prepare 002-k k2", "finish None"]
    assert [": START" in s for s in t.log if "fio --output" in s] == [False, True]


def test_runner_keeps_the_trace_of_a_configuration_that_keeps_it(tmp_path: Path) -> None:
    """Without --trace, a configuration with record_events and keep_trace
    (k2's changing-load runs) gets its trace saved beside its run, named in
    its manifest entry as --trace names every run's; one that only records
    keeps none."""
    t = FakeTarget()
    ctx = context(t)
    tracer = FakeTracer(t)
    ctx.tracing = Tracing(tracer, [EventSpec("k2")], save=False, kept=True)
    job = cfg("k").jobfile
    plan = Plan([Phase("p", [[Config("rec", "k2", job, 1.0, record_events=("k2",)),
                              Config("keep", "k2", job, 1.0, record_events=("k2",),
                                     keep_trace=True)]])])
    m = Manifest(tmp_path, {"format": 1, "suite": "k2", "runs": [], "phases": {}, "params": {}})
    execute(ctx, plan, tmp_path, m, 1, seed=3)
    runs = {r["key"]: r for r in json.loads((tmp_path / "manifest.json").read_text())["runs"]}
    assert runs["rec"]["trace"]["file"] is None
    assert runs["keep"]["trace"] == {"tracer": "ftrace", "events": ["k2"],
                                     "file": "runs/002-keep.trace.txt.gz", "lost": 0, "written": 3}
    assert gzip.decompress((tmp_path / "runs" / "002-keep.trace.txt.gz").read_bytes()
                           ).decode() == TRACE
    assert tracer.calls == ["prepare 001-rec k2", "finish None", "prepare 002-keep k2",
                            "finish 002-keep.trace.txt.gz"]
    assert ctx.tracing.describe()["kept"] is True
    # with --trace, such a configuration records every run's events and its own
    every = Tracing(tracer, [EventSpec("k2"), EventSpec("ssdsim")], save=True)
    assert every.events_for(("k2",)) == every.events_for(()) == every.events
    assert every.events_for(("k2:k2_adjust", "block:block_rq_issue")) == [
        EventSpec("k2"), EventSpec("ssdsim"), EventSpec("block", "block_rq_issue")]


def test_setup_says_configurations_keep_their_events(tmp_path: Path) -> None:
    """setup(keep=True): record-only tracing whose configurations keep
    their events, said in the report's header; --trace keeps every run's."""
    tfs = tmp_path / "tracefs"
    t = TracefsTarget(tfs)
    ft = Ftrace(t, 1024)
    ft.roots = (str(tfs),)
    cleanups = Cleanups(io.StringIO())
    tr = trace.setup(t, None, "", 1024, ["k2"], "null_blk", ["k2"], cleanups.add, tracer=ft,
                     keep=True)
    assert tr is not None and not tr.save and tr.kept
    rows = dict(report.trace_rows({"trace": tr.describe()}))
    assert rows["Tracing"].endswith("events k2; only in the configurations that ask for "
                                     "them, kept beside their runs")
    cleanups.run()
    assert dict(report.trace_rows({"trace": {**tr.describe(), "kept": False}}))[
        "Tracing"].endswith("only in the runs that measure tracing's cost, not kept")


# ---------------------------------------------------------------------------
# the report's trace section (a real VM run, its trace cut to its first events)

def test_report_trace_section(tmp_path: Path) -> None:
    from tracepoints import report as tr
    folder = tmp_path / "k2-trace"
    shutil.copytree(FIX / "k2-trace", folder)
    text = report.write(folder).read_text()
    sec = text[text.index("## Traces: staged and device time"):text.index("## Files")]
    print(sec)
    res = results.load(folder)
    k2run = res.where(bound=2)[0]
    bd = tr.breakdown(tr.read_trace(folder / k2run.rec["trace"]["file"], "k2"), "k2")
    counts = {c: row["count"] for c, row in tr.per_class(bd).items()}
    assert counts and set(counts) <= {"rt0", "be"}
    for c, n in counts.items():
        assert re.search(rf"\| asis/randread/k2-2 \| k2 \| k2 \| {c} \| {n} \| [\d.]+ / [\d.]+ "
                         rf"\| [\d.]+ / [\d.]+ \| [\d.]+ \| 0 \|", sec), c
    assert "| asis/randread/none | none | – | (no event recorded) |" in sec
    assert "The tracer lost no event." in sec
    assert f"{bd.unfinished} request(s) were still staged or in the device" in sec
    assert "Tracing | ftrace, 16384 KiB per CPU, clock mono; events k2; every run" in text
    s = json.loads((folder / "summary.json").read_text())["traces"]
    assert s["lost"] == 0 and s["configurations"]["asis/randread/k2-2"]["classes"]

    # lost events are said, per configuration and in all
    m = json.loads((folder / "manifest.json").read_text())
    m["runs"][0]["trace"]["lost"] = 5
    (folder / "manifest.json").write_text(json.dumps(m))
    sec = report.write(folder).read_text()
    assert "**The tracer lost 5 event(s) in 1 run(s)**" in sec
    assert re.search(rf"\| {m['runs'][0]['key']} \|[^\n]*\| 5 \|", sec)


def test_report_trace_section_of_a_flashfq_run(tmp_path: Path) -> None:
    """A flashfq trace (tracepoints/tests' synthetic one in place of the k2
    run's) gets its row like k2's, in the one class flashfq has."""
    from tracepoints.tests.test_flashfq_report import scenario
    folder = tmp_path / "k2-trace"
    shutil.copytree(FIX / "k2-trace", folder)
    m = json.loads((folder / "manifest.json").read_text())
    rec = m["runs"][0]["trace"]
    rec["events"] = ["flashfq"]
    text = scenario()
    (folder / rec["file"]).write_text(text)
    (folder / "manifest.json").write_text(json.dumps(m))
    sec, summary = trace.report_section(results.load(folder))
    assert re.search(r"\| asis/randread/k2-2 \| k2 \| flashfq \| all \| 101 \| 0\.005 / 0\.005 "
                     r"\| 0\.100 / 0\.150 \| 0\.155 \| 0 \|", sec), sec
    row = summary["configurations"]["asis/randread/k2-2"]
    assert row["classes"]["flashfq/all"]["requests"] == 101
    assert row["events"]["flashfq"] == text.count(": flashfq_")


def test_report_without_traces_has_no_section(tmp_path: Path) -> None:
    folder = tmp_path / "k2"
    shutil.copytree(FIX / "k2", folder)
    text = report.write(folder).read_text()
    assert "## Traces" not in text and "Tracing |" not in text


# ---------------------------------------------------------------------------
# overhead --traced

def _overhead_ctx(argv: list[str], scheds: tuple[str, ...] = ("k2",)) -> Any:
    t = FakeTarget()
    ctx = context(t, ["run", "overhead", *argv])
    ctx.sched_info = {s: {"nr_requests": 256} for s in scheds}
    return ctx


def test_overhead_traced_plan() -> None:
    ctx = _overhead_ctx(["--schedulers", "k2", "--traced", "--jobs", "1"])
    plan = get("overhead").plan(ctx)
    assert plan.params["schedulers"] == ["k2", "k2+trace"]
    block = [b for b in plan.phases[0].blocks if b[1].label("pair") == "k2+trace"][0]
    assert [(c.scheduler, c.label("sched"), c.record_events, c.tunables) for c in block] == [
        ("none", "none", (), ()),
        ("k2", "k2+trace", ("k2",), (("max_inflight", 256),)),
        ("k2", "k2+trace", ("k2",), (("max_inflight", 256),)),
        ("none", "none", (), ())]
    assert not any(c.record_events for b in plan.phases[0].blocks for c in b
                   if c.label("pair") == "k2")
    with pytest.raises(ValueError, match="use one of them"):
        get("overhead").plan(_overhead_ctx(["--traced", "--trace", "ftrace"]))
    with pytest.raises(ValueError, match="needs k2 among the schedulers"):
        get("overhead").plan(_overhead_ctx(["--traced"], scheds=("mq-deadline",)))


def test_overhead_report_k2_traced_vs_untraced(tmp_path: Path) -> None:
    """The committed overhead folder's k2 blocks again as k2+trace blocks
    with 10 % fewer IOPS: K2 traced / K2 untraced = 0.9."""
    folder = tmp_path / "overhead"
    shutil.copytree(FIX / "overhead", folder)
    m = json.loads((folder / "manifest.json").read_text())
    extra = []
    for r in [r for r in m["runs"] if r["labels"]["pair"] == "k2"]:
        n = dict(r, key=r["key"].replace("k2", "k2+trace"),
                 labels={**r["labels"], "pair": "k2+trace"},
                 json=r["json"].replace(".json", "-traced.json"))
        res = json.loads((folder / r["json"]).read_text())
        if r["labels"]["sched"] == "k2":
            n["labels"]["sched"] = "k2+trace"
            for j in res["jobs"]:
                j["read"]["iops"] *= 0.9
            n["trace"] = {"tracer": "ftrace", "events": ["k2"], "file": None, "lost": 0,
                          "written": 3 * sum(j["read"]["total_ios"] for j in res["jobs"])}
        (folder / n["json"]).write_text(json.dumps(res))
        extra.append(n)
    m["runs"] += extra
    (folder / "manifest.json").write_text(json.dumps(m))
    text = report.write(folder).read_text()
    assert re.search(r"^\| k2 \| [\d.]+ .*\n\| k2\+trace \| [\d.]+ ", text, re.M)
    line = [ln for ln in text.splitlines() if ln.startswith("- K2 traced / K2 untraced")]
    assert line and line[0].startswith("- K2 traced / K2 untraced: 0.900 (0.900–0.900)")
    assert "3.00 (3.00–3.00) trace events written per I/O" in line[0]
    s = json.loads((folder / "summary.json").read_text())["overhead"]["1"]
    assert s["k2_traced_vs_untraced"]["median"] == pytest.approx(0.9)
    assert "## Traces" not in text       # nothing was kept
    assert overhead.TRACED == "k2+trace"


def test_missing_probe_is_said() -> None:
    """An LTTng probe that cannot be loaded: its events are missing, and the
    error (nothing else to trace) or the note says why."""
    class NoProbes(FakeTracer):
        def setup(self, on_exit: Any, candidates: Any = ()) -> dict[str, set[str]]:
            self.missing = ["k2: cannot load module lttng-probe-k2: not found"]
            return {"kyber": {"kyber_latency"}}
    t = FakeTarget()
    with pytest.raises(TraceError, match="nothing to trace.*; k2: cannot load module "
                                         "lttng-probe-k2"):
        trace.setup(t, "lttng", "", 1024, ["k2"], "nvme", [], lambda *a: None,
                    tracer=NoProbes(t))
    tr = trace.setup(t, "lttng", "", 1024, ["k2", "kyber"], "nvme", [], lambda *a: None,
                     tracer=NoProbes(t))
    assert tr is not None and tr.events == [EventSpec("kyber")]
    assert tr.notes[-1] == "k2: cannot load module lttng-probe-k2: not found"
