"""Which tables a statement updates and reads (the TABLE_LIST the applier hands to tables_ok), per statement kind."""

from __future__ import annotations

import functools

import re

from dumpfilter.codec.transactions import statement_verb
from dumpfilter.rules.lazy_pattern import lazy_compile

from dumpfilter.rules.sqltokens import LexError, tokenize
from dumpfilter.rules.statement_info import Kind, StatementInfo
from dumpfilter.rules.statement_facts import core_info
from dumpfilter.rules.statement_parser import _Statement, _TRANSACTION_WORDS, _Unparsed, _guess_kind


_DATABASE_WORD = lazy_compile(r"\b(?:DATABASE|SCHEMA)\b", re.IGNORECASE)
# First keywords that may open a database statement, a transaction statement or a multi-table
# UPDATE ("" when there is no plain keyword first: a comment, a parenthesis).
_MAY_NOT_BE_PLAIN = frozenset({"", "CREATE", "ALTER", "DROP", "UPDATE", "WITH", "START"})


def plain_statement(sql: str) -> bool:
    """Whether `sql` is certainly none of: CREATE/ALTER/DROP DATABASE or SCHEMA, a transaction
    statement, a multi-table UPDATE; judged from its keywords without parsing it (False when in
    doubt: no plain first keyword, as after a `#` or `--` comment or inside `/*!...*/`; a DATABASE
    or SCHEMA word anywhere). Rules without table rules decide every such statement alike, by its
    default database (rpl_filter.cc checks db_ok only)."""
    verb = statement_verb(sql)
    if verb in ("CREATE", "ALTER", "DROP"):
        return _DATABASE_WORD.search(sql) is None
    return verb not in _MAY_NOT_BE_PLAIN and verb not in _TRANSACTION_WORDS


def statement_tables(sql: str, default_db: str | None) -> StatementInfo:
    """Classify `sql` and list its updated tables in statement order (unqualified names take `default_db`).

    A statement that cannot be understood comes back with `parse_ok=False`; callers keep it.
    The answer (immutable) is remembered for the last 2048 short statements: the master's dump
    service asks once per slave rule group for the same event.
    """
    if len(sql) > _CACHED_SQL_LEN:
        return _statement_tables(sql, default_db)
    return _statement_tables_cached(sql, default_db or "")


_CACHED_SQL_LEN = 4096  # bounds the cache's memory: longer statements are parsed every time


@functools.lru_cache(maxsize=2048)
def _statement_tables_cached(sql: str, default_db: str) -> StatementInfo:
    return _statement_tables(sql, default_db)


def _statement_tables(sql: str, default_db: str | None, *, fast_forms: bool = True) -> StatementInfo:
    """The core's reading of the forms it reads (`core_info`: single-table DML, DDL and the
    rest of its facts), where it reads the text plainly; else the full parser, the definition it
    is held to (`fast_forms=False`: the parser alone, for the tests that hold them equal). One
    reader per form in production (issue #57): a text the core declines is the parser's."""
    default = default_db or ""
    if fast_forms:
        info = core_info(sql, default)
        if info is not None:
            return info
    try:
        tokens = tokenize(sql)
    except LexError:
        return StatementInfo(Kind.OTHER, parse_ok=False)
    if not tokens:
        return StatementInfo(Kind.OTHER, parse_ok=False)
    try:
        return _Statement(sql, tokens, default).classify()
    except _Unparsed:
        return StatementInfo(_guess_kind(tokens), parse_ok=False)
