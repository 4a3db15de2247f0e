"""The binlog directory as the master reads it (`BinlogDirectory`, the base of master.read.segments'
SegmentCache): its files' names, listed again only when the directory or an index file changed,
and the end of what is written."""

from __future__ import annotations

import os
import time
from pathlib import Path

from dumpfilter.binlogs.files import Listing, binlog_listing, file_size, served_paths
from dumpfilter.binlogs.written import WrittenEnd
from dumpfilter.errors import PositionError
from dumpfilter.master.read.units import Pos


class BinlogDirectory:
    """The master's binlog directory: its files (`file_names`), where it ends (`end`)."""

    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory)
        self._dir = str(self.directory)  # for `path`: a str joined per segment visit, not pathlib
        # see file_names: (the directory's stat, each index file's (name, stat), the listing)
        self._listing: tuple[StatKey, tuple[tuple[str, StatKey], ...], Listing] | None = None
        self.written = WrittenEnd()  # see end; the segments' reads note where their units end

    def path(self, name: str) -> str:
        """The path of binlog file `name` in the directory (a listed name: no separator in it)."""
        return f"{self._dir}/{name}"

    def file_names(self) -> Listing:
        """The binlog files' names, as `binlog_listing` lists them (a Listing: the index's names).
        The listing is made again only when the directory's entries or an index file changed
        (their stat): a stat or two per segment read instead of reading the index and checking
        every file it names. A listing made within a second of such a change is not kept (a
        change in the same timestamp tick would go unseen: git's racily clean entries)."""
        directory = self.directory
        cached = self._listing
        try:
            dir_key = stat_key(directory)
            if cached is not None and cached[0] == dir_key and \
                    all(stat_key(self.path(name)) == key for name, key in cached[1]):
                return cached[2]
            indexes = tuple((p.name, stat_key(p)) for p in sorted(directory.glob("*.index")))
        except OSError:
            dir_key = None
        names = binlog_listing(directory)
        self._listing = None
        if dir_key is not None:
            newest = max([dir_key[0], *(key[0] for _, key in indexes)])
            if time.time_ns() - newest > SETTLED_NS:
                self._listing = (dir_key, indexes, names)
        return names

    def first_file(self) -> str:
        paths = served_paths(self.directory)
        if not paths:
            raise PositionError(f"no binlog files in {self.directory}")
        return paths[0].name

    def end(self) -> Pos:
        """The current end of the binlog: the last file and the end of its last complete event
        (a partly written one is not yet written, binlogs/written.py)."""
        names = self.file_names()  # a last file the index names but is missing: no end (1236)
        if not names:
            raise names.problem or PositionError(f"no binlog files in {self.directory}")
        return names[-1], self.written.of(self.directory / names[-1])

    def bytes_between(self, start: Pos, end: Pos) -> int:
        """Master binlog bytes from `start` to `end` (for how far behind a slave is)."""
        names = self.file_names()
        if start[0] not in names or end[0] not in names:
            return 0
        i, j = names.index(start[0]), names.index(end[0])
        if i == j:
            return max(0, end[1] - start[1])
        between = sum(max(0, file_size(self.directory / name, 0) - 4) for name in names[i + 1 : j])
        return max(0, file_size(self.directory / start[0], 0) - start[1]) + between + max(0, end[1] - 4)


SETTLED_NS = 1_000_000_000  # see BinlogDirectory.file_names
StatKey = tuple[int, int, int, int]  # (mtime_ns, size, inode, device)


def stat_key(path: str | Path) -> StatKey:
    st = os.stat(path)
    return st.st_mtime_ns, st.st_size, st.st_ino, st.st_dev
