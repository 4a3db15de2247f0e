"""`experiment`'s count mode offered to a live master's shadow candidates (master/shadow): a range of
one binlog file counted for every candidate at once by `bandwidth.count_chunk` (the compiled walk
`experiment --candidates` runs), each candidate's counts folded into its running totals by the
merges `experiment` joins its chunks with (tasks.counts), and the report rows made by its writers.

The master never imports spark_jobs (the edges do not import one another): the CLI, above both,
hands the master a `ShadowCounts` (master.shadow.board.Counting is the shape it needs). So there is
one counting implementation: a candidate's totals over a range are `experiment`'s over it, cut
where the master's pass happened to stop (on GTID events, as `experiment` cuts chunks), and
`experiment`'s totals do not depend on where chunks are cut (tasks.counts joins heartbeat
stretches and rotates across them). Where the master's streams have scanned the bytes already, the
count walks their UnitLists (`count_scanned`: `count_chunk`'s walk over buffers it did not scan).
"""

from __future__ import annotations

import itertools
import mmap
from collections.abc import Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, cast

from dumpfilter import _core
from dumpfilter.binlogs import open_binlog
from dumpfilter.codec.constants import GTID_EVENT_TYPES, MAGIC
from dumpfilter.codec.scanner import Scanner, type_mask
from dumpfilter.spark_jobs.tasks.bandwidth import ScannedBuffer, count_buffers, count_chunk
from dumpfilter.spark_jobs.tasks.chunks import Buffer, Chunk, chunk_start
from dumpfilter.spark_jobs.tasks.counts import ChunkCounts, joined_statements, joined_tables, merge_counts, merge_hours

if TYPE_CHECKING:
    from dumpfilter.codec.format_description import FormatDescription
    from dumpfilter.rules.gate import Gate
    from dumpfilter.topology import SlaveSpec

_GTID_MASK = type_mask(GTID_EVENT_TYPES)


class ScannedPart(Protocol):
    """What the counting reads of the master's scan of one file's bytes (master.read.columns.Part):
    the buffer its units lie in, its file offset, the format in force before it, the checksum length."""

    @property
    def buf(self) -> Any: ...  # bytes, a memoryview or an mmap: read by slices
    @property
    def base(self) -> int: ...
    @property
    def fmt(self) -> FormatDescription | None: ...
    @property
    def crc(self) -> int: ...


Scanned = tuple[_core.UnitList, ScannedPart, list[tuple[str, str]]]  # see ShadowCounts.count_scanned


class ShadowCounts:
    """The master's counting of shadow candidates, `experiment`'s own (see the module's docstring)."""

    def __init__(self, verify_checksums: bool = True) -> None:
        self.verify_checksums = verify_checksums
        # The last join of bytes by table and by statement (`fold`), by the dicts it joined: every
        # candidate's range holds the same ones (the binlog's, not a rule's), joined once a range.
        self._joined: tuple[list[object], Any, Any] | None = None

    def count(self, file_index: int, path: str, start: int, end: int | None, specs: Sequence[SlaveSpec],
              gates: Sequence[Gate | None]) -> list[ChunkCounts]:
        """Every candidate's counts over bytes [start, end) of `path` (end None: to the file's end;
        `start` 0 or a GTID event's offset, `end` a GTID event's offset), in `specs` order."""
        return count_chunk(Chunk(file_index, path, start, end), specs, gates, verify_checksums=self.verify_checksums,
                           minutes=False)

    def count_scanned(self, file_index: int, path: str, scanned: Iterator[Scanned], specs: Sequence[SlaveSpec],
                      gates: Sequence[Gate | None]) -> list[ChunkCounts]:
        """`count` over units the master's streams already scanned: `scanned` yields consecutive
        UnitLists of `path` (segments' of one part each), each with its part and its name ids' (db,
        table), taken as they are counted. The same counts as `count` over their bytes, without
        reading them again. The first starts where a unit does (at 4: the file's header events
        counted as from 0)."""
        first = next(scanned, None)
        if first is None:
            return []
        units, part, _ = first
        start = part.base + (units.unit(0).start if len(units) else 0)
        names = [first[2]]

        def buffers(cuts: list[bool], divide: int) -> Iterator[ScannedBuffer]:
            for units, part, seg_names in itertools.chain([first], scanned):
                names[0] = seg_names
                yield part.fmt, cast(Buffer, part.buf), part.base, units, len(units), part.crc

        chunk = Chunk(file_index, path, 0 if start <= 4 else start)
        return count_buffers(chunk, specs, gates, buffers, lambda: names[0], minutes=False)

    @staticmethod
    def whole_units_end(path: str, start: int, written: int) -> int:
        """Where the whole units of a file being written end, from `start` (0, or where a unit
        starts) up to `written` (the end of its last whole event): the transaction its last GTID
        event opens, when it is whole (its XID or COMMIT written), else that GTID event's offset;
        `start` when nothing whole follows it. Events are hopped over, never decoded, but for the
        last transaction's."""
        return _whole_units_end(path, start, written)[0]

    @staticmethod
    def live_start(path: str, written: int) -> int:
        """Where a candidate added now starts in the file being written: the end of its whole
        units, or its start (0) while it holds no transaction yet (its header events are counted)."""
        end, any_gtid = _whole_units_end(path, 0, written)
        return end if any_gtid else 0

    def fold(self, before: ChunkCounts | None, part: ChunkCounts) -> ChunkCounts:
        """A candidate's running totals (`before`, a ChunkCounts standing for every range counted so
        far) with the next range's counts added, joined as `experiment` joins two chunks."""
        # (no minutes: `experiment` charts a run of under two hours by minutes, but a live master's
        # report is by hour (ShadowReport), and a total that kept them would grow a bucket a minute.
        # The ranges are counted by hours, `count_buffers(minutes=False)`: a range holds none.)
        if before is None:
            return part
        name = part.counts.slave
        if before.counts.slave != name:  # (the merges join a slave's chunks by its name)
            before = replace(before, counts=replace(before.counts, slave=name))
        both = [before, part]
        total = merge_counts(both, [name])[0]
        joined, dicts = self._joined, [before.tables, part.tables, before.statements, part.statements]
        if joined is None or any(a is not b for a, b in zip(joined[0], dicts)):
            joined = self._joined = (dicts, joined_tables(before.tables, part.tables),
                                     joined_statements(before.statements, part.statements))
        return ChunkCounts(part.file_index, part.start, total, leading_skip=before.leading_skip,
                           trailing_skip=part.trailing_skip, heartbeat_size=part.heartbeat_size,
                           rotate_end=part.rotate_end, last_time=max(before.last_time, part.last_time),
                           by_hour=(merge_hours(both, [name]) or {})[name], by_minute=None, tables=joined[1],
                           statements=joined[2])

    @staticmethod
    def report(specs: Sequence[SlaveSpec], gates: Sequence[Gate | None], totals: Sequence[ChunkCounts],
               lint: Sequence[tuple[str, int | None, bool]]) -> dict[str, list[dict[str, Any]]]:
        """`experiment`'s report rows for the candidates (its writers' rows): `candidates` (ranked,
        with lint's verdict, stops and divergence as given per candidate), `bandwidth` (one per
        candidate), `by_hour`, `by_table`."""
        from dumpfilter.spark_jobs.bandwidth_experiment import hour_rows, rank_candidates, rows_for, table_rows
        from dumpfilter.topology import Topology

        topology = Topology(slaves=tuple(specs))
        counts = [t.counts for t in totals]
        hours: list[dict[str, Any]] = []
        tables: list[dict[str, Any]] = []
        for spec, gate, total in zip(specs, gates, totals):
            hours += hour_rows([spec.name], {spec.name: total.by_hour})
            tables += table_rows(Topology(slaves=(spec,)), [gate], [total.counts], total.tables, total.statements)
        return {"candidates": rank_candidates(specs, counts, lint), "bandwidth": rows_for(topology, counts),
                "by_hour": hours, "by_table": tables, "names": [{"name": s.name} for s in specs]}


def _whole_units_end(path: str, start: int, written: int) -> tuple[int, bool]:
    """`ShadowCounts.whole_units_end`, and whether a GTID event follows `start`."""
    if written <= max(start, 4):
        return start, False
    scanner = Scanner(path, verify_checksums=True)
    with open_binlog(Path(path)) as stream:
        _, pos = chunk_start(stream, Chunk(0, path, 5), scanner)  # the file's format: CRCs checked below
        with mmap.mmap(stream.fileno(), 0, prot=mmap.PROT_READ) as mapped:
            if len(mapped) < written or mapped[:4] != MAGIC:
                return start, False
            with memoryview(mapped) as view, view[:written] as part:
                last = _last_gtid(scanner, part, max(start, 4), written)
        found, last = last is not None, start if last is None else last
        stream.seek(0)
        _, pos = chunk_start(stream, Chunk(0, path, last), scanner)
        stream.seek(pos)
        tail = stream.read(written - pos)
    scan = scanner.scan_into(_core.UnitList(), tail, 0, pos, Path(path).name)
    return (pos + scan.stop if scan.error is None and scan.added else last), found


TAIL_BYTES = 1 << 20  # the first window the last GTID event is looked for in, before the written end
TAIL_MAX_BYTES = 64 << 20  # the largest, before a walk from the range's start


def _last_gtid(scanner: Scanner, part: memoryview, lo: int, written: int) -> int | None:
    """The offset of the last GTID event in part(lo:written] (`lo` 4 or an event's offset; events end
    exactly at `written`).
    Looked for backwards in a window before `written`, doubled while it holds none: an offset whose
    header has a GTID type and ends where its log_pos says is taken once the checked walk from it
    (lengths and CRC32s) lands on `written` (or, CRC32s checked, meets no error); a window that
    reaches `lo` or TAIL_MAX_BYTES is walked from `lo`."""
    window, checked = TAIL_BYTES, scanner.checksum_len > 0
    while written - window > lo and window <= TAIL_MAX_BYTES:
        a = written - window
        data = part[a:written].tobytes()
        starts = sorted((a + k for t in GTID_EVENT_TYPES for k in _finds(data, t)), reverse=True)
        for o in starts:
            size = int.from_bytes(part[o + 9:o + 13], "little")
            if size < 19 or o + size > written or int.from_bytes(part[o + 13:o + 17], "little") != o + size:
                continue
            offsets, stop, error = scanner.walk(part, o, 0, _GTID_MASK)
            offsets.release()
            # (with CRC32s a walk without error from `o` proves it an event, wherever `written` is)
            if error is None and (stop == written or checked):
                return o
        window *= 4
    offsets, _, _ = scanner.walk(part, lo, 0, _GTID_MASK)
    try:
        return max((o for o in offsets if o > lo and part[o + 4] in GTID_EVENT_TYPES), default=None)
    finally:
        offsets.release()


def _finds(data: bytes, byte: int) -> list[int]:
    """Where `byte` stands 4 bytes into a possible event header of `data` (an event's type)."""
    out, k = [], data.find(bytes([byte]), 4)
    while k >= 0:
        if k + 15 <= len(data):
            out.append(k - 4)
        k = data.find(bytes([byte]), k + 1)
    return out

