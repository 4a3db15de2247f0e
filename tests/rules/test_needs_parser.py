"""The DML fast forms' look for what needs the full parser (`statements._dml_needs_parser`: subqueries,
comments, RETURNING) answers what its regex answers, on any text: its substring look first, on
ASCII text, only passes texts the regex cannot match."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from dumpfilter.rules import statements

_PIECES = st.sampled_from(["select", "SELECT", "SeLeCt", "returning", "RETURNING", "xselect", "selects", "_select",
                           "select_", "1select", "-", "--", "/", "/*", "*/", "#", " ", "(", "'", "sbtest1", "re",
                           "sel", "ect", "9", "\t", "ſelect", "returnıng", "é", "INSERT INTO t VALUES", ","])


@settings(max_examples=500, deadline=None)
@given(st.lists(_PIECES, max_size=12).map("".join) | st.text(max_size=40))
def test_the_substring_look_answers_as_the_regex(sql):
    assert statements._dml_needs_parser(sql) == (statements._NEEDS_PARSER.search(sql) is not None), sql


def test_a_bulk_insert_passes_without_the_regex(monkeypatch):
    row = "(1234, 5678, '83868641058-47280592541-19402557413', '12345678901-12345678901')"
    sql = "INSERT INTO sbtest1 (id, k, c, pad) VALUES " + ", ".join([row] * 2000)

    class _Refuse:
        def search(self, text):
            raise AssertionError("the regex read an ASCII text holding none of its words")

    monkeypatch.setattr(statements, "_NEEDS_PARSER", _Refuse())
    assert statements._dml_needs_parser(sql) is False
    info = statements._statement_tables(sql, "sbtest1")
    assert info.parse_ok and info.updated == (("sbtest1", "sbtest1"),)
