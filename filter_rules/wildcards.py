"""LIKE patterns of replicate-wild-*-table and WL#2516 rules, compiled once to anchored regexes."""

from __future__ import annotations

import re

WILD_MANY, WILD_ONE, ESCAPE = "%", "_", "\\"


def like_to_regex(pattern: str) -> str:
    """Translate a LIKE pattern as `my_wildcmp(cs, key, pattern, '\\\\', '_', '%')` reads it.

    `%` is any run (it may span the dot between db and table), `_` exactly one character,
    `\\` makes the next character literal; a trailing lone `\\` is a literal backslash.
    """
    parts: list[str] = []
    index = 0
    while index < len(pattern):
        char = pattern[index]
        if char == ESCAPE and index + 1 < len(pattern):
            parts.append(re.escape(pattern[index + 1]))
            index += 2
            continue
        parts.append(".*" if char == WILD_MANY else "." if char == WILD_ONE else re.escape(char))
        index += 1
    return "".join(parts)


def compile_like(pattern: str) -> re.Pattern[str]:
    return re.compile(like_to_regex(pattern), re.DOTALL)


def escape_like(name: str) -> str:
    """Make a plain name match only itself inside a LIKE pattern."""
    return "".join(ESCAPE + char if char in (WILD_MANY, WILD_ONE, ESCAPE) else char for char in name)
