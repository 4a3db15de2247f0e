"""statement_verb's ASCII shortcut answers exactly what the general walk (general_verb: comments,
Unicode blanks and letters) answers, for any text."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from dumpfilter.codec.transactions import general_verb, statement_verb

PIECES = st.sampled_from(["BEGIN", "commit", "Rollback", "XA", "CREATE", "_x", " ", "\t", "\n", "\x0b", "\x1c",
                          "\x85", "\xa0", "\u3000", "/*", "*/", "/* c */", "é", "ſ", "1", "(", ";", "ǅ", "ß"])


@settings(max_examples=3000, deadline=None)
@given(st.lists(PIECES, max_size=8).map("".join))
def test_shortcut_equals_the_general_walk(sql):
    assert statement_verb(sql) == general_verb(sql)


@settings(max_examples=2000, deadline=None)
@given(st.text(max_size=20))
def test_any_text(sql):
    assert statement_verb(sql) == general_verb(sql)


def test_examples():
    assert statement_verb("  begin work") == "BEGIN"
    assert statement_verb("/* x */ COMMIT") == "COMMIT"
    assert statement_verb("CREATEé TABLE") == "CREATEÉ"
    assert statement_verb("\x1cBEGIN") == "BEGIN"
