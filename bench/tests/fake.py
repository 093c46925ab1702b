"""A simulated target for runner tests: a block device's scheduler and
tunables in sysfs (with the kernel's semantics: unknown elevator and
out-of-range values refused, tunables reset on re-selection), elevator
modules that modprobe registers, the device probes of device.py (name,
sysfs facts, partitions, mounts, signature) and an fio that writes JSON
shaped like fio 3.33's (json+: with latency histograms)."""
from __future__ import annotations

import io
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.cli import parse
from bench.jobs import parse_options
from bench.session import run_suite
from bench.runner import JSON_MARK
from bench.target import Target
from scripts.vmbed import Result

Validator = Callable[[str], bool]

SYS = "/sys/class/block"


def _in_range(lo: int, hi: int) -> Validator:
    return lambda v: v.isdigit() and lo <= int(v) <= hi


#: flashfq's tunables as its sysfs has them (value, what a write accepts)
FLASHFQ: dict[str, tuple[str, Validator]] = {
    "depth": ("16", _in_range(1, 256)),
    "throttle_us": ("100000", _in_range(0, 10 ** 9)),
    "anticipation_us": ("20000", _in_range(0, 10 ** 9)),
    "anticipation_block_us": ("2000", _in_range(0, 10 ** 9)),
    "ioprio_weights": ("0", _in_range(0, 1)),
    "cost_read_4k_ns": ("60000", _in_range(0, 10 ** 9)),
    "cost_read_128k_ns": ("240000", _in_range(0, 10 ** 9)),
    "cost_write_4k_ns": ("63750", _in_range(0, 10 ** 9)),
    "cost_write_128k_ns": ("2040000", _in_range(0, 10 ** 9)),
}


def fio_json(jobfile: str, latency_us: Callable[[str, dict[str, Any]], float],
             histogram: bool = False) -> dict[str, Any]:
    """fio-like JSON for a job file: each job 1000 I/Os, latencies from
    @latency_us(job name, its options) (0: the job completed no I/O); with
    @histogram, fio json+'s clat_ns bins (999 I/Os at the latency, one at
    ten times it).  A mixed job (rw=randrw or rw=rw) splits its I/Os by
    rwmixread (default 50) and asks @latency_us for each side, with "ddir"
    (read or write) among the options."""
    sections = parse_options(jobfile)
    g = sections.pop("global", {})
    jobs = []
    for name, opts in sections.items():
        o = {**g, **opts}
        rw = str(o.get("rw", "randread"))
        empty = {"io_bytes": 0, "total_ios": 0, "iops": 0.0, "bw": 0}
        if rw in ("randrw", "rw", "readwrite"):
            reads = round(1000 * int(o.get("rwmixread") or 50) / 100)
            ios = {"read": reads, "write": 1000 - reads}
        else:
            ios = {"write" if "write" in rw else "read": 1000}
        sides = {}
        for d, n in ios.items():
            lat = latency_us(name, {**o, "ddir": d} if len(ios) > 1 else o)
            side: dict[str, Any] = empty if not lat or not n else {
                "io_bytes": 4096 * n, "total_ios": n, "iops": 1e6 / lat * n / 1000,
                "bw": 4e6 / lat / 1.024 * n / 1000,
                "clat_ns": {"mean": lat * 1000, "percentile": {
                    f"{p:f}": int(lat * 1000 * (1 + p / 100)) for p in
                    (50.0, 90.0, 99.0, 99.9, 99.99)}},
                "lat_ns": {"mean": lat * 1000 + 500}}
            if histogram and lat and n:
                side["clat_ns"]["bins"] = {str(int(lat * 1000)): n - 1,
                                           str(int(lat * 10000)): 1}
            sides[d] = side
        jobs.append({"jobname": name, "groupid": 0, "error": 0, "job options": o,
                     "read": sides.get("read", empty), "write": sides.get("write", empty),
                     "trim": empty, "job_runtime": 1000, "usr_cpu": 10.0, "sys_cpu": 40.0})
    return {"fio version": "fio-3.33", "jobs": jobs}


class FakeTarget(Target):
    def __init__(self, dev: str = "fake0", scheds: dict[str, dict[str, tuple[str, Validator]]]
                 | None = None, scheduler: str = "mq-deadline", nr_requests: int = 64):
        self.dev = dev
        self.size_bytes = 1 << 30
        #: modules modprobe can load: module -> (elevator, its tunables)
        self.loadable: dict[str, tuple[str, dict[str, tuple[str, Validator]]]] = {
            "flashfq-iosched": ("flashfq", FLASHFQ)}
        self.loaded: list[str] = []
        #: the device probe's findings: (major:minor, mount point)
        self.mounts: list[tuple[str, str]] = []
        self.signature = ""                # blkid's TYPE=..., "" for none
        self.last_jobfile = ""
        self.scheds = scheds if scheds is not None else {
            "none": {},
            "mq-deadline": {"read_expire": ("500", lambda v: v.isdigit()),
                            "fifo_batch": ("16", lambda v: v.isdigit())},
            "k2": {"max_inflight": ("32", lambda v: v.isdigit() and 1 <= int(v) <= 64),
                   "starvation_ms": ("0", lambda v: v.isdigit())},
        }
        self.nr_requests = nr_requests
        self.current = scheduler
        self.values = self._defaults(scheduler)
        self.files: dict[str, bytes] = {}
        self.log: list[str] = []           # every script run
        self.fio_runs: list[tuple[str, dict[str, str]]] = []  # (scheduler, tunables)
        self.on_fio: Callable[[FakeTarget], None] | None = None
        self.sticky: set[str] = set()      # tunables that ignore writes
        self.tmpdir = "/tmp/fake-bench"
        self.now = 0.0                     # clock()

    # -- Target ----------------------------------------------------------------
    @property
    def is_local(self) -> bool:
        return False

    def clock(self) -> float:
        """A simulated clock: only sleep() moves it."""
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds

    def describe(self) -> dict[str, str]:
        return {"kind": "fake", "kernel": "6.1.0-test", "host": "fake", "cpus": "2",
                "fio": "fio-3.33", "cpu_model": "none"}

    def read_file(self, path: str) -> bytes:
        return self.files[path]

    def write_file(self, path: str, data: bytes) -> None:
        self.files[path] = data

    def latency_us(self, name: str, opts: dict[str, Any]) -> float:
        base = 100.0 if name == "rt" else 400.0
        if self.current == "k2":
            return base * (0.5 + int(self.values["max_inflight"]) / 64)
        return base * 2

    def run(self, script: str, timeout: float = 300.0) -> Result:
        self.log.append(script)
        s = script.strip()
        q = f"{SYS}/{self.dev}/queue"
        if s == f"cat {q}/scheduler":
            return Result(0, " ".join(f"[{n}]" if n == self.current else n
                                      for n in self.scheds) + "\n")
        m = re.fullmatch(rf"echo (\S+) > {q}/scheduler; echo; cat {q}/scheduler", s)
        if m:
            err = ""
            if m.group(1) in self.scheds:
                self.current = m.group(1)
                self.values = self._defaults(self.current)
            else:
                err = "sh: write error: Invalid argument\n"
            return Result(0, err + "\n" + self.run(f"cat {q}/scheduler").out)
        m = re.fullmatch(rf"cd {q}/iosched && for f in ([\w ]+); do v=.*; done", s)
        if m:                                   # device.read_attrs()
            return Result(0, "".join(f"{k}={self.values[k]}\n" for k in m.group(1).split()))
        if s.startswith(f"cd {q}/iosched"):
            return Result(0, "".join(f"644 {k}={v}\n" for k, v in self.values.items()))
        m = re.fullmatch(rf"\[ -e {q}/iosched/(\w+) \] \|\| exit 100; echo (\S+) > "
                         rf"{q}/iosched/(\w+); rc=\$\?; echo; echo \"=\$\(cat {q}/iosched/\w+\)\"; "
                         r"exit \$rc", s)
        if m:
            attr, val = m.group(1), m.group(2)
            if attr not in self.values:
                return Result(100, "")
            ok = self.scheds[self.current].get(attr, ("", lambda v: False))[1](val)
            if ok and attr not in self.sticky:
                self.values[attr] = val
            err = "" if ok else "sh: write error: Invalid argument\n"
            return Result(0 if ok else 1, f"{err}\n={self.values[attr]}\n")
        m = re.fullmatch(rf"cat {q}/iosched/(\w+)", s)
        if m:
            return Result(0, self.values[m.group(1)] + "\n")
        if s == f"cat {q}/nr_requests":
            return Result(0, f"{self.nr_requests}\n")
        if s == "grep -c ^processor /proc/cpuinfo":
            return Result(0, "2\n")
        m = re.fullmatch(r"mkdir -p \S+ && cat > (\S+) <<'EOF'\n(.*)\nEOF\n"
                         r"rm -f (\S+); (?:.*?; )?fio --output-format=(json\+?) --output=(\S+) "
                         r"(\S+) .*", s, re.S)
        if m:
            job, text = m.group(1), m.group(2)
            self.files[job] = text.encode()
            self.last_jobfile = text
            self.fio_runs.append((self.current, dict(self.values)))
            if self.on_fio is not None:
                self.on_fio(self)
            res = fio_json(text, self.latency_us, m.group(4) == "json+")
            return Result(0, f"fio: a notice\n\n{JSON_MARK}\n{json.dumps(res)}")
        r = self._device(s)
        if r is not None:
            return r
        raise AssertionError(f"FakeTarget: unexpected script {s!r}")

    def _device(self, s: str) -> Result | None:
        """device.py's probes and the modules; None for other scripts."""
        d, b = f"{SYS}/{self.dev}", f"/dev/{self.dev}"
        if s == f"p=$(readlink -f {b}) && [ -b \"$p\" ] && echo \"$p\"":
            return Result(0, f"{b}\n")
        if s.startswith("p=$(readlink -f "):
            return Result(1, "")
        if s == f"ls {SYS} 2>/dev/null":
            return Result(0, f"{self.dev}\n")
        if s.startswith(f"[ -e {d}/partition ]"):
            return Result(1, "")
        if s == f"[ -e {d}/queue/scheduler ]":
            return Result(0, "")
        if s.startswith(f"cat {d}/size;"):
            return Result(0, f"{self.size_bytes // 512}\n512\n{self.run(f'cat {d}/queue/scheduler').out}"
                             "2\n64\nFake SSD\nnvme\n")
        if s.startswith(f"d={self.dev}\n"):           # the occupancy probe
            return Result(0, f"dev {self.dev} 259:0\n"
                             + "".join(f"mount {mm} {mnt}\n" for mm, mnt in self.mounts)
                             + "rootdev 2049\nblkid yes\n")
        if s == f"blkid -p -o export {b}":
            return Result(0, f"TYPE={self.signature}\n") if self.signature else Result(2, "")
        if s.startswith(f"dd if=/dev/zero of={b} bs=4096 count=0 conv=notrunc,fsync"):
            return Result(0, "")
        if s.startswith("rm -rf "):
            return Result(0, "")
        m = re.fullmatch(r"\[ -d /sys/module/(\S+) \]", s)
        if m:
            return Result(0 if m.group(1) in [x.replace("-", "_") for x in self.loaded] else 1, "")
        m = re.fullmatch(r"modprobe (\S+)", s)
        if m:
            if m.group(1) not in self.loadable:
                return Result(1, f"modprobe: FATAL: Module {m.group(1)} not found\n")
            elv, tunables = self.loadable[m.group(1)]
            self.scheds[elv] = tunables
            self.loaded.append(m.group(1))
            return Result(0, "")
        m = re.fullmatch(r"modprobe -r (\S+) 2>/dev/null \|\| rmmod \S+", s)
        if m:
            if m.group(1) in self.loaded:
                self.loaded.remove(m.group(1))
                elv = self.loadable[m.group(1)][0]
                if self.current == elv:
                    return Result(1, "in use")
                self.scheds.pop(elv, None)
            return Result(0, "")
        return None

    def _defaults(self, sched: str) -> dict[str, str]:
        return {k: v[0] for k, v in self.scheds[sched].items()}


def run_fake(t: Target, argv: list[str], out: Path) -> str:
    """`python3 -m bench @argv` (a run) on simulated target @t into results
    folder @out; what it printed."""
    log = io.StringIO()
    run_suite(t, parse([*argv, "--out", str(out)]), out=log, command=["bench"])
    return log.getvalue()
