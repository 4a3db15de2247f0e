"""statement_verb's ASCII shortcut answers exactly what the general walk (comments, Unicode blanks and
letters) answers, for any text."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from dumpfilter.codec.transactions import statement_verb


def reference_verb(sql: str) -> str:
    """The general walk alone: str.lstrip's blanks, /* */ comments, then str.isalpha letters and '_'."""
    s = sql.lstrip()
    while s.startswith("/*"):
        end = s.find("*/")
        if end < 0:
            return ""
        s = s[end + 2 :].lstrip()
    end = 0
    while end < len(s) and (s[end].isalpha() or s[end] == "_"):
        end += 1
    return s[:end].upper()


PIECES = st.sampled_from(["BEGIN", "commit", "Rollback", "XA", "CREATE", "_x", " ", "\t", "\n", "\x0b", "\x1c",
                          "\x85", "\xa0", "\u3000", "/*", "*/", "/* c */", "é", "ſ", "1", "(", ";", "ǅ", "ß"])


@settings(max_examples=3000, deadline=None)
@given(st.lists(PIECES, max_size=8).map("".join))
def test_shortcut_equals_the_general_walk(sql):
    assert statement_verb(sql) == reference_verb(sql)


@settings(max_examples=2000, deadline=None)
@given(st.text(max_size=20))
def test_any_text(sql):
    assert statement_verb(sql) == reference_verb(sql)


def test_examples():
    assert statement_verb("  begin work") == "BEGIN"
    assert statement_verb("/* x */ COMMIT") == "COMMIT"
    assert statement_verb("CREATEé TABLE") == "CREATEÉ"
    assert statement_verb("\x1cBEGIN") == "BEGIN"
