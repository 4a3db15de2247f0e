"""The master policy's gate for one slave identity (WL#2387's "master controlled" option): which
`db.table` objects it may ever receive, whatever rules it asks for. Pure: the policy file that
makes gates (master/policy.py) is the master's; every consumer that composes a slave's rules with
its gate (the master, `simulate`'s reference, `experiment`) does it through rules/decider.py."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from dumpfilter.errors import RuleError
from dumpfilter.rules.wildcards import compile_like

# What a text reaches is read only under a restricted gate: `filter` and every slave without a
# master policy never load its reader (tests/cli/test_filter_imports.py counts their modules).
if TYPE_CHECKING:
    from dumpfilter.rules.policy_bound import Reach


class _Derived:
    """What Gate.__post_init__ derives from its fields: typed here, outside the dataclass's fields
    (its init, repr, eq and hash stay those of `allow` and `restricted`)."""

    _compiled: tuple[re.Pattern[str], ...]
    bounds: bool
    _schemas: tuple[re.Pattern[str], ...]
    _hash: int
    _refused: dict[object, bool]


@dataclass(frozen=True)
class Gate(_Derived):
    """What one slave may receive: `db.table` LIKE patterns (`shop.%` is a whole schema).
    `restricted=False` lets everything through. Hashable: it is part of a slave's rule-group key."""

    allow: tuple[str, ...] = ()
    restricted: bool = False

    def __post_init__(self) -> None:
        for pattern in self.allow:
            if "." not in pattern:
                raise RuleError(f"policy allow: {pattern!r} is not a db.table pattern (use 'db.%' for a schema)")
        # Whether the gate can refuse anything: not when a pattern allows every table (`%.%`, every
        # schema with it), for then whatever a text reaches is allowed, read or not. Such an
        # identity is still under the policy (`restricted`: its allow list is shown), but nothing
        # is checked for it: its streams cost what an open master's do (issue #80).
        universal = any(_EVERY_TABLE.fullmatch(p) for p in self.allow)
        object.__setattr__(self, "bounds", self.restricted and not universal)
        object.__setattr__(self, "_compiled", tuple(compile_like(p) for p in self.allow))
        schema_wide = tuple(compile_like(p.split(".", 1)[0]) for p in self.allow if p.endswith(".%"))
        object.__setattr__(self, "_schemas", schema_wide)
        object.__setattr__(self, "_hash", hash((self.allow, self.restricted)))
        # A fast unit's annotations (text shapes and the Table_maps after each) -> refused: the
        # units of a workload carry few distinct ones (`annotations_refused`).
        object.__setattr__(self, "_refused", {})

    def __hash__(self) -> int:
        # Hashed once: a Gate is part of every rule-group key, asked per name and statement.
        return self._hash

    def table_allowed(self, db: str, table: str) -> bool:
        if not self.bounds:
            return True
        key = f"{db}.{table}"
        return any(rx.fullmatch(key) for rx in self._compiled)

    def schema_allowed(self, db: str | None) -> bool:
        """A whole schema (statements with no table: CREATE DATABASE, ...) needs a `db.%` pattern."""
        if not self.bounds:
            return True
        return db is not None and bool(db) and any(rx.fullmatch(db) for rx in self._schemas)

    def statement_verdict(self, sql: str, current_db: str | None) -> str:
        """Deny by default: ALLOWED only when every object the statement's text reaches
        (rules/policy_bound.py: tables read or written, subqueries, ODKU, CTEs, bodies; the grant
        tables of `mysql` for account statements, whatever the default database) is allowed;
        UNANALYSED when the text cannot be analysed (it is not sent either)."""
        if not self.bounds:
            return ALLOWED
        from dumpfilter.rules.policy_bound import statement_reach

        reach = statement_reach(sql, current_db)
        if reach is None:
            return UNANALYSED
        return ALLOWED if self.reach_allowed(reach, current_db) else REFUSED

    def annotation_allowed(self, sql: str, tables: Sequence[tuple[str, str]]) -> bool:
        """Whether an Annotate_rows / Rows_query text may go with its rows: every table it names
        allowed (its statement wrote rows to `tables`, the Table_maps that follow it)."""
        if not self.bounds:
            return True
        from dumpfilter.rules.policy_bound import annotation_reach

        reach = annotation_reach(sql, tables)
        return reach is not None and self.reach_allowed(reach, None)

    def annotations_refused(self, found: Sequence[tuple[str, Sequence[tuple[str, str]]]]) -> bool:
        """Whether a unit's annotations (each text's shape, `policy_bound.shape`, with the
        Table_maps after it; hashable) hold one this gate refuses; each distinct set answered once
        (remembered up to REFUSED_KEPT, then asked afresh)."""
        refused: dict[object, bool] = self._refused
        answer = refused.get(found)
        if answer is None:
            if len(refused) >= REFUSED_KEPT:
                refused.clear()
            answer = refused[found] = not all(self.annotation_allowed(sql, maps) for sql, maps in found)
        return answer

    def reach_allowed(self, reach: Reach, current_db: str | None) -> bool:
        return all(self.table_allowed(db, table) for db, table in reach.tables) \
            and all(self.schema_allowed(db) for db in reach.schemas) \
            and (not reach.default_schema or self.schema_allowed(current_db))


ALLOWED, REFUSED, UNANALYSED = "allowed", "refused", "unanalysed"  # Gate.statement_verdict
_EVERY_TABLE = re.compile(r"%+\.%+")  # an allow pattern every `db.table` matches
REFUSED_KEPT = 1 << 16  # the annotation sets a gate remembers (Gate.annotations_refused)
UNRESTRICTED = Gate()

# Rule-hit names the gate adds to a decision it refuses (besides MASTER_POLICY, every refusal):
# statements refused because their text could not be analysed, Annotate_rows / Rows_query texts
# dropped.
MASTER_POLICY = "MASTER_POLICY"
MASTER_POLICY_UNANALYSED = "MASTER_POLICY_UNANALYSED"
MASTER_POLICY_ANNOTATION = "MASTER_POLICY_ANNOTATION"
