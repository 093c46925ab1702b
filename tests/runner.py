#!/usr/bin/python3
"""Run every test tier and print one summary line: N passed, N failed[, N skipped].

Tiers (shared/DESIGN.md):
  static  checkpatch on the project's kernel C; W=1 build with sparse (C=2)
          for each test kernel, which must print no warning
  unit    the schedulers' decision logic in userspace (tests/unit/*_test.c,
          ASan+UBSan) and the Python tooling (pytest)
  vm      the VM suites (tests/vm, pytest) on each test kernel
  debug   on the debug kernel (scripts/debugkernel: lockdep, KASAN, UBSAN,
          kmemleak, fault injection; built on first use, then cached), the
          VM suites that do not assert timing, and the fault injection tests
          (tests/vm/test_faults.py)

When the vm and debug tiers both run, the VM tiers start at once, on one
core (their QEMU is single-threaded TCG), and static, unit and debug run
one after the other on the other (a first build of the debug kernel too, at
nice 19 and one job, about 20 min); once debug is done, that lane takes the
next test kernel whose VM tier has not started, so two VM tiers may run at
once.  The VM tiers' report follows theirs, in kernel order.  (Before, the
VM tiers waited for static and unit: 2.1 + 3.6 min, then VM tiers 77 min
beside debug 76.5, 83 min in all; then 78 min: VM tiers 77.4 beside static
2.1, unit 4.5 and debug 70.6; on a machine twice as fast, 65.3: VM tiers
21.9 + 21.9 + 21.0 beside static 1.6, unit 4.0 and debug 30.5, the other
lane idle for the last 30 min; with the lanes, 44.0: VM tiers 16.9, 17.9
and 15.9 beside static 1.2, unit 2.4 and debug 24.4; with QEMU 10.0, 47.5:
VM tiers 17.4, 17.4 and 17.3 beside static 1.3, unit 2.4 and debug 26.5.)
The tests marked userspace or first_kernel run in the first test kernel's
VM tier only.  make check runs this script under scripts/cpucap (95 % of the
CPUs: at 100 % the hypervisor of this project's hosts stalls the machine).
A VM or debug test not started BUDGET_MIN after make check began is
skipped ("time budget"), counted in a NOTE line before the summary.

usage: tests/run [--tier static|unit|vm|debug ...] [--kernel RELEASE ...] [-k EXPR]
Exit status is non-zero when anything failed.
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TIERS = ("static", "unit", "vm", "debug")
# The debug tier: the suites whose tests do not need LTTng or assert timing
# (-m), and the fault injection tests.
# The fault injection tests early, as they run nowhere else and the time
# budget (BUDGET_MIN) leaves out the last ones on a slow host; after the
# generic suite, whose last test reads the console since boot, where the
# injected allocation failures leave backtraces.
DEBUG_SUITES = ["tests/vm/test_generic.py", "tests/vm/test_faults.py", "tests/vm/test_k2.py",
                "tests/vm/test_flashfq.py", "tests/vm/test_cars.py", "tests/vm/test_ssdsim.py",
                "tests/vm/test_ssdsim_trace.py", "tests/vm/test_trace.py"]
# tests named with their time after each tier: where to look when it grows
# (every test's is in .cache/check/<tier>.xml, pytest's JUnit XML)
SLOWEST = 12
# CI stops a run at 90 min.  Under make check (which sets CHECK_STARTED,
# seconds since the epoch), or when CHECK_BUDGET_MIN is set (counted from
# this script's start), a VM or debug test not started BUDGET_MIN after
# that is skipped with the reason "time budget: ..." (the VM suites'
# conftest.py, VM_TEST_DEADLINE), so that the run still ends with its
# summary: the tests under way finish (the slowest took 4 min on a slow CI
# host; a longer one, marked minutes(N), starts only while it still ends by
# then) and the rest are counted.  A normal run takes 45-60 min.
BUDGET_MIN = float(os.environ.get("CHECK_BUDGET_MIN", "78"))
BUDGET_SKIP = "time budget"
PY = "/usr/bin/python3"  # Debian's python3, with the packages scripts/setup installs


@dataclass
class Tally:
    passed: int = 0
    failed: int = 0
    skipped: int = 0
    # tests skipped for want of time (BUDGET_MIN)
    unrun: int = 0
    failures: list[str] = field(default_factory=list)
    # None: print each line now; a list: hold the lines back (a tier that
    # runs beside another, reported after it: merge())
    held: list[str] | None = None

    def say(self, line: str) -> None:
        if self.held is None:
            print(line, flush=True)
        else:
            self.held.append(line)

    def add(self, name: str, ok: bool | None, detail: str = "") -> None:
        if ok is None:
            self.skipped += 1
            self.say(f"SKIP: {name}{': ' + detail if detail else ''}")
        elif ok:
            self.passed += 1
            self.say(f"PASS: {name}")
        else:
            self.failed += 1
            self.failures.append(name)
            self.say(f"FAIL: {name}")
            if detail:
                self.say("    " + detail.strip().replace("\n", "\n    "))

    def merge(self, other: Tally) -> None:
        """Print what other held back and add its counts to these."""
        for line in other.held or []:
            self.say(line)
        self.passed += other.passed
        self.failed += other.failed
        self.skipped += other.skipped
        self.unrun += other.unrun
        self.failures += other.failures


def sh(cmd: list[str], **kw: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, **kw)  # type: ignore[call-overload]


def test_kernels() -> tuple[list[str], str]:
    """The test kernels, and what scripts/kernels said if one is missing."""
    r = sh([str(ROOT / "scripts" / "kernels"), "test"])
    return r.stdout.split(), "" if r.returncode == 0 else r.stderr.strip() or "failed"


def module_dirs() -> list[str]:
    kb = (ROOT / "Kbuild").read_text()
    return re.findall(r"^obj-m\s*\+=\s*(\S+)/\s*$", kb, re.M)


def kernel_sources() -> list[Path]:
    files: list[Path] = []
    for d in ["compat", *module_dirs()]:
        files += sorted((ROOT / d).glob("*.[ch]"))
    files += sorted((ROOT / "tracepoints").rglob("*.[ch]"))
    return files


def static_tier(t: Tally, kernels: list[str]) -> None:
    # the private-header cache of the newest kernel holds checkpatch
    srcs = []
    for k in kernels:
        r = sh([str(ROOT / "scripts" / "ksrc"), k])
        if r.returncode != 0:
            t.add(f"static: private headers for {k}", False, r.stderr)
            return
        srcs.append(Path(r.stdout.strip()))
    checkpatch = srcs[-1] / "scripts" / "checkpatch.pl"
    for f in kernel_sources():
        # ALLOC_WITH_SIZEOF (7.3's checkpatch): kzalloc_obj() and friends do
        # not exist on the older test kernels
        ignore = "SPDX_LICENSE_TAG,ALLOC_WITH_SIZEOF"
        if f.parent.name == "compat":
            # the one place whose job is version checks (DESIGN.md)
            ignore += ",LINUX_VERSION_CODE,CONSTANT_COMPARISON"
        if "trace/events" in str(f) or "instrumentation/events" in str(f):
            # the TRACE_EVENT layout the kernel's own trace headers use
            ignore += ",OPEN_ENDED_LINE,PARENTHESIS_ALIGNMENT"
        if f.name.startswith("lttng-probe-"):
            # "#define TRACE_INCLUDE_PATH instrumentation/events" is a path
            ignore += ",SPACING"
        r = sh(["perl", str(checkpatch), "--no-tree", "--strict", "--quiet",
                "--show-types", "--ignore", ignore, "-f", str(f)])
        # SPDX tags are checked below; checkpatch wants // in .c and /* */ in .h
        rel = f.relative_to(ROOT)
        first = f.read_text().splitlines()[0] if f.stat().st_size else ""
        spdx = "SPDX-License-Identifier: GPL-2.0" in first
        t.add(f"static: checkpatch {rel}", r.returncode == 0 and not r.stdout.strip()
              and spdx, r.stdout + ("" if spdx else "missing SPDX line"))
    for k in kernels:
        # from scratch: an up-to-date object would hide its warnings
        shutil.rmtree(ROOT / ".build-check" / k, ignore_errors=True)
        r = sh(["make", "-C", str(ROOT), f"KVER={k}", "W=1", "C=2",
                f"BUILD_ROOT={ROOT}/.build-check", "modules"])
        out = r.stdout + r.stderr
        noise = [ln for ln in out.splitlines()
                 if "warning:" in ln or "error:" in ln or re.search(r"\.[ch]:\d+:\d+: ", ln)]
        t.add(f"static: W=1 + sparse build for {k}", r.returncode == 0 and not noise,
              "\n".join(noise[:40]) if noise else out[-3000:])


def unit_tier(t: Tally) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        for src in sorted((ROOT / "tests" / "unit").glob("*_test.c")):
            name = src.stem.removesuffix("_test")
            exe = Path(tmp) / src.stem
            inc = ["-I", str(ROOT / "tests" / "unit")]
            if (ROOT / name).is_dir():
                inc += ["-I", str(ROOT / name)]
            r = sh(["cc", "-std=gnu11", "-Wall", "-Wextra", "-Werror", "-g", "-O1",
                    "-fsanitize=address,undefined", "-fno-sanitize-recover=all",
                    *inc, str(src), "-o", str(exe)])
            if r.returncode != 0:
                t.add(f"unit: build {src.name}", False, r.stderr)
                continue
            try:
                # a broken heap or list can loop forever: bound the run
                r = sh([str(exe)], timeout=600)
            except subprocess.TimeoutExpired:
                t.add(f"unit: {src.name} did not finish in 600 s", False)
                continue
            seen = 0
            for line in r.stdout.splitlines():
                m = re.match(r"(PASS|FAIL): (.*)", line)
                if m:
                    seen += 1
                    t.add(f"unit: {m.group(2)}", m.group(1) == "PASS",
                          "" if m.group(1) == "PASS" else r.stderr)
            if r.returncode != 0 and not any(f.startswith("unit: " + src.name)
                                             for f in t.failures):
                t.add(f"unit: {src.name} exit status", False, r.stderr[-3000:])
            elif not seen:
                t.add(f"unit: {src.name} ran no test", False, r.stdout + r.stderr)
    pytest_run(t, "unit", ["tests/python"] + [str(p.relative_to(ROOT)) for p in
                                              sorted(ROOT.glob("*/tests")) if p.is_dir()])


def pytest_run(t: Tally, label: str, paths: list[str], extra: list[str] | None = None) -> None:
    """Run pytest on paths and add each test case's result to t."""
    paths = [p for p in paths if (ROOT / p).exists()]
    if not paths:
        return
    with tempfile.NamedTemporaryFile(suffix=".xml") as xml, \
            tempfile.NamedTemporaryFile("r", suffix=".notes") as notes:
        cmd = [PY, "-m", "pytest", "-p", "no:cacheprovider", "-rfEs", "-v",
               f"--junitxml={xml.name}", *(extra or []), *paths]
        t.say(f"== {label}: {' '.join(cmd[1:])}")
        # tests/vm/conftest.py notes there a VM it had to boot again
        env = dict(os.environ, VM_BOOT_NOTES=notes.name)
        p = subprocess.run(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True, env=env)
        log = p.stdout
        for note in notes.read().splitlines():
            t.say(f"NOTE: {label}: {note}")
        try:
            tree = ET.parse(xml.name)
        except ET.ParseError:
            t.add(f"{label}: pytest", False, log[-5000:])
            return
        # every test's time, for finding where a tier's time goes beyond
        # the slowest printed below
        keep = ROOT / ".cache" / "check" / (re.sub(r"[^\w.+-]+", "_", label).strip("_") + ".xml")
        keep.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(xml.name, keep)
        suite_secs: dict[str, float] = {}
        case_secs: dict[str, float] = {}
        for case in tree.iter("testcase"):
            suite = case.get('classname', '').split('.')[-1]
            secs = float(case.get("time") or 0)
            suite_secs[suite] = suite_secs.get(suite, 0.0) + secs
            case_secs[f"{suite}::{case.get('name')}"] = secs
            name = f"{label}: {suite}::{case.get('name')}"
            fail = case.find("failure")
            if fail is None:
                fail = case.find("error")
            skip = case.find("skipped")
            if fail is not None:
                t.add(name, False, (fail.get("message") or "") + "\n" + (fail.text or "")[-4000:])
            elif skip is not None:
                msg = skip.get("message") or ""
                t.unrun += msg.startswith(BUDGET_SKIP)
                t.add(name, None, msg)
            else:
                t.add(name, True)
        if suite_secs:  # where a tier's time goes (set-up included)
            t.say(f"({label}: " + ", ".join(f"{n} {secs / 60:.1f} min" for n, secs in
                                            sorted(suite_secs.items(), key=lambda x: -x[1]))
                  + ")")
            slow = sorted(case_secs.items(), key=lambda x: -x[1])[:SLOWEST]
            t.say(f"({label}, slowest: " + ", ".join(f"{n} {secs:.0f} s" for n, secs in slow)
                  + ")")
        if p.returncode not in (0, 1, 5):  # 5: nothing collected
            t.add(f"{label}: pytest exit status {p.returncode}", False, log[-5000:])


def vm_tier(t: Tally, kernels: list[str], kexpr: str | None,
            times: dict[str, float]) -> None:
    for k in kernels:
        vm_kernel(t, k, kernels, kexpr, times)


def vm_kernel(t: Tally, k: str, kernels: list[str], kexpr: str | None,
              times: dict[str, float]) -> None:
    """The VM tier of kernel @k, one of @kernels; the first's with the
    tests marked userspace (user space's, the same on every kernel: run on
    the first test kernel only, which saves 6.4 of a tier's 29 min on a
    slow host) and first_kernel (adaptive K2 against bench select: 8-10 min a kernel on a
    slow host, where on all three it pushed 70 of 7.3's tests past the time
    budget)."""
    t0 = time.monotonic()
    first = k == kernels[0]
    r = sh(["make", "-C", str(ROOT), f"KVER={k}", "modules"])
    if r.returncode != 0:
        t.add(f"vm[{k}]: build modules", False, (r.stdout + r.stderr)[-4000:])
        return
    # the LTTng tracer and probes; the LTTng test fails on its own without them
    r = sh(["make", "-C", str(ROOT), f"KVER={k}", "lttng-probes"])
    if r.returncode != 0:
        t.add(f"vm[{k}]: build LTTng modules and probes", False,
              (r.stdout + r.stderr)[-4000:])
    extra = [f"--kernel={k}", "-m",
             "not debug_kernel" if first
             else "not debug_kernel and not userspace and not first_kernel"]
    if kexpr:
        extra += [f"-k={kexpr}"]
    pytest_run(t, f"vm[{k}]", ["tests/vm"], extra)
    times[f"vm[{k}]"] = time.monotonic() - t0


DEBUGKERNEL = str(ROOT / "scripts" / "debugkernel")
NICE = ["nice", "-n", "19"]


def debug_tier(t: Tally, kexpr: str | None, times: dict[str, float], beside: bool) -> None:
    """The debug tier; beside: while the VM tiers run (main()), on the core
    their single-threaded TCG leaves idle.  Its VM runs at the same
    priority as theirs: at nice 19 it starved whenever theirs needed more
    than one core (59.6 min against 33 alone), and K2's bound test sampled
    the guest 34 times in 30 s where it asks for 50.  A kernel build beside
    them runs at nice 19, one job."""
    t0 = time.monotonic()
    fresh = sh([DEBUGKERNEL, "path"]).returncode != 0
    if fresh:
        t.say("== debug: building the debug kernel (scripts/debugkernel; once per machine, "
              + ("about 20 min at nice 19 beside the VM tiers)" if beside
                 else "about 15 min on 2 cores)"))
    r = sh([*(NICE if beside else []), DEBUGKERNEL, "ensure"],
           env=dict(os.environ, DEBUGKERNEL_JOBS="1") if beside else None)
    if r.returncode != 0:
        t.add("debug: build the debug kernel", False, r.stderr[-4000:])
        return
    if fresh:
        t.say(r.stderr.strip())
        times["debug kernel build"] = time.monotonic() - t0
    t1 = time.monotonic()
    k = sh([DEBUGKERNEL, "release"]).stdout.strip()
    r = sh(["make", "-C", str(ROOT), f"KVER={k}", "modules"])
    if r.returncode != 0:
        t.add(f"debug[{k}]: build modules", False, (r.stdout + r.stderr)[-4000:])
        return
    extra = [f"--kernel={k}", "-m", "not timing and not lttng"]
    if kexpr:
        extra += [f"-k={kexpr}"]
    pytest_run(t, f"debug[{k}]", DEBUG_SUITES, extra)
    times[f"debug[{k}]"] = time.monotonic() - t1


@dataclass
class VMLanes:
    """The VM tiers run beside the other tiers (main()): a thread takes the
    test kernels one by one, and the main lane takes those left once its
    own tiers are done.  Each kernel's lines are held back in its own
    Tally, merged in kernel order at the end."""
    kernels: list[str]
    kexpr: str | None
    todo: list[str] = field(default_factory=list)
    tallies: dict[str, Tally] = field(default_factory=dict)
    times: dict[str, float] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)
    thread: threading.Thread | None = None

    def __post_init__(self) -> None:
        self.todo = list(self.kernels)

    def work(self, lane: str) -> None:
        """Run VM tiers until no kernel is left to start."""
        while True:
            with self.lock:
                if not self.todo:
                    return
                k = self.todo.pop(0)
                t = self.tallies[k] = Tally(held=[])
            try:
                vm_kernel(t, k, self.kernels, self.kexpr, self.times)
            except Exception:  # whatever it is, a failure in the summary
                t.add(f"vm[{k}]: tests/run's VM tier ({lane} lane)", False,
                      traceback.format_exc())

    def start(self) -> None:
        self.thread = threading.Thread(target=self.work, args=("VM",), name="vm-tiers")
        self.thread.start()

    def finish(self, t: Tally, times: dict[str, float]) -> None:
        """Take kernels left over in this lane, wait for the thread, and
        report every kernel's tier into @t."""
        self.work("main")
        assert self.thread is not None
        self.thread.join()
        for k in self.kernels:
            if k in self.tallies:
                t.merge(self.tallies[k])
        times.update({f"vm[{k}]": self.times[f"vm[{k}]"] for k in self.kernels
                      if f"vm[{k}]" in self.times})


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tier", action="append", choices=TIERS)
    ap.add_argument("--kernel", action="append", help="default: every test kernel")
    ap.add_argument("-k", dest="kexpr", help="pytest -k expression for the VM tier")
    a = ap.parse_args()
    tiers = a.tier or list(TIERS)
    found, missing = test_kernels()
    kernels = a.kernel or found
    t = Tally()
    times: dict[str, float] = {}
    t0 = time.monotonic()
    if os.environ.get("CHECK_STARTED") or os.environ.get("CHECK_BUDGET_MIN"):
        started = float(os.environ.get("CHECK_STARTED") or time.time())
        os.environ["VM_TEST_DEADLINE"] = str(started + BUDGET_MIN * 60)
    if not kernels or (missing and not a.kernel):
        t.add("setup: test kernels installed", False, (missing or "none") + ": run scripts/setup")
    beside = None
    if "debug" in tiers and "vm" in tiers and kernels:
        # the kernels' private headers first: two tiers extracting the
        # same one at once would replace it under the other's build
        for k in kernels:
            sh([str(ROOT / "scripts" / "ksrc"), k])
        print("== vm: from the start, beside static, unit and debug (which then take the "
              "kernels left); its report follows theirs", flush=True)
        beside = VMLanes(kernels, a.kexpr)
        beside.start()
    if "static" in tiers and kernels:
        static_tier(t, kernels)
        times["static"] = time.monotonic() - t0
    if "unit" in tiers:
        t1 = time.monotonic()
        unit_tier(t)
        times["unit"] = time.monotonic() - t1
    if "debug" in tiers:
        debug_tier(t, a.kexpr, times, beside=beside is not None)
    if beside is not None:
        beside.finish(t, times)
    elif "vm" in tiers and kernels:
        vm_tier(t, kernels, a.kexpr, times)
    mins = (time.monotonic() - t0) / 60
    if t.failures:
        print("\nFailed:\n  " + "\n  ".join(t.failures))
    parts = ", ".join(f"{name} {secs / 60:.1f}" for name, secs in times.items())
    print(f"\n(tests/run took {mins:.1f} min: {parts})")
    if t.unrun:
        print(f"NOTE: {t.unrun} VM tests were not run: {BUDGET_MIN:.0f} min after make check "
              "began, none is started (BUDGET_MIN); the SKIP lines name them")
    line = f"{t.passed} passed, {t.failed} failed"
    if t.skipped:
        line += f", {t.skipped} skipped"
    print(line)
    return 1 if t.failed or not (t.passed + t.failed) else 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONDONTWRITEBYTECODE", "1")
    sys.exit(main())
