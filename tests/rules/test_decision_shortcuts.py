"""The decision shortcuts (#11) answer exactly what the long way answers: a rule engine without table
rules remembers statement answers per (kind, named database, default database), and
TransactionFilter takes a GTID-and-one-statement unit without its event loop."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dumpfilter.codec import Transaction
from dumpfilter.codec.transactions import STATEMENT
from dumpfilter.rules.evaluate import RuleEngine
from dumpfilter.rules.ruleset import RuleSet, Settings
from dumpfilter.rules.transaction_filter import TransactionFilter
from tests.rules.test_lint_cases import Build

DBS = ("db1", "db2", "Db1", "")
TEMPLATES = (
    "CREATE TABLE t{n} (a int)", "DROP TABLE IF EXISTS t{n}, {db}.u{n}", "ALTER TABLE {db}.t{n} ADD b int",
    "INSERT INTO t{n} VALUES (1)", "UPDATE {db}.t{n} SET a = 1", "CREATE DATABASE {db}x", "DROP DATABASE {db}",
    "ALTER DATABASE {db} CHARACTER SET utf8", "GRANT SELECT ON *.* TO u{n}", "CREATE PROCEDURE p{n}() BEGIN END",
    "TRUNCATE {db}.t{n}", "BEGIN", "COMMIT", "UPDATE t1 JOIN t2 ON t1.a = t2.a SET t1.a = {n}",
    "CREATE TRIGGER tr{n} AFTER INSERT ON t{n} FOR EACH ROW SET @x = 1", "DROP TRIGGER tr{n}",
    "SET @a = {n}", "this is not sql {n}",
)
STATEMENTS = st.tuples(st.sampled_from(TEMPLATES), st.integers(0, 3), st.sampled_from(DBS), st.sampled_from(DBS)).map(
    lambda x: (x[0].format(n=x[1], db=x[2] or "db9"), x[3] or None))
DB_RULES = st.builds(
    RuleSet,
    do_db=st.lists(st.sampled_from(DBS[:3]), max_size=2).map(tuple),
    ignore_db=st.lists(st.sampled_from(DBS[:3]), max_size=2).map(tuple),
    rewrite_db=st.lists(st.tuples(st.sampled_from(DBS[:3]), st.sampled_from(("db2", "dbz"))), max_size=1).map(tuple),
    binlog_do_db=st.lists(st.sampled_from(DBS[:3]), max_size=1).map(tuple),
)


def _same(a, b) -> bool:
    return (a.apply, a.reason, a.rule, a.tables, a.counted, a.assumption) == (
        b.apply, b.reason, b.rule, b.tables, b.counted, b.assumption)


@settings(max_examples=300, deadline=None)
@given(DB_RULES, st.sampled_from(("mysql", "mariadb")), st.sampled_from((0, 1)), st.lists(STATEMENTS, min_size=1, max_size=25))
def test_answers_remembered_per_database_equal_a_fresh_engines(rules, flavor, lctn, statements):
    settings_ = Settings(flavor=flavor, lower_case_table_names=lctn)
    warm = RuleEngine(rules, settings_)
    for i, (sql, db) in enumerate(statements):
        fresh = RuleEngine(rules, settings_)
        fresh._by_database = _NeverRemembers()
        for earlier_sql, earlier_db in statements[:i]:  # the same history (schema model, triggers)
            fresh.decide_statement(earlier_sql, earlier_db)
        got, expected = warm.decide_statement(sql, db), fresh.decide_statement(sql, db)
        assert _same(got, expected), (sql, db, got, expected)


class _NeverRemembers(dict):
    def __setitem__(self, key, value):
        pass


def test_table_rules_turn_the_memory_off():
    engine = RuleEngine(RuleSet(do_db=("db1",), ignore_table=("db1.secret",)))
    assert engine.decide_statement("DROP TABLE t1", "db1").apply
    assert not engine.decide_statement("DROP TABLE secret", "db1").apply
    assert not engine._by_database
    db_only = RuleEngine(RuleSet(do_db=("db1",)))
    first = db_only.decide_statement("DROP TABLE t1", "db1")
    second = db_only.decide_statement("DROP TABLE t2", "db1")
    assert len(db_only._by_database) == 1 and first.apply and second.apply
    assert (first.tables, second.tables) == (("db1.t1",), ("db1.t2",))


@pytest.mark.parametrize("flavor", ["mariadb", "mysql"])
@pytest.mark.parametrize("sql", ["CREATE TABLE t1 (a int)", "DROP TABLE t1", "COMMIT", "BEGIN", "not sql"])
@pytest.mark.parametrize("rules", [RuleSet(do_db=("db1",)), RuleSet(ignore_db=("db1",)), RuleSet()])
def test_a_gtid_and_one_statement_take_the_short_way_to_the_same_answer(flavor, sql, rules):
    build = Build(flavor).q(sql, db="db1", ddl=True)
    gtid, query = build.units[0][0], build.units[0][-1]
    lone = Transaction(STATEMENT, [gtid, query], True)
    short = TransactionFilter(RuleEngine(rules, Settings(flavor=flavor))).filter(lone)
    long_way = TransactionFilter(RuleEngine(rules, Settings(flavor=flavor)))
    kept, content_in, content_kept = long_way._filter_events(lone.events)
    expected = "kept" if content_kept == content_in else "emptied"
    assert short.outcome == expected
    if expected == "kept":
        assert short.events == kept == lone.events
    else:
        assert [e.type_code for e in short.events] == [gtid.type_code] + ([2] if flavor == "mariadb" else [2, 2])
