"""The per-DDL shortcuts (#11) answer what the long way answers, statement after statement: the
engine's memory of rules-only answers by (text, default database), the DDL fast forms tried first,
the remembered db_ok steps and the schema replay's DROP TABLE branch. An engine taking every
shortcut and one taking none decide the same stream; after each statement their decisions, rule-hit
counters, unparsed/assumed counts, schema models and trigger knowledge must be equal."""

from __future__ import annotations

import contextlib

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dumpfilter.rules import evaluate, schema, statements
from dumpfilter.rules.evaluate import RuleEngine
from dumpfilter.rules.ruleset import RuleSet, Settings
from dumpfilter.rules.schema import SchemaModel


class _NeverRemembers(dict):
    def __setitem__(self, key, value):
        pass


def _full_parse(sql, default_db, parses=None):
    return statements._statement_tables(sql, default_db or "")


@contextlib.contextmanager
def _long_way():
    """Every parse by the full parser (no fast forms, no parse cache) while the block runs."""
    saved = evaluate.parse_statement, schema.statement_tables
    evaluate.parse_statement, schema.statement_tables = _full_parse, _full_parse
    try:
        yield
    finally:
        evaluate.parse_statement, schema.statement_tables = saved


def _long_engine(rules, settings_, start):
    engine = RuleEngine(rules, settings_, schema=start.copy())
    engine._statements = _NeverRemembers()
    engine._db_steps = _NeverRemembers()
    return engine


def _state(engine: RuleEngine):
    model = engine.schema
    knowledge = engine.triggers
    # The columns as resolved (on a copy): the core's facts give a CREATE TABLE's at once, where
    # the long way leaves them pending until a decision asks.
    return (dict(engine.counters), engine.unparsed, engine.assumed, sorted(model.databases), dict(model.triggers),
            model.copy().tables, dict(knowledge._history), dict(knowledge._base))


def _answer(decision):
    return (decision.apply, decision.reason, decision.rule, decision.tables, decision.counted, decision.assumption)


# -- generated DDL: mixed case, qualified and quoted names, comments, IF [NOT] EXISTS, TEMPORARY,
#    RENAME, LIKE, SELECT, triggers (a DROP TRIGGER's answer reads the trigger knowledge), database
#    statements, a multi-table UPDATE (reads the model), and text that is not SQL.
_DBS = ("db1", "db2", "Db1", "dbz")
_db = st.sampled_from(_DBS)
_table = st.sampled_from(("t1", "T1", "t2", "scratch_1", "secret", "`t1`", "`sec``ret`"))


@st.composite
def _name(draw):
    table = draw(_table)
    if draw(st.booleans()):
        return table
    db = draw(_db)
    return f"{'`' + db + '`' if draw(st.booleans()) else db}{draw(st.sampled_from(['.', ' . ']))}{table}"


def _case(draw, text):
    style = draw(st.sampled_from(("upper", "lower", "title", "same")))
    return {"upper": text.upper(), "lower": text.lower(), "title": text.title(), "same": text}[style]


@st.composite
def ddl(draw):
    word = lambda text: _case(draw, text)  # noqa: E731
    name, other = draw(_name()), draw(_name())
    shapes = [
        f"{word('DROP')} {word(draw(st.sampled_from(['', 'TEMPORARY '])))}{word('TABLE')} "
        f"{word(draw(st.sampled_from(['', 'IF EXISTS '])))}{name}{draw(st.sampled_from(['', ', ' + other, ';']))}",
        f"{word('CREATE')} {word(draw(st.sampled_from(['', 'TEMPORARY '])))}{word('TABLE')} "
        f"{word(draw(st.sampled_from(['', 'IF NOT EXISTS '])))}{name} (id INT PRIMARY KEY, v INT)"
        f"{draw(st.sampled_from(['', ' ENGINE=InnoDB', ' /* c */', ' -- c', ' COMMENT ' + repr('a;b')]))}",
        f"{word('CREATE TABLE')} {name} {word('LIKE')} {other}",
        f"{word('CREATE TABLE')} {name} (a INT) {word('SELECT')} * {word('FROM')} {other}",
        f"{word('ALTER TABLE')} {name} {word(draw(st.sampled_from(['ADD COLUMN w INT', 'RENAME TO u9', 'DROP v'])))}",
        f"{word('RENAME TABLE')} {name} {word('TO')} {other}",
        f"/*!40000 {word('DROP TABLE')} {name} */",
        f"{word('CREATE DATABASE')} {draw(_db)}", f"{word('DROP DATABASE')} {draw(_db)}",
        f"{word('CREATE TRIGGER')} tr{draw(st.integers(0, 1))} {word('AFTER INSERT ON')} {name} "
        f"{word('FOR EACH ROW')} {word('INSERT INTO')} {other} {word('VALUES')} (1)",
        f"{word('DROP TRIGGER')} {word(draw(st.sampled_from(['', 'IF EXISTS '])))}tr{draw(st.integers(0, 1))}",
        f"{word('UPDATE')} {name} {word('JOIN')} {other} {word('ON')} 1 {word('SET')} v = 1",
        f"{word('INSERT INTO')} {name} {word('VALUES')} (1)",
        "DROP TABLE `unbalanced", "not sql at all",
    ]
    return draw(st.sampled_from(shapes))


# A small pool drawn once per example, then a stream drawn from it: texts come back (what the memory
# answers) with the model changed in between (DROP, CREATE, RENAME, triggers).
streams = st.lists(st.tuples(ddl(), st.sampled_from(_DBS + ("",))), min_size=1, max_size=6).flatmap(
    lambda pool: st.lists(st.sampled_from(pool), min_size=1, max_size=30))

_keys = st.sampled_from(("db1.t1", "db1.secret", "db2.t2", "Db1.T1", "dbz.scratch_1"))
_wild = st.sampled_from(("db1.%", "db%.t_", "%.sec%", "dbz.%", "%.%"))
_dbs = st.lists(_db, max_size=2).map(tuple)
rule_sets = st.one_of(
    st.builds(RuleSet, do_db=_dbs, ignore_db=_dbs, binlog_do_db=st.lists(_db, max_size=1).map(tuple),
              binlog_ignore_db=st.lists(_db, max_size=1).map(tuple),
              rewrite_db=st.lists(st.tuples(_db, st.sampled_from(("db2", "dbq"))), max_size=1).map(tuple)),
    st.builds(RuleSet, do_db=_dbs, ignore_db=_dbs, do_table=st.lists(_keys, max_size=2).map(tuple),
              ignore_table=st.lists(_keys, max_size=2).map(tuple),
              wild_do_table=st.lists(_wild, max_size=2).map(tuple),
              wild_ignore_table=st.lists(_wild, max_size=2).map(tuple),
              rewrite_db=st.lists(st.tuples(_db, st.sampled_from(("db2", "dbq"))), max_size=1).map(tuple)),
)
engine_settings = st.builds(Settings, flavor=st.sampled_from(("mysql", "mariadb")),
                            lower_case_table_names=st.sampled_from((0, 1, 2)))
START = SchemaModel.from_sql("CREATE TABLE db1.t1 (id INT, v INT); CREATE TABLE db2.t2 (id INT, w INT);")


def check_stream(rules, settings_, stream):
    short = RuleEngine(rules, settings_, schema=START.copy())
    long_way = _long_engine(rules, settings_, START)
    for sql, db in stream:
        got = short.decide_statement(sql, db or None)
        with _long_way():
            expected = long_way.decide_statement(sql, db or None)
        assert _answer(got) == _answer(expected), (sql, db)
        assert _state(short) == _state(long_way), (sql, db)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rule_sets, engine_settings, streams)
def test_shortcuts_decide_and_replay_as_the_long_way(rules, settings_, stream):
    check_stream(rules, settings_, stream)


def test_a_remembered_statement_still_replays_into_the_model():
    """The same DROP and CREATE texts, again and again: answered from memory from the second time
    on, and the model follows every one of them."""
    stream = [("CREATE TABLE IF NOT EXISTS `s1` (id INT)", "db1"), ("DROP TABLE IF EXISTS `s1`", "db1")] * 3
    rules = RuleSet(do_db=("db1",))
    check_stream(rules, Settings(), stream)
    engine = RuleEngine(rules)
    for sql, db in stream:
        engine.decide_statement(sql, db)
    assert all(engine._statements.get(key) is not None for key in set(stream))
    assert ("db1", "s1") not in engine.schema._columns
    engine.decide_statement(*stream[0])
    assert engine.schema._columns[("db1", "s1")] == ("id",)  # the core's facts read the column list
    assert engine.counters["REPLICATE_DO_DB"] == 7


def test_statements_that_read_the_replicas_state_are_never_remembered():
    """DROP TRIGGER is decided by whether this replica has the trigger: the same text changes answer."""
    engine = RuleEngine(RuleSet(do_table=("db1.t1",)))
    drop = ("DROP TRIGGER tr", "db1")
    assert not engine.decide_statement(*drop).apply  # unknown trigger (Bug#24478)
    assert not engine.decide_statement(*drop).apply
    engine.decide_statement("CREATE TRIGGER tr AFTER INSERT ON t1 FOR EACH ROW SET @a = 1", "db1")
    assert engine.decide_statement(*drop).apply
    assert drop not in engine._statements
    multi = ("UPDATE t1 JOIN t2 ON 1 SET v = 1", "db1")
    engine.decide_statement(*multi)
    engine.decide_statement(*multi)
    assert multi not in engine._statements


def test_effective_semantics_and_derived_tables_turn_the_memory_off():
    for settings_ in (Settings(semantics="effective"), Settings(track_derived_tables=True)):
        engine = RuleEngine(RuleSet(ignore_table=("db1.secret",)), settings_)
        for _ in range(3):
            engine.decide_statement("CREATE TABLE copy LIKE secret", "db1")
        assert not engine._statements


def test_drop_table_replay_forgets_the_table_and_its_triggers():
    """The replay's DROP TABLE branch (taken first, before the version-comment strip): the table and
    its triggers go; a TEMPORARY drop leaves the base table."""
    model = SchemaModel()
    model.observe("CREATE TABLE t (a INT)", "d")
    model.observe("ALTER TABLE t ADD b INT", "d")
    model.observe("CREATE TABLE keep (a INT)", "d")
    model.observe("CREATE TRIGGER tr AFTER INSERT ON t FOR EACH ROW INSERT INTO keep VALUES (1)", "d")
    model.observe("CREATE TRIGGER tk AFTER INSERT ON keep FOR EACH ROW SET @a = 1", "d")
    model.observe("DROP TEMPORARY TABLE t", "d")
    assert model.columns("d", "t") == ("a", "b") and ("d", "tr") in model.triggers
    model.observe("/*!40000 DROP TABLE IF EXISTS `t`, nothing */", "d")
    assert ("d", "t") not in model._columns
    assert set(model.triggers) == {("d", "tk")} and model.columns("d", "keep") == ("a",)
