"""The one-pass segment reader: the compiled scanner over a binlog file's window, a segment's
worth of whole units at a time, into the core's UnitList (`SegmentReader`)."""

from __future__ import annotations

import os
import struct
from collections.abc import Generator
from typing import TYPE_CHECKING

from dumpfilter import _core
from dumpfilter.codec import Transaction, bad_magic
from dumpfilter.codec.format_description import FormatDescription
from dumpfilter.codec.constants import MAGIC
from dumpfilter.errors import BinlogError, PositionError, TruncatedBinlogError
from dumpfilter.codec.scanner import F_HAS_FDE, Scanner, UnitRecord, unit_events, unit_record
from dumpfilter.binlogs import TailingReader
from dumpfilter.binlogs.files import Listing, open_regular
from dumpfilter.binlogs.tail import confined_rotate_target
from dumpfilter.master.read.columns import Columns, LazyUnits, Part, UnitIndex
from dumpfilter.master.read.units import UNIT_KINDS, Pos, Segment, Unit, unit_end
from dumpfilter.master.read.windows import ReadBuffer, Window

if TYPE_CHECKING:
    from dumpfilter.master.read.segments import SegmentCache

_TYPE_SIZE = struct.Struct("<4xB4xI")  # type_code, event_size of a common header
CHUNK = 1 << 20

# A segment read as a generator: it pauses (yields) after each scan it starts, and returns the segment.
Steps = Generator[None, None, Segment]


class _Stop(Exception):
    """The segment is full."""


def drive(steps: Steps) -> Segment:
    """Runs a segment read's generator (`SegmentCache._steps`) to its end: the segment."""
    while True:
        try:
            next(steps)
        except StopIteration as done:
            seg: Segment = done.value
            return seg


class _Opener(TailingReader):
    """The reference reader's checks of a start position and its file order (a TailingReader
    that never follows), with the binlog listing the cache keeps (`SegmentCache.file_names`)."""

    def __init__(self, cache: SegmentCache, file: str, pos: int) -> None:
        self._names = cache.file_names
        super().__init__(cache.directory, file, pos, verify_checksums=cache.verify_checksums)

    def files(self) -> Listing:
        return self._names()


class SegmentReader:
    """Reads one segment in a single pass of the compiled scanner (`dumpfilter.codec.scanner`): it
    hops from header to header, checks CRCs, groups the units exactly as TransactionGrouper does
    and marks the common ROW transaction (`GTID [BEGIN] {Annotate_rows|Rows_query|Table_map|
    Rows}* XID`, every rows event after its own Table_map) as fast, with its tables and GTID.
    The units go straight into the core's UnitList (`Scanner.scan_start`, the scan on a thread of the
    core's, which a read ahead leaves running, see `steps`): Python sees no record per
    unit, never an event; a Unit (raw bytes plus what a decision needs, its Events made only when
    a slave's answer needs TransactionFilter) is made when a stream asks for it. Files, rotation,
    the end of what is written and errors follow TailingReader."""

    # The scan thread reads the segment's statement units too (MIXED, STATEMENT binlogs: each
    # Query's key, `UnitIndex.statement_units`), after its scan: for a segment read ahead, while
    # the streams send the one before, off their path. Nothing is built where no unit may be a
    # statement unit (a ROW binlog's segment).
    STATEMENTS_AHEAD = True

    def __init__(self, cache: SegmentCache, start: Pos) -> None:
        self.cache = cache
        self.start = start
        self.cols = Columns()
        self.size = 0
        # The scanner checks a segment's CRC runs on a second thread of the core's while it walks
        # (its default for buffers of 1 MB and more). When the scan ran on the stream's thread
        # that cost more than it saved; now that it runs ahead on a thread of its own, which the
        # stream waits for, the checker shortens that wait (bench_dump, one slave: about 2%).
        self.scanner = Scanner(verify_checksums=cache.verify_checksums)

    def steps(self) -> Steps:
        """The segment's read as a generator: it pauses after each scan it starts (the core
        scans on a thread of its own meanwhile) and returns the segment."""
        cache, start = self.cache, self.start
        file, pos = start
        at_end = False
        error: BinlogError | None = None
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
                if not os.path.lexists(cache.directory / nxt) or cache.file_names().not_yet_indexed(nxt):
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
        seg.index = UnitIndex(cols)
        return seg

    def _file(self, opener: _Opener, name: str, start: int) -> Generator[None, None, str | None]:
        """Read one file from `start` (a generator, see `steps`); returns the file to continue
        with, or None at the end of what is written. Raises _Stop when the segment is full."""
        cache = self.cache
        path = cache.directory / name
        scanner = self.scanner
        scanner.path = str(path)
        unit_list = self.cols.unit_list
        with open_regular(path) as f:
            st = os.fstat(f.fileno())
            size = st.st_size
            if start > size:
                raise PositionError(f"position {start} is past the end of '{name}' ({size} bytes)")
            chunk = max(CHUNK, cache.segment_bytes + (64 << 10))  # the segment and the unit that ends it
            # (made before the checks below read the file: a file it maps is read without read ahead)
            window = Window(f, str(path), max(start, 4), chunk, cache.mappings if cache.map_closed else None)
            splitter = opener.open_at(f, path, start)  # checks the start position
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
            rotated_to: str | None = None
            while True:
                at_eof = False
                if not window.more():
                    if rotated_to:
                        return rotated_to
                    newer = opener.next_file(name)
                    if newer is None:
                        return None
                    # A newer file exists. A writer (the server, the --source series) makes it
                    # only once this one is whole, so this one may have grown between the look at
                    # its end and the look for a newer file: look again. Under load that gap held
                    # the rest of the file's last transaction, which went out as an incomplete unit
                    # (bench soak: a torn transaction at a rotation), and, after --source
                    # reconnected to a restarted primary, whole transactions the primary wrote
                    # before its crash, which the series appended just before the next file's
                    # first event: they were never sent (a real replica lacked a row, CI of 5306c11d).
                    if not window.more():
                        if not window.left():
                            return newer
                        # Still inside a unit: a crash cut it. The whole events left come out as an
                        # incomplete unit; a partial event (a closed file truncated inside it) is
                        # DATA_LOSS at its offset, before any of its unit goes out: a slave given
                        # the unit's whole events failed on them ("the master's batch ended inside
                        # a transaction") and never saw the error behind them.
                        cut = _core.hop(window.buf, window.off).stop
                        if cut < len(window.buf):
                            raise TruncatedBinlogError(
                                f"a closed binlog file ends inside an event ({len(window.buf) - cut} bytes of it "
                                f"left; the file was truncated, and {newer} follows it)",
                                path=str(path), offset=window.base + cut)
                        at_eof = True
                buf, base = window.buf, window.base
                scanner.scan_start(unit_list, buf, window.off, base, name, cache.segment_bytes - self.size,
                                   at_eof, self.STATEMENTS_AHEAD, annotations=cache.texts_wanted())
                yield
                scan = scanner.scan_finish(unit_list)
                if (cache.read_ahead and scan.added and scan.error is None and scan.last_rotate < 0
                        and unit_list.size >= cache.segment_bytes):
                    # This scan fills the segment, which ends where it stopped: the next one's
                    # scan starts now, before this one's bookkeeping (SegmentCache.start_ahead).
                    cache.start_ahead((name, base + scan.stop))
                if scan.error is None:
                    cache.written.note(path, st.st_ino, base + scan.stop)  # a unit's end: an event boundary
                fmt = self._add_units(scan.added, buf, base, name, fmt)
                if scan.last_rotate >= 0:
                    at = scan.last_rotate
                    end = at + _TYPE_SIZE.unpack_from(buf, at)[1] - scanner.checksum_len
                    rotated_to = confined_rotate_target(bytes(buf[at + 27 : end]).decode("utf-8", "surrogateescape"),
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
                    return rotated_to or opener.next_file(name)

    def _add_units(self, n: int, buf: ReadBuffer, base: int, name: str, fmt: FormatDescription | None
                   ) -> FormatDescription | None:
        """Records the part the last scan added to the UnitList (its `n` units, a fixed number of
        Python operations whatever n is, but for units holding an FDE, made now). Returns the
        format in force after them."""
        if not n:
            return fmt
        cols = self.cols
        unit_list = cols.unit_list
        first = len(unit_list) - n
        cols.names = self.scanner.names
        start_fmt = fmt
        fmts: list[FormatDescription | None] | None = None
        if unit_list.flags_any & F_HAS_FDE:
            with_fde = set(unit_list.with_flags(F_HAS_FDE, first))
            if with_fde:  # rare (relay logs, a new file's FDE): a format per unit of this part
                fmts = []
                for k in range(first, first + n):
                    fmts.append(fmt)
                    if k in with_fde:
                        _, rec = unit_record(unit_list, k)
                        unit = self._unit_with_fde(rec, bytes(buf[rec.start : rec.end]), base + rec.start, name, fmt)
                        fmt = unit.txn.events[-1].fmt if unit.txn.events else fmt
                        cols.made[k] = unit
        used = unit_record(unit_list, first + n - 1)[1].end
        cols.parts.append(Part(buf, name, base, first, start_fmt, fmts, self.scanner.checksum_len, used))
        self.size = unit_list.size
        return fmt

    def _unit_with_fde(self, rec: UnitRecord, raw: bytes, pos: int, name: str, fmt: FormatDescription | None) -> Unit:
        """A unit holding a Format_description event: its Events are made now, each with the
        format in force where it stands."""
        events, fmt = unit_events(raw, pos, fmt, path=self.scanner.path)
        txn = Transaction(UNIT_KINDS[rec.kind], events, rec.complete)
        return Unit(txn, name, unit_end(name, events[-1]))
