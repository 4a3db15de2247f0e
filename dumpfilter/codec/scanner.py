"""The Python face of the compiled scanner (`dumpfilter._core`, Rust): one call per buffer,
never per event. It owns the mapping of the core's error tuples onto the codec's errors, the
unpacking of its unit records, and the decoded table names it interns."""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, NamedTuple

from dumpfilter import _core

from dumpfilter.codec.constants import HEADER_LEN, EventType
from dumpfilter.errors import BinlogError, ChecksumError
from dumpfilter.codec.event import HEADER, Event, decode_text
from dumpfilter.codec.format_description import FormatDescription

if TYPE_CHECKING:
    from typing_extensions import Buffer  # bytes, or a view of a mapped file (the core reads either)

UNIT = struct.Struct("<8Q")
assert UNIT.size == _core.UNIT_WORDS * 8

F_FAST = _core.F_FAST
F_COMPLETE = _core.F_COMPLETE
F_ROTATE_END = _core.F_ROTATE_END
F_HAS_FDE = _core.F_HAS_FDE
F_MARIADB_GTID = _core.F_MARIADB_GTID
F_MYSQL_GTID = _core.F_MYSQL_GTID
F_TAGGED_GTID = _core.F_TAGGED_GTID
F_ANONYMOUS_GTID = _core.F_ANONYMOUS_GTID
F_UNKNOWN_NON_IGNORABLE = _core.F_UNKNOWN_NON_IGNORABLE
F_PAYLOAD = _core.F_PAYLOAD
# The keep vocabulary (the core's keep.rs): the byte each compiled walk reads per table name id, per
# statement key id, and per unit answered beforehand (`assemble`'s `answers`): drop, keep, ask (not
# the walk's to decide: it stops there and Python decides the unit itself). Keys are answered up
# front: `statement_units`, then the walk.
KEEP_DROP = _core.KEEP_DROP
KEEP_KEEP = _core.KEEP_KEEP
KEEP_ASK = _core.KEEP_ASK
# A stream's answer per unit of a segment (`UnitList.rows_many`, one byte each), defined once in the core
# (assemble.rs): no table kept, some kept, every one kept (or none to decide), not a fast unit.
ROW_SKIP = _core.ROW_SKIP
ROW_PARTIAL = _core.ROW_PARTIAL
ROW_KEEP = _core.ROW_KEEP
ROW_SLOW = _core.ROW_SLOW

KINDS = ("control", "transaction", "statement")  # the core's kind codes, as transactions.py names them

# A segment's units for the core's per-stream send walk (kept runs, partial units, heartbeats):
# Scanner.scan_into(unit_list, ...) per read buffer, then rows(keep) and send(...) per stream.
UnitList = _core.UnitList
_FDE = int(EventType.FORMAT_DESCRIPTION)


class UnitRecord(NamedTuple):
    """One unit as the core describes it; offsets are in the scanned buffer."""

    start: int
    end: int
    events: int
    kind: str
    flags: int
    gtid_size: int
    tables_lo: int
    tables_hi: int
    gtid_seq: int
    gtid_domain: int
    gtid_server: int
    last: int          # offset of the unit's last event

    @property
    def fast(self) -> bool:
        return bool(self.flags & F_FAST)

    @property
    def complete(self) -> bool:
        return bool(self.flags & F_COMPLETE)


def unit_record(unit_list: _core.UnitList, k: int) -> tuple[int, UnitRecord]:
    """Unit k of a UnitList as (its part, its record); the record's tables bounds are those of the
    unit_list's name ids (unit_list.tables(k) holds them)."""
    u = unit_list.unit(k)
    return u.part, UnitRecord(u.start, u.end, u.events, KINDS[u.kind], u.flags, u.gtid_size, 0, 0, u.gtid_seq,
                              u.gtid_domain, u.gtid_server, u.last)


class UnitRecords:
    """The units of one scan, decoded only when asked for (by index or in order): a bulk
    consumer (the compiled assembly) may never need most of them in Python."""

    __slots__ = ("_packed", "_n", "_words")

    def __init__(self, packed: bytes) -> None:
        self._packed = packed
        self._n = len(packed) // UNIT.size
        self._words = memoryview(packed).cast("Q")

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, i: int) -> UnitRecord:
        if not 0 <= i < self._n:
            raise IndexError(i)
        return _record(UNIT.unpack_from(self._packed, i * UNIT.size))

    def __iter__(self) -> Iterator[UnitRecord]:
        return map(_record, UNIT.iter_unpack(self._packed))

    def columns(self) -> tuple[memoryview, memoryview, memoryview]:
        """Every unit's start, end and `events | kind << 32 | flags << 40` word (strided u64
        views, for numpy): for a consumer that reads all the units at once."""
        w = self._words
        return w[0::8], w[1::8], w[2::8]

    # The record's fields straight from its words, without a UnitRecord (the layout is `_record`'s:
    # word 0 start, 1 end, 2 events | kind << 32 | flags << 40, 3 the GTID event's size, ...).
    def is_fast(self, i: int) -> bool:
        """Whether unit i is a fast unit (decided from its tables' answers, written by the core)."""
        return bool(self._words[8 * i + 2] >> 40 & F_FAST)

    def lone_statement(self, i: int, checksum_len: int, mysql: bool = False) -> tuple[int, int] | None:
        """(offset of its statement, end) when unit i is a complete MariaDB GTID group of two
        events whose GTID is whole (seq_no, domain, flags2 and its CRC), or with `mysql` a MySQL
        GTID or Anonymous_GTID and its event (not a tagged GTID: the assembly leaves those to
        Python) or a statement unit of one event without a GTID (MySQL before 5.6's GTIDs): a
        statement alone, the shape of DDL and standalone groups; else None. The caller reads the
        statement there (`codec.event.query_text`, None for anything but a plain Query)."""
        w = self._words
        k = 8 * i
        w2 = w[k + 2]
        flags = w2 >> 40
        if mysql and w2 & 0xFFFFFFFF == 1 and not flags & (_ANY_GTID | F_ANONYMOUS_GTID) and (w2 >> 32) & 0xFF != _CONTROL_KIND:
            return w[k], w[k + 1]
        if w2 & 0xFFFFFFFF != 2 or not flags & F_COMPLETE or w[k + 3] < HEADER_LEN + 13 + checksum_len \
                or not flags & (_LONE_GTIDS if mysql else F_MARIADB_GTID) or flags & F_TAGGED_GTID:
            return None
        return w[k] + w[k + 3], w[k + 1]

    def may_hold_statements(self, i: int) -> bool:
        """Whether unit i may be a statement unit the core decides by its statements' keys (a
        complete transaction or statement with a GTID, no Transaction_payload): worth an
        assembly call; the core walks its events to tell."""
        w2 = self._words[8 * i + 2]
        flags = w2 >> 40
        return ((w2 >> 32) & 0xFF) != _CONTROL_KIND and flags & F_COMPLETE != 0 and flags & _ANY_GTID != 0 \
            and flags & F_PAYLOAD == 0

    def lone_control(self, i: int) -> int | None:
        """The offset of unit i when it is a control unit of one event (a Heartbeat, a Rotate,
        ...: the caller reads its type), else None."""
        k = 8 * i
        return self._words[k] if self._words[k + 2] & 0xFF_FFFF_FFFF == 1 else None


_LONE_GTIDS = F_MARIADB_GTID | F_MYSQL_GTID | F_ANONYMOUS_GTID
_ANY_GTID = F_MARIADB_GTID | F_MYSQL_GTID | F_TAGGED_GTID
_CONTROL_KIND = KINDS.index("control")


def _record(words: tuple[int, ...]) -> UnitRecord:
    start, end, w2, gsize, w4, seq, w6, last = words
    return UnitRecord(start, end, w2 & 0xFFFFFFFF, KINDS[(w2 >> 32) & 0xFF], w2 >> 40, gsize,
                      w4 & 0xFFFFFFFF, w4 >> 32, seq, w6 & 0xFFFFFFFF, w6 >> 32, last)


class UnitScan(NamedTuple):
    units: UnitRecords
    tables: memoryview   # name ids (uint32) of the fast units' Table_maps
    stop: int            # buffer offset after the last unit handed out
    events: int
    last_rotate: int     # buffer offset of the last real Rotate, -1 for none
    error: BinlogError | None
    run_events: int = 0  # events and bytes the placeholder runs and stretches among them stand for
    run_bytes: int = 0   # beyond themselves (scan::RunCount), and the placeholders among those events
    run_placeholders: int = 0


class UnitListScan(NamedTuple):
    added: int           # units appended to the unit_list
    stop: int
    events: int
    last_rotate: int
    error: BinlogError | None


def _error(err: _core.ScanFault, path: str | None) -> BinlogError:
    cls = ChecksumError if err.kind == "checksum" else BinlogError
    return cls(err.message, path=path, offset=err.offset)


class Scanner:
    """The core scanner for one stream of binlog files (its format and table names carry over
    from buffer to buffer and file to file). `path` names the file in errors."""

    def __init__(self, path: str = "<binlog>", *, verify_checksums: bool = True) -> None:
        self._core = _core.Scanner(verify_checksums)
        self.path = path
        self.verify_checksums = verify_checksums
        self.names: list[tuple[str, str]] = []  # (db, table) by name id

    @property
    def core(self) -> _core.Scanner:
        """The compiled scanner (its last `units` call is what UnitList.add takes)."""
        return self._core

    @property
    def checksum_len(self) -> int:
        return self._core.checksum_len

    def load_format(self, fde_raw: bytes, offset: int = 4) -> None:
        """Adopt the format of an FDE read elsewhere (a read that starts past it)."""
        err = self._core.load_fde(fde_raw, offset)
        if err is not None:
            raise _error(err, self.path)

    def units(self, buf: bytes, off: int, base: int, limit: int = 1 << 62, at_eof: bool = False) -> UnitScan:
        """Units of buf[off:] (`base` is the file offset of buf[0]): see the core's
        Scanner::units. A malformed event is returned as `error`, after the units before it."""
        r = self._core.units(buf, off, base, limit, at_eof)
        self._add_names(r.new_names)
        return UnitScan(UnitRecords(r.packed), memoryview(r.tables).cast("I"), r.stop, r.events, r.last_rotate,
                        None if r.error is None else _error(r.error, self.path), r.run_events, r.run_bytes,
                        r.run_placeholders)

    def scan_into(self, unit_list: _core.UnitList, buf: Buffer, off: int, base: int, file: str, limit: int = 1 << 62,
                  at_eof: bool = False) -> UnitListScan:
        """`units`, with the units appended to `unit_list` (a `UnitList`, as part `file` at file offset
        `base` of buf[0]) instead of handed to Python: read them back with unit_list.unit(k). The
        scan of `scan_start`, waited for at once."""
        unit_list.scan_start(self._core, buf, off, base, file, limit, at_eof)
        return self._list_scan(unit_list.scan_finish())

    def scan_start(self, unit_list: _core.UnitList, buf: Buffer, off: int, base: int, file: str, limit: int = 1 << 62,
                   at_eof: bool = False, statements: bool = False, unit_statements: bool = False,
                   annotations: bool = False) -> None:
        """`scan_into`, run on a thread of its own: returns at once; `scan_finish(unit_list)` waits
        for it and returns its UnitListScan. The scanner takes no other call in between. A buffer
        of at most 128 KB from `off` (a live binlog's tail) is scanned at once instead, without
        the GIL: a thread's start and join cost as much (`unit_list.scans_inline` counts them).
        `statements`: the thread also reads the statement units of the units it found when they
        are the list's first part (`unit_list.statement_units` then takes them ready).
        `unit_statements`: it also reads the statements of the units with two or more Table_maps,
        which a slave's table rules may keep in part (read later, unit by unit, they wait on memory).
        `annotations`: it also reads what the units' Annotate_rows / Rows_query texts need of a
        master policy's gated stream (`unit_list.annotations_unshown` then finds them read)."""
        unit_list.scan_start(self._core, buf, off, base, file, limit, at_eof, statements, unit_statements,
                             annotations)

    def scan_finish(self, unit_list: _core.UnitList) -> UnitListScan:
        return self._list_scan(unit_list.scan_finish())

    def _list_scan(self, r: _core.ScanResult) -> UnitListScan:
        self._add_names(r.new_names)
        return UnitListScan(r.added, r.stop, r.events, r.last_rotate, None if r.error is None else _error(r.error, self.path))

    def _add_names(self, new_names: list[_core.TableName]) -> None:
        """The (db, table) names the core interned since its last call, decoded, by name id."""
        if new_names:
            self.names.extend((decode_text(n.db), decode_text(n.table)) for n in new_names)

    def statement_units(self, buf: bytes, start: int, fmt: FormatDescription) -> list[_core.StatementKey]:
        """The keys of the last `units` call's statement units from index `start` on (buf: that
        call's buffer; `fmt`: the format in force), ids from 0, for the walks that take their
        answers up front (`assemble`, `relay_run`, `split_route`'s `stmt_keep`)."""
        return self._core.statement_units(buf, start, fmt.post_header_len(EventType.QUERY), fmt.checksum_len).keys

    def slow_units(self) -> memoryview:
        """The indices (u32) of the last `units` call's units that are not fast."""
        return memoryview(self._core.slow_units()).cast("I")

    def relay_run(self, buf: bytes, start: int, keep: bytes, lone: FormatDescription | None = None,
                  stmt_keep: bytes | None = None, renames: dict[bytes, bytes] | None = None) -> _core.RelayResult:
        """A slave's relay run over the last `units` call's units from index `start` on (buf:
        that call's buffer; `keep` one byte per name id, 1 kept): lone Heartbeats passed over,
        the placeholder policy's skipped units relayed as their framing, fast units kept whole
        copied as they came and, given the format in force as `lone`, lone statements (a MariaDB
        GTID and one plain QUERY) too, and with `stmt_keep` (a keep byte per key id of
        `statement_units`) the statement units whose every statement its keys keep, until a unit
        that needs Python; see relay::relay_ranges. `renames` (with `lone`): replicate-rewrite-db's
        names (the master's database -> the one the replica applies), written into the units
        relayed (rename_db); the run stops at a unit naming a database the map lacks."""
        formats = None if lone is None else (lone.post_header_len(EventType.QUERY), lone.checksum_len)
        named = None if renames is None or lone is None else (
            renames, lone.post_header_len(EventType.EXECUTE_LOAD_QUERY), lone.post_header_len(EventType.TABLE_MAP))
        return _core.relay_run(self._core, buf, start, keep, formats, stmt_keep, named)

    def walk(self, buf: Buffer, off: int, base: int, types: bytes) -> tuple[memoryview, int, BinlogError | None]:
        """Buffer offsets of the events of buf[off:] whose type has a non-zero byte in `types`
        (256 bytes), and of every FDE; where the walk stopped; the error that stopped it."""
        w = self._core.walk(buf, off, base, types)
        return memoryview(w.offsets).cast("Q"), w.stop, None if w.error is None else _error(w.error, self.path)

    def schema_candidates(self, buf: Buffer, off: int, base: int) -> tuple[memoryview, int, BinlogError | None]:
        """`walk` for split's first pass: the offsets of every FDE of buf[off:] and of its Query
        events Python must see (the core's sql::query_for_python: the text may be a schema
        statement, or its decoding may refuse it); every other event is only checked."""
        w = _core.schema_candidates(self._core, buf, off, base)
        return memoryview(w.offsets).cast("Q"), w.stop, None if w.error is None else _error(w.error, self.path)


def type_mask(types: Iterable[int] | None) -> bytes:
    """The 256-byte type mask `Scanner.walk` takes; None means every type."""
    if types is None:
        return b"\x01" * 256
    mask = bytearray(256)
    for t in types:
        mask[int(t)] = 1
    return bytes(mask)


def unit_events(raw: bytes, pos: int, fmt: FormatDescription | None, *, path: str | None = None,
                stream_positions: bool = False) -> tuple[list[Event], FormatDescription | None]:
    """The Events of a unit the scanner has already checked (whole events only), each with the
    format in force where it stands; returns them and the format after them. `pos` is raw[0]'s
    file offset; with `stream_positions` (a dump stream) an event's position is where its
    log_pos says it starts."""
    events: list[Event] = []
    at, total = 0, len(raw)
    unpack = HEADER.unpack_from
    while at < total:
        header = unpack(raw, at)
        size = header[3]
        event_raw = raw[at : at + size] if total != size else raw
        if header[1] == _FDE:
            fmt = FormatDescription.parse(event_raw, path=path, offset=pos + at)
        events.append(Event(event_raw, max(0, header[4] - size) if stream_positions else pos + at, fmt, header))
        at += size
    return events, fmt

