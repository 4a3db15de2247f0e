"""The one writer of a numbered series of binlog files (`<base>.000001`, ... plus `<base>.index`),
for `filter --out DIR`, `split` (in this process and each Spark join task), the workload generator
and the tests: each file opens with the FDE and the GTID state so far (Gtid_list or
Previous_GTIDs), rotates at a size limit on a unit boundary, and ends with a Rotate naming the
next file.

Units come in as Event lists (`write_transaction`), or as raw bytes back to back in a bytearray
(`write_run`: split's fast path), which one loop in the core renumbers log_pos and re-CRCs in
place (`renumber`) before they go to the file in one write. Both give the same bytes."""

from __future__ import annotations

import bisect
import os
import struct
from collections.abc import Sequence
from pathlib import Path
from typing import BinaryIO

from dumpfilter.codec import BinlogWriter, Event, EventType, FormatDescription, GtidTracker, fix_transaction_length
from dumpfilter.codec.constants import GTID_EVENT_TYPES
from dumpfilter._core import gtid_marks as core_gtid_marks, mysql_gtids_at as core_mysql_gtids_at
from dumpfilter._core import renumber as core_renumber
from dumpfilter.codec.writer import fde_for_new_file
from dumpfilter.binlogs.files import write_index

# Events the series writes itself for each file; a source's own copies are not carried over.
FILE_FRAMING_TYPES = frozenset({
    EventType.FORMAT_DESCRIPTION, EventType.ROTATE, EventType.STOP, EventType.PREVIOUS_GTIDS,
    EventType.MARIADB_GTID_LIST, EventType.BINLOG_CHECKPOINT,
})
DEFAULT_MAX_BINLOG_SIZE = 1 << 30  # max_binlog_size's default and maximum
_GTID_DRAIN = 65536  # GTID events kept for the next file's GTID state before folding them in
_U32 = struct.Struct("<I")
_GTID_TYPES = frozenset(int(t) for t in GTID_EVENT_TYPES)


def encode_unit(events: Sequence[Event]) -> bytes:
    """A unit's bytes as `write_transaction` would write them, before renumbering: the GTID
    event's transaction_length fixed, events back to back (what `write_run` takes)."""
    return b"".join(event.raw for event in fix_transaction_length(events))


def renumber(buf: bytearray, start: int, stop: int, base: int, crc_len: int, fmt: FormatDescription) -> int:
    """Give every event in `buf[start:stop]` (whole events, back to back, to be written at file
    offset `base`) its end offset as log_pos, except where log_pos is 0, and recompute the CRC of
    each event whose log_pos changed; in place. Returns the last non-zero timestamp (0: none)."""
    done = core_renumber(buf, start, stop, base, bool(crc_len))
    last_ts = done.last_timestamp
    for off in done.fdes:  # carries its own checksum setting: the codec's path
        end = off + _U32.unpack_from(buf, off + 9)[0]
        buf[off:end] = Event(bytes(buf[off:end]), 0, fmt).with_header(log_pos=end + base - start).raw
    return last_ts


class BinlogSeriesWriter:
    """`write_transaction(events)` or `write_run(buf, ends)` append units (in any mix);
    `close()` finishes the last file and returns the series' paths. A context manager.

    `start_state` is the source's Gtid_list / Previous_GTIDs event, if any: the first output
    file opens with that state, and every later one with it plus the GTIDs written since.
    `renumber_positions` off (copying a relay log, whose log_pos are the source's) is for the
    Event path only. `change_format(fde)` starts a new file with another FDE."""

    def __init__(self, directory: str | os.PathLike[str], basename: str, fde: Event, *,
                 max_size: int = DEFAULT_MAX_BINLOG_SIZE, start_state: Event | None = None,
                 renumber_positions: bool = True):
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.basename = basename
        self.max_size = max_size
        self.renumber_positions = renumber_positions
        self._set_fde(fde)
        self.gtids = GtidTracker()
        if start_state is not None:
            self.gtids.start_from(start_state)
        self._pending_gtids: list[bytes] = []  # GTID events not yet added to self.gtids
        self.names: list[str] = []
        self.number = 1
        self._file: BinaryIO | None = None
        self.writer: BinlogWriter | None = None
        self._framed_at = 0  # the current file's offset after its framing

    def _set_fde(self, fde: Event) -> None:
        self.fde = fde
        self.flavor = fde.fmt.flavor if fde.fmt else "mysql"
        self.fmt = fde.fmt or FormatDescription.parse(fde.raw)

    def _name(self, number: int) -> str:
        return f"{self.basename}.{number:06d}"

    def _drain_gtids(self) -> None:
        fmt, add = self.fmt, self.gtids.add
        for raw in self._pending_gtids:
            add(Event(raw, 0, fmt))
        self._pending_gtids.clear()

    def track_gtids(self, buf: bytes | bytearray, marks: bytes) -> None:
        """`track_gtid` of each unit starting at `marks` (packed u64 offsets in `buf`, each a GTID
        event: `gtid_marks`): the untagged MySQL GTIDs read by the core as runs and added as
        intervals (a MySQL split or filter wrote each unit's GTID decoded in Python, 10 s of a
        202 MB binlog's 12.5 s); the others one by one, in order."""
        found = core_mysql_gtids_at(buf, marks)
        if found.runs:
            self._drain_gtids()  # (the set's own order is its intervals')
            add = self.gtids.mysql.add_interval
            for run in found.runs:
                add(run.source, run.first, run.last + 1)
        offsets = memoryview(marks).cast("Q")
        for k in found.tagged:
            self.track_gtid(buf, offsets[k])

    def track_gtid(self, buf: bytes | bytearray | memoryview, at: int = 0) -> None:
        """Count the unit starting at `buf[at]` into the GTID state of the next files, if it opens
        with a GTID event (kept as bytes, decoded when a file needs the state)."""
        if buf[at + 4] in _GTID_TYPES:
            self._pending_gtids.append(bytes(buf[at : at + _U32.unpack_from(buf, at + 9)[0]]))
            if len(self._pending_gtids) >= _GTID_DRAIN:
                self._drain_gtids()

    def _open(self) -> BinlogWriter:
        self._drain_gtids()
        name = self._name(self.number)
        self._file = file = open(self.directory / name, "wb")
        self.writer = writer = BinlogWriter(file, fde_for_new_file(self.fde, first=not self.names),
                                            renumber_positions=self.renumber_positions)
        writer.write_gtid_state(self.gtids.mariadb if self.flavor == "mariadb" else self.gtids.mysql)
        self.names.append(name)
        self._framed_at = writer.position
        write_index(self.directory / f"{self.basename}.index", self.names)
        return writer

    def _current(self) -> tuple[BinlogWriter, BinaryIO]:
        """The open file's writer and file (a unit is written after `_open`)."""
        assert self.writer is not None and self._file is not None, "no series file is open"
        return self.writer, self._file

    @property
    def fresh(self) -> bool:
        """Whether the current file holds its framing only (no unit yet)."""
        return self.writer is not None and self.writer.position == self._framed_at

    def _finish_file(self, next_name: str | None) -> None:
        if self.writer is None:
            return
        writer, file = self._current()
        if next_name:
            writer.rotate(next_name)
        file.close()
        self._file = None
        self.writer = None

    def rotate(self) -> None:
        """End the current file with a Rotate and open the next (a caller that writes units into
        `writer` itself and found it full: what `writer_for_unit` does before a unit)."""
        self.number += 1
        self._finish_file(self._name(self.number))
        self._open()

    def writer_for_unit(self) -> BinlogWriter:
        """The writer the next unit goes to: opens the first file, or rotates when the current
        one has reached max_size (units are never split across files). A caller writing the
        unit into it itself also passes the unit to `track_gtid`."""
        if self.writer is None:
            return self._open()
        if self.writer.position >= self.max_size and not self.fresh:
            # (A file that holds no unit yet, opened by `rotate`, takes this one whatever its
            # framing's size: as a file opened here does.)
            self.rotate()
        return self._current()[0]

    def write_transaction(self, events: Sequence[Event]) -> None:
        if not events:
            return
        self.writer_for_unit().write_transaction(events)
        self.track_gtid(events[0].raw)

    def write_run(self, buf: bytearray, ends: Sequence[int], marks: bytes | None = None) -> None:
        """Append the units lying back to back in `buf` (unit i ends at `ends[i]`), as
        `encode_unit` gives them, with no Python step per unit (split's compiled path, issue #40);
        `buf` is renumbered in place. The same bytes as `write_transaction` of each unit's events.
        The units where a file rotates are found by bisection over `ends`, and the GTID events the
        next file's state needs are found by the core (`gtid_marks`) once per piece written.
        `marks`: those GTID events' offsets in `buf` when the caller has them (split's routing
        walk), used when the whole run goes into one file."""
        if not self.renumber_positions:
            raise ValueError("write_run renumbers positions: a series copying log_pos takes Events")
        n = len(ends)
        if not n:
            return
        run, j = 0, 0  # start of the bytes not yet written; the next unit to check for rotation
        if self.writer is None:
            self._open()
            j = 1  # the first unit of a new file is never checked
        while j < n:
            # Unit k (k >= 1) starts at ends[k - 1]; it rotates when the file would reach max_size.
            threshold = self.max_size - self._current()[0].position + run
            if j == 0:
                if threshold > 0:
                    j = 1
                    continue
                k = 0
            else:
                k = bisect.bisect_left(ends, threshold, j - 1) + 1
            if k >= n:
                break
            unit = ends[k - 1] if k else 0
            self._write_piece(buf, run, unit)
            run = unit
            self.rotate()
            j = k + 1
        self._write_piece(buf, run, ends[-1], marks if run == 0 else None)

    def _write_piece(self, buf: bytearray, start: int, stop: int, marks: bytes | None = None) -> None:
        self.track_gtids(buf, core_gtid_marks(buf, start, stop) if marks is None else marks)
        if stop > start:
            writer, file = self._current()
            ts = renumber(buf, start, stop, writer.position, self.fmt.checksum_len, self.fmt)
            if ts:
                writer.last_timestamp = ts
            file.write(memoryview(buf)[start:stop])
            writer.position += stop - start

    def change_format(self, fde: Event) -> None:
        """Later units go to a new file opened with this FDE (an input file whose event format
        differs); the current file ends with a Rotate naming it."""
        if self.writer is not None:
            self.number += 1
            self._finish_file(self._name(self.number))
        self._drain_gtids()  # decoded under the format they were written in
        self._set_fde(fde)

    def close(self) -> list[Path]:
        """Finish the last file (no Rotate: like a server's active binlog); returns the files."""
        if self.writer is None and not self.names:
            self._open()  # an empty series still gets one valid file
        self._finish_file(None)
        return [self.directory / n for n in self.names]

    def __enter__(self) -> BinlogSeriesWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
