"""Split on the compiled scan (issue #40): a chunk read a few MB at a time, each buffer scanned once
by the core (`Scanner.units`), its fast ROW units (MariaDB's, and MySQL's with their GTIDs'
transaction_length and, by schema, their BEGINs' default database as `Router` makes them) cut into
every output's copy in one walk (`_core.split_route`, one keep array per output from the rules'
seam, `KeepTable`), its MariaDB statement units (MIXED, STATEMENT: a GTID, single-table DML
Queries, an XID) in the same walk by their statements' keys (one keep byte per key for each
output, each key answered once here, as `filter` answers them), and only the units the core does
not take (DDL, control events, MySQL statement units, statements the core cannot key) routed in
Python by `routing.Router`, as before. Chunk cuts are found by the core's walk with a GTID type
mask (`chunks.gtid_boundaries`), over a mapping of the file.

The bytes each output gets are those the reference path's `encode_unit` gives (positions not yet
final: the series writer renumbers them), so the outputs are the same files.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, BinaryIO

from dumpfilter import _core
from dumpfilter.binlogs import open_binlog
from dumpfilter.codec import Event, Transaction
from dumpfilter.codec.format_description import FormatDescription
from dumpfilter.codec.constants import QUERY_EVENT_TYPES
from dumpfilter.codec.event import decode_text
from dumpfilter.codec.reader import truncated
from dumpfilter._core import split_route
from dumpfilter.codec.scanner import KEEP_DROP, KEEP_KEEP, KEEP_ASK, Scanner, unit_events
from dumpfilter.errors import BinlogError, MalformedEventError
from dumpfilter.rules.keep_table import KeepTable
from dumpfilter.rules.walk_driver import Driver, Unaccounted
from dumpfilter.rules.schema import is_schema_statement
from dumpfilter.spark_jobs.tasks.chunks import Chunk, ReadForward, chunk_start
from dumpfilter.spark_jobs.tasks.routing import Router, _NoMapDecider, schema_binlog_name

if TYPE_CHECKING:
    from dumpfilter.codec.scanner import UnitRecords

READ_BYTES = 4 << 20  # one read buffer: what a task holds of a chunk at a time (twice, for a long unit)


# ------------------------------------------------------------------------------------ keeps
class OutputKeeps:
    """One keep array per output the core routes to, by the scanner's name ids (restarted with
    each scanner), and one per output by the key ids of the buffer's statement units (answered up
    front: `rows`, then `for_keys`). By schema: a table goes to its database's output, a
    keyed statement to its default database's (MySQL's statement rule; WL#2516's effective
    semantics route by the tables, retargeting copies: Python). By --map: each map's rule engine,
    and the rest (what no map keeps) for the unassigned output, through each one's KeepTable."""

    def __init__(self, router: Router):
        self.router = router
        self.by_maps = bool(router.config.maps)
        self.names: list[str | None] = []
        self._tables: list[KeepTable] = []
        self._schemas: dict[str, bytearray] = {}
        self._seen = 0
        self._cache: list[bytes] | None = None
        self._keys: Sequence[_core.StatementKey] = []
        self._targets: dict[bytes, str | None] = {}  # by schema: a key's output, by its bytes
        self._stmt: tuple[int, list[bytes]] | None = None  # (outputs when made, their keep bytes)
        if self.by_maps:
            engines = router._engines
            self._tables = [KeepTable(e) for e in engines] + [KeepTable(_NoMapDecider(engines))]
            self.names = [*(m.name for m in router.config.maps), router.config.unassigned]
            self.by_keys = all(e.keys_statements for e in engines)
        else:
            self.by_keys = router.semantics == "mysql"
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
        """Answers that may have changed (the schema model took DDL): the tables' asked again when
        the core meets them (a key's answer is its rules' of the key alone: `keys_statements`)."""
        for keeps in self._tables:
            keeps.forget_tables()
        self._stmt = None

    def _add_schema(self, db: str) -> None:
        self._schemas[db] = bytearray(self._seen)  # 0 for every earlier name
        self.names.append(schema_binlog_name(db))
        self.counted.append(True)
        self._cache = None

    def for_names(self, names: list[tuple[str, str]]) -> list[bytes]:
        if self.by_maps:
            return [k.tables(names) for k in self._tables]
        if self._seen == len(names) and self._cache is not None:
            return self._cache
        for index in range(self._seen, len(names)):
            db = names[index][0]
            if db not in self._schemas:
                self._add_schema(db)
                self._schemas[db].extend(bytes(index - len(self._schemas[db])))
            for schema, keep in self._schemas.items():
                keep.append(schema == db)
        self._seen = len(names)
        self._cache = [bytes(k) for k in self._schemas.values()]
        return self._cache

    def rows(self, keys: Sequence[_core.StatementKey]) -> Sequence[_core.StatementKey]:
        """A buffer's statement keys (`Scanner.statement_units`), answered up front
        (rules.walk_driver.Answers): by schema, each key's output made now (the outputs are
        known before the walk); each output's keep bytes by `for_keys`."""
        self._keys, self._stmt = keys, None
        if not self.by_maps:
            for key in keys:
                target = self._target(key)
                if target is not None and target not in self._schemas:
                    self._add_schema(target)
        return keys

    def account(self, rows: Sequence[_core.StatementKey], used: _core.KeysUsed) -> None:
        """(The route reports no statements by key: split counts no rule hits.)"""

    def _target(self, key: _core.StatementKey) -> str | None:
        """By schema, the output of a key's statements (None: of no schema, or several, which
        Python routes: a statement of no schema goes to the unassigned output)."""
        raw = key.key
        if raw not in self._targets:
            schemas = self.router.route_of(decode_text(key.sql), decode_text(key.db) or None).schemas
            self._targets[raw] = next(iter(schemas)) if len(schemas) == 1 else None
        return self._targets[raw]

    def schemas(self) -> list[bytes] | None:
        """By schema, each output's schema (utf-8), in the order of `names`, for `split_route` to give
        a MySQL copy's BEGIN (`Router._retarget`); None by --map."""
        if self.by_maps:
            return None
        return [db.encode("utf-8", "surrogateescape") for db in self._schemas]

    def for_keys(self) -> list[bytes]:
        """Each output's keep byte per key id of the buffer's statement units, as `split_route`
        takes them."""
        if self._stmt is not None and self._stmt[0] == len(self.names):
            return self._stmt[1]
        keys = self._keys
        if self.by_maps:
            kept = [t.rows(keys).keep for t in self._tables[:-1]]
            rest = bytes(KEEP_DROP if any(k[i] == KEEP_KEEP for k in kept) else KEEP_KEEP for i in range(len(keys)))
            arrays = [*kept, rest]
        else:
            targets = [self._target(k) for k in keys]
            dropped = bytes(KEEP_ASK if t is None else KEEP_DROP for t in targets)
            by_target: dict[str, list[int]] = {}
            for key_id, target in enumerate(targets):
                if target is not None:
                    by_target.setdefault(target, []).append(key_id)
            arrays = []
            for schema in self._schemas:
                keep = bytearray(dropped)
                for key_id in by_target.get(schema, ()):
                    keep[key_id] = KEEP_KEEP
                arrays.append(bytes(keep))
        self._stmt = (len(self.names), arrays)
        return arrays


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

    def unit(self, name: str, events: list[Event]) -> None:
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


def _walk(stream: BinaryIO, chunk: Chunk, router: Router, keeps: OutputKeeps, deliver: Deliver,
          verify_checksums: bool) -> int:
    name = chunk.path
    scanner = Scanner(name, verify_checksums=verify_checksums)
    keeps.restart()
    fmt, base = chunk_start(stream, chunk, scanner)
    stream.seek(base)
    source = ReadForward(stream, chunk.end)  # bytes, as the core's walks take them (not a mapping's views)
    want = READ_BYTES
    walk = _ChunkWalk(scanner, router, keeps, deliver, fmt, name)
    driver = Driver(keeps)
    while True:
        buf, eof = source.take(base, want)
        scan = scanner.units(buf, 0, base, at_eof=eof)
        walk.begin(buf, base, scan.units)
        driver.drive(walk, len(scan.units))
        walk.ordinal += len(scan.units)
        if scan.error is not None:
            raise scan.error
        if eof:
            if scan.stop < len(buf):
                raise truncated(buf[scan.stop :], name, base + scan.stop)
            return walk.ordinal
        base += scan.stop
        want = READ_BYTES if scan.stop else want * 2  # a unit longer than the buffer: read more at once


class _ChunkWalk:
    """`split`'s walk over a chunk's buffers (rules.walk_driver.Walk): runs the core routes into
    every output at once (`split_route`), each unit it leaves routed in Python (`Router.route`)."""

    def __init__(self, scanner: Scanner, router: Router, keeps: OutputKeeps, deliver: Deliver,
                 fmt: FormatDescription | None, name: str) -> None:
        self.scanner, self.router, self.keeps, self.deliver = scanner, router, keeps, deliver
        self.fmt, self.name = fmt, name
        self.ordinal = 0  # the chunk's units before this buffer's
        self._declined: tuple[int, object] = (-1, None)  # where the core last stopped, with what keys

    def begin(self, buf: bytes, base: int, units: UnitRecords) -> None:
        self.buf, self.base, self.units = buf, base, units

    def key_space(self, at: int) -> FormatDescription | None:
        return self.fmt if self.keeps.by_keys else None

    def statement_units(self, at: int, space: object) -> list[_core.StatementKey] | None:
        assert isinstance(space, FormatDescription)
        return self.scanner.statement_units(self.buf, at, space) if self.units.may_hold_statements(at) else None

    def run(self, at: int, keys: Sequence[_core.StatementKey] | None) -> Unaccounted | None:
        """The core's walk from unit `at`: each output's run delivered."""
        if (self._declined[0] == at and self._declined[1] is keys) or not (
                self.units.is_fast(at) or (keys is not None and self.units.may_hold_statements(at))):
            return None
        deliver, keeps = self.deliver, self.keeps
        deliver.ordinal = self.ordinal + at
        keep_arrays = keeps.for_names(self.scanner.names)
        names = keeps.names  # (after `for_names`: it may add outputs)
        bases = [deliver.base(o) if o is not None else 0 for o in names]
        routed = split_route(self.scanner.core, self.buf, at, keep_arrays, keeps.counted, bases,
                             keeps.for_keys() if keys is not None else None, schemas=keeps.schemas())
        nxt, outs = routed.next, routed.outputs
        self._declined = (nxt, keys)
        if nxt > at:
            stats = self.router.stats
            stats.units += nxt - at
            for out_name, output in zip(names, outs):
                if output.out and out_name is not None:
                    deliver.run(out_name, output.out, memoryview(output.ends).cast("Q"), output.gtid_marks)
            if keeps.by_maps and self.router.config.unassigned is None:
                stats.dropped_units += routed.none
        return Unaccounted(nxt)

    def step(self, at: int) -> int:
        rec, keeps = self.units[at], self.keeps
        events, self.fmt = unit_events(self.buf[rec.start : rec.end], self.base + rec.start, self.fmt, path=self.name)
        self.deliver.ordinal = self.ordinal + at
        for out_name, copy in self.router.route(Transaction(rec.kind, events, rec.complete)):
            self.deliver.unit(out_name, copy)
        if keeps.by_maps and any(e.type_code in QUERY_EVENT_TYPES and is_schema_statement(e.query.sql) for e in events):
            keeps.clear()  # the schema model took DDL: the answers are asked again
        return at + 1
