"""A decision reads only what its rule needs (issue #43, goal 2): with database rules alone,
`RuleEngine.statement_kept` answers a plain INSERT, REPLACE or DELETE by the Query's default
database without parsing it (rpl_filter.cc's db_ok reads nothing else), and answers every
statement as `decide_statement` does, with the same rule-hit counters. Parses are counted."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dumpfilter.rules import evaluate
from dumpfilter.rules.evaluate import RuleEngine
from dumpfilter.rules.ruleset import RuleSet, Settings

DATABASE_RULES = [
    {"do_db": ("db1",)},
    {"ignore_db": ("db2",)},
    {"do_db": ("db1", "db2"), "ignore_db": ("db1",)},
    {"ignore_db": ("db1",), "rewrite_db": (("db2", "db1"),)},
    {"binlog_do_db": ("db1",)},
    {"do_db": ("DB1",)},
]


def _vectors() -> list[tuple[str | None, str]]:
    path = Path(__file__).resolve().parent / "test_evaluate_semantics.py"
    spec = importlib.util.spec_from_file_location("_semantics_vectors_kept", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return [(case[3], case[4]) for case in module.STATEMENT_CASES]


STATEMENTS = [
    "INSERT INTO t VALUES (1)", "insert into db2.t values (1)", "REPLACE INTO t SELECT * FROM db3.u",
    "DELETE FROM t WHERE a=1", "DELETE t1 FROM t1 JOIN db2.t2", "DELETE FROM db1.t", "INSERT INTO `db``1`.t SET a=1",
    "UPDATE t SET a=1", "UPDATE db1.t, db2.u SET t.a=1", "CREATE TABLE t (a INT)", "DROP DATABASE db1",
    "CREATE DATABASE db2", "BEGIN", "COMMIT", "/* x */ INSERT INTO t VALUES (1)", "INSERT INTO t VALUES ('é')",
    "GRANT SELECT ON db1.* TO u", "not sql at all", "",
]
DBS = ["db1", "db2", "db3", "", None, "DB1"]


@pytest.fixture
def parses(monkeypatch):
    count = [0]
    original = evaluate.statement_tables

    def counting(sql, default_db):
        count[0] += 1
        return original(sql, default_db)

    monkeypatch.setattr(evaluate, "statement_tables", counting)
    return count


@pytest.mark.parametrize("rules", DATABASE_RULES, ids=str)
@pytest.mark.parametrize("flavor", ["mysql", "mariadb"])
def test_the_same_answers_and_counters_as_decide_statement(rules, flavor):
    stream = [(db, sql) for sql in STATEMENTS for db in DBS] + _vectors()
    stream += stream[::-1]
    fast, slow = RuleEngine(RuleSet(**rules), Settings(flavor=flavor)), RuleEngine(RuleSet(**rules),
                                                                                   Settings(flavor=flavor))
    for db, sql in stream:
        assert fast.statement_kept(sql, db) == slow.decide_statement(sql, db).apply, (db, sql)
    assert (dict(fast.counters), fast.assumed, fast.unparsed) == (dict(slow.counters), slow.assumed, slow.unparsed)


def test_database_rules_parse_no_plain_dml(parses):
    """1 000 INSERT/REPLACE/DELETE statements over four default databases, do-db: one parse per
    database (the first statement met decides the database's answer). Before issue #43 every
    statement was parsed (the engine's memory keeps a text only from its second meeting)."""
    engine = RuleEngine(RuleSet(do_db=("db1",)), Settings(flavor="mariadb"))
    verbs = ["INSERT INTO t{i} VALUES ({i})", "REPLACE INTO db9.t VALUES ({i})", "DELETE FROM t WHERE id={i}"]
    kept = [engine.statement_kept(verbs[i % 3].format(i=i), f"db{i % 4}") for i in range(1000)]
    assert sum(kept) == 250
    assert parses[0] <= 4
    assert engine.counters["REPLICATE_DO_DB"] == 250  # counted when it matches, as each decision counts it


def test_table_rules_still_parse(parses):
    """With a table rule the tables decide: each distinct statement is parsed."""
    engine = RuleEngine(RuleSet(do_db=("db1",), ignore_table=("db1.t1",)), Settings(flavor="mariadb"))
    assert not engine.statement_kept("INSERT INTO t1 VALUES (1)", "db1")
    assert engine.statement_kept("INSERT INTO t2 VALUES (1)", "db1")
    assert parses[0] == 2


_texts = st.one_of(st.sampled_from(STATEMENTS),
                   st.builds(lambda v, q, t: f"{v} {q}{t} VALUES (1)", st.sampled_from(["INSERT INTO", "REPLACE",
                                                                                       "DELETE FROM", "insert"]),
                             st.sampled_from(["", "db1.", "`db2`.", "DB1."]), st.sampled_from(["t", "`t`", "u"])),
                   st.text(max_size=30))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sampled_from(DBS), _texts), max_size=30), st.sampled_from(DATABASE_RULES))
def test_generated_streams_agree(stream, rules):
    fast, slow = RuleEngine(RuleSet(**rules)), RuleEngine(RuleSet(**rules))
    for db, sql in stream:
        assert fast.statement_kept(sql, db) == slow.decide_statement(sql, db).apply
    assert dict(fast.counters) == dict(slow.counters)
