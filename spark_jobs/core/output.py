"""Writing many output binlog series at once: `<name>-bin.000001`, ... and `<name>-bin.index` per
output name, through `binlog_files.BinlogSeriesWriter` (FDE per file, Gtid_list/Previous_GTIDs
computed per output, rotation at the size limit, Rotate between files, positions renumbered,
CRC32 recomputed).

Units must be added in input order. Units routed to `ALL` (INCIDENT) go to every output: to those
already open at once, and to outputs opened later before their first unit, so every output ends up
with every incident in input order whatever else it holds.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from binlog_codec import Event
from binlog_codec.event import HEADER
from binlog_codec.format_description import FormatDescription
from binlog_files import BinlogSeriesWriter
from spark_jobs.core.chunks import SourceHeader
from spark_jobs.core.routing import ALL

DEFAULT_MAX_BINLOG_SIZE = 1 << 30  # max_binlog_size's default and maximum


def pack_events(events: list[Event]) -> bytes:
    return b"".join(event.raw for event in events)


def unpack_events(data: bytes, fmt: FormatDescription, pos: int = 0) -> list[Event]:
    """The events of `pack_events` bytes (event sizes are in their headers)."""
    events = []
    off = 0
    while off < len(data):
        header = HEADER.unpack_from(data, off)
        size = header[3]
        events.append(Event(data[off : off + size], pos + off, fmt, header))
        off += size
    return events


def binlog_basename(name: str) -> str:
    """The worklog's naming: `<name>-bin.index` and `<name>-bin.NNNNNN`."""
    return f"{name}-bin"


@dataclass(frozen=True)
class OutputSummary:
    name: str
    files: tuple[str, ...]
    units: int
    bytes: int


class OutputSet:
    """Open series writers by output name; `add(name, events)` in input order, then `close()`."""

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
        summaries = []
        for name, writer in sorted(self.writers.items()):
            paths = writer.close()
            summaries.append(OutputSummary(name, tuple(p.name for p in paths), self.units[name],
                                           sum(p.stat().st_size for p in paths)))
        return summaries
