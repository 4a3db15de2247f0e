"""`cli.process.tune_allocator`, which `slave run` calls first: on glibc, a received stream's
large buffers then come from the heap, reused, instead of a fresh mapping each (whose pages the
kernel faults in and zeroes every time)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# In a fresh interpreter: 2 MiB blocks (above glibc's default 128 KiB threshold, below the tuned
# one), each kept alive, and glibc's count of blocks it mapped on their own (mallinfo2's hblks).
PROBE = """
import ctypes, sys
from dumpfilter.cli.process import tune_allocator

class Info(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in
                ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks",
                 "keepcost")]

mallinfo2 = ctypes.CDLL(None).mallinfo2
mallinfo2.restype = Info
tuned = len(sys.argv) > 1 and tune_allocator()
before = mallinfo2().hblks
kept = [bytes(2 << 20) for _ in range(16)]
print(tuned, mallinfo2().hblks - before)
"""


def _probe(*args: str, env: dict[str, str] | None = None) -> tuple[bool, int]:
    out = subprocess.run([sys.executable, "-c", PROBE, *args], cwd=ROOT, capture_output=True, text=True, timeout=60,
                         check=True, env=None if env is None else {**os.environ, **env}).stdout.split()
    return out[0] == "True", int(out[1])


def test_large_blocks_come_from_the_heap_once_tuned():
    tuned, new_mappings = _probe("tune")
    assert tuned  # Linux with glibc, as CI runs
    assert new_mappings == 0  # all from the heap
    untuned, plain_mappings = _probe()
    assert not untuned and plain_mappings >= 16  # glibc's default: one mapping per block


def test_the_environment_wins():
    """MALLOC_MMAP_THRESHOLD_ given: glibc's, as `master serve`'s thresholds leave it (one mallopt for both)."""
    tuned, new_mappings = _probe("tune", env={"MALLOC_MMAP_THRESHOLD_": "131072"})
    assert not tuned and new_mappings >= 16


def test_slave_run_tunes_its_process():
    from dumpfilter.cli.commands import slave

    assert slave.tune_allocator.__module__ == "dumpfilter.cli.process"
    assert "tune_allocator" in slave.run_command.__code__.co_names
