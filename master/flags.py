"""The master-wide per-table flag words (WL#2387's FILTER_BINLOG_SEND_F: one bit per slave, computed
once per table for all slaves) and each slave's decider, which answers TransactionFilter from them."""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Callable

from dumpfilter import _core
from dumpfilter.rules.evaluate import Decision, RuleEngine
from dumpfilter.master.policy import Gate

ASSUMED_DECISIONS = "ASSUMED_DECISIONS"  # a pseudo rule hit: decisions with Decision.assumption set


class FlagWords:
    """One word per (db, table): bit i set when slave i keeps the table (its rules AND its policy).
    The words live in the compiled core (`_core.FlagWords`), which answers a stream's per-segment
    keep bytes and per-table bit tests; a miss calls `_compute` (the rule engines, in Python) once
    per table, slaves with equal rules evaluating once. Thrown away whenever a slave's rules change
    or slaves come and go (a word computed across that is not kept)."""

    def __init__(self, members: Callable[[], list[tuple[int, RuleEngine, Gate]]]):
        self._members = members
        self._core = _core.FlagWords(self._compute)

    def get(self, db: str, table: str) -> int:
        """The whole word (the reference path's per-unit masks)."""
        return int.from_bytes(self._core.word(db, table), "little")

    def kept(self, db: str, table: str, bit: int) -> bool:
        return self._core.kept(db, table, bit)

    def keep(self, names: list[tuple[str, str]], bit: int) -> bytes:
        """A byte per (db, table) of `names`, 1 where slave `bit` keeps it."""
        return self._core.keep(names, bit)

    @property
    def generation(self) -> int:
        return self._core.generation  # bumped at every invalidation: per-segment answers are remade

    @property
    def computed(self) -> int:
        return self._core.computed

    def _compute(self, db: str, table: str) -> bytes:
        word = 0
        answers: dict[tuple[int, Gate], bool] = {}
        for bit, engine, gate in self._members():
            key = (id(engine), gate)
            kept = answers.get(key)
            if kept is None:
                kept = answers[key] = engine.table_kept(db, table) and gate.table_allowed(db, table)
            if kept:
                word |= 1 << bit
        return word.to_bytes((word.bit_length() + 7) // 8, "little")

    def invalidate(self) -> None:
        self._core.invalidate()


class SlaveDecider:
    """What TransactionFilter asks, for one slave: tables by its bit in the shared flag words,
    statements by its rule engine, both ANDed with the master policy; rule hits collected."""

    def __init__(self, words: FlagWords, bit: int, engine: RuleEngine, gate: Gate):
        self.words, self.bit, self.engine, self.gate = words, bit, engine, gate
        self.hits: Counter = Counter()
        self.at = None       # the position key of the unit being decided (set by the stream)
        self.parses = None   # that unit's parse memo, shared by every rule group (set by the stream)

    def table_kept(self, db: str, table: str) -> bool:
        kept = self.words.kept(db, table, self.bit)
        counted = self.engine.decide_table(db, table).counted
        if counted:
            self.hits.update(counted)
        if not kept and self.gate.restricted and not self.gate.table_allowed(db, table):
            self.hits["MASTER_POLICY"] += 1
        return kept

    def decide_statement(self, sql: str, current_db: str | None) -> Decision:
        decision = self.engine.decide_statement(sql, current_db, at=self.at, parses=self.parses)
        hits = self.hits
        for name in decision.counted:  # (a loop: Counter.update's Mapping check costs more here)
            hits[name] += 1
        if decision.assumption is not None:
            self.hits[ASSUMED_DECISIONS] += 1
        if decision.apply and self.gate.restricted and not self.gate.statement_allowed(sql, current_db):
            self.hits["MASTER_POLICY"] += 1
            return dataclasses.replace(decision, apply=False, rule="master-policy",
                                       reason="master policy: the statement touches data outside what this slave may receive")
        return decision
