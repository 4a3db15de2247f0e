"""Which tables a statement updates and reads (the TABLE_LIST the applier hands to tables_ok), per statement kind."""

from __future__ import annotations

import functools

import re

from dumpfilter.codec.transactions import statement_verb
from dumpfilter.rules.lazy_pattern import LazyPattern

from dumpfilter.rules.statement_info import Kind, StatementInfo
from dumpfilter.rules.statement_facts import core_info


_DATABASE_WORD = LazyPattern(r"\b(?:DATABASE|SCHEMA)\b", re.IGNORECASE)
# First keywords that may open a database statement, a transaction statement or a multi-table
# UPDATE ("" when there is no plain keyword first: a comment, a parenthesis).
_MAY_NOT_BE_PLAIN = frozenset({"", "CREATE", "ALTER", "DROP", "UPDATE", "WITH", "START",
                               "BEGIN", "COMMIT", "ROLLBACK", "SAVEPOINT", "RELEASE", "XA"})


def plain_statement(sql: str) -> bool:
    """Whether `sql` is certainly none of: CREATE/ALTER/DROP DATABASE or SCHEMA, a transaction
    statement, a multi-table UPDATE; judged from its keywords without parsing it (False when in
    doubt: no plain first keyword, as after a `#` or `--` comment or inside `/*!...*/`; a DATABASE
    or SCHEMA word anywhere). Rules without table rules decide every such statement alike, by its
    default database (rpl_filter.cc checks db_ok only)."""
    verb = statement_verb(sql)
    if verb in ("CREATE", "ALTER", "DROP"):
        return _DATABASE_WORD.search(sql) is None
    return verb not in _MAY_NOT_BE_PLAIN


def statement_tables(sql: str, default_db: str | None, *, remember: bool = True) -> StatementInfo:
    """Classify `sql` and list its updated tables in statement order (unqualified names take `default_db`).

    A statement that cannot be understood comes back with `parse_ok=False`; callers keep it.
    The answer (immutable) is remembered for the last 2048 short statements: the master's dump
    service asks once per slave rule group for the same event. A caller with a memo of its own
    (`remember=False`) leaves those to the others.
    """
    if len(sql) > _CACHED_SQL_LEN or not remember:
        return _statement_tables(sql, default_db)
    return _statement_tables_cached(sql, default_db or "")


_CACHED_SQL_LEN = 4096  # bounds the cache's memory: longer statements are parsed every time


def _statement_tables(sql: str, default_db: str | None) -> StatementInfo:
    """The core's reading (`core_info`); a text it does not read is not parsed."""
    info = core_info(sql, default_db or "")
    return info if info is not None else StatementInfo(Kind.OTHER, parse_ok=False)


_statement_tables_cached = functools.lru_cache(maxsize=2048)(_statement_tables)
