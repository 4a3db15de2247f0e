"""The master's unit model: one transaction, statement or control event of the binlog (`Unit`),
where it ends (`unit_end`), and a segment of whole units (`Segment`), as every stream reads them."""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from dumpfilter.codec import Event, EventType, Transaction
from dumpfilter.codec.constants import GTID_EVENT_TYPES, LOG_EVENT_ARTIFICIAL_F
from dumpfilter.codec.format_description import FormatDescription
from dumpfilter.codec.event import query_text
from dumpfilter.errors import BinlogError
from dumpfilter._core import StatementEnd, statements as core_statements
from dumpfilter.codec.scanner import unit_events
from dumpfilter.codec.transactions import CONTROL, STATEMENT, TRANSACTION

if TYPE_CHECKING:
    from dumpfilter.master.read.columns import LazyUnits, UnitIndex
    from dumpfilter.rules.statement_info import StatementInfo

Pos = tuple[str, int]
TableName = tuple[str, str]  # (db, table) of a Table_map
MariaGtid = tuple[tuple[int, int], int]  # ((domain, server_id), seq) of a MariaDB GTID
MysqlGtid = tuple[str, str, int]  # (source uuid, tag, gno) of a MySQL GTID
StatementCut = StatementEnd  # see Unit.statements
# Unit.results: per rule group (its key), the answer its first slave computed; values differ by key
# (master.decide.statement_answers): a cache shared by every stream, read back by its writer.
Results = dict[object, Any]

UNIT_KINDS = {"control": CONTROL, "transaction": TRANSACTION, "statement": STATEMENT}  # the core's kind codes


class Unit:
    """One transaction, statement or control event, where it ends, and the per-rule-group filter
    answers computed for it so far (slaves with equal rules share one answer).

    A *fast* unit (the common ROW shape, `MariaDB GTID {Annotate_rows|Table_map|Rows}* XID` or
    `MySQL GTID BEGIN {Rows_query|Table_map|Rows}* XID`, see
    `SegmentReader`) is kept as its raw bytes plus what a decision needs: its Table_maps' (db,
    table) and ids, and its GTID. Its `txn` (Event objects, as the reference path builds them) is
    only materialised when a slave's answer needs the reference path."""

    __slots__ = ("_txn", "file", "end", "results", "raw", "pos", "fmt", "events", "tables", "_statements", "gtid",
                 "gtid_end", "nbytes", "mysql_gtid", "is_fast", "_kind", "_complete", "_parses")

    def __init__(self, txn: Transaction | None, file: str, end: Pos, results: Results | None = None) -> None:
        self._txn = txn
        self.file = file
        self.end = end
        self.results: Results = {} if results is None else results
        self.events = len(txn.events) if txn is not None else 0
        self.nbytes = txn.size if txn is not None else 0
        self.raw: bytes | None = None      # fast units only, from here on
        self.pos = 0
        self.fmt: FormatDescription | None = None
        self.tables: tuple[TableName, ...] = ()         # (db, table) of each Table_map, in order (fast units)
        self._statements: tuple[StatementCut, ...] | None | _Unset = None  # see `statements`
        self.gtid: MariaGtid | None = None
        self.mysql_gtid: MysqlGtid | None = None
        self.gtid_end = 0                  # size of the GTID event
        self.is_fast = False
        self._kind: str
        self._complete: bool
        self._kind, self._complete = (txn.kind, txn.complete) if txn is not None else (TRANSACTION, True)
        self._parses: dict[tuple[str, str], StatementInfo] | None = None  # see `parses`

    @classmethod
    def fast(cls, raw: bytes, file: str, pos: int, fmt: FormatDescription | None, events: int,
             tables: tuple[TableName, ...], gtid: MariaGtid | None, gtid_end: int,
             mysql_gtid: MysqlGtid | None = None) -> Unit:
        unit = cls.__new__(cls)
        unit._txn = None
        unit.file, unit.end, unit.results = file, (file, pos + len(raw)), {}
        unit.raw, unit.pos, unit.fmt, unit.events, unit.nbytes = raw, pos, fmt, events, len(raw)
        unit.tables, unit._statements, unit.gtid, unit.gtid_end = tables, _UNSET, gtid, gtid_end
        unit.mysql_gtid, unit._parses = mysql_gtid, None
        unit.is_fast, unit._kind, unit._complete = True, TRANSACTION, True
        return unit

    @classmethod
    def lazy(cls, raw: bytes, file: str, pos: int, fmt: FormatDescription | None, events: int, kind: str, complete: bool, end: Pos) -> Unit:
        """A unit that is not fast: its raw bytes, its Events made on first use."""
        unit = cls.__new__(cls)
        unit._txn = None
        unit.file, unit.end, unit.results = file, end, {}
        unit.raw, unit.pos, unit.fmt, unit.events, unit.nbytes = raw, pos, fmt, events, len(raw)
        unit.tables, unit._statements, unit.gtid, unit.gtid_end, unit.mysql_gtid = (), None, None, 0, None
        unit.is_fast, unit._kind, unit._complete, unit._parses = False, kind, complete, None
        return unit

    @property
    def statements(self) -> tuple[StatementCut, ...] | None:
        """(end offset in raw, events, index in `tables` after its Table_maps) per statement
        (ended by STMT_END_F), or None when the unit does not cut into whole statements (rows
        of an earlier statement's Table_map, or a statement left open). Fast units only; found
        on first use, as only units that some slave keeps in part need it."""
        statements = self._statements
        if isinstance(statements, _Unset):
            raw = self.raw
            assert raw is not None, "only fast units (raw bytes) leave their statements unset"
            found = core_statements(raw, self.gtid_end, len(raw))
            statements = self._statements = tuple(found) if found is not None else None
        return statements

    @property
    def parses(self) -> dict[tuple[str, str], StatementInfo]:
        """(sql, default db) -> StatementInfo: the unit's statements as parsed for the first rule
        group that decided them, reused by the others (each event parsed once, whatever the
        number of slaves); it lives as long as the unit stays in the segment cache."""
        parses = self._parses
        if parses is None:
            parses = self._parses = {}
        return parses

    def lone_text(self) -> tuple[str, str] | None:
        """(default database, SQL) of a complete unit made of a GTID and one QUERY event (DDL,
        MariaDB's standalone groups), or of one QUERY event without a GTID (MySQL before 5.6's
        GTIDs: DDL, and every statement under autocommit), read from its bytes without making
        Events; else None (and for a unit made from its Events: one with a Format_description)."""
        raw, fmt = self.raw, self.fmt
        if raw is None or not self._complete or self._kind == CONTROL or fmt is None:
            return None
        gtid = raw[4] in GTID_EVENT_TYPES
        if self.events != (2 if gtid else 1):
            return None
        start: int = _U32.unpack_from(raw, 9)[0] if gtid else 0
        return query_text(raw, start, len(raw), fmt)

    @property
    def txn(self) -> Transaction:
        txn = self._txn
        if txn is None:
            assert self.raw is not None, "a unit is made from its Transaction or its raw bytes"
            events, _ = unit_events(self.raw, self.pos, self.fmt)
            txn = self._txn = Transaction(self._kind, events, self._complete)
        return txn

    @property
    def size(self) -> int:
        return self.nbytes


class _Unset:
    """A fast unit's statements not yet looked for (None: looked for, not whole statements)."""


_UNSET: Final = _Unset()
_U32 = struct.Struct("<I")


@dataclass(eq=False)
class Segment:
    start: Pos
    units: list[Unit] | LazyUnits
    end: Pos
    at_end: bool          # reading stopped at the current end of the binlog
    error: BinlogError | None = None  # a corrupt event right after `end`
    index: UnitIndex | None = None  # None: read unit by unit (the tests' reference reader)

    @property
    def size(self) -> int:
        index = self.index
        return index.size if index is not None else sum(u.nbytes for u in self.units)


def unit_end(file: str, last: Event) -> Pos:
    """The master position after an event. After a real Rotate the slave continues in the next
    file at the Rotate's position, as MySQL's receiver does."""
    if last.type_code == EventType.ROTATE and not last.flags & LOG_EVENT_ARTIFICIAL_F:
        pos, name = last.rotate
        return name, pos
    return file, last.end_pos
