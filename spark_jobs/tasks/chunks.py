"""Cutting binlog files into chunks that can be read independently, on transaction boundaries.

A chunk is a byte range `[start, end)` of one file. Reading a chunk that does not start at the
beginning of its file needs the file's Format_description event (post-header lengths, checksum),
which is read from offset 4 first. Chunks start at a GTID event (MySQL GTID / Anonymous_GTID,
MariaDB GTID): the transaction grouper always opens a new unit there, so the units of a file are
the same whether it is read whole or chunk by chunk. Files without GTID events (pre-5.6 / pre-10.0)
and gzipped files are never cut.
"""

from __future__ import annotations

import bisect
import io
import mmap
import os
from collections.abc import Callable, Iterator
from typing import BinaryIO
from dataclasses import dataclass
from pathlib import Path

from dumpfilter import _core
from dumpfilter.codec import BinlogReader, Event, EventType, bad_magic, read_format_description
from dumpfilter.codec.constants import GTID_EVENT_TYPES, LOG_EVENT_BINLOG_IN_USE_F, MAGIC
from dumpfilter.codec.reader import truncated
from dumpfilter.codec.scanner import Scanner, type_mask
from dumpfilter.errors import BinlogError, MalformedEventError, TruncatedBinlogError
from dumpfilter.codec.format_description import FormatDescription
from dumpfilter.binlogs import input_paths, open_binlog
from dumpfilter.binlogs.files import binlog_format

DEFAULT_CHUNK_BYTES = 64 << 20
_GTID_MASK = type_mask(GTID_EVENT_TYPES)
READ_BYTES = 8 << 20  # one read buffer of `chunk_buffers`: one compiled scan
WALK_BYTES = 8 << 20  # one window of `gtid_boundaries`' walk (its pages handed back behind it)


@dataclass(frozen=True)
class Chunk:
    """Bytes `[start, end)` of the `file_index`-th input file; `start` 0 means from the magic,
    `end` None means to the end of the file. Picklable: it travels to Spark workers."""

    file_index: int
    path: str
    start: int = 0
    end: int | None = None

    @property
    def name(self) -> str:
        return Path(self.path).name

    @property
    def size(self) -> int:
        """Its bytes (a Spark task's share of the work: split_by_schema.balanced_groups)."""
        return (self.end if self.end is not None else Path(self.path).stat().st_size) - self.start


def input_files(targets: list[str | os.PathLike[str]]) -> list[Path]:
    """Every binlog file the command-line arguments stand for, in order (a directory stands for
    its series, see `dumpfilter.binlogs.binlog_paths`). A file named twice is an error
    (`dumpfilter.binlogs.input_paths`). Each one is checked to be a binlog (the magic, then a
    Format_description) before any output is made; CRCs are left to the reads that follow,
    which check them as their --no-verify-checksums says."""
    paths = input_paths(targets)
    for path in paths:  # each one a binlog before any output is made (one line: file and offset)
        binlog_format(path)
    return paths


def gtid_boundaries(path: str | os.PathLike[str], chunk_bytes: int) -> list[int]:
    """Offsets of the first GTID event at or after each multiple of `chunk_bytes` (the cut
    points), found by the compiled walk (header to header over one mapping of the file, in the
    core: no event reaches Python). Empty when the file is small, gzipped or has no GTID events.
    The walk goes WALK_BYTES at a time and hands the pages behind it back (`_hand_back`): the
    driver does not keep the whole file resident (issue #60)."""
    path = Path(path)
    if path.suffix == ".gz" or path.stat().st_size <= chunk_bytes:
        return []
    with open_binlog(path) as stream, mmap.mmap(stream.fileno(), 0, prot=mmap.PROT_READ) as mapped:
            size = len(mapped)
            view = memoryview(mapped)
            try:
                if bytes(view[:4]) != MAGIC:
                    raise bad_magic(str(path))
                scanner = Scanner(str(path), verify_checksums=False)
                cuts: list[int] = []
                next_cut = chunk_bytes
                pos, want, released = 4, WALK_BYTES, 0
                while True:
                    hi = min(size, pos + want)
                    # A prefix of the mapping: offsets stay file offsets, as in one walk of it all.
                    with view[:hi] as part:
                        offsets, stop, error = scanner.walk(part, pos, 0, _GTID_MASK)
                    try:
                        k, n = 0, len(offsets)
                        while True:
                            k = bisect.bisect_left(offsets, next_cut, k)
                            while k < n and view[offsets[k] + 4] not in GTID_EVENT_TYPES:
                                k += 1  # a Format_description (the walk reports every one)
                            if k >= n:
                                break
                            cuts.append(offsets[k])
                            next_cut = (offsets[k] // chunk_bytes + 1) * chunk_bytes
                    finally:
                        offsets.release()
                    if error is not None:
                        raise error
                    if hi >= size:
                        return cuts
                    # An event longer than the window: a wider one next time.
                    want = WALK_BYTES if stop > pos else want * 2
                    pos = stop
                    released = _hand_back(mapped, released, pos)
            finally:
                view.release()


def _hand_back(mapped: mmap.mmap, released: int, upto: int) -> int:
    """The whole pages of `mapped` in [released, upto) out of the process's RSS (MADV_DONTNEED:
    they stay in the page cache, and a later touch maps them again, as master/read/segments.py
    does for its mapping); returns how far pages are now handed back."""
    hi = upto // mmap.PAGESIZE * mmap.PAGESIZE
    if hi > released:
        try:
            mapped.madvise(mmap.MADV_DONTNEED, released, hi - released)
        except OSError:  # a kernel without it: the pages stay, as before
            return released
        return hi
    return released


TASKS_PER_WORKER = 4  # a fair share of the input: enough tasks per core to balance them


def fair_chunk_bytes(paths: list[Path], chunk_bytes: int, workers: int) -> int:
    """`chunk_bytes`, raised to a fair share of the input (its size over `TASKS_PER_WORKER` tasks
    per worker): a series of many files is read a whole file per task, without finding a cut (a
    walk over every event header of the file, in the driver), while a big file is still cut for
    every worker to have work."""
    total = sum(Path(p).stat().st_size for p in paths)
    return max(chunk_bytes, -(-total // (TASKS_PER_WORKER * max(1, workers))))


def plan_chunks(paths: list[Path], chunk_bytes: int | None = DEFAULT_CHUNK_BYTES, *,
                workers: int | None = None) -> list[Chunk]:
    """The chunks of `paths`, in input order. `chunk_bytes` None (or 0) keeps every file whole.
    `workers` (Spark's parallelism): cut at `fair_chunk_bytes` instead (never finer)."""
    if chunk_bytes and workers:
        chunk_bytes = fair_chunk_bytes(paths, chunk_bytes, workers)
    chunks: list[Chunk] = []
    for index, path in enumerate(paths):
        cuts = gtid_boundaries(path, chunk_bytes) if chunk_bytes else []
        chunks.extend(Chunk(index, str(path), start, end) for start, end in zip([0, *cuts], [*cuts, None]))
    return chunks


def schema_statements(chunk: Chunk, *, verify_checksums: bool = True) -> Iterator[tuple[str, str]]:
    """(sql, default db) of the chunk's Query events whose text may be a schema statement, in
    order: split's first pass (`routing.chunk_starts` keeps those `is_schema_statement` accepts).
    The compiled walk reads the chunk READ_BYTES at a time and hands out only those Queries
    (`Scanner.schema_candidates`): a DML, BEGIN or COMMIT never reaches Python, yet every event is
    checked as a whole read checks it (sizes, CRCs as `verify_checksums` says, one line with file
    and offset)."""
    scanner = Scanner(chunk.path, verify_checksums=verify_checksums)
    with open_binlog(chunk.path) as stream:
        fmt, pos, source = _open_chunk(stream, chunk, scanner)
        want = READ_BYTES
        while True:
            buf, eof = source.take(pos, want)
            offsets, stop, error = scanner.schema_candidates(buf, 0, pos)
            for at in offsets.tolist():
                raw = bytes(buf[at : at + int.from_bytes(buf[at + 9 : at + 13], "little")])
                if raw[4] == EventType.FORMAT_DESCRIPTION:  # (the walk has checked it)
                    fmt = FormatDescription.parse(raw, path=chunk.path, offset=pos + at)
                    continue
                try:
                    query = Event(raw, pos + at, fmt).query
                except MalformedEventError as exc:
                    raise exc.in_file(chunk.path) from None
                yield query.sql, query.db
            if error is not None:
                raise error
            if eof:
                if stop < len(buf):
                    raise truncated(buf[stop:], chunk.path, pos + stop)
                return
            # An event longer than the buffer: take more at once next time.
            want = READ_BYTES if stop else want * 2
            pos += stop


def chunk_buffers(chunk: Chunk, scanner: Scanner, *, unit_statements: Callable[[], bool] | bool = False,
                  divide: int = 1, statements: bool = False
                  ) -> Iterator[tuple[FormatDescription | None, Buffer, int, _core.UnitList, int, int]]:
    """The chunk's bytes a buffer at a time, each scanned once by the compiled `scanner` into a
    UnitList of its own (part `chunk.name`: a Heartbeat's body): (the format in force before the
    chunk, the buffer, its file offset, the UnitList, how many units it holds, the scanner's
    checksum length after it). A plain file is mapped, and its buffers are views of the mapping
    (no byte copied; the kernel's pages are reclaimable); a compressed one is read. A unit cut by
    a buffer's end starts the next buffer; the chunk's last buffer is scanned to its end
    (`at_eof`: a unit the input ends inside comes out incomplete). A malformed event raises its
    one line (file and offset) after the units before it.

    The next buffer is scanned on the core's thread (`Scanner.scan_start`, without the GIL) while
    the caller works on the one before: on two cores an experiment's 64 slaves are counted while
    the scan reads on. So the caller must not call `scanner` between two items; its `names` may be
    read (they grow only here, when a scan is finished). Memory: two buffers (or their mapped
    pages), whatever the chunk's size. `unit_statements` (or what it returns when each scan
    starts): the scan's thread also reads the statements of the units that table rules may keep
    in part (`Scanner.scan_start`). `divide`: buffers of READ_BYTES // divide (more for a longer unit).
    `statements`: the scan's thread also reads the buffer's statement units by key, which
    `UnitList.statement_units` then takes rather than reading them on the caller's thread."""
    with open_binlog(chunk.path) as stream:
        fmt, pos, source = _open_chunk(stream, chunk, scanner)

        def start(at: int, want: int) -> tuple[Buffer, bool, _core.UnitList]:
            buf, eof = source.take(at, want)
            units = _core.UnitList()
            read = unit_statements() if callable(unit_statements) else unit_statements
            scanner.scan_start(units, buf, 0, at, chunk.name, at_eof=eof, unit_statements=read, statements=statements)
            return buf, eof, units

        read_bytes = max(READ_BYTES // max(divide, 1), 1)
        want = read_bytes
        pending: tuple[Buffer, bool, _core.UnitList] | None = start(pos, want)
        try:
            while pending is not None:
                buf, eof, units = pending
                pending = None
                scan = scanner.scan_finish(units)
                crc_len = scanner.checksum_len
                # A unit longer than the buffer: take more at once next time.
                want = read_bytes if scan.stop else want * 2
                if scan.error is None and not eof:
                    pending = start(pos + scan.stop, want)
                yield fmt, buf, pos, units, scan.added, crc_len
                if scan.error is not None:
                    raise scan.error
                pos += scan.stop
                if eof and scan.stop < len(buf):
                    raise truncated(buf[scan.stop:], chunk.path, pos)
        finally:
            if pending is not None:  # the caller stopped early: the scan under way gives the scanner back
                scanner.scan_finish(pending[2])


Buffer = bytes | memoryview


def _open_chunk(stream: BinaryIO, chunk: Chunk, scanner: Scanner) -> tuple[FormatDescription | None, int, _Source]:
    """`chunk_start`, and the source of the chunk's buffers."""
    fmt, pos = chunk_start(stream, chunk, scanner)
    source = _Mapped(stream, chunk.end) if isinstance(stream, io.BufferedReader) else ReadForward(stream, chunk.end)
    return fmt, pos, source


def chunk_start(stream: BinaryIO, chunk: Chunk, scanner: Scanner) -> tuple[FormatDescription | None, int]:
    """Where a compiled read of `chunk` starts: the format in force before it (None from the
    file's start: its FDE is the first event read), loaded into `scanner`; the offset of its
    first event (past the magic, checked). Past a chunk's FDE read, `stream` is not at that offset."""
    fmt = None
    if chunk.start > 4:
        fde, fmt = read_format_description(stream, chunk.path, verify_checksums=scanner.verify_checksums)
        scanner.load_format(fde.raw, 4)
        pos = chunk.start
    else:
        magic = stream.read(4)
        if magic != MAGIC:
            if len(magic) < 4:
                raise TruncatedBinlogError(f"file is {len(magic)} bytes long, too short for the binlog magic",
                                           path=chunk.path, offset=0)
            raise bad_magic(chunk.path)
        pos = 4
    return fmt, pos


class _Source:
    def take(self, pos: int, want: int) -> tuple[Buffer, bool]:
        """Bytes [pos, pos + want) of the chunk (fewer at its end) and whether they reach it."""
        raise NotImplementedError


class _Mapped(_Source):
    """A plain file, mapped once: each buffer a view of the mapping. The mapping is closed when the
    last view (a UnitList holds its buffer) is gone. Each `take` hands back the pages before the
    previous buffer (which the caller still reads while this one is scanned): a chunk keeps two
    buffers resident, not every page it passed (issue #60)."""

    def __init__(self, stream: BinaryIO, end: int | None):
        size = os.fstat(stream.fileno()).st_size
        self.end = size if end is None else min(end, size)
        self.mapped = mmap.mmap(stream.fileno(), 0, prot=mmap.PROT_READ) if size else None
        self.view = memoryview(self.mapped) if self.mapped is not None else memoryview(b"")
        self.last, self.released = 0, 0

    def take(self, pos: int, want: int) -> tuple[Buffer, bool]:
        if self.mapped is not None:
            self.released = _hand_back(self.mapped, self.released, min(self.last, pos))
        self.last = pos
        stop = min(self.end, pos + want)
        return self.view[pos:stop], stop >= self.end


class ReadForward(_Source):
    """A stream read forward, in bytes (a compressed one; and split's, whose walks take bytes): what
    the last scan left is joined to the next read."""

    def __init__(self, stream: BinaryIO, end: int | None):
        self.stream, self.end = stream, end
        self.buf, self.at = b"", 0  # self.buf holds the stream's bytes from offset self.at

    def take(self, pos: int, want: int) -> tuple[bytes, bool]:
        rest = self.buf[pos - self.at:] if self.buf else b""
        size = max(0, want - len(rest))
        if self.end is not None:
            size = max(0, min(size, self.end - pos - len(rest)))
        data = self.stream.read(size) if size else b""
        self.buf, self.at = (rest + data if rest else data), pos
        # At the end when the stream ended or the chunk's end is reached; not when what the last
        # scan left already fills `want` (a unit longer than a buffer, then a scan that stopped)
        eof = len(data) < size or (self.end is not None and pos + len(self.buf) >= self.end)
        return self.buf, eof


@dataclass(frozen=True)
class SourceHeader:
    """What every output file is opened with: the first input's FDE (IN_USE cleared) and its
    GTID state event (Gtid_list / Previous_GTIDs), if any."""

    fde: Event
    start_state: Event | None


def source_header(paths: list[Path]) -> SourceHeader:
    """Read the first file's header, and check that every file has the same event format: the
    outputs carry a single FDE, so events from files whose post-header lengths or checksum
    setting differ could not be written under it. CRCs are not checked here: the split's own read
    of every file checks them (these events too) as its --no-verify-checksums says."""
    first: tuple[Event, FormatDescription] | None = None
    for path in paths:
        with open_binlog(path) as stream:
            fde, fmt = read_format_description(stream, str(path), verify_checksums=False)
        if first is None:
            first = Event(fde.raw, 4, fmt), fmt
            continue
        ref = first[1]
        if (fmt.checksum_alg, fmt.post_header_lens, fmt.flavor) != (ref.checksum_alg, ref.post_header_lens, ref.flavor):
            raise BinlogError(f"event format differs from {paths[0].name} ({fmt.server_version}, checksum "
                              f"{fmt.checksum_alg} vs {ref.server_version}, checksum {ref.checksum_alg}); "
                              "split files from different servers separately", path=str(path), offset=4)
    start_state = None
    with open_binlog(paths[0]) as stream:
        for event in BinlogReader(stream, str(paths[0]), verify_checksums=False):
            if event.type_code in (EventType.PREVIOUS_GTIDS, EventType.MARIADB_GTID_LIST):
                start_state = event
                break
            if event.type_code not in (EventType.FORMAT_DESCRIPTION, EventType.BINLOG_CHECKPOINT,
                                       EventType.START_ENCRYPTION):
                break
    assert first is not None  # (paths: input_files' list, never empty)
    first_fde, first_fmt = first
    fde = first_fde.with_header(flags=first_fde.flags & ~LOG_EVENT_BINLOG_IN_USE_F)
    return SourceHeader(Event(fde.raw, 4, first_fmt), start_state)
