"""The master's one schema timeline per binlog series: position keys, and the feed that reads the
series' Query statements through the shared segment cache (so the DDL is read with the bytes the
slaves are sent, not a second time from disk while they are cached)."""

from __future__ import annotations

import logging
from collections.abc import Iterator

from dumpfilter.codec.transactions import CONTROL
from dumpfilter.errors import DumpFilterError
from dumpfilter.rules.schema import SchemaModel
from dumpfilter.rules.schema_timeline import SchemaTimeline
from dumpfilter.master.read.columns import LazyUnits
from dumpfilter.master.read.segments import SegmentCache
from dumpfilter.master.read.units import Pos, Unit

log = logging.getLogger(__name__)


def order_key(pos: Pos) -> tuple[int, str, int]:
    """A position as a key that sorts in binlog order: the file's sequence number, then the offset
    (the names sort by their number even past .999999, where the server widens the extension)."""
    file, offset = pos
    ext = file.rpartition(".")[2]
    return (int(ext) if ext.isdigit() else -1, file, offset)


def unit_start(unit: Unit) -> Pos:
    return (unit.file, unit.pos if unit.raw is not None else unit.txn.events[0].pos)


def schema_timeline(segments: SegmentCache, start: SchemaModel | None) -> SchemaTimeline:
    """The series' timeline: `model_at(order_key(P))` is the schema just before P."""

    def feed(resume: tuple[Pos, int] | None, until: tuple[int, str, int]
             ) -> Iterator[tuple[tuple[int, str, int] | None, str | None, str | None, tuple[Pos, int]]]:
        # `resume` is (a segment's start, the index of its next unit): streams read the cache by
        # segment start, so the feed reads the same segments and hits the cache as they do.
        seg_start, index = resume if resume is not None else ((segments.first_file(), 4), 0)
        while True:
            try:
                seg = segments.get(seg_start)
            except DumpFilterError as exc:  # an unreadable older file: decide without its DDL
                log.warning("schema model: DDL after %s:%d not read: %s", seg_start[0], seg_start[1], exc)
                return
            units = seg.units
            n = len(units)
            while index < n:
                unit = units[index]
                start = order_key(unit_start(unit))
                if start >= until:
                    yield None, None, None, (seg_start, index)
                    return
                index += 1
                if unit.is_fast:  # ROW transactions: no statement but BEGIN
                    continue
                txn = unit.txn
                if txn.kind == CONTROL:
                    continue
                for event in txn.events:
                    if event.is_query:
                        yield start, event.sql, event.db, (seg_start, index)
            if not n:  # the end of the binlog for now
                yield None, None, None, (seg_start, 0)
                return
            # The next segment starts where a stream goes next: the end of this one's last unit.
            seg_start, index = units.end_of(n - 1) if isinstance(units, LazyUnits) else units[n - 1].end, 0
            yield None, None, None, (seg_start, 0)

    return SchemaTimeline(start, feed)
