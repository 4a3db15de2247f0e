"""The Spark split without a shuffle: segment files per (chunk, output), joined per output.

1. `write_chunk_segments` (one task per chunk): reads and routes the chunk's units and appends each
   output copy's bytes, as `encode_unit` gives them (log_pos and CRC not yet final), to the
   segment file `<seg_dir>/<chunk>.<name>.seg`; `<chunk>.<name>.idx` holds each unit's end offset
   in the segment and its ordinal among the chunk's units. Incidents (routed to every output) are
   returned with their ordinals instead. Nothing is pickled per unit, nothing is shuffled or sorted.
2. `join_output` (one task per output): reads the output's segments in chunk order, merges in the
   incidents by (chunk, ordinal), and writes the final series through `BinlogSeriesWriter`'s raw
   path (positions renumbered and CRCs recomputed in place, Rotate between files, GTID state per
   file).

Since routing is a pure function of one unit and chunks start on unit boundaries, the join writes
exactly the units, in exactly the order, that the single-process split writes: same bytes.
"""

from __future__ import annotations

import contextlib
import os
from array import array
from dataclasses import dataclass, field
from pathlib import Path

from dumpfilter.codec import Event
from dumpfilter.binlogs.series import DEFAULT_MAX_BINLOG_SIZE, BinlogSeriesWriter, encode_unit
from dumpfilter.spark_jobs.tasks.chunks import Chunk, SourceHeader
from dumpfilter.spark_jobs.tasks.compiled import Deliver, OutputKeeps, route_chunk
from dumpfilter.spark_jobs.tasks.output import OutputSummary, series_writer, summarize
from dumpfilter.spark_jobs.tasks.routing import ALL, ChunkStart, Router

SEGMENT_FLUSH_BYTES = 4 << 20


def segment_stem(seg_dir: str | os.PathLike[str], chunk_no: int, name: str) -> Path:
    return Path(seg_dir) / f"{chunk_no:06d}.{name}"


@dataclass
class ChunkSegments:
    """What a chunk task returns: per output name its (units, bytes) in the chunk, and the
    incidents as (ordinal, bytes)."""

    chunk_no: int
    outputs: dict[str, tuple[int, int]] = field(default_factory=dict)
    incidents: list[tuple[int, bytes]] = field(default_factory=list)
    units: int = 0


class _Segment:
    """One (chunk, output) segment being written: under a name of this process's own, renamed
    into place at the end, so that a retried (or speculative) attempt never mixes its bytes with
    another attempt's."""

    __slots__ = ("file", "buf", "ends", "ordinals", "size", "tmp")

    def __init__(self, path: Path):
        self.tmp = f"{path}.{os.getpid()}.tmp"
        self.file = open(self.tmp + ".seg", "wb")
        self.buf = bytearray()
        self.ends = array("q")
        self.ordinals = array("q")
        self.size = 0  # bytes before self.buf

    def add(self, data: bytes, ordinal: int) -> None:
        self.buf += data
        self.ends.append(self.size + len(self.buf))
        self.ordinals.append(ordinal)
        if len(self.buf) >= SEGMENT_FLUSH_BYTES:
            self._flush()

    def _flush(self) -> None:
        self.file.write(self.buf)
        self.size += len(self.buf)
        self.buf = bytearray()

    def add_run(self, data: bytearray, ends: memoryview, ordinal: int) -> None:
        """A run of units from the core's routing walk (`ends` already offset by `end`): written
        to the file as it is, after what is buffered (not copied into the buffer)."""
        self._flush()
        self.file.write(data)
        self.size += len(data)
        self.ends.frombytes(ends.cast("B"))
        # A run from the core holds no incident (a control unit always stops it): its units may
        # share the ordinal of its first in the index.
        self.ordinals.extend(array("q", [ordinal]) * len(ends))

    @property
    def end(self) -> int:
        return self.size + len(self.buf)

    def discard(self) -> None:
        self.file.close()
        os.unlink(self.tmp + ".seg")

    def close(self, stem: str) -> int:
        self._flush()
        self.file.close()
        with open(self.tmp + ".idx", "wb") as idx:
            idx.write(self.ends.tobytes())
            idx.write(self.ordinals.tobytes())
        os.replace(self.tmp + ".seg", stem + ".seg")
        os.replace(self.tmp + ".idx", stem + ".idx")
        return self.size


def write_chunk_segments(chunk: Chunk, chunk_no: int, seg_dir: str | os.PathLike[str], router: Router, *,
                         verify_checksums: bool = True, start: ChunkStart | None = None) -> ChunkSegments:
    """Route one chunk's units with `router` into segment files under `seg_dir` (see the module docstring),
    from `start`, the state the first pass found at the chunk's start (routing.chunk_starts)."""
    router.start_chunk(start)
    result = ChunkSegments(chunk_no)
    deliver = _ToSegments(seg_dir, chunk_no, result)
    try:
        units = route_chunk(chunk, router, OutputKeeps(router), deliver, verify_checksums=verify_checksums)
    except BaseException:
        for segment in deliver.segments.values():
            segment.discard()
        raise
    for name, segment in deliver.segments.items():
        size = segment.close(str(segment_stem(seg_dir, chunk_no, name)))
        result.outputs[name] = (len(segment.ends), size)
    result.units = units
    return result


class _ToSegments(Deliver):
    """A chunk's routed units into its segment files (incidents into the result)."""

    def __init__(self, seg_dir: str | os.PathLike[str], chunk_no: int, result: ChunkSegments):
        self.seg_dir, self.chunk_no, self.result = seg_dir, chunk_no, result
        self.segments: dict[str, _Segment] = {}

    def _segment(self, name: str) -> _Segment:
        segment = self.segments.get(name)
        if segment is None:
            segment = self.segments[name] = _Segment(segment_stem(self.seg_dir, self.chunk_no, name))
        return segment

    def base(self, name: str) -> int:
        segment = self.segments.get(name)
        return segment.end if segment is not None else 0

    def run(self, name: str, data: bytearray, ends: memoryview, marks: bytes | None = None) -> None:
        self._segment(name).add_run(data, ends, self.ordinal)

    def unit(self, name: str, events: list[Event]) -> None:
        if name == ALL:
            self.result.incidents.append((self.ordinal, encode_unit(events)))
        else:
            self._segment(name).add(encode_unit(events), self.ordinal)


JOIN_BLOCK_BYTES = 1 << 20  # the join renumbers and writes a segment this much at a time


def read_index(seg_dir: str | os.PathLike[str], chunk_no: int, name: str, units: int) -> tuple[array[int], array[int]]:
    """A segment's unit ends (offsets in the segment) and ordinals."""
    index = array("q", Path(str(segment_stem(seg_dir, chunk_no, name)) + ".idx").read_bytes())
    return index[:units], index[units:]


def read_segment(seg_dir: str | os.PathLike[str], chunk_no: int, name: str, units: int) -> tuple[bytearray, array[int], array[int]]:
    """A whole segment (its bytes, unit ends and ordinals)."""
    with open(str(segment_stem(seg_dir, chunk_no, name)) + ".seg", "rb") as f:
        buf = bytearray(os.fstat(f.fileno()).st_size)
        f.readinto(buf)
    return (buf, *read_index(seg_dir, chunk_no, name, units))


class _Blocks:
    """A join's one reusable block buffer: a segment is read, renumbered and written about
    `JOIN_BLOCK_BYTES` at a time, on unit boundaries, into the same buffer (still in the CPU's
    cache when the writer renumbers and writes it; a segment-sized buffer was allocated, faulted
    in and read cold per segment)."""

    def __init__(self, size: int = JOIN_BLOCK_BYTES):
        self.size = size
        self.buf = bytearray(size)

    def write(self, writer: BinlogSeriesWriter, path: str, ends: array[int]) -> None:
        import numpy as np

        n = len(ends)
        if not n:
            return
        offsets = np.frombuffer(ends, dtype=np.int64)
        with open(path, "rb", buffering=0) as f:
            i, start = 0, 0
            while i < n:
                # the units ending within a block from `start` (at least one, whatever its size)
                j = min(n, max(i + 1, int(np.searchsorted(offsets, start + self.size, side="right"))))
                stop = int(offsets[j - 1])
                if stop - start > len(self.buf):
                    self.buf = bytearray(stop - start)
                view = memoryview(self.buf)[: stop - start]
                got = f.readinto(view)
                if got != stop - start:
                    raise OSError(f"{path}: segment shorter than its index ({start + (got or 0)} of {stop} bytes)")
                writer.write_run(self.buf, (offsets[i:j] - start).tolist())
                i, start = j, stop

@dataclass(frozen=True)
class JoinTask:
    """What one join task needs: the output's (chunk_no, units) segments in chunk order and every
    incident as (chunk_no, ordinal, bytes)."""

    name: str
    segments: tuple[tuple[int, int], ...]
    incidents: tuple[tuple[int, int, bytes], ...] = ()
    bytes: int = 0


def join_tasks(results: list[ChunkSegments]) -> list[JoinTask]:
    """One join task per output that got at least one unit, largest first (so that the scheduler
    starts the longest joins first)."""
    results = sorted(results, key=lambda r: r.chunk_no)
    incidents = tuple((r.chunk_no, ordinal, data) for r in results for ordinal, data in r.incidents)
    segments: dict[str, list[tuple[int, int]]] = {}
    sizes: dict[str, int] = {}
    for r in results:
        for name, (units, size) in r.outputs.items():
            segments.setdefault(name, []).append((r.chunk_no, units))
            sizes[name] = sizes.get(name, 0) + size
    plans = [JoinTask(name, tuple(segs), incidents, sizes[name]) for name, segs in segments.items()]
    return sorted(plans, key=lambda p: (-p.bytes, p.name))


def join_output(plan: JoinTask, seg_dir: str | os.PathLike[str], out: str | os.PathLike[str], header: SourceHeader,
                max_size: int = DEFAULT_MAX_BINLOG_SIZE, *, block_bytes: int = JOIN_BLOCK_BYTES) -> OutputSummary:
    """Write one output's final series from its segments (see the module docstring), a segment
    `block_bytes` at a time (on unit boundaries; a longer unit is a block of its own)."""
    writer = series_writer(out, plan.name, header, max_size)
    incidents: dict[int, list[tuple[int, bytes]]] = {}
    for chunk_no, ordinal, data in plan.incidents:
        incidents.setdefault(chunk_no, []).append((ordinal, data))
    units = 0
    segments = dict(plan.segments)
    blocks = _Blocks(block_bytes)
    for chunk_no in sorted(set(segments) | set(incidents)):
        count = segments.get(chunk_no)
        if count is None:
            for _, data in incidents[chunk_no]:
                writer.write_run(bytearray(data), (len(data),))
            continue
        units += count
        chunk_incidents = incidents.get(chunk_no)
        if not chunk_incidents:
            ends, _ = read_index(seg_dir, chunk_no, plan.name, count)
            blocks.write(writer, str(segment_stem(seg_dir, chunk_no, plan.name)) + ".seg", ends)
            continue
        buf, ends, ordinals = read_segment(seg_dir, chunk_no, plan.name, count)
        _write_merged(writer, buf, ends, ordinals, chunk_incidents)
    summary = summarize(plan.name, writer.close(), units)
    # The output is written: its segments go now, in this task (removing 2 GB of segments took
    # the driver 0.6 s, alone, after the join; here each task removes its own, in parallel). A
    # task that fails before this point leaves them for its retry; the driver removes the rest.
    for chunk_no in segments:
        stem = str(segment_stem(seg_dir, chunk_no, plan.name))
        for suffix in (".seg", ".idx"):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(stem + suffix)
    return summary


def _write_merged(writer: BinlogSeriesWriter, buf: bytearray, ends: array[int], ordinals: array[int],
                  incidents: list[tuple[int, bytes]]) -> None:
    """The units of a segment with a chunk's incidents in between, by ordinal (rare: slow is fine)."""
    start, i = 0, 0  # byte offset and index of the first unit not yet written
    for ordinal, data in [*incidents, (float("inf"), b"")]:
        j = i
        while j < len(ends) and ordinals[j] < ordinal:
            j += 1
        if j > i:
            writer.write_run(bytearray(buf[start : ends[j - 1]]), [e - start for e in ends[i:j]])
            start, i = ends[j - 1], j
        if data:
            writer.write_run(bytearray(data), (len(data),))
