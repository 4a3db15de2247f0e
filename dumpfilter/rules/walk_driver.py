"""The one driver of the compiled walks over a scanned buffer (issue #57): `filter`'s assembly,
the slave's relay run and `split`'s route state what they want done with a run of units and with
the one unit the core leaves, and `drive` runs the protocol between the core and the keep table
for all three, the same way:

1. at the first unit that may hold statements where the walk takes keys (`Walk.keys_format`),
   the buffer's statement units are read from there, under that format, by the core's one reader
   (`Scanner.statement_units`) and their keys answered by the keep table (`rows`), each key asked
   once; read again only under a new format (a Format_description event in the buffer);
2. the core's walk runs from the unit with those answers (`Walk.run`) and never stops to ask;
3. what it answered by key is accounted (`account`: the rule hits come out as if each statement
   had been decided on its own);
4. a unit the walk declines goes the general way (`Walk.step`), and the walk is tried again after it.

The master's send walk and `experiment`'s count take the same answers per segment (a segment's
`UnitList.statement_units`, `KeepTable.rows`) and tally them per key id in the walk itself."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Generic, Protocol, TypeVar

from dumpfilter import _core
from dumpfilter.codec.format_description import FormatDescription
from dumpfilter.codec.scanner import Scanner, UnitRecords

R = TypeVar("R")
R_contra = TypeVar("R_contra", contravariant=True)


class Answers(Protocol[R]):
    """A keep table's side of the protocol: a buffer's statement keys answered in its own id space
    (`rows`), and the statements a walk answered by them accounted (`account`)."""

    def rows(self, keys: Sequence[_core.StatementKey]) -> R: ...

    def account(self, rows: R, used: _core.KeysUsed) -> None: ...


class Ran(Protocol):
    """What one call of a compiled walk did: the first unit it left, and what it answered by key
    (None: the walk reports none, as `split`'s route, which counts no rule hits)."""

    @property
    def next(self) -> int: ...

    @property
    def by_keys(self) -> _core.KeysUsed | None: ...


class Walk(Protocol[R_contra]):
    """A consumer's walk over one buffer's units: what the core does with a run, what Python does
    with a unit the core leaves."""

    def keys_format(self, at: int) -> FormatDescription | None:
        """The format in force at unit `at` where the walk may take statement units by key from
        there, else None."""

    def run(self, at: int, keys: R_contra | None) -> Ran | None:
        """The core's walk from unit `at` with the buffer's statement keys answered (`keys`, None
        when not asked for), or None where the walk does not start at `at`."""

    def step(self, at: int) -> int:
        """Unit `at` the general way; the index of the next unit."""


class Driver(Generic[R]):
    """`drive` over one scanner and keep table, buffer after buffer."""

    __slots__ = ("scanner", "keeps")

    def __init__(self, scanner: Scanner, keeps: Answers[R]) -> None:
        self.scanner, self.keeps = scanner, keeps

    def drive(self, walk: Walk[R], buf: bytes, units: UnitRecords, start: int = 0) -> int:
        """Walk `units` (the scanner's last scan of `buf`) from `start`; returns where it ended
        (their count, or past it where a step took more)."""
        keeps, statement_units = self.keeps, self.scanner.statement_units
        rows: R | None = None
        rows_fmt: FormatDescription | None = None
        i, n = start, len(units)
        while i < n:
            fmt = walk.keys_format(i)
            if fmt is not None and fmt is not rows_fmt and units.may_hold_statements(i):
                rows, rows_fmt = keeps.rows(statement_units(buf, i, fmt)), fmt
            ran = walk.run(i, rows if fmt is not None and fmt is rows_fmt else None)
            if ran is not None and ran.next > i:
                used = ran.by_keys
                if used is not None and used.units and rows is not None:
                    keeps.account(rows, used)
                i = ran.next
                continue
            i = walk.step(i)
        return i
