"""The core's `plain_statement` (the master's statement flag-word key, read in bulk with a
segment's DDL) against `rules.statements.plain_statement`, which defines it: equal wherever the
core answers, and the core answers every ASCII statement without a leading comment."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from dumpfilter import _core
from dumpfilter.rules.statements import plain_statement

# Keywords that decide the answer, in cases and spellings where Python's Unicode rules differ
# from ASCII ones ("ſ".upper() == "S", IGNORECASE matches "ſchema", \b knows "é" is a letter).
_WORDS = ["CREATE", "create", "Alter", "DROP", "UPDATE", "with", "START", "BEGIN", "commit", "ROLLBACK",
          "SAVEPOINT", "release", "XA", "INSERT", "TABLE", "DATABASE", "database", "SCHEMA", "Schema",
          "databases", "schemas", "my_schema", "schema1", "x_database_y", "ſchema", "ſtart", "ſavepoint",
          "databaſe", "éschema", "schemaé", "t1", "db", "IF", "EXISTS", "INDEX", "VIEW", "TRIGGER", "_"]
_GLUE = [" ", "  ", "\t", "\n", "\r\n", "\x0b", "\x0c", "\x1c", "\x1f", "\x85", "\xa0", "\u2003", "", ".", ",",
         "(", ")", "`", "'", "/*", "*/", "/*/", "/*!50001 ", "--", "#", ";", "=", "1", "é", "Ω", "\udce9"]


@st.composite
def statements(draw) -> str:
    parts = draw(st.lists(st.one_of(st.sampled_from(_WORDS), st.sampled_from(_GLUE)), max_size=12))
    return "".join(parts)


def _core_answer(sql: str):
    return _core.plain_statement(sql.encode("utf-8", "surrogateescape"))


@settings(max_examples=3000, deadline=None)
@given(statements())
def test_core_agrees_with_python_where_it_answers(sql):
    got = _core_answer(sql)
    if got is not None:
        assert got == plain_statement(sql), sql
    ascii_text = sql.isascii()
    leading_comment = sql.lstrip(" \t\n\r\x0b\x0c\x1c\x1d\x1e\x1f").startswith("/*")
    # The core answers all ASCII text but a leading comment; Python answers the rest.
    assert (got is not None) == (ascii_text and not leading_comment), sql


@settings(max_examples=500, deadline=None)
@given(st.text(alphabet=st.characters(max_codepoint=0x7F), max_size=60))
def test_any_ascii_text(sql):
    got = _core_answer(sql)
    if got is not None:
        assert got == plain_statement(sql), sql


def test_known_answers():
    assert _core_answer("CREATE TABLE t (a INT)") is True
    assert _core_answer("  create database d") is False
    assert _core_answer("ALTER TABLE t ADD my_schema INT") is True  # a word containing SCHEMA
    assert _core_answer("DROP TABLE t /* SCHEMA */") is False  # the word anywhere
    assert _core_answer("UPDATE t SET a = 1") is False  # may be a multi-table UPDATE
    assert _core_answer("BEGIN") is False
    assert _core_answer("INSERT INTO t VALUES (1)") is True
    assert _core_answer("(SELECT 1)") is False  # no plain first keyword
    assert _core_answer("/*/ UPDATE */ CREATE TABLE t (a INT)") is None  # Python's comment reading
    assert _core_answer("CREATE TABLE ſchema (a INT)") is None  # Unicode case folding
