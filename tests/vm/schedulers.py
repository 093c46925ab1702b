"""The project's schedulers that the generic VM suite runs over.

Adding a scheduler to the generic suite is one entry here."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Sched:
    name: str     # elevator name, as written to queue/scheduler
    module: str   # module name for modprobe/rmmod
    # Run in the debug tier too (lockdep, KASAN, fault injection).  Not the
    # do-nothing reference elevator: the tier is for the project's modules,
    # and fifo-ref's generic and fault runs took a quarter of its time.
    debug_tier: bool = True


SCHEDULERS = [
    Sched("fifo-ref", "fifo-iosched", debug_tier=False),
    Sched("k2", "k2-iosched"),
    Sched("flashfq", "flashfq-iosched"),
    Sched("cars", "cars-iosched"),
]

# What the switching storm rotates through besides ours.
UPSTREAM = ["none", "mq-deadline", "kyber", "bfq"]
