"""Filter a sequence of binlog files into one output: a single binlog file or a numbered series.
It sits at the file-system edge: it opens files and writes them; the decisions are filter_rules'.

The reusable loop behind `dumpfilter filter` (and anything else that filters whole files: the
Spark split, the master's catch-up path). It reads each file, groups its events into
transactions, lets one `TransactionFilter` decide, and hands what is kept to a sink:

* `FileSink` writes one binlog file holding every event of the input that is kept, control
  events included (the source's Rotate, Gtid_list, Binlog_checkpoint...), so that with no rules
  the output is byte-identical to a single input file.
* `SeriesSink` writes `<base>.000001`, ... plus `<base>.index` through `BinlogSeriesWriter`,
  which frames every output file itself (FDE, Gtid_list/Previous_GTIDs computed from what the
  output holds, Rotate); the source's own framing events are not carried over.

Positions: a filtered binlog's `log_pos` values are renumbered to the output's offsets, except
in relay logs, whose `log_pos` are the *source server's* coordinates and are copied unchanged
(binlog-format.md §7.1, §8: rpl_unfiltered_hidden_gcol.000001).

Speed: `filter_files` hops from header to header over large read chunks itself and runs a fast
path for the shape that dominates ROW binlogs, `GTID [BEGIN] {Annotate_rows|Rows_query|Table_map|
Rows}* XID`, deciding per Table_map from a name cache and copying or dropping whole statements as
byte ranges. Into a renumbering FileSink it also writes MariaDB units itself (kept, partly kept,
emptied as GTID + COMMIT, and standalone DDL groups, decided by the TransactionFilter), collecting
the output as byte pieces written once per chunk. Every other unit (statements, context events,
Transaction_payload, statements whose tables are partly kept) goes through `TransactionGrouper` +
`TransactionFilter`, the reference path; tests check both give the same bytes.
"""

from __future__ import annotations

import functools
import os
import struct
import zlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from binlog_codec import (BinlogReader, BinlogWriter, Event, EventSplitter, EventType, Transaction,
                          TransactionGrouper, fix_transaction_length, type_name)
from binlog_codec.constants import HEADER_LEN, MARIADB_FL_STANDALONE, ROWS_EVENT_TYPES
from binlog_codec.encode import query_body
from binlog_codec.errors import BinlogError, ChecksumError, TruncatedBinlogError
from binlog_codec.event import HEADER
from binlog_codec.reader import MAX_EVENT_SIZE
from binlog_codec.format_description import FormatDescription
from binlog_codec.transactions import CONTROL, TRANSACTION
from binlog_codec.transactions import _is_begin as _opens_group
from binlog_codec.transactions import is_begin_event
from binlog_files.files import open_binlog
from binlog_files.series import FILE_FRAMING_TYPES, BinlogSeriesWriter
from filter_rules.transaction_filter import (EMPTIED, KEPT, MARIADB_FL_DDL, PARTIAL, PASSED, SKIPPED, FilterResult,
                                            TransactionFilter)

_U32 = struct.Struct("<I")
_U16 = struct.Struct("<H")
_TYPE_SIZE = struct.Struct("<4xB4xI")  # (type_code, event_size) of a common header
_SIZE_POS = struct.Struct("<II")  # (event_size, log_pos), 9 bytes into a common header
_CRC_RESIDUE = 0x2144DF1C  # zlib.crc32 of any data followed by its own CRC-32 (little-endian)
_LOG_POS_OFFSET = 13  # timestamp u32, type u8, server_id u32, event_size u32, then log_pos u32
_QUERY = int(EventType.QUERY)
_COMMIT_BODY = query_body("COMMIT", "")  # what TransactionFilter._empty_transaction's COMMIT holds
_COMMIT_EVENT = struct.Struct(f"<IBIIIH{len(_COMMIT_BODY)}s")  # header fields + _COMMIT_BODY, no CRC
FAST_CHUNK = 4 << 20


# ---------------------------------------------------------------------------------------------
# statistics
@dataclass
class FilterStats:
    """What went in and what came out, as the summary of `dumpfilter filter` reports it.

    Transactions are units with content (GTID groups, statements); control events (FDE,
    Rotate, Gtid_list, ...) are counted separately."""

    files_in: int = 0
    events_in: int = 0
    bytes_in: int = 0
    transactions_in: int = 0
    control_events: int = 0
    kept: int = 0          # transactions kept whole
    partial: int = 0       # transactions with some content kept
    emptied: int = 0       # transactions reduced to their GTID framing
    skipped: int = 0       # transactions left out entirely
    events_out: int = 0
    bytes_out: int = 0     # bytes of events passed to the sink (file framing it adds not counted)
    unparsed_statements: int = 0

    def add(self, outcome: str, events_in: int, bytes_in: int, events_out: int, bytes_out: int) -> None:
        self.events_in += events_in
        self.bytes_in += bytes_in
        self.events_out += events_out
        self.bytes_out += bytes_out
        if outcome == PASSED:
            self.control_events += events_in
            return
        self.transactions_in += 1
        if outcome == KEPT:
            self.kept += 1
        elif outcome == PARTIAL:
            self.partial += 1
        elif outcome == EMPTIED:
            self.emptied += 1
        elif outcome == SKIPPED:
            self.skipped += 1

    def add_result(self, result: FilterResult) -> None:
        self.add(result.outcome, result.events_in, result.bytes_in, len(result.events), result.bytes_out)

    def as_dict(self) -> dict:
        return dict(self.__dict__)


# ---------------------------------------------------------------------------------------------
# sinks
def looks_like_relay_log(path: str | os.PathLike, probe: int = 1 << 20) -> bool:
    """Whether a file's log_pos values are another server's coordinates (a relay log).

    A server's own binlog has log_pos = the event's end offset (or 0: artificial events,
    MariaDB 11.4+ inside groups). A relay log copies the source's log_pos. Only the first
    `probe` bytes are looked at, so that a 500 MB file costs nothing extra."""
    with open_binlog(path) as stream:
        data = stream.read(probe)
    off, end = 4, len(data)
    while off + HEADER_LEN <= end:
        size = HEADER.unpack_from(data, off)[3]
        log_pos = _U32.unpack_from(data, off + _LOG_POS_OFFSET)[0]
        if size < HEADER_LEN or off + size > end:
            break
        if log_pos not in (0, off + size):
            return True
        off += size
    return False


class Sink:
    """Where kept events go. `begin_file` is called at each input file's FDE (before it is
    written); `write(events)` takes one unit (a transaction or one control event)."""

    renumber_positions = True

    def begin_file(self, fde: Event, path: Path) -> bool:
        """Returns True when the sink has written (or deliberately dropped) this FDE itself."""
        raise NotImplementedError

    def write(self, events: Sequence[Event]) -> None:
        raise NotImplementedError

    def direct_writer(self) -> BinlogWriter | None:
        """A writer the fast path may write into directly (no rotation to watch), if any."""
        return None

    def write_raw(self, raw: bytes | memoryview, count: int, source_pos: int) -> None:
        """Write `count` whole events given as one byte range that came from input offset
        `source_pos`. Renumbers log_pos like BinlogWriter."""
        raise NotImplementedError

    def close(self) -> list[Path]:
        raise NotImplementedError


def renumbered(raw, out_pos: int, checksum: bool) -> bytearray:
    """`raw` (whole events) with every non-zero log_pos set to its end offset in the output,
    starting at `out_pos`, and fresh CRCs; what BinlogWriter.write does event by event."""
    buf = bytearray(raw)
    pack, size_pos = _U32.pack_into, _SIZE_POS.unpack_from
    crc32 = zlib.crc32
    view = memoryview(buf)
    start, total = 0, len(buf)
    while start < total:
        size, log_pos = size_pos(buf, start + 9)
        end = start + size
        if log_pos:  # 0 stays 0: artificial / MariaDB 11.4+ in-group events
            pack(buf, start + _LOG_POS_OFFSET, out_pos + end)
            if checksum:
                pack(buf, end - 4, crc32(view[start : end - 4]))
        start = end
    view.release()
    return buf


class _RawWriterMixin:
    """Byte-range writes into a BinlogWriter: same log_pos rule, no Event object per event."""

    def _write_gtid_commit_into(self, writer: BinlogWriter, gtid_raw, fmt, source_pos: int) -> int:
        """An emptied MariaDB group: its GTID and a COMMIT Query, renumbered and checksummed in
        one go (the commonest output of a selective filter, so it is done without the generic
        loop). Returns the bytes written."""
        timestamp, _, server_id, gsize, log_pos, _ = HEADER.unpack_from(gtid_raw, 0)
        crc = fmt.checksum_len > 0
        csize = HEADER_LEN + len(_COMMIT_BODY) + (4 if crc else 0)
        out_pos = writer.position
        renumber = writer.renumber_positions and log_pos
        gtid_end = (out_pos if renumber else source_pos) + gsize
        if renumber and out_pos != source_pos:
            g = bytearray(gtid_raw)
            _U32.pack_into(g, _LOG_POS_OFFSET, gtid_end)
            if crc:
                _U32.pack_into(g, gsize - 4, zlib.crc32(memoryview(g)[: gsize - 4]))
            gtid_raw = g
        commit = HEADER.pack(timestamp, _QUERY, server_id, csize, log_pos and gtid_end + csize, 0) + _COMMIT_BODY
        if crc:
            commit += _U32.pack(zlib.crc32(commit))
        out = writer.out
        out.write(gtid_raw)
        out.write(commit)
        writer.position = out_pos + gsize + csize
        writer.events_written += 2
        return gsize + csize

    def _write_raw_into(self, writer: BinlogWriter, raw, count: int, source_pos: int) -> None:
        out_pos = writer.position
        if writer.renumber_positions and out_pos != source_pos:
            raw = renumbered(raw, out_pos, writer.fmt.checksum_len > 0)
        writer.out.write(raw)
        writer.position += len(raw)
        writer.events_written += count


class FileSink(Sink, _RawWriterMixin):
    """One output binlog file. Every kept event is written, the source's control events
    included: with nothing filtered, one input file comes out byte for byte.

    Later FDEs (a second input file, or a relay log's source FDE) are written where they occur,
    as they are in relay logs; their `created` field tells readers nothing was reset."""

    def __init__(self, path: str | os.PathLike, *, renumber_positions: bool | None = None):
        self.path = Path(path)
        self.forced_renumber = renumber_positions
        self.writer: BinlogWriter | None = None
        self._file = None

    def begin_file(self, fde: Event, path: Path) -> bool:
        if self.writer is not None:
            return False  # written in sequence, like the second FDE of a relay log
        renumber = self.forced_renumber if self.forced_renumber is not None else not looks_like_relay_log(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file = open(self.path, "wb")
        self.writer = BinlogWriter(self._file, fde, renumber_positions=renumber)
        return True

    @property
    def renumber_positions(self) -> bool:  # type: ignore[override]
        return self.writer.renumber_positions if self.writer else True

    def write(self, events: Sequence[Event]) -> None:
        writer = self.writer
        for event in events:
            writer.write(event)

    def write_raw(self, raw, count, source_pos) -> None:
        self._write_raw_into(self.writer, raw, count, source_pos)

    def write_gtid_commit(self, gtid_raw, fmt, source_pos) -> int:
        return self._write_gtid_commit_into(self.writer, gtid_raw, fmt, source_pos)

    def direct_writer(self) -> BinlogWriter | None:
        return self.writer

    def close(self) -> list[Path]:
        if self._file is not None:
            self._file.close()
            self._file = None
        return [self.path]


def _format_key(fmt: FormatDescription) -> tuple:
    return fmt.checksum_alg, fmt.post_header_lens, fmt.flavor


class SeriesSink(Sink, _RawWriterMixin):
    """A numbered series `<basename>.NNNNNN` + `<basename>.index` in `directory`.

    Each output file gets its framing from BinlogSeriesWriter: the FDE, the GTID state of the
    output so far (Gtid_list for MariaDB, Previous_GTIDs for MySQL, started from the first
    input file's), and a Rotate naming the next *output* file. The source's own framing events
    (FILE_FRAMING_TYPES) are dropped: their names and sets describe the input, not the output.
    An input file whose format differs (another checksum setting or server) starts a new output
    file with its own FDE."""

    def __init__(self, directory: str | os.PathLike, basename: str, *, max_size: int = 1 << 30,
                 renumber_positions: bool | None = None):
        self.directory = Path(directory)
        self.basename = basename
        self.max_size = max_size
        self.forced_renumber = renumber_positions
        self.series: BinlogSeriesWriter | None = None
        self._fde: Event | None = None
        self._start_state: Event | None = None
        self._renumber = True
        self._waiting_state = False
        self._closed: list[Path] | None = None

    @property
    def renumber_positions(self) -> bool:  # type: ignore[override]
        return self._renumber

    def begin_file(self, fde: Event, path: Path) -> bool:
        if self._fde is None:
            self._fde = fde
            self._waiting_state = True
            self._renumber = self.forced_renumber if self.forced_renumber is not None else \
                not looks_like_relay_log(path)
            return True
        if self.series is not None and _format_key(fde.fmt) != _format_key(self._fde.fmt):
            old = self.series
            self.series = BinlogSeriesWriter(self.directory, self.basename, fde, max_size=self.max_size,
                                             first_number=old.number + 1, renumber_positions=self._renumber)
            self.series.gtids = old.gtids
            self.series.names = list(old.names)
            self.series.bytes_written = old.bytes_written
            old._finish_file(self.series._name(self.series.number))
            self._fde = fde
        return True

    def _series(self) -> BinlogSeriesWriter:
        if self.series is None:
            self.series = BinlogSeriesWriter(self.directory, self.basename, self._fde, max_size=self.max_size,
                                             start_state=self._start_state, renumber_positions=self._renumber)
        return self.series

    def write(self, events: Sequence[Event]) -> None:
        if len(events) == 1 and events[0].type_code in FILE_FRAMING_TYPES:
            event = events[0]
            # The first input file's GTID state (before any transaction) starts the output's.
            if self._waiting_state and self.series is None and event.type_code in (
                    EventType.PREVIOUS_GTIDS, EventType.MARIADB_GTID_LIST):
                self._start_state = event
            return
        self._waiting_state = False
        self._series().write_transaction(events)

    def write_gtid_commit(self, gtid_raw, fmt, source_pos) -> int:
        raw = bytes(gtid_raw) + _commit_event(gtid_raw, fmt)
        self.write_raw(raw, 2, source_pos)
        return len(raw)

    def write_raw(self, raw, count, source_pos) -> None:
        # Rotation and GTID tracking as in BinlogSeriesWriter.write_transaction, so that both
        # routes produce the same files.
        self._waiting_state = False
        series = self._series()
        writer = series.writer_for_unit()
        self._write_raw_into(writer, raw, count, source_pos)
        first = Event(bytes(raw[: _U32.unpack_from(raw, 9)[0]]), 0, writer.fmt)
        if first.is_gtid:
            series.gtids.add(first)

    def close(self) -> list[Path]:
        if self._closed is None:
            if self.series is None and self._fde is not None:
                self._series()
            self._closed = self.series.close() if self.series is not None else []
        return self._closed


# ---------------------------------------------------------------------------------------------
# the loop
_ROWS = frozenset(int(t) for t in ROWS_EVENT_TYPES)
_TABLE_MAP = int(EventType.TABLE_MAP)
_XID = int(EventType.XID)
_QUERY = int(EventType.QUERY)
_ANNOTATIONS = frozenset({int(EventType.ANNOTATE_ROWS), int(EventType.ROWS_QUERY)})
_GTIDS = frozenset({int(EventType.GTID), int(EventType.ANONYMOUS_GTID), int(EventType.GTID_TAGGED),
                    int(EventType.MARIADB_GTID)})
_MARIADB_GTID = int(EventType.MARIADB_GTID)
_FDE = int(EventType.FORMAT_DESCRIPTION)


class BinlogFilter:
    """Filters binlog files into a sink with one TransactionFilter; `stats` accumulates.

    `fast=False` sends every unit through the reference path (TransactionGrouper +
    TransactionFilter.filter); the default takes the ROW fast path where it applies."""

    def __init__(self, tfilter: TransactionFilter, sink: Sink, *, verify_checksums: bool = True,
                 fast: bool = True, on_result: Callable[[FilterResult], None] | None = None):
        self.tfilter = tfilter
        self.sink = sink
        self.verify_checksums = verify_checksums
        self.fast = fast
        self.on_result = on_result
        self.stats = FilterStats()
        self._names: dict[bytes, bool] = {}  # raw (db, table) bytes of a Table_map -> kept

    # -- reference path ----------------------------------------------------------------------
    def _unit(self, txn: Transaction) -> None:
        result = self.tfilter.filter(txn)
        if txn.kind == CONTROL and txn.events[0].type_code == EventType.FORMAT_DESCRIPTION:
            self._names.clear()
        self.stats.add_result(result)
        if self.on_result is not None:
            self.on_result(result)
        events = result.events
        if not events:
            return
        if txn.kind == CONTROL:
            self.sink.write(events)
            return
        # One byte range per unit, renumbered in one pass, instead of an Event rebuilt per event.
        # A unit kept whole is contiguous in the source (its positions may still be right);
        # anything changed or synthesised is always renumbered (source_pos -1).
        raw = b"".join([e.raw for e in events])
        self.sink.write_raw(raw, len(events), events[0].pos if result.outcome == KEPT else -1)

    def _consumed_control(self, event: Event) -> None:
        """An FDE the sink wrote (or framed) itself: filtered for its side effects and counted."""
        self._names.clear()
        result = self.tfilter.filter(Transaction(CONTROL, [event]))
        self.stats.add_result(result)
        if self.on_result is not None:
            self.on_result(result)

    def filter_paths(self, paths: Iterable[str | os.PathLike]) -> FilterStats:
        for path in paths:
            self.filter_file(Path(path))
        self.stats.unparsed_statements = getattr(self.tfilter.decider, "unparsed", 0)
        return self.stats

    def filter_file(self, path: Path) -> None:
        with open_binlog(path) as stream:
            try:
                if self.fast and self.on_result is None:
                    self._walk_fast(stream, path)
                else:
                    self._walk_reference(stream, path)
            except (OSError, EOFError) as exc:
                raise BinlogError(f"read error: {exc}", path=str(path)) from None
        self.stats.files_in += 1

    def _walk_reference(self, stream, path: Path) -> None:
        grouper = TransactionGrouper()
        for event in BinlogReader(stream, str(path), verify_checksums=self.verify_checksums):
            if event.type_code == EventType.FORMAT_DESCRIPTION and grouper.current is None:
                if self.sink.begin_file(event, path):
                    self._consumed_control(event)
                    continue
            for unit in grouper.push(event):
                self._unit(unit)
        for unit in grouper.flush():
            self._unit(unit)

    # -- fast path ---------------------------------------------------------------------------
    def _walk_fast(self, stream, path: Path) -> None:
        """The reference path's output for every unit, with the common ROW transaction handled
        on raw bytes: `GTID [BEGIN] ( [Annotate_rows|Rows_query] Table_map... Rows... )* XID`
        where every statement's Table_maps get one decision (so no STMT_END_F has to move).

        The loop hops from header to header itself (like the minimal baseline) and checks CRCs
        inline; it makes Event objects only for what leaves the fast path. A unit starts on the
        fast path at a GTID while the grouper is idle. At the first event it does not handle (a
        statement, context events, a payload, a statement whose tables are partly kept, the end
        of a read chunk) the unit's events so far are handed to the grouper, which takes the
        unit to its end exactly as the reference path would.

        Into a FileSink that renumbers positions, MariaDB units kept whole and emptied groups
        (GTID + COMMIT) are built here and collected as byte pieces, written once per read
        chunk (and before anything else writes to the sink), with their statistics summed
        locally. Per statement the loop only notes whether it was kept or dropped; the byte
        ranges of the dropped ones are found again (`_dropped_statements`) for the rare unit
        that is partly kept."""
        name = str(path)
        checker = EventSplitter(name, verify_checksums=self.verify_checksums)  # FDEs, CRCs, unknown types
        grouper = TransactionGrouper()
        push = grouper.push
        unit = self._unit
        names = self._names
        table_kept = self.tfilter.decider.table_kept
        sink = self.sink
        verify = self.verify_checksums
        unpack = HEADER.unpack_from
        crc32 = zlib.crc32
        gtid_types, annotations = _GTIDS, _ANNOTATIONS
        TABLE_MAP, XID, QUERY, MARIADB_GTID, FDE = _TABLE_MAP, _XID, _QUERY, _MARIADB_GTID, _FDE
        hlen = HEADER_LEN
        crc_residue = _CRC_RESIDUE

        fmt: FormatDescription | None = None
        crc_len = 0
        tm_at = HEADER_LEN + 8
        check_crc = False
        type_size = _TYPE_SIZE.unpack_from
        # Rows event types taken on the fast path: those whose flags' low byte (STMT_END_F = 0x1)
        # sits at `flag_off` (all of them, unless a pre-GA 5.1 format mixes table id lengths).
        rows_fast = _ROWS
        flag_off = HEADER_LEN + 6

        # Fast-unit state: `start` (-1: none) is its offset in buf; `body_start` where its
        # statements start (after the GTID, or after BEGIN); `stmt_start` where the current
        # statement starts and `stmt_keep` its decision (None: no Table_map yet); `any_kept` /
        # `any_dropped` whether a finished statement of the unit was kept / dropped.
        start = -1
        gtid_end = body_start = stmt_start = 0
        stmt_keep = None
        n = 0
        any_kept = any_dropped = False
        mariadb = False
        # Output written by the loop itself: only into a FileSink's writer, and only when
        # positions are renumbered (the COMMIT's placeholder log_pos then never shows, whereas a
        # relay log keeps whatever TransactionFilter gives it, so the reference path builds it).
        # The writer exists once the sink has seen the first FDE.
        direct: BinlogWriter | None = None
        direct_renumber = False
        pieces: list = []  # bytes for direct.out not written yet (direct.position counts them)
        put = pieces.append
        empty_keep = self.tfilter.empty_transactions != "drop"
        pack_u32 = _U32.pack
        commit_pack = _COMMIT_EVENT.pack
        commit_body = _COMMIT_BODY
        commit_size = 0
        emptied_n = emptied_events_in = emptied_bytes_in = emptied_bytes_out = 0
        skipped_n = skipped_events_in = skipped_bytes_in = 0
        kept_n = kept_events = kept_bytes = 0
        partial_n = partial_events_in = partial_bytes_in = partial_events_out = partial_bytes_out = 0
        e_size = -1  # the GTID size e_unpack/g_pack/e_pack are for (emptied groups)
        e_unpack = g_pack = e_pack = None

        def flush() -> None:
            direct.out.write(b"".join(pieces))
            pieces.clear()

        def hand_over(buffer, base: int, at: int, stop: int) -> None:
            """Give a fast unit's events [at, stop) to the grouper (the reference path)."""
            if pieces:
                flush()
            while at < stop:
                size = unpack(buffer, at)[3]
                for done in push(Event(bytes(buffer[at : at + size]), base + at, fmt)):
                    unit(done)
                at += size

        magic = stream.read(4)
        if magic != b"\xfebin":
            if len(magic) < 4:
                raise TruncatedBinlogError(f"file is {len(magic)} bytes long, too short for the binlog magic", path=name, offset=0)
            raise BinlogError(f"bad magic {magic.hex()} (expected fe62696e): not a binlog file", path=name, offset=0)
        buf = b""
        off = 0
        base = 4  # file offset of buf[0]
        try:
            while True:
                chunk = stream.read(FAST_CHUNK)
                if not chunk:
                    break
                if start >= 0:  # a fast unit runs across the chunk boundary: reference path
                    hand_over(buf, base, start, off)
                    start = -1
                elif pieces:
                    flush()
                base += off
                buf = buf[off:] + chunk if off < len(buf) else chunk
                off = 0
                end = len(buf)
                last = end - hlen  # the last offset a whole header fits at
                while off <= last:
                    t, size = type_size(buf, off)
                    nxt = off + size
                    if nxt > end or size < hlen:
                        if size < hlen or size > MAX_EVENT_SIZE:
                            raise BinlogError(f"event size {size} is impossible (type {t})", path=name, offset=base + off)
                        break
                    if t in gtid_types and grouper.current is None and fmt is not None and not (
                            t == MARIADB_GTID and buf[off + HEADER_LEN + 12] & MARIADB_FL_STANDALONE):
                        if check_crc and crc32(buf[off:nxt]) != crc_residue:
                            raise ChecksumError(f"CRC32 mismatch in {type_name(t)} event", path=name, offset=base + off)
                        start = off
                        gtid_end = body_start = stmt_start = nxt
                        mariadb = t == MARIADB_GTID
                        stmt_keep = None
                        any_kept = any_dropped = False
                        n = 1
                        off = nxt
                        # The unit's events, until its XID or the first event the fast path
                        # does not take (handed over with the unit so far: start is -1 then).
                        while off <= last:
                            t, size = type_size(buf, off)
                            nxt = off + size
                            if nxt > end or size < hlen:
                                if size < hlen or size > MAX_EVENT_SIZE:
                                    raise BinlogError(f"event size {size} is impossible (type {t})", path=name,
                                                      offset=base + off)
                                break
                            # Inside a fast unit: only known fixed-shape events; CRC checked here (a
                            # whole event's CRC-32, its own CRC included, is a constant residue).
                            if check_crc and crc32(buf[off:nxt]) != crc_residue:
                                raise ChecksumError(f"CRC32 mismatch in {type_name(t)} event", path=name, offset=base + off)
                            n += 1
                            if t == TABLE_MAP:
                                at = off + tm_at
                                tbl_at = at + 2 + buf[at]
                                key = buf[at : tbl_at + 1 + buf[tbl_at]]
                                keep = names.get(key)
                                if keep is None:
                                    _, db, table = Event(buf[off:nxt], 0, fmt).table_map
                                    keep = names[key] = table_kept(db, table)
                                if stmt_keep is None:
                                    stmt_keep = keep
                                elif stmt_keep != keep:  # partly kept statement: STMT_END_F may move
                                    hand_over(buf, base, start, nxt)
                                    start = -1
                                    off = nxt
                                    break
                                off = nxt
                                continue
                            if t in rows_fast:
                                if stmt_keep is None:  # rows without their Table_map in this unit
                                    hand_over(buf, base, start, nxt)
                                    start = -1
                                    off = nxt
                                    break
                                if buf[off + flag_off] & 1:  # STMT_END_F: the statement ends here
                                    if stmt_keep:
                                        any_kept = True
                                    else:
                                        any_dropped = True
                                    stmt_start = nxt
                                    stmt_keep = None
                                off = nxt
                                continue
                            if t in annotations:
                                off = nxt
                                continue
                            if t == XID and stmt_start == off:  # no statement left open
                                if not direct_renumber or not mariadb:
                                    if pieces:
                                        flush()
                                    self._finish_fast(buf, start, nxt, gtid_end, n,
                                                      self._dropped_statements(buf, body_start, off, tm_at, flag_off)
                                                      if any_dropped else [],
                                                      any_kept, base + start, fmt, mariadb)
                                elif not any_dropped:
                                    # Kept whole (or nothing to decide): the unit's bytes, renumbered.
                                    out_pos = direct.position
                                    if out_pos == base + start:
                                        put(buf[start:nxt])
                                    else:
                                        put(renumbered(buf[start:nxt], out_pos, crc_len > 0))
                                    direct.position = out_pos + nxt - start
                                    kept_n += 1
                                    kept_events += n
                                    kept_bytes += nxt - start
                                elif any_kept:
                                    # Partly kept: the unit without its dropped statements, renumbered
                                    # (always: positions after a dropped statement move).
                                    parts, at, n_out = [], start, n
                                    for first, stop, count in self._dropped_statements(buf, body_start, off, tm_at, flag_off):
                                        parts.append(buf[at:first])
                                        at = stop
                                        n_out -= count
                                    parts.append(buf[at:nxt])
                                    raw = renumbered(b"".join(parts), direct.position, crc_len > 0)
                                    put(raw)
                                    direct.position += len(raw)
                                    partial_n += 1
                                    partial_events_in += n
                                    partial_bytes_in += nxt - start
                                    partial_events_out += n_out
                                    partial_bytes_out += len(raw)
                                elif empty_keep:
                                    # Every statement dropped: the GTID + the COMMIT Query the
                                    # reference path frames an emptied MariaDB group with (see
                                    # _write_gtid_commit_into).
                                    out_pos = direct.position
                                    gsize = gtid_end - start
                                    if gsize != e_size:  # structs for this GTID size and format
                                        e_size = gsize
                                        e_unpack, g_pack, e_pack = _emptied_structs(gsize, crc_len)
                                    ts, typ, sid, _, glp, flags, gbody = e_unpack(buf, start)
                                    if glp and out_pos != base + start:
                                        # GTID with its output log_pos, COMMIT, both CRCs: one piece.
                                        gend = out_pos + gsize
                                        clp = gend + commit_size
                                        if crc_len:
                                            put(e_pack(ts, typ, sid, gsize, gend, flags, gbody,
                                                       crc32(g_pack(ts, typ, sid, gsize, gend, flags, gbody)),
                                                       ts, QUERY, sid, commit_size, clp, 0, commit_body,
                                                       crc32(commit_pack(ts, QUERY, sid, commit_size, clp, 0, commit_body))))
                                        else:
                                            put(e_pack(ts, typ, sid, gsize, gend, flags, gbody,
                                                       ts, QUERY, sid, commit_size, clp, 0, commit_body))
                                    else:
                                        # The GTID as it is (log_pos 0, or already its output offset).
                                        put(buf[start:gtid_end])
                                        commit = commit_pack(ts, QUERY, sid, commit_size,
                                                             glp and out_pos + gsize + commit_size, 0, commit_body)
                                        put(commit)
                                        if crc_len:
                                            put(pack_u32(crc32(commit)))
                                    direct.position = out_pos + gsize + commit_size
                                    emptied_n += 1
                                    emptied_events_in += n
                                    emptied_bytes_in += nxt - start
                                    emptied_bytes_out += gsize + commit_size
                                else:
                                    skipped_n += 1
                                    skipped_events_in += n
                                    skipped_bytes_in += nxt - start
                                start = -1
                                off = nxt
                                break
                            if t == QUERY and off == gtid_end and not mariadb and is_begin_event(buf, off, size, fmt):
                                stmt_start = body_start = nxt
                                off = nxt
                                continue
                            # Anything else: the reference path takes the unit from here, this
                            # event included (the outer loop reads it again).
                            hand_over(buf, base, start, off)
                            start = -1
                            break
                        if start >= 0:  # the read chunk ends inside the unit
                            break
                        continue
                    elif direct_renumber and t == MARIADB_GTID and grouper.current is None and fmt is not None:
                        # A standalone group (DDL): GTID + Query, decided by the TransactionFilter,
                        # written here (see _standalone_group).
                        qend = nxt + type_size(buf, nxt)[1] if nxt + hlen <= end else end + 1
                        if qend <= end and buf[nxt + 4] == QUERY and qend - nxt >= hlen and \
                                self._standalone_group(buf, off, nxt, qend, base, fmt, direct, put, check_crc, name):
                            off = qend
                            continue
                    # The reference path, event by event.
                    if pieces:
                        flush()
                    event = Event(buf[off:nxt], base + off, fmt)
                    checker._check(event)
                    if t == FDE:
                        fmt = checker.fmt
                        event.fmt = fmt
                        crc_len = fmt.checksum_len
                        check_crc = verify and crc_len > 0
                        commit_size = HEADER_LEN + len(_COMMIT_BODY) + crc_len
                        e_size = -1
                        tm_at = HEADER_LEN + fmt.post_header_lens[TABLE_MAP - 1]
                        offsets = {r: HEADER_LEN + fmt.table_id_len(r) for r in _ROWS}
                        flag_off = max(sorted(set(offsets.values())), key=list(offsets.values()).count)
                        rows_fast = frozenset(r for r, at in offsets.items() if at == flag_off)
                        if grouper.current is None and sink.begin_file(event, path):
                            self._consumed_control(event)
                            if direct is None:  # the sink opens its writer at the first FDE
                                direct = sink.direct_writer()
                                direct_renumber = direct is not None and direct.renumber_positions
                            off = nxt
                            continue
                    for done in push(event):
                        unit(done)
                    off = nxt
            if start >= 0:  # the file ended inside a fast unit: incomplete, reference path
                hand_over(buf, base, start, off)
                start = -1
        finally:
            if pieces:
                flush()
        stats = self.stats
        stats.transactions_in += emptied_n + skipped_n + kept_n + partial_n
        stats.kept += kept_n
        stats.partial += partial_n
        stats.emptied += emptied_n
        stats.skipped += skipped_n
        stats.events_in += emptied_events_in + skipped_events_in + kept_events + partial_events_in
        stats.bytes_in += emptied_bytes_in + skipped_bytes_in + kept_bytes + partial_bytes_in
        stats.events_out += 2 * emptied_n + kept_events + partial_events_out
        stats.bytes_out += emptied_bytes_out + kept_bytes + partial_bytes_out
        if direct is not None:
            direct.events_written += 2 * emptied_n + kept_events + partial_events_out
        if off < len(buf):
            left = len(buf) - off
            msg = (f"event size {unpack(buf, off)[3]} runs past the end of the file ({left} bytes left)"
                   if left >= HEADER_LEN else f"file ends inside an event header ({left} of {HEADER_LEN} bytes)")
            raise TruncatedBinlogError(msg, path=name, offset=base + off)
        for done in grouper.flush():
            unit(done)

    def _standalone_group(self, buf, off: int, q: int, end: int, base: int, fmt: FormatDescription,
                          direct: BinlogWriter, put: Callable, check_crc: bool, name: str) -> bool:
        """A MariaDB FL_STANDALONE GTID at buf[off:q] followed by a Query at buf[q:end]: the
        unit the grouper makes of them, filtered by the TransactionFilter, its output (the
        unit, or the GTID + COMMIT of an emptied group) appended to `put` for `direct`.
        False (nothing done) when the Query opens a group (BEGIN, XA START)."""
        if check_crc:
            for at, stop in ((off, q), (q, end)):
                if zlib.crc32(buf[at:stop]) != _CRC_RESIDUE:
                    raise ChecksumError(f"CRC32 mismatch in {type_name(buf[at + 4])} event", path=name, offset=base + at)
        gtid = Event(buf[off:q], base + off, fmt)
        query = Event(buf[q:end], base + q, fmt)
        if _opens_group(query.sql or ""):
            return False
        result = self.tfilter.filter(Transaction(TRANSACTION, [gtid, query]))
        outcome = result.outcome
        out_pos = direct.position
        size = end - off
        crc_len = fmt.checksum_len
        if outcome == EMPTIED:
            # TransactionFilter._empty_transaction: the GTID without FL_STANDALONE and FL_DDL
            # (an ordinary group now), closed by a COMMIT Query; renumbered like any output.
            gsize = q - off
            ts, _, sid, _, glp, _ = HEADER.unpack_from(buf, off)
            g = bytearray(buf[off : q - crc_len])
            g[HEADER_LEN + 12] &= ~(MARIADB_FL_STANDALONE | MARIADB_FL_DDL) & 0xFF
            commit_size = HEADER_LEN + len(_COMMIT_BODY) + crc_len
            if glp:
                _U32.pack_into(g, _LOG_POS_OFFSET, out_pos + gsize)
            commit = _COMMIT_EVENT.pack(ts, _QUERY, sid, commit_size, glp and out_pos + gsize + commit_size, 0,
                                        _COMMIT_BODY)
            put(g)
            if crc_len:
                put(_U32.pack(zlib.crc32(g)))
            put(commit)
            if crc_len:
                put(_U32.pack(zlib.crc32(commit)))
            events_out, written = 2, gsize + commit_size
        elif outcome == KEPT and len(result.events) == 2:
            put(buf[off:end] if out_pos == base + off else renumbered(buf[off:end], out_pos, crc_len > 0))
            events_out, written = 2, size
        else:  # skipped (or anything else): what _unit writes
            events = result.events
            raw = b"".join([e.raw for e in events])
            if raw:
                put(raw if outcome == KEPT and out_pos == events[0].pos else renumbered(raw, out_pos, crc_len > 0))
            events_out, written = len(events), len(raw)
        direct.position = out_pos + written
        direct.events_written += events_out
        self.stats.add(outcome, 2, size, events_out, written)
        return True

    def _dropped_statements(self, buf, at: int, stop: int, tm_at: int, flag_off: int) -> list[tuple[int, int, int]]:
        """(start, end, events) of the statements in buf[at:stop] whose tables are not kept: the
        statements of a fast unit that got to its XID, decided again from the name cache."""
        names = self._names
        type_size = _TYPE_SIZE.unpack_from
        dropped = []
        stmt_start, stmt_keep, count = at, None, 0
        while at < stop:
            t, size = type_size(buf, at)
            nxt = at + size
            count += 1
            if t == _TABLE_MAP:
                if stmt_keep is None:
                    name_at = at + tm_at
                    tbl_at = name_at + 2 + buf[name_at]
                    stmt_keep = names[buf[name_at : tbl_at + 1 + buf[tbl_at]]]
            elif t in _ROWS and buf[at + flag_off] & 1:
                if not stmt_keep:
                    dropped.append((stmt_start, nxt, count))
                stmt_start, stmt_keep, count = nxt, None, 0
            at = nxt
        return dropped

    def _finish_fast(self, buf, start: int, end: int, gtid_end: int, n: int, dropped: list, any_kept: bool,
                     source_pos: int, fmt, mariadb: bool) -> None:
        """A complete fast unit [start, end) of `buf` (n events); `dropped` holds the byte
        ranges and event counts of its statements whose tables are not kept."""
        size = end - start
        sink = self.sink
        counts = self.stats
        if not dropped:  # kept whole (or nothing to decide: a GTID..XID group without rows)
            sink.write_raw(memoryview(buf)[start:end], n, source_pos)
            counts.add(KEPT, n, size, n, size)
            return
        if any_kept:
            # Whole statements dropped, the rest kept: the same bytes the reference path writes.
            parts, at = [], start
            n_out = n
            for first, last, count in dropped:
                parts.append(buf[at:first])
                at = last
                n_out -= count
            parts.append(buf[at:end])
            raw = b"".join(parts)
            if mariadb:
                # Positions after a dropped statement move: renumbered wherever it lands (-1).
                sink.write_raw(raw, n_out, -1)
                counts.add(PARTIAL, n, size, n_out, len(raw))
                return
            # MySQL GTIDs carry transaction_length: rewrite it on Event objects.
            events = fix_transaction_length(_split(raw, source_pos, fmt))
            sink.write(events)
            counts.add(PARTIAL, n, size, len(events), sum(e.size for e in events))
            return
        # Every statement dropped: an emptied transaction, framed as the reference path does.
        tfilter = self.tfilter
        if tfilter.empty_transactions == "drop":
            counts.add(SKIPPED, n, size, 0, 0)
            return
        gtid_raw = buf[start:gtid_end]
        if mariadb and sink.renumber_positions:
            # GTID (never standalone here) + the COMMIT Query the reference path builds.
            written = sink.write_gtid_commit(gtid_raw, fmt, source_pos)
            counts.add(EMPTIED, n, size, 2, written)
            return
        events = [Event(bytes(gtid_raw), source_pos, fmt)]
        if buf[gtid_end + 4] == _QUERY:
            size2 = _U32.unpack_from(buf, gtid_end + 9)[0]
            events.append(Event(bytes(buf[gtid_end : gtid_end + size2]), source_pos + gtid_end - start, fmt))
        last = _last_event_start(buf, start, end)
        events.append(Event(bytes(buf[last:end]), source_pos + last - start, fmt))
        framed = tfilter.empty_transaction_events(Transaction(TRANSACTION, events))
        sink.write(framed)
        counts.add(EMPTIED, n, size, len(framed), sum(e.size for e in framed))


def _split(raw: bytes, pos: int, fmt) -> list[Event]:
    out, at = [], 0
    while at < len(raw):
        size = _U32.unpack_from(raw, at + 9)[0]
        out.append(Event(raw[at : at + size], pos + at, fmt))
        at += size
    return out


def _last_event_start(buf, start: int, end: int) -> int:
    at = start
    while True:
        size = _U32.unpack_from(buf, at + 9)[0]
        if at + size >= end:
            return at
        at += size




@functools.lru_cache(maxsize=64)
def _emptied_structs(gtid_size: int, crc_len: int) -> tuple[Callable, Callable, Callable]:
    """For an emptied MariaDB group whose GTID is `gtid_size` bytes long: (unpack the GTID's
    header fields and body, pack the GTID without CRC, pack GTID + COMMIT Query with CRCs)."""
    gtid = f"IBIIIH{gtid_size - HEADER_LEN - crc_len}s"
    commit = f"IBIIIH{len(_COMMIT_BODY)}s"
    crc = "I" if crc_len else ""
    return (struct.Struct("<" + gtid).unpack_from, struct.Struct("<" + gtid).pack,
            struct.Struct("<" + gtid + crc + commit + crc).pack)


def _commit_event(gtid_raw: bytes, fmt: FormatDescription) -> bytes:
    """TransactionFilter._empty_transaction's COMMIT for this GTID: its timestamp and server
    id, a placeholder log_pos the writer renumbers (0 stays 0), a CRC when the format has one."""
    timestamp, _, server_id, _, log_pos, _ = HEADER.unpack_from(gtid_raw, 0)
    placeholder = log_pos and log_pos + HEADER_LEN + len(_COMMIT_BODY) + fmt.checksum_len
    crc = fmt.checksum_len > 0
    raw = HEADER.pack(timestamp, _QUERY, server_id, HEADER_LEN + len(_COMMIT_BODY) + (4 if crc else 0),
                      placeholder, 0) + _COMMIT_BODY
    return raw + _U32.pack(zlib.crc32(raw)) if crc else raw


def filter_files(paths: Sequence[str | os.PathLike], tfilter: TransactionFilter, sink: Sink, *,
                 verify_checksums: bool = True, fast: bool = True) -> FilterStats:
    """Filter `paths` in order into `sink` (closed at the end); returns the statistics."""
    bf = BinlogFilter(tfilter, sink, verify_checksums=verify_checksums, fast=fast)
    try:
        bf.filter_paths(paths)
    finally:
        sink.close()
    return bf.stats


def filter_bytes(data: bytes, tfilter: TransactionFilter, *, fast: bool = True,
                 verify_checksums: bool = True) -> tuple[bytes, FilterStats]:
    """Filter one binlog held in memory into a new one (tests and small tools)."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="dumpfilter-") as tmp:
        src, dst = Path(tmp, "in.bin"), Path(tmp, "out.bin")
        src.write_bytes(data)
        stats = filter_files([src], tfilter, FileSink(dst), fast=fast, verify_checksums=verify_checksums)
        return dst.read_bytes(), stats


__all__ = ["BinlogFilter", "FileSink", "FilterStats", "SeriesSink", "Sink", "filter_bytes", "filter_files",
           "looks_like_relay_log"]
