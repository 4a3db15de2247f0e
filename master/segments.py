"""Reads the master's binlog once for all streams: the binlog is cut into segments of whole
transactions, keyed by start position and cached (LRU, bounded in bytes). Streams at the same
position share one segment, so each event is split, checked and grouped once, and the decoded
fields cached on its Event are shared by every slave's filter."""

from __future__ import annotations

import os
import struct
import threading
import uuid as uuidlib
import zlib
from collections import OrderedDict
from itertools import accumulate, chain
from dataclasses import dataclass
from pathlib import Path

from binlog_codec import Event, EventType, Transaction, TransactionGrouper
from binlog_codec.constants import (KNOWN_TYPES, LOG_EVENT_ARTIFICIAL_F, MARIADB_FL_STANDALONE,
                                    ROWS_EVENT_TYPES, type_name)
from binlog_codec.errors import BinlogError, ChecksumError, PositionError
from binlog_codec.event import HEADER
from binlog_codec.reader import MAX_EVENT_SIZE
from binlog_codec.transactions import TRANSACTION, is_begin_event
from binlog_files import TailingReader, binlog_paths

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
                 "gtid_end", "nbytes", "mysql_gtid")

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

    @classmethod
    def fast(cls, raw: bytes, file: str, pos: int, fmt, events: int, tables: tuple, gtid: tuple | None,
             gtid_end: int, mysql_gtid: tuple | None = None) -> "Unit":
        unit = cls.__new__(cls)
        unit._txn = None
        unit.file, unit.end, unit.results = file, (file, pos + len(raw)), {}
        unit.raw, unit.pos, unit.fmt, unit.events, unit.nbytes = raw, pos, fmt, events, len(raw)
        unit.tables, unit._statements, unit.gtid, unit.gtid_end = tables, _UNSET, gtid, gtid_end
        unit.mysql_gtid = mysql_gtid
        return unit

    @property
    def statements(self) -> tuple | None:
        """(end offset in raw, events, index in `tables` after its Table_maps) per statement
        (ended by STMT_END_F), or None when the unit does not cut into whole statements (rows
        of an earlier statement's Table_map, or a statement left open). Fast units only; found
        on first use, as only units that some slave keeps in part need it."""
        statements = self._statements
        if statements is _UNSET:
            statements = self._statements = _statements_of(self.raw, self.gtid_end)
        return statements

    @property
    def is_fast(self) -> bool:
        return self.raw is not None

    @property
    def txn(self) -> Transaction:
        txn = self._txn
        if txn is None:
            raw, pos, fmt = self.raw, self.pos, self.fmt
            events, at, total = [], 0, len(raw)
            unpack = HEADER.unpack_from
            while at < total:
                header = unpack(raw, at)
                size = header[3]
                events.append(Event(raw[at : at + size], pos + at, fmt, header))
                at += size
            txn = self._txn = Transaction(TRANSACTION, events)
        return txn

    @property
    def size(self) -> int:
        return self.nbytes


_UNSET = object()


def _statements_of(raw: bytes, at: int) -> tuple | None:
    """Unit.statements of a fast unit's bytes, the GTID event ending at `at`."""
    statements = []
    n = sn = 1  # events so far, and at the end of the last statement (the GTID is event 1)
    tables = 0
    ids: list[bytes] = []
    sids: list[bytes] = []
    total = len(raw)
    unpack = _TYPE_SIZE.unpack_from
    rows = _ROWS
    whole = True
    while at < total:
        t, size = unpack(raw, at)
        nxt = at + size
        if t == _XID:
            return tuple(statements) if whole and n == sn else None
        n += 1
        if t == _TABLE_MAP:
            tables += 1
            tid = raw[at + 19 : at + 25]
            ids.append(tid)
            sids.append(tid)
        elif t in rows:
            tid = raw[at + 19 : at + 25]
            if tid not in sids:
                whole = False  # rows of a Table_map of an earlier statement
            if raw[at + 25] & 1:  # STMT_END_F: a statement ends here
                statements.append((nxt, n - sn, tables))
                sn = n
                sids = []
        at = nxt
    return None


@dataclass(eq=False)
class Segment:
    start: Pos
    units: list[Unit]
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
        self.cum = [0, *accumulate([u.nbytes for u in units])]
        self.evc = [0, *accumulate([u.events for u in units])]
        self.toff = [0, *accumulate([len(u.tables) for u in units])]
        self.occ = list(chain.from_iterable([u.tables for u in units]))
        self.fast = [u.raw is not None for u in units]
        self.gtids = [u.gtid for u in units]
        # Whether the fast units' GTIDs share one (domain, server_id): then a run's last GTID is
        # all a stream's GTID tracker needs (it keeps the last seq_no per (domain, server_id)).
        self.one_gtid_source = len({g[0] for g in self.gtids if g is not None}) <= 1
        mysql = [u.mysql_gtid for u in units]
        self.mysql_gtids = mysql if any(g is not None for g in mysql) else None
        self.raws = [u.raw for u in units]
        self.masks: tuple | None = None   # (generation, keep_all, keep_any)
        self.lock = threading.Lock()

    def masks_for(self, units: list[Unit], words) -> tuple[list[int], list[int]]:
        masks = self.masks
        gen = words.generation
        if masks is not None and masks[0] == gen:
            return masks[1], masks[2]
        get = words.get
        full = -1
        keep_all, keep_any = [], []
        cache: dict = {}
        for u, fast in zip(units, self.fast):
            if not fast:
                keep_all.append(0)
                keep_any.append(0)
                continue
            tables = u.tables
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
        if self.fast:
            seg = SegmentReader(self, start).read()
        else:
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

    def _later_file_exists(self, file: str) -> bool:
        names = self._index_names()
        return bool(names) and names[-1] > file


# ---------------------------------------------------------------------------------------------
# the one-pass reader

_ROWS = frozenset(int(t) for t in ROWS_EVENT_TYPES)
_ANNOTATIONS = frozenset({int(EventType.ANNOTATE_ROWS), int(EventType.ROWS_QUERY)})
_TABLE_MAP, _XID, _MARIADB_GTID = int(EventType.TABLE_MAP), int(EventType.XID), int(EventType.MARIADB_GTID)
_FDE, _ROTATE = int(EventType.FORMAT_DESCRIPTION), int(EventType.ROTATE)
_QUERY, _MYSQL_GTID, _GTID_TAGGED = int(EventType.QUERY), int(EventType.GTID), int(EventType.GTID_TAGGED)
_MYSQL_GTIDS = frozenset({_MYSQL_GTID, int(EventType.ANONYMOUS_GTID), _GTID_TAGGED})
_I64 = struct.Struct("<q")
_U32 = struct.Struct("<I")
# The CRC-32 of a message followed by its own little-endian CRC-32 is always this constant: an
# event's CRC is checked with one crc32() over the whole event.
CRC_RESIDUE = 0x2144DF1C
_TYPE_SIZE = struct.Struct("<4xB4xI")  # type_code, event_size of a common header
# server_id from the common header, then seq_no, domain_id, flags2 from a MariaDB GTID's body
_MARIADB_GTID_HEAD = struct.Struct("<5xI10xQIB")
CHUNK = 1 << 20


class _Stop(Exception):
    """The segment is full."""


class SegmentReader:
    """Reads one segment in a single pass over the raw bytes: hops from header to header, checks
    CRCs inline, and keeps the common ROW transaction (`MariaDB GTID {Annotate_rows|Rows_query|
    Table_map|Rows}* XID`, every rows event after its Table_map, every annotation followed by a
    Table_map) as one fast Unit: a slice of the read buffer plus its tables and GTID, no Event per
    event. At the first event such a unit does not allow, its events so far are handed, as
    Events, to the TransactionGrouper, which takes the unit on exactly as the reference reader
    (`SegmentCache._read_reference`: TailingReader + TransactionGrouper) does; so does every other
    event. Files, rotation, the end of what is written and errors follow TailingReader."""

    def __init__(self, cache: SegmentCache, start: Pos):
        self.cache = cache
        self.start = start
        self.grouper = TransactionGrouper()
        self.units: list[Unit] = []
        self.size = 0
        self.end = start
        self.names: dict[bytes, tuple[str, str]] = {}
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
                if not (cache.directory / nxt).exists():
                    at_end = True  # a Rotate names a file the server has not created yet
                    break
                name, pos = nxt, 4
        except _Stop:
            pass
        except PositionError:
            if self.units:
                at_end = True
            else:
                raise
        except BinlogError as exc:
            if not self.units:
                raise
            error = exc
        return Segment(start, self.units, self.end, at_end, error)

    def _add(self, unit: Unit, size: int) -> None:
        self.units.append(unit)
        self.end = unit.end
        self.size += size

    def _push(self, event: Event, name: str) -> None:
        for txn in self.grouper.push(event):
            unit = Unit(txn, name, unit_end(name, txn.events[-1]))
            self._add(unit, txn.size)
        if self.size >= self.cache.segment_bytes and self.grouper.current is None:
            raise _Stop

    def _file(self, opener: TailingReader, name: str, start: int) -> str | None:
        """Read one file from `start`; returns the file to continue with, or None at the end of
        what is written. Raises _Stop when the segment is full."""
        cache = self.cache
        path = cache.directory / name
        pathname = str(path)
        verify = cache.verify_checksums
        grouper = self.grouper
        names = self.names
        push = self._push
        add_unit = self.units.append
        unpack = HEADER.unpack_from
        type_size = _TYPE_SIZE.unpack_from
        crc32 = zlib.crc32
        rows_types, annotations, known = _ROWS, _ANNOTATIONS, KNOWN_TYPES
        TABLE_MAP, XID, MARIADB_GTID, FDE, ROTATE = _TABLE_MAP, _XID, _MARIADB_GTID, _FDE, _ROTATE
        QUERY, MYSQL_GTID, GTID_TAGGED, mysql_gtids = _QUERY, _MYSQL_GTID, _GTID_TAGGED, _MYSQL_GTIDS
        sources = self.sources
        segment_bytes = cache.segment_bytes
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if start > size:
                raise PositionError(f"position {start} is past the end of '{name}' ({size} bytes)")
            splitter = opener._open_at(f, path, start)
            fmt = splitter.fmt
            crc_len = fmt.checksum_len if verify and fmt is not None else 0
            fast_ok = _fast_format(fmt)
            rotated_to = None
            # Fast-unit state: `ustart` (-1: none) its offset in buf; `ann` an annotation waits
            # for its Table_map; `ids` the raw table ids its Table_maps declared.
            ustart = -1
            n = gtid_end = 0
            ann = False
            tables: list = []
            ids: list = []
            gtid = None
            mysql_gtid = None
            pending = -1  # a MySQL GTID event's offset while its BEGIN is awaited
            buf = b""
            base = 0

            def hand_over(stop: int) -> None:
                """The fast unit's events [ustart, stop) of buf go to the grouper as Events (or the
                MySQL GTID waiting for its BEGIN)."""
                nonlocal ustart, pending
                at = ustart if ustart >= 0 else pending
                ustart = pending = -1
                while at < stop:
                    header = unpack(buf, at)
                    push(Event(buf[at : at + header[3]], base + at, fmt, header), name)
                    at += header[3]

            chunk = max(CHUNK, segment_bytes + (256 << 10))
            while True:
                data = f.read(chunk)
                if not data:
                    if ustart >= 0 or pending >= 0:
                        hand_over(splitter._off)
                    if rotated_to:
                        return rotated_to
                    newer = opener._next_file(name)
                    if newer is not None and splitter.pending == 0:
                        return newer  # a Stop event, or a crash, ended this file without a Rotate
                    return None
                if ustart >= 0 or pending >= 0:  # a fast unit runs across the chunk boundary: reference path
                    hand_over(splitter._off)
                splitter.feed(data)
                if not splitter._consume_magic():
                    continue
                buf = splitter._buf
                off = splitter._off
                base = splitter._pos - off
                end = len(buf)
                try:
                    while True:
                        # No end-of-chunk test per event (a try costs nothing in 3.11): the unpack
                        # raises struct.error short of a header, `nxt > end` stops a partial event.
                        try:
                            t, esize = type_size(buf, off)
                        except struct.error:
                            break
                        nxt = off + esize
                        if nxt > end or esize < 19:
                            if esize < 19 or esize > MAX_EVENT_SIZE:
                                raise BinlogError(f"event size {esize} is impossible (type {t})", path=pathname,
                                                  offset=base + off)
                            break
                        if ustart >= 0:
                            # Inside a fast unit: only what a decision needs is looked at (the
                            # Table_maps' names and ids); statements are found later, if ever.
                            if crc_len and crc32(buf[off:nxt]) != CRC_RESIDUE:
                                raise ChecksumError(f"CRC32 mismatch in {type_name(t)} event", path=pathname,
                                                    offset=base + off)
                            if t in rows_types:
                                # Its Table_map must be in this unit, after any annotation.
                                if not ann and buf[off + 19 : off + 25] in ids:
                                    n += 1
                                    off = nxt
                                    continue
                            elif t == TABLE_MAP:
                                at = off + 27  # header, 6-byte table id, 2 flag bytes
                                tbl_at = at + 2 + buf[at]
                                key = buf[at : tbl_at + 1 + buf[tbl_at]]
                                names_of = names.get(key)
                                if names_of is None:
                                    _, db, table = Event(buf[off:nxt], 0, fmt).table_map
                                    names_of = names[key] = (db, table)
                                tables.append(names_of)
                                ids.append(buf[off + 19 : off + 25])
                                ann = False
                                n += 1
                                off = nxt
                                continue
                            elif t in annotations:
                                ann = True
                                n += 1
                                off = nxt
                                continue
                            elif t == XID and not ann:
                                raw = buf[ustart:nxt]
                                unit = Unit.fast(raw, name, base + ustart, fmt, n + 1, tuple(tables), gtid, gtid_end,
                                                 mysql_gtid)
                                ustart = -1
                                off = nxt
                                add_unit(unit)
                                self.end = unit.end
                                self.size += len(raw)
                                if self.size >= segment_bytes:
                                    raise _Stop
                                continue
                            # Anything else: the reference path takes the unit from here.
                            hand_over(off)
                        elif pending >= 0:
                            # After a MySQL GTID: a BEGIN makes the pair the start of a fast unit;
                            # anything else (DDL, a pre-8.0 statement) goes to the reference path.
                            if t == QUERY and is_begin_event(buf, off, esize, fmt):
                                if crc_len and crc32(buf[off:nxt]) != CRC_RESIDUE:
                                    raise ChecksumError(f"CRC32 mismatch in {type_name(t)} event", path=pathname,
                                                        offset=base + off)
                                ustart, pending = pending, -1
                                n = 2
                                ann = False
                                tables = []
                                ids = []
                                off = nxt
                                continue
                            hand_over(off)
                        elif t == MARIADB_GTID and fast_ok and grouper.current is None:
                            server_id, seq, domain, flags2 = _MARIADB_GTID_HEAD.unpack_from(buf, off)
                            if not flags2 & MARIADB_FL_STANDALONE:
                                if crc_len and crc32(buf[off:nxt]) != CRC_RESIDUE:
                                    raise ChecksumError(f"CRC32 mismatch in {type_name(t)} event", path=pathname,
                                                        offset=base + off)
                                gtid = ((domain, server_id), seq)
                                mysql_gtid = None
                                ustart = off
                                n = 1
                                gtid_end = esize
                                ann = False
                                tables = []
                                ids = []
                                off = nxt
                                continue
                        elif t in mysql_gtids and fast_ok and grouper.current is None:
                            if crc_len and crc32(buf[off:nxt]) != CRC_RESIDUE:
                                raise ChecksumError(f"CRC32 mismatch in {type_name(t)} event", path=pathname,
                                                    offset=base + off)
                            if t == MYSQL_GTID:  # flags, sid[16], gno
                                sid = buf[off + 20 : off + 36]
                                source = sources.get(sid)
                                if source is None:
                                    source = sources[sid] = str(uuidlib.UUID(bytes=sid))
                                mysql_gtid = (source, "", _I64.unpack_from(buf, off + 36)[0])
                            elif t == GTID_TAGGED:
                                info = Event(buf[off:nxt], base + off, fmt).gtid_info
                                mysql_gtid = (info.source, info.tag, info.gno)
                            else:  # Anonymous_GTID: nothing for the GTID state
                                mysql_gtid = None
                            gtid = None
                            pending = off
                            gtid_end = esize
                            off = nxt
                            continue
                        # The reference path, event by event (EventSplitter's checks).
                        header = unpack(buf, off)
                        event = Event(buf[off:nxt], base + off, fmt, header)
                        if t == FDE or t not in known or fmt is None:
                            splitter._pos = base + off
                            splitter._check(event)
                            fmt = splitter.fmt
                            crc_len = fmt.checksum_len if verify else 0
                            fast_ok = _fast_format(fmt)
                        elif crc_len and crc32(buf[off:nxt]) != CRC_RESIDUE:
                            raise ChecksumError(f"CRC32 mismatch in {type_name(t)} event", path=pathname,
                                                offset=base + off)
                        off = nxt
                        if t == ROTATE and not header[5] & LOG_EVENT_ARTIFICIAL_F:
                            rotated_to = event.rotate[1]
                        push(event, name)
                finally:
                    splitter._off = off
                    splitter._pos = base + off


def _fast_format(fmt) -> bool:
    """Fast units need 6-byte table ids (every server since 5.1 GA)."""
    if fmt is None:
        return False
    lens = fmt.post_header_lens
    return len(lens) >= _TABLE_MAP and lens[_TABLE_MAP - 1] == 8 and all(
        fmt.table_id_len(t) == 6 for t in _ROWS)
