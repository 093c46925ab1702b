"""ssdsim's tracepoints (trace system ssdsim), recorded through tracefs and by
an LTTng session during fio runs.  Every request and every flash operation
the model reserves appears, with the times the module parameters give, and
the events add up exactly to the device's own statistics in
/sys/block/ssdsim0/ssdsim/ (read before and after the run)."""
from __future__ import annotations

import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pytest

from bench import fio
from conftest import ROOT, Guest
from test_ssdsim import DEV, FIO, SYS, Loader, ssd  # noqa: F401 (the fixture)
from tracing import ftrace_record, lttng_record

sys.path.insert(0, str(ROOT))
from tracepoints import report  # noqa: E402

OPS = {"read", "program", "map_read", "map_write"}
DIE_STATS = ("die_reads", "die_programs", "die_erases", "die_busy_ns")
STATS = ("host_read_pages", "host_write_pages", "buf_read_hits", "pages_programmed",
         "gc_runs", "gc_copies", "erases", "cmt_misses", "cmt_writebacks")
GEOMETRY = ("dies", "channels", "page_size", "pages_per_block", "blocks_per_die",
            "read_ns", "program_ns", "erase_ns", "xfer_ns", "time_scale")


@dataclass(frozen=True)
class Geometry:
    """The device's layout and its scaled operation times (ns)."""
    dies: int
    channels: int
    page_sectors: int
    pages_per_block: int
    blocks_per_die: int
    read: int
    program: int
    erase: int
    xfer: int


def sysfs(g: Guest, names: tuple[str, ...]) -> dict[str, list[int]]:
    out = g.sh(f"cd {SYS} && for f in {' '.join(names)}; do echo $f $(cat $f); done")
    return {ln.split()[0]: [int(x) for x in ln.split()[1:]] for ln in out.splitlines()}


def geometry(g: Guest) -> Geometry:
    v = {k: x[0] for k, x in sysfs(g, GEOMETRY).items()}
    s = v["time_scale"]
    return Geometry(v["dies"], v["channels"], v["page_size"] // 512, v["pages_per_block"],
                    v["blocks_per_die"], v["read_ns"] * s, v["program_ns"] * s,
                    v["erase_ns"] * s, v["xfer_ns"] * s)


def counters(g: Guest) -> dict[str, list[int]]:
    return sysfs(g, DIE_STATS + STATS)


def pages(f: dict[str, report.Value], geo: Geometry) -> int:
    first = int(f["sector"]) // geo.page_sectors
    return (int(f["sector"]) + int(f["nr_sector"]) - 1) // geo.page_sectors - first + 1


def check_trace(trace: report.Trace, geo: Geometry, devno: str,
                before: dict[str, list[int]], after: dict[str, list[int]],
                ios: dict[str, int]) -> Counter[str]:
    """The checks every recorded run passes; returns counts to print."""
    d = {k: [a - b for a, b in zip(after[k], before[k])] for k in after}
    seen: Counter[str] = Counter(e.name for e in trace.events)
    assert trace.lost == 0
    assert seen["ssdsim_queue"] > 0 and seen["ssdsim_die_op"] > 0
    # 1. each event's fields
    exact_reads = 0
    for ev in trace.events:
        f = ev.fields
        assert f["dev"] == devno, ev
        if ev.name in ("ssdsim_die_op", "ssdsim_gc"):
            assert 0 <= int(f["die"]) < geo.dies, ev
            dur = int(f["end_ns"]) - int(f["start_ns"])
        if ev.name == "ssdsim_die_op":
            assert f["op"] in OPS and f["channel"] == int(f["die"]) % geo.channels, ev
            if f["op"] in ("program", "map_write"):  # transfer in, then program
                assert dur == geo.xfer + geo.program, ev
            else:  # read, then transfer out when the channel is free
                assert dur >= geo.read + geo.xfer, ev
                exact_reads += dur == geo.read + geo.xfer
            seen["op " + str(f["op"])] += 1
        elif ev.name == "ssdsim_gc":
            victims, copied = int(f["victims"]), int(f["copied"])
            assert victims >= 1 and copied < victims * geo.pages_per_block, ev
            assert int(f["block"]) // geo.blocks_per_die == f["die"], ev
            assert dur == copied * (geo.read + geo.program) + victims * geo.erase, ev
            seen["gc victims"] += victims
            seen["gc copied"] += copied
    # most reads find their channel free
    reads = seen["op read"] + seen["op map_read"]
    assert exact_reads >= 0.5 * reads, (exact_reads, reads)
    seen["reads without channel wait"] = exact_reads

    # 2. the events add up to the device's statistics, die by die
    use = report.die_usage(trace)
    for name, attr in [("die_reads", "reads"), ("die_programs", "programs"),
                       ("die_erases", "erases"), ("die_busy_ns", "busy_ns")]:
        got = [getattr(use[(devno, die)], attr) if (devno, die) in use else 0
               for die in range(geo.dies)]
        assert got == d[name], name
    assert seen["op program"] == d["host_write_pages"][0]
    assert seen["op read"] == d["host_read_pages"][0] - d["buf_read_hits"][0]
    assert seen["op map_read"] == d["cmt_misses"][0]
    assert seen["op map_write"] == d["cmt_writebacks"][0]
    assert seen["gc victims"] == d["gc_runs"][0] == d["erases"][0]
    assert seen["gc copied"] == d["gc_copies"][0]
    assert (seen["op program"] + seen["op map_write"] + seen["gc copied"]
            == d["pages_programmed"][0])

    # 3. requests: the die operations just before a request's ssdsim_queue
    # are its own (the model's lock); then one ssdsim_complete per request
    live: dict[tuple[report.Value, report.Value], report.Event] = {}
    group: list[report.Event] = []
    done: Counter[str] = Counter()
    for ev in trace.events:
        f = ev.fields
        if ev.name in ("ssdsim_die_op", "ssdsim_gc"):
            group.append(ev)
        elif ev.name == "ssdsim_queue":
            n = pages(f, geo)
            assert f["device_ns"] == int(f["done_ns"]) - int(f["arrive_ns"]), ev
            ops = Counter(str(e.fields.get("op", "gc")) for e in group)
            assert all(int(e.fields["start_ns"]) >= int(f["arrive_ns"]) for e in group), group
            if str(f["rwbs"]).startswith("W"):
                assert ops["program"] == n, (ev, group)
            elif str(f["rwbs"]).startswith("R"):
                assert ops["read"] <= n and ops["program"] == 0, (ev, group)
                if ops["read"] == n:  # nothing from the write buffer
                    ends = [int(e.fields["end_ns"]) for e in group
                            if e.fields.get("op") in ("read", "map_read")]
                    assert f["done_ns"] == max(ends), (ev, group)
            for i, e in enumerate(group):  # GC makes room for the next program
                if e.name == "ssdsim_gc":
                    nxt = group[i + 1].fields
                    assert (nxt.get("op"), nxt["die"]) == ("program", e.fields["die"]), group
                    assert int(nxt["start_ns"]) >= int(e.fields["end_ns"]), group
            group = []
            key = (f["hctx"], f["tag"])
            assert key not in live, ev
            live[key] = ev
        elif ev.name == "ssdsim_complete":
            q = live.pop((f["hctx"], f["tag"]))
            for k in ("sector", "nr_sector", "rwbs", "device_ns"):
                assert f[k] == q.fields[k], (q, ev)
            assert f["error"] == 0, ev
            # the hrtimer never fires before the model's completion time
            assert int(f["latency_ns"]) >= int(f["device_ns"]), ev
            done[str(f["rwbs"])[:1]] += 1
    assert not group and not live
    assert done == {k[0].upper(): v for k, v in ios.items() if v}, (done, ios)
    return seen


def fio_cmd(args: str) -> str:
    return (f"fio --output-format=json --output=/tmp/fio.json {FIO} --ioengine=libaio "
            f"--name=job {args}")


def fio_ios(g: Guest) -> dict[str, int]:
    res = fio.parse(g.vm.read_file("/tmp/fio.json").decode())
    return {ddir: fio.total_ios(res, ddirs=(ddir,)) for ddir in ("read", "write")}


def recorded(g: Guest, record: str, tmp_path: Path, fio_args: str) -> Counter[str]:
    """Run fio under ftrace or LTTng with one request per fio I/O, then
    check the trace against the device's statistics."""
    devno = g.sh(f"cat /sys/block/{DEV}/dev").strip().replace(":", ",")
    geo = geometry(g)
    g.sh(f"echo 2 > /sys/block/{DEV}/queue/nomerges")
    before = counters(g)
    if record == "ftrace":
        trace = report.read_ftrace(ftrace_record(g, "ssdsim", fio_cmd(fio_args)), "ssdsim")
    else:
        trace = report.read_trace(lttng_record(g, "ssdsim", fio_cmd(fio_args), tmp_path),
                                  "ssdsim")
        assert trace.source == "lttng"
    after = counters(g)
    ios = fio_ios(g)
    seen = check_trace(trace, geo, devno, before, after, ios)
    print(record, ios, dict(sorted(seen.items())))
    return seen


def test_ftrace_requests_and_die_operations(guest: Guest, ssd: Loader, tmp_path: Path) -> None:
    """A fresh drive with a 4-page mapping cache, mixed random reads and
    writes of 4-16 KiB at QD8: all four die operations fire with the
    module's times, every read's completion time is its last flash
    operation's end, one ssdsim_complete per fio I/O, and the events add up
    to the per-die and device statistics; no GC on a fresh drive."""
    ssd(cmt_pages=4)
    seen = recorded(guest, "ftrace", tmp_path, "--rw=randrw --rwmixread=60 --bsrange=4k-16k "
                    "--iodepth=8 --time_based --runtime=2")
    assert all(seen["op " + op] > 0 for op in OPS), seen
    assert seen["ssdsim_gc"] == 0


def test_ftrace_gc_on_full_drive(guest: Guest, ssd: Loader, tmp_path: Path) -> None:
    """Random writes on a preconditioned full drive: ssdsim_gc fires, each
    run lasting its copies x (read + program) + its victims x erase,
    ahead of the program it made room for; victims and copies add up to
    gc_runs, erases and gc_copies."""
    ssd(fill_percent=100)
    seen = recorded(guest, "ftrace", tmp_path, "--rw=randwrite --bs=4k --iodepth=16 "
                    "--time_based --runtime=2")
    assert seen["ssdsim_gc"] > 0 and seen["gc copied"] > 0, seen


@pytest.mark.lttng
def test_lttng_session_records_ssdsim(guest: Guest, ssd: Loader, tmp_path: Path) -> None:
    """An LTTng kernel session with `enable-event -k 'ssdsim_*'` records the
    same events with the same fields (op by name) on a full drive with a
    mapping cache: the checks of the ftrace runs hold, GC included."""
    ssd(fill_percent=100, cmt_pages=4)
    seen = recorded(guest, "lttng", tmp_path, "--rw=randrw --rwmixread=50 --bsrange=4k-16k "
                    "--iodepth=8 --time_based --runtime=2")
    assert all(seen["op " + op] > 0 for op in OPS), seen
    assert seen["ssdsim_gc"] > 0, seen
