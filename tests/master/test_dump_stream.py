"""Slaves with different rules and skip policies receive exactly what the offline filter keeps;
bytes are accounted per policy; heartbeats never go backwards; ChangeFilter waits for a boundary."""

from __future__ import annotations

import threading

import grpc
import pytest

from dumpfilter.codec import EventType, group_transactions
from dumpfilter.binlogs import TailingReader, write_index
from dumpfilter.v1 import dump_pb2, dump_pb2_grpc
from dumpfilter.rules.evaluate import RuleEngine
from dumpfilter.rules.ruleset import RuleSet, Settings
from dumpfilter.codec import fix_transaction_length
from dumpfilter.rules.transaction_filter import EMPTIED, KEEP, KEPT, PARTIAL, TransactionFilter, is_framing
from dumpfilter.codec.rename import rewrite_event

from tests.support.dump_helpers import relay_units, run_slave, split_events

pytestmark = [pytest.mark.grpc, pytest.mark.timeout(120)]

MYSQL_WORKLOAD = dict(seed=9, transactions=600, flavor="mysql", binlog_format="mixed", ddl_share=0.1,
                      max_binlog_size=60_000)

SLAVES = [
    (11, RuleSet(do_db=("db1",)), "heartbeat"),
    (12, RuleSet(ignore_db=("db2",), wild_ignore_table=("db3.t1%",)), "placeholder"),
    (13, RuleSet(do_table=("dbx.t1",), wild_do_table=("db4.%",), rewrite_db=(("db5", "dbx"),)), "empty-transaction"),
]


def expected_units(binlog_dir, rules: RuleSet, policy: str):
    """What the slave's relay log must hold: the offline TransactionFilter's answer per transaction,
    plus what the skip policy leaves in a relay log, with rewrite-db applied."""
    engine = RuleEngine(rules, Settings())
    tf = TransactionFilter(engine, empty_transactions=KEEP)

    def rename(db: str, table: str) -> tuple[str, str, bool]:
        new, changed = engine.rewrite_db(db)
        return new, table, changed

    out = []
    events = [e for _, e in TailingReader(binlog_dir)]
    for txn in group_transactions(events):
        if txn.kind == "control":
            continue
        result = tf.filter(txn)
        if result.outcome in (KEPT, PARTIAL):
            kept = result.events
        elif policy == "empty-transaction" and result.outcome == EMPTIED:
            kept = result.events
        elif policy == "placeholder":
            # The slave drops the placeholders; a bodiless GTID (a skipped DDL) becomes the
            # empty transaction, and transaction_length counts what is left.
            framing = [e for e in txn.events if is_framing(e)]
            bodiless = len(framing) == 1 and framing[0].is_gtid
            kept = txn.emptied() if bodiless else fix_transaction_length(framing)
        else:
            kept = []
        if kept:
            out.append(tuple(rewrite_event(e, rename).raw for e in kept))
    return out


@pytest.mark.parametrize("server_id, rules, policy", SLAVES, ids=[p for _, _, p in SLAVES])
def test_slave_relay_log_equals_offline_filter(workload_dir, master_factory, tmp_path, server_id, rules, policy):
    master, address = master_factory(workload_dir)
    slave = run_slave(address, tmp_path / "relay", server_id, rules=rules, skip_policy=policy, relay_log_size=300_000)
    assert slave.counters.check_disagreements == 0
    got = relay_units(tmp_path / "relay")
    want = expected_units(workload_dir, rules, policy)
    assert len(got) == len(want)
    assert got == want
    stats = master.service.slaves[server_id].stats
    # Every byte on the wire is a kept event or the policy's own events, accounted separately.
    assert stats.bytes_sent == (stats.kept_bytes + stats.heartbeat_bytes + stats.placeholder_bytes
                                + stats.empty_transaction_bytes)
    # The slave stops once caught up; a busy machine can let the master queue one idle heartbeat
    # the slave never reads (counted as sent). Nothing else may differ.
    unread = stats.heartbeats - slave.counters.heartbeats
    assert unread in (0, 1)
    assert slave.counters.bytes_received == stats.bytes_sent - unread * (stats.heartbeat_bytes // max(stats.heartbeats, 1))
    if policy == "heartbeat":
        assert stats.heartbeats > 0 and stats.placeholders == 0 and stats.empty_transactions == 0
    elif policy == "placeholder":
        assert stats.placeholders > 0 and stats.heartbeats == unread
    else:
        assert stats.empty_transactions > 0 and stats.placeholders == 0


def test_three_slaves_at_once_share_one_read(workload_dir, master_factory, tmp_path):
    master, address = master_factory(workload_dir)
    errors = []

    def one(server_id, rules, policy):
        try:
            run_slave(address, tmp_path / str(server_id), server_id, rules=rules, skip_policy=policy)
        except Exception as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=one, args=s) for s in SLAVES]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    for server_id, rules, policy in SLAVES:
        assert relay_units(tmp_path / str(server_id)) == expected_units(workload_dir, rules, policy)
    segments = master.service.segments
    assert segments.hits + segments.reads >= 3 * segments.reads // 3  # served from one shared cache
    assert segments.reads < 3 * len(list(workload_dir.glob("master-bin.0*"))) + 10


def _stream_events(stub, server_id, start=None):
    request = dump_pb2.DumpRequest(server_id=server_id, heartbeat_period=0.2)
    if start:
        request.position.file, request.position.pos = start
    fmt = None
    for batch in stub.Dump(request, timeout=30):
        events, fmt = split_events(batch.events, fmt)
        yield batch, events


def test_heartbeats_never_go_backwards_and_name_the_file(workload_dir, master_factory):
    master, address = master_factory(workload_dir)
    with grpc.insecure_channel(address) as channel:
        stub = dump_pb2_grpc.DumpFilterStub(channel)
        stub.Register(dump_pb2.RegisterRequest(server_id=21, filters=[dump_pb2.ChannelFilters(
            rules=dump_pb2.RuleList(rules=[dump_pb2.FilterRule(type=dump_pb2.REPLICATE_DO_DB, value="db6")]))]))
        file = "master-bin.000001"  # the stream starts at the first file
        last = (file, 0)
        heartbeats = 0
        for batch, events in _stream_events(stub, 21):
            for e in events:
                if e.type_code == EventType.FORMAT_DESCRIPTION:
                    continue
                if e.type_code == EventType.ROTATE:
                    pos, file = e.rotate
                    last = (file, pos)
                    continue
                if e.type_code == EventType.HEARTBEAT:
                    heartbeats += 1
                    assert e.heartbeat[0] == file
                if e.log_pos:
                    here = (file, e.log_pos)
                    assert here >= last, f"{e} goes back from {last}"
                    last = here
            assert (batch.position.file, batch.position.pos) >= last
            if batch.caught_up:
                break
        assert heartbeats > 0


def test_change_filter_takes_effect_at_a_transaction_boundary(binlog_copy, master_factory, tmp_path):
    """The stream reaches the end of a growing binlog, the filter changes, more binlog arrives:
    everything before the reported position was filtered with the old rules, everything after
    with the new ones, and the position is a transaction boundary."""
    files = sorted(binlog_copy.glob("master-bin.0*"))
    boundaries = {4}
    for txn in group_transactions([e for _, e in TailingReader(binlog_copy)]):
        boundaries.add(txn.events[-1].end_pos)
    later = tmp_path / "later"
    later.mkdir()
    for path in files[4:]:
        path.rename(later / path.name)
    write_index(binlog_copy / "master-bin.index", [p.name for p in files[:4]])
    master, address = master_factory(binlog_copy)
    with grpc.insecure_channel(address) as channel:
        stub = dump_pb2_grpc.DumpFilterStub(channel)
        stub.Register(dump_pb2.RegisterRequest(server_id=31, filters=[dump_pb2.ChannelFilters(
            change_replication_filter="CHANGE REPLICATION FILTER REPLICATE_DO_DB = (db1)")]))
        tables: list[tuple[tuple[str, int], str]] = []
        file = files[0].name
        reply = None
        for batch, events in _stream_events(stub, 31):
            for e in events:
                if e.type_code == EventType.ROTATE:
                    file = e.rotate[1]
                elif e.type_code == EventType.TABLE_MAP:
                    tables.append(((file, e.log_pos), e.table_map[1]))
            if batch.caught_up and reply is None:
                reply = stub.ChangeFilter(dump_pb2.ChangeFilterRequest(
                    server_id=31, change_replication_filter="CHANGE REPLICATION FILTER REPLICATE_DO_DB = (db2)"),
                    timeout=20)
                for path in files[4:]:
                    (later / path.name).rename(path)
                write_index(binlog_copy / "master-bin.index", [p.name for p in files])
            elif batch.caught_up:
                break
    assert reply.applied_to_running_stream
    at = (reply.effective_at.file, reply.effective_at.pos)
    assert at[1] in boundaries
    before = {db for pos, db in tables if pos < at}
    after = {db for pos, db in tables if pos > at}
    assert before == {"db1"}
    assert after == {"db2"}


@pytest.mark.parametrize("policy", ["placeholder", "empty-transaction", "heartbeat"])
def test_mysql_gtids_with_skipped_ddl(tmp_path, master_factory, policy):
    """MySQL GTID transactions, including skipped DDL (a GTID and one statement): the relay log
    holds whole transactions with a right transaction_length under every skip policy."""
    from dumpfilter.workload.generator import WorkloadSpec, generate
    binlog_dir = tmp_path / "binlog"
    generate(WorkloadSpec(**MYSQL_WORKLOAD), binlog_dir)
    rules = RuleSet(do_db=("db2",))
    master, address = master_factory(binlog_dir)
    run_slave(address, tmp_path / "relay", 21, rules=rules, skip_policy=policy)
    assert relay_units(tmp_path / "relay") == expected_units(binlog_dir, rules, policy)
    events = [e for _, e in TailingReader(tmp_path / "relay")]
    units = [u for u in group_transactions(events) if u.gtid_event is not None]
    assert units and all(u.complete for u in units)
    assert all(u.gtid_event.gtid_info.transaction_length == u.size for u in units)
    if policy != "heartbeat":
        # every GTID of the source reaches the slave
        source = [u.gtid for u in group_transactions(e for _, e in TailingReader(binlog_dir))
                  if u.gtid_event is not None]
        assert [u.gtid for u in units] == source


def test_effective_slave_applies_wl2516_rewrite_to_table_maps(workload_dir, master_factory, tmp_path):
    """WL#2516 REWRITE under effective semantics, done by the slave (WL#2387 keeps rewriting
    there): `db5.%->dbx.%` moves db5's tables to dbx and `db1.t1->db1.t9` renames one table, in
    the Table_maps written to the relay log (CRCs recomputed: the relay log reads back verified);
    which events arrive is the master's effective-mode decision on the master's names (DO/IGNORE
    before REWRITE: the seed's own example, dumpfilter.rules.effective._effective_decision)."""
    rules = RuleSet(effective_do=("db5.%", "db1.%"), effective_ignore=("%.%",),
                    effective_rewrite=(("db1.t1", "db1.t9"), ("db5.%", "dbx.%")))
    settings = Settings(semantics="effective")
    master, address = master_factory(workload_dir)
    run_slave(address, tmp_path / "relay", 21, rules=rules, settings=settings)
    relayed = [e for _, e in TailingReader(tmp_path / "relay")]
    relay_maps = [e.table_map[1:] for e in relayed if e.type_code == EventType.TABLE_MAP]
    engine = RuleEngine(rules, settings)
    tf = TransactionFilter(engine, empty_transactions=KEEP)
    source = [e for _, e in TailingReader(workload_dir)]
    kept_maps = []
    for txn in group_transactions(source):
        if txn.kind != "control":
            kept_maps += [e.table_map[1:] for e in tf.filter(txn).events if e.type_code == EventType.TABLE_MAP]
    assert {db for db, _ in kept_maps} == {"db1", "db5"}
    renamed = [("dbx", t) if db == "db5" else ("db1", "t9") if (db, t) == ("db1", "t1") else (db, t)
               for db, t in kept_maps]
    assert relay_maps == renamed
    assert ("db1", "t9") in relay_maps and not any(db == "db5" for db, _ in relay_maps)
