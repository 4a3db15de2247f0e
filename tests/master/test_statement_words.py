"""The statement flag words (master.decide.flags.StatementWords): a GTID-and-one-statement unit is answered
once for every slave, and remembered by key only while nothing but the key can change the answer.
The dump tests (test_fast_path's reference comparisons) check the answers against TransactionFilter
for every workload; these check what is remembered, and what must not be."""

from __future__ import annotations

import threading
from collections import Counter
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dumpfilter.codec import group_transactions, read_events
from dumpfilter.master.decide.flags import FlagWords, StatementWords, statement_decision
from dumpfilter.master.model import ChannelSpec, Registration
from dumpfilter.rules.gate import Gate
from dumpfilter.master.service import DumpService
from dumpfilter.rules.evaluate import RuleEngine
from dumpfilter.rules.ruleset import RuleSet, Settings
from dumpfilter.rules.schema import SchemaModel
from dumpfilter.rules.transaction_filter import framing_statement, lone_statement
from dumpfilter.workload.generator import WorkloadSpec, generate

from tests.master.test_fast_path import _assert_same


def _words(members) -> StatementWords:
    locks: dict[int, threading.Lock] = {}
    return StatementWords(lambda: members, FlagWords(lambda: members),
                          lambda engine: locks.setdefault(id(engine), threading.Lock()))


def test_an_answer_that_read_the_schema_is_decided_again():
    """MariaDB adds the tables a multi-table UPDATE's triggers write: once db.t has a trigger writing
    db.w (kept by do-table=db.w), the same UPDATE is kept. Its answer depends on the schema at the
    statement's position, so it is never remembered. A DDL's answer under the same rules is
    remembered by its text."""
    schema = SchemaModel.from_sql("CREATE TABLE db.t (a INT); CREATE TABLE db.u (a INT); CREATE TABLE db.w (a INT);")
    engine = RuleEngine(RuleSet(do_table=("db.w",)), Settings(flavor="mariadb"), schema=schema)
    words = _words([(0, engine, Gate())])
    update = "UPDATE t JOIN u ON t.a = u.a SET t.a = 2"
    assert words.answer(update, "db", None, {})[0] == 0
    schema.observe("CREATE TRIGGER db.tr AFTER UPDATE ON db.t FOR EACH ROW INSERT INTO db.w VALUES (NEW.a)", "db")
    assert words.answer(update, "db", None, {})[0] == 1, "an answer that read the schema was remembered"
    assert words.computed == 2
    ddl = "CREATE TABLE w (a INT)"
    assert words.answer(ddl, "db", None, {})[0] == 1
    assert words.answer(ddl, "db", None, {})[0] == 1
    assert words.computed == 3


def test_database_only_rules_share_one_answer_per_key():
    """Do-db slaves answer by (kind, named database, default database): DDL on any table of a
    database is one key; CREATE DATABASE names its own."""
    members = [(i, RuleEngine(RuleSet(do_db=(f"db{i}",)), Settings(flavor="mariadb")), Gate()) for i in range(4)]
    words = _words(members)
    for n in range(50):
        word, hits = words.answer(f"CREATE TABLE t{n} (a INT)", "db2", None, {})
        assert word == 1 << 2 and set(hits) == {2}  # a do-db skip counts no rule
        assert hits[2]["REPLICATE_DO_DB"] == 1
    assert words.computed == 1
    assert words.answer("CREATE DATABASE db1", "db3", None, {})[0] == 1 << 1
    assert words.answer("CREATE DATABASE db3", "db3", None, {})[0] == 1 << 3
    assert words.computed == 3


def test_a_restricted_policy_or_table_rules_key_by_text():
    members = [(0, RuleEngine(RuleSet(do_db=("db1",)), Settings(flavor="mariadb")), Gate(("db1.a%",), True)),
               (1, RuleEngine(RuleSet(wild_do_table=("db1.b%",)), Settings(flavor="mariadb")), Gate())]
    words = _words(members)
    assert words.answer("CREATE TABLE a1 (x INT)", "db1", None, {})[0] == 1 << 0
    assert words.answer("CREATE TABLE b1 (x INT)", "db1", None, {})[0] == 1 << 1
    assert words.answer("CREATE TABLE c1 (x INT)", "db1", None, {})[0] == 0
    assert words.answer("CREATE TABLE a1 (x INT)", "db1", None, {})[0] == 1 << 0
    assert words.computed == 3


def test_answers_are_thrown_away_with_the_flag_words():
    engines = [RuleEngine(RuleSet(do_db=("db1",)), Settings(flavor="mariadb"))]
    members = [(0, engines[0], Gate())]
    table_words = FlagWords(lambda: members)
    words = StatementWords(lambda: members, table_words, lambda engine: threading.Lock())
    assert words.answer("CREATE TABLE t (a INT)", "db1", None, {})[0] == 1
    members[0] = (0, RuleEngine(RuleSet(ignore_db=("db1",)), Settings(flavor="mariadb")), Gate())
    table_words.invalidate()
    assert words.answer("CREATE TABLE t (a INT)", "db1", None, {})[0] == 0


def test_eight_database_slaves_decide_each_key_once(tmp_path: Path):
    """Eight do-db slaves over a DDL-heavy ROW binlog: the same batches, stats and P_S counters as
    the reference path, with one decision per key instead of one per unit and rule group."""
    generate(WorkloadSpec(seed=21, schemas=8, transactions=400, ddl_share=0.3, max_binlog_size=60_000), tmp_path)
    lone = sum(1 for path in sorted(tmp_path.glob("*-bin.0*"))
               for unit in group_transactions(read_events(path.read_bytes())) if lone_statement(unit.events) is not None)
    regs = [Registration(server_id=i, filters=(ChannelSpec(None, RuleSet(do_db=(f"db{i}",))),)) for i in range(1, 9)]
    _assert_same(tmp_path, regs)
    svc = DumpService(tmp_path)
    for reg in regs:
        svc.register(reg)
    for reg in regs:
        for batch in svc.stream(reg.server_id):
            if batch.caught_up:
                break
    assert lone > 50
    assert 0 < svc.statement_words.computed < lone / 4


STATEMENTS = [
    "CREATE TABLE t1 (a INT)", "CREATE TABLE database_x (a INT)", "CREATE TABLE t (`database` INT)",
    "DROP TABLE IF EXISTS db2.t1", "ALTER TABLE t1 ADD COLUMN b INT", "TRUNCATE t1", "RENAME TABLE a TO b",
    "CREATE DATABASE db1", "create schema `db2`", "CREATE OR REPLACE DATABASE db3", "DROP DATABASE db1",
    "DROP SCHEMA IF EXISTS db2", "ALTER DATABASE db2 CHARACTER SET utf8mb4", "\u00a0CREATE DATABASE db4",
    "/*!40101 CREATE DATABASE db1 */", "# note\nCREATE DATABASE db2", "-- note\nDROP DATABASE db3",
    "UPDATE t1 JOIN t2 ON t1.a = t2.a SET t1.a = 1", "UPDATE t1 SET a = 1", "START TRANSACTION",
    "WITH c AS (SELECT 1 AS a) UPDATE t1 JOIN c SET t1.a = c.a", "(SELECT 1)", "SET @a = 1", "USE db1",
    "GRANT ALL ON *.* TO u", "INSERT INTO db2.t VALUES (1)", "LOAD DATA INFILE 'x' INTO TABLE t1",
    "XA START 'x'", "SAVEPOINT s", "CREATE PROCEDURE p() BEGIN END", "DROP TRIGGER IF EXISTS tr", "",
]
DATABASES = [None, "", "db1", "db2", "DB1", "other"]


def _database_rules(draw) -> RuleSet:
    def pick() -> tuple[str, ...]:
        return tuple(draw(st.lists(st.sampled_from(["db1", "db2", "db3", "db4", "DB1"]), max_size=2, unique=True)))

    rewrite = draw(st.sampled_from([(), (("db1", "db4"),), (("other", "db2"),)]))
    return RuleSet(do_db=pick(), ignore_db=pick(), rewrite_db=rewrite, binlog_do_db=pick(), binlog_ignore_db=pick())


@st.composite
def _slaves(draw):
    flavor = draw(st.sampled_from(["mariadb", "mysql"]))
    lctn = draw(st.sampled_from([0, 1]))
    return [(i, RuleEngine(_database_rules(draw), Settings(flavor=flavor, lower_case_table_names=lctn)), Gate())
            for i in range(draw(st.integers(1, 4)))]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_slaves(), st.lists(st.tuples(st.sampled_from(STATEMENTS), st.sampled_from(DATABASES)), min_size=1, max_size=25))
def test_database_only_answers_equal_each_engines_own_decision(slaves, statements):
    """Whatever the statement (database statements, comments, multi-table UPDATEs, transaction
    statements) and the database-only rules: the remembered word and hits are what each slave's
    engine decides for that very statement."""
    words = _words(slaves)
    for sql, db in statements:
        word, hits = words.answer(sql, db, None, {})
        for bit, engine, gate in slaves:
            fresh = RuleEngine(engine.rules, engine.settings)
            if framing_statement(sql):
                assert word >> bit & 1 and bit not in hits
                continue
            decision, counted = statement_decision(fresh, gate, sql, db, None, None)
            assert bool(word >> bit & 1) == decision.apply, (sql, db, engine.rules)
            assert hits.get(bit, Counter()) == Counter(counted), (sql, db, engine.rules)


def test_slaves_arriving_one_by_one_decide_each_key_once_per_rule_group():
    """Each registration throws the words away (a new bit); the rule groups already there keep
    their decisions, so N do-db slaves arriving one by one make N decisions per key, not N^2/2
    (issue #30: eight do-db slaves over a binlog's DDL). A group whose last member left is
    forgotten; one that comes back decides again."""
    engines = [RuleEngine(RuleSet(do_db=(f"db{i}",)), Settings(flavor="mariadb")) for i in range(8)]
    members: list = []
    table_words = FlagWords(lambda: members)
    words = StatementWords(lambda: members, table_words, lambda engine: threading.Lock())
    ddl = [("CREATE TABLE t (a INT)", f"db{d}") for d in range(8)] + [(f"CREATE DATABASE db{d}", None) for d in range(8)]
    for i, engine in enumerate(engines):
        members.append((i, engine, Gate()))
        table_words.invalidate()
        for sql, db in ddl:
            word, _ = words.answer(sql, db, None, {})
            kept = {int(db[2:]) if db else int(sql[-1])}
            assert word == sum(1 << b for b in kept if b <= i), (sql, db, i)
    assert words.decided == len(ddl) * len(engines)  # was len(ddl) * (1 + 2 + ... + 8)
    members[3] = (3, RuleEngine(RuleSet(ignore_db=("db3",)), Settings(flavor="mariadb")), Gate())  # new rules
    table_words.invalidate()
    assert words.answer("CREATE TABLE t (a INT)", "db3", None, {})[0] == 0
    assert words.answer("CREATE TABLE t (a INT)", "db4", None, {})[0] == 1 << 3 | 1 << 4
    assert words.decided == len(ddl) * len(engines) + 2  # the new group's, for the two keys asked
    assert (engines[3], Gate()) not in words._by_group  # left with its last member


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(_slaves(), st.lists(st.tuples(st.sampled_from(STATEMENTS), st.sampled_from(DATABASES)),
                                              min_size=1, max_size=8)), min_size=1, max_size=4))
def test_remembered_group_decisions_across_changes_equal_a_fresh_answer(rounds):
    """Slaves come, go and change rules between rounds (one StatementWords throughout, its words
    thrown away at each change): every answer equals a fresh StatementWords' over the same
    members, which decides everything anew."""
    members: list = []
    table_words = FlagWords(lambda: members)
    words = StatementWords(lambda: members, table_words, lambda engine: threading.Lock())
    for slaves, statements in rounds:
        keep = members[: len(members) // 2]  # some of the earlier groups stay, with the same engines
        members[:] = keep + [(len(keep) + bit, engine, gate) for bit, engine, gate in slaves]
        table_words.invalidate()
        for sql, db in statements:
            assert words.answer(sql, db, None, {}) == _words(list(members)).answer(sql, db, None, {}), (sql, db)
