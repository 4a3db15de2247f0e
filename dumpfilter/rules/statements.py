"""Which tables a statement updates and reads (the TABLE_LIST the applier hands to tables_ok), per statement kind."""

from __future__ import annotations

import functools

import re

from dumpfilter.codec.transactions import statement_verb
from dumpfilter.rules.lazy_pattern import lazy_compile

from dumpfilter.rules.sqltokens import LexError, tokenize
from dumpfilter.rules.statement_info import Kind, StatementInfo, TableRef, _INFO_DEFAULTS
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
    default = default_db or ""
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


def _fast_path(sql: str, default: str) -> StatementInfo | None:
    # DDL first when the text opens with its letter: what the DDL forms read cannot match the DML
    # forms (which need INSERT/REPLACE/UPDATE/DELETE first), so the answer is the same either way.
    ddl_tried = sql[:1] in "CcDd"
    if ddl_tried:
        fast = _fast_ddl(sql, default)
        if fast is not None:
            return fast
    for kind, form in _FAST_FORMS:
        match = form.match(sql)
        if match is None:
            continue
        first, second = match.group(2), match.group(3)
        if second is None and first.upper() in _INSERT_SKIP_WORDS:
            return None
        if _dml_needs_parser(sql):  # subqueries or comments: let the full parser list the read tables
            return None
        if kind is Kind.INSERT and match.group(1).upper() == "REPLACE":
            kind = Kind.REPLACE
        table = (_unquote(first), _unquote(second)) if second else (default, _unquote(first))
        return StatementInfo(kind, updated=(table,))
    return None if ddl_tried else _fast_ddl(sql, default)


# DDL a workload repeats with distinct names (scratch tables): DROP TABLE [IF EXISTS] list and
# CREATE [TEMPORARY] TABLE [IF NOT EXISTS] t (...) with no LIKE or SELECT. ASCII only (no Unicode case
# folding or spaces to mirror), no comments, quotes balanced (else the lexer's error decides): anything
# else goes to the full parser, which answers the same for these shapes (tests/rules hold them equal).
_DDL_FLAGS = re.IGNORECASE | re.ASCII
_PNAME = r"(?:`(?:[^`]++|``)++`|[A-Za-z0-9_$]++)"  # possessive: a doubled backquote stays a pair, as in the lexer
_PQNAME = rf"({_PNAME})(?:\s*\.\s*({_PNAME}))?"
# The first name's parts are groups 3 and 4; group 5 holds the rest of the list (`, name`...).
_FAST_DROP = lazy_compile(
    rf"\s*DROP\s+(TEMPORARY\s+)?(?:TABLES?|SEQUENCE)\s+(IF\s+EXISTS\s+)?"
    rf"{_PQNAME}((?:\s*,\s*{_PNAME}(?:\s*\.\s*{_PNAME})?)*)\s*;?\s*\Z", _DDL_FLAGS)
_FAST_CREATE = lazy_compile(
    rf"\s*CREATE\s+(TEMPORARY\s+)?TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?{_PQNAME}\s*\(", _DDL_FLAGS)
_QNAME_RE = lazy_compile(_PQNAME, _DDL_FLAGS)
_DDL_NEEDS_PARSER = lazy_compile(r"\b(?:SELECT|LIKE)\b", _DDL_FLAGS)
# The lexer's view of a CREATE TABLE's column list: quoted runs closed, backslash pairs in strings.
_BALANCED = lazy_compile(r"""(?:[^'"`]++|`(?:[^`]++|``)*+`|'(?:[^'\\]++|''|\\.)*+'|"(?:[^"\\]++|""|\\.)*+")*+\Z""",
                       re.DOTALL)


def _needs_parser(sql: str) -> bool:
    """Whether a DDL text the DDL fast forms matched holds a comment, a SELECT or a LIKE (the full
    parser decides those)."""
    if "/*" in sql or "*/" in sql or "#" in sql or "--" in sql:
        return True
    upper = sql.upper()
    return ("SELECT" in upper or "LIKE" in upper) and _DDL_NEEDS_PARSER.search(sql) is not None


def _fast_ddl(sql: str, default: str) -> StatementInfo | None:
    if not sql.isascii():
        return None
    first_char = sql[:1]  # an anchored form cannot match text opening with another letter
    if first_char not in "Cc" and (match := _FAST_DROP.match(sql)) is not None:
        if _needs_parser(sql):
            return None
        first, second = match.group(3, 4)
        tables: tuple[tuple[str, str], ...] = ((_unquote(first), _unquote(second)) if second
                                               else (default, _unquote(first)),)
        if match.group(5):
            tables += tuple((_unquote(first), _unquote(second)) if second else (default, _unquote(first))
                            for first, second in _QNAME_RE.findall(match.group(5)))
        return _fast_info(Kind.DROP_TABLE, tables, match.group(1) is not None, match.group(2) is not None)
    if first_char not in "Dd" and (match := _FAST_CREATE.match(sql)) is not None:
        if _needs_parser(sql) or _BALANCED.match(sql, match.end()) is None:
            return None
        first, second = match.group(2, 3)
        table = (_unquote(first), _unquote(second)) if second else (default, _unquote(first))
        return _fast_info(Kind.CREATE_TABLE, (table,), match.group(1) is not None, False)
    return None


def _fast_info(kind: Kind, updated: tuple[TableRef, ...], temporary: bool, if_exists: bool) -> StatementInfo:
    """StatementInfo(kind, updated=..., temporary=..., if_exists=...) without the keyword check."""
    info = _new_info(StatementInfo)
    attrs = info.__dict__
    attrs.update(_INFO_DEFAULTS)
    attrs["kind"], attrs["updated"], attrs["temporary"], attrs["if_exists"] = kind, updated, temporary, if_exists
    return info


_new_info = object.__new__


def _unquote(name: str) -> str:
    return name[1:-1].replace("``", "`") if name[0] == "`" else name


























