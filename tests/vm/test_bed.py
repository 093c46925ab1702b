"""The VM test bed itself (scripts/vmbed.py), where it needs a real guest."""
from __future__ import annotations

import re
import time

import pytest

from conftest import own_guest
from scripts import vmbed
from scripts.vmbed import VMError


@pytest.mark.userspace
def test_a_guest_that_stops_answering_is_reported_with_its_cpus(
        request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """A guest whose agent no longer takes commands: the VMError names each
    vCPU's instruction pointer (QEMU's monitor), and the console holds the
    guest kernel's answers to SysRq l and w, pressed on its keyboard
    (VM.stuck_report()).  Twice in one CI run the debug kernel's agent
    stopped answering with nothing on the console to say why.  Here the
    agent's port maps newline to carriage return (stty inlcr), so that its
    read never ends a line, in a VM of the test's own."""
    with own_guest(request.config) as g:
        # after this command's result and the host's GOT
        g.sh("(sleep 1; stty -F /dev/ttyS1 inlcr) >/dev/null 2>&1 &")
        time.sleep(3)
        monkeypatch.setattr(vmbed, "ACK_SECONDS", 10.0)
        with pytest.raises(VMError, match="take the command") as e:
            g.sh("true", timeout=30)
        msg = str(e.value)
        assert "take the command" in msg, msg
        assert re.search(r"vCPU 0: RIP [0-9a-f]{16}, CPL 0, HLT [01]; "
                         r"vCPU 1: RIP [0-9a-f]{16}, CPL 0, HLT [01] \(SysRq", msg), msg
        console = g.vm.console_text()
        for said in ("sysrq: Show backtrace of all active CPUs", "sysrq: Show Blocked State"):
            assert said in console, console[-3000:]
