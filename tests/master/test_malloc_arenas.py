"""The master limits glibc malloc's arenas (master/serve/malloc_arenas.py): with the limit set, sixteen
threads that allocate share at most ARENAS arenas; without it glibc makes one per thread (up to
eight per CPU). Arenas are counted in malloc_info's report, in a process of its own each time."""

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
