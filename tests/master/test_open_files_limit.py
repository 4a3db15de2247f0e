"""`master serve` raises its soft limit on open files to the hard one, as mysqld raises its
open_files_limit."""

from __future__ import annotations

import pytest

from tests.support.master_command import serve_master, stop_master

pytestmark = pytest.mark.timeout(120)


def test_master_serve_raises_its_open_files_limit_to_the_hard_one(workload_dir):
    """Each mapped segment holds a descriptor (up to 768) besides each replica's socket: a soft
    limit of 1024 would refuse replicas long before the master's own bounds."""
    proc, _address = serve_master(workload_dir, prefix=("prlimit", "--nofile=1024:4096"))
    try:
        with open(f"/proc/{proc.pid}/limits") as f:
            line = next(line for line in f if line.startswith("Max open files"))
    finally:
        stderr = stop_master(proc)
    assert line.split()[3:5] == ["4096", "4096"], line
    assert "Traceback" not in stderr, stderr
