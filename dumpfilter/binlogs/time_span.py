"""The binlog's own time range: the first and the last event timestamp of a series of binlog
files (the primary's clock), read from event headers alone, so that a chart of binlog time spans
what the binlog holds (two minutes, not the hour they fall in)."""

from __future__ import annotations

import struct
from collections.abc import Iterator, Sequence
from pathlib import Path

from dumpfilter.binlogs.files import open_binlog

_HEADER = struct.Struct("<IBIII")  # timestamp, type, server_id, event_size, log_pos
_MAGIC = 4
FIRST_EVENTS = 64  # events of the first file looked at for the earliest timestamp


def _stamps(path: Path, limit: int | None = None) -> Iterator[int]:
    """The non-zero timestamps of a file's events in order (at most `limit` events read); stops
    quietly at a header that cannot start an event (a truncated or damaged tail)."""
    block = 1 << 20
    with open_binlog(path) as stream:
        data, base, at, seen = stream.read(block), 0, _MAGIC, 0
        while limit is None or seen < limit:
            if at + _HEADER.size > base + len(data):
                more = stream.read(max(block, at + _HEADER.size - base - len(data)))
                if not more:
                    return
                data, base = data[at - base:] + more, at
            timestamp, _type, _server, size, _pos = _HEADER.unpack_from(data, at - base)
            if size < _HEADER.size:
                return
            seen += 1
            if timestamp:
                yield timestamp
            at += size
            if at - base > len(data):  # the event's body goes past what was read: skip to it
                stream.seek(at) if stream.seekable() else stream.read(at - base - len(data))
                data, base = b"", at


def time_span(files: Sequence[str | Path], last: int | None = None) -> tuple[int, int] | None:
    """(first, last) event timestamp of the series, UTC epoch seconds: the earliest among the
    first file's first FIRST_EVENTS events, the latest in the last file (every header read, unless
    the caller read them: `last`), or None when no event carries a timestamp. An unreadable file
    gives no time, never an error."""
    if not files:
        return None
    try:
        first = min(_stamps(Path(files[0]), FIRST_EVENTS), default=None)
        if last is None:
            last = max(_stamps(Path(files[-1])), default=None)
    except OSError:
        return None
    if first is None or last is None:
        return None
    return (min(first, last), max(first, last))
