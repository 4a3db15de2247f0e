"""The master-wide per-table flag words (WL#2387's FILTER_BINLOG_SEND_F: one bit per slave, computed
once per table for all slaves) and each slave's decider, which answers TransactionFilter from them."""

from __future__ import annotations

import dataclasses
import threading
from collections import Counter
from collections.abc import Callable

from dumpfilter.rules.evaluate import Decision, RuleEngine
from dumpfilter.master.policy import Gate

ASSUMED_DECISIONS = "ASSUMED_DECISIONS"  # a pseudo rule hit: decisions with Decision.assumption set


class FlagWords:
    """One word per (db, table): bit i set when slave i keeps the table (its rules AND its policy).
    Computed once per table for all slaves (slaves with equal rules evaluate once), read with one
    dict lookup; thrown away whenever a slave's rules change or slaves come and go."""

    def __init__(self, members: Callable[[], list[tuple[int, RuleEngine, Gate]]]):
        self._members = members
        self._words: dict[tuple[str, str], int] = {}
        self._lock = threading.Lock()
        self.computed = 0
        self.generation = 0   # bumped at every invalidation: per-segment masks are recomputed

    def get(self, db: str, table: str) -> int:
        word = self._words.get((db, table))
        return self._compute(db, table) if word is None else word

    def _compute(self, db: str, table: str) -> int:
        with self._lock:
            word = 0
            answers: dict[tuple[int, Gate], bool] = {}
            for bit, engine, gate in self._members():
                key = (id(engine), gate)
                kept = answers.get(key)
                if kept is None:
                    kept = answers[key] = engine.table_kept(db, table) and gate.table_allowed(db, table)
                if kept:
                    word |= 1 << bit
            self._words[(db, table)] = word
            self.computed += 1
            return word

    def invalidate(self) -> None:
        with self._lock:
            self._words = {}
            self.generation += 1


class SlaveDecider:
    """What TransactionFilter asks, for one slave: tables by its bit in the shared flag words,
    statements by its rule engine, both ANDed with the master policy; rule hits collected."""

    def __init__(self, words: FlagWords, bit: int, engine: RuleEngine, gate: Gate):
        self.words, self.bit, self.engine, self.gate = words, 1 << bit, engine, gate
        self.hits: Counter = Counter()
        self.at = None       # the position key of the unit being decided (set by the stream)
        self.parses = None   # that unit's parse memo, shared by every rule group (set by the stream)

    def table_kept(self, db: str, table: str) -> bool:
        kept = bool(self.words.get(db, table) & self.bit)
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
