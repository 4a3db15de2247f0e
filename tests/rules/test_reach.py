"""What a rule set names (rules.reach.Reach, issue #80): a statement that names none of the
databases a rule set's rules name (its default database, the database it creates or drops, its
tables' databases) is decided alike by every rule set of the same kinds of rule and settings
(`Reach.signature`), whatever names those rules list. spark_jobs' RuleGroup decides such a
statement's class once for all of them; here the rule engine's own decisions are the reference."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from dumpfilter.rules.decisions import NO_RULE
from dumpfilter.rules.evaluate import RuleEngine
from dumpfilter.rules.reach import Reach
from dumpfilter.rules.ruleset import RuleSet, Settings

DBS = ("db1", "db2", "DB1", "db10", "d_1", "dx", "shop", "sbtest3")
TABLES = ("t1", "t2", "T1", "scratch_1", "x")
# Wild patterns whose database part is literal, runs into another's name, or holds a wildcard.
PATTERNS = ("{db}.%", "{db}.t%", "{db}%.t1", "{db}_.%", "%.t1", "{db}.%1", "d\\_1.%", "{db}.scratch\\_%", "%{db}.%")
SETTINGS = st.builds(Settings, flavor=st.sampled_from(("mysql", "mariadb")), lower_case_table_names=st.sampled_from((0, 1, 2)))


@st.composite
def rule_sets(draw) -> RuleSet:
    names = st.sampled_from(DBS)
    tables = st.builds(lambda db, t: f"{db}.{t}", names, st.sampled_from(TABLES))
    patterns = st.builds(lambda p, db: p.format(db=db), st.sampled_from(PATTERNS), names)
    small = {"max_size": 2}
    return RuleSet(do_db=tuple(draw(st.lists(names, **small))), ignore_db=tuple(draw(st.lists(names, **small))),
                   do_table=tuple(draw(st.lists(tables, **small))), ignore_table=tuple(draw(st.lists(tables, **small))),
                   wild_do_table=tuple(draw(st.lists(patterns, **small))),
                   wild_ignore_table=tuple(draw(st.lists(patterns, **small))),
                   binlog_do_db=tuple(draw(st.lists(names, max_size=1))) if draw(st.booleans()) else (),
                   binlog_ignore_db=tuple(draw(st.lists(names, max_size=1))))


def _renamed(rules: RuleSet) -> RuleSet:
    """The same kinds of rule, every name elsewhere (a database no statement here names)."""
    def db(value: str) -> str:
        return "elsewhere" + value.replace(".", ".z", 1)  # (a wild pattern's table part kept apart)
    return RuleSet(**{field: tuple(db(v) for v in getattr(rules, field)) for field in
                      ("do_db", "ignore_db", "do_table", "ignore_table", "wild_do_table", "wild_ignore_table",
                       "binlog_do_db", "binlog_ignore_db")})


STATEMENTS = ("CREATE TABLE {t} (a int)", "ALTER TABLE {t} ADD COLUMN c9 int", "CREATE INDEX i9 ON {t} (a)",
              "DROP TABLE {t}", "INSERT INTO {t} VALUES (1)", "CREATE DATABASE {db}", "DROP DATABASE {db}")


@settings(max_examples=300, deadline=None)
@given(rule_sets(), SETTINGS, st.sampled_from(DBS), st.sampled_from(TABLES), st.sampled_from(STATEMENTS),
       st.booleans(), st.sampled_from((None, *DBS)))
def test_a_statement_its_rules_name_nothing_of_is_decided_as_by_any_rules_of_their_kinds(
        rules, setting, db, table, statement, qualified, default):
    reach = Reach(rules, setting)
    engine = RuleEngine(rules, setting)
    default = db if not qualified else default  # (a table named alone is the default database's)
    if not reach.blind_to([db, default]):
        return
    # No table rule matches one of its tables, whatever the table.
    for name in (table, "t1", "T1", "scratch_1", "z"):
        assert engine.table_step(db, name) is NO_RULE, (db, name)
    other = _renamed(rules)
    assert Reach(other, setting).signature == reach.signature and Reach(other, setting).blind_to([db, default])
    sql = statement.format(t=f"{db}.{table}" if qualified else table, db=db)
    mine, theirs = engine.decide_statement(sql, default), RuleEngine(other, setting).decide_statement(sql, default)
    assert (mine.apply, mine.rule, mine.counted) == (theirs.apply, theirs.rule, theirs.counted), sql


@given(rule_sets(), SETTINGS, st.sampled_from(DBS), st.sampled_from(TABLES))
def test_a_table_a_rule_may_match_is_named(rules, setting, db, table):
    """Where a table rule decides a table, its database is named (never blind)."""
    if RuleEngine(rules, setting).table_step(db, table) is not NO_RULE:
        assert not Reach(rules, setting).blind_to([db])


def test_rewrite_derived_tables_and_wl2516_name_every_database():
    for rules, setting in ((RuleSet(rewrite_db=(("a", "b"),)), Settings()),
                           (RuleSet(do_db=("a",)), Settings(track_derived_tables=True)),
                           (RuleSet(effective_do=("a.%",)), Settings(semantics="effective"))):
        assert not Reach(rules, setting).blind_to(["elsewhere"])
    assert Reach(RuleSet(do_db=("a",)), Settings()).blind_to(["elsewhere", None])
    # A name Python folds by its context (a final sigma) is named under case-folded table names.
    assert not Reach(RuleSet(wild_do_table=("x.%",)), Settings(flavor="mariadb")).blind_to(["ΑΣ"])
