"""What the text of one DDL statement says, read without a schema: the column list of CREATE TABLE,
CREATE VIEW and CREATE SEQUENCE, ALTER TABLE's column changes, the tables a trigger body writes. The
schema model (rules.schema) applies these in order, importing this module only when a table's columns
are first asked for (`filter` never is); the core reads the common forms itself (core/src/facts).
"""

from __future__ import annotations

import re
from collections.abc import Callable

from dumpfilter.rules.lazy_pattern import lazy_compile
from dumpfilter.rules.lazy_sqlglot import exp, sqlglot
from dumpfilter.rules.sqltokens import LexError, tokenize
from dumpfilter.rules.statement_info import Kind, TableRef
from dumpfilter.rules.statements import statement_tables

ColumnsOf = Callable[[str, str], "tuple[str, ...] | None"]  # (db, table) -> its columns, None: unknown

# A MariaDB sequence is a table of these columns (information_schema.COLUMNS lists them).
SEQUENCE_COLUMNS = ("next_not_cached_value", "minimum_value", "maximum_value", "start_value", "increment",
                    "cache_size", "cycle_option", "cycle_count")
_WRITE_WORDS = frozenset({"INSERT", "REPLACE", "UPDATE", "DELETE"})
MAX_WRITES_PER_STATEMENT = 8  # a trigger body's write words before one `;` (core/src/facts/trigger.rs)
_NOT_A_WRITE_BEFORE = frozenset({"KEY", "FOR", "ON", "DUPLICATE"})  # ON DUPLICATE KEY UPDATE, FOR UPDATE, ON DELETE


# Key and character-set changes keep every column's name, and sqlglot reads neither as an ALTER:
# mysqldump writes `/*!40000 ALTER TABLE t DISABLE KEYS */` around each table's rows, so a dump
# restored on the primary logs it, and the table's columns must not become unknown there.
_SEQUENCE = lazy_compile(r"\s*(?:CREATE|ALTER)\s+(?:OR\s+REPLACE\s+)?(?:TEMPORARY\s+)?SEQUENCE\b", re.IGNORECASE)
_ALTER_KEEPS_COLUMNS = lazy_compile(r"\s*ALTER\s+(?:ONLINE\s+|IGNORE\s+)*TABLE\s+(?:`(?:[^`]|``)*`|[^\s`])+\s+"
                                    r"(?:(?:DISABLE|ENABLE)\s+KEYS|CONVERT\s+TO\s+(?:CHARACTER\s+SET|CHARSET)\s[^,;]*)"
                                    r"\s*;?\s*$", re.IGNORECASE)


def alter_columns(columns: tuple[str, ...] | None, sql: str) -> tuple[str, ...] | None:
    """ALTER TABLE's column changes (sqlglot); None (unknown) when it cannot be followed. RENAME TO was
    applied when the statement was recorded. ALTER SEQUENCE changes no column."""
    if columns is not None and (_ALTER_KEEPS_COLUMNS.match(sql) or _SEQUENCE.match(sql)):
        return columns
    try:
        tree = sqlglot.parse_one(sql, read="mysql")
    except (sqlglot.errors.ParseError, sqlglot.errors.TokenError):
        tree = None
    if not isinstance(tree, exp.Alter) or columns is None:
        return None
    names = list(columns)
    for action in tree.args.get("actions") or []:
        if isinstance(action, exp.ColumnDef):
            if action.name.lower() not in names:
                names.append(action.name.lower())
        elif isinstance(action, exp.Drop) and str(action.args.get("kind") or "").upper() == "COLUMN":
            for column in action.args.get("tables") or []:
                if column.name.lower() in names:
                    names.remove(column.name.lower())
        elif isinstance(action, (exp.ModifyColumn, exp.RenameColumn)):
            if isinstance(action, exp.ModifyColumn):
                if action.args.get("rename_from") is None:
                    continue
                old, new = action.args["rename_from"].name.lower(), action.this.name.lower()
            else:
                old, new = action.this.name.lower(), action.args["to"].name.lower()
            if old in names:
                names[names.index(old)] = new
    return tuple(names)


def create_columns(sql: str, default: str, columns_of: ColumnsOf) -> tuple[str, ...] | None:
    """The column list of CREATE TABLE (with sqlglot): defined columns, then CREATE ... SELECT output
    columns not already defined (MySQL appends them); CREATE VIEW's column list, else its SELECT's
    names; a sequence's fixed columns. None when it cannot be read."""
    if _SEQUENCE.match(sql):
        return SEQUENCE_COLUMNS
    try:
        tree = sqlglot.parse_one(sql, read="mysql")
    except (sqlglot.errors.ParseError, sqlglot.errors.TokenError):
        return _columns_by_hand(sql)
    if not isinstance(tree, exp.Create):
        return _columns_by_hand(sql)
    names: list[str] = []
    if isinstance(tree.this, exp.Schema):
        names = [node.name.lower() for node in tree.this.expressions if isinstance(node, exp.ColumnDef)]
        if str(tree.args.get("kind") or "").upper() == "VIEW":  # CREATE VIEW v (a, b) AS ...: the list
            return tuple(node.name.lower() for node in tree.this.expressions) or None
    select = tree.args.get("expression")
    if isinstance(select, exp.Select):
        for projection in select.expressions:
            if isinstance(projection, exp.Star) or (isinstance(projection, exp.Column)
                                                   and isinstance(projection.this, exp.Star)):
                sources = [(t.db or default, t.name) for t in select.find_all(exp.Table)]
                for source in sources:
                    cols = columns_of(*source)
                    if cols is None:
                        return None
                    names += [c for c in cols if c not in names]
                continue
            name = projection.alias_or_name
            if not name:
                return None  # an expression column is named after its text: not modelled
            if name.lower() not in names:
                names.append(name.lower())
    elif select is not None:
        return None
    return tuple(names) if names else None


_CONSTRAINT_WORDS = frozenset({"PRIMARY", "KEY", "INDEX", "UNIQUE", "CONSTRAINT", "FOREIGN", "FULLTEXT", "SPATIAL",
                               "CHECK", "PERIOD", "SYSTEM"})


def _columns_by_hand(sql: str) -> tuple[str, ...] | None:
    """What sqlglot cannot parse: the first identifier of each top-level element of the column list."""
    try:
        tokens = tokenize(sql)
    except LexError:
        return None
    start = next((i for i, t in enumerate(tokens) if t.kind == "punct" and t.value == "("), None)
    # A SELECT or LIKE word (CREATE ... SELECT, CREATE ... LIKE) is not read by hand; one inside a
    # comment or a string is no such word (MySQL's comments do not nest: `/* a /* b */` is one).
    if start is None or any(t.kind == "word" and t.value.upper() in ("SELECT", "LIKE") for t in tokens):
        return None
    names, depth, expecting = [], 0, True
    for token in tokens[start + 1:]:
        if token.kind == "punct" and token.value == "(":
            depth += 1
        elif token.kind == "punct" and token.value == ")":
            if depth == 0:
                break
            depth -= 1
        elif depth == 0 and token.kind == "punct" and token.value == ",":
            expecting = True
        elif depth == 0 and expecting:
            expecting = False
            if token.kind == "word" and token.value.upper() in _CONSTRAINT_WORDS:
                continue
            if token.is_identifier:
                names.append(token.value.lower())
    return tuple(names) or None


_FIRES = {Kind.INSERT: ("INSERT",), Kind.LOAD_DATA: ("INSERT",), Kind.REPLACE: ("INSERT", "DELETE"),
          Kind.UPDATE: ("UPDATE",), Kind.UPDATE_MULTI: ("UPDATE",), Kind.DELETE: ("DELETE",),
          Kind.DELETE_MULTI: ("DELETE",)}


def body_writes(body: str, trigger_db: str) -> tuple[tuple[TableRef, str], ...] | None:
    """Tables a trigger body writes: every INSERT/REPLACE/UPDATE/DELETE statement in it, however nested
    in BEGIN/IF/CASE/loops; unqualified names are in the trigger's database. None if a CALL or a
    statement it cannot classify could write more."""
    body = re.sub(r"^\s*(FOLLOWS|PRECEDES)\s+\S+", "", body, flags=re.IGNORECASE)
    try:
        tokens = tokenize(body)
    except LexError:
        return None
    # Each write word's statement runs to the next `;`: found once, from the end back.
    ends = [len(body)] * (len(tokens) + 1)
    for index in range(len(tokens) - 1, -1, -1):
        token = tokens[index]
        ends[index] = token.start if token.kind == "punct" and token.value == ";" else ends[index + 1]
    words: list[int] = []
    for index, token in enumerate(tokens):
        if token.kind != "word":
            continue
        word = token.value.upper()
        if word == "CALL" or (word == "PREPARE" or word == "EXECUTE"):
            return None
        if word not in _WRITE_WORDS:
            continue
        previous = tokens[index - 1].value.upper() if index and tokens[index - 1].kind == "word" else ""
        if previous in _NOT_A_WRITE_BEFORE:
            continue
        words.append(index)
    # More write words than MAX_WRITES_PER_STATEMENT before one `;`: no body statement holds them,
    # and parsing each from there to the `;` would cost the body's length each time (a hostile
    # CREATE TRIGGER). Not followed.
    run = 0
    for k, index in enumerate(words):
        run = run + 1 if k and ends[words[k - 1]] == ends[index] else 1
        if run > MAX_WRITES_PER_STATEMENT:
            return None
    writes: dict[tuple[TableRef, str], None] = {}  # in body order, each once
    for index in words:
        token = tokens[index]
        piece = re.sub(r"\bEND\s*$", "", body[token.start:ends[index]].strip(), flags=re.IGNORECASE)
        info = statement_tables(piece, trigger_db)
        if not info.parse_ok:
            return None
        for ref in info.updated:
            for event in _FIRES.get(info.kind, ("UPDATE",)):
                writes[(ref, event)] = None
    return tuple(writes)
