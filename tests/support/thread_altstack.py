"""An alternate signal stack for every Python thread the tests start, so that a thread that runs
out of stack is reported by faulthandler (pytest enables it) instead of killing the run silently.

faulthandler gives only the thread that enables it (the main one) an alternate signal stack. A
fault on any other thread is still reported (the handler runs on that thread's own stack), except a
stack overflow: the kernel then has no stack to run the handler on and kills the process with no
word (a CI run ended so, "Segmentation fault" after 2,049 tests and no traceback). With a stack of
its own for signals, the handler prints "Fatal Python error: Segmentation fault" and every
thread's Python stack, the overflowing one's first. Native threads (gRPC's, the core's scan
threads) are not covered: no Python code starts them.

Installed by `install()` (tests/conftest.py, before any thread starts) through
`threading.setprofile`: each new thread's first profile event sets its stack, then turns the
profile function off for that thread. The stack is let go when the thread ends (on that thread,
as its thread state is cleared), never while it may still be in use."""

from __future__ import annotations

import ctypes
import sys
import threading
from typing import Any

STACK_BYTES = 64 << 10  # faulthandler's dump needs a few KB; the kernel's signal frame up to ~12 KB (AMX)
_SS_DISABLE = 2


class _StackT(ctypes.Structure):  # stack_t, sigaltstack(2)
    _fields_ = [("ss_sp", ctypes.c_void_p), ("ss_flags", ctypes.c_int), ("ss_size", ctypes.c_size_t)]


_libc: Any = None
_local = threading.local()  # never deleted: each thread's stack goes with that thread's own entry
_orphans: list[ctypes.Array[ctypes.c_char]] = []  # stacks whose thread could not take them back


class _AltStack:
    """This thread's alternate signal stack, registered while the object lives."""

    def __init__(self) -> None:
        self.owner = threading.get_ident()
        self.buf = ctypes.create_string_buffer(STACK_BYTES)
        self.on = _libc.sigaltstack(ctypes.byref(_StackT(ctypes.addressof(self.buf), 0, STACK_BYTES)), None) == 0

    def __del__(self, _ident: Any = threading.get_ident, _orphans: list[Any] = _orphans) -> None:
        # (names bound at definition: at interpreter exit a daemon thread's state is cleared by the
        # main thread, module globals possibly gone already)
        if not self.on:
            return
        try:
            current = _StackT()
            if _ident() != self.owner or _libc.sigaltstack(None, ctypes.byref(current)) != 0 \
                    or current.ss_sp != ctypes.addressof(self.buf):
                _orphans.append(self.buf)  # not this thread's to let go: kept, never freed under it
                return
            _libc.sigaltstack(ctypes.byref(_StackT(None, _SS_DISABLE, 0)), None)
        except Exception:  # noqa: BLE001 - at interpreter exit: the process is ending anyway
            _orphans.append(self.buf)


def _first_event(frame: Any, event: str, arg: Any) -> None:
    sys.setprofile(None)  # once per thread
    if getattr(_local, "stack", None) is None:
        _local.stack = _AltStack()


def install() -> bool:
    """Every thread started from now on gets its own signal stack; False where there is no
    sigaltstack (not Linux)."""
    global _libc
    if not sys.platform.startswith("linux"):
        return False
    try:
        _libc = ctypes.CDLL(None, use_errno=True)
        _libc.sigaltstack
    except (OSError, AttributeError):
        return False
    threading.setprofile(_first_event)
    return True
