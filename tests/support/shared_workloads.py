"""Generated binlogs that several test files read, made once per test run: every xdist worker of
the run finds the one another made (a lock file orders them), and none writes into it."""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
from pathlib import Path

import pytest

from dumpfilter.workload.generator import WorkloadSpec, generate

# The interrupt tests' input: 20 MB in 8 MB files, so that a split or an experiment still runs
# when the signal comes (tests/cli/test_sigterm.py, test_interrupts_and_outputs.py).
SPLIT_WORKLOAD = WorkloadSpec(seed=5, transactions=40_000, max_binlog_size=8_000_000)


def shared_workload(tmp_path_factory: pytest.TempPathFactory, spec: WorkloadSpec) -> Path:
    """The directory `generate(spec)` wrote, for reading only."""
    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent  # the run's pytest-N, above each worker's popen-gwN
    name = "workload-" + hashlib.sha256(repr(spec).encode()).hexdigest()[:16]
    directory = root / name
    with open(root / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not directory.is_dir():
            making = root / f"{name}.making"
            shutil.rmtree(making, ignore_errors=True)  # a run killed while it made it
            making.mkdir()
            generate(spec, making)
            making.rename(directory)
    return directory
