"""What the text of one DDL statement says, read without a schema: the column list of CREATE TABLE,
CREATE VIEW and CREATE SEQUENCE, ALTER TABLE's column changes. The
schema model (rules.schema) applies these in order, importing this module only when a table's columns
are first asked for (`filter` never is); the core reads the common forms itself (core/src/facts).
"""

from __future__ import annotations

import re
from collections.abc import Callable

from dumpfilter.rules.lazy_pattern import lazy_compile
from dumpfilter.rules.lazy_sqlglot import exp, sqlglot
from dumpfilter.rules.sqltokens import LexError, tokenize

ColumnsOf = Callable[[str, str], "tuple[str, ...] | None"]  # (db, table) -> its columns, None: unknown

# A MariaDB sequence is a table of these columns (information_schema.COLUMNS lists them).
SEQUENCE_COLUMNS = ("next_not_cached_value", "minimum_value", "maximum_value", "start_value", "increment",
                    "cache_size", "cycle_option", "cycle_count")


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
