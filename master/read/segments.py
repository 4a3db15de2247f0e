"""Reads the master's binlog once for all streams: the binlog is cut into segments of whole
transactions, keyed by start position and cached (LRU, bounded in bytes). Streams at the same
position share one segment, so each event is split, checked and grouped once, and the decoded
fields cached on its Event are shared by every slave's filter.

The cache (LRU, bounded in bytes, with its read ahead) lives here; the unit model in `units`, the
reader in `segment_reader`, its file windows in `windows`, the UnitList's columns in `columns`, the
directory's listing and written end in `listing`."""

from __future__ import annotations

import mmap
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Iterable
from pathlib import Path
from typing import cast

from dumpfilter.master.read.columns import LazyUnits, Part
from dumpfilter.master.read.listing import SETTLED_NS, BinlogDirectory, StatKey, stat_key
from dumpfilter.master.read.segment_reader import SegmentReader, Steps, drive
from dumpfilter.master.read.units import Pos, Segment
from dumpfilter.master.read.windows import MappingFiles, shared_view

# A segment is what one read hands every stream: its fixed Python cost (the file opened at the
# position, the format read, the UnitList and its index, each stream's answers, tallies and hit
# counts) is paid per segment, and only the stream's work on a segment overlaps the scan of the
# next (read ahead), so larger segments cost less per byte: 4 MB had 18% less master CPU than
# 1 MB on bench_dump's file, 8 MB about 10% less than 4 MB, and 12-16 MB 5-10% less again. But
# a mapped segment's pages count in the master's RSS while a stream or the cache holds it, and
# eight slaves spread over the binlog hold eight, plus the reads ahead: bench_dump's eight
# slaves peaked at 183 MB with 8 MB segments, 262-298 MB with 12-16 MB (the goal: < 300 MB,
# whatever the binlog's size). The cache holds four, for streams at different positions.
SEGMENT_BYTES = 8 << 20
CACHE_BYTES = 4 * SEGMENT_BYTES
# Segments the cache holds at most, whatever their bytes. Streams at the binlog's end read a
# segment per change they wake for, a few KB each under a steady write load, and each costs its
# read buffer, UnitList, index and names besides: bounded by bytes alone the cache held thousands
# (bench soak, 32 slaves: about 2,300 tail segments averaging 14 KB, 15 new ones a second).
# 512 is half a minute of such tail reads; a slave further behind reads segments of its own.
CACHE_SEGMENTS = 512

# A segment the cache lets go stays known by its scan (issue #30): slaves in separate processes
# drift apart, and a stream more than the cache behind another would scan every segment again
# (eight slaves over a 256 MB binlog: eight scans of each segment). A segment of a file the server
# has closed (mapped, Window) keeps its UnitList (offsets, flags, tables and GTIDs per unit, about a
# tenth of its bytes) and its mapping, whose pages are handed back (MADV_DONTNEED: out of the
# master's RSS, still in the page cache): a stream that reaches it again maps nothing and scans
# nothing, and touches only the pages of what it sends. Bounded by the unit lists' estimated bytes and
# by a count (each mapping holds a file descriptor). Of the master's memory this is the best
# spent: a kept UnitList (about 0.8 MB per 8 MB segment) saves a scan of its segment (about 4 ms) for
# every later pass, where a megabyte of kept pages (RESIDENT_BYTES) saves a few faults: with 40 MB
# of unit lists and 96 MB of pages, eight do-db slaves over a 648 MB binlog scanned it eight times;
# with 96 MB and 40 MB, once (master CPU 3.3x one slave's -> 1.8x, peak RSS 300 -> 211 MB).
# Each kept segment counts what it holds (`UnitIndex.held_bytes`: the core's records, name ids and
# statement units, the answer rows kept). A unit's record is 32 bytes, its Table_map bounds 8 (it
# was 80: the 726 MB small-transaction binlog of the bench matrix, 2.1 million units of 1-2 rows,
# held 193 MB, past this budget, and 64 do-db slaves scanned 115-145 times its 87 segments; then
# 93 MB, 87 scans), a Table_map's name id and bytes 8 (11% more: the 586 MB one's 75 -> 83 MB); a MIXED segment's statement units (16 bytes a piece, about five a transaction)
# about twice its records (the 520 MB realistic MIXED binlog: 114 MB, 135 bytes a unit). Every
# workload of the matrix keeps all its lists within 192 MB; a smaller budget saves no RSS on them
# (what is held is the lists, not the budget) and brings scans back on a longer binlog.
INDEX_BYTES = 192 << 20
INDEX_SEGMENTS = 256
# Which kept segments stay when the budget is full: slaves in separate processes read the binlog
# one after another, each more than the cache behind the one before, every pass in the same
# order. Letting the oldest kept go first (FIFO, as before) then lets go of exactly what the
# next pass reaches first: over a binlog whose unit lists exceed INDEX_BYTES (bench fanout_procs'
# 648 MB, 78 segments of about 0.8 MB of UnitList each), eight do-db slaves scanned every segment
# eight times and were served nothing kept. So the first kept are held (HELD_SHARE of the
# budget and of the count), and stay held while a stream has them back in the cache (their
# place is theirs: another segment kept meanwhile does not take it); the rest of the budget
# keeps the newest, the oldest of them let go first. A held place is given up only when its
# file goes (purge, or by hand). The kept pages' budget (RESIDENT_BYTES) holds its places the
# same way.
HELD_SHARE = 0.75
# But a page handed back costs a fault when a stream reaches it again, and a slave that keeps one
# schema of eight still touches most pages (transactions of every schema share each page): in
# process, eight do-db streams one after another over bench fanout_procs' 261 MB binlog cost
# 0.19 s more than one keep-everything stream with every kept page handed back, 0.10 s with none.
# So kept segments stay resident (counted by their bytes, as the cache counts its own) up to
# RESIDENT_BYTES, and only beyond it are their pages handed back. Which stay: the first kept,
# not the most recent. Slaves in separate processes read the binlog one after another more than
# together (each more than the cache behind the one before), every pass in the same order; an LRU
# over such loops holds what the next pass reaches last (measured: no fewer faults than none
# kept). The first kept are what every later pass reaches first, and keep their places while a
# stream has them back in the cache (see HELD_SHARE). The master's RSS grows by up to the budget;
# 40 MB (it was 96) leaves the room to unit lists, worth far more per megabyte (see INDEX_BYTES):
# over the 263 MB binlog eight do-db slaves cost the same master CPU with either.
RESIDENT_BYTES = 40 << 20
# Slaves started together drift apart (each in its own process, at its own pace), often by more
# than the cache: a segment it lets go is then reached again soon by a stream still behind it.
# Handed back, every such stream faults its pages in again (a do-db stream touches most pages):
# bench fanout_procs' 8 do-db slaves over 1 GB of sysbench ROW took 120,000-148,000 faults where
# one keep-all slave took 33,000, and up to 1.6x its CPU. So a segment let go while a stream
# (`SegmentCache.at`) is still before its end keeps its pages until the last such stream is done
# with it, up to TRAIL_BYTES of them: beyond it the oldest are handed back first (as before),
# the newest having the most streams behind them. They are the binlog file's pages, shared with
# the page cache, not the master's private memory; RSS counts them while they stay mapped. 64 do-db
# slaves over the same 1 GB (eight per schema, 8.7 GB sent), one run each: 128 MB, 33.9 s of master
# CPU and 429,000 faults; 256 MB, 26.5 s and 147,000 (peak RSS 477 -> 562 MB, RssAnon 249-275 MB
# either way); 512 MB, 25.4 s and 130,000. Eight slaves drifted less than 128 MB apart: 256 MB
# changed nothing there.
TRAIL_BYTES = 256 << 20


class SegmentCache(BinlogDirectory):
    """Shared, bounded cache of segments. `get(pos)` reads the segment at `pos` once even when
    several streams ask at the same moment; the others wait for it."""

    def __init__(self, directory: str | Path, *, segment_bytes: int = SEGMENT_BYTES, cache_bytes: int = CACHE_BYTES,
                 verify_checksums: bool = True, map_closed: bool = True, read_ahead: bool = True,
                 cache_segments: int = CACHE_SEGMENTS, index_bytes: int = INDEX_BYTES,
                 resident_bytes: int = RESIDENT_BYTES, trail_bytes: int = TRAIL_BYTES) -> None:
        super().__init__(directory)
        self.cache_segments = cache_segments
        self.segment_bytes = segment_bytes
        self.map_closed = map_closed  # files the server closed are mapped, not read (Window)
        self.mappings = MappingFiles()  # the open files their mappings share (and huge pages or not)
        self.read_ahead = read_ahead  # see start_ahead
        self.annotations_ahead = False  # set by a master serving a policy (DumpService): see texts_wanted
        self._ahead: OrderedDict[Pos, tuple[Steps, float]] = OrderedDict()  # (steps, since): see start_ahead
        self.cache_bytes = cache_bytes
        self.verify_checksums = verify_checksums
        self._cache: OrderedDict[Pos, Segment] = OrderedDict()
        self._cached_bytes = 0
        self.index_bytes = index_bytes
        self._kept: OrderedDict[Pos, tuple[Segment, int, frozenset[str]]] = OrderedDict()  # see INDEX_BYTES
        self._kept_bytes = 0
        self._kept_files: dict[str, int] = {}  # the files the kept segments map, each with their count
        self._checked_dir: StatKey | None = None  # see _files_may_be_gone
        self.resident_bytes = resident_bytes
        self._resident: OrderedDict[Pos, int] = OrderedDict()  # kept ones not handed back: their bytes
        self._resident_bytes = 0
        self._held: dict[Pos, int] = {}  # the kept segments' held places, see HELD_SHARE: their cost
        self._held_bytes = 0
        self._placed_files: dict[Pos, frozenset[str]] = {}  # the files of every segment with a place (held or resident)
        self._inflight: dict[Pos, threading.Event] = {}
        self.trail_bytes = trail_bytes  # see TRAIL_BYTES
        self._readers: dict[int, Pos] = {}  # each stream's position (`at`), by the stream's id
        self._trailing: dict[Pos, int] = {}  # let go with a stream behind: their bytes, not handed back
        self._trailing_bytes = 0
        self.trail_kept = 0  # segments let go whose pages stayed for a stream behind them
        self._lock = threading.Lock()
        self.reads = 0   # segments read from disk
        self.hits = 0    # segments served from the cache (the kept ones too)
        self.kept_hits = 0  # of which segments let go and kept by their scan (INDEX_BYTES)
        self.ahead_taken = 0  # segments whose read was started ahead (start_ahead) and taken by a get

    def get(self, start: Pos) -> Segment:
        while True:
            with self._lock:
                seg = self._cache.get(start)
                if seg is not None:
                    self._cache.move_to_end(start)
                    self.hits += 1
                    break
                seg = self._take_kept(start)
                if seg is not None:
                    self.hits += 1
                    self.kept_hits += 1
                    break
                waiter = self._inflight.get(start)
                if waiter is None:
                    waiter = self._inflight[start] = threading.Event()
                    ahead = self._ahead.pop(start, None)
                    steps: Steps | None = ahead[0] if ahead is not None else None
                    self.ahead_taken += steps is not None
                    break
            waiter.wait()  # another stream is reading this segment; then look again
        if seg is not None:
            if seg.index is not None and seg.index.cut_short() is not None:
                # A file it maps was truncated (by hand: a server never truncates a closed
                # file): its pages would fault. Read again, which meets the new end.
                with self._lock:
                    if self._cache.get(start) is seg:
                        self._cached_bytes -= self._cache.pop(start).size
                return self.get(start)
            self._ahead_of(seg)
            return seg
        assert waiter is not None  # (made above: this thread reads the segment)
        try:
            seg = drive(steps if steps is not None else self._steps(start))
            # The next scan first: storing may evict a segment, whose unmapping the scan
            # need not wait for.
            self._ahead_of(seg)
            if seg.units:
                self._store(seg)
            return seg
        finally:
            with self._lock:
                del self._inflight[start]
            waiter.set()

    def texts_wanted(self, share: float = 0.5) -> bool:
        """Whether a scan starting now reads its units' annotations for the policy check (guard_row),
        off the stream's path: under a master policy, unless gated streams kept under `share` of the
        segment stored last (it reads every unit's; a do-db stream needs an eighth: docs/performance.md)."""
        with self._lock:
            last = next(reversed(self._cache.values()), None) if self.annotations_ahead else None
        index = last.index if last is not None else None
        if index is None or not index.policy_demand:  # none yet, or not read by a gated stream
            return self.annotations_ahead
        return index.policy_demand >= share * len(index.unit_list)

    def _ahead_of(self, seg: Segment) -> None:
        if self.read_ahead and seg.units and not seg.at_end and seg.error is None:
            self.start_ahead(seg.end)

    # Reads started ahead and not yet taken: one per stream working through a segment, for as
    # many streams at different positions. With that many waiting no more start (a stream then
    # reads its next segment itself): one dropped before it is taken would be a scan made for
    # nothing. One left AHEAD_STALE seconds (its stream stopped, or went elsewhere) is dropped.
    AHEAD_MAX = 2
    AHEAD_STALE = 2.0

    def start_ahead(self, start: Pos) -> None:
        """Starts reading the segment at `start`, where a segment just read ends (called by its
        reader as soon as its last scan fills it, and by `get` for a segment it hands out): the
        calling thread opens the file and maps or reads the window (a fraction of a
        millisecond), and the core scans it on a thread of its own (`UnitList.scan_start`, no GIL)
        while the stream filters and sends the segment it has; the next `get(start)` adopts
        the scan. On two cores a one-slave stream's master CPU then overlaps the scan with the
        rest of its work. A read that fails here is dropped: the `get` reads again and meets
        the error itself."""
        with self._lock:
            if start in self._cache or start in self._kept or start in self._inflight or start in self._ahead:
                return
            stale = self._stale_ahead()
            full = len(self._ahead) >= self.AHEAD_MAX
            if not full:
                waiter = self._inflight[start] = threading.Event()
        for old in stale:
            old.close()
        if full:
            return
        steps: Steps | None = None
        try:
            steps = self._steps(start)
            next(steps)  # to the scan's start
        except StopIteration:  # read at once (nothing to scan): the get reads again
            steps = None
        except Exception:  # noqa: BLE001 - the get meets it again, and reports it
            steps = None
        finally:
            with self._lock:
                del self._inflight[start]
                if steps is not None:
                    self._ahead[start] = (steps, time.monotonic())
            waiter.set()

    def _stale_ahead(self) -> list[Steps]:
        """Takes out the reads ahead left AHEAD_STALE seconds or more (under the lock); the
        caller closes them (their scans joined) outside it."""
        now = time.monotonic()
        stale: list[Steps] = []
        while self._ahead:
            start, (steps, since) = next(iter(self._ahead.items()))
            if now - since < self.AHEAD_STALE:
                break
            del self._ahead[start]
            stale.append(steps)
        return stale

    def _store(self, seg: Segment) -> None:
        with self._lock:
            self.reads += 1
            self._hold(seg)

    def _hold(self, seg: Segment) -> None:
        """Under the lock: `seg` into the cache; the least recently used ones out, to the kept."""
        self._cache[seg.start] = seg
        self._cached_bytes += seg.size
        while len(self._cache) > 1 and (self._cached_bytes > self.cache_bytes
                                        or len(self._cache) > self.cache_segments):
            _, old = self._cache.popitem(last=False)
            self._cached_bytes -= old.size
            self._keep(old)

    def _keep(self, seg: Segment) -> None:
        """Under the lock: a segment let go kept by its scan, its mapped pages handed back (see
        INDEX_BYTES); one read (not mapped) or cut by an error is dropped."""
        units, index = seg.units, seg.index
        parts = index.parts if index is not None else None
        if index is None or self.index_bytes <= 0 or not parts or seg.error is not None or \
                not isinstance(units, LazyUnits) or not all(shared_view(part.buf) for part in parts):  # mapped, not read
            return
        files = frozenset(part.file for part in parts)
        if self._files_may_be_gone():
            gone = {name for name in files.union(self._kept_files) if not os.path.lexists(self.path(name))}
            if gone:  # purged (by the server, or by hand): their mappings hold their space
                self._forget(gone)
                if gone & files:
                    return
        start = seg.start
        cost = index.held_bytes()
        self._hold_place(start, cost, files)
        if not self._stays_resident(seg) and not self._trails(seg) and not _hand_back(seg):
            self._release(start)
            return
        seg.units = units.fresh()  # the Units made (their bytes, answers) go
        self._kept[start] = (seg, cost, files)
        self._kept_bytes += cost
        for name in files:
            self._kept_files[name] = self._kept_files.get(name, 0) + 1
        held = self._held
        while self._kept_bytes > self.index_bytes or len(self._kept) > INDEX_SEGMENTS:
            # the oldest kept that is not held (this one last: over the budget with only held
            # ones besides, it goes itself)
            victim = next((s for s in self._kept if s not in held), None)
            if victim is None:
                break
            self._drop_kept(victim)

    def _hold_place(self, start: Pos, cost: int, files: frozenset[str]) -> None:
        """Under the lock: a held place for the segment at `start` while HELD_SHARE of the budget
        has room (see there); one it has already is kept, at its cost now."""
        held = self._held
        if start in held:
            self._held_bytes += cost - held[start]
            held[start] = cost
            return
        if self._held_bytes + cost <= self.index_bytes * HELD_SHARE and len(held) < INDEX_SEGMENTS * HELD_SHARE:
            held[start] = cost
            self._held_bytes += cost
            self._placed_files[start] = files

    def _files_may_be_gone(self, check: bool = True) -> bool:
        """Under the lock: whether a binlog file may have left the directory since every kept
        segment's files were last seen there: its stat has changed since (an unlink changes the
        directory's mtime), or was too recent to tell (see file_names). `check`: the caller
        looks at every kept segment's files now, so the stat it read is remembered. A segment
        visit then pays one stat instead of one per file of every kept segment."""
        try:
            key = stat_key(self._dir)
        except OSError:
            return True
        if key == self._checked_dir:
            return False
        self._checked_dir = key if check and time.time_ns() - key[0] > SETTLED_NS else None
        return True

    def _stays_resident(self, seg: Segment) -> bool:
        """Under the lock: whether a kept segment's pages stay in the master's RSS, counted in
        RESIDENT_BYTES: yes while there is room (see there), else the caller hands them back."""
        parts = _parts(seg)
        if seg.start in self._resident:
            return True
        # (A view's pages are the file's one mapping's, shared by every stream, but they count in
        # the master's RSS as long as they stay mapped: a stream's pass over a 250 MB binlog held
        # all of it. Handed back behind the streams, a stream that reaches them again maps them
        # again from the page cache.)
        size = seg.size
        if self._resident_bytes + size > self.resident_bytes:
            return False
        self._resident[seg.start] = size
        self._resident_bytes += size
        self._placed_files.setdefault(seg.start, frozenset(part.file for part in parts))
        return True

    def at(self, reader: object, pos: Pos | None) -> None:
        """Stream `reader` reads from `pos` on (None: it is gone): see TRAIL_BYTES."""
        with self._lock:
            if pos is None:
                self._readers.pop(id(reader), None)
            else:
                self._readers[id(reader)] = pos

    def holds(self, start: Pos) -> bool:
        """Whether the segment at `start` was read for a stream: cached, kept by its scan, or being read
        (not one only read ahead)."""
        with self._lock:
            return start in self._cache or start in self._kept or start in self._inflight

    def streams_before(self, pos: Pos, but: object = None) -> bool:
        """Whether a stream (`at`) but `but` reads from `pos` or before it."""
        with self._lock:
            return any(at <= pos for reader, at in self._readers.items() if reader != id(but))

    def _trails(self, seg: Segment) -> bool:
        """Under the lock: whether a segment let go keeps its pages for a stream still before its
        end (see TRAIL_BYTES), within the budget; its place is given up once none is."""
        start, end = seg.start, seg.end
        behind = any(pos < end for pos in self._readers.values())
        size = self._trailing.get(start)
        if size is not None:
            if behind:
                return True
            del self._trailing[start]
            self._trailing_bytes -= size
            if start not in self._held and start not in self._resident:
                self._placed_files.pop(start, None)
            return False
        size = seg.size
        if not behind or size > self.trail_bytes:
            return False
        trailing = self._trailing
        while self._trailing_bytes + size > self.trail_bytes:
            # The oldest let go first: the fewest streams are still behind it (a stream behind
            # a segment is behind every later one), and the one just let go has the most.
            old, old_size = next(iter(trailing.items()))
            del trailing[old]
            self._trailing_bytes -= old_size
            if old not in self._held and old not in self._resident:
                self._placed_files.pop(old, None)
            kept = self._kept.get(old)
            if kept is not None and old not in self._resident:  # (in the cache it is let go again later)
                _hand_back(kept[0])
        trailing[start] = size
        self._trailing_bytes += size
        self._placed_files.setdefault(start, frozenset(part.file for part in _parts(seg)))
        self.trail_kept += 1
        return True

    def _drop_kept(self, start: Pos, release: bool = True) -> tuple[Segment, int, frozenset[str]]:
        """Under the lock: the kept segment at `start` out of the kept ones; `release`: its places
        (held, resident) given up too, else they stay its own (taken back into the cache)."""
        kept = self._kept.pop(start)
        self._kept_bytes -= kept[1]
        for name in kept[2]:
            left = self._kept_files.pop(name) - 1
            if left > 0:
                self._kept_files[name] = left
        if release:
            self._release(start)
        return kept

    def _release(self, start: Pos) -> None:
        """Under the lock: the held and resident places of the segment at `start` given up."""
        self._held_bytes -= self._held.pop(start, 0)
        self._resident_bytes -= self._resident.pop(start, 0)
        self._trailing_bytes -= self._trailing.pop(start, 0)
        self._placed_files.pop(start, None)

    def _take_kept(self, start: Pos) -> Segment | None:
        """Under the lock: the kept segment at `start` back into the cache (None: none, or its
        file was purged since)."""
        if start not in self._kept:
            return None
        seg, _, files = self._drop_kept(start, release=False)
        if self._files_may_be_gone(check=False) and not all(os.path.lexists(self.path(name)) for name in files):
            self._release(start)
            return None
        self._hold(seg)
        return seg

    def done_with(self, seg: Segment) -> None:
        """A stream is done with `seg`: if the cache let it go while the stream read it and keeps
        it by its scan with its pages handed back, the pages the stream touched since stay if
        there is room for them in RESIDENT_BYTES, else they are handed back too (else they
        would stay in the master's RSS, uncounted, as long as it is kept)."""
        with self._lock:
            kept = self._kept.get(seg.start)
            if kept is None or kept[0] is not seg or self._stays_resident(seg) or self._trails(seg):
                return
        _hand_back(seg)

    def _forget(self, names: set[str]) -> None:
        self.mappings.forget(names)
        for start in [s for s, (_, _, files) in self._kept.items() if files & names]:
            self._drop_kept(start)
        for start in [s for s, files in self._placed_files.items() if files & names]:
            self._release(start)  # the places of segments in the cache now

    def forget(self, files: Iterable[str]) -> int:
        """Drops the cached and kept segments, and the reads started ahead, that begin in `files` (purged
        by retention): a segment of a closed file maps it, and would hold the deleted file's
        pages (its disk space, the master's RSS) until the LRU reached it. Returns how many."""
        names = set(files)
        with self._lock:
            gone = [start for start in self._cache if start[0] in names]
            for start in gone:
                self._cached_bytes -= self._cache.pop(start).size
            self._forget(names)  # and the kept ones (INDEX_BYTES) in them
            ahead = [self._ahead.pop(start)[0] for start in list(self._ahead) if start[0] in names]
        for steps in ahead:
            steps.close()  # (its scan joined, outside the lock)
        return len(gone) + len(ahead)

    def close(self) -> None:
        """Lets go of every segment (cached, kept, read ahead) and of the table's mappings of the
        closed files (`MappingFiles.close`), as the master stops: a whole-file mapping would
        otherwise stay in the process's RSS after the master is gone (`simulate --verify` reads
        the relay logs after it). A view a stream still holds keeps its mapping until it goes.
        The cache stays usable: a later `get` reads and maps again."""
        with self._lock:
            names = {start[0] for start in (*self._cache, *self._ahead)}
            names.update(name for _, _, files in self._kept.values() for name in files)
            names.update(name for files in self._placed_files.values() for name in files)
        self.forget(names)
        self.mappings.close()

    def _steps(self, start: Pos) -> Steps:
        """A read of whole units from `start` until about `segment_bytes`, the end of what is
        written, or a corrupt event (a unit still being written at the end is left for the next
        read), as a generator that pauses once a scan is under way (see `start_ahead`) and
        returns the segment."""
        file, pos = start
        if not os.path.lexists(self.path(file)):
            self.file_names().check_absent(self.directory, file)  # purged, or deleted by hand: 1236
            return Segment(start, [], start, at_end=True)  # a Rotate can name a file not created yet
        if pos <= 4 and self.file_names().not_yet_indexed(file):
            return Segment(start, [], start, at_end=True)
        return (yield from self._reader(start))

    def _reader(self, start: Pos) -> Steps:
        """The steps of one segment's read (SegmentReader's; the tests' reference reader's)."""
        return SegmentReader(self, start).steps()


def _hand_back(seg: Segment) -> bool:
    """A mapped segment's pages out of the master's RSS (MADV_DONTNEED: they stay in the page
    cache, and a later touch maps them again). False where that failed."""
    for part in _parts(seg):
        buf = part.buf
        try:
            if isinstance(buf, memoryview) and shared_view(buf):
                # A view into the master's one mapping of the file, which starts at offset 0: the
                # whole pages of the view's file range (a page it shares with a neighbour stays).
                page = mmap.PAGESIZE
                lo = -(-part.base // page) * page
                hi = (part.base + len(buf)) // page * page
                if hi > lo:
                    cast(mmap.mmap, buf.obj).madvise(mmap.MADV_DONTNEED, lo, hi - lo)
            else:
                raise ValueError("not mapped")
        except (OSError, ValueError):  # closed, or a kernel without it
            return False
    return True


def _parts(seg: Segment) -> list[Part]:
    """The parts of a segment kept by its scan (one the reference reader made has none)."""
    index = seg.index
    assert index is not None, "only scanned segments are kept (SegmentCache._keep)"
    return index.parts
