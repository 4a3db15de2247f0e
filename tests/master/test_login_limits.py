"""The failed-login back-off's thresholds come from the policy file's `[login]` table (issue #62):
each key defaults to the figure the login guard had as a constant (MySQL's connection_control and
max_connect_errors); a real `master serve` applies the table's to real gRPC logins; a bad value is
one line naming the file, its line, `[login]` and the key, and `master serve` exits 2."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import grpc
import pytest

from dumpfilter.errors import RuleError
from dumpfilter.master import login_guard
from dumpfilter.master.login_guard import LoginLimits
from dumpfilter.master.policy import MasterPolicy
from dumpfilter.v1 import dump_pb2, dump_pb2_grpc
from tests.support.master_process import serve_master

IDENTITY = '[slave.repl]\npassword = "s3cret"\nallow = ["%.%"]\n\n'


def _policy(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "policy.toml"
    path.write_text(text)
    os.chmod(path, 0o600)
    return path


def test_without_a_login_table_the_limits_are_the_old_constants(tmp_path):
    limits = MasterPolicy.load(_policy(tmp_path, IDENTITY)).logins.limits
    assert limits == LoginLimits()
    assert (limits.free_failures, limits.first_delay, limits.max_delay, limits.block_after, limits.block_seconds,
            limits.forget_after) == (login_guard.FREE_FAILURES, login_guard.FIRST_DELAY, login_guard.MAX_DELAY,
                                     login_guard.BLOCK_AFTER, login_guard.BLOCK_SECONDS, login_guard.FORGET_AFTER)
    assert (limits.free_failures, limits.first_delay, limits.max_delay, limits.block_after,
            limits.block_seconds) == (3, 1.0, 30.0, 10, 300.0)


def test_a_login_table_sets_each_threshold(tmp_path):
    text = IDENTITY + ("[login]\nfree_failures = 0\nfirst_delay = 0.5\nmax_delay = 8\nblock_after = 5\n"
                       "block_seconds = 60\nforget_after = 120\nhold_seconds = 0\n")
    limits = MasterPolicy.load(_policy(tmp_path, text)).logins.limits
    assert limits == LoginLimits(free_failures=0, first_delay=0.5, max_delay=8, block_after=5, block_seconds=60,
                                 forget_after=120, hold_seconds=0)
    partly = MasterPolicy.load(_policy(tmp_path, IDENTITY + "[login]\nblock_seconds = 900\n")).logins.limits
    assert partly == LoginLimits(block_seconds=900)


def _register(stub, password: str) -> grpc.RpcError | None:
    try:
        stub.Register(dump_pb2.RegisterRequest(server_id=77, credentials=dump_pb2.Credentials(user="repl",
                                                                                              password=password)),
                      timeout=60)
    except grpc.RpcError as exc:
        return exc
    return None


@pytest.mark.grpc
@pytest.mark.timeout(180)
def test_a_real_master_backs_off_as_its_login_table_says(workload_dir, tmp_path):
    """One free failure, a block at the second for 900 s: the third wrong Register is refused
    unchecked, for about 900 s (under the defaults it would be checked, as the second was)."""
    policy = _policy(tmp_path, IDENTITY + "[login]\nfree_failures = 1\nblock_after = 2\nblock_seconds = 900\n")
    master = serve_master(workload_dir, tmp_path / "master.log", "--policy", str(policy))
    try:
        with grpc.insecure_channel(master.grpc_address) as channel:
            stub = dump_pb2_grpc.DumpFilterStub(channel)
            first, second, third = (_register(stub, "wrong") for _ in range(3))
            right = _register(stub, "s3cret")
    finally:
        master.stop()
    assert first.code() == second.code() == grpc.StatusCode.UNAUTHENTICATED, (first, second)
    assert third.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, third
    seconds = int(re.search(r"no password is checked for (\d+) s more", third.details()).group(1))
    assert 600 < seconds <= 900, third.details()
    assert right is not None and right.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, right  # the pair waits too


BAD = [
    ("free_failures = -1", 2, "free_failures must be a whole number from 0 to 1000000, not -1"),
    ('block_after = "ten"', 2, "block_after must be a whole number from 1 to 1000000, not 'ten'"),
    ("block_after = 2.5", 2, "block_after must be a whole number"),
    ("first_delay = 0", 2, "first_delay must be a number of seconds more than 0"),
    ("max_delay = inf", 2, "max_delay must be a number of seconds more than 0"),
    ("block_seconds = true", 2, "block_seconds must be a number of seconds"),
    ("free_failures = 5\nblock_after = 5", 3, "block_after (5) must be more than free_failures (5)"),
    ("block_after = 2", 2, "block_after (2) must be more than free_failures (3)"),
    ("first_delay = 60", 2, "first_delay (60 s) must be at most max_delay (30 s)"),
    ("forget_after = 60", 2, "forget_after (60 s) must be at least block_seconds (300 s)"),
    ("block_secs = 5", 2, "unknown key 'block_secs' (known: free_failures, first_delay, max_delay, block_after, "
                          "block_seconds, forget_after, hold_seconds)"),
    ("hold_seconds = 61", 2, "hold_seconds must be a number of seconds from 0 to 60, not 61"),
    ("hold_seconds = -0.5", 2, "hold_seconds must be a number of seconds from 0 to 60, not -0.5"),
]


@pytest.mark.parametrize(("body", "line", "words"), BAD, ids=[f"bad{i}" for i in range(len(BAD))])
def test_a_bad_login_value_is_one_line_with_file_line_and_key(tmp_path, body, line, words):
    path = _policy(tmp_path, IDENTITY + "[login]\n" + body + "\n")
    with pytest.raises(RuleError) as info:
        MasterPolicy.load(path)
    message = str(info.value)
    at = len(IDENTITY.splitlines()) + line
    assert "\n" not in message and message.startswith(f"policy file {path}:{at}: [login] "), message
    assert words in message, message


@pytest.mark.parametrize("body", ["block_after = 0", "first_delay = -1", "blok_after = 3"])
def test_master_serve_refuses_a_bad_login_table_in_one_line_and_exit_2(workload_dir, tmp_path, body):
    path = _policy(tmp_path, IDENTITY + "[login]\n" + body + "\n")
    run = subprocess.run([sys.executable, "-m", "dumpfilter", "master", "serve", "--binlog-dir", str(workload_dir),
                          "--listen", "127.0.0.1:0", "--policy", str(path)], capture_output=True, text=True,
                         timeout=120, stdin=subprocess.DEVNULL)
    assert run.returncode == 2, run.stderr
    lines = run.stderr.strip().splitlines()
    key = body.split(" ")[0]
    assert len(lines) == 1, run.stderr
    assert f"policy.toml:6: [login] {key} must be" in lines[0] or \
        f"policy.toml:6: [login] unknown key {key!r}" in lines[0], run.stderr
    assert "Traceback" not in run.stderr
