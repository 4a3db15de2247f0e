"""The compiled scan of whole binlog files, kept (`ScanIndex`): the unit lists of a file the server
has closed, scanned once out of a read-only mapping of it, for every later reader that goes over
the file from its start. The master's lint worker keeps one: a rule set registered after another
is linted from the kept unit lists (binlogs.lint_scan), its Linter fed the units it needs straight
out of the mapping, with no read and no scan of its own; a registration costs the lint worker
what its rules feed, not a pass over the binlog.

Only a closed file is mapped (its FDE's in-use flag cleared: never written or truncated again by
the server, see `files.closed_by_server`); a file still written, a compressed one and a small one
are read as before. What is kept is bounded by its unit records (UNIT_BYTES each, against
`budget`), the least recently used let go first, and a file is let go as soon as its name no
longer leads to the inode it mapped (purged, replaced), so that no deleted file stays mapped."""

from __future__ import annotations

import mmap
import os
import stat
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

from dumpfilter.binlogs.files import closed_by_server
from dumpfilter.codec.constants import MAGIC
from dumpfilter.codec.scanner import Scanner, UnitList
from dumpfilter.errors import DumpFilterError

INDEX_BYTES = 64 << 20  # unit records kept (about 11 MB per 100 MB of a ROW binlog of small transactions)
UNIT_BYTES = 100        # a unit's record in a UnitList, with its table ids (master.read.segments measures 97)
MIN_FILE_BYTES = 1 << 20  # smaller files are read: their scan costs less than a mapping's set-up
_OPEN_FLAGS = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)


@dataclass
class Part:
    """One stretch of a kept file's scan: `n` units found in `view` (the mapping from file offset
    `base`), the last whole one ending at `base + stop`; `error` ends the file's scan."""

    units: UnitList
    n: int
    view: memoryview
    base: int
    stop: int
    error: DumpFilterError | None


@dataclass
class KeptScan:
    """A whole file's scan: its parts in order, the scanner's table names (by the ids its units
    hold), the bytes after the last whole unit (`rest`: a file that ends inside a unit), and the
    whole mapping (`whole`)."""

    parts: list[Part]
    names: list[tuple[str, str]]
    size: int
    rest: int
    whole: memoryview

    @property
    def units(self) -> int:
        return sum(part.n for part in self.parts)


# A kept scan's file and how it was scanned: (path, device, inode, size, mtime_ns, verify_checksums,
# final, chunk).
ScanKey = tuple[str, int, int, int, int, bool, bool, int]


class ScanIndex:
    """Kept scans by file (name, inode, size, modification time) and how they were scanned."""

    def __init__(self, budget: int = INDEX_BYTES):
        self.budget = budget
        self.kept: OrderedDict[ScanKey, KeptScan] = OrderedDict()
        self.cost = 0
        self.scans = 0  # files scanned and kept
        self.hits = 0   # later readers served from a kept scan

    def get(self, path: Path, size: int, verify_checksums: bool, final: bool, chunk: int) -> KeptScan | None:
        """The scan of the whole of `path` when it is a closed file of exactly `size` bytes: kept,
        or made now (and kept if the budget holds it); None where the file is to be read."""
        self._forget_gone()
        if size < MIN_FILE_BYTES:
            return None
        try:
            fd = os.open(path, _OPEN_FLAGS)
        except OSError:
            return None
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or st.st_size != size:
                return None
            key = (str(path), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, verify_checksums, final, chunk)
            kept = self.kept.get(key)
            if kept is not None:
                self.kept.move_to_end(key)
                self.hits += 1
                return kept
            if os.pread(fd, len(MAGIC), 0) != MAGIC or not closed_by_server(fd):
                return None
            try:
                mapping = mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ)
            except (OSError, ValueError):  # a file system that refuses mappings: read
                return None
        finally:
            os.close(fd)
        kept = _scan(Path(path), mapping, size, verify_checksums, final, chunk)
        self.scans += 1
        cost = kept.units * UNIT_BYTES
        if cost <= self.budget:
            while self.kept and self.cost + cost > self.budget:
                self._drop(next(iter(self.kept)))
            self.kept[key] = kept
            self.cost += cost
        return kept

    def _drop(self, key: ScanKey) -> None:
        kept = self.kept.pop(key)
        self.cost -= kept.units * UNIT_BYTES

    def _forget_gone(self) -> None:
        """Lets go of the files whose name no longer leads to the inode they mapped."""
        for key in list(self.kept):
            try:
                st = os.stat(key[0])
                same = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns) == key[1:5]
            except OSError:
                same = False
            if not same:
                self._drop(key)


def _scan(path: Path, mapping: mmap.mmap, size: int, verify_checksums: bool, final: bool, chunk: int) -> KeptScan:
    """The compiled scan of the whole mapped file, in stretches of about `chunk` bytes (a stretch
    that ends no unit is scanned again twice as long), as a read of it would be."""
    name = path.name
    scanner = Scanner(str(path), verify_checksums=verify_checksums)
    whole = memoryview(mapping)
    parts: list[Part] = []
    base, step = len(MAGIC), chunk
    while base < size:
        end = min(size, base + step)
        eof = end >= size
        units = UnitList()
        scan = scanner.scan_into(units, whole[base:end], 0, base, name, at_eof=final and eof)
        if scan.added or scan.error is not None:
            parts.append(Part(units, scan.added, whole[base:end], base, scan.stop, scan.error))
        if scan.error is not None or (eof and scan.stop == 0):
            break
        base += scan.stop
        step = chunk if scan.stop else 2 * step
        if eof and base >= size:
            break
    return KeptScan(parts, scanner.names, size, max(0, size - base), whole)
