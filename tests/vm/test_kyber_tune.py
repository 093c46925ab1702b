"""kyber-tune in the VM, on ssdsim: a 3 x 3 grid at short durations makes
its heatmaps (targets read back, scaled by time_scale); `auto` raises the
write target when a writer starts beside a latency-bound reader, and puts
the targets back when it ends."""
from __future__ import annotations

import json
import statistics
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from bench import results as resmod
from bench.cli import parse
from bench.session import run_suite
from bench.target import Target, VMTarget
from conftest import ROOT, Guest, load_ssdsim, need_modules

sys.path.insert(0, str(ROOT / "kyber-tune"))
from bench.suites import kyber_grid as grid  # noqa: E402
from kybertune import auto  # noqa: E402

# user space: kyber-tune over Kyber's sysfs, the same on every kernel
# (tests/run: the first test kernel only)
pytestmark = pytest.mark.userspace

TIME_SCALE = 20
# the least a read of ssdsim's takes at TIME_SCALE, in us: a die's page
# read, 50 us at time_scale 1 (ssdsim/README.md)
READ_US_MIN = 50 * TIME_SCALE
# how much higher a read target's row of the grid (the median of its cells'
# read P99 over the write targets) may be than the next read target's
# without breaking the grid's order.  A cell's P99 is about the slowest of
# its 28 or so reads, so one cell against one cell is two maxima: over 29
# cells of four runs (162-255 ms, no effect of either target in this
# workload) a cell was above 1.5x its neighbour at the next read target in
# 5 % of draws a pair, a run's medians of three in 0.2 %
GRID_NOISE = 1.5
# the reader's objective in the auto test: a read that meets a program on its
# die waits up to 10.2 ms (time_scale 20), so 15 ms can be met beside a writer
# with a write target high enough; a higher objective cannot: it is also the
# read target, and Kyber then sees too little congestion to throttle writes
# at any write target (kyber-tune/README.md, the lever's reach)
OBJECTIVE_US = 15000.0
# auto's settling time after the writer starts and its memory (periods); the
# longest a period may take, its guest commands included (5.1 s measured as
# the writer started on a loaded host: a stall of 44 s once hid what the
# tuner did).  A command the UART garbled goes again after 2 s of the host's
# (scripts/vmbed.py VM.run), which the reader at depth 1 turns into 6-7 s of
# the guest's (a 1.5 s delay of the host's between periods read as 4.9 s)
SETTLE_S, AUTO_MEMORY, MAX_GAP_S = 10, 8, 10.0
# how long the last reader outlasts the tuner, s: an idle guest's clock jumps
# from timer to timer as fast as the host runs it (icount_guest), so a
# period the host delays after the workload has ended would read as minutes
# (a 3 s delay of the host's 3 s before fio's end read as an 18 s period;
# a CI run once had one of 332 s)
READER_TAIL_S = 5


def _ssdsim(guest: Guest) -> Iterator[str]:
    """ssdsim0 at time_scale 20, write-through (a write completes when its
    page is programmed: with its DRAM buffer, writes complete at once and
    Kyber cannot see or hold back what keeps the dies busy), kyber
    offered; removed afterwards."""
    need_modules(guest, "ssdsim")
    load_ssdsim(guest, time_scale=TIME_SCALE, write_buffer_kb=0)
    guest.load("kyber-iosched")
    yield "ssdsim0"
    if not guest.dead:
        guest.sh("echo none > /sys/block/ssdsim0/queue/scheduler; rmmod ssdsim")


@pytest.fixture
def ssdsim(guest: Guest) -> Iterator[str]:
    """_ssdsim() in the session's VM."""
    yield from _ssdsim(guest)


@pytest.fixture
def icount_ssdsim(icount_guest: Guest) -> Iterator[str]:
    """_ssdsim() in a VM of its own whose clock counts instructions."""
    yield from _ssdsim(icount_guest)


@pytest.mark.timing
def test_grid_heatmaps_on_ssdsim(icount_guest: Guest, icount_ssdsim: str,
                                 tmp_path: Path) -> None:
    """A 3 x 3 grid of R1+W256 at 2 s a cell: every cell's targets read
    back, the report's heatmap, and the order the grid is for.  A cell's
    read P99 is about the slowest of its 28 or so reads (14 IOPS), a read
    queued behind its die's programs.  In a VM of its own whose clock
    counts instructions (icount_guest): on plain TCG beside the other
    lane's VM one cell's came out 321 ms against 173 ms at the next read
    target up, the host's stalls in the reads' times; counting
    instructions, three runs' cells were 162-225 ms, neighbours at most
    1.32x apart, and a fourth's 255 ms against 167 ms: the order is asked of
    each read target's median over the write targets (GRID_NOISE)."""
    guest, ssdsim = icount_guest, icount_ssdsim
    out = tmp_path / "grid"
    argv = ["run", "kyber-grid", "--device", ssdsim, "--workloads", "R1+W256",
            "--read-us", "100:10000:3", "--write-us", "100:100000:3", "--reps", "1",
            "--runtime", "2", "--ramp", "0.5", "--seed", "1", "--out", str(out)]
    run_suite(VMTarget(guest.vm), parse(argv), command=argv)
    m = json.loads((out / "manifest.json").read_text())
    assert m["status"] == "complete" and len(m["runs"]) == 10
    for r in m["runs"]:
        lab = r["labels"]
        assert r["tunables"] == {"read_lat_nsec": str(lab["read_ns"]),
                                 "write_lat_nsec": str(lab["write_ns"])}
        if lab.get("point") != "default":
            i, j = lab["i"], lab["j"]
            assert lab["read_ns"] == round([100, 1000, 10000][i] * 1000 * TIME_SCALE)
            assert lab["write_ns"] == round([100, 3160, 100000][j] * 1000 * TIME_SCALE)
    text = (out / "report.md").read_text()
    png = out / "plots" / "kyber-grid-R1_W256.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and "plots/kyber-grid-R1_W256.png" in text
    assert f"ssdsim's time_scale {TIME_SCALE} multiplies" in text
    g = grid.grids(resmod.load(out))["R1+W256"]
    assert len(g.cells) == 9
    p99 = {ij: c.samples["read_p99_us"][0] for ij, c in g.cells.items()}
    wio = {ij: c.samples["write_iops"][0] for ij, c in g.cells.items()}
    print(text[text.index("| read target"):])
    for i in range(3):
        print(f"read target {i}: read P99 {p99[(i, 0)]:.0f} -> {p99[(i, 2)]:.0f} us, "
              f"write IOPS {wio[(i, 0)]:.0f} -> {wio[(i, 2)]:.0f}")
    # every cell measured: a read P99 between a die's read and a second,
    # and writes that completed
    for ij in g.cells:
        assert READ_US_MIN <= p99[ij] <= 1e6, (ij, p99[ij])
        assert wio[ij] >= 10, (ij, wio[ij])
    # what the grid is for: a lower read target never gives a higher read
    # P99, beyond a run's noise
    row = [statistics.median(p99[(i, j)] for j in range(3)) for i in range(3)]
    for i in range(2):
        assert row[i] <= GRID_NOISE * row[i + 1], \
            f"read P99 over the write targets, median {row[i]:.0f} us at read target " \
            f"{i}, {row[i + 1]:.0f} us at {i + 1}: {p99}"


@pytest.mark.timing
def test_auto_keeps_the_objective_beside_a_writer_and_gives_back_after(
        icount_guest: Guest, icount_ssdsim: str, tmp_path: Path) -> None:
    """A reader at depth 1 alone for 15 s, beside a writer at depth 32 for
    30 s, then alone again for 24 s, the tuner stopping READER_TAIL_S before
    the reader.  The tuner raises the write target when
    the writer starts; once it has settled (SETTLE_S after the writer
    started) fio's read P99 is within 10 % of the objective; after the
    writer has gone the write target comes back down.  The workload starts
    once the tuner has set up (its trace events on), so the rows' times are
    the workload's whatever the setup takes on a loaded host.  The
    controller's memory is AUTO_MEMORY periods instead of 30, so that the
    step down comes within the run.

    In a VM of its own whose clock counts instructions (icount_guest): the
    tuner's periods, fio's times and ssdsim's die times are all the guest's
    clock.  On plain TCG a loaded host slowed ssdsim's service beside the
    other lane's VM until no write target could hold the reader: in one run
    Kyber's write domain was as throttled as it goes (the tuner held at the
    lever's reach) and the settled read P99 was 26.9 ms, where 12-15.5 ms
    is usual."""
    g, ssdsim = icount_guest, icount_ssdsim
    g.select(ssdsim, "kyber")
    before = {k: g.attr(ssdsim, k) for k in ("read_lat_nsec", "write_lat_nsec")}
    w_start, w_end = 15, 45
    end = w_end + 18
    g.sh(f"""
cat > /tmp/rw.fio <<'EOF'
[global]
filename=/dev/{ssdsim}
direct=1
bs=4k
ioengine=libaio
time_based
[alone]
rw=randread
iodepth=1
runtime={w_start}s
[settling]
rw=randread
iodepth=1
startdelay={w_start}
runtime={SETTLE_S}s
[settled]
rw=randread
iodepth=1
startdelay={w_start + SETTLE_S}
runtime={w_end - w_start - SETTLE_S}s
[after]
rw=randread
iodepth=1
startdelay={w_end}
runtime={end + 1 + READER_TAIL_S - w_end}s
[writer]
rw=randwrite
iodepth=32
startdelay={w_start}
runtime={w_end - w_start}s
EOF
""")
    def start_workload(t: Target, dev: str,
                       on_exit: Callable[[str, Callable[[], None]], None]) -> auto.Source:
        src = auto.KyberEvents(t, dev, on_exit)
        g.sh("fio --output-format=json --output=/tmp/rw.json /tmp/rw.fio > /tmp/rw.log 2>&1 &")
        return src

    # the run's length on the guest's clock, as its periods
    res = auto.run(VMTarget(g.vm), ssdsim, OBJECTIVE_US, period=1.0, duration=end + 1.0,
                   log=tmp_path / "log.csv", source=start_workload, memory=AUTO_MEMORY)
    g.sh("while pidof fio > /dev/null; do sleep 0.5; done", timeout=120)
    jobs = {j["jobname"]: j for j in json.loads(g.sh("cat /tmp/rw.json"))["jobs"]}
    rows = "\n".join(auto.fmt_row(r) for r in res.rows)
    print(rows)
    p99 = {n: jobs[n]["read"]["clat_ns"]["percentile"]["99.000000"] / 1000
           for n in ("alone", "settling", "settled", "after")}
    print("fio read P99 (us): " + ", ".join(f"{n} {v:.0f}" for n, v in p99.items())
          + f"; writer {jobs['writer']['write']['iops']:.0f} IOPS")
    assert res.stopped_by == "duration"
    assert {k: g.attr(ssdsim, k) for k in before} == before
    alone = [r for r in res.rows if 3 <= r.t < w_start - 1]
    both = [r for r in res.rows if w_start + 2 <= r.t < w_end]
    after = [r for r in res.rows if r.t >= w_end + 1]
    assert alone and both and after, f"rows:\n{rows}"
    # a gap between periods would hide what the tuner did: each period
    # (its guest commands included) ends within MAX_GAP_S of the one before
    gaps = [b.t - a.t for a, b in zip(res.rows, res.rows[1:])]
    assert max(gaps) < MAX_GAP_S, f"a period of {max(gaps):.1f} s; rows:\n{rows}"
    # the writer makes the tuner raise the write target ...
    w_alone = alone[-1].write_lat_nsec
    w_top = max(r.write_lat_nsec for r in both)
    assert w_top > w_alone and any(r.action == "up" for r in both), f"rows:\n{rows}"
    # ... which holds the reader to its objective once settled
    assert p99["settled"] <= 1.1 * OBJECTIVE_US, \
        f"settled read P99 {p99['settled']:.0f} us, objective {OBJECTIVE_US:.0f}; rows:\n{rows}"
    # and it gives the writes their target back once the reader is alone
    assert min(r.write_lat_nsec for r in after) < w_top and \
        any(r.action == "down" for r in after), f"rows:\n{rows}"


def test_grid_on_a_fresh_file_system(guest: Guest, ssdsim: str, tmp_path: Path) -> None:
    """--fs xfs: every run of the grid on a file system made fresh for it,
    fio's files in it, and unmounted afterwards (ext4 works the same way;
    f2fs is not in Debian's cloud kernels).  ssdsim at 512 MiB: mkfs.xfs
    wants at least 300 MiB."""
    fs = "xfs"
    guest.sh(f"rmmod ssdsim && modprobe ssdsim time_scale={TIME_SCALE} write_buffer_kb=0 "
             "capacity_mb=512 && test -b /dev/ssdsim0")
    out = tmp_path / "grid"
    argv = ["run", "kyber-grid", "--device", ssdsim, "--workloads", "R1+W256",
            "--read-us", "1000", "--write-us", "10000", "--reps", "1", "--runtime", "1",
            "--ramp", "0.2", "--fs", fs, "--fs-size", "32m", "--seed", "1",
            "--out", str(out)]
    run_suite(VMTarget(guest.vm), parse(argv), command=argv)
    m = json.loads((out / "manifest.json").read_text())
    assert m["status"] == "complete" and len(m["runs"]) == 2
    assert any(f"a fresh {fs} for every run" in n for n in m["notes"]), m["notes"]
    for r in resmod.load(out).runs:
        jobs = r.result["jobs"]
        assert jobs and all(j["error"] == 0 for j in jobs)
        assert sum(j["read"]["io_bytes"] + j["write"]["io_bytes"] for j in jobs) > 0
        opts = {**r.result.get("global options", {}), **jobs[0].get("job options", {})}
        assert opts.get("directory", "").endswith("/fs"), opts
    assert guest.run(f"grep -q '^/dev/{ssdsim} ' /proc/mounts").rc != 0
