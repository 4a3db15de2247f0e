"""A thread that overflows its stack during the tests is reported: faulthandler prints "Fatal Python
error: Segmentation fault" and the thread's Python stack (tests/support/thread_altstack.py, installed
by tests/conftest.py). Without it the process died with no word: a CI run ended on a bare
"Segmentation fault" after 2,049 tests, which says only that a thread other than the main one ran out
of stack (a fault on any thread, the core's scan thread included, is otherwise reported).

The overflow is made in a child process, in a thread of a small stack, by C recursion the
interpreter does not bound (next() through a chain of map objects)."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

_CHILD = """
import sys, threading
sys.path.insert(0, {root!r})
import tests.conftest  # what a pytest session of this suite imports first

def deep_in_c():
    it = iter([1])
    for _ in range(200_000):
        it = map(abs, it)
    next(it)

threading.stack_size(256 << 10)
thread = threading.Thread(target=deep_in_c, name="overflowing")
thread.start()
thread.join()
print("no overflow")
"""


def test_a_thread_that_overflows_its_stack_is_reported():
    run = subprocess.run([sys.executable, "-X", "faulthandler", "-c", textwrap.dedent(_CHILD.format(root=str(ROOT)))],
                         capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert "no overflow" not in run.stdout, "this interpreter bounds the recursion: nothing to report"
    assert run.returncode == -signal.SIGSEGV, (run.returncode, run.stderr[-2000:])
    assert "Fatal Python error: Segmentation fault" in run.stderr, run.stderr[-2000:]
    assert 'in deep_in_c' in run.stderr.split("Thread 0x")[0], run.stderr[-2000:]  # the current thread's stack
