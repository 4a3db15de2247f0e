"""Issue #27: every per-identity resource of the gRPC master is bounded per identity (master.shares):
registrations, the filter rules they hold, Dump streams, concurrent Register/ChangeFilter/Unregister calls, queued lint jobs.
An identity gets its policy entry's `max_<resource>`, else its default share (the master's total
divided by the policy's sections); going past it is RESOURCE_EXHAUSTED naming the limit, and the
other identities are still served. Real gRPC against a real master, one test per resource."""

from __future__ import annotations

import time

import grpc
import pytest

from dumpfilter.v1 import dump_pb2, dump_pb2_grpc
from dumpfilter.master.policy import MasterPolicy
from dumpfilter.master.registry import MAX_RULES_TOTAL, MAX_SLAVES
from dumpfilter.master.shares import REGISTRATIONS, RULES, STREAMS, Shares

pytestmark = [pytest.mark.grpc, pytest.mark.timeout(120)]

POLICY = """
[slave.ana]
password = "pw-ana"
allow = ["db1.%"]

[slave.flood]
password = "pw-flood"
allow = ["db1.%"]
max_registrations = 3
max_rules = 1000
max_calls = 1
max_lint_jobs = 1

[slave.ops]
password = "pw-ops"
admin = true
allow = []

[default]
allow = ["db2.%"]
max_registrations = 2
"""
USER_KEY, PASSWORD_KEY = "dumpfilter-user", "dumpfilter-password"


def creds(user: str) -> list[tuple[str, str]]:
    return [(USER_KEY, user), (PASSWORD_KEY, f"pw-{user}")]


def _refused(call) -> str:
    with pytest.raises(grpc.RpcError) as info:
        call()
    assert info.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, info.value
    return info.value.details()


def _rules(n: int, prefix: str = "t") -> list:
    text = ", ".join(f"db1.{prefix}{i}" for i in range(n))
    return [dump_pb2.ChannelFilters(change_replication_filter=f"CHANGE REPLICATION FILTER REPLICATE_DO_TABLE = ({text})")]


@pytest.fixture
def guarded(workload_dir, master_factory, tmp_path):
    policy = tmp_path / "policy.toml"
    policy.write_text(POLICY)

    def make(**options):
        master, address = master_factory(workload_dir, policy=policy, **options)
        channel = grpc.insecure_channel(address)
        channels.append(channel)
        return master, dump_pb2_grpc.DumpFilterStub(channel)

    channels: list = []
    yield make
    for channel in channels:
        channel.close()


def test_default_shares_divide_each_total_among_the_policy_sections(tmp_path):
    path = tmp_path / "policy.toml"
    path.write_text(POLICY)
    policy = MasterPolicy.load(path)
    shares = Shares(policy, {REGISTRATIONS: MAX_SLAVES, RULES: MAX_RULES_TOTAL, STREAMS: 64})
    ana, flood = policy.authenticate("ana", "pw-ana"), policy.authenticate("flood", "pw-flood")
    # four sections ([slave.ana], [slave.flood], [slave.ops], [default])
    assert [shares.limit(ana, r) for r in (REGISTRATIONS, RULES, STREAMS)] == [256, 250_000, 16]
    assert [shares.limit(flood, r) for r in (REGISTRATIONS, RULES, STREAMS)] == [3, 1000, 16]
    # Every identity [default] admits is one account with one share.
    assert shares.limit(policy.authenticate("x1", ""), REGISTRATIONS) == 2
    assert Shares(None, {STREAMS: 64}).limit(None, STREAMS) is None  # no policy: one account, the total


def test_registrations_per_identity(guarded):
    master, stub = guarded()
    for server_id in (1, 2, 3):
        stub.Register(dump_pb2.RegisterRequest(server_id=server_id), metadata=creds("flood"), timeout=10)
    details = _refused(lambda: stub.Register(dump_pb2.RegisterRequest(server_id=4), metadata=creds("flood"),
                                             timeout=10))
    assert details == "identity 'flood' already has 3 registrations (at most 3: policy max_registrations)"
    # Replacing one of its own is not a new registration; unregistering one frees its place.
    assert stub.Register(dump_pb2.RegisterRequest(server_id=3), metadata=creds("flood"), timeout=10).replaced
    stub.Unregister(dump_pb2.UnregisterRequest(server_id=3), metadata=creds("flood"), timeout=10)
    stub.Register(dump_pb2.RegisterRequest(server_id=4), metadata=creds("flood"), timeout=10)
    # Another identity is not affected.
    stub.Register(dump_pb2.RegisterRequest(server_id=10), metadata=creds("ana"), timeout=10)
    # [default]'s identities share one account: made-up user names buy nothing.
    for server_id, user in ((20, "x1"), (21, "x2")):
        stub.Register(dump_pb2.RegisterRequest(server_id=server_id), metadata=[(USER_KEY, user)], timeout=10)
    details = _refused(lambda: stub.Register(dump_pb2.RegisterRequest(server_id=22), metadata=[(USER_KEY, "x3")],
                                             timeout=10))
    assert "'[default]' already has 2 registrations" in details
    assert set(master.service.slaves) == {1, 2, 4, 10, 20, 21}


def test_rules_per_identity(guarded):
    master, stub = guarded()
    stub.Register(dump_pb2.RegisterRequest(server_id=1, filters=_rules(600)), metadata=creds("flood"), timeout=10)
    details = _refused(lambda: stub.Register(dump_pb2.RegisterRequest(server_id=2, filters=_rules(600)),
                                             metadata=creds("flood"), timeout=10))
    assert details == "identity 'flood' already has 600 rules, 600 more asked (at most 1000: policy max_rules)"
    assert 2 not in master.service.slaves
    # A registration's rules are counted in place of the ones it replaces.
    stub.Register(dump_pb2.RegisterRequest(server_id=1, filters=_rules(900)), metadata=creds("flood"), timeout=10)
    stub.Register(dump_pb2.RegisterRequest(server_id=2, filters=_rules(100)), metadata=creds("flood"), timeout=10)
    # ChangeFilter too: server 2's 100 rules may become 100 others, not 101.
    change = "CHANGE REPLICATION FILTER REPLICATE_DO_TABLE = ({})"
    stub.ChangeFilter(dump_pb2.ChangeFilterRequest(server_id=2, change_replication_filter=change.format(
        ", ".join(f"db1.u{i}" for i in range(100)))), metadata=creds("flood"), timeout=10)
    details = _refused(lambda: stub.ChangeFilter(dump_pb2.ChangeFilterRequest(
        server_id=2, change_replication_filter=change.format(", ".join(f"db1.v{i}" for i in range(101)))),
        metadata=creds("flood"), timeout=10))
    assert "at most 1000: policy max_rules" in details
    assert master.service.slaves[2].rule_count == 100
    stub.Register(dump_pb2.RegisterRequest(server_id=10, filters=_rules(5000)), metadata=creds("ana"), timeout=10)


def test_streams_default_share(guarded):
    """--max-streams 4 among 4 policy sections: one stream per identity by default."""
    master, stub = guarded(max_streams=4)
    calls = []
    for server_id in (10, 11):
        stub.Register(dump_pb2.RegisterRequest(server_id=server_id), metadata=creds("ana"), timeout=10)
    call = stub.Dump(dump_pb2.DumpRequest(server_id=10, heartbeat_period=0.1), metadata=creds("ana"), timeout=60)
    assert next(call).events
    calls.append(call)
    details = _refused(lambda: next(stub.Dump(dump_pb2.DumpRequest(server_id=11), metadata=creds("ana"),
                                              timeout=60)))
    assert details == ("identity 'ana' already has 1 streams (at most 1: its share of the master's 4 "
                       "(--max-streams) among 4 policy sections)")
    stub.Register(dump_pb2.RegisterRequest(server_id=20), metadata=[(USER_KEY, "x1")], timeout=10)
    call = stub.Dump(dump_pb2.DumpRequest(server_id=20, heartbeat_period=0.1), metadata=[(USER_KEY, "x1")],
                     timeout=60)
    assert next(call).events  # another identity still streams
    calls.append(call)
    # A stream that ends gives its place back.
    calls[0].cancel()
    for _ in range(400):
        if master.service.slaves[10].stream is None:
            break
        time.sleep(0.05)
    call = stub.Dump(dump_pb2.DumpRequest(server_id=11, heartbeat_period=0.1), metadata=creds("ana"), timeout=60)
    assert next(call).events
    calls.append(call)
    for call in calls:
        call.cancel()


def test_concurrent_calls_per_identity(guarded):
    """flood's max_calls = 1: while its ChangeFilter waits for a transaction boundary, its next
    call is refused, another identity's is served, and the slot comes back when the call ends."""
    master, stub = guarded()
    stub.Register(dump_pb2.RegisterRequest(server_id=1), metadata=creds("flood"), timeout=10)
    # The service's own stream of server 1, held between two batches (its slave takes no more):
    # a ChangeFilter waits until the stream reaches a boundary, or ends.
    held = master.service.stream(1)
    assert next(held).parts
    waiting = stub.ChangeFilter.future(dump_pb2.ChangeFilterRequest(
        server_id=1, change_replication_filter="CHANGE REPLICATION FILTER REPLICATE_DO_DB = (db1)"),
        metadata=creds("flood"), timeout=60)
    calls = master.servicer.calls
    for _ in range(400):
        if calls.used.get("flood") == 1 and master.service.slaves[1].pending:
            break
        time.sleep(0.05)
    assert calls.used.get("flood") == 1
    details = _refused(lambda: stub.Register(dump_pb2.RegisterRequest(server_id=2), metadata=creds("flood"),
                                             timeout=10))
    assert details == "identity 'flood' already has 1 calls (at most 1: policy max_calls)"
    stub.Register(dump_pb2.RegisterRequest(server_id=10), metadata=creds("ana"), timeout=10)
    assert 2 not in master.service.slaves and 10 in master.service.slaves
    # Ending the stream (here: the slave registers again) ends the waiting call; its slot is free.
    master.service.register(master.service.slaves[1].reg, master.service.slaves[1].identity)
    with pytest.raises(grpc.RpcError) as info:
        waiting.result()
    assert info.value.code() == grpc.StatusCode.ABORTED
    held.close()
    assert "flood" not in calls.used
    assert [s.server_id for s in stub.Stats(dump_pb2.StatsRequest(), metadata=creds("flood"), timeout=10).slaves] \
        == [1]


def test_lint_jobs_per_identity(guarded):
    """flood's max_lint_jobs = 1: while its first rule set is linted, a second is not queued (the
    Register succeeds and says why); another identity's job is queued."""
    master, stub = guarded()
    lint = master.service.lint
    warnings = []
    for server_id in (1, 2, 3):
        reply = stub.Register(dump_pb2.RegisterRequest(server_id=server_id, filters=_rules(1, f"s{server_id}_")),
                              metadata=creds("flood"), timeout=10)
        warnings += [w for w in reply.warnings if "not run" in w]
        with lint.lock:
            assert sum(f.account == "flood" and f.state == "pending" for f in lint.followers.values()) <= 1
    # Each job lints 1.5 MB (about a second): the second and third Register came while the first ran.
    assert "lint: not run at Register: identity 'flood' already has 1 lint jobs (at most 1: policy " \
           "max_lint_jobs)" in warnings
    reply = stub.Register(dump_pb2.RegisterRequest(server_id=10, filters=_rules(1, "a")), metadata=creds("ana"),
                          timeout=10)
    assert not [w for w in reply.warnings if "not run" in w]


def test_requests_above_the_size_limit_are_refused(guarded):
    from dumpfilter.master.serve.grpc_server import MAX_REQUEST_BYTES

    master, stub = guarded()
    big = dump_pb2.RegisterRequest(server_id=1, hostname="h" * (MAX_REQUEST_BYTES + 1))
    details = _refused(lambda: stub.Register(big, metadata=creds("ana"), timeout=10))
    assert "larger than max" in details
    assert stub.Register(dump_pb2.RegisterRequest(server_id=1), metadata=creds("ana"), timeout=10).server_id == 1
