"""Issue #57: a real MariaDB MIXED binlog of an application writing UTF-8 text (bench.utf8_binlog's
clients: names like 'José Müller', prose holding 'select', '-- ', '#', values escaped by the
client library) goes through `filter` by statement key: string literals are values, so the core's
key reads past them. Before, a byte outside ASCII or a cue anywhere in a text, a literal's
included, sent that statement to the Python parser: every DML statement of this workload."""

from __future__ import annotations

import pytest

from bench.utf8_binlog import _client
from dumpfilter import _core
from dumpfilter.binlogs.filtering import filter_files
from dumpfilter.binlogs.sinks import FileSink
from dumpfilter.codec import BinlogReader
from dumpfilter.rules.evaluate import RuleEngine
from dumpfilter.rules.ruleset import RuleSet, Settings
from dumpfilter.rules.statements import statement_tables
from dumpfilter.rules.transaction_filter import TransactionFilter
from tests.binlogs.test_statement_path import Counting, PerStatement

pytestmark = [pytest.mark.mariadb, pytest.mark.timeout(300)]

DML = ("INSERT", "REPLACE", "UPDATE", "DELETE")


@pytest.fixture(scope="module")
def utf8_binlog(tmp_path_factory):
    """A real MariaDB MIXED binlog: 2 clients of 200 transactions each, in app1 and app2."""
    from dumpfilter.lab.sandbox import MariaDBServer

    with MariaDBServer("utf8keys", server_id=1, binlog_format="MIXED") as server:
        setup = []
        for s in (1, 2):
            setup += [f"CREATE DATABASE app{s} CHARACTER SET utf8mb4",
                      f"CREATE TABLE app{s}.users (id BIGINT PRIMARY KEY, name VARCHAR(80), bio TEXT)",
                      f"CREATE TABLE app{s}.comments (id BIGINT PRIMARY KEY, author VARCHAR(80), body TEXT)"]
        server.execute(setup)
        for k in (1, 2):
            _client(server.port, f"app{k}", 200, k)
        server.flush_logs()
        out = tmp_path_factory.mktemp("utf8") / "bin.000001"
        out.write_bytes(server.binlog_files()[0].read_bytes())
    return out


def _dml(path):
    with open(path, "rb") as f:
        for event in BinlogReader(f):
            if event.is_query and event.sql and event.sql.split(None, 1)[0].upper() in DML:
                yield event.db, event.sql


def test_utf8_values_are_keyed_and_agree_with_the_parser(utf8_binlog):
    """Every DML text whose literals end alike under every sql_mode is keyed (all but the names
    with an apostrophe, which the client writes as `\\'`), and each key is the parser's."""
    keyed = total = apostrophes = 0
    for db, sql in _dml(utf8_binlog):
        total += 1
        apostrophes += "\\'" in sql
        key = _core.statement_key(sql.encode("utf-8", "surrogateescape"))
        if key is None:
            continue
        keyed += 1
        info = statement_tables(sql, db)
        assert info.updated == (((key.db or db.encode()).decode(), key.table.decode()),), sql
    assert total >= 2000 and 0 < apostrophes < total / 2
    assert keyed == total - apostrophes, (keyed, total, apostrophes)


@pytest.mark.parametrize("rules", [{"do_db": ["app1"]}, {"do_table": ["app2.users"]}], ids=str)
def test_filter_answers_them_by_key(utf8_binlog, tmp_path, rules):
    """`filter` writes the reference path's bytes (every statement decided on its own), deciding
    in Python only the units of the statements the key declines (the apostrophes) and the DDL."""
    engine = Counting(RuleSet(**rules), Settings(flavor="mariadb"))
    stats = filter_files([utf8_binlog], TransactionFilter(engine), FileSink(tmp_path / "keys.bin"))
    reference = PerStatement(RuleEngine(RuleSet(**rules), Settings(flavor="mariadb")))
    filter_files([utf8_binlog], TransactionFilter(reference), FileSink(tmp_path / "ref.bin"))
    assert (tmp_path / "keys.bin").read_bytes() == (tmp_path / "ref.bin").read_bytes()
    by_python = engine.asked - stats.statement_keys
    dml = list(_dml(utf8_binlog))
    declined = sum(_core.statement_key(sql.encode()) is None for _, sql in dml)
    # A unit with a declined statement is decided in Python whole (its five statements).
    assert stats.statements_by_key >= len(dml) - 5 * declined > len(dml) / 2, (stats.statements_by_key, declined)
    assert by_python <= 5 * declined + 20, (by_python, declined, stats.statements_by_key)


@pytest.mark.parametrize("rules", [{"do_db": ["app1"]}], ids=str)
def test_apostrophes_are_keyed_where_the_query_says_how_it_reads(utf8_binlog, tmp_path, rules):
    """A Query's status variables say how the server read its literals: sql_mode without
    NO_BACKSLASH_ESCAPES (MariaDB's default) and a utf8mb4 client, in which a backslash byte is
    always a backslash. The walk then reads `'O\\'Brien'` as the server did, and keys the
    statements the text alone leaves in doubt (before: every unit holding one went to Python)."""
    engine = Counting(RuleSet(**rules), Settings(flavor="mariadb"))
    stats = filter_files([utf8_binlog], TransactionFilter(engine), FileSink(tmp_path / "keys.bin"))
    reference = PerStatement(RuleEngine(RuleSet(**rules), Settings(flavor="mariadb")))
    filter_files([utf8_binlog], TransactionFilter(reference), FileSink(tmp_path / "ref.bin"))
    assert (tmp_path / "keys.bin").read_bytes() == (tmp_path / "ref.bin").read_bytes()
    dml = list(_dml(utf8_binlog))
    declined = sum(_core.statement_key(sql.encode()) is None for _, sql in dml)
    assert declined > 0  # the text alone leaves them in doubt
    assert stats.statements_by_key == len(dml), (stats.statements_by_key, len(dml), declined)
    assert engine.asked - stats.statement_keys <= 20  # the DDL
