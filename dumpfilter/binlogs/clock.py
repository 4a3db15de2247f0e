"""The binlog's own clock: the timestamp an event header carries (when the statement started on the
primary), looked up by (file, position), so a chart can be drawn against binlog time rather than
against bytes of binlog. One 19-byte header read per position asked; a position that is not the
start of a plausible event (the end of a file, a hole) has no time."""

from __future__ import annotations

import struct
from collections.abc import Iterable
from pathlib import Path
from typing import BinaryIO

from dumpfilter.binlogs.files import open_binlog

_HEADER = struct.Struct("<IBIII")  # timestamp, type, server_id, event_size, log_pos


class BinlogClock:
    """`at(file, pos)`: the timestamp of the event that starts at `pos` of `file` (a name of
    `paths`), or None. Files are opened once, when first asked, and closed by `close()`."""

    def __init__(self, paths: Iterable[Path]):
        self.paths = {Path(p).name: Path(p) for p in paths}
        self._open: dict[str, BinaryIO] = {}
        self._seen: dict[tuple[str, int], int | None] = {}

    def at(self, file: str, pos: int) -> int | None:
        key = (file, pos)
        if key not in self._seen:
            self._seen[key] = self._read(file, pos)
        return self._seen[key]

    def _read(self, file: str, pos: int) -> int | None:
        path = self.paths.get(file)
        if path is None or pos < 4:
            return None
        stream = self._open.get(file)
        if stream is None:
            try:
                stream = self._open[file] = open_binlog(path)
            except OSError:
                return None
        try:
            stream.seek(pos)
            header = stream.read(_HEADER.size)
        except OSError:
            return None
        if len(header) < _HEADER.size:
            return None
        timestamp, _type, _server, size, _log_pos = _HEADER.unpack(header)
        return timestamp if size >= 19 and timestamp > 0 else None

    def close(self) -> None:
        for stream in self._open.values():
            stream.close()
        self._open.clear()


def timed(points: list[tuple[str, int, int]], clock: BinlogClock) -> list[int | None]:
    """Each (file, pos, ...) point's binlog time: the clock's at that position, else the last known
    one before it (the end of a file), else the first known after it; None only when no point has a
    time (a binlog whose events carry no timestamps)."""
    times = [clock.at(file, pos) for file, pos, *_ in points]
    last = None
    for i, t in enumerate(times):
        if t is None:
            times[i] = last
        else:
            last = t
    first = next((t for t in times if t is not None), None)
    return [first if t is None else t for t in times]
