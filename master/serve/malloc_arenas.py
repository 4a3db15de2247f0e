"""glibc malloc's arenas in the long-running master: at most ARENAS of them (M_ARENA_MAX), fixed
mmap and trim thresholds (`steady_thresholds`), and the freed pages inside them handed back to
the OS every TRIM_EVERY seconds (`trim_freed`).

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
import threading
from collections.abc import Callable

from dumpfilter.master.read.segments import CACHE_BYTES, INDEX_BYTES

ARENAS = 2
_M_ARENA_MAX = -8  # malloc.h
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
MMAP_THRESHOLD, TRIM_THRESHOLD = 4 << 20, 8 << 20
TRIM_EVERY = 1.0  # seconds, see trim_freed
# Trimmed only above what the master's caches may hold (its unit indexes' and segments' budgets):
# a page handed back is faulted in, zeroed, again when reused. bench matrix, DDL-heavy, 8 do-db
# slaves: trimming every second at a RssAnon of about 210 MB spent 7% of the master's CPU in the
# kernel's page zeroing (clear_page), against 1% for one keep-all slave, and left the peak as it was.
TRIM_ABOVE = INDEX_BYTES + CACHE_BYTES


def _mallopt() -> Callable[[int, int], int] | None:
    """glibc's mallopt, or None (musl, macOS)."""
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return None
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    return mallopt


def limit_arenas(arenas: int = ARENAS) -> bool:
    """Sets glibc's M_ARENA_MAX (call it before the threads start: arenas already made stay).
    MALLOC_ARENA_MAX in the environment wins (glibc read it at start). False where it was not set:
    the environment's choice, or a C library without mallopt's M_ARENA_MAX (musl, macOS)."""
    if os.environ.get("MALLOC_ARENA_MAX"):
        return False
    mallopt = _mallopt()
    return mallopt is not None and mallopt(_M_ARENA_MAX, arenas) == 1


def steady_thresholds(mmap: int = MMAP_THRESHOLD, trim: int = TRIM_THRESHOLD) -> bool:
    """Fixed mmap (MMAP_THRESHOLD) and trim (TRIM_THRESHOLD) thresholds, for the master's steady
    flow of batch-sized buffers (issue #30). By default the mmap threshold follows the largest
    block freed and the trim threshold twice that: each stream's 1 MB batches are then taken from
    the OS and given back, a page fault per page each time (bench fanout_procs, eight slaves:
    three times one slave's faults), and what is kept between trims grows with the streams (64
    slaves: peak RSS 245 MB, 147-153 MB with these). MALLOC_MMAP_THRESHOLD_ in the environment
    wins. False where they were not set. (`slave run` sets larger ones: cli.process.tune_allocator.)"""
    if os.environ.get("MALLOC_MMAP_THRESHOLD_"):
        return False
    mallopt = _mallopt()
    return mallopt is not None and mallopt(_M_MMAP_THRESHOLD, mmap) == 1 and mallopt(_M_TRIM_THRESHOLD, trim) == 1


def trim_freed(every: float = TRIM_EVERY, above: int = TRIM_ABOVE) -> threading.Thread | None:
    """Hands the whole pages of the memory freed inside the arenas back to the OS every `every`
    seconds while the process's RssAnon is over `above` bytes (malloc_trim(0), on a daemon thread
    of its own), or None without glibc's malloc_trim.
    free() gives back only what lies at an arena's top: with many streams, each reply's buffers
    (wire bytes, pieces, grpc's copy: a few hundred KB, under MMAP_THRESHOLD) are freed between
    live blocks (unit lists, other streams' replies), and the holes stayed resident. bench
    fanout_procs, 64 do-db slaves on 2 CPUs: a peak RssAnon of 327-332 MB without, 266-279 MB
    with, at the same master CPU per MB sent (a pass costs about a millisecond; a page freed is
    faulted in again when reused)."""
    try:
        trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return None
    trim.argtypes, trim.restype = (ctypes.c_size_t,), ctypes.c_int
    pause = threading.Event()  # never set: only its wait, which does not hold the GIL
    page = os.sysconf("SC_PAGE_SIZE")

    def anon() -> int:
        """RssAnon in bytes: resident less RssFile and RssShmem (statm's `shared`)."""
        with open("/proc/self/statm", "rb") as statm:
            resident, shared = statm.read().split()[1:3]
        return (int(resident) - int(shared)) * page

    def run() -> None:
        while not pause.wait(every):
            if anon() > above:
                trim(0)

    thread = threading.Thread(target=run, name="malloc-trim", daemon=True)
    thread.start()
    return thread
