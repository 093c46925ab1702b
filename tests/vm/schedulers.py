"""The project's schedulers that the generic VM suite runs over: every
elevator the project builds (bench/modules.py, from Kbuild), with the
out-of-range values of its tunables that the bad-input test writes."""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from bench import modules

ROOT = Path(__file__).resolve().parents[2]


def limit(header: str, name: str) -> int:
    """The value of @name, a #define of an unsigned constant in @header (a
    path from the project's root): a tunable's limit, as its module has it."""
    m = re.search(rf"^#define\s+{name}\s+(\d+)U?\b", (ROOT / header).read_text(), re.M)
    assert m, f"{name} is not defined in {header}"
    return int(m.group(1))


@dataclass(frozen=True)
class Sched:
    name: str     # elevator name, as written to queue/scheduler
    module: str   # module name for modprobe/rmmod
    # A test fixture, not a module the project ships (the do-nothing
    # reference elevator of the overhead suite): not in the debug tier,
    # which is for the project's modules, and the generic suite's I/O tests
    # (io_params()) on the first test kernel only; loading, selecting and
    # unloading it are tested on every kernel.
    fixture: bool = False
    # Whether it has tunables (queue/iosched/): the generic suite's bad-input
    # test runs for those that do.
    tunables: bool = True
    # Values of the right type that a tunable refuses (EINVAL, its value
    # kept): outside its range.  "nr+1" is the device's nr_requests + 1.
    out_of_range: tuple[tuple[str, str], ...] = field(default=())


K2_H = "k2/k2-core.h"
FFQ_H = "flashfq/flashfq-core.h"
CARS_H = "cars-host/cars-core.h"

# Values of the right type each scheduler's tunables refuse (Sched.out_of_range)
OUT_OF_RANGE: dict[str, tuple[tuple[str, str], ...]] = {
    "k2": (
        ("max_inflight", "0"), ("max_inflight", "nr+1"),
        ("target_latency_us", str(limit(K2_H, "K2_MAX_TARGET_US") + 1)),
        ("starvation_ms", str(limit(K2_H, "K2_MAX_STARVATION_MS") + 1)),
        ("rt_tags", "nr+1")),
    "flashfq": (
        ("depth", "0"), ("depth", "nr+1"),
        ("cost_read_128k_ns", str(limit(FFQ_H, "FFQ_MAX_COST_NS") + 1)),
        ("cost_write_128k_ns", str(limit(FFQ_H, "FFQ_MAX_COST_NS") + 1)),
        ("throttle_us", str(limit(FFQ_H, "FFQ_MAX_TIME_US") + 1)),
        ("anticipation_us", str(limit(FFQ_H, "FFQ_MAX_TIME_US") + 1)),
        ("ioprio_weights", "2")),
    "cars": (
        ("nr_dies", "0"), ("nr_dies", str(limit(CARS_H, "CARS_MAX_DIES") + 1)),
        ("page_kb", "0"), ("page_kb", "12"),
        ("page_kb", str(limit(CARS_H, "CARS_MAX_PAGE_KB") * 2)),
        ("read_us", "0"), ("write_us", str(limit(CARS_H, "CARS_MAX_OP_US") + 1)),
        ("depth", "0"), ("depth", "nr+1"), ("lookahead", "0"),
        ("max_hold_us", str(limit(CARS_H, "CARS_MAX_HOLD_US") + 1)),
        ("filter", "2"), ("write_pointer", "255")),
}

# The project's elevators, from Kbuild (bench/modules.py): a test fixture's
# folder is under tests/.
SCHEDULERS = [Sched(m.elevator, m.name, fixture=not m.shipped, tunables=m.tunables,
                    out_of_range=OUT_OF_RANGE.get(m.elevator, ()))
              for m in modules.modules() if m.elevator]



def io_params() -> list[object]:
    """SCHEDULERS as the parameters of the generic suite's I/O tests: a
    fixture's marked first_kernel (tests/run: the first test kernel only)."""
    return [pytest.param(s, marks=pytest.mark.first_kernel, id=s.name) if s.fixture
            else pytest.param(s, id=s.name) for s in SCHEDULERS]


# What the switching storm rotates through besides ours.
UPSTREAM = ["none", "mq-deadline", "kyber", "bfq"]
