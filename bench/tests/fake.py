"""A simulated target for runner tests: a block device's scheduler and
tunables in sysfs (with the kernel's semantics: unknown elevator and
out-of-range values refused, tunables reset on re-selection) and an fio that
writes JSON shaped like fio 3.33's."""
from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from bench.jobs import parse_options
from bench.runner import JSON_MARK
from bench.target import Target
from scripts.vmbed import Result

Validator = Callable[[str], bool]

SYS = "/sys/class/block"


def fio_json(jobfile: str, latency_us: Callable[[str, dict[str, Any]], float]) -> dict[str, Any]:
    """fio-like JSON for a job file: each job 1000 I/Os, latencies from
    @latency_us(job name, its options)."""
    sections = parse_options(jobfile)
    g = sections.pop("global", {})
    jobs = []
    for name, opts in sections.items():
        o = {**g, **opts}
        lat = latency_us(name, o)
        rw = str(o.get("rw", "randread"))
        d = "write" if "write" in rw else "read"
        side = {"io_bytes": 4096 * 1000, "total_ios": 1000, "iops": 1e6 / lat,
                "bw": 4e6 / lat / 1.024,
                "clat_ns": {"mean": lat * 1000, "percentile": {
                    f"{p:f}": int(lat * 1000 * (1 + p / 100)) for p in
                    (50.0, 90.0, 99.0, 99.9, 99.99)}},
                "lat_ns": {"mean": lat * 1000 + 500}}
        empty = {"io_bytes": 0, "total_ios": 0, "iops": 0.0, "bw": 0}
        jobs.append({"jobname": name, "groupid": 0, "error": 0, "job options": o,
                     "read": side if d == "read" else empty,
                     "write": side if d == "write" else empty,
                     "trim": empty, "job_runtime": 1000, "usr_cpu": 10.0, "sys_cpu": 40.0})
    return {"fio version": "fio-3.33", "jobs": jobs}


class FakeTarget(Target):
    def __init__(self, dev: str = "fake0", scheds: dict[str, dict[str, tuple[str, Validator]]]
                 | None = None, scheduler: str = "mq-deadline", nr_requests: int = 64):
        self.dev = dev
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

    # -- Target ----------------------------------------------------------------
    @property
    def is_local(self) -> bool:
        return False

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
                         r"rm -f (\S+); (?:.*?; )?fio --output-format=json --output=(\S+) (\S+) .*", s,
                         re.S)
        if m:
            job, text = m.group(1), m.group(2)
            self.files[job] = text.encode()
            self.fio_runs.append((self.current, dict(self.values)))
            if self.on_fio is not None:
                self.on_fio(self)
            res = fio_json(text, self.latency_us)
            return Result(0, f"fio: a notice\n\n{JSON_MARK}\n{json.dumps(res)}")
        raise AssertionError(f"FakeTarget: unexpected script {s!r}")

    def _defaults(self, sched: str) -> dict[str, str]:
        return {k: v[0] for k, v in self.scheds[sched].items()}
