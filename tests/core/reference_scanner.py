"""The small, slow Python reference the compiled scanner is checked against: a plain header
hop with zlib CRCs, the codec's FormatDescription and Event decoders, and the product's
TransactionGrouper (the grouping semantics), plus the fast-unit shape written out longhand.
It shares no code with the Rust walk."""

from __future__ import annotations

import struct
import zlib

from dumpfilter.codec import Event, EventType, FormatDescription, TransactionGrouper
from dumpfilter.codec.checksum import crc_ok
from dumpfilter.codec.constants import KNOWN_TYPES, LOG_EVENT_ARTIFICIAL_F, ROWS_EVENT_TYPES
from dumpfilter.errors import BinlogError, ChecksumError

MAX_EVENT_SIZE = 1 << 30
ROWS = {int(t) for t in ROWS_EVENT_TYPES}


def walk(data: bytes, start: int = 4, fmt: FormatDescription | None = None, *, verify: bool = True):
    """(events, error): every whole event from `start` (Events with their format), and the
    error that stopped the walk (None at a clean end or a partial last event)."""
    events, off = [], start
    while off + 19 <= len(data):
        t = data[off + 4]
        size = struct.unpack_from("<I", data, off + 9)[0]
        if size < 19 or size > MAX_EVENT_SIZE:
            return events, BinlogError(f"event size {size} is impossible (type {t})", offset=off)
        if off + size > len(data):
            break
        raw = data[off : off + size]
        try:
            if t == EventType.FORMAT_DESCRIPTION:
                fmt = FormatDescription.parse(raw, offset=off)
                if verify and fmt.checksum_alg is not None and not crc_ok(raw):
                    return events, ChecksumError("CRC32 mismatch in Format_description event", offset=off)
            elif fmt is None:
                return events, BinlogError("no Format_description event", offset=off)
            elif verify and fmt.checksum_len and zlib.crc32(raw[:-4]) != struct.unpack_from("<I", raw, size - 4)[0]:
                return events, ChecksumError("CRC32 mismatch", offset=off)
        except BinlogError as exc:
            return events, exc
        events.append(Event(raw, off, fmt))
        off += size
    return events, None


def _fast_ok(fmt) -> bool:
    return fmt is not None and len(fmt.post_header_lens) >= 19 and fmt.post_header_len(19) == 8 and all(
        fmt.table_id_len(t) == 6 for t in ROWS)


def fast_tables(txn) -> list[tuple[str, str]] | None:
    """The (db, table) of each Table_map when the unit has the fast shape, else None: a
    non-standalone MariaDB GTID, or a MySQL GTID then a plain BEGIN; then only annotations,
    Table_maps and rows events whose table id a Table_map of this unit declared (no annotation
    in between); then an XID."""
    events = txn.events
    if not txn.complete or not events or not events[0].is_gtid or not _fast_ok(events[0].fmt):
        return None
    first = events[0]
    body = events[1:]
    if first.type_code == EventType.MARIADB_GTID:
        if first.is_standalone:
            return None
    else:
        if not body or body[0].type_code != EventType.QUERY or body[0].sql != "BEGIN":
            return None
        body = body[1:]
    if not body or body[-1].type_code != EventType.XID:
        return None
    tables, ids, annotation = [], set(), False
    for e in body[:-1]:
        t = e.type_code
        if t == EventType.TABLE_MAP:
            # The names must lie inside the body (a damaged length byte makes the unit slow).
            i = 19 + e.fmt.post_header_len(19)
            raw = e.raw
            body_end = len(raw) - e.fmt.checksum_len
            if i >= body_end or i + 2 + raw[i] >= body_end or i + 3 + raw[i] + raw[i + 2 + raw[i]] > body_end:
                return None
            _, db, table = e.table_map
            tables.append((db, table))
            ids.add(e.raw[19:25])
            annotation = False
        elif t in ROWS:
            if annotation or e.raw[19:25] not in ids:
                return None
        elif t in (EventType.ANNOTATE_ROWS, EventType.ROWS_QUERY):
            annotation = True
        else:
            return None
    return None if annotation else tables


def units(data: bytes, *, verify: bool = True, at_eof: bool = True):
    """(units, error): one tuple per unit, (start, end, events, kind, complete, fast tables or
    None, GTID text or None, ends with a real Rotate)."""
    events, error = walk(data, verify=verify)
    grouper = TransactionGrouper()
    txns = []
    for e in events:
        txns.extend(grouper.push(e))
    if at_eof and error is None:
        txns.extend(grouper.flush())
    out = []
    for txn in txns:
        last = txn.events[-1]
        rotate = last.type_code == EventType.ROTATE and not last.flags & LOG_EVENT_ARTIFICIAL_F
        first = txn.events[0]
        gtid = first.gtid if first.is_gtid and first.type_code != EventType.ANONYMOUS_GTID else None
        out.append((first.pos, last.end_pos, len(txn.events), txn.kind, txn.complete, fast_tables(txn), gtid, rotate))
    return out, error


def unknown_types(events) -> bool:
    return any(e.type_code not in KNOWN_TYPES for e in events)
