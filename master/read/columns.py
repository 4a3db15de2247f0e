"""A scanned segment's units as columns of the core's UnitList (`Columns`), what the streams' run loop
reads of them (`UnitIndex`), and the Units made from them on first use (`LazyUnits`)."""

from __future__ import annotations

import struct
import threading
import uuid as uuidlib
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, overload

from dumpfilter.codec import Event, EventType
from dumpfilter.codec.scanner import F_MARIADB_GTID, F_MYSQL_GTID, F_ROTATE_END, F_TAGGED_GTID
from dumpfilter.codec.format_description import FormatDescription
from dumpfilter._core import LoneQueries, StatementKey, held_bytes
from dumpfilter.codec.scanner import UnitList, UnitRecord, unit_record
from dumpfilter.errors import TruncatedBinlogError
from dumpfilter.binlogs.tail import confined_rotate_target
from dumpfilter.master.read.units import UNIT_KINDS, MariaGtid, MysqlGtid, Pos, TableName, Unit
from dumpfilter.master.read.windows import ReadBuffer, mapping_cut_short

if TYPE_CHECKING:
    from dumpfilter.master.decide.flags import WordAnswer
    from dumpfilter.master.decide.policy_check import Annotations

_I64 = struct.Struct("<q")
_U64 = struct.Struct("<Q")


class Part:
    """One scan's worth of a segment's units: the read buffer they lie in, its file and file
    offset, where the part's units start in the segment, the format in force (per unit only
    where an FDE changed it inside the part) and the checksum length after the scan."""

    __slots__ = ("buf", "file", "base", "first", "fmt", "fmts", "crc", "used")

    def __init__(self, buf: ReadBuffer, file: str, base: int, first: int, fmt: FormatDescription | None,
                 fmts: list[FormatDescription | None] | None, crc: int, used: int | None = None) -> None:
        self.buf, self.file, self.base, self.first = buf, file, base, first
        self.fmt, self.fmts, self.crc = fmt, fmts, crc
        self.used = len(buf) if used is None else used  # where its last unit ends in buf


class Columns:
    """A segment's units as the core's UnitList holds them: per unit its offsets, events, flags,
    GTID and Table_map name ids live in the UnitList, nothing per unit in Python; a Unit is made from
    them when a stream asks for one (LazyUnits)."""

    def __init__(self) -> None:
        self.unit_list = UnitList()
        self.parts: list[Part] = []    # by the UnitList's part index
        self.names: list[TableName] = []        # (db, table) by name id (the scanner's)
        self.made: dict[int, Unit] = {}  # units made eagerly (holding an FDE)
        self.sources: dict[bytes, str] = {}  # MySQL GTID source uuids, decoded once

    def __len__(self) -> int:
        return len(self.unit_list)

    def unit(self, k: int) -> Unit:
        made = self.made.get(k)
        if made is not None:
            return made
        p, rec = unit_record(self.unit_list, k)
        part = self.parts[p]
        raw = bytes(part.buf[rec.start : rec.end])  # (a view's slice is a view: the Unit's are bytes)
        pos = part.base + rec.start
        name = part.file
        fmt = part.fmt if part.fmts is None else part.fmts[k - part.first]
        if rec.fast:
            names = self.names
            return Unit.fast(raw, name, pos, fmt, rec.events, tuple([names[i] for i in self.unit_list.tables(k)]),
                             self.unit_list.gtid(k), rec.gtid_size, self._mysql_gtid(part, rec, fmt))
        end_pos = (name, pos + len(raw))
        if rec.flags & F_ROTATE_END:
            at = rec.last - rec.start
            target = raw[at + 27 : len(raw) - part.crc].decode("utf-8", "surrogateescape")
            end_pos = (confined_rotate_target(target, name, pos + at), _U64.unpack_from(raw, at + 19)[0])
        return Unit.lazy(raw, name, pos, fmt, rec.events, UNIT_KINDS[rec.kind], rec.complete, end_pos)

    def end_of(self, k: int) -> Pos | None:
        """Unit k's end position from the UnitList; None when it ends with a real Rotate."""
        end = self.unit_list.end(k)
        return None if end is None else (self.parts[end.part].file, end.pos)

    def mysql_gtid(self, k: int) -> MysqlGtid | None:
        """Unit k's MySQL GTID (source uuid, tag, gno), else None."""
        p, rec = unit_record(self.unit_list, k)
        part = self.parts[p]
        return self._mysql_gtid(part, rec, part.fmt if part.fmts is None else part.fmts[k - part.first])

    def _mysql_gtid(self, part: Part, rec: UnitRecord, fmt: FormatDescription | None) -> MysqlGtid | None:
        flags = rec.flags
        if flags & F_MARIADB_GTID or not flags & (F_MYSQL_GTID | F_TAGGED_GTID):
            return None
        buf, start = part.buf, rec.start
        if flags & F_MYSQL_GTID:
            sid = bytes(buf[start + 20 : start + 36])
            source = self.sources.get(sid)
            if source is None:
                source = self.sources[sid] = str(uuidlib.UUID(bytes=sid))
            gno: int = _I64.unpack_from(buf, start + 36)[0]
            return source, "", gno
        info = Event(bytes(buf[start : start + rec.gtid_size]), part.base + start, fmt).gtid_info
        return info.source, info.tag, info.gno


class _GtidColumn:
    """Per unit, its MariaDB GTID ((domain, server_id), seq_no), else None: read from the UnitList
    when a stream reads one (most are never read: a run's tracker update needs only its last
    GTID when the segment has one GTID source)."""

    __slots__ = ("_plan",)

    def __init__(self, unit_list: UnitList) -> None:
        self._plan = unit_list

    def __len__(self) -> int:
        return len(self._plan)

    @overload
    def __getitem__(self, k: int) -> MariaGtid | None: ...
    @overload
    def __getitem__(self, k: slice) -> list[MariaGtid | None]: ...

    def __getitem__(self, k: int | slice) -> MariaGtid | None | list[MariaGtid | None]:
        n = len(self._plan)
        if isinstance(k, slice):
            start, stop, step = k.indices(n)
            got = self._plan.gtids(start, stop) if start < stop else []
            return got if step == 1 else got[::step]
        if k < 0:
            k += n
        if not 0 <= k < n:
            raise IndexError(k)
        return self._plan.gtid(k)

    def __iter__(self) -> Iterator[MariaGtid | None]:
        return iter(self._plan.gtids(0, len(self._plan)))


class _MysqlRuns:
    """The segment's MySQL GTIDs by range of units, as intervals (source uuid, tag, first gno,
    gno past the last): the core reads the untagged ones as runs of consecutive gnos
    (`UnitList.mysql_gtids`); a tagged GTID is decoded here, one per unit."""

    __slots__ = ("_cols",)

    def __init__(self, cols: Columns) -> None:
        self._cols = cols

    def __call__(self, start: int, stop: int) -> Iterator[tuple[str, str, int, int]]:
        found = self._cols.unit_list.mysql_gtids(start, stop)
        for run in found.runs:
            yield run.source, "", run.first, run.last + 1
        for k in found.tagged:
            if (gtid := self._cols.mysql_gtid(k)) is not None:
                source, tag, gno = gtid
                yield source, tag, gno, gno + 1


# `UnitIndex.lone_queries` kept with its segment up to this many bytes of unit indices and SQL
# text: a ROW segment's few DDL statements, not a DDL-heavy segment's megabytes of text. Not
# counted in the kept segments' budget (INDEX_BYTES, their unit lists): at most INDEX_SEGMENTS x this,
# 4 MB, beside its 192 MB.
LONE_KEPT_BYTES = 16 << 10

# UnitIndex.lone_queries: (plain [(default database, unit indices as u32 bytes)], others
# [(k, default database, plain, SQL)])
# UnitIndex.statement_units: (the keys, their texts decoded only by the keep table that meets them
# first: rules.keep_table; the units they decide)
StatementUnits = tuple[list[StatementKey], int]
# StatementAnswers.lone_answers: (groups [(unit indices, the same as u32 bytes, answer)], singles
# {unit index: answer}), an answer being a statement flag word and its rule hits by bit
# (master.decide.flags.WordAnswer)
LoneAnswers = tuple[list[tuple["memoryview[int]", bytes, "WordAnswer"]], dict[int, "WordAnswer"]]


# Answer rows a segment keeps, one per distinct keep bytes (`UnitIndex.rows_for`): slaves with the
# same rules (64 slaves over eight schemas: eight per schema) each had the core walk every unit of
# every segment for the same row. A row is a byte per unit, a hundredth of its UnitList record.
ROWS_KEPT = 8


class UnitIndex:
    """What the streams' run loop reads of a scanned segment, all from the core's UnitList (one call
    per question, none per unit): its size, the name ids' (db, table), each stream's answer
    bytes, the GTID columns."""

    def __init__(self, cols: Columns) -> None:
        unit_list = self.unit_list = cols.unit_list
        self.names = cols.names
        self.size = unit_list.size
        self.gtids = _GtidColumn(unit_list)
        # Whether the GTIDs share one (domain, server_id): then a run's last GTID is all a
        # stream's GTID tracker needs (it keeps the last seq_no per (domain, server_id)).
        self.one_gtid_source = unit_list.gtid_sources() <= 1
        self.mysql_gtids = _MysqlRuns(cols) if unit_list.flags_any & (F_MYSQL_GTID | F_TAGGED_GTID) else None
        self.lock = threading.Lock()
        self._parts = cols.parts
        self._rows: dict[bytes, bytes] = {}  # `rows_for`'s answers by keep bytes (ROWS_KEPT of them)
        self.rows_made = 0  # answers the core made (`rows_for`; read by tests)
        self.row_walks = 0  # walks of the units the core made for them (`rows_for`; read by tests)
        # (flag-word generation, {unit: statement flag answer}) of the lone units (see `lone_queries`),
        # filled once per generation by the first stream to ask (StatementAnswers.lone_answers).
        self.lone_answers: tuple[int, LoneAnswers] | None = None
        self._lone_queries: LoneQueries | None = None  # `lone_queries`' answer, when small enough to keep (LONE_KEPT_BYTES)
        self._statement_units: StatementUnits | None = None  # `statement_units`' answer
        self._tallied: tuple[tuple[tuple[int, int], ...], list[int]] | None = None  # `tally`'s last answer
        self.tallies = 0  # tallies the core made (`tally`; read by tests)
        # A unit's annotations as the policy check reads them (master.decide.policy_check.guard_row)
        self.policy_texts: dict[int, Annotations] | None = None
        # The most units of this segment a gated stream kept (guard_row): SegmentCache.texts_wanted
        self.policy_demand = 0

    def cut_short(self) -> TruncatedBinlogError | None:
        """The error for the segment's readers when a file it maps was truncated since it was
        mapped (`mapping_cut_short`: its units' pages would fault), else None."""
        for part in self._parts:
            size = mapping_cut_short(part.buf, part.base, part.used)
            if size is not None:
                return TruncatedBinlogError(f"the file was truncated to {size} bytes while the master read it (its "
                                            f"units went to {part.base + part.used})", path=part.file, offset=size)
        return None

    @property
    def parts(self) -> list[Part]:
        return self._parts

    def lone_queries(self) -> LoneQueries:
        """The units made of a GTID and one plain QUERY event, in one core call: the units
        `Unit.lone_text` answers, but for those before an FDE that changes the format inside a
        part (a new file's first units; left to `Unit.lone_text`). As (plain, others): plain
        [(default database, unit indices as u32 bytes)] of the plain statements
        (`plain_statement`), whose text is not read (`Unit.lone_text` reads it if needed);
        others [(k, default database, plain, SQL)], plain False, or None where the core leaves
        it to Python. Kept once asked, when its texts are few (a registration asks again for
        every segment a stream reaches: the words are made anew, the units are the same)."""
        if self._lone_queries is not None:
            return self._lone_queries
        formats = self.formats()
        found = self.unit_list.lone_queries(formats)
        if sum(len(g.units) for g in found.plain) + sum(len(q.sql) for q in found.others) <= LONE_KEPT_BYTES:
            self._lone_queries = found
        return found

    def formats(self) -> list[tuple[int, int, int]]:
        """Per part (its format's QUERY post-header length, its checksum length, the first unit the
        format is in force for), as the core's calls on this segment's texts take them
        (`lone_queries`, `statement_units`, a gated stream's `rows_many` and `annotations_unshown`)."""
        formats = []
        for part in self._parts:
            fmt, fmts, first = part.fmt, part.fmts, part.first
            if fmts is not None:  # the format of the part's last units, from the last change on
                fmt = fmts[-1]
                at = len(fmts) - 1
                while at > 0 and fmts[at - 1] is fmt:
                    at -= 1
                first += at
            if fmt is None:
                formats.append((0, 0, 1 << 62))
            else:
                formats.append((fmt.post_header_len(EventType.QUERY), fmt.checksum_len, first))
        return formats

    def statement_units(self) -> StatementUnits:
        """The segment's statement units by key (issue #43), read by the core once for every
        stream: (its keys, the units they decide). A stream answers the keys (master.decide.statement_keys)
        and the core the units (`UnitList.rows_many`, `UnitList.send`)."""
        found = self._statement_units
        if found is None:
            with self.lock:
                found = self._statement_units
                if found is None:
                    read = self.unit_list.statement_units(self.formats())
                    found = self._statement_units = (read.keys, read.units)
        return found

    def held_bytes(self) -> int:
        """The bytes it holds: the core's (its UnitList's records and statement units) and the answer
        rows kept (`rows_for`)."""
        return held_bytes(self.unit_list) + sum(map(len, list(self._rows.values())))

    def tally(self, ranges: list[tuple[int, int]]) -> list[int]:
        """The Table_maps of the units in `ranges` per name id (`UnitList.tally_names`): the rule
        hits of the units a stream's core walks went over. The last answer is kept: the streams
        that walk a whole segment in the core (do-db streams over a binlog of eight schemas) ask
        for the same ranges, and each tallied every Table_map of the segment."""
        key, last = tuple(ranges), self._tallied
        if last is not None and last[0] == key:
            return last[1]
        counts = bytearray(4 * len(self.names))
        self.unit_list.tally_names(ranges, counts)
        self.tallies += 1
        counted = memoryview(counts).cast("I").tolist()
        self._tallied = (key, counted)
        return counted

    def rows_for(self, keep_of: Callable[[list[TableName]], bytes],
                 keeps_of: Callable[[list[TableName]], list[bytes]] | None = None) -> tuple[bytes, bytes]:
        """One slave's answer byte per unit (0 skip, 1 partial, 2 keep, 3 not fast), computed by
        the core from `keep_of(names)`, the slave's keep byte per table name of the segment (the
        flag words), and those bytes. The first stream to ask answers the segment for every slave
        at once (`keeps_of(names)`: the others' keep bytes) in one walk of its units
        (`UnitList.rows_many`): eight do-db slaves each walked every unit for their own row."""
        keep = keep_of(self.names)
        rows = self._rows
        row = rows.get(keep)
        if row is None:
            keeps = [keep]
            if keeps_of is not None:
                keeps += [k for k in dict.fromkeys(keeps_of(self.names)) if k != keep and k not in rows]
            keeps = keeps[:max(ROWS_KEPT - len(rows), 1)]
            made = self.unit_list.rows_many(keeps)
            self.rows_made += len(made)
            self.row_walks += 1
            row = made[0]
            for k, r in zip(keeps, made):
                if len(rows) < ROWS_KEPT:
                    rows.setdefault(k, r)
        return row, keep


class LazyUnits:
    """A segment's units, each made on first use and then shared by every stream (their
    per-rule-group answers live on them)."""

    __slots__ = ("_cols", "_units", "_n", "_lock")

    def __init__(self, cols: Columns):
        self._cols = cols
        # The Units made, by index: few (the units the core's walk leaves to Python), so a dict, not
        # a slot per unit made afresh each time a stream takes the segment back from the kept.
        self._units: dict[int, Unit] = {}
        self._n = len(cols)
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return self._n

    def fresh(self) -> LazyUnits:
        """The same units, none made yet (a segment the cache keeps by its scan: the Units
        made, with their bytes and answers, are let go)."""
        return LazyUnits(self._cols)

    def __bool__(self) -> bool:
        return self._n > 0

    def _index(self, k: int) -> int:
        n = self._n
        if not -n <= k < n:
            raise IndexError("unit index out of range")
        return k if k >= 0 else n + k

    def __getitem__(self, k: int) -> Unit:
        k = self._index(k)
        unit = self._units.get(k)
        if unit is None:
            with self._lock:
                unit = self._units.get(k)
                if unit is None:
                    unit = self._units[k] = self._cols.unit(k)
        return unit

    def __iter__(self) -> Iterator[Unit]:
        return (self[k] for k in range(self._n))

    def end_of(self, k: int) -> Pos:
        """Unit k's end position, without making the Unit unless it ends with a real Rotate."""
        k = self._index(k)
        unit = self._units.get(k)
        if unit is not None:
            return unit.end
        end = self._cols.end_of(k)
        return end if end is not None else self[k].end
