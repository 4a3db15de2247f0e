"""Filter a sequence of binlog files into one output: a single binlog file or a numbered series.
It sits at the file-system edge: it opens files and writes them; the decisions are dumpfilter.rules'.

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

import bisect
import io
import os
import struct
import zlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from dumpfilter.codec import BinlogWriter, Event, EventType, Transaction, bad_magic, fix_transaction_length
from dumpfilter.codec.constants import HEADER_LEN, MAGIC
from dumpfilter.codec.encode import query_body
from dumpfilter.errors import BinlogError, TruncatedBinlogError
from dumpfilter.codec.event import HEADER, query_text
from dumpfilter.codec.format_description import FormatDescription
from dumpfilter.codec.scanner import (ANSWER_EMPTY, ANSWER_KEEP, F_COMPLETE, F_FAST, F_HAS_FDE, F_MARIADB_GTID,
                                      Scanner, unit_events)
from dumpfilter.codec.scanner import foreign_log_pos
from dumpfilter.codec.scanner import renumber as core_renumber
from dumpfilter.codec.scanner import statements as core_statements
from dumpfilter.codec.transactions import CONTROL, TRANSACTION
from dumpfilter.binlogs.files import open_binlog
from dumpfilter.binlogs.series import FILE_FRAMING_TYPES, BinlogSeriesWriter
from dumpfilter.rules.transaction_filter import (EMPTIED, KEPT, PARTIAL, PASSED, SKIPPED, FilterResult,
                                            TransactionFilter)

_U32 = struct.Struct("<I")
_U16 = struct.Struct("<H")
_TYPE_SIZE = struct.Struct("<4xB4xI")  # (type_code, event_size) of a common header
_SIZE_POS = struct.Struct("<II")  # (event_size, log_pos), 9 bytes into a common header
_CRC_RESIDUE = 0x2144DF1C  # zlib.crc32 of any data followed by its own CRC-32 (little-endian)
_LOG_POS_OFFSET = 13  # timestamp u32, type u8, server_id u32, event_size u32, then log_pos u32
_QUERY = int(EventType.QUERY)
_COMMIT_BODY = query_body("COMMIT", "")  # what TransactionFilter._empty_transaction's COMMIT holds
FAST_CHUNK = 4 << 20
_UNANSWERED = 3  # `_lone_answers`: a unit the assembly must stop at (any byte but the two answers)
_LONE_FLAGS = F_MARIADB_GTID | F_COMPLETE


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

    def add_assembled(self, counts: tuple) -> int:
        """The compiled assembly's counters (see the core's assemble::Counts); returns the
        events it wrote."""
        (kept, kept_events, kept_bytes, partial, partial_ein, partial_bin, partial_eout, partial_bout,
         emptied, emptied_ein, emptied_bin, emptied_bout, skipped, skipped_ein, skipped_bin) = counts
        units = kept + partial + emptied + skipped
        events_out = kept_events + partial_eout + 2 * emptied
        self.transactions_in += units
        self.kept += kept
        self.partial += partial
        self.emptied += emptied
        self.skipped += skipped
        self.events_in += kept_events + partial_ein + emptied_ein + skipped_ein
        self.bytes_in += kept_bytes + partial_bin + emptied_bin + skipped_bin
        self.events_out += events_out
        self.bytes_out += kept_bytes + partial_bout + emptied_bout
        return events_out

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
    return foreign_log_pos(data, 4)


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
    starting at `out_pos`, and fresh CRCs; what BinlogWriter.write does event by event. The core
    renumbers; an FDE inside (a relay log's) gets the same treatment here."""
    buf = bytearray(raw)
    _, fdes = core_renumber(buf, 0, len(buf), out_pos, checksum)
    for start in fdes:
        end = start + _U32.unpack_from(buf, start + 9)[0]
        _U32.pack_into(buf, start + _LOG_POS_OFFSET, out_pos + end)
        if checksum:
            _U32.pack_into(buf, end - 4, zlib.crc32(memoryview(buf)[start : end - 4]))
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


class BinlogFilter:
    """Filters binlog files into a sink with one TransactionFilter; `stats` accumulates.

    `fast=False` sends every unit through the reference path (TransactionFilter.filter on its
    Events); the default decides fast units from their tables (see `_walk`)."""

    def __init__(self, tfilter: TransactionFilter, sink: Sink, *, verify_checksums: bool = True,
                 fast: bool = True, on_result: Callable[[FilterResult], None] | None = None):
        self.tfilter = tfilter
        self.sink = sink
        self.verify_checksums = verify_checksums
        self.fast = fast
        self.on_result = on_result
        self.stats = FilterStats()
        self._keep = bytearray()  # by the scanner's name id of a Table_map: 1 kept, 0 not, 2 not known yet

    # -- reference path ----------------------------------------------------------------------
    def _unit(self, txn: Transaction) -> None:
        result = self.tfilter.filter(txn)
        if txn.kind == CONTROL and txn.events[0].type_code == EventType.FORMAT_DESCRIPTION:
            self._keep.clear()
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
        self._keep.clear()
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
                self._walk(stream, path)
            except (OSError, EOFError) as exc:
                raise BinlogError(f"read error: {exc}", path=str(path)) from None
        self.stats.files_in += 1

    def _walk(self, stream, path: Path) -> None:
        """One pass of the compiled scanner over the file, a few MB at a time: it checks every
        event and hands back one record per unit. A fast unit (the common ROW transaction,
        `GTID [BEGIN] {Annotate_rows|Rows_query|Table_map|Rows}* XID`) is decided from its
        tables' cached answers and written as byte ranges (`_fast_unit`); every other unit,
        and every unit when `fast` is off or a caller wants each FilterResult, goes to the
        TransactionFilter as Events (the reference path)."""
        name = str(path)
        scanner = Scanner(name, verify_checksums=self.verify_checksums)
        magic = stream.read(4)
        if magic != MAGIC:
            if len(magic) < 4:
                raise TruncatedBinlogError(f"file is {len(magic)} bytes long, too short for the binlog magic", path=name, offset=0)
            raise bad_magic(name)
        fast = self.fast and self.on_result is None
        fmt: FormatDescription | None = None
        empty_keep = self.tfilter.empty_transactions != "drop"
        direct: BinlogWriter | None = None
        buf, base = b"", 4  # base: the file offset of buf[0]
        # A plain file is read again from where the scan stopped (the unit cut at the chunk's end,
        # usually a few hundred bytes), instead of joining the rest to the next chunk: a copy of
        # every byte saved. A compressed stream cannot seek back cheaply: joined.
        rereads = isinstance(stream, io.BufferedReader)
        want = FAST_CHUNK
        while True:
            if rereads:
                buf = stream.read(want)
                eof = len(buf) < want
            else:
                chunk = stream.read(FAST_CHUNK)
                eof = not chunk
                buf = buf + chunk if buf else chunk
            scan = scanner.units(buf, 0, base, at_eof=eof)
            units, tables = scan.units, scan.tables
            words = units.words
            i, n = 0, len(units)
            slow, answers, answered_to = None, None, 0
            while i < n:
                if fast and direct is not None and fmt is not None and direct.fmt.checksum_len == fmt.checksum_len:
                    if not words[8 * i + 2] >> 40 & F_FAST and i >= answered_to and direct.renumber_positions:
                        if slow is None:
                            slow = scanner.slow_units()
                        answers, answered_to = self._lone_answers(units, slow, buf, base, fmt, i)
                    # (The assembly stops at once at a unit not fast and not answered.)
                    if words[8 * i + 2] >> 40 & F_FAST or (i < answered_to and answers[i] != _UNANSWERED):
                        # Fast units and answered statements in bulk: written by the compiled assembly.
                        out, nxt, out_pos, counts = scanner.assemble(
                            buf, i, self._keeps(scanner.names), direct.position, base, direct.renumber_positions,
                            fmt.checksum_len > 0, empty_keep, _COMMIT_BODY, answers=answers)
                        if nxt > i:
                            direct.out.write(out)
                            direct.position = out_pos
                            direct.events_written += self.stats.add_assembled(counts)
                            i = nxt
                            continue
                rec = units[i]
                i += 1
                if fast and rec.flags & F_FAST and self._fast_unit(rec, buf, base, fmt, tables, scanner.names):
                    continue
                raw = buf[rec.start : rec.end]
                events, fmt = unit_events(raw, base + rec.start, fmt, path=name)
                if rec.flags & F_HAS_FDE and rec.kind == CONTROL:
                    self._keep.clear()
                    if self.sink.begin_file(events[0], path):
                        self._consumed_control(events[0])
                        direct = self.sink.direct_writer()
                        continue
                self._unit(Transaction(rec.kind, events, rec.complete))
            if scan.error is not None:
                raise scan.error
            buf, base = buf[scan.stop :], base + scan.stop
            if eof:
                break
            if rereads:
                # A unit longer than the chunk: read more at once next time.
                want = FAST_CHUNK if scan.stop else want * 2
                stream.seek(base)
        if buf:
            left = len(buf)
            msg = (f"event size {_U32.unpack_from(buf, 9)[0]} runs past the end of the file ({left} bytes left)"
                   if left >= HEADER_LEN else f"file ends inside an event header ({left} of {HEADER_LEN} bytes)")
            raise TruncatedBinlogError(msg, path=name, offset=base)

    def _lone_answers(self, units, slow, buf, base: int, fmt, start: int) -> tuple[bytes, int]:
        """The answers of the units that are not fast from unit `start` on, up to the first one
        that is not a MariaDB GTID and one Query (DDL, standalone groups): each decided by the
        TransactionFilter in stream order (so the schema model replays as before), kept whole
        (ANSWER_KEEP) or emptied (ANSWER_EMPTY), for the assembly to write in bulk. Returns
        (one byte per unit of the scan, the index the answers stop at)."""
        answers = bytearray([_UNANSWERED]) * len(units)
        words = units.words
        lone_kept = self.tfilter.lone_text_kept
        min_gtid = HEADER_LEN + 13 + fmt.checksum_len  # seq_no, domain, flags2 (and its CRC)
        stop = len(units)
        for i in slow[bisect.bisect_left(slow, start):]:
            w = 8 * i
            word = words[w + 2]
            q = words[w] + words[w + 3]
            if word & 0xFFFFFFFF != 2 or word >> 40 & _LONE_FLAGS != _LONE_FLAGS or words[w + 3] < min_gtid:
                stop = i
                break
            text = query_text(buf, q, words[w + 1], fmt)
            if text is None:  # Query_compressed, or malformed (an error raised in order by the per-unit path)
                stop = i
                break
            answers[i] = ANSWER_KEEP if lone_kept(text[1], text[0]) else ANSWER_EMPTY
        return bytes(answers), stop

    def _keeps(self, names: list[tuple[str, str]]) -> bytes:
        """The keep byte of every table name the scanner has met (the rules asked once per
        name, and again after each Format_description event)."""
        keep = self._keep
        if len(keep) < len(names):
            keep.extend(b"\x02" * (len(names) - len(keep)))
        if 2 in keep:
            table_kept = self.tfilter.decider.table_kept
            for i, k in enumerate(keep):
                if k == 2:
                    keep[i] = 1 if table_kept(*names[i]) else 0
        return bytes(keep)

    def _fast_unit(self, rec, buf, base: int, fmt, tables, names) -> bool:
        """A fast unit decided from its tables, when every statement's Table_maps get one answer
        (so no STMT_END_F has to move): written whole, without its dropped statements, or as
        the emptied group, exactly as the reference path writes it. False: not decided here."""
        known = self._keeps(names)
        keeps = [known[i] == 1 for i in tables[rec.tables_lo : rec.tables_hi]]
        start, end = rec.start, rec.end
        gtid_end = start + rec.gtid_size
        mariadb = bool(rec.flags & F_MARIADB_GTID)
        if all(keeps):
            dropped, any_kept = [], True
        elif not any(keeps):
            dropped, any_kept = [(gtid_end, end, rec.events)], False
        else:
            body = gtid_end if mariadb else gtid_end + _U32.unpack_from(buf, gtid_end + 9)[0]  # after BEGIN
            statements = core_statements(buf, body, end)
            if statements is None:
                return False
            dropped, any_kept = [], False
            at, t0 = body, 0
            for stmt_end, events, t1 in statements:
                if t1 == t0:
                    return False  # a statement without its own Table_map
                keep = keeps[t0]
                if any(k != keep for k in keeps[t0 + 1 : t1]):
                    return False  # a partly kept statement: its STMT_END_F moves
                if keep:
                    any_kept = True
                else:
                    dropped.append((at, stmt_end, events))
                at, t0 = stmt_end, t1
        self._finish_fast(buf, start, end, gtid_end, rec.events, dropped, any_kept, base + start, fmt, mariadb)
        return True

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
            events = fix_transaction_length(unit_events(raw, source_pos, fmt)[0])
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
        unit, _ = unit_events(bytes(buf[start:end]), source_pos, fmt)
        # The GTID, the BEGIN of a MySQL unit, and the XID: what the empty transaction is framed from.
        events = [unit[0], *([unit[1]] if unit[1].type_code == _QUERY else []), unit[-1]]
        framed = tfilter.empty_transaction_events(Transaction(TRANSACTION, events))
        sink.write(framed)
        counts.add(EMPTIED, n, size, len(framed), sum(e.size for e in framed))


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
