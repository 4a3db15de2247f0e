"""What a child process is started with so that none outlives the process that started it: the
lab's MariaDB sandbox server, Spark standalone Master or Worker and simulation's lint process, and a
Spark session's JVM (spark_jobs.session). Each runs in a session of its own (a Ctrl-C on the
terminal reaches only its parent, which stops it in order), so a parent killed outright (SIGKILL, a
test's timeout) would otherwise leave it running, busy, for as long as its work takes."""

from __future__ import annotations

import contextlib
import ctypes
import functools
import signal
import sys
import threading
from collections.abc import Callable

_PR_SET_PDEATHSIG = 1


def _die_with_parent(sig: int = signal.SIGKILL) -> None:  # runs in the child between fork and exec
    # No prctl (not Linux): the child is stopped by its parent only.
    with contextlib.suppress(Exception):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, sig, 0, 0, 0)


def dies_with_parent(sig: int = signal.SIGKILL) -> Callable[[], None] | None:
    """Popen's preexec_fn: the child gets `sig` (SIGKILL unless told) when its parent dies (Linux's
    PR_SET_PDEATHSIG), or None where that cannot be asked safely. The signal comes when the
    *thread* that forked the child ends, not the process: asked only from the main thread. A
    JVM is given SIGTERM, which runs its shutdown hooks (Spark's remove its spark-* directories).
    The setting survives exec (spark-submit's scripts exec the JVM in the same process), not fork."""
    if not sys.platform.startswith("linux") or threading.current_thread() is not threading.main_thread():
        return None
    return _die_with_parent if sig == signal.SIGKILL else functools.partial(_die_with_parent, sig)
