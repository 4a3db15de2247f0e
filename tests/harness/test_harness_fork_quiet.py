"""Starting a real replica from the harness prints nothing of gRPC's (issue #82): the sandbox
server is started with a preexec_fn (it dies with its parent: dumpfilter.children), which makes
subprocess fork() while the master's gRPC threads run, and gRPC's fork handlers logged
`fork_posix.cc:71 ... Other threads are currently calling into gRPC, skipping fork() handlers`
into the user's pytest output. dumpfilter turns gRPC's fork support off as it is imported (it
never uses gRPC across a fork), unless the process set GRPC_ENABLE_FORK_SUPPORT itself. A user's
own pytest run, in a process of its own without this checkout's conftest, its output not captured
(-s): nothing of gRPC's in it."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

pytestmark = [pytest.mark.mariadb, pytest.mark.timeout(300)]

USER_TEST = """
def test_a_real_replica(dumpfilter_binlog, dumpfilter_master, dumpfilter_replica):
    binlog = dumpfilter_binlog(transactions=200)
    master = dumpfilter_master(binlog, mysql_listen="127.0.0.1:0")
    replica = dumpfilter_replica(master, ["replicate-do-db=db1"])
    replica.wait_caught_up()
    assert replica.tables()
"""


def test_a_replica_started_from_the_harness_prints_nothing_of_grpc(tmp_path):
    (tmp_path / "test_user.py").write_text(USER_TEST)
    env = {k: v for k, v in os.environ.items() if not k.startswith("GRPC_")}  # as a user's shell has it
    env["PATH"] = "/usr/sbin:" + env.get("PATH", "")
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider",
                          "--basetemp", str(tmp_path / "base"), "test_user.py"],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=280,
                         stdin=subprocess.DEVNULL)
    output = run.stdout + run.stderr
    assert run.returncode == 0, output
    assert "1 passed" in output, output
    assert "fork_posix" not in output and "fork() handlers" not in output, output
    assert not any(line[:1] in "IWE" and ".cc:" in line for line in output.splitlines()), output
