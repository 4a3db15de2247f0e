"""The one driver of the compiled walks (issue #57): `filter`'s assembly, the slave's relay run,
`split`'s route, the master's send, `experiment`'s count and `simulate --verify`'s reference each
state what they want done with a run of units and with the one unit the core leaves (a `Walk`),
and a `Driver` runs the protocol between the core and the keep table for all of them, the same way:

1. at a unit where the walk takes statement units by key (`Walk.key_space`: a buffer under one
   format, a segment), their keys are read once for that space by the core's one reader
   (`Walk.statement_units`: `Scanner.statement_units`, `UnitList.statement_units`) and answered by
   the keep table (`Answers.rows`), each key asked once;
2. the core's walk runs from the unit with those answers (`Walk.run`) and never stops to ask;
3. what it answered by key is accounted (`Answers.account`: the rule hits come out as if each
   statement had been decided on its own);
4. a unit the walk declines goes the general way (`Walk.step`), and the walk is tried again after it.

What stays the consumer's: where its units come from (a scanner's buffer, a segment, a chunk),
what its run does with the answers (write, relay, route, send, count, compare) and its general
step (a TransactionFilter of its decider, the router, the master's `_unit`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Generic, NamedTuple, Protocol, TypeVar

from dumpfilter import _core

R = TypeVar("R")  # a keep table's answers to one space's keys
U = TypeVar("U")  # what a walk reports it answered by key
R_contra = TypeVar("R_contra", contravariant=True)
U_contra = TypeVar("U_contra", contravariant=True)
U_co = TypeVar("U_co", covariant=True)


class Answers(Protocol[R, U_contra]):
    """A keep table's side of the protocol: one space's statement keys answered in its own id
    space (`rows`), and the statements a walk answered by them accounted (`account`)."""

    def rows(self, keys: Sequence[_core.StatementKey]) -> R: ...

    def account(self, rows: R, used: U_contra) -> None: ...


class Ran(Protocol[U_co]):
    """What one call of a compiled walk did: the first unit it left, and what it answered by key
    (None: nothing to account, as `split`'s route, which counts no rule hits)."""

    @property
    def next(self) -> int: ...

    @property
    def by_keys(self) -> U_co | None: ...


class Unaccounted(NamedTuple):
    """A run a walk took with nothing answered by key to account (a `Ran`): `split`'s route,
    `experiment`'s count and `simulate --verify`'s comparison count no rule hits."""

    next: int
    by_keys: None = None


class Walk(Protocol[R_contra, U_co]):
    """A consumer's walk over one buffer's (or segment's) units: what the core does with a run,
    what Python does with a unit the core leaves."""

    def key_space(self, at: int) -> object | None:
        """What the keys of the statement units from unit `at` are read in (the format in force
        over a scanned buffer, a segment), or None where the walk takes none by key from there."""

    def statement_units(self, at: int, space: object) -> Sequence[_core.StatementKey] | None:
        """The keys of the statement units from unit `at` in `space` (ids from 0), or None where
        `at` holds none and they are not read yet."""

    def run(self, at: int, keys: R_contra | None) -> Ran[U_co] | None:
        """The core's walk from unit `at` with the space's statement keys answered (`keys`, None
        when not asked for), or None where the walk does not start at `at`."""

    def step(self, at: int) -> int:
        """Unit `at` the general way; the index of the next unit."""


class Driver(Generic[R, U]):
    """Walks over one keep table, buffer after buffer (segment after segment): `drive` a whole
    buffer, or `begin` one and `advance` a run or a unit at a time."""

    __slots__ = ("answers", "_rows", "_space")

    def __init__(self, answers: Answers[R, U]) -> None:
        self.answers = answers
        self.begin()

    def begin(self) -> None:
        """A new buffer: its keys' ids are its own."""
        self._rows: R | None = None
        self._space: object | None = None

    def advance(self, walk: Walk[R, U], at: int) -> int:
        """One run of the core's walk from unit `at`, or the unit the general way; the next unit."""
        space = walk.key_space(at)
        if space is not None and space is not self._space:
            keys = walk.statement_units(at, space)
            if keys is not None:
                self._rows, self._space = self.answers.rows(keys), space
        rows = self._rows if space is not None and space is self._space else None
        ran = walk.run(at, rows)
        if ran is not None and ran.next > at:
            used = ran.by_keys
            if used is not None and rows is not None:
                self.answers.account(rows, used)
            return ran.next
        return walk.step(at)

    def drive(self, walk: Walk[R, U], n: int, start: int = 0) -> int:
        """A new buffer's units `start`..`n`; returns where the walk ended (`n`, or past it where a
        step took more)."""
        self.begin()
        i, advance = start, self.advance
        while i < n:
            i = advance(walk, i)
        return i
