"""Shared settings of the fuzz harness: a fixed budget per target (FUZZ_EXAMPLES, default small
enough for CI), a time bound per input, and the one rule every target checks: nothing but the
project's own error types may escape."""

from __future__ import annotations

import os
import time
from contextlib import contextmanager

from hypothesis import HealthCheck, settings

from dumpfilter.errors import DumpFilterError

# Inputs per target: 10 000 under CI=true (derandomized, see tests/conftest.py), 1 000 elsewhere
# (about a minute); FUZZ_EXAMPLES sets it. The cheap decoder target takes at least 5 000.
# Measured: 10 000 per target, the decoders at 50 000, took 643 CPU seconds; with the decoders at
# 10 000, about 500 (the decoder target's share was 419 of 1 407 wall seconds).
IN_CI = os.environ.get("CI", "").strip().lower() in ("true", "1", "yes")
EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "10000" if IN_CI else "1000"))
# One input may take at most this long (a backtracking regex took 33 s on one table name).
TIME_BOUND = float(os.environ.get("FUZZ_TIME_BOUND", "2.0"))

# pytest-timeout for a whole target, scaled with the budget (the 300 s default fits CI's).
TARGET_TIMEOUT = max(300, int(EXAMPLES * 0.25))
_CHECKS = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture]
FUZZ = settings(max_examples=EXAMPLES, deadline=None, print_blob=True, suppress_health_check=_CHECKS)
FUZZ_CHEAP = settings(max_examples=max(EXAMPLES, 5000), deadline=None, print_blob=True, suppress_health_check=_CHECKS)


@contextmanager
def only_project_errors(what: str = ""):
    """Run one input: a DumpFilterError is a clean refusal; any other exception, or more than
    TIME_BOUND seconds, fails the target."""
    started = time.perf_counter()
    try:
        yield
    except DumpFilterError:
        pass
    elapsed = time.perf_counter() - started
    assert elapsed < TIME_BOUND, f"{what}: one input took {elapsed:.2f}s (bound {TIME_BOUND}s)"
