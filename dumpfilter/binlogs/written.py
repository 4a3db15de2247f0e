"""The end of what a live server has written to a binlog file: the end of its last complete event.
A file can end a few bytes into the next event (its header or its body, the server still writing
it); those bytes are "not yet written", as a dump thread treats them (it sends up to the end of the
last whole event group the server flushed, never a part of one). Readers, `caught_up` and
`master status` all count from this end, not from the file's size."""

from __future__ import annotations

import os
import threading
from pathlib import Path

from dumpfilter import _core
from dumpfilter.binlogs.files import open_regular
from dumpfilter.codec.constants import HEADER_LEN

CHUNK = 1 << 20


def hop_to_end(f, start: int, size: int) -> int:
    """The offset after the last complete event of the open file `f` from `start` (an event
    boundary) up to `size`. Reads at most CHUNK bytes at a time: the compiled hop walks the headers
    of a chunk; an event larger than a chunk is stepped over by its size, without being read."""
    pos = start
    while pos + HEADER_LEN <= size:
        f.seek(pos)
        buf = f.read(min(CHUNK, size - pos))
        _, at = _core.hop(buf, 0)
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
    call while it does not grow)."""

    def __init__(self) -> None:
        self._known: tuple[Path, int, int, int] | None = None  # (path, inode, size, end)
        self._lock = threading.Lock()

    def of(self, path: Path) -> int:
        with open_regular(path) as f:  # never a FIFO's block, one line for what cannot be read
            st = os.fstat(f.fileno())
            size = st.st_size
            if size <= 4:
                return size  # not even the magic yet: nothing written past it
            known = self._known
            start = 4
            if known is not None and known[0] == path and known[1] == st.st_ino and known[3] <= size:
                if known[2] == size:
                    return known[3]
                start = known[3]
            end = hop_to_end(f, start, size)
        with self._lock:
            self._known = (path, st.st_ino, size, end)
        return end
