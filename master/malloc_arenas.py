"""glibc malloc's arenas in the long-running master: at most ARENAS of them (M_ARENA_MAX).

glibc gives each thread that allocates an arena of its own, up to
eight per CPU, and never hands an arena's freed pages back while a live chunk sits above them. The
master runs a thread per stream (gRPC's pool, the MySQL endpoint's connections) and the core's scan
threads, which allocate and free read buffers and batches all day: each arena keeps its own
high-water mark, and the master's RSS grew with the number of arenas, not with what it held.
bench soak (32 slaves, 74 threads, 2 CPUs, 4 minutes): a median RSS of 140-148 MB a minute with
glibc's default (16 arenas), 102-113 MB with two, while the Python heap (tracemalloc) held 20-41 MB;
a malloc_trim(0) every 5 s instead left it at 143-149 MB. Most of the master's allocation
runs under the GIL anyway: its CPU in those runs (79-102 s) followed the machine's load, not the
arenas."""

from __future__ import annotations

import ctypes
import os

ARENAS = 2
_M_ARENA_MAX = -8  # malloc.h


def limit_arenas(arenas: int = ARENAS) -> bool:
    """Sets glibc's M_ARENA_MAX (call it before the threads start: arenas already made stay).
    MALLOC_ARENA_MAX in the environment wins (glibc read it at start). False where it was not set:
    the environment's choice, or a C library without mallopt's M_ARENA_MAX (musl, macOS)."""
    if os.environ.get("MALLOC_ARENA_MAX"):
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    return mallopt(_M_ARENA_MAX, arenas) == 1

