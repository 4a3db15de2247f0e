"""Reads the master's binlog once for all streams: the binlog is cut into segments of whole
transactions, keyed by start position and cached (LRU, bounded in bytes). Streams at the same
position share one segment, so each event is split, checked and grouped once, and the decoded
fields cached on its Event are shared by every slave's filter."""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path

from binlog_codec import Event, EventType, Transaction, TransactionGrouper
from binlog_codec.constants import LOG_EVENT_ARTIFICIAL_F
from binlog_codec.errors import BinlogError, PositionError
from binlog_files import TailingReader, binlog_paths

Pos = tuple[str, int]


class _AtEnd(Exception):
    """Raised from the TailingReader's sleep hook: the reader reached what is written so far."""


def _at_end(_seconds: float) -> None:
    raise _AtEnd


@dataclass(eq=False)
class Unit:
    """One transaction, statement or control event, where it ends, and the per-rule-group filter
    answers computed for it so far (slaves with equal rules share one answer)."""

    txn: Transaction
    file: str
    end: Pos
    results: dict = field(default_factory=dict)

    @property
    def size(self) -> int:
        return self.txn.size


@dataclass(eq=False)
class Segment:
    start: Pos
    units: list[Unit]
    end: Pos
    at_end: bool          # reading stopped at the current end of the binlog
    error: BinlogError | None = None  # a corrupt event right after `end`

    @property
    def size(self) -> int:
        return sum(u.size for u in self.units)


def unit_end(file: str, last: Event) -> Pos:
    """The master position after an event. After a real Rotate the slave continues in the next
    file at the Rotate's position, as MySQL's receiver does."""
    if last.type_code == EventType.ROTATE and not last.flags & LOG_EVENT_ARTIFICIAL_F:
        pos, name = last.rotate
        return name, pos
    return file, last.end_pos


class SegmentCache:
    """Shared, bounded cache of segments. `get(pos)` reads the segment at `pos` once even when
    several streams ask at the same moment; the others wait for it."""

    def __init__(self, directory: str | Path, *, segment_bytes: int = 1 << 20, cache_bytes: int = 8 << 20,
                 verify_checksums: bool = True):
        self.directory = Path(directory)
        self.segment_bytes = segment_bytes
        self.cache_bytes = cache_bytes
        self.verify_checksums = verify_checksums
        self._cache: OrderedDict[Pos, Segment] = OrderedDict()
        self._cached_bytes = 0
        self._inflight: dict[Pos, threading.Event] = {}
        self._lock = threading.Lock()
        self.reads = 0   # segments read from disk
        self.hits = 0    # segments served from the cache

    def first_file(self) -> str:
        paths = binlog_paths(self.directory)
        if not paths:
            raise PositionError(f"no binlog files in {self.directory}")
        return paths[0].name

    def end(self) -> Pos:
        """The current end of the binlog: the last file and its size."""
        paths = binlog_paths(self.directory)
        if not paths:
            raise PositionError(f"no binlog files in {self.directory}")
        last = paths[-1]
        return last.name, last.stat().st_size

    def bytes_between(self, start: Pos, end: Pos) -> int:
        """Master binlog bytes from `start` to `end` (for how far behind a slave is)."""
        names = [p.name for p in binlog_paths(self.directory)]
        if start[0] not in names or end[0] not in names:
            return 0
        i, j = names.index(start[0]), names.index(end[0])
        if i == j:
            return max(0, end[1] - start[1])
        total = max(0, (self.directory / start[0]).stat().st_size - start[1])
        for name in names[i + 1 : j]:
            total += (self.directory / name).stat().st_size - 4
        return total + max(0, end[1] - 4)

    def get(self, start: Pos) -> Segment:
        while True:
            with self._lock:
                seg = self._cache.get(start)
                if seg is not None:
                    self._cache.move_to_end(start)
                    self.hits += 1
                    return seg
                waiter = self._inflight.get(start)
                if waiter is None:
                    waiter = self._inflight[start] = threading.Event()
                    break
            waiter.wait()  # another stream is reading this segment; then look again
        try:
            seg = self._read(start)
            if seg.units:
                self._store(seg)
            return seg
        finally:
            with self._lock:
                del self._inflight[start]
            waiter.set()

    def _store(self, seg: Segment) -> None:
        with self._lock:
            self.reads += 1
            self._cache[seg.start] = seg
            self._cached_bytes += seg.size
            while self._cached_bytes > self.cache_bytes and len(self._cache) > 1:
                _, old = self._cache.popitem(last=False)
                self._cached_bytes -= old.size

    def _read(self, start: Pos) -> Segment:
        """Whole units from `start` until about `segment_bytes`, the end of what is written, or a
        corrupt event. A unit still being written at the end is left for the next read."""
        file, pos = start
        if not (self.directory / file).exists():
            if file in self._index_names() or self._later_file_exists(file):
                raise PositionError(f"binlog file '{file}' is not in {self.directory} (purged)")
            # A Rotate can name a file the server has not created yet.
            return Segment(start, [], start, at_end=True)
        reader = TailingReader(self.directory, file, pos, follow=True, sleep=_at_end,
                               verify_checksums=self.verify_checksums)
        grouper = TransactionGrouper()
        units: list[Unit] = []
        size = 0
        end = start
        at_end = False
        error = None
        try:
            for name, event in reader:
                for txn in grouper.push(event):
                    units.append(Unit(txn, name, unit_end(name, txn.events[-1])))
                    end = units[-1].end
                    size += txn.size
                if size >= self.segment_bytes and grouper.current is None:
                    break
        except _AtEnd:
            at_end = True
        except PositionError:
            if units:  # a later file vanished under us: serve what we have
                at_end = True
            else:
                raise
        except BinlogError as exc:
            if not units:
                raise
            error = exc
        return Segment(start, units, end, at_end, error)

    def _index_names(self) -> list[str]:
        try:
            return [p.name for p in binlog_paths(self.directory)]
        except BinlogError:
            return []

    def _later_file_exists(self, file: str) -> bool:
        names = self._index_names()
        return bool(names) and names[-1] > file
