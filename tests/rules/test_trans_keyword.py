"""Which Query texts a replica applies whatever its database filter: `Query_log_event::
is_trans_keyword` (MySQL sql/log_event.h; MariaDB the same without XA forms, which since
MDEV-33921 pass in an XA transaction's GTID groups), read on the raw text. The core's answer
(`stmt::framing`), Python's (`framing_statement`, which asks the core) and the statement facts
agree with a byte-by-byte transcription of the C comparisons; and a real MariaDB 10.11 replica
filtering itself ends with the data of one fed by `--replicate-do-db` applied master-side."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dumpfilter import _core
from dumpfilter.codec import EventType
from dumpfilter.codec import encode as enc
from dumpfilter.rules.statement_info import Kind
from dumpfilter.rules.statements import statement_tables
from dumpfilter.rules.transaction_filter import framing_statement, is_framing


def _strncmp(query: bytes, word: bytes, n: int, fold: bool) -> bool:
    """C's strncmp / strncasecmp (ASCII folding) == 0 over a NUL-terminated `query`."""
    a, b = query + b"\0", word + b"\0"
    for i in range(n):
        x, y = (a[i] if i < len(a) else 0), (b[i] if i < len(b) else 0)
        if fold:
            x, y = bytes([x]).lower()[0], bytes([y]).lower()[0]
        if x != y:
            return False
        if x == 0:
            return True
    return True


def is_trans_keyword(query: bytes) -> bool:
    """log_event.h as written: `q_len` for BEGIN/COMMIT, the keyword's length for the rest."""
    folded = (b"SAVEPOINT", b"ROLLBACK", b"XA START", b"XA END", b"XA PREPARE", b"XA COMMIT", b"XA ROLLBACK")
    return (_strncmp(query, b"BEGIN", len(query), False) or _strncmp(query, b"COMMIT", len(query), False)
            or any(_strncmp(query, w, len(w), True) for w in folded))


_FDE = enc.format_description("10.11.6-MariaDB-log", server_id=1)
_PIECES = ["BEGIN", "begin", "Begin", "BEG", "COMMIT", "commit", "COMMI", "SAVEPOINT", "savepoint", "SAVEPOIN",
           "ROLLBACK", "rollback", "ROLLBACK TO", "RELEASE SAVEPOINT", "XA", "xa", "XA START", "xa end", "XA PREPARE",
           "XA COMMIT", "XA ROLLBACK", "XA RECOVER", "START TRANSACTION", " ", "\n", "\t", "\0", "/* c */", "`a`",
           "'x'", "a", "é", "ſ", "K", ";", "INSERT INTO t VALUES (1)", "CREATE TABLE t (a INT)", "(", ")"]
_texts = st.one_of(st.lists(st.sampled_from(_PIECES), max_size=4).map("".join), st.text(max_size=12))


@settings(max_examples=2000, deadline=None)
@given(_texts)
def test_framing_is_is_trans_keyword(sql):
    raw = sql.encode("utf-8", "surrogateescape")
    want = is_trans_keyword(raw)
    assert _core.framing_statement(raw) is want
    assert framing_statement(sql) is want
    event = enc.build_event(EventType.QUERY, enc.query_body(sql, "d"), fmt=_FDE.fmt)
    assert is_framing(event) is want
    # The statement facts call only framing texts transaction statements (the rest meet db_ok).
    assert statement_tables(sql, "d").kind is not Kind.TRANSACTION or want


@pytest.mark.parametrize("sql, want", [
    ("BEGIN", True), ("COMMIT", True), ("", True), ("BEG", True), ("COMMIT\0x", True), ("SAVEPOINT `a`", True),
    ("savepoint a", True), ("ROLLBACK TO `a`", True), ("rollback work", True), ("XA END X'78',X'',1", True),
    ("xa commit 'x'", True), ("begin", False), ("Commit", False), ("BEGIN ", False), (" COMMIT", False),
    ("/* c */ ROLLBACK", False), ("RELEASE SAVEPOINT a", False), ("START TRANSACTION", False),
    ("XA RECOVER", False), ("XA  START 'x'", False), ("SAVEPOIN", False), ("BEGIN\0x", True), ("rollbackx", True),
    ("BEGINx", False), ("CREATE TABLE t (a INT)", False),
])
def test_framing_words(sql, want):
    assert framing_statement(sql) is want


# A real MariaDB replica against the same binlog filtered master-side ---------------------------
# Each unit: its Query texts (text, default database) in a GTID group ended by an XID, or by
# the last text when that is a Query ROLLBACK. Rows of keep.t say which texts were applied.
UNITS = [
    # "begin" (lower case) is no keyword: filtered, so 1 and 2 roll back together.
    [("INSERT INTO t VALUES (1)", "keep"), ("begin", "other"), ("INSERT INTO t VALUES (2)", "keep"),
     ("ROLLBACK", "keep")],
    # " COMMIT" (a blank first): filtered, so 3 and 4 roll back.
    [("INSERT INTO t VALUES (3)", "keep"), (" COMMIT", "other"), ("INSERT INTO t VALUES (4)", "keep"),
     ("ROLLBACK", "keep")],
    # Lower-case SAVEPOINT and ROLLBACK TO are keywords (strncasecmp): applied, 7 rolls back.
    [("savepoint b", "other"), ("INSERT INTO t VALUES (7)", "keep"), ("rollback to b", "other"),
     ("INSERT INTO t VALUES (8)", "keep")],
    # A comment before ROLLBACK: filtered, 9 and 10 commit.
    [("INSERT INTO t VALUES (9)", "keep"), ("/* c */ ROLLBACK", "other"), ("INSERT INTO t VALUES (10)", "keep")],
    # RELEASE SAVEPOINT is no keyword: filtered, so ROLLBACK TO a finds its savepoint (else error 1305).
    [("SAVEPOINT a", "keep"), ("INSERT INTO t VALUES (5)", "keep"), ("RELEASE SAVEPOINT a", "other"),
     ("ROLLBACK TO a", "keep"), ("INSERT INTO t VALUES (6)", "keep")],
]
APPLIED = [6, 8, 9, 10]  # what a MariaDB 10.11.19 replica with --replicate-do-db=keep holds after UNITS


def _binlog(directory) -> str:
    from dumpfilter.binlogs import BinlogSeriesWriter

    fde = enc.format_description("10.11.6-MariaDB-log", server_id=1, timestamp=1_700_000_000, created=1_700_000_000)

    def event(t, body, flags=0):
        return enc.build_event(t, body, fmt=fde.fmt, server_id=1, timestamp=1_700_000_000, flags=flags)

    with BinlogSeriesWriter(directory, "master-bin", fde,
                            start_state=event(EventType.MARIADB_GTID_LIST, b"\0" * 6)) as series:
        for seq, unit in enumerate(UNITS, 1):
            events = [event(EventType.MARIADB_GTID, enc.mariadb_gtid_body(seq), flags=0x08)]
            events += [event(EventType.QUERY, enc.query_body(sql, db)) for sql, db in unit]
            if unit[-1][0] != "ROLLBACK":
                events.append(event(EventType.XID, enc.xid_body(seq)))
            series.write_transaction(events)
    return series.close()[0].name


def test_master_side_do_db_leaves_what_a_real_replica_leaves(mariadb_factory, tmp_path):
    from dumpfilter.master.endpoint import MysqlEndpoint, ReplicaMap
    from dumpfilter.master.serve.grpc_server import create_server
    from tests.support.mysql_replicas import point_at, wait_applied

    first = _binlog(tmp_path / "binlogs")
    topology = tmp_path / "replicas.toml"
    topology.write_text('[[slaves]]\nname = "filtered"\nserver_id = 72\nflavor = "mariadb"\n'
                        'rules = ["replicate-do-db=keep"]\n')
    itself = mariadb_factory("itself", server_id=71, log_bin=False, options=["--replicate-do-db=keep"])
    fed = mariadb_factory("fed", server_id=72, log_bin=False)
    master, _port = create_server(tmp_path / "binlogs", "127.0.0.1:0")
    endpoint = MysqlEndpoint(master.service, "127.0.0.1:0", replicas=ReplicaMap.load(topology))
    try:
        for replica in (itself, fed):
            replica.execute(["CREATE DATABASE keep", "CREATE DATABASE other",
                             "CREATE TABLE keep.t (id INT PRIMARY KEY) ENGINE=InnoDB"])
            point_at(replica, endpoint.port, gtid=False, log_file=first)
        for replica in (itself, fed):
            wait_applied(replica, timeout=60)
            assert [r["id"] for r in replica.query("SELECT id FROM keep.t ORDER BY id")] == APPLIED, replica.name
    finally:
        endpoint.stop()
        master.stop(grace=1.0)
