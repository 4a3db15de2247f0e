"""The end of what a live server has written to a binlog file: the end of its last complete event.
A file can end a few bytes into the next event (its header or its body, the server still writing
it); those bytes are "not yet written", as a dump thread treats them (it sends up to the end of the
last whole event group the server flushed, never a part of one). Readers, `caught_up` and
`master status` all count from this end, not from the file's size."""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import BinaryIO

from dumpfilter import _core
from dumpfilter.binlogs.files import open_regular
from dumpfilter.codec.constants import HEADER_LEN

CHUNK = 1 << 20


def hop_to_end(f: BinaryIO, start: int, size: int) -> int:
    """The offset after the last complete event of the open file `f` from `start` (an event
    boundary) up to `size`. Reads at most CHUNK bytes at a time: the compiled hop walks the headers
    of a chunk; an event larger than a chunk is stepped over by its size, without being read."""
    pos = start
    while pos + HEADER_LEN <= size:
        f.seek(pos)
        buf = f.read(min(CHUNK, size - pos))
        at = _core.hop(buf, 0).stop
        if at:
            pos += at
            continue
        event_size = int.from_bytes(buf[9:13], "little")
        if event_size < HEADER_LEN or pos + event_size > size:
            break  # a partly written event (or not an event at all): nothing complete from here
        pos += event_size
    return pos


class WrittenEnd:
    """`of(path)`: the written end of a binlog file, remembered per file so that a growing live
    file is hopped only over what was added since the last call (a stat and a short read per
    call while it does not grow). `note` tells it of an event boundary a reader found (the end
    of the units a segment's scan read), so that the first `of` hops from there, not over the
    whole file: the first stream to reach the end of a 220 MB file read all of it again (0.1 s)."""

    def __init__(self) -> None:
        self._known: tuple[Path, int, int, int] | None = None  # (path, inode, size, end)
        self._boundary: tuple[Path, int, int] | None = None  # (path, inode, an event boundary)
        self._lock = threading.Lock()
        # One `of` at a time: a second caller takes the first's end, not a hop of its own (the
        # master's warm-up and the shadow pass both hopped a whole 587 MB file as it started).
        self._hopping = threading.Lock()

    def note(self, path: Path, inode: int, boundary: int) -> None:
        """`boundary` is where an event of the file `path` (inode `inode`) starts or the file's
        written bytes end: a hop of it may start there."""
        with self._lock:
            known = self._boundary
            if known is None or known[0] != path or known[1] != inode or known[2] < boundary:
                self._boundary = (path, inode, boundary)

    def of(self, path: Path) -> int:
        with self._hopping, open_regular(path) as f:  # never a FIFO's block, one line for what cannot be read
            st = os.fstat(f.fileno())
            size = st.st_size
            if size <= 4:
                return size  # not even the magic yet: nothing written past it
            known, noted = self._known, self._boundary
            start = 4
            if known is not None and known[0] == path and known[1] == st.st_ino and known[3] <= size:
                if known[2] == size:
                    return known[3]
                start = known[3]
            if noted is not None and noted[0] == path and noted[1] == st.st_ino and start < noted[2] <= size:
                start = noted[2]
            end = hop_to_end(f, start, size)
        with self._lock:
            self._known = (path, st.st_ino, size, end)
        return end
