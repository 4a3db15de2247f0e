"""What a statement's text reaches, for the master policy's bound (master/policy.py): every table
and schema it reads or writes, found conservatively; None when the text cannot be told.

A security bound, not a replicate-* rule. MySQL's rules decide `CREATE USER ... IDENTIFIED BY`
under `USE shop` by `shop` (rpl_filter.cc's db_ok: a real replica with replicate-do-db=shop
applies it), and those semantics stay in rules/evaluate.py; the bound sees what the statement
writes, the grant tables of the `mysql` schema, and sends the password only to an identity
allowed all of `mysql`. The reach of a text is everything it names, wherever it sits:

- the classifier's tables (statements.py: updated, read, joined);
- every table sqlglot finds in the whole text (subqueries in VALUES and ON DUPLICATE KEY UPDATE,
  CTEs, CREATE ... SELECT, view bodies), CTE names left out;
- every qualified name `x.y` outside strings that is not a table or alias the statement defines:
  `secret.f()`, `NEXTVAL(secret.s)`, a column `secret.t.c` (taken as the table x.y);
- the sequences of NEXTVAL()/LASTVAL()/SETVAL() and NEXT/PREVIOUS VALUE FOR;
- FOREIGN KEY ... REFERENCES and ALTER TABLE ... RENAME targets;
- the bodies of triggers, routines and events, statement by statement;
- the inner statement of MariaDB's SET STATEMENT ... FOR.

One reader per form (`_reach`): the core reads single-table DML (the master walk's own check)
and the bodies of triggers, routines and events statement by statement (the body statements it
declines are read one by one here); every other form is read here by the general path: the
classifier (statements.py, itself the core's where it reads the form), the core's tokens
(`_core.sql_tokens`) and sqlglot.

What cannot be listed for sure widens the reach: a `name(` that may call a stored function, or a
clause no parser read, reaches the default database as a whole (`default_schema`); a routine's or
trigger's body not read whole, its schema. Text with a query (SELECT, WITH, TABLE) that sqlglot
cannot parse, two statements in one event, or a statement the classifier cannot read is not
analysed at all (None): the policy does not send it."""

from __future__ import annotations

import functools
import re
from collections.abc import Collection, Iterable, Sequence
from typing import cast
from dataclasses import dataclass

from dumpfilter import _core
from dumpfilter.codec.event import decode_text
from dumpfilter.rules.lazy_pattern import LazyPattern
from dumpfilter.rules.lazy_sqlglot import exp, sqlglot
from dumpfilter.rules.sql_functions import may_be_stored
from dumpfilter.rules.statement_info import DATABASE_KINDS, Kind, StatementInfo, TableRef
from dumpfilter.rules.statements import statement_tables

ACCOUNT_SCHEMA = "mysql"  # GRANT, REVOKE, CREATE/ALTER/DROP/RENAME USER and ROLE, SET PASSWORD write its tables
UNKNOWN_DB = "\x00"       # an Annotate_rows text's default database, which the event does not carry


@dataclass(frozen=True)
class Reach:
    """Everything a statement touches: `tables` (db, table), `*` for `db.*`; `schemas` reached as a
    whole (a database statement's, `mysql` for account statements, a routine's, whose body runs
    there); `default_schema`: objects of the default database may be reached that are not listed."""

    tables: frozenset[TableRef] = frozenset()
    schemas: frozenset[str] = frozenset()
    default_schema: bool = False


NOTHING = Reach()

_ROUTINES = frozenset({"PROCEDURE", "FUNCTION", "EVENT", "PACKAGE"})
# Kinds whose text may hold expressions (subqueries, function calls): the others are DDL, whose
# expressions (DEFAULT, CHECK, generated columns) may call neither a stored function nor a query.
_EXPRESSION_KINDS = frozenset({Kind.INSERT, Kind.REPLACE, Kind.UPDATE, Kind.UPDATE_MULTI, Kind.DELETE,
                               Kind.DELETE_MULTI, Kind.LOAD_DATA, Kind.SET, Kind.OTHER, Kind.ROUTINE})
# Words after which tables may be named that the classifier does not list: a query, a CTE, and
# MySQL 8's TABLE t (`INSERT INTO t TABLE s`; in DDL TABLE is only the object word).
_QUERY_WORDS = frozenset({"SELECT", "WITH"})
_DML_QUERY_WORDS = _QUERY_WORDS | {"TABLE"}
_SEQUENCE_CALLS = frozenset({"NEXTVAL", "LASTVAL", "SETVAL"})
_BODY_VERBS = frozenset({"INSERT", "REPLACE", "UPDATE", "DELETE", "SELECT", "WITH", "SET", "CALL"})
_TRIGGER_ROWS = frozenset({"NEW", "OLD"})
_RESERVED_MODIFIERS = frozenset({"LOW_PRIORITY", "DELAYED", "HIGH_PRIORITY"})  # sqlglot reads none of them
_CACHED_SQL_LEN = 4096


def statement_reach(sql: str, default_db: str | None) -> Reach | None:
    """The reach of one statement run with `default_db`; None when it cannot be analysed.
    Analysed in its `shape` (literals blanked: they name nothing), remembered for the last 4096
    short shapes, so that statements differing in their values are analysed once."""
    default = default_db or ""
    if "\\" not in sql:
        return _reach_of_shape(shape(sql), default)
    # Under NO_BACKSLASH_ESCAPES a backslash is itself, and 'x\' ends a string the default
    # reading goes on with (the event's sql_mode is not read here): the reach is that of both
    # readings, of those the lexer can split (the server split the text one of the two ways).
    readings = [text for text in (sql, sql.replace("\\", "\\\\")) if _core.sql_tokens(text).error is None]
    reaches = [_reach_of_shape(shape(text), default) for text in readings]
    if not reaches or None in reaches:
        return None
    complete = cast(list[Reach], reaches)  # no None among them: checked just above
    return Reach(frozenset().union(*(r.tables for r in complete)), frozenset().union(*(r.schemas for r in complete)),
                 any(r.default_schema for r in complete))


def shape(sql: str) -> str:
    """`sql` with its single-quoted strings emptied and its numbers made 0 (names, backquoted or
    double-quoted text, comments as they are): what a reach depends on."""
    if len(sql) > _SHAPED_SQL_LEN:
        return sql
    if '"' in sql or "#" in sql or "--" in sql or "/*" in sql or ("`" in sql and "`" in _PLAIN_QUOTED.sub("", sql)):
        return _SHAPE.sub(_shape_part, sql)
    # No span to keep whole but backquoted words, where no number can start or end: two plain
    # substitutions (a tenth of the time of one with a callback per literal).
    return _NUMBER.sub("0", _STRING.sub("''", sql))


def _shape_part(match: re.Match[str]) -> str:
    kept = match.group(1)
    if kept is not None:
        return kept
    return "''" if match.group()[0] == "'" else "0"


_SHAPE = LazyPattern(r"(`(?:[^`]++|``)*+`|\"(?:[^\"\\]++|\\.|\"\")*+\"|/\*.*?\*/|(?:\#|--\s)[^\n]*+)"
                      r"|'(?:[^'\\]++|\\.|'')*+'|(?<![\w$.`])\d++(?:\.\d+)?(?:[eE][-+]?\d+)?(?![\w$.`])", re.DOTALL)
_SHAPED_SQL_LEN = 1 << 16
_STRING = LazyPattern(r"'(?:[^'\\]++|\\.|'')*+'", re.DOTALL)
_NUMBER = LazyPattern(r"(?<![\w$.`])\d++(?:\.\d+)?(?:[eE][-+]?\d+)?(?![\w$.`])")
_PLAIN_QUOTED = LazyPattern(r"`[\w$]*+`")


def _reach_of_shape(text: str, default: str) -> Reach | None:
    if len(text) > _CACHED_SQL_LEN:
        return _reach(text, default)
    return _reach_cached(text, default)


def annotation_reach(sql: str, maps: Iterable[TableRef]) -> Reach | None:
    """The reach of an Annotate_rows / Rows_query text, whose statement wrote rows to the tables of
    `maps` (its Table_maps). The event does not carry the default database: it is told by the
    tables the statement updates without a qualifier, which must each have Table_maps in one and
    the same database (else None). The default database's share is folded into `schemas`."""
    reach = statement_reach(sql, UNKNOWN_DB)
    if reach is None:
        return None
    unknown = any(db == UNKNOWN_DB for db, _ in reach.tables) or UNKNOWN_DB in reach.schemas
    if not unknown and not reach.default_schema:
        return reach
    updated = {table for db, table in statement_tables(shape(sql), UNKNOWN_DB).updated if db == UNKNOWN_DB}
    dbs = {db for db, table in maps if table in updated}
    if len(dbs) != 1:
        return None
    (default,) = dbs

    def resolve(db: str) -> str:
        return default if db == UNKNOWN_DB else db

    schemas = {resolve(s) for s in reach.schemas} | ({default} if reach.default_schema else set())
    return Reach(frozenset((resolve(db), table) for db, table in reach.tables), frozenset(schemas))


def _reach(sql: str, default: str) -> Reach | None:
    """One reader per form: single-table DML whose text the core shows reaches its table alone
    (`_core.reaches_key_alone`, the check the master's walk makes of every statement text; most
    statements of a STATEMENT binlog and most Annotate_rows texts) is that table, read by the core;
    a trigger's, routine's or event's body the core reads (`_core_body`); every other text, and
    whatever the core declines, is read by the general path (`_full`: the classifier, the tokens,
    sqlglot)."""
    raw = sql.encode("utf-8", "surrogateescape")
    key = _core.statement_key(raw)
    if key is not None and _core.reaches_key_alone(raw):
        return Reach(frozenset({(decode_text(key.db) if key.db is not None else default, decode_text(key.table))}))
    info = statement_tables(sql, default)
    core = _core_body(raw, info)
    return core if core is not None else _full(sql, default, info)


_reach_cached = functools.lru_cache(maxsize=4096)(_reach)


def _full(sql: str, default: str, info: StatementInfo) -> Reach | None:
    tokens = _core.sql_tokens(sql, ansi_quotes=True).tokens
    if not tokens:  # (nothing, or a quote or comment left open)
        return None
    if _word(tokens, 0) == "SET" and _word(tokens, 1) == "STATEMENT":
        return _set_statement(sql, tokens, default)
    kind = info.kind
    if not info.parse_ok:
        return None
    if kind is Kind.TRANSACTION:
        return NOTHING if _single(tokens) else None
    if kind is Kind.ACCOUNT:
        return Reach(frozenset(info.updated), frozenset({ACCOUNT_SCHEMA}))
    if kind in DATABASE_KINDS:
        return Reach(schemas=frozenset({info.db_statement_name or default}))
    if _word(tokens, 0) in ("CREATE", "ALTER") and _body_db(info) is not None:
        return None  # a body the core does not read (`_core_body`)
    tables, schemas = _header(info)
    if not _single(tokens):
        return None  # a server writes one statement per event: text made to look otherwise
    return _text(sql, tokens, info, default, tables, schemas)


def _text(sql: str, tokens: list[_core.SqlToken], info: StatementInfo, default: str, tables: set[TableRef], schemas: set[str]
          ) -> Reach | None:
    """A statement without a body: the classifier's tables, then sqlglot's over the whole text
    when it may name more (a query, a qualified name not yet explained, a call)."""
    expressions = info.kind in _EXPRESSION_KINDS
    known = {table for _, table in tables} | {alias for _, aliases in info.joined for alias in aliases}
    tables |= _sequences(tokens, default) | _references(tokens, default, info)
    query_words = _DML_QUERY_WORDS if expressions and info.kind is not Kind.LOAD_DATA else _QUERY_WORDS
    query = any(token.kind == "word" and token.value.upper() in query_words for token in tokens)
    pairs = _qualified(tokens, known) - tables
    calls = expressions and _stored_calls(tokens, known)
    if not query and not pairs and not calls:
        return _finish(tables, schemas, False)
    tree = _parse(sql)
    if tree is None:
        if query:
            return None
        return _finish(tables | pairs, schemas, calls)
    found, names, stored = _tree(tree, default)
    tables |= found
    return _finish(tables | _qualified(tokens, known | names), schemas, stored)


def _header(info: StatementInfo) -> tuple[set[TableRef], set[str]]:
    """The tables and schemas a statement's classifier reading reaches (its body's aside)."""
    tables = set(info.updated) | set(info.read) | {ref for ref, _ in info.joined}
    schemas: set[str] = set()
    if info.target is not None:
        obj, db, name = info.target
        if obj in _ROUTINES:
            schemas.add(db)
        elif name:  # mysql.plugin, mysql.servers (CREATE SERVER's password), mysql.func
            tables.add((db, name))
    if info.kind is Kind.DROP_TRIGGER and info.trigger is not None:
        schemas.add(info.trigger[0])
    return tables, schemas


def _finish(tables: set[TableRef], schemas: set[str], default_schema: bool) -> Reach:
    # A statement that names no object (FLUSH, DO 1, SET @x = 1) needs its default database allowed.
    return Reach(frozenset(tables), frozenset(schemas), default_schema or not (tables or schemas))


def _set_statement(sql: str, tokens: list[_core.SqlToken], default: str) -> Reach | None:
    """MariaDB's `SET STATEMENT var = value[, ...] FOR statement`: the inner statement's reach,
    with what the values name."""
    depth = 0
    for i in range(2, len(tokens)):
        token = tokens[i]
        if token.kind == "punct" and token.value in "()":
            depth += 1 if token.value == "(" else -1
        elif depth == 0 and token.kind == "word" and token.value.upper() == "FOR" and i + 1 < len(tokens):
            inner = statement_reach(sql[tokens[i + 1].start:], default)
            head = tokens[2:i]
            if inner is None or any(t.kind == "word" and t.value.upper() in _QUERY_WORDS for t in head):
                return None
            extra = _qualified(head, frozenset()) | _sequences(head, default)
            return Reach(inner.tables | extra, inner.schemas, inner.default_schema or _stored_calls(head, set()))
    return None


# -- bodies of triggers, routines and events -----------------------------------------------------

def _core_body(raw: bytes, info: StatementInfo) -> Reach | None:
    """The reach of a trigger, routine or event whose body the core reads (`_core.body_reach`,
    the statement facts' lexer `filter` reads triggers with): the tables of the body statements it
    shows reach their table alone, and the pieces it declines (byte spans of `raw`, the text
    encoded) read by the general path (`_body`). None where the core does not read the text (a
    quote or comment left open, a first string after a dot): not analysed then (`_full`)."""
    body_db = _body_db(info) if info.parse_ok else None
    if body_db is None:
        return None
    trigger = info.kind is Kind.CREATE_TRIGGER
    event = not trigger and info.target is not None and info.target[0] == "EVENT"
    read = _core.body_reach(raw, _core.BODY_TRIGGER if trigger else _core.BODY_EVENT if event else _core.BODY_ROUTINE)
    if read is None:
        return None
    tables, schemas = _header(info)
    texts = (decode_text(raw[start:end]) for start, end in zip(read.starts, read.ends))
    found, complete = _body(((text, _core.sql_tokens(text, ansi_quotes=True).tokens, len(text)) for text in texts),
                            body_db, trigger)
    tables |= {(decode_text(t.db) if t.db is not None else body_db, decode_text(t.name)) for t in read.tables}
    return Reach(frozenset(tables | found), frozenset(schemas if complete else schemas | {body_db}))


def _body_db(info: StatementInfo) -> str | None:
    """The database a CREATE/ALTER TRIGGER, PROCEDURE, FUNCTION, EVENT or PACKAGE body runs in
    (its unqualified names are that database's), or None for a statement without a body."""
    if info.kind is Kind.CREATE_TRIGGER and info.trigger is not None:
        return info.trigger[0]
    if info.kind is Kind.ROUTINE and info.target is not None and info.target[0] in _ROUTINES:
        return info.target[1]
    return None


def _body(pieces: Iterable[tuple[str, list[_core.SqlToken], int]], db: str, trigger: bool) -> tuple[set[TableRef], bool]:
    """(tables, whether every piece was read) of a body's pieces (`;` apart; each a text, its
    tokens, its end), the general reading: each from its first statement verb through sqlglot
    (unqualified names in `db`), every qualified name of a piece checked against the names its own
    statement defines (NEW and OLD in a trigger)."""
    rows = _TRIGGER_ROWS if trigger else frozenset()
    tables: set[TableRef] = set()
    complete = True
    for sql, piece, end in pieces:
        verb = next((i for i, t in enumerate(piece) if t.kind == "word" and t.value.upper() in _BODY_VERBS), None)
        names = set(rows)
        if verb is not None:
            tree = _parse(sql[piece[verb].start:end])
            if tree is None:
                complete = False
            else:
                found, defined, stored = _tree(tree, db)
                tables |= found
                names |= defined
                complete = complete and not stored
        if _stored_calls(piece if verb is None else piece[:verb], names):
            complete = False  # IF f(x) THEN ...
        tables |= _qualified(piece, names) | _sequences(piece, db)
    return tables, complete


# -- sqlglot ---------------------------------------------------------------------------------------

def _parse(text: str) -> exp.Expr | None:
    """sqlglot's tree of `text` (REPLACE read as INSERT, priority modifiers left out: sqlglot reads
    neither, and neither changes the tables), or None: not parsed, or parsed only as a Command."""
    lexed = _core.sql_tokens(text)
    if lexed.error is not None:
        return None
    tokens = lexed.tokens
    cuts: list[tuple[int, int, str]] = []
    if _word(tokens, 0) == "REPLACE":
        cuts.append((tokens[0].start, tokens[0].start + 7, "INSERT"))
    verb = _word(tokens, 0)
    i = 1
    while verb in ("UPDATE", "DELETE") and _word(tokens, i) in ("LOW_PRIORITY", "QUICK", "IGNORE"):
        cuts.append((tokens[i].start, tokens[i].start + len(tokens[i].value), ""))
        i += 1
    cuts += [(t.start, t.start + len(t.value), "") for t in tokens[i:]
             if t.kind == "word" and t.value.upper() in _RESERVED_MODIFIERS]
    for start, end, replacement in sorted(cuts, reverse=True):
        text = text[:start] + replacement + text[end:]
    try:
        tree = sqlglot.parse_one(text, read="mysql")
    except Exception:  # noqa: BLE001 - hostile text: sqlglot raises more than its ParseError
        return None
    if tree is None or isinstance(tree, exp.Command):
        return None
    return tree


def _tree(tree: exp.Expr, default: str) -> tuple[set[TableRef], set[str], bool]:
    """(tables, names the statement defines: tables' names, aliases, CTEs; whether an unqualified
    call may be a stored function's) of a sqlglot tree."""
    ctes = {cte.alias for cte in tree.find_all(exp.CTE) if cte.alias}
    names = set(ctes)
    tables: set[TableRef] = set()
    for table in tree.find_all(exp.Table):
        name = table.name
        if not name:
            continue
        names.add(name)
        if table.alias:
            names.add(table.alias)
        if table.args.get("catalog") is not None:  # a.b.c: no such table name in MySQL; a.b is named
            tables.add((table.catalog, table.db))
        elif table.db:
            tables.add((table.db, name))
        elif name not in ctes:
            tables.add((default, name))
    names |= {alias.name for alias in tree.find_all(exp.TableAlias) if alias.name}
    stored = any(not isinstance(call.parent, exp.Dot) and may_be_stored(call.name)
                 for call in tree.find_all(exp.Anonymous))
    return tables, names, stored


# -- token scans -----------------------------------------------------------------------------------

def _qualified(tokens: Sequence[_core.SqlToken], known: Collection[str]) -> set[TableRef]:
    """Every `x.y` (or `x.*`) whose x is not a name in `known`: x may be a database. Skipped:
    `@@session.x`, numbers (`1.5`), the later parts of `x.y.z`."""
    found: set[TableRef] = set()
    for i in range(len(tokens) - 2):
        token = tokens[i]
        if (token.kind not in ("word", "quoted_ident") or not _punct(tokens, i + 1, ".")
                or (i and tokens[i - 1].kind == "punct" and tokens[i - 1].value in (".", "@"))
                or (token.kind == "word" and token.value.isdigit()) or token.value in known):
            continue
        after = tokens[i + 2]
        if after.kind in ("word", "quoted_ident"):
            found.add((token.value, after.value))
        elif after.kind == "punct" and after.value == "*":
            found.add((token.value, "*"))
    return found


def _sequences(tokens: Sequence[_core.SqlToken], default: str) -> set[TableRef]:
    """The sequences of NEXTVAL(s), LASTVAL(s), SETVAL(s, n), NEXT VALUE FOR s, PREVIOUS VALUE FOR s."""
    found: set[TableRef] = set()
    for i, token in enumerate(tokens):
        if token.kind != "word":
            continue
        word = token.value.upper()
        if word in _SEQUENCE_CALLS and _punct(tokens, i + 1, "("):
            at = i + 2
        elif word in ("NEXT", "PREVIOUS") and _word(tokens, i + 1) == "VALUE" and _word(tokens, i + 2) == "FOR":
            at = i + 3
        else:
            continue
        ref = _name_at(tokens, at, default)
        if ref is not None:
            found.add(ref)
    return found


def _references(tokens: Sequence[_core.SqlToken], default: str, info: StatementInfo) -> set[TableRef]:
    """The parent tables of FOREIGN KEY ... REFERENCES and the new name of ALTER TABLE ... RENAME;
    an unqualified one in the default database and in the statement's table's (either may be it)."""
    found: set[TableRef] = set()
    home = info.updated[0][0] if info.updated else default
    alter = info.kind is Kind.ALTER_TABLE
    for i, token in enumerate(tokens):
        word = token.value.upper() if token.kind == "word" else ""
        if word == "REFERENCES" or (alter and word == "RENAME" and _word(tokens, i + 1) not in ("COLUMN", "INDEX",
                                                                                              "KEY", "CONSTRAINT")):
            at = i + 1 + (_word(tokens, i + 1) in ("TO", "AS"))
            ref = _name_at(tokens, at, UNKNOWN_DB)
            if ref is not None:
                found |= {(default, ref[1]), (home, ref[1])} if ref[0] == UNKNOWN_DB else {ref}
    return found


def _stored_calls(tokens: Sequence[_core.SqlToken], known: Collection[str]) -> bool:
    """Whether an unqualified `name(` may call a stored function (not a builtin, keyword, type or a
    name in `known`, such as the table before its column list)."""
    for i in range(len(tokens) - 1):
        token = tokens[i]
        if token.kind not in ("word", "quoted_ident") or not _punct(tokens, i + 1, "("):
            continue
        if i and _punct(tokens, i - 1, "."):
            continue  # qualified: `_qualified` lists it
        if token.value not in known and (token.kind == "quoted_ident" or may_be_stored(token.value)):
            return True
    return False


def _name_at(tokens: Sequence[_core.SqlToken], i: int, default: str) -> TableRef | None:
    if i >= len(tokens) or tokens[i].kind not in ("word", "quoted_ident"):
        return None
    if _punct(tokens, i + 1, ".") and i + 2 < len(tokens) and tokens[i + 2].kind in ("word", "quoted_ident"):
        return tokens[i].value, tokens[i + 2].value
    return default, tokens[i].value


def _single(tokens: list[_core.SqlToken]) -> bool:
    """No second statement after a `;`."""
    semis = [token.kind == "punct" and token.value == ";" for token in tokens]
    return True not in semis or all(semis[semis.index(True):])


def _word(tokens: Sequence[_core.SqlToken], i: int) -> str:
    if i < len(tokens) and tokens[i].kind == "word":
        return tokens[i].value.upper()
    return ""


def _punct(tokens: Sequence[_core.SqlToken], i: int, char: str) -> bool:
    return i < len(tokens) and tokens[i].kind == "punct" and tokens[i].value == char
