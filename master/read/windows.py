"""The bytes of one binlog file a segment scans (`Window`): a file the server has closed is mapped
read-only, one still in use is read; the mappings, one per closed file for the whole master, that
every segment's window is a view into (`MappingFiles`)."""

from __future__ import annotations

import contextlib
import mmap
import os
import threading
from collections import OrderedDict
from collections.abc import Iterable
from typing import BinaryIO

from dumpfilter.binlogs.files import closed_by_server

# A window's bytes: read (bytes), or a view into the master's one mapping of a closed file
# (MappingFiles.view).
ReadBuffer = bytes | memoryview


def _replaced(directory: str, name: str, key: tuple[int, int]) -> bool:
    """Whether file `name` of `directory` is no longer the file `key` (st_dev, st_ino): deleted or
    replaced."""
    try:
        now = os.stat(os.path.join(directory, name))
    except OSError:
        return True
    return (now.st_dev, now.st_ino) != key


def mapping_cut_short(buf: ReadBuffer, base: int, used: int) -> int | None:
    """The size of the file `buf` maps (from file offset `base`) when the file was truncated
    since, to less than the `used` bytes of the mapping its units lie in, else None (also for a
    buffer read, not mapped). Bytes mapped past the units are never touched: a --source series
    cut back to its last whole transaction after a reconnect takes none of a segment's units.
    A mapping's pages past a file's new end fault (SIGBUS, which ends the process) when touched:
    whoever holds a mapping looks before touching it (SegmentCache.get, SlaveStream after each
    batch) and gives its readers this error instead. A truncation in the moment between the look
    and the touch still faults: closed files are not truncated by the servers (see
    `closed_by_server`), only by hand."""
    owner = buf.obj if isinstance(buf, memoryview) else buf  # a view's mapping (MappingFiles.view)
    if not isinstance(owner, _MMAP):  # bytes read
        return None
    try:
        size = owner.size()  # fstat of the mapping's own descriptor: the file's size now
    except (OSError, ValueError):
        return None
    return size if size < base + used else None


# `master serve --binlog-huge-pages` (MappingFiles.huge_pages): a mapping of a closed file asks for
# its page-cache misses in 2 MB folios (MADV_HUGEPAGE), which the kernel maps with one PMD entry
# each: a stream's pass over a segment then takes one fault per 2 MB instead of one per 64 KB
# (fault-around), and handing its pages back (MADV_DONTNEED) drops four entries, not 2,048. Eight
# do-db slaves each cross every page of the binlog (every page holds units of every schema): over
# bench fanout_procs' 648 MB binlog in 2 MB folios they cost the master about 46,000 faults and
# 1.1-1.2 s of CPU, in 4 KB folios 98,000 and 1.9-2.0 s. Pages already in the page cache keep
# their folios (a server's small appends leave 4 KB ones): the advice shapes only what is read
# from disk. Off by default: on this machine, a VM whose free memory goes back to its host (free
# page reporting), the first touch of a 2 MB folio read into such memory cost more than the faults
# saved (one slave over the 648 MB read from disk: 1.85 s of CPU instead of 1.04 s; eight, 2.32 s
# instead of 1.64 s). docs/performance.md has the runs.
_MADV_HUGEPAGE = getattr(mmap, "MADV_HUGEPAGE", None)


_MMAP = mmap.mmap  # the type (tests count the mappings made by patching mmap.mmap)


def shared_view(buf: ReadBuffer) -> bool:
    """Whether `buf` is a view into a mapping the master shares (MappingFiles.view): its pages are
    handed back (MADV_DONTNEED over the view's file range) only behind the streams, once its
    segment has left the cache and the resident budget (SegmentCache._keep): a stream that reaches
    them again maps them again from the page cache."""
    return isinstance(buf, memoryview) and isinstance(buf.obj, _MMAP)


def _advise(fd: int, advice: str) -> None:
    """posix_fadvise over the whole file, where there is one."""
    if hasattr(os, "posix_fadvise"):
        os.posix_fadvise(fd, 0, 0, getattr(os, advice))


class MappingFiles:
    """ONE mapping of each closed file for the whole master (issue #42), made of a description of
    its own the first time a segment reaches the file, and every segment's window is a view into
    it (`view`): a page's page-table entry is set once, by the first stream to touch it, and every
    later stream at any position reads through it. With a mapping per segment each mapping began
    with no entries, and a slave's pass over a segment the cache had let go took a fault per 64 KB
    (fault-around) to set them again, and its unmapping cleared them: eight do-db slaves over a
    514 MB binlog in 4 KB folios paid the file's entries eight times, about 52 ms a pass. With
    huge pages (see above) the mapping asks for 2 MB folios, and its one description's read ahead
    goes on from segment to segment in 2 MB folios. A mapping's pages are the page cache's (RssFile, not the
    master's private memory), so what is mapped is bounded by files and bytes (SHARED_FILES,
    SHARED_BYTES); what stays in the master's RSS is bounded by the segment cache, which hands a
    segment's pages back behind the streams (see `shared_view`).
    Lifetime: the table lets go of a file's mapping when the file is purged (`forget`), is gone
    from the directory or replaced under its name (looked at whenever another file is mapped),
    or by the bound; the views the segments hold keep the mapping alive (a view is an export of
    the mmap, which cannot be unmapped while one exists), so a segment read before a purge or a
    replacement reads the bytes it scanned, never another file's pages, and the mapping goes
    with its last view. A file that grew past its mapping (not a closed file's way) is mapped
    again, whole."""

    SHARED_FILES = 64
    SHARED_BYTES = 16 << 30  # address space, not memory: the pages are the page cache's

    def __init__(self, huge_pages: bool = False) -> None:
        self.huge_pages = huge_pages
        # (dev, ino) -> (whole-file mapping, name): see `view`
        self._whole: OrderedDict[tuple[int, int], tuple[mmap.mmap, str]] = OrderedDict()
        self._whole_bytes = 0
        self.mapped_files = 0  # whole-file mappings made (a file mapped again after it was let go counts again)
        self._lock = threading.Lock()

    def view(self, fd: int, path: str, start: int, end: int) -> memoryview:
        """Bytes `start` to `end` of the closed file `fd` is open on: a view into the master's one
        mapping of that file (made now, of `path` opened anew, if there is none; through `fd` if
        `path` names another file by now)."""
        st = os.fstat(fd)
        key = (st.st_dev, st.st_ino)
        with self._lock:
            kept = self._whole.get(key)
            if kept is not None and len(kept[0]) >= end:
                self._whole.move_to_end(key)
            else:
                if kept is not None:  # grown: a new mapping, whole; the old one goes with its views
                    self._let_go(key)
                kept = self._map_whole(fd, path, key, st.st_size)
            # (the view made under the lock: once it exists the mapping cannot be closed by
            # another thread letting it go)
            return memoryview(kept[0])[start:end]

    def _map_whole(self, fd: int, path: str, key: tuple[int, int], size: int) -> tuple[mmap.mmap, str]:
        """Under the lock: the whole file mapped, kept in the table (the bound applied, and files
        gone or replaced since let go)."""
        own = None
        try:
            own = os.open(path, os.O_RDONLY | os.O_CLOEXEC | getattr(os, "O_NONBLOCK", 0))
            st = os.fstat(own)
            if (st.st_dev, st.st_ino) != key:
                os.close(own)
                own = None
        except OSError:
            own = None
        try:  # mmap keeps a duplicate of the descriptor: its own description, read ahead and all
            whole = mmap.mmap(own if own is not None else fd, size, mmap.MAP_SHARED, mmap.PROT_READ)
        finally:
            if own is not None:
                os.close(own)
        if self.huge_pages and _MADV_HUGEPAGE is not None:
            with contextlib.suppress(OSError):  # a kernel without transparent huge pages
                whole.madvise(_MADV_HUGEPAGE)
        self.mapped_files += 1
        for old, (_, name) in list(self._whole.items()):  # deleted or replaced since: let go
            if _replaced(os.path.dirname(path), name, old):
                self._let_go(old)
        kept = self._whole[key] = (whole, os.path.basename(path))
        self._whole_bytes += size
        while len(self._whole) > 1 and (len(self._whole) > self.SHARED_FILES or self._whole_bytes > self.SHARED_BYTES):
            self._let_go(next(iter(self._whole)))
        return kept

    def _let_go(self, key: tuple[int, int]) -> None:
        """Under the lock: the table's mapping of file `key` let go (unmapped now if no view holds
        it, else with its last view)."""
        whole, _ = self._whole.pop(key)
        self._whole_bytes -= len(whole)
        with contextlib.suppress(BufferError):  # views hold it: it goes with the last of them
            whole.close()

    def whole_mappings(self) -> dict[str, int]:
        """The files the table maps now, with the bytes each mapping covers."""
        with self._lock:
            return {name: len(whole) for whole, name in self._whole.values()}

    def forget(self, names: Iterable[str]) -> None:
        """Lets go of the mappings of files `names` (purged: a mapping would hold its space; the
        views made of it hold it until they go)."""
        gone = set(names)
        with self._lock:
            for key in [k for k, (_, name) in self._whole.items() if name in gone]:
                self._let_go(key)

    def close(self) -> None:
        with self._lock:
            while self._whole:
                self._let_go(next(iter(self._whole)))

    def __del__(self) -> None:
        try:  # noqa: SIM105 - a `with` would need contextlib's globals, which interpreter exit may have cleared
            self.close()
        except Exception:  # noqa: BLE001 - at interpreter exit
            pass


class Window:
    """The bytes of one binlog file that a segment scans, from `base + off` on (buffer offsets
    are buf's, `base` is the file offset of buf[0]). A file the server has closed is mapped
    read-only rather than read, so that its bytes are not copied (a tenth of the master's CPU
    on a large binlog); a file still in use is read, since a mapping would fault (SIGBUS) on a
    truncation. Only a file with at least MAP_MIN bytes left is mapped: a mapping holds a file
    descriptor as long as its segment is cached, and a small one saves nothing. Mapping stays
    off without `mappings` (SegmentCache.map_closed off), and where the file system refuses it.
    With huge pages (MappingFiles.huge_pages), a file to be mapped is read (the checks of its
    format and start position) without read ahead: only the mapping reads the rest, in 2 MB
    folios, where read ahead would have read it in small ones first."""

    MAP_MIN = 1 << 20

    def __init__(self, f: BinaryIO, path: str, start: int, chunk: int, mappings: MappingFiles | None) -> None:
        self.f, self.path, self.chunk, self.mappings = f, path, chunk, mappings
        fd = f.fileno()
        self.mapped = mappings is not None and os.fstat(fd).st_size - start >= self.MAP_MIN
        if mappings is not None and self.mapped:
            huge = mappings.huge_pages
            if huge:  # (before the first read: its read ahead would leave small folios, and a mark
                # in them from which the mapping's read ahead would go on in small ones)
                _advise(fd, "POSIX_FADV_RANDOM")
            self.mapped = closed_by_server(fd)
            if huge and not self.mapped:
                _advise(fd, "POSIX_FADV_NORMAL")  # read, with read ahead
        self.buf: ReadBuffer = b""
        self.off, self.base = 0, start

    def more(self) -> bool:
        """Extends the window by up to `chunk` bytes of the file; False at what is written."""
        if not self.mapped:
            data = self.f.read(self.chunk)
            if not data:
                return False
            rest = bytes(self.buf[self.off:])  # (bytes already, but after a mapping the file system refused)
            self.buf, self.base, self.off = rest + data if rest else data, self.base + self.off, 0
            return True
        fd = self.f.fileno()
        end = self.base + len(self.buf)
        size = os.fstat(fd).st_size
        if size <= end:
            return False
        at = self.base + self.off
        mappings = self.mappings
        assert mappings is not None, "a window is mapped only with mappings"
        try:  # a view into the master's one mapping of the file
            self.buf = mappings.view(fd, self.path, at, min(size, end + self.chunk))
        except OSError:  # a file system without mmap: read from here on
            self.mapped = False
            self.f.seek(end)
            return self.more()
        self.off, self.base = 0, at
        return True

    def left(self) -> int:
        return len(self.buf) - self.off
