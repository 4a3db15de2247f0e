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


def _statement_tables(sql: str, default_db: str | None, *, fast_forms: bool = True,
                      compiled: bool = True) -> StatementInfo:
    """`fast_forms=False`: the full parser alone; `compiled=False`: the Python forms and parser
    without the core's facts (tests compare them)."""
    default = default_db or ""
    if fast_forms and compiled:
        info = core_info(sql, default)
        if info is not None:
            return info
    if fast_forms:
        fast = _fast_path(sql, default)
        if fast is not None:
            return fast
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


# ---------------------------------------------------------------------------------------------
# Fast path: anchored regexes for single-table DML without subqueries (most statement events).

_NAME = r"(?:`(?:[^`]|``)+`|[A-Za-z0-9_$]+)"
_QNAME = rf"({_NAME})(?:\s*\.\s*({_NAME}))?"
_FAST_FORMS = (
    (Kind.INSERT, lazy_compile(
        rf"\s*(INSERT|REPLACE)(?:\s+(?:LOW_PRIORITY|DELAYED|HIGH_PRIORITY|IGNORE))*\s+(?:INTO\s+)?{_QNAME}"
        r"\s*(?:\(|VALUES?\b|SET\b)", re.IGNORECASE)),
    (Kind.UPDATE, lazy_compile(rf"\s*(UPDATE)(?:\s+(?:LOW_PRIORITY|IGNORE))*\s+{_QNAME}\s+SET\b", re.IGNORECASE)),
    (Kind.DELETE, lazy_compile(
        rf"\s*(DELETE)(?:\s+(?:LOW_PRIORITY|QUICK|IGNORE))*\s+FROM\s+{_QNAME}\s*(?:;?\s*$|WHERE\b|ORDER\b|LIMIT\b)",
        re.IGNORECASE)),
)
_NEEDS_PARSER = lazy_compile(r"\bSELECT\b|/\*|#|--|\bRETURNING\b", re.IGNORECASE)
_INSERT_SKIP_WORDS = frozenset({"INTO", "VALUES", "VALUE", "SET", "SELECT"})


def _dml_needs_parser(sql: str) -> bool:
    """`_NEEDS_PARSER.search(sql)`, looked for first as plain substrings where the text is ASCII
    (then IGNORECASE folds nothing else into SELECT or RETURNING): a statement holding none of
    them cannot match. A bulk INSERT of 2 000 sysbench rows (392 KB, the first statement of its
    key in a real MIXED binlog) took the regex 21 ms, its word boundaries tested by Unicode rules
    at every character; the substrings take 1.4 ms."""
    if sql.isascii():
        upper = sql.upper()
        if "SELECT" not in upper and "RETURNING" not in upper and "/*" not in sql and "#" not in sql \
                and "--" not in sql:
            return False
    return _NEEDS_PARSER.search(sql) is not None


_NUMBER_LIKE = lazy_compile(r"[0-9](?:[0-9]*|.*[eExXbB].*)")


def _number_like(name: str) -> bool:
    """An unquoted word MySQL's lexer may read as a number: all digits, or a digit then an exponent
    or a hex/binary prefix (the core's `number_like`, stmt.rs). A name may begin with a digit
    (`9a`) but not be all digits."""
    return _NUMBER_LIKE.fullmatch(name) is not None


def _fast_path(sql: str, default: str) -> StatementInfo | None:
    """The DML forms, for the text the core's facts leave (non-ASCII text: Python's Unicode rules
    for case, spaces and word boundaries are these regexes' own)."""
    for kind, form in _FAST_FORMS:
        match = form.match(sql)
        if match is None:
            continue
        first, second = match.group(2), match.group(3)
        if second is None and first.upper() in _INSERT_SKIP_WORDS:
            return None
        if _number_like(first) or (second is not None and _number_like(second)):
            return None  # `UPDATE 0 SET ...`: MySQL reads a number there, not a name (the parser decides)
        if _dml_needs_parser(sql):  # subqueries or comments: let the full parser list the read tables
            return None
        if kind is Kind.INSERT and match.group(1).upper() == "REPLACE":
            kind = Kind.REPLACE
        table = (_unquote(first), _unquote(second)) if second else (default, _unquote(first))
        return StatementInfo(kind, updated=(table,))
    return None


def _unquote(name: str) -> str:
    return name[1:-1].replace("``", "`") if name[0] == "`" else name
