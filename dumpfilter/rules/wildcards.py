"""LIKE patterns of replicate-wild-*-table and WL#2516 rules, compiled once to regexes that match in
time linear in the name whatever the pattern (no backtracking blow-up)."""

from __future__ import annotations

import re

WILD_MANY, WILD_ONE, ESCAPE = "%", "_", "\\"


# A pattern's characters: group 1 a character `\` made literal, group 2 any other (a trailing
# lone `\` among them: a literal backslash).
_CHARS = re.compile(re.escape(ESCAPE) + "(.)|(.)", re.DOTALL)


def _like_parts(pattern: str) -> list[list[str]]:
    """The pattern's `%`-separated segments, each a list of regex pieces (`.` for `_`, escaped
    literals). `\\` makes the next character literal; a trailing lone `\\` is a literal backslash."""
    segments: list[list[str]] = [[]]
    for escaped, char in (m.groups() for m in _CHARS.finditer(pattern)):
        if char == WILD_MANY:
            segments.append([])
        else:
            segments[-1].append("." if char == WILD_ONE else re.escape(escaped or char))
    return segments


def like_to_regex(pattern: str) -> str:
    """Translate a LIKE pattern as `my_wildcmp(cs, key, pattern, '\\\\', '_', '%')` reads it.

    `%` is any run (it may span the dot between db and table), `_` exactly one character,
    `\\` makes the next character literal; a trailing lone `\\` is a literal backslash.

    The regex never backtracks more than one segment: a naive `.*a.*a.*b` tries every split of
    the name between the `.*`s (twelve `%` took 33 s on one table name). Here runs of `%`
    collapse to one, and each middle segment is found at its leftmost place and kept there by an
    atomic group `(?>.*?seg)`; leftmost is always right for LIKE (a later segment can only gain
    from an earlier end). So a match costs O(len(name) * len(pattern)), whatever the pattern.
    """
    segments = ["".join(parts) for parts in _like_parts(pattern)]
    if len(segments) == 1:
        return segments[0]
    first, *middle, last = segments
    return first + "".join(f"(?>.*?{seg})" for seg in middle if seg) + ".*" + last


def compile_like(pattern: str) -> re.Pattern[str]:
    """A regex to use with `fullmatch` (only: the atomic groups assume an anchored start)."""
    return re.compile(like_to_regex(pattern), re.DOTALL)


def escape_like(name: str) -> str:
    """Make a plain name match only itself inside a LIKE pattern."""
    return "".join(ESCAPE + char if char in (WILD_MANY, WILD_ONE, ESCAPE) else char for char in name)


def literal_prefix(pattern: str) -> str:
    """The characters every key matching `pattern` starts with: up to the first `%` or `_`, with
    `\\` escapes resolved (`db\\_1.t%` -> `db_1.t`)."""
    out: list[str] = []
    for escaped, char in (m.groups() for m in _CHARS.finditer(pattern)):
        if char in (WILD_MANY, WILD_ONE):
            break
        out.append(escaped or char)
    return "".join(out)


class LikeIndex:
    """Many LIKE patterns, searched for the first (in rule order) that matches a key.

    Patterns are bucketed by their literal prefix, so a key is only matched against patterns
    whose prefix it starts with: ten thousand `app123_%.t%` rules cost a few dict lookups for
    `db3.t1`, not ten thousand regex calls. `patterns` are (regex, shown) pairs, regexes built
    from the already case-folded patterns; `folded` gives those folded pattern texts."""

    def __init__(self, patterns: list[tuple[re.Pattern[str], str]], folded: list[str]):
        self.patterns = patterns
        self.buckets: dict[str, list[tuple[int, re.Pattern[str], str]]] = {}
        for order, ((regex, shown), text) in enumerate(zip(patterns, folded)):
            self.buckets.setdefault(literal_prefix(text), []).append((order, regex, shown))
        self.lengths = sorted({len(prefix) for prefix in self.buckets})

    def __bool__(self) -> bool:
        return bool(self.patterns)

    def first_match(self, key: str) -> str | None:
        candidates: list[tuple[int, re.Pattern[str], str]] = []
        buckets = self.buckets
        for length in self.lengths:
            if length > len(key):
                break
            bucket = buckets.get(key[:length])
            if bucket:
                candidates.extend(bucket)
        if len(candidates) > 1:
            candidates.sort(key=lambda c: c[0])
        return next((shown for _, regex, shown in candidates if regex.fullmatch(key)), None) if candidates else None
