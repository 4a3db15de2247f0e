"""What the slaves of one rule group share over a chunk `experiment` counts (`RuleGroup`): the
keep table, the TransactionFilter and its answer for each unit the compiled walk leaves, decided
once for all of them (spark_jobs.tasks.bandwidth's counters read it)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from dumpfilter import _core
from dumpfilter.codec import EventType, Transaction
from dumpfilter.codec.scanner import ROW_KEEP, ROW_SKIP, ROW_SLOW
from dumpfilter.codec.transactions import CONTROL
from dumpfilter.rules.evaluate import RuleEngine
from dumpfilter.rules.keep_table import KeepTable
from dumpfilter.rules.statements import plain_statement
from dumpfilter.rules.transaction_filter import EMPTIED, KEPT, SKIPPED, FilterResult, TransactionFilter

# A buffer's GTID-and-one-plain-statement units by default database: (database, unit indices).
Lone = list[tuple[str, Sequence[int]]]

if TYPE_CHECKING:
    from dumpfilter.rules.ruleset import Settings


class RuleGroup:
    """What the slaves of one rule group (the same rules, settings and gate; their skip policies
    differ) share over a chunk: the keep table, the TransactionFilter, and its answer for each
    unit of the buffer the compiled walk leaves (`result`), decided once for all of them, in
    stream order (`decide`), as the master's StatementAnswers decides a unit once per rule group.
    A unit so answered kept whole or skipped whole is handed back to the compiled walk (`mark`),
    so that a binlog's DDL and lone statements cost one decision per rule group, not one trip
    through Python per slave (issue #80: `experiment` with 24 slaves cost slaves x DDL).

    Rules that decide statements by databases alone (`RuleEngine.databases_only`, no master
    policy restriction) decide a GTID and one plain statement by its default database alone
    (rpl_filter.cc checks db_ok only), as the master's statement flag words key it: such units,
    read for the whole buffer by the core (`UnitList.lone_queries`, once for every group), are
    answered once per default database per rule set, not once per unit (issue #80: a DDL-heavy
    binlog's 13,637 DDL units cost 8 rule sets 109,096 trips through TransactionFilter). Nothing
    such a decision leaves behind (the schema model's replay, trigger knowledge, rule hits) can
    change a later answer of rules that read databases only, and `experiment` reports none of it."""

    __slots__ = ("filter", "keeps", "results", "decided", "ordered", "marked", "by_database", "plain", "lone")

    def __init__(self, txn_filter: TransactionFilter, settings: Settings) -> None:
        self.filter = txn_filter
        self.keeps = KeepTable(txn_filter.decider)
        # Decided ahead only where a decision depends on nothing the walk's order could change
        # between the slaves of the group: MySQL's semantics, no derived tables tracked (WL#2516
        # effective semantics and derived tables follow the stream: each slave decides in its walk).
        self.ordered = settings.semantics == "mysql" and not settings.track_derived_tables
        decider = txn_filter.decider
        self.by_database = (self.ordered and isinstance(decider, RuleEngine) and decider.databases_only)
        self.plain: dict[str, int] = {}  # by_database: a plain lone statement's row byte by its default database
        self.lone: Lone = []  # the buffer's plain lone units by default database
        self.results: dict[int, FilterResult] = {}
        self.decided = -1  # the last unit of the buffer `decide` went through
        self.marked: dict[tuple[bytes, bytes | None, bool], bytes] = {}  # rows `mark` made, by what made them

    def buffer(self, lone: Callable[[], Lone]) -> None:
        """A new buffer: its units are numbered from 0 again; `lone` its plain lone units by
        default database (read once for every group that asks: `by_database`)."""
        self.results.clear()
        self.marked.clear()
        self.decided = -1
        self.lone = lone() if self.by_database else []

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
        for db, ks in self.lone:
            code = self.plain.get(db)
            for k in ks:
                if k >= at and out[k] == ROW_SLOW:
                    if code is None:  # the database's first: decided, and its answer kept for the others
                        unit = txn(k)
                        code = self.plain[db] = self._code(self.result(k, unit), unit)
                        self.decided = max(self.decided, k)
                    out[k] = code
        k = out.find(ROW_SLOW, at)
        while k >= 0:
            unit = txn(k)
            if unit.kind == CONTROL:
                # A Format_description: table ids start again, in order (under MySQL's semantics a
                # table's answer is its name's, so the keep bytes after it are the same).
                if k > self.decided and unit.events[0].type_code == EventType.FORMAT_DESCRIPTION:
                    self.filter.reset()
                    self.keeps.forget_tables()
            elif unit.complete:
                out[k] = self._code(self.result(k, unit), unit)
            self.decided = max(self.decided, k)
            k = out.find(ROW_SLOW, k + 1)
        done = self.marked[key] = bytes(out)
        return done

    @staticmethod
    def _code(result: FilterResult, unit: Transaction) -> int:
        """A unit's row byte from its answer: ROW_KEEP kept whole, ROW_SKIP kept nothing, else
        ROW_SLOW (kept in part: the slave's walk takes it)."""
        if result.outcome == KEPT and len(result.events) == len(unit.events):
            return ROW_KEEP
        return ROW_SKIP if result.outcome in (EMPTIED, SKIPPED) else ROW_SLOW


def lone_units(units: _core.UnitList, formats: list[tuple[int, int, int]]) -> Lone:
    """The buffer's GTID-and-one-plain-statement units by default database, read by the core in
    one call (`UnitList.lone_queries`; `formats` as `statement_units` takes them), with those whose
    text Python must tell (`plain_statement`)."""
    found = units.lone_queries(formats)
    out: Lone = [(group.db, memoryview(group.units).cast("I")) for group in found.plain]
    out += [(q.db, (q.unit,)) for q in found.others if q.plain is None and plain_statement(q.sql)]
    return out
