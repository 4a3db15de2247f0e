"""Writing many output binlog series at once: `<name>-bin.000001`, ... and `<name>-bin.index` per
output name (FDE per file, Gtid_list/Previous_GTIDs computed per output, rotation at the size
limit on a unit boundary, Rotate between files, positions renumbered, CRC32 recomputed).

`RawSeriesWriter` writes units given as raw bytes: each output's units sit back to back in a
bytearray, and one tight loop renumbers log_pos and recomputes the CRC in place (`renumber`)
before the bytes go to the file in one write. Its files are byte for byte those of
`dumpfilter.binlogs.BinlogSeriesWriter` fed the same events (`ReferenceOutputSet` keeps that slower
path, for the tests). Both the single-process split (`OutputSet`) and the Spark job's join of
segment files (spark_jobs.tasks.segments) write through it.

Units must be added in input order. Units routed to `ALL` (INCIDENT) go to every output: to those
already open at once, and to outputs opened later before their first unit, so every output ends up
with every incident in input order whatever else it holds.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from dumpfilter.codec import BinlogWriter, Event, EventType, GtidTracker, fix_transaction_length
from dumpfilter.codec.constants import GTID_EVENT_TYPES
from dumpfilter.codec.scanner import renumber as core_renumber
from dumpfilter.codec.writer import fde_for_new_file
from dumpfilter.binlogs import BinlogSeriesWriter
from dumpfilter.binlogs.files import write_index
from dumpfilter.spark_jobs.tasks.chunks import SourceHeader
from dumpfilter.spark_jobs.tasks.routing import ALL

DEFAULT_MAX_BINLOG_SIZE = 1 << 30  # max_binlog_size's default and maximum
FLUSH_BYTES = 1 << 20  # OutputSet hands an output's pending units to its writer at this size
_GTID_DRAIN = 65536  # GTID events kept for the next file's GTID state before folding them in
_U32 = struct.Struct("<I")
_GTID_TYPES = frozenset(int(t) for t in GTID_EVENT_TYPES)
_FDE = int(EventType.FORMAT_DESCRIPTION)


def encode_unit(events: Sequence[Event]) -> bytes:
    """A unit's bytes as `BinlogWriter.write_transaction` would write them, before renumbering:
    the GTID event's transaction_length fixed, events back to back."""
    return b"".join(event.raw for event in fix_transaction_length(events))


def renumber(buf: bytearray, start: int, stop: int, base: int, crc_len: int, fmt) -> int:
    """Give every event in `buf[start:stop]` (whole events, back to back, to be written at file
    offset `base`) its end offset as log_pos, except where log_pos is 0, and recompute the CRC of
    each event whose log_pos changed; in place. Returns the last non-zero timestamp (0: none)."""
    last_ts, fdes = core_renumber(buf, start, stop, base, bool(crc_len))
    for off in fdes:  # carries its own checksum setting: the codec's path
        end = off + _U32.unpack_from(buf, off + 9)[0]
        buf[off:end] = Event(bytes(buf[off:end]), 0, fmt).with_header(log_pos=end + base - start).raw
    return last_ts


class RawSeriesWriter:
    """One output series from raw units: `write_units(buf, ends)` appends the units lying back to
    back in `buf` (unit i ends at `ends[i]`; `buf` is renumbered in place), `close()` finishes.
    Same files as `BinlogSeriesWriter(directory, basename, header.fde, max_size=...,
    start_state=header.start_state)` given the same units."""

    def __init__(self, directory: str | os.PathLike, basename: str, header: SourceHeader,
                 max_size: int = DEFAULT_MAX_BINLOG_SIZE):
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.basename = basename
        self.fde = header.fde
        self.fmt = header.fmt
        self.crc_len = self.fmt.checksum_len
        self.max_size = max_size
        self.flavor = self.fmt.flavor
        self.gtids = GtidTracker()
        if header.start_state is not None:
            self.gtids.start_from(header.start_state)
        self._pending_gtids: list[bytes] = []  # GTID events not yet added to self.gtids
        self.names: list[str] = []
        self._file = None
        self._writer: BinlogWriter | None = None
        self.position = 0
        self.last_ts = 0
        self.bytes_written = 0

    def _name(self) -> str:
        return f"{self.basename}.{len(self.names) + 1:06d}"

    def _drain_gtids(self) -> None:
        fmt, add = self.fmt, self.gtids.add
        for raw in self._pending_gtids:
            add(Event(raw, 0, fmt))
        self._pending_gtids.clear()

    def _open(self) -> None:
        self._drain_gtids()
        name = self._name()
        self._file = open(self.directory / name, "wb")
        writer = self._writer = BinlogWriter(self._file, fde_for_new_file(self.fde, first=not self.names))
        if self.flavor == "mariadb":
            writer.write_gtid_list(self.gtids.mariadb)
        else:
            writer.write_previous_gtids(self.gtids.mysql)
        self.position = writer.position
        self.last_ts = writer.last_timestamp
        self.names.append(name)
        write_index(self.directory / f"{self.basename}.index", self.names)

    def _finish_file(self, rotate: bool) -> None:
        writer = self._writer
        if writer is None:
            return
        if rotate:
            writer.position, writer.last_timestamp = self.position, self.last_ts
            writer.rotate(self._name())
            self.position = writer.position
        self.bytes_written += self.position
        self._file.close()
        self._file = self._writer = None

    def _write_run(self, buf: bytearray, start: int, stop: int) -> None:
        if stop > start:
            ts = renumber(buf, start, stop, self.position, self.crc_len, self.fmt)
            if ts:
                self.last_ts = ts
            self._file.write(memoryview(buf)[start:stop])
            self.position += stop - start

    def write_units(self, buf: bytearray, ends: Sequence[int]) -> None:
        run = 0  # start of the bytes not yet written
        unit = 0
        max_size = self.max_size
        gtid_types = _GTID_TYPES
        pending = self._pending_gtids
        for end in ends:
            if self._writer is None:
                self._open()
            elif self.position + (unit - run) >= max_size:
                self._write_run(buf, run, unit)
                run = unit
                self._finish_file(rotate=True)
                self._open()
            if buf[unit + 4] in gtid_types:
                pending.append(bytes(buf[unit : unit + _U32.unpack_from(buf, unit + 9)[0]]))
                if len(pending) >= _GTID_DRAIN:
                    self._drain_gtids()
            unit = end
        if self._writer is not None:
            self._write_run(buf, run, unit)

    def close(self) -> list[Path]:
        """Finish the last file (no Rotate: like a server's active binlog); returns the files."""
        if self._writer is None and not self.names:
            self._open()  # an empty series still gets one valid file
        self._finish_file(rotate=False)
        return [self.directory / n for n in self.names]


def binlog_basename(name: str) -> str:
    """The worklog's naming: `<name>-bin.index` and `<name>-bin.NNNNNN`."""
    return f"{name}-bin"


@dataclass(frozen=True)
class OutputSummary:
    name: str
    files: tuple[str, ...]
    units: int
    bytes: int


def summarize(name: str, paths: list[Path], units: int) -> OutputSummary:
    return OutputSummary(name, tuple(p.name for p in paths), units, sum(p.stat().st_size for p in paths))


class _Pending:
    __slots__ = ("writer", "buf", "ends", "units")

    def __init__(self, writer: RawSeriesWriter):
        self.writer = writer
        self.buf = bytearray()
        self.ends: list[int] = []
        self.units = 0

    def append(self, data: bytes) -> None:
        self.buf += data
        self.ends.append(len(self.buf))
        if len(self.buf) >= FLUSH_BYTES:
            self.flush()

    def flush(self) -> None:
        if self.ends:
            self.writer.write_units(self.buf, self.ends)
            self.buf = bytearray()
            self.ends = []


class OutputSet:
    """Open series by output name; `add(name, events)` (or `add_raw(name, encode_unit(events))`)
    in input order, then `close()`. Each output's units are buffered and written in blocks."""

    def __init__(self, directory: str | os.PathLike, header: SourceHeader, max_size: int = DEFAULT_MAX_BINLOG_SIZE):
        self.directory = Path(directory)
        self.header = header
        self.max_size = max_size
        self.outputs: dict[str, _Pending] = {}
        self.incidents: list[bytes] = []

    def _output(self, name: str) -> _Pending:
        output = self.outputs.get(name)
        if output is None:
            output = self.outputs[name] = _Pending(
                RawSeriesWriter(self.directory, binlog_basename(name), self.header, self.max_size))
            for incident in self.incidents:
                output.append(incident)
        return output

    def add(self, name: str, events: list[Event]) -> None:
        self.add_raw(name, encode_unit(events))

    def add_raw(self, name: str, data: bytes) -> None:
        if name == ALL:
            self.incidents.append(data)
            for output in self.outputs.values():
                output.append(data)
            return
        output = self._output(name)
        output.append(data)
        output.units += 1

    def close(self) -> list[OutputSummary]:
        summaries = []
        for name, output in sorted(self.outputs.items()):
            output.flush()
            summaries.append(summarize(name, output.writer.close(), output.units))
        return summaries


class ReferenceOutputSet:
    """`OutputSet` through `dumpfilter.binlogs.BinlogSeriesWriter`, one Event at a time: the slow
    reference the tests hold the raw writer to."""

    def __init__(self, directory: str | os.PathLike, header: SourceHeader, max_size: int = DEFAULT_MAX_BINLOG_SIZE):
        self.directory = Path(directory)
        self.header = header
        self.max_size = max_size
        self.writers: dict[str, BinlogSeriesWriter] = {}
        self.units: dict[str, int] = {}
        self.incidents: list[list[Event]] = []

    def _writer(self, name: str) -> BinlogSeriesWriter:
        writer = self.writers.get(name)
        if writer is None:
            writer = self.writers[name] = BinlogSeriesWriter(
                self.directory, binlog_basename(name), self.header.fde, max_size=self.max_size,
                start_state=self.header.start_state)
            self.units[name] = 0
            for incident in self.incidents:
                writer.write_transaction(incident)
        return writer

    def add(self, name: str, events: list[Event]) -> None:
        if name == ALL:
            self.incidents.append(events)
            for writer in self.writers.values():
                writer.write_transaction(events)
            return
        self._writer(name).write_transaction(events)
        self.units[name] += 1

    def close(self) -> list[OutputSummary]:
        return [summarize(name, writer.close(), self.units[name]) for name, writer in sorted(self.writers.items())]
