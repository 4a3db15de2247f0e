"""The bytes of one binlog file a segment scans (`Window`): a file the server has closed is mapped
read-only, one still in use is read."""

from __future__ import annotations

import mmap
import os

from dumpfilter.codec import EventType

_FDE = int(EventType.FORMAT_DESCRIPTION)


# Flags of the FDE's common header: set while the server writes the file, cleared in place when
# it closes it (the FDE's CRC is computed without it, so the clearing needs no new CRC).
_FDE_FLAGS_AT = 4 + 17
_BINLOG_IN_USE_F = 0x1


def _closed_by_server(fd: int) -> bool:
    """Whether the file's FDE is there and says the server closed the file: it is neither
    written nor truncated again (a crash recovery truncates only the file left in use)."""
    head = os.pread(fd, _FDE_FLAGS_AT + 2, 0)
    return len(head) == _FDE_FLAGS_AT + 2 and head[8] == _FDE and not head[_FDE_FLAGS_AT] & _BINLOG_IN_USE_F


def mapping_cut_short(buf, base: int, used: int) -> int | None:
    """The size of the file `buf` maps (from file offset `base`) when the file was truncated
    since, to less than the `used` bytes of the mapping its units lie in, else None (also for a
    buffer read, not mapped). Bytes mapped past the units are never touched: a --source series
    cut back to its last whole transaction after a reconnect takes none of a segment's units.
    A mapping's pages past a file's new end fault (SIGBUS, which ends the process) when touched:
    whoever holds a mapping looks before touching it (SegmentCache.get, SlaveStream after each
    batch) and gives its readers this error instead. A truncation in the moment between the look
    and the touch still faults: closed files are not truncated by the servers (see
    `_closed_by_server`), only by hand."""
    file_size = getattr(buf, "size", None)  # an mmap's; bytes read have none
    if file_size is None:
        return None
    try:
        size = file_size()  # fstat of the mapping's own descriptor: the file's size now
    except (OSError, ValueError):
        return None
    return size if size < base + used else None


class Window:
    """The bytes of one binlog file that a segment scans, from `base + off` on (buffer offsets
    are buf's, `base` is the file offset of buf[0]). A file the server has closed is mapped
    read-only rather than read, so that its bytes are not copied (a tenth of the master's CPU
    on a large binlog); a file still in use is read, since a mapping would fault (SIGBUS) on a
    truncation. Only a file with at least MAP_MIN bytes left is mapped: a mapping holds a file
    descriptor as long as its segment is cached, and a small one saves nothing. Mapping stays
    off with `mapped=False` (SegmentCache.map_closed), and where the file system refuses it."""

    MAP_MIN = 1 << 20

    def __init__(self, f, start: int, chunk: int, mapped: bool):
        self.f, self.chunk = f, chunk
        fd = f.fileno()
        self.mapped = mapped and os.fstat(fd).st_size - start >= self.MAP_MIN and _closed_by_server(fd)
        self.buf, self.off, self.base = b"", 0, start

    def more(self) -> bool:
        """Extends the window by up to `chunk` bytes of the file; False at what is written."""
        if not self.mapped:
            data = self.f.read(self.chunk)
            if not data:
                return False
            rest = self.buf[self.off:]
            self.buf, self.base, self.off = rest + data if rest else data, self.base + self.off, 0
            return True
        fd = self.f.fileno()
        end = self.base + len(self.buf)
        size = os.fstat(fd).st_size
        if size <= end:
            return False
        at = self.base + self.off
        lo = at - at % mmap.ALLOCATIONGRANULARITY
        try:
            self.buf = mmap.mmap(fd, min(size, end + self.chunk) - lo, mmap.MAP_SHARED, mmap.PROT_READ, offset=lo)
        except OSError:  # a file system without mmap: read from here on
            self.mapped = False
            self.f.seek(end)
            return self.more()
        self.off, self.base = at - lo, lo
        return True

    def left(self) -> int:
        return len(self.buf) - self.off
