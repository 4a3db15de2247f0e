"""A login refused without a check has its answer held (issue #62 goal 1): up to [login]
hold_seconds and never longer than its key still waits, as MySQL's connection_control holds a
failing login's answer, on at most a few sleeping threads at once (beyond them: answered at once),
so a client that retries at once, as a flood does, cannot make hundreds of tries a second per
connection. The guard's clock and sleep are the test's: no wall-clock assertion."""

from __future__ import annotations

import re
import threading
import urllib.request

import grpc
import pytest

from dumpfilter.master.login_guard import CheckPool, ChecksBusy, LoginGuard, LoginLimits, LoginThrottled
from dumpfilter.v1 import dump_pb2, dump_pb2_grpc
from tests.support.master_process import free_port, serve_master
from tests.support.waiting import wait_for


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Sleeps:
    """The guard's sleep: records each hold; with `gate`, a hold lasts until the gate opens."""

    def __init__(self, gate: threading.Event | None = None):
        self.gate, self.seconds = gate, []

    def __call__(self, seconds: float) -> None:
        self.seconds.append(seconds)
        if self.gate is not None:
            assert self.gate.wait(60)


def _fail(guard: LoginGuard, n: int, address: str = "10.0.0.9", name: str = "app") -> None:
    for _ in range(n):
        guard.failed(address, name, known=True)


def test_a_refusal_is_held_no_longer_than_its_key_waits():
    sleeps = Sleeps()
    guard = LoginGuard(Clock(), limits=LoginLimits(first_delay=0.25), sleep=sleeps)
    _fail(guard, 4)                          # 3 free, then 0.25 s before the next check
    with pytest.raises(LoginThrottled):
        guard.admit("10.0.0.9", "app")
    assert sleeps.seconds == [0.25] and guard.held == 1
    _fail(guard, 10)                         # blocked for 300 s: held for hold_seconds
    with pytest.raises(LoginThrottled):
        guard.admit("10.0.0.9", "app")
    assert sleeps.seconds == [0.25, 1.0] and guard.snapshot()["held"] == 2


def test_hold_seconds_0_answers_at_once_and_an_admitted_login_is_never_held():
    sleeps = Sleeps()
    guard = LoginGuard(Clock(), limits=LoginLimits(hold_seconds=0), sleep=sleeps)
    guard.admit("10.0.0.9", "app")
    _fail(guard, 10)
    with pytest.raises(LoginThrottled):
        guard.admit("10.0.0.9", "app")
    assert sleeps.seconds == [] and guard.held == 0


def test_at_most_hold_slots_refusals_are_held_at_once():
    gate = threading.Event()
    sleeps = Sleeps(gate)
    guard = LoginGuard(Clock(), sleep=sleeps, hold_slots=3)
    _fail(guard, 10)
    refused: list[BaseException] = []

    def refuse() -> None:
        try:
            guard.admit("10.0.0.9", "app")
        except LoginThrottled as exc:
            refused.append(exc)

    held = [threading.Thread(target=refuse) for _ in range(3)]
    for thread in held:
        thread.start()
    try:
        assert wait_for(lambda: len(sleeps.seconds) == 3), sleeps.seconds
        with pytest.raises(LoginThrottled):  # a fourth: every slot holds one, so it is answered at once
            guard.admit("10.0.0.9", "app")
        assert len(sleeps.seconds) == 3 and refused == []
    finally:
        gate.set()
        for thread in held:
            thread.join()
    assert len(refused) == 3 and guard.held == 3
    with pytest.raises(LoginThrottled):      # the slots are free again
        guard.admit("10.0.0.9", "app")
    assert len(sleeps.seconds) == 4


def test_a_refusal_for_a_full_check_queue_is_held_too():
    sleeps = Sleeps()
    guard = LoginGuard(Clock(), pool=CheckPool(workers=1, queue=0), sleep=sleeps)
    with pytest.raises(ChecksBusy):
        guard.check(lambda: True, expensive=True, address="10.0.0.9", name="app")
    assert sleeps.seconds == [1.0] and guard.refused["busy"] == 1


TOKEN = "hold-test-metrics-token-0123456789"


@pytest.mark.grpc
@pytest.mark.timeout(180)
def test_a_real_master_holds_refusals_and_counts_them(workload_dir, tmp_path):
    """One failure blocks the pair: each later wrong Register is refused unchecked and held;
    /metrics counts the held ones."""
    policy = tmp_path / "policy.toml"
    policy.write_text('[slave.repl]\npassword = "s3cret"\nallow = ["%.%"]\n\n'
                      '[login]\nfree_failures = 0\nblock_after = 1\nhold_seconds = 0.2\n')
    policy.chmod(0o600)
    token = tmp_path / "token"
    token.write_text(TOKEN + "\n")
    metrics_port = free_port()
    master = serve_master(workload_dir, tmp_path / "master.log", "--policy", str(policy), "--metrics-listen",
                          f"127.0.0.1:{metrics_port}", "--metrics-token-file", str(token))
    codes = []
    try:
        with grpc.insecure_channel(master.grpc_address) as channel:
            stub = dump_pb2_grpc.DumpFilterStub(channel)
            for _ in range(4):
                try:
                    stub.Register(dump_pb2.RegisterRequest(
                        server_id=77, credentials=dump_pb2.Credentials(user="repl", password="wrong")), timeout=60)
                    codes.append(grpc.StatusCode.OK)
                except grpc.RpcError as exc:
                    codes.append(exc.code())
        request = urllib.request.Request(f"http://127.0.0.1:{metrics_port}/metrics",
                                         headers={"Authorization": f"Bearer {TOKEN}"})
        with urllib.request.urlopen(request, timeout=30) as reply:
            text = reply.read().decode()
    finally:
        master.stop()
    assert codes == [grpc.StatusCode.UNAUTHENTICATED] + [grpc.StatusCode.RESOURCE_EXHAUSTED] * 3, codes
    assert re.search(r"^dumpfilter_logins_refused_held_total 3\.0$", text, re.M), text[-3000:]
