"""Text a slave or a binlog supplies is matched in linear work: WL#2516 REWRITE's `%` captures,
the schema model's version comments and qualified names answer what their old regexes answered
(the reference, on every small input) without the regexes' rescans, and a malformed CHANGE
REPLICATION FILTER of a megabyte is named in one pass."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dumpfilter import _core
from dumpfilter.errors import RuleError
from dumpfilter.rules.parse import parse_filter_statement
from dumpfilter.rules.percent_captures import PercentCaptures
from dumpfilter.rules.schema import strip_version_comments
from dumpfilter.rules.statements import statement_tables


def _regex_groups(pattern: str, key: str):
    match = re.fullmatch("(.*)".join(re.escape(part) for part in pattern.split("%")), key, re.DOTALL)
    return match.groups() if match else None


@given(st.text(alphabet="%ab.", max_size=9), st.text(alphabet="ab.", max_size=12))
@settings(max_examples=1500)
def test_rewrite_captures_are_the_greedy_regex_groups(pattern, key):
    match = PercentCaptures(pattern).fullmatch(key)
    assert (match.groups() if match else None) == _regex_groups(pattern, key)


@given(st.lists(st.sampled_from(["/*!", "/*M!", "/*", "*/", "#", "--", "5", "0", " ", "\n", "a", "/", "*", "!", "'", "\u0663"]),
                max_size=16))
@settings(max_examples=1500)
def test_opened_version_comments_lex_as_the_text_does(pieces):
    """One home: the text the schema model reads (versioned comments opened, comments out) holds
    the tokens the core's lexer reads in the text itself; text that does not lex is left as it is."""
    sql = "".join(pieces)
    lexed = _core.sql_tokens(sql)
    opened = strip_version_comments(sql)
    if lexed.error is not None:
        assert opened == sql
    else:
        assert [(t.kind, t.value) for t in _core.sql_tokens(opened).tokens] == [(t.kind, t.value) for t in lexed.tokens]
        assert strip_version_comments(opened) == opened  # (none is left to open)


@pytest.mark.timeout(120)
def test_inputs_that_took_the_regexes_days_complete():
    """Twenty `%` against a 60-character name: C(79, 19) ~ 10^18 splits for the regex; a
    REPLICATE_ run of 100 000 words: 10^11 steps for the old scan. Completing is the check."""
    key = "s1." + "a" * 60
    assert PercentCaptures("%" * 10 + "." + "%" * 10 + "Z").fullmatch(key) is None
    groups = PercentCaptures("%" * 10 + "." + "%" * 10 + "a").fullmatch(key).groups()
    assert groups == ("s1",) + ("",) * 9 + ("a" * 59,) + ("",) * 9  # greedy: the first group takes all it can
    with pytest.raises(RuleError, match="replicate-do-db: unbalanced"):
        parse_filter_statement("CHANGE REPLICATION FILTER REPLICATE_DO_DB = (" + "REPLICATE_" * 100_000 + " 'x")
    comment = "CREATE TABLE t (a INT) COMMENT '" + "/*!50003 " * 200_000 + "'"  # 4*10^10 steps for the regex
    assert strip_version_comments(comment) == comment
    assert strip_version_comments("/*!50003 " * 100_000 + "*/") == " "  # (no token: one blank for the whole)
    rename = statement_tables("ALTER TABLE t RENAME TO `" + "a." * 200_000 + "`.t", "d").renames
    assert rename == ((("d", "t"), ("a." * 200_000, "t")),)
    with pytest.raises(RuleError, match="replicate-ignore-table: unbalanced"):
        parse_filter_statement("CHANGE REPLICATION FILTER REPLICATE_DO_DB = (a), REPLICATE_IGNORE_TABLE = (b.c, 'x")
