"""Writes a numbered series of binlog files (`<base>.000001`, ... plus `<base>.index`): each file
opens with the FDE and the GTID state so far (Gtid_list or Previous_GTIDs), rotates at a size
limit on a transaction boundary, and ends with a Rotate naming the next file."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from dumpfilter.codec import BinlogWriter, Event, EventType, GtidTracker
from dumpfilter.codec.writer import fde_for_new_file
from dumpfilter.binlogs.files import write_index

# Events the series writes itself for each file; a source's own copies are not carried over.
FILE_FRAMING_TYPES = frozenset({
    EventType.FORMAT_DESCRIPTION, EventType.ROTATE, EventType.STOP, EventType.PREVIOUS_GTIDS,
    EventType.MARIADB_GTID_LIST, EventType.BINLOG_CHECKPOINT,
})


class BinlogSeriesWriter:
    """`write_transaction(events)` appends a unit; `close()` finishes the last file.

    `start_state` is the source's Gtid_list / Previous_GTIDs event, if any: the first output
    file opens with that state, and every later one with it plus the GTIDs written since.
    """

    def __init__(self, directory: str | os.PathLike, basename: str, fde: Event, *,
                 max_size: int = 1 << 30, start_state: Event | None = None, first_number: int = 1,
                 renumber_positions: bool = True):
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.basename = basename
        self.fde = fde
        self.max_size = max_size
        self.renumber_positions = renumber_positions
        self.flavor = fde.fmt.flavor if fde.fmt else "mysql"
        self.gtids = GtidTracker()
        if start_state is not None:
            self.gtids.start_from(start_state)
        self.names: list[str] = []
        self.number = first_number
        self._file = None
        self.writer: BinlogWriter | None = None
        self.bytes_written = 0

    def _name(self, number: int) -> str:
        return f"{self.basename}.{number:06d}"

    @property
    def current_path(self) -> Path | None:
        return self.directory / self.names[-1] if self.names else None

    def _open(self) -> None:
        name = self._name(self.number)
        self._file = open(self.directory / name, "wb")
        self.writer = BinlogWriter(self._file, fde_for_new_file(self.fde, first=not self.names),
                                   renumber_positions=self.renumber_positions)
        if self.flavor == "mariadb":
            self.writer.write_gtid_list(self.gtids.mariadb)
        else:
            self.writer.write_previous_gtids(self.gtids.mysql)
        self.names.append(name)
        write_index(self.directory / f"{self.basename}.index", self.names)

    def _finish_file(self, next_name: str | None) -> None:
        if self.writer is None:
            return
        if next_name:
            self.writer.rotate(next_name)
        self.bytes_written += self.writer.position
        self._file.close()
        self._file = None
        self.writer = None

    def writer_for_unit(self) -> BinlogWriter:
        """The writer the next unit goes to: opens the first file, or rotates when the current
        one has reached max_size (units are never split across files)."""
        if self.writer is None:
            self._open()
        elif self.writer.position >= self.max_size:
            self.number += 1
            self._finish_file(self._name(self.number))
            self._open()
        return self.writer

    def write_transaction(self, events: Sequence[Event]) -> None:
        if not events:
            return
        self.writer_for_unit().write_transaction(events)
        first = events[0]
        if first.is_gtid:
            self.gtids.add(first)

    def close(self) -> list[Path]:
        """Finish the last file (no Rotate: like a server's active binlog); returns the files."""
        if self.writer is None and not self.names:
            self._open()  # an empty series still gets one valid file
        self._finish_file(None)
        return [self.directory / n for n in self.names]

    def __enter__(self) -> BinlogSeriesWriter:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
