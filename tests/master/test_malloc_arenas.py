"""The master limits glibc malloc's arenas (master/serve/malloc_arenas.py): with the limit set, sixteen
threads that allocate share at most ARENAS arenas; without it glibc makes one per thread (up to
eight per CPU). Arenas are counted in malloc_info's report, in a process of its own each time.
Memory freed between blocks that stay goes back to the OS through the master's trimmer."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from dumpfilter.master.serve.malloc_arenas import ARENAS

COUNT = """
import ctypes, sys, threading
from dumpfilter.master.serve.malloc_arenas import limit_arenas
if sys.argv[1] == "limit" and not limit_arenas():
    sys.exit("not set")
go = threading.Barrier(17)
def work():
    keep = [bytearray(1000) for _ in range(100)]  # small: from the thread's arena, not mmap
    go.wait()
    go.wait()
threads = [threading.Thread(target=work) for _ in range(16)]
for t in threads:
    t.start()
go.wait()
libc = ctypes.CDLL(None)
libc.fopen.restype = ctypes.c_void_p
fp = ctypes.c_void_p(libc.fopen(sys.argv[2].encode(), b"w"))
libc.malloc_info(0, fp)
libc.fclose(fp)
go.wait()
print(open(sys.argv[2]).read().count("<heap nr="))
"""


def _arenas(mode: str, report) -> int:
    env = {k: v for k, v in os.environ.items() if k != "MALLOC_ARENA_MAX"}
    done = subprocess.run([sys.executable, "-c", COUNT, mode, str(report)], capture_output=True, text=True,
                          env=env, timeout=120)
    assert done.returncode == 0, done.stderr[-800:]
    return int(done.stdout.split()[-1])


@pytest.mark.skipif(not sys.platform.startswith("linux") or os.confstr("CS_GNU_LIBC_VERSION") is None,
                    reason="glibc's arenas")
def test_sixteen_allocating_threads_share_at_most_arenas_arenas(tmp_path):
    assert _arenas("default", tmp_path / "default.xml") > ARENAS  # glibc's own: one per thread
    assert _arenas("limit", tmp_path / "limit.xml") <= ARENAS


HOLES = """
import sys, threading
from dumpfilter.master.serve.malloc_arenas import limit_arenas, steady_thresholds, trim_freed
limit_arenas(), steady_thresholds()  # as `master serve` sets them
def anon_mb():
    return int(next(l for l in open("/proc/self/status") if l.startswith("RssAnon:")).split()[1]) // 1024
# The free chunks the imports left are used up first: glibc serves a small block from them while any
# is left, which put every small block below the big ones and let free() shrink the heap whole.
ballast = [bytearray(600) for _ in range(32_000)]
before = anon_mb()
big, small = [], []
for _ in range(400):  # 120 MB of reply-sized buffers, each below a block that stays
    big.append(bytearray(300_000))
    small.append(bytearray(600))
del big
print(before, anon_mb(), flush=True)  # the holes, still resident
if sys.argv[1] != "off":
    trim_freed(0.05, above=1 << 40 if sys.argv[1] == "above" else 0)
for _ in range(int(sys.argv[2])):  # (up to 10 s under load: never a time asserted)
    threading.Event().wait(0.05)
    if anon_mb() - before < 30:
        break
print(anon_mb())
"""


def _holes(mode: str, waits: int) -> tuple[int, int, int]:
    done = subprocess.run([sys.executable, "-c", HOLES, mode, str(waits)], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-800:]
    before, freed, after = map(int, done.stdout.split())
    return before, freed, after


@pytest.mark.skipif(not sys.platform.startswith("linux") or os.confstr("CS_GNU_LIBC_VERSION") is None,
                    reason="glibc's malloc_trim")
def test_memory_freed_between_live_blocks_goes_back_to_the_os():
    """Buffers freed below blocks that stay (as many streams' replies between unit lists) leave
    holes glibc keeps resident; the master's trimmer (`trim_freed`) hands their pages back."""
    before, freed, after = _holes("off", 10)
    assert freed - before >= 100 and after - before >= 100  # the holes stay without it
    before, freed, after = _holes("trim", 200)
    assert freed - before >= 100 and after - before < 30


@pytest.mark.skipif(not sys.platform.startswith("linux") or os.confstr("CS_GNU_LIBC_VERSION") is None,
                    reason="glibc's malloc_trim")
def test_memory_freed_is_kept_while_the_process_holds_less_than_its_caches_may():
    """Under `above` (the caches' budget) the trimmer leaves freed pages where they are: handed
    back, each would be faulted in and zeroed again when reused."""
    before, freed, after = _holes("above", 10)
    assert freed - before >= 100 and after - before >= 100
