"""Reads the master's binlog once for all streams: the binlog is cut into segments of whole
transactions, keyed by start position and cached (LRU, bounded in bytes). Streams at the same
position share one segment, so each event is split, checked and grouped once, and the decoded
fields cached on its Event are shared by every slave's filter."""

from __future__ import annotations

import mmap
import os
import struct
import threading
import time
import uuid as uuidlib
from collections import OrderedDict
from itertools import accumulate, chain
from operator import itemgetter
from dataclasses import dataclass
from pathlib import Path

from dumpfilter.codec import Event, EventType, Transaction, TransactionGrouper, bad_magic
from dumpfilter.codec.constants import GTID_EVENT_TYPES, LOG_EVENT_ARTIFICIAL_F, MAGIC
from dumpfilter.codec.event import query_text
from dumpfilter.errors import BinlogError, PositionError, TruncatedBinlogError
from dumpfilter.codec.scanner import (F_HAS_FDE, F_MARIADB_GTID, F_MYSQL_GTID, F_ROTATE_END,
                                  F_TAGGED_GTID,
                                  Scanner, unit_events)
from dumpfilter.codec.scanner import statements as core_statements
from dumpfilter.codec.scanner import Plan, plan_record
from dumpfilter.codec.transactions import CONTROL, STATEMENT, TRANSACTION
from dumpfilter.rules.transaction_filter import lone_statement
from dumpfilter.binlogs import TailingReader
from dumpfilter.binlogs.files import binlog_listing, file_size, open_regular, served_paths
from dumpfilter.binlogs.written import WrittenEnd
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
        self._parses: dict | None = None   # see `parses`

    @classmethod
    def fast(cls, raw: bytes, file: str, pos: int, fmt, events: int, tables: tuple, gtid: tuple | None,
             gtid_end: int, mysql_gtid: tuple | None = None) -> "Unit":
        unit = cls.__new__(cls)
        unit._txn = None
        unit.file, unit.end, unit.results = file, (file, pos + len(raw)), {}
        unit.raw, unit.pos, unit.fmt, unit.events, unit.nbytes = raw, pos, fmt, events, len(raw)
        unit.tables, unit._statements, unit.gtid, unit.gtid_end = tables, _UNSET, gtid, gtid_end
        unit.mysql_gtid, unit._parses = mysql_gtid, None
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
        unit.is_fast, unit._kind, unit._complete, unit._parses = False, kind, complete, None
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
        parses = self._parses
        if parses is None:
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
        return index.size if index is not None else sum(u.nbytes for u in self.units)


class SegmentIndex:
    """Per-segment arrays the streams' run loop works from, built once: prefix sums of unit
    sizes and event counts, which units are fast, their GTIDs and their Table_map occurrences;
    and, per flag-word generation, each unit's keep-all mask (AND of its tables' words) and
    keep-any mask (OR): one computation per unit for every slave."""

    def __init__(self, units: list[Unit]):
        """From Unit objects (the reference reader; scanned segments have a PlanIndex)."""
        self._set(sizes=[u.nbytes for u in units], events=[u.events for u in units],
                  ntables=[len(u.tables) for u in units], occ=list(chain.from_iterable([u.tables for u in units])),
                  fast=[u.is_fast for u in units], gtids=[u.gtid for u in units],
                  mysql=[u.mysql_gtid for u in units], tables=[u.tables for u in units])
        self.raws = [u.raw for u in units]
        self.plan = None        # the core's view of the segment: scanned segments only (PlanIndex)

    @property
    def size(self) -> int:
        return self.cum[-1]

    names = None  # the reference reader's segments have no name ids (see PlanIndex)

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
        self.one_gtid_source = len(set(map(itemgetter(0), filter(None, gtids)))) <= 1
        self.mysql_gtids = mysql if mysql.count(None) != len(mysql) else None
        self.masks: tuple | None = None   # (generation, keep_all, keep_any)
        self.lock = threading.Lock()

    def rows_for(self, keep_of) -> None:
        """The reference reader's segments have no core columns: a stream answers from the
        per-unit masks (`masks_for`) and decides partial units in Python."""
        return None

    def partial(self, k: int, keep: bytes) -> None:
        """Only scanned segments have the core's partial units (through `Plan.send`)."""
        return None

    def run_bytes(self, i: int, j: int) -> bytes:
        """The bytes of units i..j-1."""
        return b"".join(self.raws[i:j])

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


# A segment is what one read hands every stream: its fixed Python cost (the file opened at the
# position, the format read, the Plan and its index, each stream's answers, tallies and hit
# counts) is paid per segment, and only the stream's work on a segment overlaps the scan of the
# next (read ahead), so larger segments cost less per byte: 4 MB had 18% less master CPU than
# 1 MB on bench_dump's file, 8 MB about 10% less than 4 MB, and 12-16 MB 5-10% less again. But
# a mapped segment's pages count in the master's RSS while a stream or the cache holds it, and
# eight slaves spread over the binlog hold eight, plus the reads ahead: bench_dump's eight
# slaves peaked at 183 MB with 8 MB segments, 262-298 MB with 12-16 MB (the goal: < 300 MB,
# whatever the binlog's size). The cache holds four, for streams at different positions.
SEGMENT_BYTES = 8 << 20
CACHE_BYTES = 4 * SEGMENT_BYTES


class SegmentCache:
    """Shared, bounded cache of segments. `get(pos)` reads the segment at `pos` once even when
    several streams ask at the same moment; the others wait for it."""

    def __init__(self, directory: str | Path, *, segment_bytes: int = SEGMENT_BYTES, cache_bytes: int = CACHE_BYTES,
                 verify_checksums: bool = True, fast: bool = True, map_closed: bool = True, read_ahead: bool = True):
        self.directory = Path(directory)
        self.segment_bytes = segment_bytes
        self.map_closed = map_closed  # files the server closed are mapped, not read (_Window)
        self.read_ahead = read_ahead and fast  # see _start_ahead
        self._ahead: OrderedDict[Pos, tuple] = OrderedDict()  # (steps, since): see _start_ahead
        self.cache_bytes = cache_bytes
        self.verify_checksums = verify_checksums
        self.fast = fast
        self._cache: OrderedDict[Pos, Segment] = OrderedDict()
        self._cached_bytes = 0
        self._inflight: dict[Pos, threading.Event] = {}
        self._lock = threading.Lock()
        self.reads = 0   # segments read from disk
        self.hits = 0    # segments served from the cache
        self.ahead_taken = 0  # segments whose read was started ahead (_start_ahead) and taken by a get
        self._listing: tuple | None = None  # see file_names
        self._written = WrittenEnd()  # see end

    def file_names(self) -> list[str]:
        """The binlog files' names, as `binlog_listing` lists them (a Listing: the index's names).
        The listing is made again only when the directory's entries or an index file changed
        (their stat): a stat or two per segment read instead of reading the index and checking
        every file it names. A listing made within a second of such a change is not kept (a
        change in the same timestamp tick would go unseen: git's racily clean entries)."""
        directory = self.directory
        cached = self._listing
        try:
            dir_key = _stat_key(directory)
            if cached is not None and cached[0] == dir_key and \
                    all(_stat_key(directory / name) == key for name, key in cached[1]):
                return cached[2]
            indexes = tuple((p.name, _stat_key(p)) for p in sorted(directory.glob("*.index")))
        except OSError:
            dir_key = indexes = None
        names = binlog_listing(directory)
        self._listing = None
        if dir_key is not None:
            newest = max([dir_key[0], *(key[0] for _, key in indexes)])
            if time.time_ns() - newest > _SETTLED_NS:
                self._listing = (dir_key, indexes, names)
        return names

    def first_file(self) -> str:
        paths = served_paths(self.directory)
        if not paths:
            raise PositionError(f"no binlog files in {self.directory}")
        return paths[0].name

    def end(self) -> Pos:
        """The current end of the binlog: the last file and the end of its last complete event
        (a partly written one is not yet written, binlogs/written.py)."""
        names = self.file_names()  # a last file the index names but is missing: no end (1236)
        if not names:
            raise names.problem or PositionError(f"no binlog files in {self.directory}")
        return names[-1], self._written.of(self.directory / names[-1])

    def bytes_between(self, start: Pos, end: Pos) -> int:
        """Master binlog bytes from `start` to `end` (for how far behind a slave is)."""
        names = self.file_names()
        if start[0] not in names or end[0] not in names:
            return 0
        i, j = names.index(start[0]), names.index(end[0])
        if i == j:
            return max(0, end[1] - start[1])
        total = max(0, file_size(self.directory / start[0], 0) - start[1])
        for name in names[i + 1 : j]:
            total += max(0, file_size(self.directory / name, 0) - 4)
        return total + max(0, end[1] - 4)

    def get(self, start: Pos) -> Segment:
        while True:
            with self._lock:
                seg = self._cache.get(start)
                if seg is not None:
                    self._cache.move_to_end(start)
                    self.hits += 1
                    break
                waiter = self._inflight.get(start)
                if waiter is None:
                    waiter = self._inflight[start] = threading.Event()
                    ahead = self._ahead.pop(start, None)
                    steps = ahead[0] if ahead is not None else None
                    self.ahead_taken += steps is not None
                    break
            waiter.wait()  # another stream is reading this segment; then look again
        if seg is not None:
            self._ahead_of(seg)
            return seg
        try:
            seg = _drive(steps if steps is not None else self._steps(start))
            # The next scan first: storing may evict a segment, whose unmapping the scan
            # need not wait for.
            self._ahead_of(seg)
            if seg.units:
                self._store(seg)
            return seg
        finally:
            with self._lock:
                del self._inflight[start]
            waiter.set()

    def _ahead_of(self, seg: Segment) -> None:
        if self.read_ahead and seg.units and not seg.at_end and seg.error is None:
            self._start_ahead(seg.end)

    # Reads started ahead and not yet taken: one per stream working through a segment, for as
    # many streams at different positions. With that many waiting no more start (a stream then
    # reads its next segment itself): one dropped before it is taken would be a scan made for
    # nothing. One left AHEAD_STALE seconds (its stream stopped, or went elsewhere) is dropped.
    AHEAD_MAX = 2
    AHEAD_STALE = 2.0

    def _start_ahead(self, start: Pos) -> None:
        """Starts reading the segment at `start`, where a segment just read ends (called by its
        reader as soon as its last scan fills it, and by `get` for a segment it hands out): the
        calling thread opens the file and maps or reads the window (a fraction of a
        millisecond), and the core scans it on a thread of its own (`Plan.scan_start`, no GIL)
        while the stream filters and sends the segment it has; the next `get(start)` adopts
        the scan. On two cores a one-slave stream's master CPU then overlaps the scan with the
        rest of its work. A read that fails here is dropped: the `get` reads again and meets
        the error itself."""
        with self._lock:
            if start in self._cache or start in self._inflight or start in self._ahead:
                return
            stale = self._stale_ahead()
            full = len(self._ahead) >= self.AHEAD_MAX
            if not full:
                waiter = self._inflight[start] = threading.Event()
        for old in stale:
            old.close()
        if full:
            return
        steps = None
        try:
            steps = self._steps(start)
            next(steps)  # to the scan's start
        except StopIteration:  # read at once (nothing to scan): the get reads again
            steps = None
        except Exception:  # noqa: BLE001 - the get meets it again, and reports it
            steps = None
        finally:
            with self._lock:
                del self._inflight[start]
                if steps is not None:
                    self._ahead[start] = (steps, time.monotonic())
            waiter.set()

    def _stale_ahead(self) -> list:
        """Takes out the reads ahead left AHEAD_STALE seconds or more (under the lock); the
        caller closes them (their scans joined) outside it."""
        now, stale = time.monotonic(), []
        while self._ahead:
            start, (steps, since) = next(iter(self._ahead.items()))
            if now - since < self.AHEAD_STALE:
                break
            del self._ahead[start]
            stale.append(steps)
        return stale

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
        return _drive(self._steps(start))

    def _steps(self, start: Pos):
        """`_read` as a generator that pauses once a scan is under way (see `_start_ahead`)
        and returns the segment."""
        file, pos = start
        if not os.path.lexists(self.directory / file):
            self.file_names().check_absent(self.directory, file)  # purged, or deleted by hand: 1236
            return Segment(start, [], start, at_end=True)  # a Rotate can name a file not created yet
        if pos <= 4 and self.not_yet_indexed(file):
            return Segment(start, [], start, at_end=True)
        if self.fast:
            return (yield from SegmentReader(self, start).steps())
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

    def not_yet_indexed(self, file: str) -> bool:
        """A file past the index's last one, which the reader waits for (see Listing)."""
        return self.file_names().not_yet_indexed(file)


# ---------------------------------------------------------------------------------------------
# the one-pass reader

_FDE = int(EventType.FORMAT_DESCRIPTION)
_I64 = struct.Struct("<q")
_TYPE_SIZE = struct.Struct("<4xB4xI")  # type_code, event_size of a common header
_U64 = struct.Struct("<Q")
CHUNK = 1 << 20
_KINDS = {"control": CONTROL, "transaction": TRANSACTION, "statement": STATEMENT}


class _Stop(Exception):
    """The segment is full."""


def _drive(steps) -> "Segment":
    """Runs a segment read's generator (`SegmentCache._steps`) to its end: the segment."""
    while True:
        try:
            next(steps)
        except StopIteration as done:
            return done.value


# Flags of the FDE's common header: set while the server writes the file, cleared in place when
# it closes it (the FDE's CRC is computed without it, so the clearing needs no new CRC).
_FDE_FLAGS_AT = 4 + 17
_BINLOG_IN_USE_F = 0x1


def _closed_by_server(fd: int) -> bool:
    """Whether the file's FDE is there and says the server closed the file: it is neither
    written nor truncated again (a crash recovery truncates only the file left in use)."""
    head = os.pread(fd, _FDE_FLAGS_AT + 2, 0)
    return len(head) == _FDE_FLAGS_AT + 2 and head[8] == _FDE and not head[_FDE_FLAGS_AT] & _BINLOG_IN_USE_F


class _Window:
    """The bytes of one binlog file that a segment scans, from `base + off` on (buffer offsets
    are buf's, `base` is the file offset of buf[0]). A file the server has closed is mapped
    read-only rather than read, so that its bytes are not copied (a tenth of the master's CPU
    on a large binlog); a file still in use is read, since a mapping would fault (SIGBUS) on a
    truncation. Only a file with at least MAP_MIN bytes left is mapped: a mapping holds a file
    descriptor as long as its segment is cached, and a small one saves nothing. Mapping stays
    off with `mapped=False` (SegmentCache.map_closed), and where the file system refuses it."""

    MAP_MIN = 1 << 20

    def __init__(self, f, start: int, chunk: int, mapped: bool):
        self.f, self.chunk = f, chunk
        fd = f.fileno()
        self.mapped = mapped and os.fstat(fd).st_size - start >= self.MAP_MIN and _closed_by_server(fd)
        self.buf, self.off, self.base = b"", 0, start

    def more(self) -> bool:
        """Extends the window by up to `chunk` bytes of the file; False at what is written."""
        if not self.mapped:
            data = self.f.read(self.chunk)
            if not data:
                return False
            rest = self.buf[self.off:]
            self.buf, self.base, self.off = rest + data if rest else data, self.base + self.off, 0
            return True
        fd = self.f.fileno()
        end = self.base + len(self.buf)
        size = os.fstat(fd).st_size
        if size <= end:
            return False
        at = self.base + self.off
        lo = at - at % mmap.ALLOCATIONGRANULARITY
        try:
            self.buf = mmap.mmap(fd, min(size, end + self.chunk) - lo, mmap.MAP_SHARED, mmap.PROT_READ, offset=lo)
        except OSError:  # a file system without mmap: read from here on
            self.mapped = False
            self.f.seek(end)
            return self.more()
        self.off, self.base = at - lo, lo
        return True

    def left(self) -> int:
        return len(self.buf) - self.off


_SETTLED_NS = 1_000_000_000  # see SegmentCache.file_names


def _stat_key(path: Path) -> tuple[int, int, int, int]:
    st = os.stat(path)
    return st.st_mtime_ns, st.st_size, st.st_ino, st.st_dev


class _Opener(TailingReader):
    """The reference reader's checks of a start position and its file order (a TailingReader
    that never follows), with the binlog listing the cache keeps (`SegmentCache.file_names`)."""

    def __init__(self, cache: "SegmentCache", file: str, pos: int):
        self._names = cache.file_names
        super().__init__(cache.directory, file, pos, follow=False, verify_checksums=cache.verify_checksums)

    def files(self) -> list[str]:
        return self._names()


class _Part:
    """One scan's worth of a segment's units: the read buffer they lie in, its file and file
    offset, where the part's units start in the segment, the format in force (per unit only
    where an FDE changed it inside the part) and the checksum length after the scan."""

    __slots__ = ("buf", "file", "base", "first", "fmt", "fmts", "crc")

    def __init__(self, buf: bytes, file: str, base: int, first: int, fmt, fmts: list | None, crc: int):
        self.buf, self.file, self.base, self.first = buf, file, base, first
        self.fmt, self.fmts, self.crc = fmt, fmts, crc


class _Columns:
    """A segment's units as the core's Plan holds them: per unit its offsets, events, flags,
    GTID and Table_map name ids live in the Plan, nothing per unit in Python; a Unit is made from
    them when a stream asks for one (LazyUnits)."""

    def __init__(self):
        self.plan = Plan()
        self.parts: list[_Part] = []    # by the Plan's part index
        self.names: list = []           # (db, table) by name id (the scanner's)
        self.made: dict[int, Unit] = {}  # units made eagerly (holding an FDE)
        self.sources: dict[bytes, str] = {}  # MySQL GTID source uuids, decoded once

    def __len__(self) -> int:
        return len(self.plan)

    def unit(self, k: int) -> Unit:
        made = self.made.get(k)
        if made is not None:
            return made
        p, rec = plan_record(self.plan, k)
        part = self.parts[p]
        raw = part.buf[rec.start : rec.end]
        pos = part.base + rec.start
        name = part.file
        fmt = part.fmt if part.fmts is None else part.fmts[k - part.first]
        if rec.fast:
            names = self.names
            return Unit.fast(raw, name, pos, fmt, rec.events, tuple([names[i] for i in self.plan.tables(k)]),
                             self.plan.gtid(k), rec.gtid_size, self._mysql_gtid(part, rec, fmt))
        end_pos = (name, pos + len(raw))
        if rec.flags & F_ROTATE_END:
            at = rec.last - rec.start
            target = raw[at + 27 : len(raw) - part.crc].decode("utf-8", "surrogateescape")
            end_pos = (confined_rotate_target(target, name, pos + at), _U64.unpack_from(raw, at + 19)[0])
        return Unit.lazy(raw, name, pos, fmt, rec.events, _KINDS[rec.kind], rec.complete, end_pos)

    def end_of(self, k: int) -> Pos | None:
        """Unit k's end position from the Plan; None when it ends with a real Rotate."""
        end = self.plan.end(k)
        return None if end is None else (self.parts[end[0]].file, end[1])

    def mysql_gtid(self, k: int) -> tuple | None:
        """Unit k's MySQL GTID (source uuid, tag, gno), else None."""
        p, rec = plan_record(self.plan, k)
        part = self.parts[p]
        return self._mysql_gtid(part, rec, part.fmt if part.fmts is None else part.fmts[k - part.first])

    def _mysql_gtid(self, part: _Part, rec, fmt) -> tuple | None:
        flags = rec.flags
        if flags & F_MARIADB_GTID or not flags & (F_MYSQL_GTID | F_TAGGED_GTID):
            return None
        buf, start = part.buf, rec.start
        if flags & F_MYSQL_GTID:
            sid = buf[start + 20 : start + 36]
            source = self.sources.get(sid)
            if source is None:
                source = self.sources[sid] = str(uuidlib.UUID(bytes=sid))
            return source, "", _I64.unpack_from(buf, start + 36)[0]
        info = Event(buf[start : start + rec.gtid_size], part.base + start, fmt).gtid_info
        return info.source, info.tag, info.gno


class _GtidColumn:
    """Per unit, its MariaDB GTID ((domain, server_id), seq_no), else None: read from the Plan
    when a stream reads one (most are never read: a run's tracker update needs only its last
    GTID when the segment has one GTID source)."""

    __slots__ = ("_plan",)

    def __init__(self, plan):
        self._plan = plan

    def __len__(self) -> int:
        return len(self._plan)

    def __getitem__(self, k):
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

    def __iter__(self):
        return iter(self._plan.gtids(0, len(self._plan)))


class _MysqlColumn:
    """Per unit, its MySQL GTID (source, tag, gno), else None, decoded when read."""

    __slots__ = ("_cols",)

    def __init__(self, cols: _Columns):
        self._cols = cols

    def __len__(self) -> int:
        return len(self._cols)

    def __getitem__(self, k):
        n = len(self._cols)
        if isinstance(k, slice):
            return [self._cols.mysql_gtid(i) for i in range(*k.indices(n))]
        if k < 0:
            k += n
        if not 0 <= k < n:
            raise IndexError(k)
        return self._cols.mysql_gtid(k)

    def __iter__(self):
        return (self._cols.mysql_gtid(k) for k in range(len(self._cols)))


class PlanIndex:
    """What the streams' run loop reads of a scanned segment, all from the core's Plan (one call
    per question, none per unit): its size, the name ids' (db, table), each stream's answer
    bytes, the GTID columns."""

    def __init__(self, cols: _Columns):
        plan = self.plan = cols.plan
        self.names = cols.names
        self.size = plan.size
        self.gtids = _GtidColumn(plan)
        # Whether the GTIDs share one (domain, server_id): then a run's last GTID is all a
        # stream's GTID tracker needs (it keeps the last seq_no per (domain, server_id)).
        self.one_gtid_source = plan.gtid_sources() <= 1
        self.mysql_gtids = _MysqlColumn(cols) if plan.flags_any & (F_MYSQL_GTID | F_TAGGED_GTID) else None
        self.lock = threading.Lock()
        self._parts = cols.parts
        # (flag-word generation, {unit: statement flag answer}) of the lone units (see `lone_queries`),
        # filled once per generation by the first stream to ask (SlaveStream._lone_answers).
        self.lone_answers: tuple[int, dict] | None = None

    def lone_queries(self) -> tuple[list[tuple[str, bytes]], list[tuple[int, str, bool | None, str]]]:
        """The units made of a GTID and one plain QUERY event, in one core call: the units
        `Unit.lone_text` answers, but for those before an FDE that changes the format inside a
        part (a new file's first units; left to `Unit.lone_text`). As (plain, others): plain
        [(default database, unit indices as u32 bytes)] of the plain statements
        (`plain_statement`), whose text is not read (`Unit.lone_text` reads it if needed);
        others [(k, default database, plain, SQL)], plain False, or None where the core leaves
        it to Python."""
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
        return self.plan.lone_queries(formats)

    def rows_for(self, keep_of) -> tuple[bytes, bytes]:
        """One slave's answer byte per unit (0 skip, 1 partial, 2 keep, 3 not fast), computed by
        the core from `keep_of(names)`, the slave's keep byte per table name of the segment (the
        flag words), and those bytes."""
        keep = keep_of(self.names)
        return self.plan.rows(keep), keep


class LazyUnits:
    """A segment's units, each made on first use and then shared by every stream (their
    per-rule-group answers live on them)."""

    __slots__ = ("_cols", "_units", "_lock")

    def __init__(self, cols: _Columns):
        self._cols = cols
        self._units: list[Unit | None] = [None] * len(cols)
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
        """Unit k's end position, without making the Unit unless it ends with a real Rotate."""
        unit = self._units[k]
        if unit is not None:
            return unit.end
        end = self._cols.end_of(k if k >= 0 else len(self._units) + k)
        return end if end is not None else self[k].end


class SegmentReader:
    """Reads one segment in a single pass of the compiled scanner (`dumpfilter.codec.scanner`): it
    hops from header to header, checks CRCs, groups the units exactly as TransactionGrouper does
    and marks the common ROW transaction (`GTID [BEGIN] {Annotate_rows|Rows_query|Table_map|
    Rows}* XID`, every rows event after its own Table_map) as fast, with its tables and GTID.
    The units go straight into the core's Plan (`Scanner.scan_start`, the scan on a thread of the
    core's, which a read ahead leaves running, see `steps`): Python sees no record per
    unit, never an event; a Unit (raw bytes plus what a decision needs, its Events made only when
    a slave's answer needs TransactionFilter) is made when a stream asks for it. Files, rotation,
    the end of what is written and errors follow TailingReader."""

    def __init__(self, cache: SegmentCache, start: Pos):
        self.cache = cache
        self.start = start
        self.cols = _Columns()
        self.size = 0
        # The scanner checks a segment's CRC runs on a second thread of the core's while it walks
        # (its default for buffers of 1 MB and more). When the scan ran on the stream's thread
        # that cost more than it saved; now that it runs ahead on a thread of its own, which the
        # stream waits for, the checker shortens that wait (bench_dump, one slave: about 2%).
        self.scanner = Scanner(verify_checksums=cache.verify_checksums)

    def read(self) -> Segment:
        return _drive(self.steps())

    def steps(self):
        """`read` as a generator: it pauses after each scan it starts (the core scans on a
        thread of its own meanwhile) and returns the segment."""
        cache, start = self.cache, self.start
        file, pos = start
        at_end = False
        error = None
        cols = self.cols
        try:
            # Validates the start file and position exactly as the reference reader does.
            opener = _Opener(cache, file, pos)
            name = file
            while True:
                nxt = yield from self._file(opener, name, pos)
                if nxt is None:
                    at_end = True
                    break
                if not os.path.lexists(cache.directory / nxt):
                    cache.file_names().check_absent(cache.directory, nxt)  # or a Rotate named it
                if not os.path.lexists(cache.directory / nxt) or cache.not_yet_indexed(nxt):
                    at_end = True  # a Rotate names a file the server has not created (or indexed) yet
                    break
                name, pos = nxt, 4
        except _Stop:
            pass
        except PositionError:
            if len(cols):
                at_end = True
            else:
                raise
        except BinlogError as exc:
            if not len(cols):
                raise
            error = exc
        units = LazyUnits(cols)
        end = units.end_of(len(units) - 1) if len(units) else start
        seg = Segment(start, units, end, at_end, error)
        seg.index = PlanIndex(cols)
        return seg

    def _file(self, opener: TailingReader, name: str, start: int):
        """Read one file from `start` (a generator, see `steps`); returns the file to continue
        with, or None at the end of what is written. Raises _Stop when the segment is full."""
        cache = self.cache
        path = cache.directory / name
        scanner = self.scanner
        scanner.path = str(path)
        plan = self.cols.plan
        with open_regular(path) as f:
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
                    raise bad_magic(str(path))
                start = 4
            rotated_to = None
            chunk = max(CHUNK, cache.segment_bytes + (64 << 10))  # the segment and the unit that ends it
            window = _Window(f, start, chunk, cache.map_closed)
            while True:
                at_eof = False
                if not window.more():
                    if rotated_to:
                        return rotated_to
                    newer = opener._next_file(name)
                    if newer is None or not window.left():
                        return newer if newer is not None and not window.left() else None
                    # The file ended (a newer one exists) inside a unit: a crash cut it. The
                    # whole events left come out as an incomplete unit; a partial event is an error.
                    at_eof = True
                buf, base = window.buf, window.base
                scanner.scan_start(plan, buf, window.off, base, name, cache.segment_bytes - self.size, at_eof)
                yield
                scan = scanner.scan_finish(plan)
                if (cache.read_ahead and scan.added and scan.error is None and scan.last_rotate < 0
                        and plan.size >= cache.segment_bytes):
                    # This scan fills the segment, which ends where it stopped: the next one's
                    # scan starts now, before this one's bookkeeping (SegmentCache._start_ahead).
                    cache._start_ahead((name, base + scan.stop))
                fmt = self._add_units(scan.added, buf, base, name, fmt)
                if scan.last_rotate >= 0:
                    at = scan.last_rotate
                    end = at + _TYPE_SIZE.unpack_from(buf, at)[1] - scanner.checksum_len
                    rotated_to = confined_rotate_target(buf[at + 27 : end].decode("utf-8", "surrogateescape"),
                                                        str(path), base + at)
                if scan.error is not None:
                    raise scan.error
                if self.size >= cache.segment_bytes:
                    raise _Stop  # (before keeping the rest of the buffer: the next segment reads it)
                window.off = scan.stop
                if at_eof:
                    if window.left():
                        left = window.left()
                        raise TruncatedBinlogError(f"file ends inside an event ({left} bytes left)",
                                                   path=str(path), offset=base + scan.stop)
                    return rotated_to or opener._next_file(name)

    def _add_units(self, n: int, buf: bytes, base: int, name: str, fmt):
        """Records the part the last scan added to the Plan (its `n` units, a fixed number of
        Python operations whatever n is, but for units holding an FDE, made now). Returns the
        format in force after them."""
        if not n:
            return fmt
        cols = self.cols
        plan = cols.plan
        first = len(plan) - n
        cols.names = self.scanner.names
        start_fmt, fmts = fmt, None
        if plan.flags_any & F_HAS_FDE:
            with_fde = set(plan.with_flags(F_HAS_FDE, first))
            if with_fde:  # rare (relay logs, a new file's FDE): a format per unit of this part
                fmts = []
                for k in range(first, first + n):
                    fmts.append(fmt)
                    if k in with_fde:
                        _, rec = plan_record(plan, k)
                        unit = self._unit_with_fde(rec, buf[rec.start : rec.end], base + rec.start, name, fmt)
                        fmt = unit.txn.events[-1].fmt if unit.txn.events else fmt
                        cols.made[k] = unit
        cols.parts.append(_Part(buf, name, base, first, start_fmt, fmts, self.scanner.checksum_len))
        self.size = plan.size
        return fmt

    def _unit_with_fde(self, rec, raw: bytes, pos: int, name: str, fmt) -> Unit:
        """A unit holding a Format_description event: its Events are made now, each with the
        format in force where it stands."""
        events, fmt = unit_events(raw, pos, fmt, path=self.scanner.path)
        txn = Transaction(_KINDS[rec.kind], events, rec.complete)
        return Unit(txn, name, unit_end(name, events[-1]))
