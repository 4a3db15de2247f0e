"""What the lab's child processes are started with so that none outlives the process that started
it: a MariaDB sandbox server, a Spark standalone Master or Worker, a simulation's lint process.
Each runs in a session of its own (a Ctrl-C on the terminal reaches only its parent, which stops it
in order), so a parent killed outright (SIGKILL, a test's timeout) would otherwise leave it running,
busy, for as long as its work takes."""

from __future__ import annotations

import contextlib
import ctypes
import signal
import sys
import threading
from collections.abc import Callable

_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:  # runs in the child between fork and exec
    # No prctl (not Linux): the child is stopped by its parent only.
    with contextlib.suppress(Exception):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def dies_with_parent() -> Callable[[], None] | None:
    """Popen's preexec_fn: the child gets SIGKILL when its parent dies (Linux's PR_SET_PDEATHSIG),
    or None where that cannot be asked safely. The signal comes when the *thread* that forked the
    child ends, not the process: asked only from the main thread."""
    ok = sys.platform.startswith("linux") and threading.current_thread() is threading.main_thread()
    return _die_with_parent if ok else None
