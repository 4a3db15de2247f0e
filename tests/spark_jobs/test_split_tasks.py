"""The pure split core: routing rules, per-schema ROW splitting, output validity, chunking."""

from __future__ import annotations

import subprocess
from collections import Counter

import pytest

from dumpfilter.codec import EventType, Transaction, group_transactions, read_events
from dumpfilter.codec import encode as enc
from dumpfilter.codec.constants import STMT_END_F
from dumpfilter.errors import RuleError
from dumpfilter.binlogs import BinlogSeriesWriter, binlog_paths
from dumpfilter.rules.ruleset import RuleSet, Settings
from dumpfilter.lab.sandbox import find_binary
from dumpfilter.spark_jobs.tasks.chunks import input_files, plan_chunks, source_header
from dumpfilter.spark_jobs.tasks.local import split_local
from dumpfilter.spark_jobs.tasks.routing import (
    ALL, Router, SplitConfig, config_from_maps, parse_map, schema_binlog_name, statement_route,
)
from tests.spark_jobs.helpers import check_series, same_tree, series_events
from tests.oracles.chunk_units import read_units

UUID = "6ba0ff1e-4d0b-11ef-9f4b-0242ac110002"


def _mysql_events(fde):
    fmt = fde.fmt

    def ev(type_code, body, flags=0):
        return enc.build_event(type_code, body, fmt=fmt, timestamp=1_700_000_000, flags=flags)

    def rows(table_id, end):
        return ev(EventType.WRITE_ROWS, enc.rows_body(table_id, b"\x00\x01\x00\x00\x00", ncols=1,
                                                      flags=STMT_END_F if end else 0))

    return ev, rows


def multi_schema_transaction():
    """One MySQL ROW transaction: statement 1 writes a.t1 and b.t2, statement 2 writes b.t2."""
    fde = enc.format_description("8.0.36")
    ev, rows = _mysql_events(fde)
    events = [
        ev(EventType.GTID, enc.mysql_gtid_body(UUID, 7, transaction_length=1)),
        ev(EventType.QUERY, enc.query_body("BEGIN", "a")),
        ev(EventType.TABLE_MAP, enc.table_map_body(100, "a", "t1")),
        ev(EventType.TABLE_MAP, enc.table_map_body(101, "b", "t2")),
        rows(100, end=False),
        rows(101, end=True),
        ev(EventType.TABLE_MAP, enc.table_map_body(101, "b", "t2")),
        rows(101, end=True),
        ev(EventType.XID, enc.xid_body(9)),
    ]
    data = b"\xfebin" + fde.raw + b"".join(e.raw for e in events)
    units = list(group_transactions(read_events(data)))
    assert [u.kind for u in units] == ["control", "transaction"]
    return units[1]


def test_multi_schema_row_transaction_is_split_per_schema():
    txn = multi_schema_transaction()
    routed = dict(Router(SplitConfig()).route(txn))
    assert sorted(routed) == ["a", "b"]
    a, b = routed["a"], routed["b"]
    assert [e.type_code for e in a] == [EventType.GTID, EventType.QUERY, EventType.TABLE_MAP,
                                        EventType.WRITE_ROWS, EventType.XID]
    assert [e.table_map[1] for e in a if e.type_code == EventType.TABLE_MAP] == ["a"]
    assert a[3].rows_flags & STMT_END_F  # moved from the dropped b.t2 rows event
    assert [e.table_map[1] for e in b if e.type_code == EventType.TABLE_MAP] == ["b", "b"]
    assert [bool(e.rows_flags & STMT_END_F) for e in b if e.is_rows] == [True, True]
    assert b[1].db == "b" and a[1].db == "a"  # each copy's BEGIN names its own schema
    for copy in (a, b):
        assert copy[0].gtid == txn.gtid
        assert copy[0].gtid_info.transaction_length == sum(e.size for e in copy)
        assert copy[-1].raw == txn.events[-1].raw


def _query_txn(sql, db, fmt_version="10.11.6-MariaDB-log"):
    fde = enc.format_description(fmt_version)
    gtid = enc.build_event(EventType.MARIADB_GTID, enc.mariadb_gtid_body(5, standalone=True), fmt=fde.fmt)
    query = enc.build_event(EventType.QUERY, enc.query_body(sql, db), fmt=fde.fmt)
    events = read_events(b"\xfebin" + fde.raw + gtid.raw + query.raw)
    return list(group_transactions(events))[1]


@pytest.mark.parametrize("sql, db, semantics, expected", [
    ("INSERT INTO t VALUES (1)", "a", "mysql", {"a"}),
    ("INSERT INTO b.t VALUES (1)", "a", "mysql", {"a"}),          # MySQL statement rule: default db
    ("INSERT INTO b.t VALUES (1)", "a", "effective", {"b"}),      # effective database
    ("UPDATE b.t, c.u SET t.v = 1, u.v = 2", "a", "effective", {"b", "c"}),
    ("CREATE TABLE b.t (id INT)", "a", "mysql", {"b"}),           # DDL goes with its schema
    ("DROP TABLE IF EXISTS t", "a", "mysql", {"a"}),
    ("ALTER TABLE c.t ADD COLUMN x INT", "", "mysql", {"c"}),
    ("CREATE DATABASE shop", "a", "mysql", {"shop"}),
    ("DROP DATABASE IF EXISTS shop", "", "effective", {"shop"}),
    ("GRANT SELECT ON *.* TO u@h", "", "mysql", set()),
    ("SET @x = 1", "a", "mysql", {"a"}),
])
def test_statement_routes(sql, db, semantics, expected):
    assert set(statement_route(sql, db, semantics).schemas) == expected


def test_cross_database_statement_takes_its_schema_as_default_db_only_when_fully_qualified():
    router = Router(SplitConfig(settings=Settings(semantics="effective")))
    [(name, events)] = router.route(_query_txn("INSERT INTO `b`.`t` (id) VALUES (1)", "a"))
    assert name == "b" and events[1].db == "b" and events[1].sql == "INSERT INTO `b`.`t` (id) VALUES (1)"
    [(name, events)] = router.route(_query_txn("INSERT INTO b.t SELECT * FROM u", "a"))
    assert name == "b" and events[1].db == "a"  # `u` means a.u: the default database must stay


def test_events_of_no_schema_go_to_the_unassigned_binlog_or_nowhere():
    txn = _query_txn("GRANT SELECT ON *.* TO u@h", "")
    assert [n for n, _ in Router(SplitConfig()).route(txn)] == ["unassigned"]
    router = Router(SplitConfig(unassigned=None))
    assert router.route(txn) == [] and router.stats.dropped_units == 1


@pytest.mark.parametrize("text, field, value", [
    ("shop=replicate-wild-do-table=shop%.%", "wild_do_table", ("shop%.%",)),
    ("shop=shop%", "wild_do_table", ("shop%.%",)),
    ("shop=db1.t%", "wild_do_table", ("db1.t%",)),
    ("x=--replicate-do-db=db1", "do_db", ("db1",)),
    ("x=CHANGE REPLICATION FILTER REPLICATE_IGNORE_DB = (db2)", "ignore_db", ("db2",)),
])
def test_parse_map(text, field, value):
    assert getattr(parse_map(text).rules, field) == value


@pytest.mark.parametrize("text", ["noequals", "bad name=db1", "x=", "x-bin=db1", "x=replicate-do-db"])
def test_parse_map_errors(text):
    with pytest.raises(RuleError):
        parse_map(text)


def test_repeated_map_names_add_rules_and_effective_rules_need_effective_semantics():
    config = config_from_maps(["s=replicate-do-db=a", "s=replicate-do-db=b"])
    assert config.maps[0].rules == RuleSet(do_db=("a", "b"))
    with pytest.raises(RuleError, match="effective"):
        config_from_maps(["s=CHANGE MASTER TO DO='a.%'"])
    assert config_from_maps(["s=CHANGE MASTER TO DO='a.%'"], Settings(semantics="effective")).maps


def test_schema_names_are_encoded_as_safe_file_names():
    assert schema_binlog_name("shop_1$") == "shop_1$"
    assert schema_binlog_name("my-db.x") == "my@002ddb@002ex"


def _content(events):
    """Rows and Table_map events, without flags that splitting may move."""
    return Counter((e.type_code, e.body[:-2] if e.is_rows else e.body) for e in events
                   if e.is_rows or e.type_code == EventType.TABLE_MAP)


@pytest.mark.parametrize("workload", ["row-mariadb", "statement-mariadb", "mixed-mysql"])
def test_split_outputs_are_valid_series_and_lose_no_row_event(workloads, workload, tmp_path):
    src = workloads[workload]
    result = split_local([src], tmp_path / "out", SplitConfig(), max_size=20_000, chunk_bytes=None)
    header = source_header(input_files([src]))
    assert len(result.outputs) == 4 and result.stats.incomplete == 0
    out_events = []
    for summary in result.outputs:
        files = check_series(tmp_path / "out", summary.name, header.start_state)
        assert len(files) > 1  # rotation at --max-binlog-size happened
        out_events += series_events(tmp_path / "out", summary.name)
    in_events = [e for path in binlog_paths(src) for e in read_events(path.read_bytes())]
    assert _content(out_events) == _content(in_events)
    gtids_in = {e.gtid for e in in_events if e.is_gtid}
    assert {e.gtid for e in out_events if e.is_gtid} == gtids_in


def test_chunked_reading_gives_the_same_units_and_bytes(workloads, tmp_path):
    src = workloads["row-mariadb"]
    paths = input_files([src])
    chunks = plan_chunks(paths, 15_000)
    assert len(chunks) > 2 * len(paths)
    whole = [u.events[0].raw for c in plan_chunks(paths, None) for u in read_units(c)]
    cut = [u.events[0].raw for c in chunks for u in read_units(c)]
    assert whole == cut
    split_local([src], tmp_path / "whole", SplitConfig(), max_size=30_000, chunk_bytes=None)
    split_local([src], tmp_path / "cut", SplitConfig(), max_size=30_000, chunk_bytes=15_000)
    same_tree(tmp_path / "whole", tmp_path / "cut")


def test_incident_goes_to_every_output(tmp_path):
    fde = enc.format_description("10.11.6-MariaDB-log")
    fmt = fde.fmt

    def ev(t, body, flags=0):
        return enc.build_event(t, body, fmt=fmt)

    def ddl(seq, sql, db):
        return [ev(EventType.MARIADB_GTID, enc.mariadb_gtid_body(seq, standalone=True)),
                ev(EventType.QUERY, enc.query_body(sql, db))]

    incident = ev(EventType.INCIDENT, b"\x01\x00\x04lost")
    with BinlogSeriesWriter(tmp_path / "in", "m-bin", fde) as series:
        series.write_transaction(ddl(1, "CREATE DATABASE a", "a"))
        series.write_transaction([incident])
        series.write_transaction(ddl(2, "CREATE DATABASE b", "b"))
    result = split_local([tmp_path / "in"], tmp_path / "out", SplitConfig(), chunk_bytes=None)
    assert [s.name for s in result.outputs] == ["a", "b"]
    for name in ("a", "b"):
        types = [e.type_code for e in series_events(tmp_path / "out", name)]
        assert types.count(EventType.INCIDENT) == 1
    event = read_events(b"\xfebin" + fde.raw + incident.raw)[1]
    [(name, events)] = Router(SplitConfig()).route(Transaction("control", [event]))
    assert name == ALL and [e.raw for e in events] == [incident.raw]


def test_map_mode_sends_a_transaction_to_every_matching_binlog(workloads, tmp_path):
    config = config_from_maps(["first=db1%", "both=replicate-wild-do-table=db%.%", "two=db2.%"])
    result = split_local([workloads["row-mariadb"]], tmp_path / "out", config, chunk_bytes=None)
    units = {s.name: s.units for s in result.outputs}
    assert set(units) == {"first", "both", "two"}  # nothing is left for `unassigned`
    assert units["both"] == result.stats.units - _control_units(workloads["row-mariadb"])
    assert units["first"] < units["both"] and units["two"] < units["both"]


def _control_units(src):
    return sum(1 for p in binlog_paths(src) for u in group_transactions(read_events(p.read_bytes()))
               if u.kind == "control")


@pytest.mark.mariadb
def test_mariadb_binlog_reads_every_output(workloads, tmp_path):
    tool = find_binary("mariadb-binlog")
    for workload in ("row-mariadb", "statement-mariadb", "mixed-mysql"):
        out = tmp_path / workload
        result = split_local([workloads[workload]], out, SplitConfig(settings=Settings(semantics="effective")),
                             max_size=20_000, chunk_bytes=None)
        for summary in result.outputs:
            run = subprocess.run([tool, "--no-defaults", *[str(out / f) for f in summary.files]],
                                 capture_output=True, timeout=60)
            assert run.returncode == 0 and not run.stderr, run.stderr.decode()[:500]
            assert b"ERROR" not in run.stdout
