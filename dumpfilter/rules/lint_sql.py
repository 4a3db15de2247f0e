"""The statement texts lint reads beyond what the statement facts give: IF NOT EXISTS, the column
list and first row of an INSERT."""

from __future__ import annotations

import re

from dumpfilter import _core

_NAMES = ("word", "quoted_ident")


def if_not_exists(sql: str) -> bool:
    return re.search(r"\bIF\s+NOT\s+EXISTS\b", sql, re.IGNORECASE) is not None


def first_row_values(sql: str) -> int | None:
    """How many values the first row of INSERT ... VALUES (...) carries; None for INSERT ... SELECT."""
    tokens = _core.sql_tokens(sql).tokens
    start = next((i for i, t in enumerate(tokens) if _word(t) in ("VALUES", "VALUE")), None)
    if start is None or start + 1 >= len(tokens) or tokens[start + 1].value != "(":
        return None
    depth, count = 0, 1
    for token in tokens[start + 1:]:
        if token.kind != "punct":
            continue
        if token.value == "(":
            depth += 1
        elif token.value == ")":
            depth -= 1
            if depth == 0:
                return count
        elif token.value == "," and depth == 1:
            count += 1
    return None


def insert_column_list(sql: str) -> list[str] | None:
    """The column list of INSERT/REPLACE [INTO] tbl (cols) ...: [] when there is none (VALUES or SELECT
    follows the table name), None for INSERT ... SET or text it cannot follow."""
    tokens = _core.sql_tokens(sql).tokens
    i, n = 0, len(tokens)
    while i < n and not (tokens[i].kind == "word" and tokens[i].value.upper() in ("INSERT", "REPLACE")):
        i += 1
    i += 1
    while i < n and tokens[i].kind == "word" and tokens[i].value.upper() in (
            "LOW_PRIORITY", "DELAYED", "HIGH_PRIORITY", "IGNORE", "INTO"):
        i += 1
    if i >= n or tokens[i].kind not in _NAMES:
        return None
    i += 1
    if i + 1 < n and tokens[i].kind == "punct" and tokens[i].value == "." and tokens[i + 1].kind in _NAMES:
        i += 2
    if i >= n or _word(tokens[i]) == "PARTITION":
        return None
    if tokens[i].kind == "punct" and tokens[i].value == "(":
        if i + 1 < n and _word(tokens[i + 1]) in ("SELECT", "WITH", "VALUES"):
            return []
        columns, j = [], i + 1
        while j < n and not (tokens[j].kind == "punct" and tokens[j].value == ")"):
            if tokens[j].kind in _NAMES:
                columns.append(tokens[j].value)
            j += 1
        return columns
    if _word(tokens[i]) in ("VALUES", "VALUE", "SELECT", "WITH"):
        return []
    return None


def _word(token: _core.SqlToken) -> str:
    return token.value.upper() if token.kind == "word" else ""
