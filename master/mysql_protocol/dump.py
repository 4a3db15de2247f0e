"""The replication commands of the protocol: COM_REGISTER_SLAVE, COM_BINLOG_DUMP (file and
position; MariaDB's GTID start arrives beforehand in @slave_connect_state) and MySQL's
COM_BINLOG_DUMP_GTID, parsed; and the event stream a replica's IO thread reads: the artificial
Rotate naming the start file, then the dump service's batches (its FDE, kept events and skip
policy events, heartbeats), one event per packet behind a 0x00 byte, as a server's dump thread
sends them (sql_repl.cc / rpl_binlog_sender.cc)."""

from __future__ import annotations

import struct
import uuid
import zlib
from collections.abc import Iterable
from dataclasses import dataclass

from dumpfilter.codec import EventType
from dumpfilter.codec.constants import LOG_EVENT_ARTIFICIAL_F, LOG_EVENT_SKIP_REPLICATION_F
from dumpfilter.codec.encode import build_event
from dumpfilter.master.mysql_protocol.packets import ProtocolError, Reader
from dumpfilter.master.mysql_protocol.positions import replica_placeholder

COM_BINLOG_DUMP = 0x12
COM_REGISTER_SLAVE = 0x15
COM_BINLOG_DUMP_GTID = 0x1E
BINLOG_DUMP_NON_BLOCK = 0x01            # send EOF when caught up instead of waiting (mysqlbinlog)
BINLOG_SEND_ANNOTATE_ROWS_EVENT = 0x02  # MariaDB: the replica wants Annotate_rows events
BINLOG_THROUGH_GTID = 0x04              # MySQL COM_BINLOG_DUMP_GTID: a GTID set follows


@dataclass(frozen=True)
class SlaveRegistration:
    server_id: int
    host: str
    user: str
    password: str
    port: int


@dataclass(frozen=True)
class DumpRequest:
    server_id: int
    file: str
    pos: int
    flags: int
    gtid_set: str | None = None  # MySQL COM_BINLOG_DUMP_GTID: the replica's gtid_executed, as text


def parse_register_slave(payload: bytes) -> SlaveRegistration:
    r = Reader(payload)
    server_id = r.u32("COM_REGISTER_SLAVE server_id")
    host = r.take(r.u8("report_host length"), "report_host").decode("utf-8", "replace")
    user = r.take(r.u8("report_user length"), "report_user").decode("utf-8", "replace")
    password = r.take(r.u8("report_password length"), "report_password").decode("utf-8", "replace")
    port = r.u16("report_port")
    return SlaveRegistration(server_id, host, user, password, port)  # rank and master_id follow, unused


def parse_binlog_dump(payload: bytes) -> DumpRequest:
    r = Reader(payload)
    pos = r.u32("COM_BINLOG_DUMP position")
    flags = r.u16("COM_BINLOG_DUMP flags")
    server_id = r.u32("COM_BINLOG_DUMP server_id")
    name = r.rest().rstrip(b"\0")
    return DumpRequest(server_id, _file_name(name), pos, flags)


def parse_binlog_dump_gtid(payload: bytes) -> DumpRequest:
    r = Reader(payload)
    flags = r.u16("COM_BINLOG_DUMP_GTID flags")
    server_id = r.u32("COM_BINLOG_DUMP_GTID server_id")
    name = r.take(r.u32("binlog name length"), "binlog name")
    pos = r.u64("COM_BINLOG_DUMP_GTID position")
    gtid_set = None
    if flags & BINLOG_THROUGH_GTID:
        gtid_set = decode_gtid_set(r.take(r.u32("GTID set length"), "GTID set"))
    return DumpRequest(server_id, _file_name(name), pos, flags, gtid_set)


def _file_name(raw: bytes) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ProtocolError("the binlog file name is not UTF-8") from None


def decode_gtid_set(data: bytes) -> str:
    """MySQL's binary Gtid_set (n_sids, then per sid its uuid and [start, end) intervals) as the
    text `uuid:1-5:7,uuid:...` that GtidState parses."""
    r = Reader(data)
    n_sids = r.u64("GTID set sid count")
    if n_sids >> 56:
        raise ProtocolError("tagged GTID sets (MySQL 8.3+) are not supported by this endpoint")
    parts = []
    for _ in range(n_sids):
        sid = str(uuid.UUID(bytes=r.take(16, "GTID set uuid")))
        n = r.u64("GTID set interval count")
        if n > r.remaining() // 16:
            raise ProtocolError("GTID set: more intervals than bytes")
        ranges = []
        for _ in range(n):
            start, end = r.u64("interval start"), r.u64("interval end")
            if end <= start:
                raise ProtocolError(f"GTID set: interval {start}-{end} is empty")
            ranges.append(str(start) if end == start + 1 else f"{start}-{end - 1}")
        if ranges:
            parts.append(":".join([sid, *ranges]))
    return ",".join(parts)


def encode_gtid_set(text: str) -> bytes:
    """The inverse of decode_gtid_set, for tests and MySQL-style clients."""
    sids = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        sid, *ranges = part.split(":")
        intervals = []
        for r in ranges:
            start, _, end = r.partition("-")
            intervals.append((int(start), int(end or start) + 1))
        sids.append(uuid.UUID(sid).bytes + struct.pack("<Q", len(intervals))
                    + b"".join(struct.pack("<QQ", a, b) for a, b in intervals))
    return struct.pack("<Q", len(sids)) + b"".join(sids)


def fake_rotate(file: str, pos: int, *, fmt, server_id: int) -> bytes:
    """The artificial Rotate a dump thread sends first: timestamp 0, log_pos 0, LOG_EVENT_ARTIFICIAL_F,
    the start position and file; a CRC when the binlog carries them (the replica announced it
    handles them, else the dump was refused)."""
    body = struct.pack("<Q", pos) + file.encode("utf-8")
    return build_event(EventType.ROTATE, body, fmt=fmt, server_id=server_id, timestamp=0, log_pos=0,
                       flags=LOG_EVENT_ARTIFICIAL_F).raw


def event_payloads(events: bytes, *, annotate: bool, fmt=None, server_id: int = 0,
                   end: int | None = None) -> Iterable[bytes]:
    """Each event of a batch as a packet payload: a 0x00 byte, then the event, in the form a real
    replica can take:
    - Annotate_rows only to replicas that asked for them (MariaDB's dump thread drops them
      otherwise; a replica that understands GTIDs tolerates the hole);
    - a placeholder is never larger than the event it stands for (replica_placeholder);
    - the COMMIT the empty-transaction policy makes for a skipped transaction carries the end of
      that transaction (dated_commit). `end` is the batch's end offset, for a COMMIT that ends it."""
    spans = list(_spans(events))
    gtid_pos = None
    for i, (at, size) in enumerate(spans):
        kind = events[at + 4]
        log_pos = int.from_bytes(events[at + 13:at + 17], "little")
        if kind in (EventType.MARIADB_GTID, EventType.GTID, EventType.ANONYMOUS_GTID):
            gtid_pos = log_pos
        elif kind == EventType.RAND and events[at + 5:at + 9] == b"\0\0\0\0" \
                and events[at + 18] & (LOG_EVENT_SKIP_REPLICATION_F >> 8):
            dummy = replica_placeholder(events[at:at + size], fmt=fmt, server_id=server_id)
            if dummy is not None:
                yield b"\x00" + dummy
            continue
        elif kind == EventType.QUERY and log_pos and log_pos == gtid_pos \
                and _query_text(events[at:at + size], fmt) == b"COMMIT":
            following = _start_of(events, spans[i + 1]) if i + 1 < len(spans) else end
            yield b"\x00" + dated_commit(events[at:at + size], following, fmt)
            continue
        if annotate or kind != EventType.ANNOTATE_ROWS:
            yield b"\x00" + events[at:at + size]


def _spans(events: bytes) -> Iterable[tuple[int, int]]:
    at, n = 0, len(events)
    while at < n:
        size = int.from_bytes(events[at + 9:at + 13], "little")
        if size < 19 or at + size > n:
            raise ProtocolError(f"a batch event at byte {at} has size {size}")  # a service bug, never the client's
        yield at, size
        at += size


def _start_of(events: bytes, span: tuple[int, int]) -> int | None:
    """Where the event at `span` starts in the master's binlog (a heartbeat: the position it names)."""
    at, size = span
    log_pos = int.from_bytes(events[at + 13:at + 17], "little")
    if events[at + 4] == EventType.HEARTBEAT:
        return log_pos
    return log_pos - size if log_pos > size else None


def _query_text(raw: bytes, fmt) -> bytes:
    crc = 4 if fmt is not None and fmt.checksum_len else 0
    if len(raw) < 19 + 13 + crc:
        return b""
    db_len, status_len = raw[19 + 8], int.from_bytes(raw[19 + 11:19 + 13], "little")
    return raw[19 + 13 + status_len + db_len + 1:len(raw) - crc]


def dated_commit(raw: bytes, end: int | None, fmt) -> bytes:
    """The empty-transaction policy closes a skipped transaction with a COMMIT that carries its
    GTID's log_pos (the filter has no position for a statement it made up). A real replica
    counting positions (MariaDB's IO thread adds each event's size unless log_pos jumps ahead)
    would record a position inside the body it never received and, after a reconnect, ask for it
    (1236: not at an event boundary). Dated at the transaction's end (where the next event starts),
    the replica records the end, as after the original COMMIT."""
    log_pos = int.from_bytes(raw[13:17], "little")
    if end is None or end <= log_pos:
        return raw
    crc = 4 if fmt is not None and fmt.checksum_len else 0
    body = raw[:13] + struct.pack("<I", end) + raw[17:len(raw) - crc]
    return body + struct.pack("<I", zlib.crc32(body)) if crc else body
