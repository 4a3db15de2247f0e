"""The one seam for "is this kept": the `Decider` type every consumer asks (the master's streams,
`filter`, the slave's check, lint's replay, `split`, `experiment`, `simulate`'s reference), and
the one composition of a slave's rules with the master policy's gate (`Gated`, `gate_statement`).

A decider answers a Table_map's table and a Query's statement, always with a `Decision`; the hot
path's `table_kept` is the same answer as a bool (an implementation may answer it faster, never
differently). The optional hooks have defaults here and are never probed for: `annotation_kept`
(a policy bound on Annotate_rows / Rows_query texts, asked only when `checks_annotations`),
`invalidate` (a Format_description event: table ids and per-table caches start again) and
`unparsed` (statements the engine could not parse, for `filter`'s summary)."""

from __future__ import annotations

import dataclasses
from abc import ABC, abstractmethod
from collections.abc import Hashable, Sequence

from dumpfilter.rules.decisions import Decision
from dumpfilter.rules.statement_info import Parses, TablesOf
from dumpfilter.rules.gate import (
    ALLOWED,
    MASTER_POLICY,
    MASTER_POLICY_UNANALYSED,
    UNANALYSED,
    Gate,
)

MASTER_POLICY_RULE = "master-policy"  # Decision.rule of a decision the gate refused


class Decider(ABC):
    """What TransactionFilter asks of one slave's (or one output's) rules."""

    # Whether `annotation_kept` can refuse anything: TransactionFilter holds an annotation until its
    # Table_maps are read only for a decider that says so.
    checks_annotations: bool = False

    @abstractmethod
    def decide_table(self, db: str, table: str) -> Decision:
        """A Table_map for `db`.`table` (the rows that follow it go with it)."""

    @abstractmethod
    def decide_statement(self, sql: str, current_db: str | None) -> Decision:
        """A Query event's statement, with its default database (None: the source had none)."""

    def table_kept(self, db: str, table: str) -> bool:
        """`decide_table(db, table).apply`, on the per-row-event path."""
        return self.decide_table(db, table).apply

    def statement_kept(self, sql: str, current_db: str | None) -> bool:
        """`decide_statement(sql, current_db).apply`, on the per-statement path (an
        implementation may answer it faster, never differently: issue #43)."""
        return self.decide_statement(sql, current_db).apply

    # Whether a single-table DML statement's decision is a function of its key alone (kind,
    # default database, its one updated table: `rules.keep_table`), with nothing else done
    # by a decision but counting: each key is then decided once (`decide_statement_key`) and
    # every statement it answers accounted (`account`).
    keys_statements: bool = False

    def key_reads(self, sql: str, current_db: str | None, tables_of: TablesOf) -> Hashable | None:
        """What the decision of a keyed statement reads (`RuleEngine.key_reads`): keys that read
        the same have one decision (`rules.keep_table` decides the first). None: decided alone."""
        return None

    def decide_statement_key(self, sql: str, current_db: str | None, parses: Parses | None = None) -> Decision:
        """The decision of the key of `sql` (one of its statements), without the accounting
        `decide_statement` does (see `account`). Asked only when `keys_statements`. `parses`: a
        parse memo shared by the rule sets deciding the same keys (a rule engine's)."""
        return self.decide_statement(sql, current_db)

    def account(self, decision: Decision, times: int) -> None:  # noqa: B027 - an optional hook
        """`times` statements answered by `decision` from their key: what `decide_statement`
        would have done besides answering (rule-hit counters)."""

    def annotation_kept(self, sql: str, tables: Sequence[tuple[str, str]]) -> bool:
        """Whether an Annotate_rows / Rows_query text goes with its kept rows (`tables`: the
        Table_maps after it). Rules never drop one; a policy gate may."""
        return True

    def invalidate(self) -> None:  # noqa: B027 - an optional hook, a no-op unless overridden
        """A Format_description event: forget per-table answers (table ids restart)."""

    # Statements decided without a parse (for `filter`'s summary): the rule engine counts them.
    unparsed: int = 0


def gate_statement(decision: Decision, gate: Gate, sql: str, current_db: str | None) -> Decision:
    """A statement decision of the rules ANDed with the gate: deny by default (a text the bound
    cannot analyse is not sent either). The refusal's `counted` adds MASTER_POLICY (and
    MASTER_POLICY_UNANALYSED) to the rules' own hits."""
    if not decision.apply or not gate.bounds:
        return decision
    verdict = gate.statement_verdict(sql, current_db)
    if verdict is ALLOWED:
        return decision
    if verdict is UNANALYSED:
        return _refused(decision, "the statement could not be analysed, so it is not sent", MASTER_POLICY_UNANALYSED)
    return _refused(decision, "the statement touches data outside what this slave may receive")


def gate_table(decision: Decision, gate: Gate, db: str, table: str) -> Decision:
    """A table decision of the rules ANDed with the gate (the master's table name, as the policy
    names what may leave the master)."""
    if not decision.apply or gate.table_allowed(db, table):
        return decision
    return _refused(decision, f"{db}.{table} is not allowed to this slave")


def _refused(decision: Decision, reason: str, *hits: str) -> Decision:
    """`decision` refused by the gate: its `counted` gains MASTER_POLICY and `hits`."""
    return dataclasses.replace(decision, apply=False, rule=MASTER_POLICY_RULE, reason=f"master policy: {reason}",
                               counted=(*decision.counted, MASTER_POLICY, *hits))


class Gated(Decider):
    """A slave's rules ANDed with its master-policy gate (dump.proto's EffectiveFilters): an event
    goes to the slave only if the rules keep it AND everything it touches is allowed."""

    def __init__(self, rules: Decider, gate: Gate):
        self.rules, self.gate = rules, gate
        self.checks_annotations = gate.bounds or rules.checks_annotations

    def decide_table(self, db: str, table: str) -> Decision:
        return gate_table(self.rules.decide_table(db, table), self.gate, db, table)

    def table_kept(self, db: str, table: str) -> bool:
        return self.rules.table_kept(db, table) and self.gate.table_allowed(db, table)

    def decide_statement(self, sql: str, current_db: str | None) -> Decision:
        return gate_statement(self.rules.decide_statement(sql, current_db), self.gate, sql, current_db)

    def annotation_kept(self, sql: str, tables: Sequence[tuple[str, str]]) -> bool:
        return self.gate.annotation_allowed(sql, tables) and self.rules.annotation_kept(sql, tables)

    def invalidate(self) -> None:
        self.rules.invalidate()

    # Read-only over Decider's plain attribute: a Gated reports its rules' count, nothing sets it.
    @property
    def unparsed(self) -> int:  # type: ignore[override]
        return self.rules.unparsed


def gated(rules: Decider, gate: Gate | None) -> Decider:
    """`rules` under `gate`: the rules themselves when there is no restriction."""
    return rules if gate is None or not gate.bounds else Gated(rules, gate)
