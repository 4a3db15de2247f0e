"""The master policy's bound on the fast path's statement texts: which fast units of a segment
carry an Annotate_rows / Rows_query text that a slave's policy gate refuses. The core's assembly
writes a kept statement with its annotation; such a unit goes by the reference path instead, where
TransactionFilter sends the allowed rows without the text (a replica applies rows events without
their annotation: it is only a comment for mysqlbinlog and SHOW BINLOG EVENTS)."""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import TYPE_CHECKING

from dumpfilter.codec.constants import EventType, HEADER_LEN
from dumpfilter.rules.gate import Gate
from dumpfilter.codec.scanner import ROW_KEEP, ROW_PARTIAL, ROW_SLOW
from dumpfilter.rules.policy_bound import shape

if TYPE_CHECKING:
    from dumpfilter.master.decide.statement_keys import StatementPathCounts
    from dumpfilter.master.read.columns import UnitIndex
    from dumpfilter.master.read.units import Segment

_SIZE = struct.Struct("<I")
_ANNOTATIONS = (int(EventType.ANNOTATE_ROWS), int(EventType.ROWS_QUERY))
_ROWS_QUERY = int(EventType.ROWS_QUERY)
_TABLE_MAP = int(EventType.TABLE_MAP)

# (text shape, the (db, table) of the Table_maps after it) of each annotation of a fast unit
Annotations = tuple[tuple[str, tuple[tuple[str, str], ...]], ...]


def guard_row(seg: Segment, row: bytes, keep: bytes, gate: Gate, counts: StatementPathCounts) -> bytes:
    """`row` (a slave's answer per unit of `seg`, `keep` its keep byte per table name: rules AND
    gate) with every fast unit it keeps, whole or in part, that carries a text `gate` refuses
    turned ROW_SLOW. The core first clears, with no Python per unit, the units whose texts are
    single-table DML on a table the slave keeps (`UnitList.annotations_unshown`: most units of a
    ROW binlog); only the others are read here, once per segment for every gate (kept on the
    segment's index, in their `shape`: their literals blanked), a gate's answer once per distinct
    set of shapes and Table_maps (`Gate.annotations_refused`: most units of a workload share a few). The core's answers are
    read ahead on the segment's scan thread where the streams keep most units (see
    SegmentCache.texts_wanted). `counts`: its `policy_text_units` counts the units read here."""
    if not gate.bounds or (ROW_KEEP not in row and ROW_PARTIAL not in row):
        return row
    index = seg.index
    assert index is not None, "a row of fast units is a scanned segment's (SlaveStream._row)"
    # (how many units a gated stream keeps: whether the next segments' scans read the texts ahead)
    index.policy_demand = max(index.policy_demand, row.count(ROW_KEEP) + row.count(ROW_PARTIAL))
    unshown = index.unit_list.annotations_unshown(row, keep, index.names, index.formats())
    if not unshown:
        return row
    counts.policy_text_units += len(unshown)
    texts = index.policy_texts
    if texts is None:
        texts = index.policy_texts = {}
    read = _reader(index)
    out = None
    for k in unshown:
        found = texts.get(k)
        if found is None:
            found = texts[k] = read(k)
        if not found:
            continue
        if gate.annotations_refused(found):
            if out is None:
                out = bytearray(row)
            out[k] = ROW_SLOW
    return row if out is None else bytes(out)


def _reader(index: UnitIndex) -> Callable[[int], Annotations]:
    """Unit k's annotations (text shape, the (db, table) of the Table_maps after it), read straight
    from the segment's columns (its record and its part's buffer), no Unit made."""
    unit_list, parts, names = index.unit_list, index.parts, index.names
    size_at = _SIZE.unpack_from
    entry, tables_of = unit_list.unit, unit_list.tables

    def read(k: int) -> Annotations:
        u = entry(k)
        part = parts[u.part]
        buf = part.buf
        fmt = part.fmt if part.fmts is None else part.fmts[k - part.first]
        crc = fmt.checksum_len if fmt is not None else 0
        at, end = u.start, u.end
        found: list[tuple[str, list[tuple[str, str]]]] = []
        ids = None
        t = 0
        while at + HEADER_LEN <= end:
            kind = buf[at + 4]
            size: int = size_at(buf, at + 9)[0]
            if size < HEADER_LEN:
                break
            if kind in _ANNOTATIONS:
                body = HEADER_LEN + (kind == _ROWS_QUERY)  # Rows_query: a length byte the server ignores
                text = bytes(buf[at + body:at + size - crc]).decode("utf-8", "surrogateescape")
                found.append((shape(text), []))
            elif kind == _TABLE_MAP:
                if found:
                    if ids is None:
                        ids = tables_of(k)
                    if t < len(ids):
                        found[-1][1].append(names[ids[t]])
                t += 1
            at += size
        return tuple((sql, tuple(maps)) for sql, maps in found)
    return read
