"""One slave's count walk over one scanned buffer of `experiment`'s chunk (`CountWalk`, a
rules.walk_driver.Walk): its answers per unit from its keep bytes (`answers`, made for every slave
of the buffer at once by `made_rows`), the core's count walk over each run of units it can take, the
rest one unit at a time by its counter (spark_jobs.tasks.bandwidth's `_SlaveCounter`), which adds
what each did to the slave's counts."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, NamedTuple

from dumpfilter import _core
from dumpfilter.codec import Transaction
from dumpfilter.codec.scanner import ROW_SLOW
from dumpfilter.rules.keep_table import KeyRows
from dumpfilter.spark_jobs.tasks.statement_tables import TableName

if TYPE_CHECKING:
    from dumpfilter.spark_jobs.tasks.bandwidth import _SlaveCounter


class _Counted(NamedTuple):
    """A run the count walk took (rules.walk_driver.Ran; `experiment` counts no rule hits by key)."""

    next: int
    by_keys: None = None


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


class CountWalk:
    """One slave over a buffer's units (rules.walk_driver.Walk), as the master's send walk sends
    them: compiled runs, the rest one unit at a time (`_SlaveCounter.unit`). `rows`: the buffer's
    answers, shared by its slaves; `keys`: the buffer's statement keys; `fast_only`: every unit of
    the buffer is fast (none left to Python)."""

    def __init__(self, counter: _SlaveCounter, units: _core.UnitList, n: int, names: list[TableName],
                 keys: list[_core.StatementKey], crc: bool, txn: Callable[[int], Transaction], rows: Made,
                 fast_only: bool = False) -> None:
        self.counter, self.units, self.n, self.keys, self.crc = counter, units, n, keys, crc
        self.txn, self.rows = txn, rows
        # Every unit of the buffer fast (a ROW binlog's segment): no answer is left to Python but
        # those a gate's guard leaves (`_guarded`), and no row is read for one.
        self.fast_only = fast_only and not counter.guards
        self.space = units if counter.group.keeps.keys_enabled and keys else None
        # The statement keys' answers (the driver asks its keep table for the same at its first run).
        self.stmt = counter.group.keeps.rows(keys) if self.space is not None else None
        self.keep = counter.group.keeps.tables(names)  # the slave's keep bytes per name
        self.row: bytes | None = None
        self.hour(0, n)

    def wanted(self) -> tuple[bytes, KeyRows | None, bool]:
        """What the slave's answers are made of (`made_rows`)."""
        return self.keep, self.stmt, self.counter.guards

    def hour(self, start: int, stop: int) -> None:
        """The units of the next hour: the walk ends with it, its answers end there (a run that
        ended at the hour's end is taken up again at the next one's start)."""
        self.stop = stop
        self.cut: bytes | None = None
        self.declined = -1  # where the walk last stopped: a unit for `step`

    def key_space(self, at: int) -> object | None:
        return self.space

    def statement_units(self, at: int, space: object) -> list[_core.StatementKey] | None:
        return self.keys

    def answers(self, at: int) -> tuple[bytes, bytes | None, bytes]:
        """The slave's keep bytes per name and per statement key, and its answers per unit from
        `at` (`run`'s, with the keys' rows its driver would ask its keep table for)."""
        return self._answer(at, self.stmt)

    def run(self, at: int, stmt: KeyRows | None) -> _Counted | None:
        if at == self.declined:
            return None
        keep, stmt_keep, row = self._answer(at, stmt)
        cut = self.cut
        if cut is None:  # the walk ends with the hour: its answers end there
            cut = self.cut = row if self.stop == self.n else row[:self.stop]
        self.declined = self.counter.run(self.units, cut, keep, at, self.crc, stmt_keep)
        return _Counted(self.declined)

    def _answer(self, at: int, stmt: KeyRows | None) -> tuple[bytes, bytes | None, bytes]:
        counter, keep = self.counter, self.keep
        stmt_keep = None if stmt is None else stmt.keep
        if self.row is None:  # (made for every slave of the buffer by `made_rows`)
            key = (keep, stmt_keep, counter.guards)
            # the units left to Python answered for the slave's rule group (`RuleGroup.mark`): part
            # of what decides a run, so of its key
            made = self.rows[key]
            self.row = made if self.fast_only else counter.group.mark(made, at, self.txn, key)
        return keep, stmt_keep, self.row

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
