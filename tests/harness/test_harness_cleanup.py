"""The plugin's fixtures leave nothing behind (issue #44): after a test that fails, and after one
interrupted with Ctrl-C, the master's ports can be listened on again and a real replica's
mariadbd is gone. The inner tests run in a pytester session of this process, with the plugin as
its pytest11 entry point loads it; each writes what it started to a file before it fails."""

from __future__ import annotations

import json
import os
import socket
import time

import pytest

pytest_plugins = ["pytester"]

INNER = """
import json, pathlib

def test_inner(dumpfilter_binlog, dumpfilter_master, dumpfilter_slave{replica_arg}):
    master = dumpfilter_master(dumpfilter_binlog(transactions=60), mysql_listen="127.0.0.1:0")
    slave = dumpfilter_slave(master, ["replicate-do-db=db1"]).start()
    slave.wait_caught_up(timeout=120)
    started = {{"port": master.port, "mysql_port": master.mysql_port, "relay": str(slave.relay_dir)}}
{replica_body}
    pathlib.Path({record!r}).write_text(json.dumps(started))
    {ending}
"""

REPLICA_BODY = """\
    replica = dumpfilter_replica(master, ["replicate-do-db=db1"])
    started["pid"] = replica.pid
    started["replica_port"] = replica.port
"""


def _inner(pytester, tmp_path, ending: str, replica: bool) -> tuple[object, dict]:
    record = tmp_path / "started.json"
    pytester.makepyfile(test_inner=INNER.format(
        replica_arg=", dumpfilter_replica" if replica else "", replica_body=REPLICA_BODY if replica else "",
        record=str(record), ending=ending))
    # no_reraise_ctrlc: the inner session's Ctrl-C ends it, not this one
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", no_reraise_ctrlc=True)
    assert record.exists(), result.stdout.str()
    return result, json.loads(record.read_text())


def _can_listen(port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # TIME_WAIT is no leftover; a listener is
        try:
            s.bind(("127.0.0.1", port))
            s.listen()
        except OSError:
            return False
    return True


def _gone(pid: int, timeout: float = 30.0) -> bool:
    """Whether process `pid` has exited (a zombie not yet reaped counts as gone)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with open(f"/proc/{pid}/stat") as stat:
                if stat.read().rsplit(")", 1)[1].split()[0] == "Z":
                    return True
        except FileNotFoundError:
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)


def _check_nothing_left(started: dict) -> None:
    assert _can_listen(started["port"]), f"gRPC port {started['port']} still has a listener"
    assert _can_listen(started["mysql_port"]), f"MySQL port {started['mysql_port']} still has a listener"
    assert not os.path.exists(started["relay"]), "the slave's temporary relay directory is still there"
    if "pid" in started:
        assert _gone(started["pid"]), f"mariadbd {started['pid']} is still running"
        assert _can_listen(started["replica_port"])


@pytest.mark.grpc
def test_a_failing_test_leaves_nothing_behind(pytester, tmp_path):
    result, started = _inner(pytester, tmp_path, "assert False, 'the harness test fails'", replica=False)
    result.assert_outcomes(failed=1)
    _check_nothing_left(started)


@pytest.mark.grpc
def test_ctrl_c_leaves_nothing_behind(pytester, tmp_path):
    result, started = _inner(pytester, tmp_path, "raise KeyboardInterrupt", replica=False)
    assert result.ret == pytest.ExitCode.INTERRUPTED
    _check_nothing_left(started)


@pytest.mark.mariadb
def test_a_failing_test_stops_its_real_replica(pytester, tmp_path):
    result, started = _inner(pytester, tmp_path, "assert False, 'the harness test fails'", replica=True)
    result.assert_outcomes(failed=1)
    assert started["pid"]
    _check_nothing_left(started)


@pytest.mark.mariadb
def test_ctrl_c_stops_its_real_replica(pytester, tmp_path):
    result, started = _inner(pytester, tmp_path, "raise KeyboardInterrupt", replica=True)
    assert result.ret == pytest.ExitCode.INTERRUPTED
    _check_nothing_left(started)


def test_the_fixture_skips_with_a_reason_without_mariadb(pytester, monkeypatch):
    """Where mariadbd is missing the test is skipped, and the reason says what to install."""
    pytester.makepyfile(test_inner="def test_inner(dumpfilter_replica):\n    pass\n")
    monkeypatch.setattr("dumpfilter.harness.Replica.available", staticmethod(lambda: False))
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "-rs")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["*mariadbd*not all found*install mariadb-server*"])

