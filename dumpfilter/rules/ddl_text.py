"""The column list of CREATE TABLE, CREATE VIEW and CREATE SEQUENCE where the core's facts do not
read it (core/src/facts reads the common forms and ALTER TABLE's changes). The schema model
(rules.schema) imports this module only when a table's columns are first asked for (`filter` never is).
"""

from __future__ import annotations

import re
from collections.abc import Callable

from dumpfilter.rules.lazy_pattern import lazy_compile
from dumpfilter.rules.lazy_sqlglot import exp, sqlglot

ColumnsOf = Callable[[str, str], "tuple[str, ...] | None"]  # (db, table) -> its columns, None: unknown

# A MariaDB sequence is a table of these columns (information_schema.COLUMNS lists them).
SEQUENCE_COLUMNS = ("next_not_cached_value", "minimum_value", "maximum_value", "start_value", "increment",
                    "cache_size", "cycle_option", "cycle_count")
_SEQUENCE = lazy_compile(r"\s*CREATE\s+(?:OR\s+REPLACE\s+)?(?:TEMPORARY\s+)?SEQUENCE\b", re.IGNORECASE)


def create_columns(sql: str, default: str, columns_of: ColumnsOf) -> tuple[str, ...] | None:
    """The column list of CREATE TABLE (with sqlglot): defined columns, then CREATE ... SELECT output
    columns not already defined (MySQL appends them); CREATE VIEW's column list, else its SELECT's
    names; a sequence's fixed columns. None when it cannot be read."""
    if _SEQUENCE.match(sql):
        return SEQUENCE_COLUMNS
    try:
        tree = sqlglot.parse_one(sql, read="mysql")
    except (sqlglot.errors.ParseError, sqlglot.errors.TokenError):
        return None
    if not isinstance(tree, exp.Create):
        return None
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
