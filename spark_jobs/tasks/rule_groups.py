"""What the slaves of one rule group share over a chunk `experiment` counts (`RuleGroup`): the
keep table, the TransactionFilter and its answer for each unit the compiled walk leaves, decided
once for all of them (spark_jobs.tasks.bandwidth's counters read it)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from dumpfilter._core import mark_classes, mark_slow
from dumpfilter.codec import Transaction
from dumpfilter.codec.scanner import ROW_KEEP, ROW_SKIP, ROW_SLOW
from dumpfilter.rules.decider import Gated
from dumpfilter.rules.evaluate import RuleEngine
from dumpfilter.rules.keep_table import KeepTable
from dumpfilter.rules.transaction_filter import EMPTIED, KEEP, KEPT, SKIPPED, FilterResult, TransactionFilter
from dumpfilter.spark_jobs.tasks.lone_units import STAYS, LoneUnits

_UNDECIDED = 0xFF  # a class's code not decided yet (`RuleGroup.codes`, `_core.mark_classes`)

if TYPE_CHECKING:
    from dumpfilter.rules.ruleset import Settings


class RuleGroup:
    """What the slaves of one rule group (the same rules, settings and gate; their skip policies
    differ) share over a chunk: the keep table, the TransactionFilter, and its answer for each
    unit of the buffer the compiled walk leaves (`result`), decided once for all of them, in
    stream order (`mark`), as the master's StatementAnswers decides a unit once per rule group.
    A unit so answered kept whole or skipped whole is handed back to the compiled walk (`mark`),
    so that a binlog's DDL and lone statements cost one decision per rule group, not one trip
    through Python per slave (issue #80).

    Rules that decide statements by databases alone (`RuleEngine.databases_only`, no master
    policy restriction) decide a GTID and one plain statement by its default database alone
    (rpl_filter.cc checks db_ok only), as the master's statement flag words key it: such units,
    read for the whole buffer by the core (`UnitList.lone_queries`, once for every group), are
    answered once per default database per rule set. Nothing such a decision leaves behind (the
    schema model's replay, trigger knowledge, rule hits) can change a later answer of rules that
    read databases only, and `experiment` reports none of it.

    Rules under standard semantics (no rewrite-db, names as they come) decide any other lone
    statement by what rpl_filter.cc reads of it (its decision class, `LoneUnits.decides`): its
    default database, a database statement's name, whether table rules pass it by, the tables it
    updates, and its kind only where the decision reads it (`RuleEngine.KINDS_READ`); then those
    tables' verdicts (`RuleEngine.table_reads`, once per rule group and set of tables). The core
    sets the units of an answered class (`_core.mark_classes`). No such decision reads the schema
    model: the thread's engines share one, which `answer_all` replays once a unit for all groups
    (`schema`). Trigger DDL, multi-table UPDATEs and what does not parse are decided one by one,
    in stream order."""

    __slots__ = ("filter", "keeps", "results", "by_database", "plain", "lone", "engine", "codes", "by_reads", "steps",
                 "schema")

    def __init__(self, keeps: KeepTable, settings: Settings) -> None:
        self.keeps = keeps  # (held across chunks with the group: bandwidth._rule_group)
        decider = keeps.decider
        self.filter = TransactionFilter(decider, empty_transactions=KEEP)
        # (Every unit is decided ahead of the walk, `mark`: a topology's slave tracks no derived
        # tables, WL#40, so a table's answer is its name's, under WL#2516's effective semantics too.)
        engine = decider if settings.semantics == "mysql" and isinstance(decider, RuleEngine) else None
        self.by_database = engine is not None and engine.databases_only
        self.plain: dict[str, int] = {}  # by_database: a plain lone statement's row byte by its default database
        # Answered by parse: what the statement names is what rpl_filter.cc reads (no rewrite of
        # the default database it is parsed under, no WL#2516 pattern).
        rules = engine.rules if engine is not None else None
        self.engine = engine if (engine is not None and rules is not None
                                 and not (rules.rewrite_db or rules.effective_do or rules.effective_ignore)
                                 and not engine.names.lower_incoming) else None
        self.codes = bytearray()  # a lone statement's row byte by its key (LoneUnits.klass), _UNDECIDED before
        self.by_reads: dict[tuple[int, int], int] = {}  # and by what its decision reads (`_by_reads`)
        self.steps: dict[int, int] = {}  # `table_reads` numbered, by LoneUnits' number of its tables
        self.lone: LoneUnits | None = None
        # The schema model its engine shares with the thread's other engines, which `answer_all`
        # replays once a unit (the engine replays none); None where the engine replays its own.
        inner = decider.rules if isinstance(decider, Gated) else decider
        self.schema = inner.schema if isinstance(inner, RuleEngine) and not inner.replay_ddl else None
        self.results: dict[int, FilterResult] = {}

    def buffer(self, lone: LoneUnits) -> None:
        """A new buffer: its units are numbered from 0 again; `lone` its lone units, read once for
        every group that asks."""
        self.results.clear()
        self.lone = lone

    def result(self, k: int, txn: Transaction) -> FilterResult:
        if (found := self.results.get(k)) is None:
            found = self.results[k] = self.filter.filter(txn)
        return found

    def mark(self, row: bytes, at: int, txn: Callable[[int], Transaction]) -> tuple[bytes | bytearray, list[int]]:
        """`row` (a slave's answers from unit `at` on) with the units the walk leaves to Python
        (ROW_SLOW) that the group answers by database or by parse (no decision of theirs reads the
        schema model) turned ROW_KEEP where the answer keeps the unit whole or ROW_SKIP where it
        keeps nothing: the compiled walk then sends it (or what the slave's skip policy makes of
        it) as the master's does (StatementAnswers.row); and the units left for `decide`, in
        order. Units kept in part and control events stay ROW_SLOW."""
        if ROW_SLOW not in row:
            return row, []
        out = bytearray(row)
        for db, ks in (self.lone.plain() if self.by_database and self.lone is not None else ()):
            code = self.plain.get(db)
            if code is None:  # the database's first: decided, and its answer kept for the others
                if len(self.plain) >= LoneUnits.KEYS_MAX:  # (held across chunks: bounded)
                    self.plain.clear()
                unit = txn(k := int.from_bytes(ks[:4], "little"))
                code = self.plain[db] = self._code(self.result(k, unit), unit)
            mark_slow(out, ks, code)
        left: list[int] = []
        lone = self.lone
        assert lone is not None  # (set by `buffer`)
        codes = self.codes if self.engine is not None else bytearray()
        if self.engine is not None and not self.by_database:  # (database rules read no parse: `plain`)
            lone.classify()
        # The units of a class the group has answered are set by the core; Python reads the others
        # (a unit met first, a class met first, one the group decides on its own).
        codes += bytes([_UNDECIDED]) * (len(lone.parts) - len(codes))  # (the classes numbered so far)
        for k in mark_classes(out, at, lone.class_of, codes):
            # (A Format_description resets nothing here: no answer of a topology's rules follows
            # the server's lifetime, and a unit's table ids are its own Table_maps'.)
            c = lone.klass(k)
            if c >= 0 and self.engine is not None:
                d = lone.decides[c]
                if codes[d] == _UNDECIDED:  # the class's first: answered as the first that read the same
                    codes[d] = self._by_reads(d, k, txn)
                out[k] = codes[d]
            elif c != STAYS:
                left.append(k)
        return out, left

    def _by_reads(self, d: int, k: int, txn: Callable[[int], Transaction]) -> int:
        """Decision class d's row byte, met first at unit k: that of the first class whose decision
        read the same (the class's reads but its tables', `LoneUnits.parts`, and its tables'
        verdicts of the same rules, `RuleEngine.table_reads`, as a tenant's scratch tables' DDL),
        else its own decision's."""
        assert self.engine is not None and self.lone is not None  # (answered by parse)
        base, tables, updated = self.lone.parts[d]
        steps = self.steps.get(tables)
        if steps is None:  # (the tables' verdicts: read once; none under database rules alone, never tables_ok's)
            reads = () if self.engine.databases_only else self.engine.table_reads(updated)
            steps = self.steps[tables] = self.lone.number(reads)
        code = self.by_reads.get((base, steps))
        if code is None:
            code = self.by_reads[(base, steps)] = self._code(self.result(k, unit := txn(k)), unit)
        return code

    def decide(self, out: bytearray, k: int, unit: Transaction) -> None:
        """Unit k, left by `mark`, decided for the group (`answer_all` calls it in stream order)."""
        out[k] = self._code(self.result(k, unit), unit)

    @staticmethod
    def _code(result: FilterResult, unit: Transaction) -> int:
        """A unit's row byte from its answer: ROW_KEEP kept whole, ROW_SKIP kept nothing, else
        ROW_SLOW (kept in part: the slave's walk takes it)."""
        if result.outcome == KEPT and len(result.events) == len(unit.events):
            return ROW_KEEP
        return ROW_SKIP if result.outcome in (EMPTIED, SKIPPED) else ROW_SLOW


