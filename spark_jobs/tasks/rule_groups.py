"""What the slaves of one rule group share over a chunk `experiment` counts (`RuleGroup`): the
keep table, the TransactionFilter and its answer for each unit the compiled walk leaves, decided
once for all of them (spark_jobs.tasks.bandwidth's counters read it)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from dumpfilter import _core
from dumpfilter._core import mark_slow
from dumpfilter.codec import Transaction
from dumpfilter.codec.scanner import ROW_KEEP, ROW_SKIP, ROW_SLOW
from dumpfilter.codec.transactions import CONTROL
from dumpfilter.rules.evaluate import RuleEngine
from dumpfilter.rules.keep_table import KeepTable
from dumpfilter.rules.statement_info import Kind, StatementInfo
from dumpfilter.rules.statements import plain_statement, statement_tables
from dumpfilter.rules.transaction_filter import (EMPTIED, KEEP, KEPT, SKIPPED, FilterResult, TransactionFilter,
                                                 lone_statement)

# A buffer's GTID-and-one-plain-statement units by default database: (database, unit indices as
# u32 little-endian, as `_core.mark_slow` takes them).
Lone = list[tuple[str, bytes]]

if TYPE_CHECKING:
    from dumpfilter.rules.ruleset import Settings


class RuleGroup:
    """What the slaves of one rule group (the same rules, settings and gate; their skip policies
    differ) share over a chunk: the keep table, the TransactionFilter, and its answer for each
    unit of the buffer the compiled walk leaves (`result`), decided once for all of them, in
    stream order (`mark`), as the master's StatementAnswers decides a unit once per rule group.
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
    change a later answer of rules that read databases only, and `experiment` reports none of it.

    Rules with table rules (no rewrite-db, names as they come) decide any other lone statement by
    what rpl_filter.cc reads of it: its kind, the databases and tables it names (its parse) and its
    default database. Those are answered once per such key (`LoneUnits.parsed`); the schema model
    still replays each one's DDL, which a later multi-table UPDATE's decision reads. Trigger DDL
    (the replica's trigger knowledge), multi-table UPDATEs (the model) and what does not parse
    are decided one by one."""

    __slots__ = ("filter", "keeps", "results", "marked", "by_database", "plain", "lone",
                 "engine", "parsed")

    def __init__(self, keeps: KeepTable, settings: Settings) -> None:
        self.keeps = keeps  # (kept across chunks: bandwidth._keep_table)
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
        self.engine = engine if (engine is not None and rules is not None and not self.by_database
                                 and not (rules.rewrite_db or rules.effective_do or rules.effective_ignore)
                                 and not engine.names.lower_incoming) else None
        self.parsed: dict[int, int] = {}  # a lone statement's row byte by its parse key (LoneUnits.parsed)
        self.lone: LoneUnits | None = None
        self.results: dict[int, FilterResult] = {}
        self.marked: dict[tuple[bytes, bytes | None, bool], bytes] = {}  # rows `mark` made, by what made them

    def buffer(self, lone: LoneUnits) -> None:
        """A new buffer: its units are numbered from 0 again; `lone` its lone units, read once for
        every group that asks."""
        self.results.clear()
        self.marked.clear()
        self.lone = lone

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
        if ROW_SLOW not in row:
            return row
        done = self.marked.get(key)
        if done is not None:
            return done
        out = bytearray(row)
        for db, ks in (self.lone.plain() if self.by_database and self.lone is not None else ()):
            code = self.plain.get(db)
            if code is None:  # the database's first: decided, and its answer kept for the others
                unit = txn(k := int.from_bytes(ks[:4], "little"))
                code = self.plain[db] = self._code(self.result(k, unit), unit)
            mark_slow(out, ks, code)
        k = out.find(ROW_SLOW, at)
        while k >= 0:
            unit = txn(k)
            # (A Format_description resets nothing here: no answer of a topology's rules follows
            # the server's lifetime, and a unit's table ids are its own Table_maps'.)
            if unit.kind != CONTROL and unit.complete:
                code = self._by_parse(k, unit)
                out[k] = code if code is not None else self._code(self.result(k, unit), unit)
            k = out.find(ROW_SLOW, k + 1)
        done = self.marked[key] = bytes(out)
        return done

    def _by_parse(self, k: int, unit: Transaction) -> int | None:
        """Lone unit `k`'s row byte by its parse key, for rules answered by parse (the first of a
        key decided); None where it is not answered so."""
        engine, lone = self.engine, self.lone
        found = lone.parsed(k) if engine is not None and lone is not None else None
        if found is None or engine is None:
            return None
        sql, db, info, key = found
        code = self.parsed.get(key)
        if code is None:
            code = self.parsed[key] = self._code(self.result(k, unit), unit)
        elif engine.replay_ddl:  # what the decision does besides: the model replays its DDL
            engine.schema.observe(sql, db, info)
        return code

    @staticmethod
    def _code(result: FilterResult, unit: Transaction) -> int:
        """A unit's row byte from its answer: ROW_KEEP kept whole, ROW_SKIP kept nothing, else
        ROW_SLOW (kept in part: the slave's walk takes it)."""
        if result.outcome == KEPT and len(result.events) == len(unit.events):
            return ROW_KEEP
        return ROW_SKIP if result.outcome in (EMPTIED, SKIPPED) else ROW_SLOW


class LoneUnits:
    """A chunk's GTID-and-one-statement units, read once for every rule group that answers them
    by what their answer depends on (RuleGroup): per buffer, the plain ones by default database
    (`plain`, read by the core: `UnitList.lone_queries`), and each one's parse key (`parsed`)."""

    KEYS_MAX = 1 << 16  # parse keys numbered per chunk; past it, lone statements are decided one by one

    def __init__(self) -> None:
        self.keys: dict[tuple[str | None, StatementInfo], int] = {}
        self._plain: Lone | None = None
        self._parsed: dict[int, tuple[str, str | None, StatementInfo, int] | None] = {}
        self.read: Callable[[], Lone] = list
        self.txn: Callable[[int], Transaction] | None = None

    def buffer(self, units: _core.UnitList, formats: list[tuple[int, int, int]],
               txn: Callable[[int], Transaction]) -> None:
        """The next buffer's units (`formats` as `UnitList.statement_units` takes them; `txn` unit
        k as a Transaction, made once for every group)."""
        self._plain, self.txn = None, txn
        self._parsed.clear()
        self.read = lambda: _plain_units(units, formats)

    def plain(self) -> Lone:
        """The buffer's units of a GTID and one plain statement (`plain_statement`), by default database."""
        if self._plain is None:
            self._plain = self.read()
        return self._plain

    def parsed(self, k: int) -> tuple[str, str | None, StatementInfo, int] | None:
        """Unit k's statement, default database, parse and parse key (the same for every statement
        that names the same things of the same kind under the same default database), where it is
        a GTID and one statement that parses and is neither trigger DDL nor a multi-table UPDATE."""
        if k in self._parsed:
            return self._parsed[k]
        found = None
        assert self.txn is not None  # (set by `buffer`)
        query = lone_statement(self.txn(k).events)
        if query is not None and query.sql is not None:
            sql, db = query.sql, query.db
            info = statement_tables(sql, db or "")
            if info.parse_ok and info.kind not in _ONE_BY_ONE:
                key = self.keys.get((db, info))
                if key is None and len(self.keys) < self.KEYS_MAX:
                    key = self.keys[(db, info)] = len(self.keys)
                found = None if key is None else (sql, db, info, key)
        self._parsed[k] = found
        return found


# Lone statements whose decision reads the replica's trigger knowledge or the schema model.
_ONE_BY_ONE = frozenset({Kind.CREATE_TRIGGER, Kind.DROP_TRIGGER, Kind.UPDATE_MULTI})


def _plain_units(units: _core.UnitList, formats: list[tuple[int, int, int]]) -> Lone:
    """The buffer's GTID-and-one-plain-statement units by default database, read by the core in
    one call (`UnitList.lone_queries`), with those whose text Python must tell (`plain_statement`)."""
    found = units.lone_queries(formats)
    out: Lone = [(group.db, group.units) for group in found.plain]
    out += [(q.db, q.unit.to_bytes(4, "little")) for q in found.others if q.plain is None and plain_statement(q.sql)]
    return out
