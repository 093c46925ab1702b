"""The example udev rule (packaging/examples/60-ssd-iosched.rules), run by
udev's own daemon in the guest the way a Debian boot runs it at coldplug:
systemd-udevd, then `udevadm trigger --action=add`, then `udevadm settle`.

The bed's init starts no udev; these tests start it with the rule in
/etc/udev/rules.d and stop it after.  The kernel loads an elevator's module
when its name is written to queue/scheduler by running /sbin/modprobe,
which the bed does not have (busybox's is in /bin): the tests link kmod's
there, as on Debian.  Not busybox's: udev handles the two namespaces in
parallel, both writes run modprobe, and busybox's modprobe returns as soon
as /proc/modules lists the module, still "Loading", before its init has
registered the elevator; that write then fails (1 run in 6 left nvme1n1
at none).  kmod's waits for the module to be live.  No test here loads a
module or selects a scheduler itself.
"""
from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import Guest

# user space: udev and the rule (tests/run: the first test kernel only)
pytestmark = pytest.mark.userspace

RULE = Path(__file__).resolve().parents[2] / "packaging" / "examples" / "60-ssd-iosched.rules"
RULES_D = "/etc/udev/rules.d"
# what the example rule sets: scheduler, then (tunable, value) in order
SCHED = "k2"
TUNABLES = [("max_inflight", "4")]


@pytest.fixture
def udev(guest: Guest) -> Iterator[Guest]:
    g = guest
    g.unload_modules()
    assert g.run("grep -q '^k2_iosched ' /proc/modules").rc != 0, \
        "k2-iosched is still loaded from an earlier test"
    for dev in (g.fast, g.throttled):
        g.select(dev, "none")
    g.sh(f"""
mkdir -p {RULES_D} /run/udev
cat > {RULES_D}/{RULE.name} <<'EOF'
{RULE.read_text()}EOF
ln -sf /bin/kmod /sbin/modprobe
/lib/systemd/systemd-udevd --daemon --resolve-names=never
udevadm control --ping
""")
    yield g
    if g.dead:
        return
    g.sh(f"""
udevadm control --exit
rm -f {RULES_D}/{RULE.name} /sbin/modprobe
for d in {g.fast} {g.throttled}; do echo none > /sys/block/$d/queue/scheduler; done
""")
    g.unload_modules()


def coldplug(g: Guest) -> None:
    """What a boot does once udevd runs: every block device's add event
    again, and wait until udev has handled them."""
    g.sh("udevadm trigger --action=add --subsystem-match=block && udevadm settle --timeout=120",
         timeout=180)


def test_rule_selects_k2_and_sets_tunables(udev: Guest) -> None:
    g = udev
    coldplug(g)
    # the scheduler write loaded the module
    assert g.run("grep -q '^k2_iosched ' /proc/modules").rc == 0
    for dev in (g.fast, g.throttled):
        assert g.scheduler(dev) == SCHED, dev
        for name, value in TUNABLES:
            assert g.attr(dev, name) == value, (dev, name)
    # a disk that is not NVMe keeps its scheduler
    g.sh("modprobe null_blk nr_devices=1 queue_mode=2 && udevadm settle --timeout=60")
    try:
        assert g.scheduler("nullb0") != SCHED
    finally:
        g.sh("rmmod null_blk")


def test_missing_module_leaves_scheduler_and_udev_goes_on(udev: Guest) -> None:
    """The module not installed: the scheduler write fails, udev logs it,
    handles the event to its end, and the device keeps its scheduler; the
    tunables (another scheduler's files) are not touched."""
    g = udev
    ko = f"/lib/modules/{g.kernel}/extra/k2-iosched.ko"
    g.sh(f"mv {ko} /tmp/k2-iosched.ko")
    try:
        coldplug(g)
        for dev in (g.fast, g.throttled):
            assert g.scheduler(dev) == "none", dev
            assert g.run(f"[ -e /sys/block/{dev}/queue/iosched/max_inflight ]").rc != 0
        assert g.run("grep -q '^k2_iosched ' /proc/modules").rc != 0
        g.sh("udevadm control --ping")     # the daemon is alive
        # what udev says of it
        out = g.run(f"udevadm test --action=add /sys/block/{g.fast} 2>&1").out
        assert re.search(r"ATTR '\S+/queue/scheduler' writing 'k2'\n.*Failed to write "
                         r"ATTR\{\S+/queue/scheduler\}, ignoring: Invalid argument", out), out[-3000:]
        assert "max_inflight" not in out
    finally:
        g.sh(f"mv /tmp/k2-iosched.ko {ko}")
    # installed again, the next event selects it
    coldplug(g)
    assert g.scheduler(g.fast) == SCHED


def test_udevadm_test_writes_scheduler_then_tunables(udev: Guest) -> None:
    """`udevadm test` on one namespace, as a user checks a rule: it shows
    the scheduler write before the tunable writes, in the rule's order."""
    g = udev
    out = g.sh(f"udevadm test --action=add /sys/block/{g.fast} 2>&1")
    writes = re.findall(r"ATTR '(/sys/\S+)' writing '([^']*)'", out)
    want = [("queue/scheduler", SCHED)] + [(f"queue/iosched/{n}", v) for n, v in TUNABLES]
    got = [(path.split(f"/{g.fast}/", 1)[-1], v) for path, v in writes]
    assert got == want, out[-4000:]
    assert g.scheduler(g.fast) == SCHED
    print("\n".join(ln for ln in out.splitlines() if "ATTR" in ln or "60-ssd-iosched" in ln))
