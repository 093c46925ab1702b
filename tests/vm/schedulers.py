"""The project's schedulers that the generic VM suite runs over.

Adding a scheduler to the generic suite is one entry here."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Sched:
    name: str     # elevator name, as written to queue/scheduler
    module: str   # module name for modprobe/rmmod
    # At its defaults it may keep requests back while the device could take
    # them (a bound below test_generic's 32 outstanding, throttling or
    # anticipation): resets then meet conftest.SHADOW_DOORBELL_RESET_BUG.
    holds_requests: bool = False
    # Run in the debug tier too (lockdep, KASAN, fault injection).  Not the
    # do-nothing reference elevator: the tier is for the project's modules,
    # and fifo-ref's generic and fault runs took a quarter of its time.
    debug_tier: bool = True


SCHEDULERS = [
    Sched("fifo-ref", "fifo-iosched", debug_tier=False),
    Sched("k2", "k2-iosched"),
    Sched("flashfq", "flashfq-iosched", holds_requests=True),
    Sched("cars", "cars-iosched", holds_requests=True),
]

# What the switching storm rotates through besides ours.
UPSTREAM = ["none", "mq-deadline", "kyber", "bfq"]
