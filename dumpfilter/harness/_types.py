"""The public result types of `dumpfilter.harness`: plain frozen dataclasses that hold values
only (positions, counts, lint's breaks, explain's decisions, a simulation's rows), so a harness
author can compare, print and keep them without touching the engine's own classes."""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Position:
    """A place in the master's binlog: `file` and byte offset `pos` (the end of the last whole
    transaction received), and the GTID state there ("" when the binlog has no GTIDs)."""

    file: str
    pos: int
    gtid: str = ""

    def __str__(self) -> str:
        return f"{self.file}:{self.pos}" + (f" (gtid {self.gtid})" if self.gtid else "")


@dataclass(frozen=True)
class Received:
    """What one slave was sent, counted on both ends.

    `events`/`bytes` are what the slave received this run (skip-policy events included),
    `heartbeats`/`placeholders` the skip-policy events among them, `relayed_events`/`relayed_bytes`
    what it wrote to its relay log. The `transactions_*` counts and `kept_bytes` (master events sent
    as themselves) come from the master's Stats for this server_id, summed over its runs; 0 when the
    master no longer knows the slave. `rule_hits`: FILTER_NAME -> times that rule decided."""

    events: int = 0
    bytes: int = 0
    heartbeats: int = 0
    placeholders: int = 0
    relayed_events: int = 0
    relayed_bytes: int = 0
    transactions_kept: int = 0
    transactions_partial: int = 0
    transactions_skipped: int = 0
    empty_transactions: int = 0
    kept_bytes: int = 0
    rule_hits: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class LintBreak:
    """Where a replica with these rules would stop: the failing transaction's start (`file`:`pos`,
    what Exec_Master_Log_Pos shows then), its GTID, the server's `errno` and `message`, the
    statement, and the skipped event that caused it (`cause_*`; None when the object was missing
    from the starting schema)."""

    file: str
    pos: int
    gtid: str | None
    errno: int
    message: str
    statement: str = ""
    cause_file: str | None = None
    cause_pos: int | None = None
    cause_rule: str = ""
    cause_reason: str = ""
    text: str = ""

    def __str__(self) -> str:
        return self.text or f"{self.file}:{self.pos}: error {self.errno}: {self.message}"


@dataclass(frozen=True)
class LintResult:
    """`lint`'s prediction over a binlog: every break, in binlog order (the first is where a
    replica stops). `ok` when none is predicted."""

    breaks: tuple[LintBreak, ...] = ()

    @property
    def ok(self) -> bool:
        return not self.breaks

    @property
    def first(self) -> LintBreak | None:
        return self.breaks[0] if self.breaks else None

    def __repr__(self) -> str:
        """Bounded, whatever the binlog: the count and the first stop (every break's fields made
        about 2 million characters for a 281 MB binlog)."""
        first = self.first
        text = str(first)
        shown = "None" if first is None else repr(text if len(text) <= REPR_TEXT else text[: REPR_TEXT - 1] + "…")
        return f"LintResult(ok={self.ok}, breaks={len(self.breaks)}, first={shown})"


REPR_TEXT = 200  # characters of a break's text in LintResult's repr


@dataclass(frozen=True)
class Decision:
    """What a replica with these rules does with one statement or table: `apply` or not, the
    `reason` and the `rule` that decided (None: no rule decided), the tables it looked at, and the
    assumption the engine made where it could not see what the server sees (None: none)."""

    apply: bool
    reason: str
    rule: str | None = None
    tables: tuple[str, ...] = ()
    assumption: str | None = None

    def __str__(self) -> str:
        return f"{'apply' if self.apply else 'skip'}: {self.reason}"


@dataclass(frozen=True)
class EventDecision:
    """One decision taken inside a transaction: the event's binlog offset, what was decided
    ("statement: <sql>" or "table: db.t") and the decision."""

    pos: int
    subject: str
    decision: Decision


@dataclass(frozen=True)
class TransactionExplanation:
    """One transaction of a binlog under these rules: where it starts, its GTID, the outcome
    ("kept", "partial", "skipped" -- the rules keep nothing of it, what the master's
    `Received.transactions_skipped` counts; "emptied" in earlier versions -- or "control" for events never
    filtered), and the decisions that made it, in order."""

    file: str
    pos: int
    gtid: str | None
    outcome: str
    decisions: tuple[EventDecision, ...] = ()


@dataclass(frozen=True)
class SimulatedSlave:
    """One slave's row of a simulation: bytes and events it would get without master-side
    filtering (`*_all`) and with it (`*_sent`), the saving, the transactions (`transactions_skipped`:
    those the rules keep nothing of, as the master counts them; `empty_transactions`: the empty
    GTID transactions its skip policy sent in their stead, as `Received` names them), the
    verification (None: not asked) and lint's predicted breaks."""

    name: str
    server_id: int
    skip_policy: str
    events_all: int
    bytes_all: int
    events_sent: int
    bytes_sent: int
    saved_bytes: int
    transactions_kept: int
    transactions_partial: int
    transactions_skipped: int
    empty_transactions: int
    verified: bool | None
    lint_breaks: int
    bytes_per_skip_policy: dict[str, int] = field(default_factory=dict)

    @property
    def transactions_emptied(self) -> int:
        """Deprecated: `empty_transactions` (one name with `Received` and the master's stats). An
        "emptied" transaction is a skipped one: `transactions_skipped` counts them all."""
        warnings.warn("SimulatedSlave.transactions_emptied is deprecated: use empty_transactions",
                      DeprecationWarning, stacklevel=2)
        return self.empty_transactions


@dataclass(frozen=True)
class Simulation:
    """`simulate`'s result: one row per topology slave, `ok` (every verification passed and every
    real replica ended as predicted), the report files written (`out`), and the whole report
    (report.json's document) for what the rows leave out."""

    slaves: tuple[SimulatedSlave, ...]
    ok: bool
    paths: tuple[Path, ...] = ()
    report: dict[str, Any] = field(default_factory=dict, repr=False)

    def slave(self, name: str) -> SimulatedSlave:
        """The row of the slave called `name` (KeyError when there is none)."""
        for row in self.slaves:
            if row.name == name:
                return row
        raise KeyError(name)
