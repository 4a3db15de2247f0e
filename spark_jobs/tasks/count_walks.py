"""One rule group's answers over one scanned buffer of `experiment`'s chunk (`GroupAnswers`: made
once for the group's slaves, from keep bytes made for every group of the buffer at once by
`made_rows`), and the count walk of a slave the core's one call for all leaves units to
(`CountWalk`, a rules.walk_driver.Walk): the core's count walk over each run of units it can take,
the rest one unit at a time by its counter (spark_jobs.tasks.bandwidth's `_SlaveCounter`), which
adds what each did to the slave's counts."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, cast

from dumpfilter import _core
from dumpfilter.codec import Transaction
from dumpfilter.codec.scanner import ROW_PARTIAL, ROW_SLOW
from dumpfilter.rules.keep_table import KeyRows
from dumpfilter.rules.walk_driver import Unaccounted
from dumpfilter.rules.schema import is_schema_statement
from dumpfilter.spark_jobs.tasks.statement_tables import TableName

if TYPE_CHECKING:
    from dumpfilter.spark_jobs.tasks.bandwidth import _SlaveCounter
    from dumpfilter.spark_jobs.tasks.lone_units import LoneUnits
    from dumpfilter.spark_jobs.tasks.rule_groups import RuleGroup


Made = dict[tuple[bytes, bytes | None, bool], bytes]  # answers per unit by (keep bytes, statement keep bytes, guard)


def made_rows(units: _core.UnitList, names: list[TableName], formats: list[tuple[int, int, int]],
              wanted: list[tuple[bytes, KeyRows | None, bool]]) -> Made:
    """The answers per unit of every (keep bytes, statement keys' answers, guard) of `wanted`, made
    for all of them in one read of the units (`UnitList.rows_many`: each distinct one's Table_maps
    and statement keys), then a restricted gate's guarded units (`_guarded`). `formats`: the
    buffer's, as `UnitList.statement_units` took them."""
    todo = {(keep, None if stmt is None else stmt.keep, guards): (keep, stmt, guards) for keep, stmt, guards in wanted}
    gated = [None if stmt is None else stmt.gated for _, stmt, _ in todo.values()]
    rows = units.rows_many([keep for keep, _, _ in todo], [stmt_keep for _, stmt_keep, _ in todo], gated, formats)
    return {key: _guarded(units, row, keep, names, formats) if guards else row
            for (key, (keep, _, guards)), row in zip(todo.items(), rows)}


class GroupAnswers:
    """One rule group's answers over a buffer's `n` units, the same for each of its slaves: its keep
    bytes per name and per statement key (`keys`: the buffer's), and per unit (`answer`). `fast_only`:
    every unit of the buffer is fast (none left to Python), so none is read for the row but those
    a gate's guard leaves (`_guarded`)."""

    def __init__(self, group: RuleGroup, units: _core.UnitList, n: int, names: list[TableName],
                 keys: list[_core.StatementKey], fast_only: bool) -> None:
        self.group, self.n = group, n
        self.guards = group.filter.decider.checks_annotations
        self.fast_only = fast_only and not self.guards
        self.space = units if group.keeps.keys_enabled and keys else None
        self.stmt = group.keeps.rows(keys, hits=False) if self.space is not None else None
        self.keep = group.keeps.tables(names)  # the group's keep bytes per name
        self.stmt_keep = None if self.stmt is None else self.stmt.keep
        self.row, self.slow, self.partial = b"", True, False

    def answer(self, rows: Made, at: int, txn: Callable[[int], Transaction]) -> list[int]:
        """The group's answers per unit from `at` (`rows`: `made_rows`'), the units left to Python
        that it answers without the schema model answered (`RuleGroup.mark`); returns the others,
        for `answer_all`, in order."""
        key = (self.keep, self.stmt_keep, self.guards)
        if self.fast_only:
            self.out: bytes | bytearray = rows[key]
            return []
        self.out, left = self.group.mark(rows[key], at, txn)
        return left

    def done(self) -> None:
        """Every unit answered: cut to the buffer's units; whether one is still left to Python
        (`slow`), whether one is kept in part (`partial`)."""
        self.row = row = bytes(self.out)[:self.n]  # (a slice of all of it: the same object)
        self.slow, self.partial = not self.fast_only and ROW_SLOW in row, ROW_PARTIAL in row


def answer_all(answers: list[GroupAnswers], rows: Made, at: int, txn: Callable[[int], Transaction],
               lone: LoneUnits) -> None:
    """Every group's answers over a buffer from unit `at`: first what each answers without the
    schema model (`GroupAnswers.answer`), then the units left, in stream order, each decided for
    every group that left it, then its schema statements (and those of the lone units answered by
    parse) replayed into the model the groups' rule engines share (`RuleGroup.schema`: bandwidth's
    `_rule_group`), once: a decision sees the schema before its unit, as split's Router replays.
    A DDL-heavy binlog's 11,000 DDL units cost 48 rule groups one replay each, not 48. (A
    unit's statements are replayed after it: DDL commits implicitly, so no later statement of a
    unit reads what an earlier one made, but CREATE TEMPORARY TABLE, which the model skips.)"""
    left: dict[int, list[GroupAnswers]] = {}
    for a in answers:
        for k in a.answer(rows, at, txn):
            left.setdefault(k, []).append(a)
    schemas = list({id(a.group.schema): a.group.schema for a in answers if a.group.schema is not None}.values())
    replays = lone.replays if schemas else {}
    if not left:  # (most buffers: no unit left to decide, the lone units' replays alone, in order)
        for schema in schemas:
            schema.replay(replays.values())
        for a in answers:
            a.done()
        return
    for k in sorted(left.keys() | replays.keys()):  # (replays are by unit in stream order, as classified)
        replay = replays.get(k)
        unit = txn(k) if replay is None or k in left else None  # (a replay's text is the lone unit's)
        for a in left.get(k, ()):
            a.group.decide(cast(bytearray, a.out), k, cast(Transaction, unit))
        for schema in schemas:
            if replay is not None:
                schema.replay((replay,))
                continue
            for e in cast(Transaction, unit).events:
                if e.is_query and (sql := e.sql) and is_schema_statement(sql):
                    schema.observe(sql, e.db)
    for a in answers:
        a.done()


class CountWalk:
    """One slave over a buffer's units (rules.walk_driver.Walk), as the master's send walk sends
    them: compiled runs, the rest one unit at a time (`_SlaveCounter.unit`). `answers`: its rule
    group's."""

    def __init__(self, counter: _SlaveCounter, answers: GroupAnswers, units: _core.UnitList,
                 keys: list[_core.StatementKey], crc: bool, txn: Callable[[int], Transaction]) -> None:
        self.counter, self.answers, self.units, self.keys, self.crc = counter, answers, units, keys, crc
        self.txn, self.n = txn, answers.n
        self.hour(0, self.n)

    def hour(self, start: int, stop: int) -> None:
        """The units of the next hour: the walk ends with it, its answers end there (a run that
        ended at the hour's end is taken up again at the next one's start)."""
        self.stop = stop
        self.cut: bytes | None = None
        self.declined = -1  # where the walk last stopped: a unit for `step`

    def key_space(self, at: int) -> object | None:
        return self.answers.space

    def statement_units(self, at: int, space: object) -> list[_core.StatementKey] | None:
        return self.keys

    def run(self, at: int, stmt: KeyRows | None) -> Unaccounted | None:
        """Units `at`.. as the master's `UnitList.send` walks them (one job of the core's count
        walk, counted), to the first unit the walk leaves to `step`. (`stmt`: the keys' answers
        the driver asked its keep table for, the group's own; the skipped units' forms under the
        placeholder and empty-transaction policies are made once per buffer by the UnitList.)"""
        if at == self.declined:
            return None
        a, c = self.answers, self.counter
        if self.cut is None:  # the walk ends with the hour: its answers end there
            self.cut = a.row if self.stop == self.n else a.row[:self.stop]
        if self.cut[at] != ROW_SLOW:
            c.lead(self.cut[at])
            owed = c.out.heartbeat_size if c.pending else 0
            job = _core.CountJob(self.cut, a.keep, c.config(self.crc), owed, a.stmt_keep)
            r = self.units.count_many([job], [at], 0)[0].walk
            c.walked(r)
            at = r.next
        self.declined = at
        return Unaccounted(at)

    def step(self, at: int) -> int:
        self.counter.unit(self.txn(at), at)
        return at + 1


def _guarded(units: _core.UnitList, row: bytes, keep: bytes, names: list[TableName],
             formats: list[tuple[int, int, int]]) -> bytes:
    """`row` with every unit it keeps, whole or in part, whose Annotate_rows / Rows_query texts the
    core cannot show reach only tables `keep` keeps (`UnitList.annotations_unshown`, as the
    master's guard_row asks it) turned ROW_SLOW: those go one at a time, where the gate reads them."""
    unshown = units.annotations_unshown(row, keep, names, formats)
    if not unshown:
        return row
    out = bytearray(row)
    for k in unshown:
        out[k] = ROW_SLOW
    return bytes(out)
