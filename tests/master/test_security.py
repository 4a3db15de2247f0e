"""Security holes of issue #13, one test each, named after the hole: every RPC is authorized,
server_ids are bound to the identity that registered them, Stats/ListFilters show a caller only
its own slaves, binlog names come only from the index, streams are bounded per identity and in
all, mTLS authenticates, and the listen port is exclusive."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from tests.support.dump_helpers import run_slave
from dumpfilter.v1 import dump_pb2, dump_pb2_grpc
from dumpfilter.master.serve.grpc_server import create_server
from tests.support.tls_helpers import make_pki

pytestmark = [pytest.mark.grpc, pytest.mark.timeout(120)]
PROJECT_ROOT = Path(__file__).resolve().parents[2]
IN_CI = os.environ.get("CI", "").strip().lower() in ("true", "1", "yes")

POLICY = """
[slave.ana]
password = "pw-ana"
server_ids = [41, 42]
allow = ["db2.%"]

[slave.bob]
password = "pw-bob"
allow = ["db1.%"]

[slave.carol]
password = "pw-carol"
allow = ["db1.%"]

[slave.ops]
password = "pw-ops"
admin = true
allow = []

[slave.flood]
password = "pw-flood"
allow = ["db3.%"]
max_streams = 2
"""
USER_KEY, PASSWORD_KEY = "dumpfilter-user", "dumpfilter-password"  # call metadata of every RPC
CRF = "CHANGE REPLICATION FILTER REPLICATE_DO_DB = (db9)"


def creds(user: str) -> list[tuple[str, str]]:
    return [(USER_KEY, user), (PASSWORD_KEY, f"pw-{user}")]


@pytest.fixture
def guarded(workload_dir, master_factory, tmp_path):
    policy = tmp_path / "policy.toml"
    policy.write_text(POLICY)
    master, address = master_factory(workload_dir, policy=policy)
    with grpc.insecure_channel(address) as channel:
        stub = dump_pb2_grpc.DumpFilterStub(channel)
        stub.Register(dump_pb2.RegisterRequest(server_id=41), metadata=creds("ana"), timeout=5)
        stub.Register(dump_pb2.RegisterRequest(server_id=77), metadata=creds("bob"), timeout=5)
        yield stub, master, address


def _code(call) -> tuple[grpc.StatusCode, str]:
    with pytest.raises(grpc.RpcError) as info:
        call()
    return info.value.code(), info.value.details() or ""


def _dump(stub, server_id, metadata=None, **start):
    return list(stub.Dump(dump_pb2.DumpRequest(server_id=server_id, **start), metadata=metadata, timeout=10))


# -- every RPC is authorized -----------------------------------------------------------------


def test_dump_without_credentials_is_refused(guarded):
    stub, master, _ = guarded
    assert _code(lambda: _dump(stub, 41))[0] == grpc.StatusCode.UNAUTHENTICATED
    wrong = [(USER_KEY, "ana"), (PASSWORD_KEY, "guess")]
    assert _code(lambda: _dump(stub, 41, wrong))[0] == grpc.StatusCode.UNAUTHENTICATED
    assert master.service.slaves[41].stats.events_sent == 0


def test_dump_of_another_identitys_server_id_is_refused(guarded):
    stub, master, _ = guarded
    code, details = _code(lambda: _dump(stub, 41, creds("bob")))
    # Exactly what an unregistered server_id answers: bob learns nothing about ana's ids.
    unknown = _code(lambda: _dump(stub, 999, creds("bob")))
    assert code == grpc.StatusCode.NOT_FOUND and (code, details.replace("41", "N")) == \
        (unknown[0], unknown[1].replace("999", "N"))
    assert master.service.slaves[41].stats.events_sent == 0
    batch = next(iter(stub.Dump(dump_pb2.DumpRequest(server_id=41), metadata=creds("ana"), timeout=10)))
    assert batch.events


def test_change_filter_without_credentials_is_refused(guarded):
    stub, master, _ = guarded
    before = master.service.slaves[41].rules_for("")
    for metadata in (None, creds("bob")):
        code, _ = _code(lambda: stub.ChangeFilter(dump_pb2.ChangeFilterRequest(
            server_id=41, change_replication_filter=CRF), metadata=metadata, timeout=5))
        assert code == (grpc.StatusCode.UNAUTHENTICATED if metadata is None else grpc.StatusCode.NOT_FOUND)
    assert master.service.slaves[41].rules_for("") == before
    reply = stub.ChangeFilter(dump_pb2.ChangeFilterRequest(server_id=41, change_replication_filter=CRF),
                              metadata=creds("ana"), timeout=5)
    assert "db9" in reply.effective[0].change_replication_filter


def test_unregister_without_credentials_is_refused(guarded):
    stub, master, _ = guarded
    for metadata in (None, creds("bob")):
        code, _ = _code(lambda: stub.Unregister(dump_pb2.UnregisterRequest(server_id=41), metadata=metadata,
                                                timeout=5))
        assert code == (grpc.StatusCode.UNAUTHENTICATED if metadata is None else grpc.StatusCode.NOT_FOUND)
        assert 41 in master.service.slaves
    stub.Unregister(dump_pb2.UnregisterRequest(server_id=41), metadata=creds("ana"), timeout=5)
    assert 41 not in master.service.slaves


def test_stats_and_list_filters_show_only_the_callers_slaves(guarded):
    stub, _, _ = guarded
    assert _code(lambda: stub.Stats(dump_pb2.StatsRequest(), timeout=5))[0] == grpc.StatusCode.UNAUTHENTICATED
    assert _code(lambda: stub.ListFilters(dump_pb2.ListFiltersRequest(), timeout=5))[0] == \
        grpc.StatusCode.UNAUTHENTICATED
    for user, mine in (("ana", {41}), ("bob", {77}), ("carol", set())):
        stats = stub.Stats(dump_pb2.StatsRequest(), metadata=creds(user), timeout=5)
        assert {s.server_id for s in stats.slaves} == mine
        rows = stub.ListFilters(dump_pb2.ListFiltersRequest(), metadata=creds(user), timeout=5)
        assert {r.server_id for r in list(rows.filters) + list(rows.global_filters)} <= mine
        assert {r.server_id for r in rows.filters} == mine  # each slave has its MASTER_POLICY_ALLOW row
    assert _code(lambda: stub.Stats(dump_pb2.StatsRequest(server_id=41), metadata=creds("bob"), timeout=5))[0] == \
        grpc.StatusCode.NOT_FOUND
    everything = stub.Stats(dump_pb2.StatsRequest(), metadata=creds("ops"), timeout=5)
    assert {s.server_id for s in everything.slaves} == {41, 77}
    rows = stub.ListFilters(dump_pb2.ListFiltersRequest(server_id=41), metadata=creds("ops"), timeout=5)
    assert {r.filter_rule for r in rows.filters} == {"db2.%"}


def test_identity_without_server_ids_cannot_take_another_identitys_server_id(guarded):
    stub, master, _ = guarded
    stream = stub.Dump(dump_pb2.DumpRequest(server_id=77, heartbeat_period=0.1), metadata=creds("bob"), timeout=30)
    next(stream)
    for user, server_id in (("carol", 77), ("carol", 41), ("bob", 42), ("ops", 77)):  # an admin neither
        code, details = _code(lambda: stub.Register(dump_pb2.RegisterRequest(server_id=server_id),
                                                    metadata=creds(user), timeout=5))
        assert code == grpc.StatusCode.PERMISSION_DENIED and str(server_id) in details
    # Register's own credentials field is authenticated the same way.
    code, _ = _code(lambda: stub.Register(dump_pb2.RegisterRequest(
        server_id=77, credentials=dump_pb2.Credentials(user="carol", password="pw-carol")), timeout=5))
    assert code == grpc.StatusCode.PERMISSION_DENIED
    assert master.service.slaves[77].owner == "bob" and master.service.slaves[77].stream is not None
    assert next(stream).position.file  # bob's stream was not replaced
    stream.cancel()
    reply = stub.Register(dump_pb2.RegisterRequest(server_id=77), metadata=creds("bob"), timeout=5)
    assert reply.replaced


# -- binlog names only from the index --------------------------------------------------------


def test_position_file_outside_the_binlog_index_is_refused(binlog_copy, master_factory, tmp_path):
    outside = tmp_path / "outside.000001"
    outside.write_bytes((binlog_copy / "master-bin.000001").read_bytes())
    (binlog_copy / "stray.000001").write_bytes(outside.read_bytes())  # in the directory, not in the index
    _, address = master_factory(binlog_copy)
    answers = set()
    with grpc.insecure_channel(address) as channel:
        stub = dump_pb2_grpc.DumpFilterStub(channel)
        stub.Register(dump_pb2.RegisterRequest(server_id=5), timeout=5)
        for name in ("/etc/shadow", "/etc/passwd", "../../../../etc/passwd", str(outside), "../outside.000001",
                     "/nonexistent/file", "master-bin.999999", "stray.000001", ".", "..", "master-bin.index",
                     "./master-bin.000001", "master-bin.000001\0x"):
            code, details = _code(lambda: _dump(stub, 5, position=dump_pb2.Position(file=name, pos=4)))
            assert code == grpc.StatusCode.OUT_OF_RANGE, (name, code, details)
            answers.add(details.replace(repr(name[:256]), "NAME"))
            assert "root:" not in details and "fe62696e" not in details
        assert len(answers) == 1, answers  # a missing name answers as an existing one does
        call = stub.Dump(dump_pb2.DumpRequest(server_id=5, position=dump_pb2.Position(file="master-bin.000008", pos=4)),
                         timeout=10)
        assert next(call).events
        call.cancel()


def test_position_file_naming_a_fifo_is_refused(binlog_copy, master_factory):
    fifo = binlog_copy / "master-bin.000009"
    os.mkfifo(fifo)
    index = binlog_copy / "master-bin.index"
    index.write_text(index.read_text() + "./master-bin.000009\n")
    _, address = master_factory(binlog_copy)
    with grpc.insecure_channel(address) as channel:
        stub = dump_pb2_grpc.DumpFilterStub(channel)
        stub.Register(dump_pb2.RegisterRequest(server_id=5), timeout=5)
        # Opening the FIFO would block (no writer): the dump's 10 s give-up would end it with
        # DEADLINE_EXCEEDED instead of the refusal.
        code, _ = _code(lambda: _dump(stub, 5, position=dump_pb2.Position(file="master-bin.000009", pos=4)))
        assert code == grpc.StatusCode.OUT_OF_RANGE


# -- bounded streams -------------------------------------------------------------------------


def _healthy(address: str) -> bool:
    with grpc.insecure_channel(address) as channel:
        reply = health_pb2_grpc.HealthStub(channel).Check(
            health_pb2.HealthCheckRequest(service="dumpfilter.v1.DumpFilter"), timeout=5)
        return reply.status == health_pb2.HealthCheckResponse.SERVING


def test_never_reading_streams_cannot_take_every_slot(workload_dir, master_factory, tmp_path):
    """One identity opens 12 streams and never reads them: its own limit (2) stops it, the
    master's limit (4) is never reached by it, health checks answer and a real slave streams."""
    policy = tmp_path / "policy.toml"
    policy.write_text(POLICY)
    _, address = master_factory(workload_dir, policy=policy, max_streams=4)
    with grpc.insecure_channel(address) as channel:
        stub = dump_pb2_grpc.DumpFilterStub(channel)
        streams, refused = [], 0
        for server_id in range(100, 112):
            stub.Register(dump_pb2.RegisterRequest(server_id=server_id), metadata=creds("flood"), timeout=5)
            call = stub.Dump(dump_pb2.DumpRequest(server_id=server_id), metadata=creds("flood"), timeout=60)
            try:
                next(call)
                streams.append(call)
            except grpc.RpcError as exc:
                assert exc.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, exc
                refused += 1
        assert (len(streams), refused) == (2, 10)
        assert _healthy(address)
        slave = run_slave(address, tmp_path / "ana", 41, user="ana", password="pw-ana")
        assert slave.caught_up and slave.counters.events_relayed > 0
        for call in streams:
            call.cancel()


def test_never_reading_streams_are_ended_after_the_stall_timeout(workload_dir, master_factory, tmp_path):
    """Without a policy (one anonymous identity), 12 streams that never read fill the master's 4
    slots; health checks still answer, the stalled streams are ended after --stall-timeout, and
    a real slave then streams to the end."""
    master, address = master_factory(workload_dir, max_streams=4, stall_timeout=1.0, batch_bytes=64 << 10)
    # A client that never reads and announces no more than HTTP/2's first 64 KiB window (no BDP
    # probing: grpc's default lets a client soak up a few MB before its window closes).
    with grpc.insecure_channel(address, options=[("grpc.http2.bdp_probe", 0)]) as channel:
        stub = dump_pb2_grpc.DumpFilterStub(channel)
        calls = []
        for server_id in range(200, 212):
            stub.Register(dump_pb2.RegisterRequest(server_id=server_id), timeout=5)
            calls.append(stub.Dump(dump_pb2.DumpRequest(server_id=server_id), timeout=60))
        assert _healthy(address)
        deadline = time.monotonic() + 30
        while master.servicer.stalls.cancelled < 4 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert master.servicer.stalls.cancelled >= 4
        slave = run_slave(address, tmp_path / "real", 41)
        assert slave.caught_up and slave.counters.events_relayed > 0
        for call in calls:
            call.cancel()


# -- mTLS ------------------------------------------------------------------------------------


@pytest.fixture
def pki(tmp_path):
    directory = make_pki(tmp_path / "pki", clients=("ana", "bob"))
    if directory is None:
        message = "the openssl command is needed to make test certificates"
        pytest.fail(message) if IN_CI else pytest.skip(message)
    return directory


def _tls_channel(address, pki, client: str | None):
    key = (pki / f"{client}.key").read_bytes() if client else None
    cert = (pki / f"{client}.crt").read_bytes() if client else None
    return grpc.secure_channel(address, grpc.ssl_channel_credentials((pki / "ca.crt").read_bytes(), key, cert))


def test_mtls_client_certificate_is_the_identity(workload_dir, master_factory, tmp_path, pki):
    policy = tmp_path / "policy.toml"
    policy.write_text(POLICY)
    _, address = master_factory(workload_dir, policy=policy, tls_cert=pki / "server.crt", tls_key=pki / "server.key",
                                tls_client_ca=pki / "ca.crt")
    with _tls_channel(address, pki, "ana") as channel:  # no password: the certificate authenticates
        stub = dump_pb2_grpc.DumpFilterStub(channel)
        stub.Register(dump_pb2.RegisterRequest(server_id=41), timeout=10)
        assert {s.server_id for s in stub.Stats(dump_pb2.StatsRequest(), timeout=5).slaves} == {41}
        # A certificate for ana cannot claim to be bob.
        code, _ = _code(lambda: stub.Stats(dump_pb2.StatsRequest(), metadata=creds("bob"), timeout=5))
        assert code == grpc.StatusCode.PERMISSION_DENIED
    with _tls_channel(address, pki, "bob") as channel:
        stub = dump_pb2_grpc.DumpFilterStub(channel)
        assert _code(lambda: _dump(stub, 41))[0] == grpc.StatusCode.NOT_FOUND
    for client in (None, "rogue-ana"):  # no certificate, or one from another CA: no TLS session at all
        with _tls_channel(address, pki, client) as channel:
            code, _ = _code(lambda: dump_pb2_grpc.DumpFilterStub(channel).Stats(dump_pb2.StatsRequest(), timeout=5))
            assert code == grpc.StatusCode.UNAVAILABLE
    slave = run_slave(address, tmp_path / "relay", 41, tls_ca=pki / "ca.crt", tls_cert=pki / "ana.crt",
                      tls_key=pki / "ana.key")
    assert slave.caught_up and slave.counters.events_relayed > 0


# -- the listen port -------------------------------------------------------------------------


def _serve(binlog_dir, listen: str, timeout: float = 20) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "dumpfilter", "master", "serve", "--binlog-dir", str(binlog_dir),
                           "--listen", listen], capture_output=True, text=True, timeout=timeout, cwd=PROJECT_ROOT)


def test_second_master_on_a_port_in_use_fails(workload_dir, master_factory):
    _, address = master_factory(workload_dir)
    run = _serve(workload_dir, address)
    assert run.returncode == 2
    assert run.stderr.strip().splitlines() == [
        f"dumpfilter: error: cannot listen on {address}: the port is in use or the address is not local"]


def test_listen_port_out_of_range_is_a_clear_error(workload_dir):
    for listen, expected in (("127.0.0.1:99999", "port 99999 is out of range (0..65535)"),
                             ("127.0.0.1", "expected HOST:PORT")):
        run = _serve(workload_dir, listen)
        assert run.returncode == 2 and run.stderr.count("\n") == 1 and expected in run.stderr, run.stderr


def test_second_create_server_on_the_same_port_raises(workload_dir, master_factory):
    _, address = master_factory(workload_dir)
    with pytest.raises(Exception, match="cannot listen"):
        create_server(workload_dir, address)


def test_operator_commands_authenticate_by_client_certificate(workload_dir, master_factory, tmp_path, pki):
    """`master status` takes the same mTLS options as `slave run`: the certificate's CN is the
    identity, and it sees that identity's slaves only; without a certificate there is no session."""
    policy = tmp_path / "policy.toml"
    policy.write_text(POLICY)
    _, address = master_factory(workload_dir, policy=policy, tls_cert=pki / "server.crt", tls_key=pki / "server.key",
                                tls_client_ca=pki / "ca.crt")
    with _tls_channel(address, pki, "ana") as channel:
        dump_pb2_grpc.DumpFilterStub(channel).Register(dump_pb2.RegisterRequest(server_id=41), timeout=10)

    def status(*tls: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "dumpfilter", "master", "status", "--master", address,
                               "--ssl-ca", str(pki / "ca.crt"), *tls, "--rpc-timeout", "5", "--json"],
                              capture_output=True, text=True, timeout=60, cwd=PROJECT_ROOT)

    as_ana = status("--ssl-cert", str(pki / "ana.crt"), "--ssl-key", str(pki / "ana.key"))
    assert as_ana.returncode == 0, as_ana.stderr
    assert [row["Server_id"] for row in json.loads(as_ana.stdout)] == [41]
    as_bob = status("--ssl-cert", str(pki / "bob.crt"), "--ssl-key", str(pki / "bob.key"))
    assert as_bob.returncode == 0, as_bob.stderr
    assert json.loads(as_bob.stdout) == []
    anonymous = status()
    assert anonymous.returncode == 2 and len(anonymous.stderr.strip().splitlines()) == 1, anonymous.stderr
