"""The lab's child processes die with the process that started them (dumpfilter.children), however it
ends: a parent killed outright left a simulation's lint process linting, orphaned."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from dumpfilter.binlogs import lint_worker

PARENT = """
import os, signal, subprocess, sys
from dumpfilter.children import dies_with_parent
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                         preexec_fn=dies_with_parent())
print(child.pid, flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""


def _gone(pid: int) -> bool:
    """The process is no more, or a zombie nobody has reaped yet (it has ended either way)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_a_child_dies_with_a_parent_killed_outright():
    parent = subprocess.run([sys.executable, "-c", PARENT], capture_output=True, text=True, timeout=60)
    assert parent.returncode == -9, parent.stderr
    child = int(parent.stdout.split()[0])
    deadline = time.monotonic() + 30
    while not _gone(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    gone = _gone(child)
    if not gone:
        os.kill(child, 9)
    assert gone, "the child outlived its parent"


def test_a_lint_child_whose_parent_is_gone_does_nothing():
    """The parent died between the fork and the child's prctl: the child ends before reading its job
    (its stdin here is the test's, which never sends one)."""
    assert lint_worker._serve(os.getppid() + os.getpid() + 1) is None
