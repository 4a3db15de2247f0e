"""The split's output set the slow way: each unit through `BinlogSeriesWriter.write_transaction`,
one Event at a time, where `OutputSet` hands raw bytes to `write_run`. The split tests hold the
raw path to it."""

from __future__ import annotations

import os
from pathlib import Path

from dumpfilter.binlogs import BinlogSeriesWriter
from dumpfilter.binlogs.series import DEFAULT_MAX_BINLOG_SIZE
from dumpfilter.codec import Event
from dumpfilter.spark_jobs.tasks.chunks import SourceHeader
from dumpfilter.spark_jobs.tasks.output import OutputSummary, series_writer, summarize
from dumpfilter.spark_jobs.tasks.routing import ALL


class ReferenceOutputSet:
    """`OutputSet`'s interface (`unit(name, events)`, `close()`), one Event at a time."""

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
            writer = self.writers[name] = series_writer(self.directory, name, self.header, self.max_size)
            self.units[name] = 0
            for incident in self.incidents:
                writer.write_transaction(incident)
        return writer

    def unit(self, name: str, events: list[Event]) -> None:
        if name == ALL:
            self.incidents.append(events)
            for writer in self.writers.values():
                writer.write_transaction(events)
            return
        self._writer(name).write_transaction(events)
        self.units[name] += 1

    def close(self) -> list[OutputSummary]:
        return [summarize(name, writer.close(), self.units[name]) for name, writer in sorted(self.writers.items())]
