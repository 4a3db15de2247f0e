"""Writing many output binlog series at once (`OutputSet`): `<name>-bin.000001`, ... and
`<name>-bin.index` per output name, each through `dumpfilter.binlogs.BinlogSeriesWriter`'s raw
path. Both the single-process split (`OutputSet`) and the Spark job's join of segment files
(spark_jobs.tasks.segments) write through `series_writer`.

Units must be added in input order. Units routed to `ALL` (INCIDENT) go to every output: to those
already open at once, and to outputs opened later before their first unit, so every output ends up
with every incident in input order whatever else it holds.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from dumpfilter.codec import Event
from dumpfilter.binlogs.series import DEFAULT_MAX_BINLOG_SIZE, BinlogSeriesWriter, encode_unit
from dumpfilter.spark_jobs.tasks.chunks import SourceHeader
from dumpfilter.spark_jobs.tasks.compiled import Deliver
from dumpfilter.spark_jobs.tasks.routing import ALL

FLUSH_BYTES = 1 << 20  # OutputSet hands an output's pending units to its writer at this size


def series_writer(directory: str | os.PathLike[str], name: str, header: SourceHeader,
                  max_size: int = DEFAULT_MAX_BINLOG_SIZE) -> BinlogSeriesWriter:
    """The series of output `name` under `directory` (the worklog's naming: `<name>-bin.index` and
    `<name>-bin.NNNNNN`), opened with the source's FDE and GTID state."""
    return BinlogSeriesWriter(directory, f"{name}-bin", header.fde, max_size=max_size,
                              start_state=header.start_state)


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

    def __init__(self, writer: BinlogSeriesWriter):
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
            self.writer.write_run(self.buf, self.ends)
            self.buf = bytearray()
            self.ends = []


class OutputSet(Deliver):
    """Open series by output name, where the single-process split delivers its units: `unit(name,
    events)` (or `run`) in input order, then `close()`. Each output's units are buffered and
    written in blocks."""

    def __init__(self, directory: str | os.PathLike[str], header: SourceHeader, max_size: int = DEFAULT_MAX_BINLOG_SIZE):
        self.directory = Path(directory)
        self.header = header
        self.max_size = max_size
        self.outputs: dict[str, _Pending] = {}
        self.incidents: list[bytes] = []

    def _output(self, name: str) -> _Pending:
        output = self.outputs.get(name)
        if output is None:
            output = self.outputs[name] = _Pending(series_writer(self.directory, name, self.header, self.max_size))
            for incident in self.incidents:
                output.append(incident)
        return output

    def unit(self, name: str, events: list[Event]) -> None:
        data = encode_unit(events)
        if name == ALL:
            self.incidents.append(data)
            for output in self.outputs.values():
                output.append(data)
            return
        output = self._output(name)
        output.append(data)
        output.units += 1

    def run(self, name: str, data: bytearray, ends: Sequence[int], marks: bytes | None = None) -> None:
        """Units from the core's routing walk, back to back in `data` (unit i ends at ends[i];
        renumbered in place)."""
        output = self._output(name)
        output.flush()
        output.writer.write_run(data, ends, marks)
        output.units += len(ends)

    def close(self) -> list[OutputSummary]:
        summaries = []
        for name, output in sorted(self.outputs.items()):
            output.flush()
            summaries.append(summarize(name, output.writer.close(), output.units))
        return summaries

