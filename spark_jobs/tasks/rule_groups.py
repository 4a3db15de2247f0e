"""What the slaves of one rule group share over a chunk `experiment` counts (`RuleGroup`): the
keep table, the TransactionFilter and its answer for each unit the compiled walk leaves, decided
once for all of them (spark_jobs.tasks.bandwidth's counters read it)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from dumpfilter.codec import EventType, Transaction
from dumpfilter.codec.scanner import ROW_KEEP, ROW_SKIP, ROW_SLOW
from dumpfilter.codec.transactions import CONTROL
from dumpfilter.rules.keep_table import KeepTable
from dumpfilter.rules.transaction_filter import EMPTIED, KEPT, SKIPPED, FilterResult, TransactionFilter

if TYPE_CHECKING:
    from dumpfilter.rules.ruleset import Settings


class RuleGroup:
    """What the slaves of one rule group (the same rules, settings and gate; their skip policies
    differ) share over a chunk: the keep table, the TransactionFilter, and its answer for each
    unit of the buffer the compiled walk leaves (`result`), decided once for all of them, in
    stream order (`decide`), as the master's StatementAnswers decides a unit once per rule group.
    A unit so answered kept whole or skipped whole is handed back to the compiled walk (`mark`),
    so that a binlog's DDL and lone statements cost one decision per rule group, not one trip
    through Python per slave (issue #80: `experiment` with 24 slaves cost slaves x DDL)."""

    __slots__ = ("filter", "keeps", "results", "decided", "ordered", "marked")

    def __init__(self, txn_filter: TransactionFilter, settings: Settings) -> None:
        self.filter = txn_filter
        self.keeps = KeepTable(txn_filter.decider)
        # Decided ahead only where a decision depends on nothing the walk's order could change
        # between the slaves of the group: MySQL's semantics, no derived tables tracked (WL#2516
        # effective semantics and derived tables follow the stream: each slave decides in its walk).
        self.ordered = settings.semantics == "mysql" and not settings.track_derived_tables
        self.results: dict[int, FilterResult] = {}
        self.decided = -1  # the last unit of the buffer `decide` went through
        self.marked: dict[tuple[bytes, bytes | None, bool], bytes] = {}  # rows `mark` made, by what made them

    def buffer(self) -> None:
        """A new buffer: its units are numbered from 0 again."""
        self.results.clear()
        self.marked.clear()
        self.decided = -1

    def reset(self, k: int) -> None:
        """A Format_description at unit `k`: the filter's table ids and caches start again, unless
        `decide` already went past it (and reset them there, in order)."""
        if k > self.decided:
            self.filter.reset()
            self.keeps.forget_tables()

    def result(self, k: int, txn: Transaction) -> FilterResult:
        found = self.results.get(k)
        if found is None:
            found = self.results[k] = self.filter.filter(txn)
        return found

    def mark(self, row: bytes, at: int, txn: Callable[[int], Transaction], key: tuple[bytes, bytes | None, bool]) -> bytes:
        """`row` (a slave's answers from unit `at` on) with each unit the walk leaves to Python
        (ROW_SLOW) decided for the group, in order, and turned ROW_KEEP where its answer keeps
        it whole or ROW_SKIP where it keeps nothing: the compiled walk then sends it (or what the
        slave's skip policy makes of it) as the master's does (StatementAnswers.row). Units kept in
        part and control events stay ROW_SLOW."""
        if not self.ordered or ROW_SLOW not in row:
            return row
        done = self.marked.get(key)
        if done is not None:
            return done
        out = bytearray(row)
        k = row.find(ROW_SLOW, at)
        while k >= 0:
            unit = txn(k)
            if unit.kind == CONTROL:
                # A Format_description: table ids start again, in order (under MySQL's semantics a
                # table's answer is its name's, so the keep bytes after it are the same).
                if k > self.decided and unit.events[0].type_code == EventType.FORMAT_DESCRIPTION:
                    self.filter.reset()
                    self.keeps.forget_tables()
            elif unit.complete:
                result = self.result(k, unit)
                if result.outcome == KEPT and len(result.events) == len(unit.events):
                    out[k] = ROW_KEEP
                elif result.outcome in (EMPTIED, SKIPPED):
                    out[k] = ROW_SKIP
            self.decided = max(self.decided, k)
            k = row.find(ROW_SLOW, k + 1)
        done = self.marked[key] = bytes(out)
        return done
