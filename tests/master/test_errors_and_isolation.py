"""Status codes mapped in one place, the master policy, duplicate server_ids, and faults that
must stay with the stream that meets them (malformed registration, slow or vanished slave,
corrupt binlog)."""

from __future__ import annotations

import threading

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from dumpfilter.codec import EventType
from dumpfilter.v1 import dump_pb2, dump_pb2_grpc
from dumpfilter.rules.ruleset import RuleSet
from dumpfilter.binlogs import TailingReader
from dumpfilter.rules.statements import statement_tables

from tests.support.dump_helpers import relay_units, run_slave

pytestmark = [pytest.mark.grpc, pytest.mark.timeout(120)]


def _do_db(db):
    return [dump_pb2.ChannelFilters(rules=dump_pb2.RuleList(rules=[dump_pb2.FilterRule(type=dump_pb2.REPLICATE_DO_DB,
                                                                                       value=db)]))]


@pytest.fixture
def stub(workload_dir, master_factory):
    master, address = master_factory(workload_dir)
    with grpc.insecure_channel(address) as channel:
        yield dump_pb2_grpc.DumpFilterStub(channel), channel, master


def _code(call):
    with pytest.raises(grpc.RpcError) as info:
        call()
    return info.value.code(), info.value.details()


def test_status_codes(stub):
    stub, _, _ = stub
    code, details = _code(lambda: stub.Register(dump_pb2.RegisterRequest(server_id=1, filters=[
        dump_pb2.ChannelFilters(rules=dump_pb2.RuleList(rules=[dump_pb2.FilterRule(
            type=dump_pb2.REPLICATE_DO_TABLE, value="nodot")]))]), timeout=5))
    assert code == grpc.StatusCode.INVALID_ARGUMENT and "replicate-do-table" in details
    code, details = _code(lambda: stub.Register(dump_pb2.RegisterRequest(server_id=1, filters=[
        dump_pb2.ChannelFilters(change_replication_filter="CHANGE REPLICATION FILTER REPLICATE_REWRITE_DB = ((a)")]),
        timeout=5))
    assert code == grpc.StatusCode.INVALID_ARGUMENT and "replicate-rewrite-db" in details
    assert _code(lambda: list(stub.Dump(dump_pb2.DumpRequest(server_id=99), timeout=5)))[0] == grpc.StatusCode.NOT_FOUND
    assert _code(lambda: stub.ChangeFilter(dump_pb2.ChangeFilterRequest(
        server_id=99, change_replication_filter="CHANGE REPLICATION FILTER REPLICATE_DO_DB = (a)"), timeout=5)
    )[0] == grpc.StatusCode.NOT_FOUND
    stub.Register(dump_pb2.RegisterRequest(server_id=2, filters=_do_db("db1")), timeout=5)
    for file, pos in (("master-bin.000002", 10_000_000), ("master-bin.000002", 5), ("master-bin.000002", 301),
                      ("master-bin.999999", 4)):
        request = dump_pb2.DumpRequest(server_id=2, position=dump_pb2.Position(file=file, pos=pos))
        code, details = _code(lambda: list(stub.Dump(request, timeout=5)))
        assert code == grpc.StatusCode.OUT_OF_RANGE and "1236" in details, (file, pos, details)
    bad_change = dump_pb2.ChangeFilterRequest(server_id=2, change_replication_filter="CHANGE REPLICATION FILTER "
                                              "REPLICATE_WILD_DO_TABLE = ('nodot')")
    code, details = _code(lambda: stub.ChangeFilter(bad_change, timeout=5))
    assert code == grpc.StatusCode.INVALID_ARGUMENT and "replicate-wild-do-table" in details
    assert stub.Unregister(dump_pb2.UnregisterRequest(server_id=2), timeout=5) is not None
    assert _code(lambda: stub.Unregister(dump_pb2.UnregisterRequest(server_id=2), timeout=5))[0] == \
        grpc.StatusCode.NOT_FOUND


def test_health_and_reflection(stub):
    _, channel, _ = stub
    health = health_pb2_grpc.HealthStub(channel)
    reply = health.Check(health_pb2.HealthCheckRequest(service="dumpfilter.v1.DumpFilter"), timeout=5)
    assert reply.status == health_pb2.HealthCheckResponse.SERVING
    reflection = reflection_pb2_grpc.ServerReflectionStub(channel)
    answers = reflection.ServerReflectionInfo(iter([reflection_pb2.ServerReflectionRequest(list_services="")]),
                                              timeout=5)
    names = {s.name for a in answers for s in a.list_services_response.service}
    assert "dumpfilter.v1.DumpFilter" in names and "grpc.health.v1.Health" in names


def test_list_filters_and_unknown_channel_warning(stub):
    stub, _, _ = stub
    reply = stub.Register(dump_pb2.RegisterRequest(server_id=5, channels=["ch1"], filters=[
        dump_pb2.ChannelFilters(rules=dump_pb2.RuleList(rules=[dump_pb2.FilterRule(type=dump_pb2.REPLICATE_IGNORE_DB,
                                                                                   value="db3")])),
        dump_pb2.ChannelFilters(channel="nope", rules=dump_pb2.RuleList(rules=[
            dump_pb2.FilterRule(type=dump_pb2.REPLICATE_DO_DB, value="db1")]))]), timeout=5)
    assert any("'nope'" in w for w in reply.warnings)
    assert reply.effective[0].channel == "ch1"
    assert "REPLICATE_IGNORE_DB = (`db3`)" in reply.effective[0].change_replication_filter
    rows = stub.ListFilters(dump_pb2.ListFiltersRequest(server_id=5), timeout=5)
    assert [(r.channel_name, r.filter_name, r.filter_rule, r.configured_by) for r in rows.filters] == [
        ("ch1", "REPLICATE_IGNORE_DB", "db3", "STARTUP_OPTIONS")]
    assert [r.filter_name for r in rows.global_filters] == ["REPLICATE_IGNORE_DB"]


def test_policy_keeps_a_slave_inside_its_schemas(workload_dir, master_factory, tmp_path):
    policy = tmp_path / "policy.toml"
    policy.write_text('[slave.ana]\npassword = "pw"\nallow = ["db2.%", "db1.t1"]\n')
    master, address = master_factory(workload_dir, policy=policy)
    relay = tmp_path / "relay"
    # It asks for db1 and db2 entirely; the policy allows db2 and only db1.t1.
    run_slave(address, relay, 41, rules=RuleSet(wild_do_table=("db1.%", "db2.%")), user="ana", password="pw")
    seen = set()
    for _, e in TailingReader(relay):
        if e.type_code == EventType.TABLE_MAP:
            seen.add(e.table_map[1] + "." + e.table_map[2])
        elif e.is_query:
            info = statement_tables(e.sql, e.db)
            for db, table in info.updated + info.read:
                seen.add(f"{db}.{table}")
    assert seen and all(t.startswith("db2.") or t == "db1.t1" for t in seen)
    assert "db1.t1" in seen
    stats = master.service.slaves[41].stats
    assert stats.rule_hits["MASTER_POLICY"] > 0
    with grpc.insecure_channel(address) as channel:
        stub = dump_pb2_grpc.DumpFilterStub(channel)
        for user, password in (("ana", "wrong"), ("mallory", "")):
            code, _ = _code(lambda: stub.Register(dump_pb2.RegisterRequest(
                server_id=42, credentials=dump_pb2.Credentials(user=user, password=password)), timeout=5))
            assert code == grpc.StatusCode.UNAUTHENTICATED


def test_duplicate_server_id_replaces_the_old_stream(stub):
    stub, _, master = stub
    stub.Register(dump_pb2.RegisterRequest(server_id=51, filters=_do_db("db1")), timeout=5)
    old = stub.Dump(dump_pb2.DumpRequest(server_id=51, heartbeat_period=0.1), timeout=30)
    for batch in old:
        if batch.caught_up:
            break
    reply = stub.Register(dump_pb2.RegisterRequest(server_id=51, filters=_do_db("db2")), timeout=5)
    assert reply.replaced
    with pytest.raises(grpc.RpcError) as info:
        for _ in old:
            pass
    assert info.value.code() == grpc.StatusCode.ABORTED


def test_corrupt_file_and_bad_slaves_disturb_no_other_slave(binlog_copy, master_factory, tmp_path):
    """A stream that reaches a corrupt event gets DATA_LOSS naming file and offset; a slave that
    stops reading, one that vanishes and a malformed registration change nothing for the others."""
    target = binlog_copy / "master-bin.000003"
    data = bytearray(target.read_bytes())
    offset = len(data) // 2
    data[offset] ^= 0xFF
    target.write_bytes(bytes(data))
    master, address = master_factory(binlog_copy)
    with grpc.insecure_channel(address) as channel:
        stub = dump_pb2_grpc.DumpFilterStub(channel)
        stub.Register(dump_pb2.RegisterRequest(server_id=61, filters=_do_db("db1")), timeout=5)
        stub.Register(dump_pb2.RegisterRequest(server_id=62), timeout=5)  # slow: never reads
        stub.Register(dump_pb2.RegisterRequest(server_id=63), timeout=5)  # vanishes
        slow = stub.Dump(dump_pb2.DumpRequest(server_id=62), timeout=60)
        next(slow)
        vanished = stub.Dump(dump_pb2.DumpRequest(server_id=63), timeout=60)
        next(vanished)
        vanished.cancel()
        with pytest.raises(grpc.RpcError):
            stub.Register(dump_pb2.RegisterRequest(server_id=0), timeout=5)
        code, details = _code(lambda: list(stub.Dump(dump_pb2.DumpRequest(server_id=61), timeout=30)))
        assert code == grpc.StatusCode.DATA_LOSS
        assert "master-bin.000003" in details and "at byte" in details
        # Another slave, starting after the corrupt file, streams to the end.
        start = ("master-bin.000004", 4)
        result = {}

        def healthy():
            result["slave"] = run_slave(address, tmp_path / "ok", 64, rules=RuleSet(do_db=("db2",)),
                                        start_gtid=None)
        info_dir = tmp_path / "ok"
        info_dir.mkdir()
        (info_dir / "relay-log.info").write_text(f'{{"master_file": "{start[0]}", "master_pos": {start[1]:d}}}')
        thread = threading.Thread(target=healthy)
        thread.start()
        thread.join(60)
        assert "slave" in result and result["slave"].caught_up
        assert relay_units(info_dir)
        slow.cancel()


def test_without_master_checksum_verification_the_receiving_slave_catches_a_bad_crc(binlog_copy, master_factory,
                                                                                   tmp_path):
    """`master serve --no-verify-checksums` (MySQL's source_verify_checksum=OFF): a bad CRC in a
    rows event of db2 no longer stops the master; a slave that never receives that event streams
    to the end, and one that receives it refuses it (its receiver checks every CRC)."""
    target = binlog_copy / "master-bin.000003"
    data = bytearray(target.read_bytes())
    reader = TailingReader(binlog_copy, "master-bin.000003")
    names, victim = {}, None
    for name, event in reader:
        if name != "master-bin.000003":
            break
        if event.type_code == EventType.TABLE_MAP:
            names[event.table_id] = event.table_map[1]
        elif event.is_rows and names.get(event.table_id) == "db2":
            victim = event
            break
    assert victim is not None
    data[victim.pos + victim.size - 6] ^= 0xFF  # a row-image byte: sizes and headers stay sound
    target.write_bytes(bytes(data))
    _, strict = master_factory(binlog_copy)
    with pytest.raises(Exception, match="CRC32 mismatch"):
        run_slave(strict, tmp_path / "strict", 71, rules=RuleSet(do_db=("db1",)))
    _, lenient = master_factory(binlog_copy, verify_checksums=False)
    slave = run_slave(lenient, tmp_path / "db1", 72, rules=RuleSet(do_db=("db1",)))
    assert slave.counters.events_received > 0
    with pytest.raises(Exception, match=f"CRC32 mismatch in {victim.type_name} event received from the master"):
        run_slave(lenient, tmp_path / "db2", 73, rules=RuleSet(do_db=("db2",)))
