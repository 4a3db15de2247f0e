"""Split on the compiled scan (issue #40): a chunk read a few MB at a time, each buffer scanned once
by the core (`Scanner.units`), its fast MariaDB ROW units cut into every output's copy in one walk
(`_core.split_route`, one keep array per output from the rules' seam, `TableKeeps`), and only the
units the core does not take (statements, DDL, control events, MySQL units, partly kept
statements) routed in Python by `routing.Router`, as before. Chunk cuts are found by the core's
walk with a GTID type mask (`chunks.gtid_boundaries`), over a mapping of the file.

The bytes each output gets are those the reference path's `encode_unit` gives (positions not yet
final: the series writer renumbers them), so the outputs are the same files.
"""

from __future__ import annotations

import io
import struct
from array import array
from collections.abc import Callable

from dumpfilter.binlogs import open_binlog
from dumpfilter.codec import Transaction, bad_magic, read_format_description
from dumpfilter.codec.constants import HEADER_LEN, MAGIC, QUERY_EVENT_TYPES
from dumpfilter.codec.scanner import Scanner, split_route, unit_events
from dumpfilter.errors import BinlogError, MalformedEventError, TruncatedBinlogError
from dumpfilter.rules.decider import TableKeeps
from dumpfilter.rules.schema import is_schema_statement
from dumpfilter.spark_jobs.tasks.chunks import Chunk
from dumpfilter.spark_jobs.tasks.routing import Router, _NoMapDecider, schema_binlog_name

READ_BYTES = 4 << 20  # one read buffer: what a task holds of a chunk at a time (twice, for a long unit)
_U32 = struct.Struct("<I")


# ------------------------------------------------------------------------------------ chunk cuts
# ------------------------------------------------------------------------------------ keeps
class OutputKeeps:
    """One keep array per output the core routes to, by the scanner's name ids (restarted with
    each scanner). By schema: a table goes to its database's output. By --map: each map's rule
    engine, and the rest (what no map keeps) for the unassigned output, through TableKeeps."""

    def __init__(self, router: Router):
        self.router = router
        self.by_maps = bool(router.config.maps)
        self.names: list[str | None] = []
        self._tables: list[TableKeeps] = []
        self._schemas: dict[str, bytearray] = {}
        self._seen = 0
        self._cache: list[bytes] | None = None
        if self.by_maps:
            engines = router._engines
            self._tables = [TableKeeps(e) for e in engines] + [TableKeeps(_NoMapDecider(engines))]
            self.names = [m.name for m in router.config.maps] + [router.config.unassigned]
        self.counted = [True] * len(router.config.maps) + [router.config.unassigned is not None]

    def restart(self) -> None:
        """A new scanner: its name ids start again."""
        self.clear()
        self._schemas.clear()
        self._seen = 0
        self._cache = None
        if not self.by_maps:
            self.names, self.counted = [], []

    def clear(self) -> None:
        """Answers that may have changed (the schema model took DDL): asked again."""
        for keeps in self._tables:
            keeps.clear()

    def for_names(self, names: list[tuple[str, str]]) -> list[bytes]:
        if self.by_maps:
            return [k.for_names(names) for k in self._tables]
        if self._seen == len(names) and self._cache is not None:
            return self._cache
        for index in range(self._seen, len(names)):
            db = names[index][0]
            if db not in self._schemas:
                self._schemas[db] = bytearray(index)  # 0 for every earlier name
                self.names.append(schema_binlog_name(db))
                self.counted.append(True)
            for schema, keep in self._schemas.items():
                keep.append(schema == db)
        self._seen = len(names)
        self._cache = [bytes(k) for k in self._schemas.values()]
        return self._cache


# ------------------------------------------------------------------------------------ the walk
class Deliver:
    """Where a chunk's routed units go: `run(name, data, ends)` a run of units from the core
    (`ends` packed u64, offset by `base(name)`; `marks` the GTID events
    a series' next state needs, as `gtid_marks` finds them), `unit(name, events)` one unit routed in Python
    (`ALL` for every output). `ordinal` counts the chunk's units before the current one."""

    ordinal = 0

    def base(self, name: str) -> int:
        return 0

    def run(self, name: str, data: bytearray, ends: memoryview, marks: bytes | None = None) -> None:
        raise NotImplementedError

    def unit(self, name: str, events: list) -> None:
        raise NotImplementedError


def route_chunk(chunk: Chunk, router: Router, keeps: OutputKeeps, deliver: Deliver, *,
                verify_checksums: bool = True) -> int:
    """Route one chunk's units into `deliver`; returns the chunk's unit count."""
    name = chunk.path
    try:
        with open_binlog(chunk.path) as stream:
            return _walk(stream, chunk, router, keeps, deliver, verify_checksums)
    except (OSError, EOFError) as exc:
        raise BinlogError(f"read error: {exc}", path=name) from None
    except MalformedEventError as exc:  # found by a TransactionFilter, which knows no file
        raise exc.in_file(name) from None


def _walk(stream, chunk: Chunk, router: Router, keeps: OutputKeeps, deliver: Deliver,
          verify_checksums: bool) -> int:
    name = chunk.path
    scanner = Scanner(name, verify_checksums=verify_checksums)
    keeps.restart()
    fmt = None
    if chunk.start > 4:
        fde, fmt = read_format_description(stream, name)
        scanner.load_format(fde.raw, 4)
        base = chunk.start
        stream.seek(base)
    else:
        magic = stream.read(4)
        if magic != MAGIC:
            if len(magic) < 4:
                raise TruncatedBinlogError(f"file is {len(magic)} bytes long, too short for the binlog magic",
                                           path=name, offset=0)
            raise bad_magic(name)
        base = 4
    end = chunk.end
    rereads = isinstance(stream, io.BufferedReader)  # a plain file: read again from where the scan stopped
    buf = b""
    want = READ_BYTES
    ordinal = 0
    route_unit: Callable = router.route
    by_maps = keeps.by_maps
    while True:
        size = want if end is None else min(want, end - base - (0 if rereads else len(buf)))
        if rereads:
            stream.seek(base)
            buf = stream.read(size) if size > 0 else b""
            eof = len(buf) < want or (end is not None and base + len(buf) >= end)
        else:
            more = stream.read(size) if size > 0 else b""
            eof = not more or (end is not None and base + len(buf) + len(more) >= end)
            buf = buf + more if buf else more
        scan = scanner.units(buf, 0, base, at_eof=eof)
        units = scan.units
        i, n = 0, len(units)
        keep_arrays = keeps.for_names(scanner.names)
        while i < n:
            if units.is_fast(i):
                i = _core_run(scanner, buf, i, keep_arrays, keeps, router, deliver, ordinal)
                if i >= n:
                    break
            rec = units[i]
            events, fmt = unit_events(buf[rec.start : rec.end], base + rec.start, fmt, path=name)
            deliver.ordinal = ordinal + i
            for out_name, copy in route_unit(Transaction(rec.kind, events, rec.complete)):
                deliver.unit(out_name, copy)
            if by_maps and any(e.type_code in QUERY_EVENT_TYPES and is_schema_statement(e.sql) for e in events):
                keeps.clear()  # the schema model took DDL: the tables' answers are asked again
                keep_arrays = keeps.for_names(scanner.names)
            i += 1
        ordinal += n
        if scan.error is not None:
            raise scan.error
        buf, base = buf[scan.stop :], base + scan.stop
        if eof:
            break
        want = READ_BYTES if scan.stop else want * 2  # a unit longer than the buffer: read more at once
    if buf:
        left = len(buf)
        msg = (f"event size {_U32.unpack_from(buf, 9)[0]} runs past the end of the file ({left} bytes left)"
               if left >= HEADER_LEN else f"file ends inside an event header ({left} of {HEADER_LEN} bytes)")
        raise TruncatedBinlogError(msg, path=name, offset=base)
    return ordinal


def _core_run(scanner: Scanner, buf: bytes, i: int, keep_arrays: list[bytes], keeps: OutputKeeps, router: Router,
              deliver: Deliver, ordinal: int) -> int:
    """The core's walk from unit i: each output's run delivered; returns the next unit index."""
    names = keeps.names
    deliver.ordinal = ordinal + i
    nxt, outs, multi, none = split_route(scanner.core, buf, i, keep_arrays, keeps.counted,
                                         [deliver.base(o) if o is not None else 0 for o in names])
    if nxt > i:
        stats = router.stats
        stats.units += nxt - i
        stats.split += multi
        for out_name, (data, ends, marks) in zip(names, outs):
            if data and out_name is not None:
                deliver.run(out_name, data, memoryview(ends).cast("Q"), marks)
        if keeps.by_maps:
            stats.unassigned_units += len(outs[-1][1]) // 8
            if router.config.unassigned is None:
                stats.dropped_units += none
    return nxt


def ordinals(ordinal: int, count: int) -> array:
    """`count` units' ordinals in a segment index: a run from the core holds no incident (a
    control unit always stops it), so its units may share the ordinal of its first."""
    return array("q", [ordinal]) * count
