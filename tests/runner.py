"""Run every test tier and print one summary line: N passed, N failed[, N skipped].

Tiers (tests/README.md):
  static  checkpatch on the project's kernel C; W=1 build with sparse (C=2)
          for each test kernel, which must print no warning
  unit    the schedulers' decision logic in userspace (tests/unit/*_test.c,
          ASan+UBSan) and the Python tooling (pytest)
  vm      the VM suites (tests/vm, pytest) on each test kernel
  debug   on the debug kernel (scripts/debugkernel: lockdep, KASAN, UBSAN,
          kmemleak, fault injection; built on first use, then cached), the
          fault injection tests and the VM tests marked debug_tier

The plan (tests/plan.txt) lists every test of every group (a tier, or a
test kernel's VM tier); a planned test that does not run, a test that runs
unplanned, and a skip not allowed by tests/skips.txt each fail the run, so a
green run is every planned test passed.  tests/run --write-plan writes the
plan from what the tiers collect; the change that adds or removes a test
commits it.  With -k the plan's missing tests are not checked.

Scheduling (when the vm tier runs): a missing debug kernel (with --tier
debug) is built first with every CPU; then one lane runs the VM tiers, one
kernel after another, and the other static, unit and debug, then takes the
next test kernel whose VM tier has not started.  Each kernel's lines are
reported after the main lane's, in kernel order.  make check runs this
under scripts/cpucap (95 % of the CPUs: at 100 % the hypervisor of this
project's hosts stalls the machine).

Time budget: a VM or debug test not started CHECK_BUDGET_MIN (default 78)
minutes after make check began (CHECK_STARTED) is not started, so that the
run ends with its summary before CI stops it; each such test fails the run.

usage: tests/run [--tier static|unit|vm|debug ...] [--kernel RELEASE ...] [-k EXPR]
                 [--write-plan]
Without --tier: static, unit and vm (make check); the debug tier runs with
--tier debug (make check-debug).
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
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from bench import modules

ROOT = Path(__file__).resolve().parent.parent
TIERS = ("static", "unit", "vm", "debug")
# What tests/run runs without --tier, and so make check and CI: the debug
# tier is make check-debug (tests/run --tier debug).  On this project's
# 2-core hosts the VM tiers of three kernels take about 50 min and the
# debug tier 45 more, with 16 min for its kernel's first build: together
# they do not fit CI's 90 min (tests/README.md, "Time").
CHECK_TIERS = ("static", "unit", "vm")
PLAN = ROOT / "tests" / "plan.txt"
SKIPS = ROOT / "tests" / "skips.txt"
# The debug tier: the fault injection tests, which run nowhere else, and
# the tests marked debug_tier (the generic suite, K2's trace events, and of
# the other suites those on paths these do not take: tests/README.md) that
# neither need LTTng nor assert timing; the generic suite first, whose last
# test reads the console since boot, where the injected allocation failures
# leave backtraces.
DEBUG_SUITES = ["tests/vm/test_generic.py", "tests/vm/test_faults.py", "tests/vm/test_k2.py",
                "tests/vm/test_flashfq.py", "tests/vm/test_cars.py", "tests/vm/test_ssdsim.py",
                "tests/vm/test_trace.py"]
# CONFIG_LOCALVERSION of the debug kernel (tests/debug/kernel.config)
DEBUG_LOCALVERSION = "-ssd-debug"
# tests named with their time after each tier: where to look when it grows
# (every test's time and printed figures are in .cache/check/<group>.xml,
# pytest's JUnit XML)
SLOWEST = 12
# CI stops a run at 90 min: under make check (CHECK_STARTED, seconds since
# the epoch), or when CHECK_BUDGET_MIN is set (counted from this script's
# start), a VM or debug test not started BUDGET_MIN after that is not
# started (tests/vm/conftest.py, VM_TEST_DEADLINE) and fails the run.
BUDGET_MIN = float(os.environ.get("CHECK_BUDGET_MIN", "78"))
BUDGET_SKIP = "time budget"
PY = "/usr/bin/python3"  # Debian's python3, with the packages scripts/setup installs


def series(release: str) -> str:
    """The plan's name of a kernel: its major.minor ("6.12"), or "debug"."""
    if release.endswith(DEBUG_LOCALVERSION):
        return "debug"
    m = re.match(r"\d+\.\d+", release)
    return m.group(0) if m else release


@dataclass(frozen=True)
class Group:
    """A part of the run the plan counts: a tier, or one kernel's VM tier.
    key: its heading in the plan ("vm 6.12"); label: what its output lines
    begin with ("vm[6.12.117+deb12-cloud-amd64]")."""
    key: str
    label: str


def vm_group(release: str) -> Group:
    return Group(f"vm {series(release)}", f"vm[{release}]")


def debug_group(release: str) -> Group:
    return Group("debug", f"debug[{release}]")


STATIC = Group("static", "static")
UNIT = Group("unit", "unit")


# -- the plan and the allowed skips ------------------------------------------

def read_plan(text: str) -> dict[str, list[str]]:
    """tests/plan.txt: "[group] N tests" headings, each followed by its
    tests' ids, one a line; # comments.  The count must match the list."""
    plan: dict[str, list[str]] = {}
    cur: list[str] | None = None
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        m = re.fullmatch(r"\[([^\]]+)\]\s+(\d+) tests?", line)
        if m:
            cur = plan.setdefault(m.group(1), [])
            cur.append(m.group(2))  # the count, checked below
            continue
        if cur is None:
            raise ValueError(f"plan line {n}: a test before any [group] heading: {line}")
        cur.append(line)
    for key, ids in plan.items():
        count, tests = int(ids[0]), ids[1:]
        if count != len(tests):
            raise ValueError(f"plan group [{key}] says {count} tests and lists {len(tests)}")
        if len(set(tests)) != len(tests):
            raise ValueError(f"plan group [{key}] lists a test twice")
        plan[key] = tests
    return plan


def format_plan(plan: dict[str, list[str]]) -> str:
    out = ["# Every test make check runs (tests/run), by group: a tier, or a test",
           "# kernel's VM tier.  Written by tests/run --write-plan and committed with",
           "# the change that adds or removes a test: a planned test that does not",
           "# run fails the run, and so does a test that is not planned.", ""]
    for key, tests in plan.items():
        out.append(f"[{key}] {len(tests)} tests")
        out += tests
        out.append("")
    return "\n".join(out)


@dataclass(frozen=True)
class AllowedSkip:
    group: str     # a plan group, or a pattern of them ("vm *")
    test: str      # a test id, or a pattern (* for any text)
    reason: str


def read_skips(text: str) -> list[AllowedSkip]:
    """tests/skips.txt: "<group pattern> <test id pattern>: <reason>" a line."""
    out = []
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        m = re.fullmatch(r"(\S+(?: \S+)?)\s+(\S+):\s+(.+)", line)
        if not m:
            raise ValueError(f"skips line {n}: want '<group> <test>: <reason>': {line}")
        out.append(AllowedSkip(*m.groups()))
    return out


def _matches(pattern: str, name: str) -> bool:
    """@pattern's * stands for any text; nothing else is special (test ids
    hold brackets)."""
    return re.fullmatch(".*".join(map(re.escape, pattern.split("*"))), name) is not None


def allowed_skip(skips: list[AllowedSkip], group: str, test: str) -> AllowedSkip | None:
    return next((s for s in skips if _matches(s.group, group) and _matches(s.test, test)), None)


# -- the tally -----------------------------------------------------------------

@dataclass
class Tally:
    passed: int = 0
    failed: int = 0
    skipped: int = 0
    failures: list[str] = field(default_factory=list)
    # what ran of each plan group: test id -> "passed", "failed", "skipped"
    ran: dict[str, dict[str, str]] = field(default_factory=dict)
    # allowed skips seen, with their reason (the summary's NOTE line)
    allowed: list[str] = field(default_factory=list)
    # None: print each line now; a list: hold the lines back (a tier that
    # runs beside another, reported after it: merge())
    held: list[str] | None = None

    def say(self, line: str) -> None:
        if self.held is None:
            print(line, flush=True)
        else:
            self.held.append(line)

    def add(self, name: str, ok: bool, detail: str = "") -> None:
        """A result that is not one of the plan's tests (a build, a set-up)."""
        if ok:
            self.passed += 1
            self.say(f"PASS: {name}")
        else:
            self.failed += 1
            self.failures.append(name)
            self.say(f"FAIL: {name}")
            if detail:
                self.say("    " + detail.strip().replace("\n", "\n    "))

    def test(self, group: Group, test: str, ok: bool | None, detail: str = "",
             skips: list[AllowedSkip] | None = None) -> None:
        """One of the plan's tests: passed (True), failed (False) or skipped
        (None, @detail the reason).  A skip fails unless tests/skips.txt
        allows it; one for time always fails."""
        name = f"{group.label}: {test}"
        if ok is None:
            allow = None if detail.startswith(BUDGET_SKIP) else \
                allowed_skip(skips if skips is not None else [], group.key, test)
            if allow is None:
                self.ran.setdefault(group.key, {})[test] = "failed"
                why = ("not run for time: " if detail.startswith(BUDGET_SKIP)
                       else "skipped, which tests/skips.txt does not allow: ")
                self.add(name, False, why + detail)
                return
            self.ran.setdefault(group.key, {})[test] = "skipped"
            self.skipped += 1
            self.allowed.append(f"{name} ({allow.reason})")
            self.say(f"SKIP: {name}: {detail}")
            return
        self.ran.setdefault(group.key, {})[test] = "passed" if ok else "failed"
        self.add(name, ok, detail)

    def merge(self, other: Tally) -> None:
        """Print what other held back and add its counts to these."""
        for line in other.held or []:
            self.say(line)
        self.passed += other.passed
        self.failed += other.failed
        self.skipped += other.skipped
        self.failures += other.failures
        self.allowed += other.allowed
        for key, tests in other.ran.items():
            self.ran.setdefault(key, {}).update(tests)


def check_plan(t: Tally, plan: dict[str, list[str]], groups: Iterable[Group],
               missing_too: bool = True) -> list[str]:
    """Hold what ran of @groups to the plan: each planned test that did not
    run (if @missing_too) and each test that ran unplanned fails the run.
    Returns a line per group: its tests run against its planned number."""
    lines = []
    for g in groups:
        planned = plan.get(g.key)
        ran = t.ran.get(g.key, {})
        if planned is None:
            t.add(f"{g.label}: the plan has no group [{g.key}]", False,
                  "tests/run --write-plan writes it (tests/plan.txt)")
            continue
        if missing_too:
            for test in planned:
                if test not in ran:
                    t.add(f"{g.label}: {test}", False, "planned, not run")
        pset = set(planned)
        for test in ran:
            if test not in pset:
                t.add(f"{g.label}: {test}", False,
                      "ran, but is not in tests/plan.txt (tests/run --write-plan)")
        lines.append(f"{g.key} {sum(1 for x in planned if x in ran)}/{len(planned)}")
    return lines


# -- running things --------------------------------------------------------------

def sh(cmd: list[str], **kw: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, **kw)  # type: ignore[call-overload]


def test_kernels() -> tuple[list[str], str]:
    """The test kernels, and what scripts/kernels said if one is missing."""
    r = sh([str(ROOT / "scripts" / "kernels"), "test"])
    return r.stdout.split(), "" if r.returncode == 0 else r.stderr.strip() or "failed"


def kernel_sources() -> list[Path]:
    files: list[Path] = []
    for d in ["compat", "elevator", *modules.folders()]:
        files += sorted((ROOT / d).glob("*.[ch]"))
    files += sorted((ROOT / "tracepoints").rglob("*.[ch]"))
    return files


def static_ids(kernels: list[str]) -> list[str]:
    return ([f"checkpatch {f.relative_to(ROOT)}" for f in kernel_sources()]
            + [f"W=1 + sparse build for {series(k)}" for k in kernels])


def static_tier(t: Tally, kernels: list[str], skips: list[AllowedSkip]) -> None:
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
            # the one place whose job is version checks
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
        t.test(STATIC, f"checkpatch {rel}", r.returncode == 0 and not r.stdout.strip()
               and spdx, r.stdout + ("" if spdx else "missing SPDX line"), skips)
    for k in kernels:
        # from scratch: an up-to-date object would hide its warnings
        shutil.rmtree(ROOT / ".build-check" / k, ignore_errors=True)
        r = sh(["make", "-C", str(ROOT), f"KVER={k}", "W=1", "C=2",
                f"BUILD_ROOT={ROOT}/.build-check", "modules"])
        out = r.stdout + r.stderr
        noise = [ln for ln in out.splitlines()
                 if "warning:" in ln or "error:" in ln or re.search(r"\.[ch]:\d+:\d+: ", ln)]
        t.test(STATIC, f"W=1 + sparse build for {series(k)}", r.returncode == 0 and not noise,
               "\n".join(noise[:40]) if noise else out[-3000:], skips)


def unit_c_tests() -> list[Path]:
    return sorted((ROOT / "tests" / "unit").glob("*_test.c"))


def unit_c_ids(src: Path) -> list[str]:
    """The tests a C unit test file lists in UNIT_MAIN(UNIT(name), ...)."""
    main = src.read_text().split("UNIT_MAIN(", 1)
    return [f"{src.name}:{n}" for n in re.findall(r"UNIT\((\w+)\)", main[1])] if len(main) > 1 \
        else []


def unit_c_results(stdout: str) -> list[tuple[str, bool]]:
    """The PASS/FAIL lines of a C unit test's binary (tests/unit/unit.h), as the
    plan's ids: the file's name, not the path __FILE__ gave."""
    out = []
    for line in stdout.splitlines():
        m = re.match(r"(PASS|FAIL): (?:.*/)?([^/:]+):(\w+)$", line)
        if m:
            out.append((f"{m.group(2)}:{m.group(3)}", m.group(1) == "PASS"))
    return out


def unit_pytest_paths() -> list[str]:
    return ["tests/python"] + [str(p.relative_to(ROOT)) for p in sorted(ROOT.glob("*/tests"))
                               if p.is_dir()]


def run_c_test(t: Tally, src: Path, tmp: Path, skips: list[AllowedSkip]) -> None:
    """Build @src (tests/unit/unit.h's harness, with ASan and UBSan) in
    @tmp, run it, and add each of its tests' results to @t."""
    name = src.stem.removesuffix("_test")
    exe = tmp / src.stem
    # the shims, the elevators' shared helpers, and the folder named for the test
    inc = ["-I", str(ROOT / "tests" / "unit"), "-I", str(ROOT / "elevator")]
    if (ROOT / name).is_dir():
        inc += ["-I", str(ROOT / name)]
    r = sh(["cc", "-std=gnu11", "-Wall", "-Wextra", "-Werror", "-g", "-O1",
            "-fsanitize=address,undefined", "-fno-sanitize-recover=all",
            *inc, str(src), "-o", str(exe)])
    if r.returncode != 0:
        t.add(f"unit: build {src.name}", False, r.stderr)
        return
    try:
        # a broken heap or list can loop forever: bound the run
        r = sh([str(exe)], timeout=600)
    except subprocess.TimeoutExpired:
        t.add(f"unit: {src.name} did not finish in 600 s", False)
        return
    results = unit_c_results(r.stdout)
    for test, ok in results:
        t.test(UNIT, test, ok, "" if ok else r.stderr, skips)
    if r.returncode != 0 and all(ok for _, ok in results):
        # a crash or a sanitizer's report after the last PASS
        t.add(f"unit: {src.name} exit status {r.returncode}", False, r.stderr[-3000:])


def unit_tier(t: Tally, skips: list[AllowedSkip]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        for src in unit_c_tests():
            run_c_test(t, src, Path(tmp), skips)
    pytest_run(t, UNIT, unit_pytest_paths(), skips=skips)


def junit_id(case: ET.Element) -> str:
    """A JUnit test case's pytest node id (xunit1: its file and name)."""
    return f"{case.get('file')}::{case.get('name')}"


def pytest_collect(paths: list[str], extra: list[str]) -> list[str]:
    """The node ids pytest collects from @paths with @extra (-m, --kernel)."""
    r = sh([PY, "-m", "pytest", "-p", "no:cacheprovider", f"--rootdir={ROOT}",
            "--collect-only", "-q", *extra, *paths],
           env=dict(os.environ, PYTHONDONTWRITEBYTECODE="1"))
    if r.returncode not in (0, 5):
        raise RuntimeError(f"pytest --collect-only {' '.join(extra + paths)} failed:\n"
                           + (r.stdout + r.stderr)[-3000:])
    return [ln for ln in r.stdout.splitlines() if "::" in ln and not ln.startswith(" ")]


def pytest_run(t: Tally, group: Group, paths: list[str], extra: list[str] | None = None,
               skips: list[AllowedSkip] | None = None, label: str | None = None,
               empty_ok: bool = False) -> None:
    """Run pytest on paths and add each test case's result to t, as
    @group's (@label, default the group's, heads its lines).  Collecting
    no test fails unless @empty_ok (a part of a tier under -k)."""
    label = label or group.label
    gone = [p for p in paths if not (ROOT / p).exists()]
    for p in gone:
        t.add(f"{label}: {p}", False, "a test path tests/run names does not exist")
    paths = [p for p in paths if p not in gone]
    if not paths:
        return
    with tempfile.NamedTemporaryFile(suffix=".xml") as xml, \
            tempfile.NamedTemporaryFile("r", suffix=".notes") as notes:
        cmd = [PY, "-m", "pytest", "-p", "no:cacheprovider", f"--rootdir={ROOT}", "-rfEs", "-v",
               "-o", "junit_family=xunit1", "-o", "junit_logging=system-out",
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
            test = junit_id(case)
            suite = test.split("::")[0]
            secs = float(case.get("time") or 0)
            suite_secs[suite] = suite_secs.get(suite, 0.0) + secs
            case_secs[test] = secs
            fail = case.find("failure")
            if fail is None:
                fail = case.find("error")
            skip = case.find("skipped")
            if fail is not None:
                t.test(group, test, False,
                       (fail.get("message") or "") + "\n" + (fail.text or "")[-4000:], skips)
            elif skip is not None:
                t.test(group, test, None, skip.get("message") or "", skips)
            else:
                t.test(group, test, True, skips=skips)
        if suite_secs:  # where a tier's time goes (set-up included)
            t.say(f"({label}: " + ", ".join(f"{n} {secs / 60:.1f} min" for n, secs in
                                            sorted(suite_secs.items(), key=lambda x: -x[1]))
                  + ")")
            slow = sorted(case_secs.items(), key=lambda x: -x[1])[:SLOWEST]
            t.say(f"({label}, slowest: " + ", ".join(f"{n} {secs:.0f} s" for n, secs in slow)
                  + ")")
        if p.returncode == 5:
            if not empty_ok:
                t.add(f"{label}: pytest collected no test", False, log[-3000:])
        elif p.returncode not in (0, 1):
            t.add(f"{label}: pytest exit status {p.returncode}", False, log[-5000:])


#: the -m expressions of the VM tests every kernel runs, and of those the
#: first kernel runs alone: the tests marked userspace (user space's, the
#: same on every kernel) and first_kernel (a test of a kernel-independent
#: thing whose kernel side other tests cover on every kernel)
EVERY_KERNEL = "not debug_kernel and not userspace and not first_kernel"
FIRST_KERNEL_ONLY = "not debug_kernel and (userspace or first_kernel)"


def vm_marks(k: str, kernels: list[str]) -> str:
    """The -m expression of kernel @k's VM tier: the first test kernel's
    holds FIRST_KERNEL_ONLY's tests too."""
    return "not debug_kernel" if k == kernels[0] else EVERY_KERNEL


#: the first test kernel's tests of user space and its first_kernel tests
#: run as parts of their own: these files' each (about 11 and 4 min of
#: its 46 here), then the other files' (about 6 min), so that the lanes
#: end together
FIRST_KERNEL_APART = ("tests/vm/test_bench.py", "tests/vm/test_kyber_tune.py")


@dataclass(frozen=True)
class VMPart:
    """A pytest run of one kernel's VM tier: the whole of it, or a part.
    Its tests count in the kernel's plan group as any other."""
    kernel: str
    name: str                   # "" for the whole tier
    marks: str
    paths: tuple[str, ...] = ("tests/vm",)
    ignore: tuple[str, ...] = ()

    @property
    def label(self) -> str:
        return vm_group(self.kernel).label + (f" ({self.name})" if self.name else "")


def vm_parts(run: list[str], kernels: list[str]) -> list[VMPart]:
    """The VM tiers of @run, some of the test kernels @kernels (in the
    plan's order: the first is kernels[0], whatever --kernel chose), as
    parts the two lanes take in this order: the other kernels' tiers
    whole (about 17-19 min each here), then the first kernel's: the tests
    every kernel runs (about 18 min), and its own first-kernel tests in
    parts, the longest first (the first file of FIRST_KERNEL_APART, the
    files not in it, the others in it), so that the last, the shortest,
    fill the lane that frees first.  Each part boots its own VM (20-60
    s)."""
    first = kernels[0] if kernels else None
    whole = [VMPart(k, "", vm_marks(k, kernels)) for k in run if k != first]
    if first not in run:
        return whole
    apart = [VMPart(first, "first kernel's: " + Path(f).name, FIRST_KERNEL_ONLY, (f,))
             for f in FIRST_KERNEL_APART]
    return whole + [
        VMPart(first, "every kernel's", EVERY_KERNEL), apart[0],
        VMPart(first, "first kernel's: the others", FIRST_KERNEL_ONLY,
               ignore=FIRST_KERNEL_APART),
        *apart[1:]]


def vm_build(t: Tally, k: str) -> bool:
    """The project's modules and the LTTng probes for kernel @k (False
    if the modules did not build; the LTTng test fails on its own without
    the probes)."""
    r = sh(["make", "-C", str(ROOT), f"KVER={k}", "modules"])
    if r.returncode != 0:
        t.add(f"vm[{k}]: build modules", False, (r.stdout + r.stderr)[-4000:])
        return False
    r = sh(["make", "-C", str(ROOT), f"KVER={k}", "lttng-probes"])
    if r.returncode != 0:
        t.add(f"vm[{k}]: build LTTng modules and probes", False,
              (r.stdout + r.stderr)[-4000:])
    return True


def vm_part(t: Tally, part: VMPart, kexpr: str | None, skips: list[AllowedSkip]) -> None:
    """Run one part of a kernel's VM tier (its modules built: VMLanes)."""
    extra = [f"--kernel={part.kernel}", "-m", part.marks,
             *(f"--ignore={p}" for p in part.ignore)]
    if kexpr:
        extra += [f"-k={kexpr}"]
    pytest_run(t, vm_group(part.kernel), list(part.paths), extra, skips, label=part.label,
               empty_ok=bool(kexpr))


DEBUGKERNEL = str(ROOT / "scripts" / "debugkernel")
DEBUG_MARKS = "(debug_kernel or debug_tier) and not timing and not lttng"


def build_debug_kernel(t: Tally, times: dict[str, float]) -> bool:
    """Build the debug kernel if it is missing, with every CPU (nothing else
    runs yet: main()).  False if the build failed."""
    if sh([DEBUGKERNEL, "path"]).returncode == 0:
        return True
    t.say("== debug: building the debug kernel (scripts/debugkernel; once per machine)")
    t0 = time.monotonic()
    r = sh([DEBUGKERNEL, "ensure"])
    if r.returncode != 0:
        t.add("debug: build the debug kernel", False, r.stderr[-4000:])
        return False
    t.say(r.stderr.strip())
    times["debug kernel build"] = time.monotonic() - t0
    return True


def debug_tier(t: Tally, kexpr: str | None, times: dict[str, float],
               skips: list[AllowedSkip]) -> None:
    """The debug tier.  Its VM runs at the same priority as the VM tiers'
    beside it: at nice 19 it starved whenever theirs needed more than one
    core."""
    if not build_debug_kernel(t, times):
        return
    t1 = time.monotonic()
    k = sh([DEBUGKERNEL, "release"]).stdout.strip()
    r = sh(["make", "-C", str(ROOT), f"KVER={k}", "modules"])
    if r.returncode != 0:
        t.add(f"debug[{k}]: build modules", False, (r.stdout + r.stderr)[-4000:])
        return
    extra = [f"--kernel={k}", "-m", DEBUG_MARKS]
    if kexpr:
        extra += [f"-k={kexpr}"]
    pytest_run(t, debug_group(k), DEBUG_SUITES, extra, skips)
    times[f"debug[{k}]"] = time.monotonic() - t1


@dataclass
class VMLanes:
    """The VM tiers run beside the other tiers (main()): a thread takes the
    parts of the tiers (vm_parts()) one by one, and the main lane takes
    those left once its own tiers are done.  A kernel's modules are built
    once, by the first lane to take one of its parts.  Each part's lines
    are held back in its own Tally, merged in kernel order at the end."""
    kernels: list[str]          # those to run
    plan_kernels: list[str]     # the test kernels, in the plan's order
    kexpr: str | None
    skips: list[AllowedSkip]
    todo: list[VMPart] = field(default_factory=list)
    tallies: dict[VMPart, Tally] = field(default_factory=dict)
    times: dict[str, float] = field(default_factory=dict)
    built: dict[str, bool] = field(default_factory=dict)
    building: dict[str, threading.Lock] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)
    thread: threading.Thread | None = None

    def __post_init__(self) -> None:
        self.todo = vm_parts(self.kernels, self.plan_kernels)
        self.building = {k: threading.Lock() for k in self.kernels}

    def work(self, lane: str) -> None:
        """Run parts of the VM tiers until none is left to start."""
        while True:
            with self.lock:
                if not self.todo:
                    return
                part = self.todo.pop(0)
                t = self.tallies[part] = Tally(held=[])
            t0 = time.monotonic()
            try:
                with self.building[part.kernel]:
                    if part.kernel not in self.built:
                        self.built[part.kernel] = vm_build(t, part.kernel)
                if self.built[part.kernel]:
                    vm_part(t, part, self.kexpr, self.skips)
            except Exception:  # whatever it is, a failure in the summary
                t.add(f"{part.label}: tests/run's VM tier ({lane} lane)", False,
                      traceback.format_exc())
            self.times[part.label] = time.monotonic() - t0

    def start(self) -> None:
        self.thread = threading.Thread(target=self.work, args=("VM",), name="vm-tiers")
        self.thread.start()

    def finish(self, t: Tally, times: dict[str, float]) -> None:
        """Take parts left over in this lane, wait for the thread, and
        report every part into @t, in kernel order."""
        self.work("main")
        assert self.thread is not None
        self.thread.join()
        for part in sorted(self.tallies, key=lambda p: self.kernels.index(p.kernel)):
            t.merge(self.tallies[part])
            times[part.label] = self.times[part.label]


def debug_release() -> str:
    """The debug kernel's release, or a stand-in with its local version
    when it is not built (collection only reads that suffix)."""
    r = sh([DEBUGKERNEL, "release"])
    return r.stdout.strip() if r.returncode == 0 else f"plan{DEBUG_LOCALVERSION}"


def collect_plan(tiers: list[str], kernels: list[str]) -> dict[str, list[str]]:
    """What each group of @tiers would run: the plan tests/run --write-plan
    writes."""
    plan: dict[str, list[str]] = {}
    if "static" in tiers:
        plan["static"] = static_ids(kernels)
    if "unit" in tiers:
        plan["unit"] = [i for src in unit_c_tests() for i in unit_c_ids(src)] \
            + pytest_collect(unit_pytest_paths(), [])
    if "vm" in tiers:
        for k in kernels:
            plan[vm_group(k).key] = pytest_collect(
                ["tests/vm"], [f"--kernel={k}", "-m", vm_marks(k, kernels)])
    if "debug" in tiers:
        plan["debug"] = pytest_collect(DEBUG_SUITES, [f"--kernel={debug_release()}",
                                                      "-m", DEBUG_MARKS])
    return plan


def planned_groups(tiers: list[str], kernels: list[str]) -> list[Group]:
    groups = [g for tier, g in (("static", STATIC), ("unit", UNIT)) if tier in tiers]
    if "vm" in tiers:
        groups += [vm_group(k) for k in kernels]
    if "debug" in tiers:
        groups.append(debug_group(debug_release()))
    return groups


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tier", action="append", choices=TIERS)
    ap.add_argument("--kernel", action="append", help="default: every test kernel")
    ap.add_argument("-k", dest="kexpr", help="pytest -k expression for the VM tier")
    ap.add_argument("--write-plan", action="store_true",
                    help="write tests/plan.txt from what the tiers collect, and run nothing")
    a = ap.parse_args()
    tiers = a.tier or list(TIERS if a.write_plan else CHECK_TIERS)
    found, missing = test_kernels()
    kernels = a.kernel or found
    if a.write_plan:
        if a.tier or a.kernel or a.kexpr:
            ap.error("--write-plan writes the whole plan: no --tier, --kernel or -k")
        if missing:
            ap.error(f"a test kernel is missing ({missing}): run scripts/setup")
        PLAN.write_text(format_plan(collect_plan(tiers, kernels)))
        print(f"wrote {PLAN.relative_to(ROOT)}: " + ", ".join(
            f"{k} {len(v)}" for k, v in read_plan(PLAN.read_text()).items()))
        return 0
    plan = read_plan(PLAN.read_text())
    skips = read_skips(SKIPS.read_text()) if SKIPS.exists() else []
    t = Tally()
    times: dict[str, float] = {}
    t0 = time.monotonic()
    if os.environ.get("CHECK_STARTED") or os.environ.get("CHECK_BUDGET_MIN"):
        started = float(os.environ.get("CHECK_STARTED") or time.time())
        os.environ["VM_TEST_DEADLINE"] = str(started + BUDGET_MIN * 60)
    if not kernels or (missing and not a.kernel):
        t.add("setup: test kernels installed", False, (missing or "none") + ": run scripts/setup")
    beside = None
    if "vm" in tiers and kernels:
        # the kernels' private headers first: two lanes extracting the
        # same one at once would replace it under the other's build
        for k in kernels:
            sh([str(ROOT / "scripts" / "ksrc"), k])
        if "debug" in tiers:
            # a missing debug kernel first, with every CPU: beside the VM
            # tiers at one job it took 30 min, and the debug tier after it
            build_debug_kernel(t, times)
        print("== vm: beside the other tiers (which then take the kernels left); "
              "its report follows theirs", flush=True)
        beside = VMLanes(kernels, found or kernels, a.kexpr, skips)
        beside.start()
    if "static" in tiers and kernels:
        static_tier(t, kernels, skips)
        times["static"] = time.monotonic() - t0
    if "unit" in tiers:
        t1 = time.monotonic()
        unit_tier(t, skips)
        times["unit"] = time.monotonic() - t1
    if "debug" in tiers:
        debug_tier(t, a.kexpr, times, skips)
    if beside is not None:
        beside.finish(t, times)
    counts = check_plan(t, plan, planned_groups(tiers, kernels), missing_too=not a.kexpr)
    mins = (time.monotonic() - t0) / 60
    if t.failures:
        print("\nFailed:\n  " + "\n  ".join(t.failures))
    parts = ", ".join(f"{name} {secs / 60:.1f}" for name, secs in times.items())
    print(f"\n(tests/run took {mins:.1f} min: {parts})")
    print("plan: " + ", ".join(counts) + ("" if not a.kexpr else
                                          " (-k: planned tests not run are not checked)"))
    if t.allowed:
        print(f"NOTE: {len(t.allowed)} skipped, as tests/skips.txt allows: "
              + "; ".join(t.allowed))
    line = f"{t.passed} passed, {t.failed} failed"
    if t.skipped:
        line += f", {t.skipped} skipped"
    print(line)
    return 1 if t.failed or not (t.passed + t.failed) else 0


if __name__ == "__main__":
    sys.exit(main())
