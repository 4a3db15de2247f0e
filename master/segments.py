"""Reads the master's binlog once for all streams: the binlog is cut into segments of whole
transactions, keyed by start position and cached (LRU, bounded in bytes). Streams at the same
position share one segment, so each event is split, checked and grouped once, and the decoded
fields cached on its Event are shared by every slave's filter."""

from __future__ import annotations

import os
import struct
import threading
from array import array
import uuid as uuidlib
from collections import OrderedDict
from itertools import accumulate, chain, compress
from operator import itemgetter, sub
from dataclasses import dataclass
from pathlib import Path

from dumpfilter.codec import Event, EventType, Transaction, TransactionGrouper
from dumpfilter.codec.constants import GTID_EVENT_TYPES, LOG_EVENT_ARTIFICIAL_F, MAGIC
from dumpfilter.codec.event import query_text
from dumpfilter.errors import BinlogError, PositionError, TruncatedBinlogError
from dumpfilter.codec.scanner import (F_FAST, F_HAS_FDE, F_MARIADB_GTID, F_MYSQL_GTID, F_ROTATE_END,
                                  F_TAGGED_GTID,
                                  Scanner, unit_events)
from dumpfilter.codec.scanner import statements as core_statements
from dumpfilter.codec.scanner import Plan, partial_unit, unit_rows
from dumpfilter.codec.transactions import CONTROL, STATEMENT, TRANSACTION
from dumpfilter.rules.transaction_filter import lone_statement
from dumpfilter.binlogs import TailingReader, binlog_paths
from dumpfilter.binlogs.tail import confined_rotate_target

Pos = tuple[str, int]


class _AtEnd(Exception):
    """Raised from the TailingReader's sleep hook: the reader reached what is written so far."""


def _at_end(_seconds: float) -> None:
    raise _AtEnd


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

    def __init__(self, txn: Transaction | None, file: str, end: Pos, results: dict | None = None):
        self._txn = txn
        self.file = file
        self.end = end
        self.results = {} if results is None else results
        self.events = len(txn.events) if txn is not None else 0
        self.nbytes = txn.size if txn is not None else 0
        self.raw: bytes | None = None      # fast units only, from here on
        self.pos = 0
        self.fmt = None
        self.tables: tuple = ()            # (db, table) of each Table_map, in order (fast units)
        self._statements: tuple | None = None  # see `statements`
        self.gtid: tuple | None = None     # ((domain, server_id), seq) of a MariaDB GTID
        self.mysql_gtid: tuple | None = None  # (source uuid, tag, gno) of a MySQL GTID
        self.gtid_end = 0                  # size of the GTID event
        self.is_fast = False
        self._kind, self._complete = (txn.kind, txn.complete) if txn is not None else (TRANSACTION, True)

    @classmethod
    def fast(cls, raw: bytes, file: str, pos: int, fmt, events: int, tables: tuple, gtid: tuple | None,
             gtid_end: int, mysql_gtid: tuple | None = None) -> "Unit":
        unit = cls.__new__(cls)
        unit._txn = None
        unit.file, unit.end, unit.results = file, (file, pos + len(raw)), {}
        unit.raw, unit.pos, unit.fmt, unit.events, unit.nbytes = raw, pos, fmt, events, len(raw)
        unit.tables, unit._statements, unit.gtid, unit.gtid_end = tables, _UNSET, gtid, gtid_end
        unit.mysql_gtid = mysql_gtid
        unit.is_fast, unit._kind, unit._complete = True, TRANSACTION, True
        return unit

    @classmethod
    def lazy(cls, raw: bytes, file: str, pos: int, fmt, events: int, kind: str, complete: bool, end: Pos) -> "Unit":
        """A unit that is not fast: its raw bytes, its Events made on first use."""
        unit = cls.__new__(cls)
        unit._txn = None
        unit.file, unit.end, unit.results = file, end, {}
        unit.raw, unit.pos, unit.fmt, unit.events, unit.nbytes = raw, pos, fmt, events, len(raw)
        unit.tables, unit._statements, unit.gtid, unit.gtid_end, unit.mysql_gtid = (), None, None, 0, None
        unit.is_fast, unit._kind, unit._complete = False, kind, complete
        return unit

    @property
    def statements(self) -> tuple | None:
        """(end offset in raw, events, index in `tables` after its Table_maps) per statement
        (ended by STMT_END_F), or None when the unit does not cut into whole statements (rows
        of an earlier statement's Table_map, or a statement left open). Fast units only; found
        on first use, as only units that some slave keeps in part need it."""
        statements = self._statements
        if statements is _UNSET:
            found = core_statements(self.raw, self.gtid_end, len(self.raw))
            statements = self._statements = tuple(found) if found is not None else None
        return statements

    @property
    def parses(self) -> dict:
        """(sql, default db) -> StatementInfo: the unit's statements as parsed for the first rule
        group that decided them, reused by the others (each event parsed once, whatever the
        number of slaves); it lives as long as the unit stays in the segment cache."""
        try:
            return self._parses
        except AttributeError:
            parses = self._parses = {}
            return parses

    def lone_text(self) -> tuple[str, str] | None:
        """(default database, SQL) of a complete unit made of a GTID and one QUERY event (DDL,
        MariaDB's standalone groups), read from its bytes without making Events; else None."""
        raw = self.raw
        if raw is None:
            txn = self.txn
            query = lone_statement(txn.events) if txn.kind != CONTROL and txn.complete else None
            return (query.db, query.sql) if query is not None else None
        if self.events != 2 or not self._complete or self._kind == CONTROL or raw[4] not in GTID_EVENT_TYPES:
            return None
        return query_text(raw, _U32.unpack_from(raw, 9)[0], len(raw), self.fmt)

    @property
    def txn(self) -> Transaction:
        txn = self._txn
        if txn is None:
            events, _ = unit_events(self.raw, self.pos, self.fmt)
            txn = self._txn = Transaction(self._kind, events, self._complete)
        return txn

    @property
    def size(self) -> int:
        return self.nbytes


_UNSET = object()
_U32 = struct.Struct("<I")


@dataclass(eq=False)
class Segment:
    start: Pos
    units: "list[Unit] | LazyUnits"
    end: Pos
    at_end: bool          # reading stopped at the current end of the binlog
    error: BinlogError | None = None  # a corrupt event right after `end`
    index: "SegmentIndex | None" = None

    @property
    def size(self) -> int:
        index = self.index
        return index.cum[-1] if index is not None else sum(u.nbytes for u in self.units)


class SegmentIndex:
    """Per-segment arrays the streams' run loop works from, built once: prefix sums of unit
    sizes and event counts, which units are fast, their GTIDs and their Table_map occurrences;
    and, per flag-word generation, each unit's keep-all mask (AND of its tables' words) and
    keep-any mask (OR): one computation per unit for every slave."""

    def __init__(self, units: list[Unit]):
        """From Unit objects (the reference reader)."""
        self._set(sizes=[u.nbytes for u in units], events=[u.events for u in units],
                  ntables=[len(u.tables) for u in units], occ=list(chain.from_iterable([u.tables for u in units])),
                  fast=[u.is_fast for u in units], gtids=[u.gtid for u in units],
                  mysql=[u.mysql_gtid for u in units], tables=[u.tables for u in units])
        self.raws = [u.raw for u in units]
        self.parts = None
        self.plan = None        # the core's view of the segment (send walks, rows), scanned segments only

    @classmethod
    def from_columns(cls, cols: "_Columns") -> "SegmentIndex":
        index = cls.__new__(cls)
        index._set(sizes=cols.sizes, events=cols.events, ntables=cols.ntables, occ=cols.occ, fast=cols.fast,
                   gtids=cols.gtids, mysql=cols.mysql, tables=cols.tables)
        index.raws = None
        index.parts = (cols.part_of, cols.parts, cols.starts, cols.ends)
        index._cols = cols
        index.plan = cols.plan
        return index

    @property
    def names(self) -> list | None:
        """(db, table) by the scanner's name id (the ids rows and Plan answers are indexed by)."""
        return self._cols.names if self._cols is not None else None

    @property
    def rows_input(self) -> tuple[bytes, bytes, list] | None:
        """(tids, bounds, names) for the compiled per-slave rows and partial units; made on first
        use (a stream with the core's Plan only needs the names)."""
        made = self._rows_input
        if made is None and self._cols is not None:
            cols = self._cols
            made = self._rows_input = (cols.tids.tobytes(), cols.bounds().tobytes(), cols.names)
        return made

    def _set(self, *, sizes, events, ntables, occ, fast, gtids, mysql, tables) -> None:
        self.cum = [0, *accumulate(sizes)]
        self.evc = [0, *accumulate(events)]
        self.toff = [0, *accumulate(ntables)]
        self.occ = occ
        self.fast = fast
        self.gtids = gtids
        self.tables = tables  # per unit: its Table_maps' (db, table), in order (fast units)
        # Whether the fast units' GTIDs share one (domain, server_id): then a run's last GTID is
        # all a stream's GTID tracker needs (it keeps the last seq_no per (domain, server_id)).
        if isinstance(gtids, _GtidColumn):
            self.one_gtid_source = gtids.source_count() <= 1
        else:
            self.one_gtid_source = len(set(map(itemgetter(0), filter(None, gtids)))) <= 1
        self.mysql_gtids = mysql if mysql.count(None) != len(mysql) else None
        self.masks: tuple | None = None   # (generation, keep_all, keep_any)
        self.lock = threading.Lock()
        self._rows_input: tuple | None = None
        self._cols: _Columns | None = None

    def rows_for(self, keep_of) -> tuple[bytes, bytes] | None:
        """One slave's answer byte per unit (0 skip, 1 partial, 2 keep, 3 not fast), computed by
        the core from `keep_of(names)`, the slave's keep byte per table name of the segment (the
        flag words), and those bytes (for `partial`); None without columns."""
        names = self.names
        if names is None:
            return None
        keep = keep_of(names)
        if self.plan is not None:
            return self.plan.rows(keep), keep
        tids, bounds, _ = self.rows_input
        return unit_rows(tids, bounds, keep), keep

    def partial(self, k: int, keep: bytes) -> tuple[bytes, int] | None:
        """What a slave with these answers (`rows_for`) keeps of fast unit k when its tables are
        partly kept and every statement gets one answer: the GTID, the kept statements whole
        and the XID, as the master sends them (bytes, events); built by the core. None for the
        reference path: a MySQL unit (its GTID's transaction_length must be rewritten), a
        statement whose tables are partly kept, a unit not cut into whole statements."""
        if self.rows_input is None or self.gtids[k] is None:
            return None
        part_of, parts, _, _ = self.parts
        part = parts[part_of[k]]
        rec = part.records[k - part.first]
        tids, bounds, _ = self.rows_input
        return partial_unit(part.buf, rec.start, rec.end, rec.gtid_size, rec.events, tids, bounds, k, keep)

    def run_bytes(self, i: int, j: int) -> bytes:
        """The bytes of units i..j-1: one slice of the read buffer for a run within one read."""
        if self.raws is not None:
            return b"".join(self.raws[i:j])
        part_of, parts, starts, ends = self.parts
        if part_of[i] == part_of[j - 1]:
            return parts[part_of[i]].buf[starts[i] : ends[j - 1]]
        out, k = [], i
        while k < j:
            p = part_of[k]
            last = k
            while last + 1 < j and part_of[last + 1] == p:
                last += 1
            out.append(parts[p].buf[starts[k] : ends[last]])
            k = last + 1
        return b"".join(out)

    def masks_for(self, units: list[Unit], words) -> tuple[list[int], list[int]]:
        masks = self.masks
        gen = words.generation
        if masks is not None and masks[0] == gen:
            return masks[1], masks[2]
        get = words.get
        full = -1
        keep_all, keep_any = [], []
        cache: dict = {}
        for tables, fast in zip(self.tables, self.fast):
            if not fast:
                keep_all.append(0)
                keep_any.append(0)
                continue
            if not tables:
                keep_all.append(full)
                keep_any.append(0)
                continue
            both = cache.get(tables)
            if both is None:
                k, a = full, 0
                for db, table in tables:
                    w = get(db, table)
                    k &= w
                    a |= w
                both = cache[tables] = (k, a)
            keep_all.append(both[0])
            keep_any.append(both[1])
        self.masks = (gen, keep_all, keep_any)
        return keep_all, keep_any


def unit_end(file: str, last: Event) -> Pos:
    """The master position after an event. After a real Rotate the slave continues in the next
    file at the Rotate's position, as MySQL's receiver does."""
    if last.type_code == EventType.ROTATE and not last.flags & LOG_EVENT_ARTIFICIAL_F:
        pos, name = last.rotate
        return name, pos
    return file, last.end_pos


class SegmentCache:
    """Shared, bounded cache of segments. `get(pos)` reads the segment at `pos` once even when
    several streams ask at the same moment; the others wait for it."""

    def __init__(self, directory: str | Path, *, segment_bytes: int = 1 << 20, cache_bytes: int = 8 << 20,
                 verify_checksums: bool = True, fast: bool = True):
        self.directory = Path(directory)
        self.segment_bytes = segment_bytes
        self.cache_bytes = cache_bytes
        self.verify_checksums = verify_checksums
        self.fast = fast
        self._cache: OrderedDict[Pos, Segment] = OrderedDict()
        self._cached_bytes = 0
        self._inflight: dict[Pos, threading.Event] = {}
        self._lock = threading.Lock()
        self.reads = 0   # segments read from disk
        self.hits = 0    # segments served from the cache

    def first_file(self) -> str:
        paths = binlog_paths(self.directory)
        if not paths:
            raise PositionError(f"no binlog files in {self.directory}")
        return paths[0].name

    def end(self) -> Pos:
        """The current end of the binlog: the last file and its size."""
        paths = binlog_paths(self.directory)
        if not paths:
            raise PositionError(f"no binlog files in {self.directory}")
        last = paths[-1]
        return last.name, last.stat().st_size

    def bytes_between(self, start: Pos, end: Pos) -> int:
        """Master binlog bytes from `start` to `end` (for how far behind a slave is)."""
        names = [p.name for p in binlog_paths(self.directory)]
        if start[0] not in names or end[0] not in names:
            return 0
        i, j = names.index(start[0]), names.index(end[0])
        if i == j:
            return max(0, end[1] - start[1])
        total = max(0, (self.directory / start[0]).stat().st_size - start[1])
        for name in names[i + 1 : j]:
            total += (self.directory / name).stat().st_size - 4
        return total + max(0, end[1] - 4)

    def get(self, start: Pos) -> Segment:
        while True:
            with self._lock:
                seg = self._cache.get(start)
                if seg is not None:
                    self._cache.move_to_end(start)
                    self.hits += 1
                    return seg
                waiter = self._inflight.get(start)
                if waiter is None:
                    waiter = self._inflight[start] = threading.Event()
                    break
            waiter.wait()  # another stream is reading this segment; then look again
        try:
            seg = self._read(start)
            if seg.units:
                self._store(seg)
            return seg
        finally:
            with self._lock:
                del self._inflight[start]
            waiter.set()

    def _store(self, seg: Segment) -> None:
        with self._lock:
            self.reads += 1
            self._cache[seg.start] = seg
            self._cached_bytes += seg.size
            while self._cached_bytes > self.cache_bytes and len(self._cache) > 1:
                _, old = self._cache.popitem(last=False)
                self._cached_bytes -= old.size

    def _read(self, start: Pos) -> Segment:
        """Whole units from `start` until about `segment_bytes`, the end of what is written, or a
        corrupt event. A unit still being written at the end is left for the next read."""
        file, pos = start
        if not (self.directory / file).exists():
            if file in self._index_names() or self._later_file_exists(file):
                raise PositionError(f"binlog file '{file}' is not in {self.directory} (purged)")
            # A Rotate can name a file the server has not created yet.
            return Segment(start, [], start, at_end=True)
        if pos <= 4 and self.not_yet_indexed(file):
            return Segment(start, [], start, at_end=True)
        if self.fast:
            return SegmentReader(self, start).read()
        seg = self._read_reference(start)
        seg.index = SegmentIndex(seg.units)
        return seg

    def _read_reference(self, start: Pos) -> Segment:
        """The reference reader: an Event per event through TailingReader and TransactionGrouper."""
        file, pos = start
        reader = TailingReader(self.directory, file, pos, follow=True, sleep=_at_end,
                               verify_checksums=self.verify_checksums)
        grouper = TransactionGrouper()
        units: list[Unit] = []
        size = 0
        end = start
        at_end = False
        error = None
        try:
            for name, event in reader:
                for txn in grouper.push(event):
                    units.append(Unit(txn, name, unit_end(name, txn.events[-1])))
                    end = units[-1].end
                    size += txn.size
                if size >= self.segment_bytes and grouper.current is None:
                    break
        except _AtEnd:
            at_end = True
        except PositionError:
            if units:  # a later file vanished under us: serve what we have
                at_end = True
            else:
                raise
        except BinlogError as exc:
            if not units:
                raise
            error = exc
        return Segment(start, units, end, at_end, error)

    def _index_names(self) -> list[str]:
        try:
            return [p.name for p in binlog_paths(self.directory)]
        except BinlogError:
            return []

    def not_yet_indexed(self, file: str) -> bool:
        """MariaDB creates the next binlog and writes its FDE before it adds it to the index
        (MYSQL_BIN_LOG::open): a file past the index's last one is not written yet for a reader
        that followed a Rotate there. Names come only from the index, so the reader waits for it
        rather than failing the stream with 1236 "purged or never written"."""
        names = self._index_names()
        return bool(names) and file not in names and file > names[-1]

    def _later_file_exists(self, file: str) -> bool:
        names = self._index_names()
        return bool(names) and names[-1] > file


# ---------------------------------------------------------------------------------------------
# the one-pass reader

_FDE = int(EventType.FORMAT_DESCRIPTION)
_I64 = struct.Struct("<q")
_TYPE_SIZE = struct.Struct("<4xB4xI")  # type_code, event_size of a common header
_NO_BOUNDS = (0xFFFFFFFF, 0xFFFFFFFF)  # a unit not fast has no Table_map range
assert max(F_FAST, F_HAS_FDE, F_MARIADB_GTID, F_MYSQL_GTID, F_TAGGED_GTID) < 256  # all in the flags' low byte
_FAST_BIT = bytes(flags & F_FAST for flags in range(256))
_MARIADB_BIT = bytes(flags & F_MARIADB_GTID for flags in range(256))
_FDE_BIT = bytes(int(bool(flags & F_HAS_FDE)) for flags in range(256))
_MYSQL_BITS = bytes(int(bool(flags & (F_MYSQL_GTID | F_TAGGED_GTID))) for flags in range(256))
_U64 = struct.Struct("<Q")
CHUNK = 1 << 20
_KINDS = {"control": CONTROL, "transaction": TRANSACTION, "statement": STATEMENT}


class _Stop(Exception):
    """The segment is full."""


class _Part:
    """One scan's worth of a segment's units: the read buffer they lie in, its file and file
    offset, the scanner's packed records, where the part's units start in the segment, and the
    format in force (per unit only where an FDE changed it inside the part)."""

    __slots__ = ("buf", "file", "base", "records", "first", "fmt", "fmts")

    def __init__(self, buf: bytes, file: str, base: int, records, first: int, fmt, fmts: list | None):
        self.buf, self.file, self.base, self.records, self.first = buf, file, base, records, first
        self.fmt, self.fmts = fmt, fmts


class _Columns:
    """A segment's units as parallel lists (what SegmentIndex and LazyUnits are built from):
    per unit only what every stream's run loop reads (sizes, events, fast, GTIDs, tables); the
    rest stays in the scanner's packed records until a Unit is made."""

    def __init__(self):
        self.parts: list[_Part] = []
        self.part_of: list[int] = []
        self.starts: list[int] = []
        self.ends: list[int] = []
        self.sizes: list[int] = []
        self.events: list[int] = []
        self.ntables: list[int] = []
        self.toff: list[int] = [0]  # per unit, where its tables start in occ
        self.occ: list = []
        self.fast: list[bool] = []
        self.gtids = _GtidColumn()
        self.mysql: list = []
        self.made: dict[int, Unit] = {}  # units made eagerly (holding an FDE)
        self.checksum_len = 0
        self.tids = array("I")    # name ids of the fast units' Table_maps, in order
        self._bounds: list = []   # per scan: (its units' tables lo, hi, fast flags, offset into tids)
        self.names: list = []     # (db, table) by name id
        self.plan = Plan()        # the same units for the core's per-stream send walk

    def bounds(self) -> array:
        """Per unit (lo, hi) into tids; (0xFFFFFFFF, 0xFFFFFFFF) for a unit not fast. Made when a
        stream first needs it (a partial unit, or rows without the core's Plan)."""
        bounds = array("I")
        for los, his, fast, off in self._bounds:
            bounds.extend(chain.from_iterable([(lo + off, hi + off) if f else _NO_BOUNDS
                                               for f, lo, hi in zip(fast, los, his)]))
        return bounds

    @property
    def tables(self) -> "_UnitTables":
        return _UnitTables(self)

    def unit(self, k: int, checksum_len: int | None = None) -> Unit:
        made = self.made.get(k)
        if made is not None:
            return made
        part = self.parts[self.part_of[k]]
        rec = part.records[k - part.first]
        raw = part.buf[rec.start : rec.end]
        pos = part.base + rec.start
        name = part.file
        fmt = part.fmt if part.fmts is None else part.fmts[k - part.first]
        if rec.fast:
            return Unit.fast(raw, name, pos, fmt, rec.events, tuple(self.occ[self.toff[k] : self.toff[k + 1]]),
                             self.gtids[k], rec.gtid_size, self.mysql[k])
        end_pos = (name, pos + len(raw))
        if rec.flags & F_ROTATE_END:
            at = rec.last - rec.start
            crc = self.checksum_len if checksum_len is None else checksum_len
            target = raw[at + 27 : len(raw) - crc].decode("utf-8", "surrogateescape")
            end_pos = (confined_rotate_target(target, name, pos + at), _U64.unpack_from(raw, at + 19)[0])
        return Unit.lazy(raw, name, pos, fmt, rec.events, _KINDS[rec.kind], rec.complete, end_pos)


class _GtidColumn:
    """Per unit, its MariaDB GTID ((domain, server_id), seq_no), else None; kept as the scanner's
    words and made when a stream reads one (most are never read: a run's tracker update needs
    only its last GTID when the segment has one GTID source)."""

    __slots__ = ("flags", "sources", "seqs")

    def __init__(self):
        self.flags = bytearray()  # the low byte of each unit's flags
        self.sources: list[int] = []  # domain | server_id << 32
        self.seqs: list[int] = []

    def extend(self, flags: bytes, sources: list[int], seqs: list[int]) -> None:
        self.flags.extend(flags)
        self.sources.extend(sources)
        self.seqs.extend(seqs)

    def __len__(self) -> int:
        return len(self.flags)

    def __getitem__(self, k):
        if isinstance(k, slice):
            return [self[i] for i in range(*k.indices(len(self.flags)))]
        if not self.flags[k] & F_MARIADB_GTID:
            return None
        source = self.sources[k]
        return (source & 0xFFFFFFFF, source >> 32), self.seqs[k]

    def __iter__(self):
        return (self[k] for k in range(len(self.flags)))

    def __eq__(self, other) -> bool:
        return list(self) == list(other)

    def source_count(self) -> int:
        """How many distinct (domain, server_id) the GTIDs have."""
        return len(set(compress(self.sources, self.flags.translate(_MARIADB_BIT))))


class _UnitTables:
    """Per unit, its Table_maps' (db, table) (fast units; () for the others), from occ."""

    def __init__(self, cols: _Columns):
        self._cols = cols

    def __iter__(self):
        occ, toff = self._cols.occ, self._cols.toff
        return (tuple(occ[a:b]) for a, b in zip(toff, toff[1:]))


class LazyUnits:
    """A segment's units, each made on first use and then shared by every stream (their
    per-rule-group answers live on them)."""

    __slots__ = ("_cols", "_units", "_lock")

    def __init__(self, cols: _Columns):
        self._cols = cols
        self._units: list[Unit | None] = [None] * len(cols.sizes)
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._units)

    def __bool__(self) -> bool:
        return bool(self._units)

    def __getitem__(self, k: int) -> Unit:
        unit = self._units[k]
        if unit is None:
            with self._lock:
                unit = self._units[k]
                if unit is None:
                    unit = self._units[k] = self._cols.unit(k if k >= 0 else len(self._units) + k)
        return unit

    def __iter__(self):
        return (self[k] for k in range(len(self._units)))

    def end_of(self, k: int) -> Pos:
        """Unit k's end position, without making the Unit when it is a fast one."""
        unit = self._units[k]
        if unit is not None:
            return unit.end
        cols = self._cols
        if cols.fast[k]:
            part = cols.parts[cols.part_of[k]]
            return part.file, part.base + cols.ends[k]
        return self[k].end


class SegmentReader:
    """Reads one segment in a single pass of the compiled scanner (`dumpfilter.codec.scanner`): it
    hops from header to header, checks CRCs, groups the units exactly as TransactionGrouper does
    and marks the common ROW transaction (`GTID [BEGIN] {Annotate_rows|Rows_query|Table_map|
    Rows}* XID`, every rows event after its own Table_map) as fast, with its tables and GTID.
    Python sees one record per unit, never an event: every Unit is its raw bytes plus what a
    decision needs, and its Events are made only when a slave's answer needs TransactionFilter.
    Files, rotation, the end of what is written and errors follow TailingReader."""

    def __init__(self, cache: SegmentCache, start: Pos):
        self.cache = cache
        self.start = start
        self.cols = _Columns()
        self.size = 0
        self.end = start
        self.scanner = Scanner(verify_checksums=cache.verify_checksums)
        self.sources: dict[bytes, str] = {}  # MySQL GTID source uuids, decoded once

    def read(self) -> Segment:
        cache, start = self.cache, self.start
        file, pos = start
        at_end = False
        error = None
        try:
            # Validates the start file and position exactly as the reference reader does.
            opener = TailingReader(cache.directory, file, pos, follow=False, verify_checksums=cache.verify_checksums)
            name = file
            while True:
                nxt = self._file(opener, name, pos)
                if nxt is None:
                    at_end = True
                    break
                if not (cache.directory / nxt).exists() or cache.not_yet_indexed(nxt):
                    at_end = True  # a Rotate names a file the server has not created (or indexed) yet
                    break
                name, pos = nxt, 4
        except _Stop:
            pass
        except PositionError:
            if self.cols.sizes:
                at_end = True
            else:
                raise
        except BinlogError as exc:
            if not self.cols.sizes:
                raise
            error = exc
        cols = self.cols
        cols.checksum_len = self.scanner.checksum_len
        seg = Segment(start, LazyUnits(cols), self.end, at_end, error)
        seg.index = SegmentIndex.from_columns(cols)
        return seg

    def _file(self, opener: TailingReader, name: str, start: int) -> str | None:
        """Read one file from `start`; returns the file to continue with, or None at the end of
        what is written. Raises _Stop when the segment is full."""
        cache = self.cache
        path = cache.directory / name
        scanner = self.scanner
        scanner.path = str(path)
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if start > size:
                raise PositionError(f"position {start} is past the end of '{name}' ({size} bytes)")
            splitter = opener._open_at(f, path, start)  # checks the start position
            fmt = splitter.fmt
            if fmt is not None:
                scanner.load_format(fmt.raw)
            if start <= 4:
                magic = f.read(4)
                if len(magic) < 4:
                    return None  # the server has not written the magic yet
                if magic != MAGIC:
                    raise BinlogError(f"bad magic {magic.hex()} (expected fe62696e): not a binlog file",
                                      path=str(path), offset=0)
                start = 4
            rotated_to = None
            buf, base = b"", start  # base: the file offset of buf[0]
            chunk = max(CHUNK, cache.segment_bytes + (256 << 10))
            while True:
                data = f.read(chunk)
                at_eof = False
                if not data:
                    if rotated_to:
                        return rotated_to
                    newer = opener._next_file(name)
                    if newer is None or not buf:
                        return newer if newer is not None and not buf else None
                    # The file ended (a newer one exists) inside a unit: a crash cut it. The
                    # whole events left come out as an incomplete unit; a partial event is an error.
                    at_eof = True
                buf = buf + data if buf else data
                scan = scanner.units(buf, 0, base, cache.segment_bytes - self.size, at_eof)
                fmt = self._add_units(scan, buf, base, name, fmt)
                if scan.last_rotate >= 0:
                    at = scan.last_rotate
                    end = at + _TYPE_SIZE.unpack_from(buf, at)[1] - scanner.checksum_len
                    rotated_to = confined_rotate_target(buf[at + 27 : end].decode("utf-8", "surrogateescape"),
                                                        str(path), base + at)
                if scan.error is not None:
                    raise scan.error
                buf, base = buf[scan.stop :], base + scan.stop
                if self.size >= cache.segment_bytes:
                    raise _Stop
                if at_eof:
                    if buf:
                        left = len(buf)
                        raise TruncatedBinlogError(f"file ends inside an event ({left} bytes left)",
                                                   path=str(path), offset=base)
                    return rotated_to or opener._next_file(name)

    def _add_units(self, scan, buf: bytes, base: int, name: str, fmt):
        """The scanner's records as the columns every stream reads (one list comprehension per
        field, no object per unit); Units are made only when a stream asks for one. Returns the
        format in force after them."""
        n = len(scan.units)
        if not n:
            return fmt
        cols = self.cols
        cols.plan.add(self.scanner.core, buf, name, base)
        # The record (see scanner.UnitRecord) read column-wise through byte and u32 views:
        # word 2 = events (u32 4) | kind << 32 | flags << 40 (the flags' low byte is byte 21, and
        # every flag read here is in it); word 4 = tables lo (u32 8) | hi (u32 9).
        words = scan.units.words
        u8 = words.cast("B")
        u32 = u8.cast("I")
        starts, ends = words[0::8].tolist(), words[1::8].tolist()
        flags = bytes(u8[21::64])
        fast = flags.translate(_FAST_BIT)  # 1 per fast unit, else 0
        # Which rare flags any unit has: the bytes searched in C, not a Python pass per unit.
        any_flags = F_HAS_FDE if 1 in flags.translate(_FDE_BIT) else 0
        if 1 in flags.translate(_MYSQL_BITS):
            any_flags |= F_MYSQL_GTID
        names = self.scanner.names
        tables = scan.tables
        off = len(cols.tids)
        first = len(cols.sizes)
        cols.tids.extend(tables)
        # A unit's Table_maps are [lo, hi) of the scan's tables (0, 0 for a unit not fast).
        los, his = u32[8::16].tolist(), u32[9::16].tolist()
        cols._bounds.append((los, his, fast, off))
        ntables = list(map(sub, his, los))
        cols.names = names
        cols.occ.extend([names[i] for i in tables])
        cols.toff.extend(accumulate(ntables, initial=cols.toff[-1]))
        del cols.toff[first + 1]  # accumulate's initial repeats the previous end
        cols.ntables.extend(ntables)
        part = len(cols.parts)
        cols.part_of.extend([part] * n)
        cols.starts.extend(starts)
        cols.ends.extend(ends)
        cols.sizes.extend([e - b for b, e in zip(starts, ends)])
        cols.events.extend(u32[4::16].tolist())
        cols.fast.extend(fast)
        # MariaDB GTIDs stay in the record words until a stream reads one (_GtidColumn).
        cols.gtids.extend(flags, words[6::8].tolist(), words[5::8].tolist())
        mysql: list = [None] * n
        if any_flags & (F_MYSQL_GTID | F_TAGGED_GTID):
            sources = self.sources
            for k, f in enumerate(flags):  # every unit's: statement units join the runs too
                if f & F_MARIADB_GTID:
                    continue
                if f & F_MYSQL_GTID:
                    sid = buf[starts[k] + 20 : starts[k] + 36]
                    source = sources.get(sid)
                    if source is None:
                        source = sources[sid] = str(uuidlib.UUID(bytes=sid))
                    mysql[k] = (source, "", _I64.unpack_from(buf, starts[k] + 36)[0])
                elif f & F_TAGGED_GTID:
                    rec = scan.units[k]
                    info = Event(buf[starts[k] : starts[k] + rec.gtid_size], base + starts[k], fmt).gtid_info
                    mysql[k] = (info.source, info.tag, info.gno)
        cols.mysql.extend(mysql)
        start_fmt, fmts = fmt, None
        if any_flags & F_HAS_FDE:
            fmts = []
            for k, f in enumerate(flags):
                fmts.append(fmt)
                if f & F_HAS_FDE:
                    unit = self._unit_with_fde(scan.units[k], buf[starts[k] : ends[k]], base + starts[k], name, fmt)
                    fmt = unit.txn.events[-1].fmt if unit.txn.events else fmt
                    cols.made[first + k] = unit
        cols.parts.append(_Part(buf, name, base, scan.units, first, start_fmt, fmts))
        self.size += sum(cols.sizes[first:])
        self.end = cols.unit(len(cols.sizes) - 1, self.scanner.checksum_len).end
        return fmt

    def _unit_with_fde(self, rec, raw: bytes, pos: int, name: str, fmt) -> Unit:
        """A unit holding a Format_description event: its Events are made now, each with the
        format in force where it stands."""
        events, fmt = unit_events(raw, pos, fmt, path=self.scanner.path)
        txn = Transaction(_KINDS[rec.kind], events, rec.complete)
        return Unit(txn, name, unit_end(name, events[-1]))
