"""`statement_facts.core_class`, the count's fast reader of a lone statement's class (issue #80
goal 4): where it answers, its kind, updated tables and `has_tables` are `core_info`'s (the one
reader of a statement); where the statement is one it does not read (a kind `_info` reads its own
way, a CTE, a rename, reads without an updated table), it declines."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dumpfilter.rules.statement_facts import core_class, core_info
from tests.core.test_statement_facts import _sql

SHAPES = ("INSERT INTO {t} VALUES (1)", "INSERT INTO {t} SELECT * FROM {u}", "REPLACE INTO {t} VALUES (1)",
          "UPDATE {t} SET a = 1", "UPDATE {t} JOIN {u} ON 1 SET {t}.a = 1", "DELETE FROM {t} WHERE a = 1",
          "DELETE {t} FROM {t} JOIN {u} ON 1", "LOAD DATA INFILE 'f' INTO TABLE {t}",
          "CREATE TABLE {t} (a int)", "CREATE TABLE {t} LIKE {u}", "CREATE TABLE {t} AS SELECT * FROM {u}",
          "ALTER TABLE {t} ADD COLUMN c int", "ALTER TABLE {t} RENAME TO {u}", "CREATE INDEX i ON {t} (a)",
          "DROP INDEX i ON {t}", "DROP TABLE IF EXISTS {t}", "TRUNCATE {t}", "RENAME TABLE {t} TO {u}",
          "ANALYZE TABLE {t}", "CREATE VIEW v AS SELECT * FROM {t}", "CREATE DATABASE d2", "SET @a = 1",
          "WITH x AS (SELECT 1) INSERT INTO {t} SELECT * FROM x", "GRANT ALL ON *.* TO u",
          "CREATE PROCEDURE p() BEGIN END", "SELECT 1 FROM {t}", "BEGIN")
NAMES = st.sampled_from(["t", "d.t", "`x y`", "d2.u", "`é`.`ü`"])


@settings(max_examples=400, deadline=None)
@given(st.sampled_from(SHAPES), NAMES, NAMES, st.sampled_from(["d", "", "s\udcff"]))  # (a name read with surrogates)
def test_core_class_is_core_infos_where_it_answers(shape, t, u, default):
    sql = shape.format(t=t, u=u)
    got = core_class(sql, default, frozenset())
    if got is None:
        return
    info = core_info(sql, default)
    assert info is not None, sql
    assert (info.kind, info.updated, info.has_tables) == (*got, bool(got[1])), sql


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(_sql(), st.text(st.sampled_from("CREATEALTRDOPINXUM ,.()`'=;*abt\n"), max_size=60)),
       st.sampled_from(["d", "", "s\udcff"]))
def test_any_statement_is_classed_as_core_info_reads_it_or_declined(sql, default):
    """Generated statements and loose text: the core's class is the one reader's, or none."""
    got = core_class(sql, default, frozenset())
    if got is not None:
        info = core_info(sql, default)
        assert info is not None, sql
        assert (info.kind, info.updated) == got, sql


def test_core_class_answers_the_ddl_and_dml_a_count_meets_and_declines_the_rest():
    answered = {shape for shape in SHAPES if core_class(shape.format(t="t", u="u"), "d", frozenset()) is not None}
    assert {"CREATE INDEX i ON {t} (a)", "ALTER TABLE {t} ADD COLUMN c int", "INSERT INTO {t} VALUES (1)",
            "DROP TABLE IF EXISTS {t}"} <= answered
    assert not answered & {"ALTER TABLE {t} RENAME TO {u}", "RENAME TABLE {t} TO {u}", "CREATE DATABASE d2",
                           "WITH x AS (SELECT 1) INSERT INTO {t} SELECT * FROM x", "UPDATE {t} JOIN {u} ON 1 SET {t}.a = 1"}
    # (a kind the caller reads the whole parse of is declined)
    assert core_class("CREATE INDEX i ON t (a)", "d", frozenset({core_info("CREATE INDEX i ON t (a)", "d").kind})) is None


def test_a_query_read_again_into_another_table_reads_its_own_tables():
    """The read tables of INSERT ... SELECT are remembered by the query's text (sqlglot's parse, about
    0.4 ms, once): the same query into each of several tables lists what each statement reads, less
    the table it writes, as a first read does."""
    query = "SELECT seq, seq FROM s.seq_1_to_9 JOIN s.a ON 1"
    for target in ("s.a", "s.b", "s.seq_1_to_9", "s.a"):
        info = core_info(f"INSERT INTO {target} (id, k) {query}", "s")
        assert info is not None and info.updated == (tuple(target.split(".")),)
        assert info.read == tuple(t for t in (("s", "seq_1_to_9"), ("s", "a")) if t != info.updated[0])
