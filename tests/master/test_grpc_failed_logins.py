"""Failed gRPC logins (#27 item 10): a wrong password or an identity the policy does not know is a
WARNING line of the master's own (the default level shows it) naming the user, safely quoted, and
the peer; a flood is rate-limited and summed up, never one line per attempt, and no password is
logged. A real `master serve` process, real gRPC calls. (Issue #62: bad credentials are
UNAUTHENTICATED; past a few failures in a row the login guard refuses without a check,
RESOURCE_EXHAUSTED, and those refusals are lines of the same rate-limited kind.)"""

from __future__ import annotations

import re

import grpc
import pytest

from dumpfilter.wire import PASSWORD_KEY, USER_KEY
from dumpfilter.v1 import dump_pb2, dump_pb2_grpc
from tests.support.master_process import serve_master
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.grpc, pytest.mark.timeout(180)]

POLICY = """
[slave.repl]
password = "s3cret"
allow = ["%.%"]

[login]
hold_seconds = 0   # the flood below wants each refusal at once, not held (master.login_guard)
"""


def _stats(stub, user: str, password: str) -> grpc.StatusCode:
    try:
        stub.Stats(dump_pb2.StatsRequest(), metadata=((USER_KEY, user), (PASSWORD_KEY, password)), timeout=30)
    except grpc.RpcError as exc:
        return exc.code()
    return grpc.StatusCode.OK


def _register(stub, user: str, password: str) -> grpc.StatusCode:
    """Register carries its credentials in the request: a user name metadata could not carry."""
    try:
        stub.Register(dump_pb2.RegisterRequest(server_id=77, credentials=dump_pb2.Credentials(user=user, password=password)),
                      timeout=30)
    except grpc.RpcError as exc:
        return exc.code()
    return grpc.StatusCode.OK


def test_failed_grpc_logins_are_rate_limited_warnings(workload_dir, tmp_path):
    policy = tmp_path / "policy.toml"
    policy.write_text(POLICY)
    master = serve_master(workload_dir, tmp_path / "master.log", "--policy", str(policy))
    try:
        with grpc.insecure_channel(master.grpc_address) as channel:
            stub = dump_pb2_grpc.DumpFilterStub(channel)
            assert _stats(stub, "repl", "s3cret") == grpc.StatusCode.OK
            assert _register(stub, "nobody\nforged line", "x") == grpc.StatusCode.UNAUTHENTICATED
            attempts = 1
            refused = (grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.RESOURCE_EXHAUSTED)
            codes = []
            for _ in range(60):
                codes.append(_stats(stub, "repl", "wrong-pw-1"))
                attempts += 1
            assert set(codes) == set(refused) and codes[0] == grpc.StatusCode.UNAUTHENTICATED, codes

            def summed_up() -> bool:
                nonlocal attempts
                if "more failed gRPC logins not logged" in master.log_text():
                    return True
                assert _stats(stub, "repl", "wrong-pw-1") in refused
                attempts += 1
                return False

            assert wait_for(summed_up, every=0.5), "the flood of failed logins was not summed up"
    finally:
        master.stop()
    log = master.log_text()
    lines = [line for line in log.splitlines() if "grpc login failed" in line or "grpc login refused" in line]
    assert "wrong-pw-1" not in log and "s3cret" not in log, "a password was logged"
    assert not any(line.startswith("forged line") for line in log.splitlines()), "a user name forged a log line"
    assert any("user 'nobody\\nforged line' from ipv4:127.0.0.1:" in line for line in lines), lines
    assert any("user 'repl' from ipv4:127.0.0.1:" in line and "wrong password" in line for line in lines), lines
    assert len(lines) < attempts, "every failed login of the flood was logged"
    summed = sum(int(n) for n in re.findall(r"\((\d+) more failed gRPC logins not logged", log))
    assert len(lines) + summed <= attempts and summed > 0
