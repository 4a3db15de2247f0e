"""WL#2516 `REWRITE=db1.%->db2.%` patterns matched without backtracking: each `%` of FROM captures
a run that fills the next `%` of TO. A slave sends these patterns, so their cost must not depend
on how many `%` they hold: the regex `a(.*)b(.*)c...` tried every split of a name among its
groups (twenty `%` against a twenty-character table name: 10^10 splits, with the GIL held)."""

from __future__ import annotations


class PercentCaptures:
    """`pattern` with `%` as its only wildcard (any run, captured); `fullmatch(key)` answers
    what `re.fullmatch` of `re.escape(part_0) + "(.*)" + re.escape(part_1) + ...` answers,
    groups included, in O(len(key) * len(pattern)) at worst."""

    def __init__(self, pattern: str):
        self.pattern = pattern
        self.parts = pattern.split("%")

    def fullmatch(self, key: str) -> Captures | None:
        """The regex's greedy groups: the first as long as it can be, then the second, and so
        on. That is every literal part at its rightmost place that still leaves room for the
        parts after it, found from the right with one rfind per part."""
        parts = self.parts
        first, last = parts[0], parts[-1]
        if len(parts) == 1:
            return Captures(()) if key == first else None
        end = len(key) - len(last)
        if end < len(first) or not key.startswith(first) or not key.endswith(last):
            return None
        starts = [end]
        for part in reversed(parts[1:-1]):
            start = key.rfind(part, len(first), starts[-1])  # wholly between the prefix and the next part
            if start < 0:
                return None
            starts.append(start)
        starts.reverse()  # the start of parts[1], parts[2], ..., parts[-1]
        groups, at = [], len(first)
        for part, start in zip(parts[1:], starts):
            groups.append(key[at:start])
            at = start + len(part)
        return Captures(tuple(groups))


class Captures:
    """What a match gives back: its groups, as `re.Match.groups()` does."""

    __slots__ = ("_groups",)

    def __init__(self, groups: tuple[str, ...]):
        self._groups = groups

    def groups(self) -> tuple[str, ...]:
        return self._groups
