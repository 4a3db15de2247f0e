"""TransactionFilter (through the dumpfilter.binlogs.filtering loop) on real fixtures and synthetic shapes: kept
Table_maps and rows, STMT_END_F moved, context events with their Query, Transaction_payload
re-packed, empty transactions kept or dropped, GTID transaction_length and log_pos right, and
mariadb-binlog reading every output."""

from __future__ import annotations

from collections import Counter

import pytest

from dumpfilter.codec import EventType
from dumpfilter.codec.constants import STMT_END_F
from dumpfilter.rules.transaction_filter import TransactionFilter
from tests.support.filtering import (Synth, assert_positions, assert_transaction_lengths, content_units, events_of, load,
                     mariadb_binlog_reads, run)

pytestmark = pytest.mark.fixtures


@pytest.fixture(scope="module")
def fixture(shared_fixtures):
    def get(name: str) -> bytes:
        return load(next(shared_fixtures.rglob(name)))
    return get


def tables_of(data: bytes) -> Counter:
    return Counter(e.table_map[1:] for e in events_of(data) if e.type_code == EventType.TABLE_MAP)


def rows_tables(data: bytes) -> list[tuple[str, str]]:
    maps, out = {}, []
    for e in events_of(data):
        if e.type_code == EventType.TABLE_MAP:
            maps[e.table_id] = e.table_map[1:]
        elif e.is_rows:
            out.append(maps[e.table_id])
    return out


# -- ROW: MySQL 5.7 over four schemas --------------------------------------------------------------
def test_row_do_db_keeps_only_that_schema(fixture):
    data = fixture("mysql-bin.checksum-crc32")
    out, stats, _ = run(data, [("replicate-do-db", "auth")])
    before, after = tables_of(data), tables_of(out)
    assert {db for db, _ in before} == {"auth", "menkor_dev", "simu_affair_dev", "simu_file_dev"}
    assert after == Counter({k: v for k, v in before.items() if k[0] == "auth"})
    assert rows_tables(out) == [t for t in rows_tables(data) if t[0] == "auth"]
    # every transaction's GTID survives (empty ones as GTID, BEGIN, XID)
    assert [u.gtid for u in content_units(out)] == [u.gtid for u in content_units(data)]
    assert stats.kept + stats.partial + stats.emptied == stats.transactions_in == 60
    assert stats.emptied > 0 and stats.kept > 0
    assert_positions(out)


def test_row_ignore_table_drops_its_maps_and_rows(fixture):
    data = fixture("mysql-bin.checksum-crc32")
    before = tables_of(data)
    victim = before.most_common(1)[0][0]
    out, stats, _ = run(data, [("replicate-ignore-table", ".".join(victim))])
    after = tables_of(out)
    assert victim not in after
    assert after == Counter({k: v for k, v in before.items() if k != victim})
    assert rows_tables(out) == [t for t in rows_tables(data) if t != victim]


def test_empty_transactions_keep_and_drop(fixture):
    data = fixture("mysql-bin.checksum-crc32")
    kept_out, kept_stats, _ = run(data, [("replicate-do-db", "auth")], empty="keep")
    drop_out, drop_stats, _ = run(data, [("replicate-do-db", "auth")], empty="drop")
    assert kept_stats.emptied == drop_stats.skipped > 0 and drop_stats.emptied == 0
    kept_units, drop_units = content_units(kept_out), content_units(drop_out)
    assert len(kept_units) == 60 and len(drop_units) == 60 - drop_stats.skipped
    empty = [u for u in kept_units if not any(e.type_code == EventType.TABLE_MAP for e in u.events)]
    assert len(empty) == kept_stats.emptied
    for unit in empty:  # what a MySQL replica persists: GTID, BEGIN, COMMIT (Xid)
        assert [e.type_code for e in unit.events] == [EventType.ANONYMOUS_GTID, EventType.QUERY, EventType.XID]
        assert unit.events[1].sql == "BEGIN"


def test_transaction_length_rewritten(fixture):
    data = fixture("binlog.000693")  # MySQL 8.0.31: GTIDs carry transaction_length
    before = tables_of(data)
    victim = before.most_common(1)[0][0]
    for empty in ("keep", "drop"):
        out, stats, _ = run(data, [("replicate-ignore-table", ".".join(victim))], empty=empty)
        assert victim not in tables_of(out)
        assert stats.emptied + stats.skipped + stats.partial > 0
        assert assert_transaction_lengths(out) == len([u for u in content_units(out) if u.gtid_event])
        assert_positions(out)


# -- STMT_END_F ------------------------------------------------------------------------------------
@pytest.mark.parametrize("flavor", ["mariadb", "mysql"])
@pytest.mark.parametrize("rows_order", [None, [1, 0]])
def test_stmt_end_moves_to_last_kept_rows_event(flavor, rows_order):
    synth = Synth(flavor)
    synth.rows_txn([[(1, "a", "t1"), (2, "b", "t2")]], rows_order=rows_order)  # multi-table statement
    synth.rows_txn([[(1, "a", "t1")], [(2, "b", "t2")]])                        # two statements
    data = synth.bytes()
    for fast in (True, False):
        out, stats, _ = run(data, [("replicate-ignore-db", "b")], flavor=flavor, fast=fast)
        units = content_units(out)
        assert stats.partial == 2
        for unit in units:
            rows = [e for e in unit.events if e.is_rows]
            assert [e.table_id for e in rows] == [1]
            assert rows[-1].rows_flags & STMT_END_F
            assert [e.table_map[1:] for e in unit.events if e.type_code == EventType.TABLE_MAP] == [("a", "t1")]
        # the annotation of the dropped statement goes with it
        annotations = [e for e in units[1].events if e.type_code in (EventType.ANNOTATE_ROWS, EventType.ROWS_QUERY)]
        assert len(annotations) == 1
        if flavor == "mysql":
            assert_transaction_lengths(out)
        assert_positions(out)


def test_dropping_the_first_rows_event_keeps_stmt_end_where_it_is():
    synth = Synth("mariadb")
    synth.rows_txn([[(1, "a", "t1"), (2, "b", "t2")]])
    out, _, _ = run(synth.bytes(), [("replicate-ignore-db", "a")], flavor="mariadb")
    rows = [e for e in events_of(out) if e.is_rows]
    assert [(e.table_id, e.rows_flags & STMT_END_F) for e in rows] == [(2, STMT_END_F)]


# -- STATEMENT: context events ----------------------------------------------------------------------
def test_context_events_travel_with_their_query(fixture):
    data = fixture("log.bin")  # 5.7 SBR: BEGIN, INTVAR, USER_VAR x3, INSERT, XID in db `default`
    types = [e.type_code for e in events_of(data)]
    assert types.count(EventType.USER_VAR) == 3 and types.count(EventType.INTVAR) == 1
    kept, stats, _ = run(data, [("replicate-do-db", "default")])
    assert kept == data and stats.kept == stats.transactions_in
    dropped, stats, _ = run(data, [("replicate-do-db", "other")])
    dtypes = [e.type_code for e in events_of(dropped)]
    assert EventType.USER_VAR not in dtypes and EventType.INTVAR not in dtypes
    assert not any(e.is_query and e.sql.startswith("INSERT") for e in events_of(dropped))
    assert stats.emptied == stats.transactions_in
    # MySQL 5.7 GTIDs stay: the replica's gtid_executed must still advance
    assert [u.gtid for u in content_units(dropped)] == [u.gtid for u in content_units(data)]


def test_context_events_of_a_mixed_fixture(fixture):
    data = fixture("ver_trunk_row_v2.001")  # USER_VAR, RAND, INTVAR, LOAD DATA blocks
    out, _, eng = run(data, [("replicate-ignore-db", "test")])
    for unit in content_units(out):
        types = [e.type_code for e in unit.events]
        # a context event is never left without a Query after it in its unit
        for i, t in enumerate(types):
            if t in (EventType.INTVAR, EventType.RAND, EventType.USER_VAR):
                assert any(e.is_query and e.sql != "BEGIN" for e in unit.events[i + 1:])
    for keep_all in ([], [("replicate-do-db", "test")]):
        same, _, _ = run(data, keep_all)
        kept_queries = [e.sql for e in events_of(same) if e.is_query]
        assert kept_queries == [e.sql for e in events_of(data) if e.is_query] or keep_all


# -- Transaction_payload ----------------------------------------------------------------------------
def test_compressed_payload_filtered_inside(fixture):
    data = fixture("mysql-bin.compressed")
    payload = next(e for e in events_of(data) if e.type_code == EventType.TRANSACTION_PAYLOAD)
    inner_table = next(e.table_map[1:] for e in payload.payload_events() if e.type_code == EventType.TABLE_MAP)
    kept, stats, _ = run(data, [("replicate-do-table", ".".join(inner_table))])
    assert kept == data and stats.kept == 1
    emptied, stats, _ = run(data, [("replicate-ignore-table", ".".join(inner_table))])
    assert stats.emptied == 1
    units = content_units(emptied)
    assert [e.type_code for e in units[0].events] == [EventType.ANONYMOUS_GTID, EventType.QUERY, EventType.QUERY]
    assert [e.sql for e in units[0].events[1:]] == ["BEGIN", "COMMIT"]
    assert assert_transaction_lengths(emptied) == 1


def test_payload_partly_kept_is_repacked():
    """A compressed payload with two tables, one filtered: re-packed, sizes and length fixed."""
    import zstandard

    from dumpfilter.codec import encode as enc
    from dumpfilter.codec.packing import encode_lenenc

    synth = Synth("mysql")
    synth.rows_txn([[(1, "a", "t1")], [(2, "b", "t2")]])
    data = synth.bytes()
    events = events_of(data)
    gtid, inner = events[1], events[2:]
    plain_fmt = gtid.fmt.without_checksums()
    plain = b"".join(enc.build_event(e.type_code, e.body, fmt=plain_fmt, log_pos=0).raw for e in inner)
    compressed = zstandard.ZstdCompressor().compress(plain)

    def field(kind, value):
        v = encode_lenenc(value)
        return bytes((kind,)) + encode_lenenc(len(v)) + v

    body = field(1, len(compressed)) + field(2, 0) + field(3, len(plain)) + b"\0" + compressed
    payload = enc.build_event(EventType.TRANSACTION_PAYLOAD, body, fmt=gtid.fmt)
    synth2 = Synth("mysql")
    synth2.events = [synth.fde, gtid, payload]
    source = synth2.bytes()
    assert assert_transaction_lengths(source) == 1
    for fast in (True, False):
        out, stats, _ = run(source, [("replicate-ignore-db", "b")], fast=fast)
        assert stats.partial == 1
        repacked = next(e for e in events_of(out) if e.type_code == EventType.TRANSACTION_PAYLOAD)
        inner_out = repacked.payload_events()
        assert [e.table_map[1:] for e in inner_out if e.type_code == EventType.TABLE_MAP] == [("a", "t1")]
        assert [e.table_id for e in inner_out if e.is_rows] == [1]
        assert repacked.transaction_payload[0][3] == sum(e.size for e in inner_out)
        assert assert_transaction_lengths(out) == 1


# -- MariaDB 11.8 STATEMENT chain -------------------------------------------------------------------
def test_mariadb_statement_files(fixture):
    data = fixture("mariadb-repl-bin.000005")
    same, stats, _ = run(data, [("replicate-do-db", "sbtest-repl")], flavor="mariadb")
    assert same == data and stats.kept == stats.transactions_in == 87
    out, stats, _ = run(data, [("replicate-ignore-db", "sbtest-repl")], flavor="mariadb")
    assert stats.emptied == 87
    units = content_units(out)
    assert [u.gtid for u in units] == [u.gtid for u in content_units(data)]
    for unit in units:  # MariaDB: GTID (not standalone) closed by COMMIT
        assert [e.type_code for e in unit.events] == [EventType.MARIADB_GTID, EventType.QUERY]
        assert not unit.events[0].is_standalone and unit.events[1].sql == "COMMIT"
    # MariaDB 11.4+ leaves log_pos 0 inside groups; the filter keeps those zeros
    zeros_in = sum(1 for e in events_of(data) if e.log_pos == 0)
    assert zeros_in and all(e.log_pos in (0, e.end_pos) for e in events_of(out))
    drop, stats, _ = run(data, [("replicate-ignore-db", "sbtest-repl")], flavor="mariadb", empty="drop")
    assert stats.skipped == 87 and not content_units(drop)


def test_filtered_ddl_becomes_an_empty_group():
    synth = Synth("mariadb")
    from dumpfilter.codec import encode as enc

    synth.events += [synth.ev(EventType.MARIADB_GTID, enc.mariadb_gtid_body(9, standalone=True) [:12]
                              + bytes([0x01 | 0x20]) + b"\0" * 6, flags=0x08),
                     synth.ev(EventType.QUERY, enc.query_body("CREATE TABLE t (id INT)", "b"))]
    out, stats, _ = run(synth.bytes(), [("replicate-ignore-db", "b")], flavor="mariadb")
    assert stats.emptied == 1
    gtid, commit = content_units(out)[0].events
    assert gtid.mariadb_gtid_flags & (0x01 | 0x20) == 0 and commit.sql == "COMMIT"


# -- fixtures: nothing lost, fast == reference --------------------------------------------------------
FIXTURES = ["mysql-bin.checksum-crc32", "binlog.000693", "binlog.000733", "log.bin", "ver_trunk_row_v2.001",
            "mysql-bin.sakila.gz", "mariadb-bin.000001", "mariadb-repl-bin.000006", "mysql-bin.compressed",
            "rpl_unfiltered_hidden_gcol.000001", "bug40482-bin.000001", "mysql-bin.aurora-padding",
            "binlog_transaction_with_GTID_TAG.000001"]
RULES = [[], [("replicate-do-db", "auth")], [("replicate-ignore-db", "test")],
         [("replicate-wild-ignore-table", "%.%a%")], [("replicate-wild-do-table", "hdb\\_meta.t%")]]


@pytest.mark.parametrize("name", FIXTURES)
def test_every_fixture_fast_equals_reference(fixture, name):
    data = fixture(name)
    for options in RULES:
        for empty in ("keep", "drop"):
            fast, fstats, _ = run(data, options, empty=empty, fast=True)
            slow, sstats, _ = run(data, options, empty=empty, fast=False)
            assert fast == slow, (name, options, empty)
            assert fstats.as_dict() == sstats.as_dict()
            if not options:
                assert fast == data
            # incidents are never filtered
            assert sum(e.type_code == EventType.INCIDENT for e in events_of(fast)) == \
                sum(e.type_code == EventType.INCIDENT for e in events_of(data))
            assert_transaction_lengths(fast)


@pytest.mark.mariadb
@pytest.mark.parametrize("name", [n for n in FIXTURES if n != "mysql-bin.compressed"])
def test_mariadb_binlog_reads_every_output(fixture, name, tmp_path):
    """Every output mariadb-binlog reads (CRCs verified), wherever it reads the input: it refuses a
    MySQL 9 GTID_TAGGED event and stops on an INCIDENT, in the input as in the output."""
    import subprocess

    data = fixture(name)
    source = tmp_path / "in.bin"
    source.write_bytes(data)
    refused = subprocess.run(["mariadb-binlog", "--no-defaults", str(source)], capture_output=True)
    if refused.returncode != 0:
        assert name in ("binlog_transaction_with_GTID_TAG.000001", "bug40482-bin.000001"), refused.stderr
        for i, options in enumerate(RULES[1:]):
            out, _, _ = run(data, options)
            path = tmp_path / f"out{i}.bin"
            path.write_bytes(out)
            again = subprocess.run(["mariadb-binlog", "--no-defaults", str(path)], capture_output=True)
            assert again.returncode != 0 and again.stderr.splitlines()[0] == refused.stderr.splitlines()[0]
        return
    for i, options in enumerate(RULES[1:]):
        out, _, _ = run(data, options)
        path = tmp_path / f"out{i}.bin"
        path.write_bytes(out)
        mariadb_binlog_reads(path)


@pytest.mark.mariadb
def test_mariadb_binlog_and_compressed_payloads(fixture, tmp_path):
    """mariadb-binlog refuses MySQL 8 TRANSACTION_PAYLOAD events outright (input included); once
    the filter has emptied the payload's transaction, the output is readable."""
    import subprocess

    data = fixture("mysql-bin.compressed")
    source = tmp_path / "in.bin"
    source.write_bytes(data)
    refused = subprocess.run(["mariadb-binlog", "--no-defaults", str(source)], capture_output=True)
    assert refused.returncode != 0 and b"TRANSACTION_PAYLOAD" in refused.stderr
    table = next(e.table_map[1:] for p in events_of(data) if p.type_code == EventType.TRANSACTION_PAYLOAD
                 for e in p.payload_events() if e.type_code == EventType.TABLE_MAP)
    out, stats, _ = run(data, [("replicate-ignore-table", ".".join(table))])
    assert stats.emptied == 1
    path = tmp_path / "out.bin"
    path.write_bytes(out)
    assert "COMMIT" in mariadb_binlog_reads(path)


@pytest.mark.parametrize("name", ["mariadb-bin.000001", "mysql-bin.checksum-crc32"])
def test_fast_equals_reference_without_renumbering(fixture, name, tmp_path, monkeypatch):
    """With positions kept as they are (relay logs), synthesised framing is whatever
    TransactionFilter builds: the fast path must leave those units to it."""
    from dumpfilter.binlogs import sinks
    from dumpfilter.binlogs.sinks import FileSink
    from dumpfilter.binlogs.filtering import filter_files
    from tests.oracles.filtering import reference_filter_files
    from tests.support.filtering import engine

    src = tmp_path / "in.bin"
    src.write_bytes(fixture(name))
    monkeypatch.setattr(sinks, "looks_like_relay_log", lambda path: True)  # kept as a relay log's positions are
    outputs = []
    for fast in (True, False):
        out = tmp_path / f"out-{fast}.bin"
        stats = (filter_files if fast else reference_filter_files)(
            [src], TransactionFilter(engine([("replicate-ignore-db", "toddy_test"), ("replicate-ignore-db", "auth")])),
            FileSink(out))
        assert stats.emptied > 0
        outputs.append(out.read_bytes())
    assert outputs[0] == outputs[1]
