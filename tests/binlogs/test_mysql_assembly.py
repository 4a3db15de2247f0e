"""`filter` over MySQL binlogs on the compiled assembly: a unit whose statements are all dropped is
written as its empty transaction, and one cut at its statements keeps its GTID and BEGIN, each
with its GTID's transaction_length made by the core (skip_forms::mysql), not by the per-unit
Python path (a 202 MB MySQL ROW binlog filtered with replicate-do-db took 31.9 s that way, 0.83 s
this way). What is checked is what a MySQL replica reads: every GTID of the source is there (a
replica with filters commits an empty transaction for each filtered GTID, so its GTID set stays
whole), each transaction_length is its transaction's size, each log_pos its event's end, the
rows kept are those of the kept tables and no other, and the units a rule keeps whole are the
source's own bytes."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dumpfilter.codec import EventType, group_transactions
from dumpfilter.codec.transactions import Transaction
from dumpfilter.workload import WorkloadSpec, generate
from tests.support.filtering import (assert_positions, assert_transaction_lengths, events_of, per_unit_units, run,
                                     statement_without_gtid)


@pytest.fixture(scope="module")
def mysql_binlog(tmp_path_factory) -> bytes:
    spec = WorkloadSpec(seed=11, schemas=3, tables_per_schema=2, transactions=400, binlog_format="row",
                        flavor="mysql", ddl_share=0.05, cross_db_share=0.3, statements_per_transaction=3)
    [path] = generate(spec, tmp_path_factory.mktemp("mysql"), "m-bin")
    return path.read_bytes()


def _gtids(data: bytes) -> list[str]:
    return [u.gtid for u in group_transactions(events_of(data)) if u.gtid_event is not None]


def _tables(data: bytes) -> list[tuple[str, str]]:
    return [e.table_map[1:] for e in events_of(data) if e.type_code == EventType.TABLE_MAP]


RULES = st.sampled_from([("replicate-do-db", "db1"), ("replicate-ignore-db", "db2"),
                         ("replicate-do-table", "db1.t1"), ("replicate-ignore-table", "db3.t2"),
                         ("replicate-wild-do-table", "db%.t1"), ("replicate-wild-ignore-table", "db1.%")])


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rules=st.lists(RULES, min_size=1, max_size=2, unique=True))
def test_a_mysql_file_filtered_reads_as_a_replica_reads_it(mysql_binlog, monkeypatch, rules):
    calls = []
    made = Transaction.emptied
    monkeypatch.setattr(Transaction, "emptied", lambda txn: calls.append(txn) or made(txn))
    out, stats, engine = run(mysql_binlog, rules)
    assert stats.emptied + stats.partial > 0 or stats.kept == stats.transactions_in
    assert calls == [], "an emptied MySQL unit went the per-unit way"
    assert _gtids(out) == _gtids(mysql_binlog)
    assert assert_transaction_lengths(out) == len(_gtids(out))
    assert_positions(out)
    kept = _tables(out)
    assert kept == [t for t in _tables(mysql_binlog) if engine.table_kept(*t)]
    source = {u.gtid: u for u in group_transactions(events_of(mysql_binlog)) if u.gtid_event is not None}
    for unit in group_transactions(events_of(out)):
        if unit.gtid_event is None:
            continue
        whole = source[unit.gtid]
        if unit.size == whole.size and all(e.type_code == s.type_code for e, s in zip(unit.events, whole.events)):
            assert [e.body for e in unit.events] == [e.body for e in whole.events]
        elif not [e for e in unit.events if e.is_rows or e.type_code == EventType.TABLE_MAP]:
            # an empty transaction: GTID, BEGIN, then the XID (or a COMMIT for a DDL)
            assert [e.type_code for e in unit.events][:2] == [EventType.GTID, EventType.QUERY]
            assert len(unit.events) == 3


@pytest.mark.parametrize("empty", ["keep", "drop"])
@pytest.mark.parametrize("rules", [[("replicate-do-db", "db1")], [("replicate-ignore-db", "db2")],
                                   [("replicate-wild-do-table", "db%.t1")]])
def test_mysql_ddl_is_answered_in_order_and_written_by_the_assembly(mysql_binlog, monkeypatch, rules, empty):
    """A MySQL DDL unit (its GTID and one Query) is decided by its text in stream order and
    written by the compiled assembly, kept whole or as its empty transaction (GTID, made-up BEGIN
    and COMMIT, transaction_length made by the core): none goes through TransactionFilter's
    per-unit path, and the bytes are the reference path's."""
    from dumpfilter.rules.transaction_filter import lone_statement

    lone = per_unit_units(monkeypatch, lambda txn: lone_statement(txn.events) is not None)
    reference, ref_stats, _ = run(mysql_binlog, rules, empty=empty, fast=False)
    ddl = len(lone)
    lone.clear()
    out, stats, _ = run(mysql_binlog, rules, empty=empty)
    assert ddl > 5 and lone == [], f"{len(lone)} of {ddl} MySQL DDL units went the per-unit way"
    assert out == reference
    assert stats.as_dict() == ref_stats.as_dict()


@pytest.mark.parametrize("source, rules", [
    ("osheroff-mysql-binlog-connector-java/mysql-bin.checksum-crc32", ["--replicate-ignore-db", "auth"]),
    ("mariadb-operator-mariadb-poc/domain_id_0", ["--replicate-wild-do-table", "sbtest%.%"]),
])
def test_a_rotate_is_dated_as_the_events_before_it(shared_fixtures, tmp_path, source, rules):
    """Each Rotate `filter --max-binlog-size` ends a file with is dated with the last timestamp
    written before it (BinlogWriter.last_timestamp), also after units the core assembled: those
    left the writer's date behind, and Rotates took the file's FDE date."""
    from dumpfilter.cli.app import main

    out = tmp_path / "out"
    assert main(["filter", str(shared_fixtures / source), "--out", str(out), *rules, "--max-binlog-size", "4000"]) == 0
    rotates = 0
    for path in sorted(out.glob("*-bin.0*")):
        events = events_of(path.read_bytes())
        if events[-1].type_code == EventType.ROTATE:
            rotates += 1
            assert events[-1].timestamp == [e.timestamp for e in events[:-1] if e.timestamp][-1], path.name
    assert rotates >= 3


@pytest.mark.parametrize("command", [["filter", "--replicate-ignore-db", "db2"], ["split", "--no-spark"]])
def test_each_file_opens_with_the_gtids_written_before_it(mysql_binlog, tmp_path, command):
    """A series' next file opens with a Previous_GTIDs of every GTID written before it (the
    source's own Previous_GTIDs is empty): the core reads the written units' untagged GTIDs as
    runs (`mysql_gtids_at`), per output, where a split's outputs hold every eighth gno."""
    from dumpfilter.cli.app import main
    from dumpfilter.codec.gtid import MysqlGtidSet

    source = tmp_path / "m-bin.000001"
    source.write_bytes(mysql_binlog)
    out = tmp_path / "out"
    assert main([command[0], str(source), "--out", str(out), *command[1:], "--max-binlog-size", "20000"]) == 0
    outputs = {p.name.rsplit(".", 1)[0] for p in out.glob("*.0*")}
    checked = 0
    for name in sorted(outputs):
        written = MysqlGtidSet()
        for path in sorted(out.glob(f"{name}.0*")):
            events = events_of(path.read_bytes())
            previous = next(e for e in events if e.type_code == EventType.PREVIOUS_GTIDS)
            assert previous.gtid_set == written, path.name
            for e in events:
                if e.type_code == EventType.GTID:
                    written.add(e.gtid_info.source, e.gtid_info.gno)
            checked += 1
    assert checked > len(outputs) * 2  # every output rotated


@pytest.mark.fixtures
@pytest.mark.parametrize("source, db", [("osheroff-mysql-binlog-connector-java/mysql-bin.sakila.gz", "sakila"),
                                        ("blackbeam-rust_mysql_common/ver_trunk_row_v2.001", "test")])
@pytest.mark.parametrize("option", ["replicate-do-db", "replicate-ignore-db"])
@pytest.mark.parametrize("empty", ["keep", "drop"])
def test_statements_without_a_gtid_are_written_by_the_assembly(shared_fixtures, monkeypatch, source, db, option,
                                                              empty):
    """A statement alone without a GTID (MySQL 5.5, and 5.6 with its GTIDs off: DDL, and every
    statement under autocommit) is decided by its text in stream order and written by the
    compiled assembly: kept whole, or left out (a replica leaves nothing of it, there being no
    GTID to commit empty), under either --empty-transactions; the bytes are the reference path's."""
    from tests.support.filtering import load

    data = load(shared_fixtures / source)
    alone = per_unit_units(monkeypatch, statement_without_gtid)
    reference, ref_stats, _ = run(data, [(option, db)], empty=empty, fast=False)
    statements = len(alone)
    alone.clear()
    out, stats, _ = run(data, [(option, db)], empty=empty)
    assert statements > 2 and alone == [], f"{len(alone)} of {statements} statements went the per-unit way"
    assert out == reference
    assert stats.as_dict() == ref_stats.as_dict()
    assert stats.skipped if option == "replicate-ignore-db" else stats.kept
