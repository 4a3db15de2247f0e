"""Builders for event bytes: used by the writer (Rotate, Stop, set events), by the workload
generator and by the tests. Each returns a complete event with a CRC when the format asks for one."""

from __future__ import annotations

import struct

from dumpfilter.codec.checksum import with_crc
from dumpfilter.codec.constants import (
    CHECKSUM_CRC32,
    CHECKSUM_OFF,
    HEADER_LEN,
    LOG_EVENT_ARTIFICIAL_F,
    EventType,
)
from dumpfilter.codec.event import HEADER, Event
from dumpfilter.codec.format_description import FormatDescription
from dumpfilter.codec.packing import encode_lenenc, mariadb_compress
from dumpfilter.codec.gtid import uuidlib

_QUERY_POST = struct.Struct("<IIBHH")

# Post-header length tables exactly as real servers write them in their FDE
# (research/binlog-format.md §4).
# MySQL 8.0.31: 41 event types.
MYSQL_80_POST_HEADERS = bytes(
    [0, 13, 0, 8, 0, 0, 0, 0, 4, 0, 4, 0, 0, 0, 98, 0, 4, 26, 8, 0, 0, 0, 8, 8, 8, 2, 0, 0, 0, 10, 10, 10, 42, 42, 0, 18, 52, 0, 10, 40, 0]
)
# MariaDB 11.8.5: 171 event types (MariaDB-only types 160-171 at the end).
MARIADB_POST_HEADERS = bytes(
    [56, 13, 0, 8, 0, 18, 0, 4, 4, 4, 4, 18, 0, 0, 228, 0, 4, 26, 8, 0, 0, 0, 8, 8, 8, 2, 0, 0, 0, 10, 10, 10, 0, 0, 0, 0, 0, 0, 10, 10, 10, 0, 0, 0, 0]
    + [0] * 115 + [4, 19, 4, 0, 13, 8, 8, 8, 10, 10, 10]
)


def build_event(type_code: int, body: bytes, *, fmt: FormatDescription | None, server_id: int = 1,
                timestamp: int = 0, log_pos: int = 1, flags: int = 0, pos: int = 0) -> Event:
    """An event from its body; `fmt` decides whether a CRC is appended. The default log_pos is a
    placeholder that BinlogWriter replaces with the real end offset; pass 0 for an artificial
    event that must keep 0."""
    crc = fmt is not None and (fmt.checksum_alg == CHECKSUM_CRC32 or
                               (type_code == EventType.FORMAT_DESCRIPTION and fmt.checksum_alg is not None))
    size = HEADER_LEN + len(body) + (4 if crc else 0)
    raw = HEADER.pack(timestamp, type_code, server_id, size, log_pos, flags) + body
    if crc:
        raw = with_crc(raw)
    return Event(raw, pos, fmt)


def format_description(server_version: str = "8.0.36-dumpfilter", *, checksum: bool = True, server_id: int = 1,
                       timestamp: int = 0, created: int = 0) -> Event:
    post = MARIADB_POST_HEADERS if "mariadb" in server_version.lower() else MYSQL_80_POST_HEADERS
    body = struct.pack("<H50sIB", 4, server_version.encode(), created, HEADER_LEN) + post
    body += bytes((CHECKSUM_CRC32 if checksum else CHECKSUM_OFF,))
    fmt = FormatDescription.parse(HEADER.pack(0, EventType.FORMAT_DESCRIPTION, 0, 0, 0, 0) + body + b"\0" * 4)
    return build_event(EventType.FORMAT_DESCRIPTION, body, fmt=fmt, server_id=server_id,
                       timestamp=timestamp, log_pos=4 + HEADER_LEN + len(body) + 4, pos=4)


def query_body(sql: str, db: str = "", *, thread_id: int = 1, compressed: bool = False) -> bytes:
    """A Query body with exec_time 0, error_code 0 and no status variables."""
    raw_db = db.encode("utf-8", "surrogateescape")
    raw_sql = sql.encode("utf-8", "surrogateescape")
    if compressed:
        raw_sql = mariadb_compress(raw_sql)
    return _QUERY_POST.pack(thread_id, 0, len(raw_db), 0, 0) + raw_db + b"\0" + raw_sql


def table_map_body(table_id: int, db: str, table: str, column_types: bytes = b"\x03",
                   metadata: bytes = b"", nullable: bytes | None = None) -> bytes:
    raw_db, raw_tbl = db.encode(), table.encode()
    ncols = len(column_types)
    nulls = nullable if nullable is not None else b"\0" * ((ncols + 7) // 8)
    return (table_id.to_bytes(6, "little") + b"\x01\x00" + bytes((len(raw_db),)) + raw_db + b"\0"
            + bytes((len(raw_tbl),)) + raw_tbl + b"\0" + encode_lenenc(ncols) + column_types
            + encode_lenenc(len(metadata)) + metadata + nulls)


def rows_body(table_id: int, rows_image: bytes, *, ncols: int = 1, flags: int = 0, v2: bool = True,
              update: bool = False) -> bytes:
    """A rows event body: post-header, column bitmap(s), then the row images given as bytes."""
    bitmap = b"\xff" * ((ncols + 7) // 8)
    head = table_id.to_bytes(6, "little") + struct.pack("<H", flags)
    if v2:
        head += struct.pack("<H", 2)  # var_header_len counts itself; no extra info
    return head + encode_lenenc(ncols) + bitmap + (bitmap if update else b"") + rows_image


def xid_body(xid: int) -> bytes:
    return struct.pack("<Q", xid)


def rotate_body(next_name: str, position: int = 4) -> bytes:
    return struct.pack("<Q", position) + next_name.encode("utf-8", "surrogateescape")  # a name os.listdir read


def artificial_rotate(file: str, pos: int, *, fmt: FormatDescription | None, server_id: int) -> Event:
    """The Rotate a dump thread sends whenever it opens a binlog file (MariaDB's
    `fake_rotate_event`, MySQL's `Binlog_sender::fake_rotate_event`): timestamp 0, log_pos 0,
    LOG_EVENT_ARTIFICIAL_F, the position and the file. A replica's IO thread takes its master
    file from it: without one, a file that ended without a Rotate (a crash) leaves the replica in
    the old file, and the first heartbeat naming the new one stops it (error 1623)."""
    return build_event(EventType.ROTATE, rotate_body(file, pos), fmt=fmt, server_id=server_id, timestamp=0,
                       log_pos=0, flags=LOG_EVENT_ARTIFICIAL_F)


def mysql_gtid_body(source: str | None, gno: int, *, last_committed: int = 0, sequence_number: int = 1,
                    transaction_length: int = 0, commit_ts: int = 0, server_version: int = 80036) -> bytes:
    """An 8.0-style GTID (source given) or Anonymous_GTID (source None) body."""
    sid = uuidlib().UUID(source).bytes if source else b"\0" * 16
    body = struct.pack("<B16sq", 1, sid, gno if source else 0)
    body += b"\x02" + struct.pack("<qq", last_committed, sequence_number)
    body += commit_ts.to_bytes(7, "little")
    body += encode_lenenc(transaction_length)
    body += struct.pack("<I", server_version)
    return body


def mariadb_gtid_body(seq: int, domain: int = 0, *, standalone: bool = False) -> bytes:
    flags2 = 0x01 if standalone else 0x04  # FL_STANDALONE, else FL_TRANSACTIONAL
    return struct.pack("<QIB", seq, domain, flags2) + b"\0" * 6


# HEARTBEAT_LOG_EVENT_V2's fields (libbinlogevents codecs/binary, Heartbeat::encode): each is a
# length-encoded type, a length-encoded length, then the value; a type 0 ends the event.
HB_V2_END, HB_V2_FILE, HB_V2_POSITION = 0, 1, 2


def heartbeat_v2(file: str, position: int, *, fmt: FormatDescription | None, server_id: int) -> Event:
    """MySQL 8.0.26+'s heartbeat (type 41), sent to a replica whose dump asked for it
    (USE_HEARTBEAT_EVENT_V2): the file name and a 64-bit position, so a position past 4 GiB,
    which the 32-bit log_pos of a v1 heartbeat cannot hold, reaches the replica whole. The header's
    log_pos holds the position's low 32 bits (a replica reads the body's)."""
    name = file.encode("utf-8")
    value = encode_lenenc(position)
    body = (encode_lenenc(HB_V2_FILE) + encode_lenenc(len(name)) + name
            + encode_lenenc(HB_V2_POSITION) + encode_lenenc(len(value)) + value + encode_lenenc(HB_V2_END))
    return build_event(EventType.HEARTBEAT_V2, body, fmt=fmt, server_id=server_id, timestamp=0,
                       log_pos=position & 0xFFFFFFFF)
