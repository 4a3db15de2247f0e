"""Shared settings of the fuzz harness: a fixed budget per target (FUZZ_EXAMPLES, default small
enough for CI), a bound on each input's CPU time, and the one rule every target checks: nothing
but the project's own error types may escape."""

from __future__ import annotations

import os
import time
from contextlib import contextmanager, suppress

from hypothesis import HealthCheck, settings

from dumpfilter.errors import DumpFilterError

# Inputs per target: 1 000; FUZZ_EXAMPLES sets it (10 000 is the long run). The cheap decoder
# target takes at least 5 000. Under CI hypothesis is derandomized (tests/conftest.py): each run
# replays the same inputs, so a larger count in CI buys regression cover, not new finds; and the
# coverage-guided atheris targets (test_atheris.py) still take 10 000 inputs each over the same
# grounds (binlog files, every rule syntax, the Register message). Measured on a loaded 2-core CI
# machine: 10 000 per target took 475 of the suite's 1 531 s; 2 500, about 130, which CI ran until
# its whole run passed 25 minutes (the live MySQL connection target alone: about 100 s at 2 500).
IN_CI = os.environ.get("CI", "").strip().lower() in ("true", "1", "yes")
EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "1000"))
# One input may use at most this much CPU time of its thread (a backtracking regex took 33 s on
# one table name; a normal input takes milliseconds). CPU time, not wall-clock time: a loaded CI
# machine stretched one input to 2.82 s of wall-clock time, and failed a 2 s bound on that.
CPU_BOUND = float(os.environ.get("FUZZ_CPU_BOUND", "5.0"))

# pytest-timeout for a whole target, scaled with the budget (the 300 s default fits CI's).
TARGET_TIMEOUT = max(300, int(EXAMPLES * 0.25))
_CHECKS = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture]
FUZZ = settings(max_examples=EXAMPLES, deadline=None, print_blob=True, suppress_health_check=_CHECKS)
FUZZ_CHEAP = settings(max_examples=max(EXAMPLES, 5000), deadline=None, print_blob=True, suppress_health_check=_CHECKS)


@contextmanager
def only_project_errors(what: str = ""):
    """Run one input: a DumpFilterError is a clean refusal; any other exception, or more than
    CPU_BOUND seconds of this thread's CPU time, fails the target."""
    started = time.thread_time()
    with suppress(DumpFilterError):
        yield
    used = time.thread_time() - started
    assert used < CPU_BOUND, f"{what}: one input used {used:.2f} s of CPU (bound {CPU_BOUND} s)"
