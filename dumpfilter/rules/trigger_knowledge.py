"""What one replica knows of triggers, by binlog position (Bug#24478): the table of each trigger
whose CREATE TRIGGER it applied and did not drop, and the triggers whose CREATE it skipped (they
exist on the master, not on the replica, so they never fire there and a DROP TRIGGER of one is
skipped silently).

A reader that decides in binlog order records at `None` (its own sequence). The master's rule engine
is shared by slaves at different positions: it records at position keys in order (it folds the
stream's schema log), and answers at a key with the state just before that key.
"""

from __future__ import annotations

import bisect
from typing import Any

TableRef = tuple[str, str]
TriggerKey = tuple[str, str]  # (db, trigger name)
_NOTHING: tuple[TableRef | None, bool] = (None, False)  # (table if applied, CREATE skipped)


class TriggerKnowledge:
    def __init__(self, known: dict[TriggerKey, TableRef] | None = None):
        # key -> ([position keys], [(table, absent)]): the state from each position on
        self._history: dict[TriggerKey, tuple[list[Any], list[tuple[TableRef | None, bool]]]] = {}
        self._base: dict[TriggerKey, tuple[TableRef | None, bool]] = {k: (t, False) for k, t in (known or {}).items()}
        self._seq = 0

    def _state(self, key: TriggerKey, at: Any) -> tuple[TableRef | None, bool]:
        found = self._history.get(key)
        if found is None:
            return self._base.get(key, _NOTHING)
        keys, states = found
        i = len(keys) if at is None else bisect.bisect_left(keys, at)
        return states[i - 1] if i else self._base.get(key, _NOTHING)

    def _record(self, key: TriggerKey, at: Any, state: tuple[TableRef | None, bool]) -> None:
        if at is None:
            self._seq += 1
            at = self._seq
        keys, states = self._history.setdefault(key, ([], []))
        if keys and at <= keys[-1]:
            return  # a statement decided again (a slave behind the one that recorded it): same answer
        keys.append(at)
        states.append(state)

    # ------------------------------------------------------------------ questions
    def table(self, key: TriggerKey, at: Any = None) -> TableRef | None:
        """The trigger's table if this replica has the trigger (applied its CREATE, not dropped)."""
        return self._state(key, at)[0]

    def absent(self, key: TriggerKey, at: Any = None) -> bool:
        """The replica skipped the trigger's CREATE: it exists on the master only."""
        return self._state(key, at)[1]

    # ------------------------------------------------------------------ changes
    def created(self, key: TriggerKey, table: TableRef | None, applied: bool, at: Any = None) -> None:
        known, _ = self._state(key, at)
        if applied:
            self._record(key, at, (table if table is not None else known, False))
        else:
            self._record(key, at, (known, True))

    def dropped(self, key: TriggerKey, at: Any = None) -> None:
        _, absent = self._state(key, at)
        self._record(key, at, (None, absent))

    # ------------------------------------------------------------------ snapshots (split's chunks)
    def snapshot(self) -> tuple[frozenset[TriggerKey], dict[TriggerKey, TableRef]]:
        """The latest state: (absent keys, {key: table}), picklable."""
        keys = set(self._base) | set(self._history)
        states = {key: self._state(key, None) for key in keys}
        return (frozenset(k for k, (_, absent) in states.items() if absent),
                {k: table for k, (table, _) in states.items() if table is not None})

    @classmethod
    def restore(cls, absent: frozenset[TriggerKey], known: dict[TriggerKey, TableRef]) -> TriggerKnowledge:
        knowledge = cls(known)
        for key in absent:
            knowledge._base[key] = (knowledge._base.get(key, _NOTHING)[0], True)
        return knowledge
