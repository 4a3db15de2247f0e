"""A `--source` series that starts inside a primary file (`--source-file F --source-pos P`): the
check that P is a transaction boundary of F, and the head the local file F opens with so that
the primary's events from P sit at the primary's own offsets.

The head is a valid binlog start: the primary's Format_description, the GTID state at P (what the
primary's own head would say had it rotated there), then filler events up to P. The state is, for
MariaDB, a Gtid_list (the last seq_no per domain and server_id); for MySQL, a Previous_gtids
(type 35) with the executed set at P: F's own Previous_gtids and the GTIDs of F's transactions
before P, tagged ones included, in MySQL's binary set encoding (the tagged one when a tag is in
it). A filler is an IGNORABLE_LOG_EVENT (type 28) flagged LOG_EVENT_IGNORABLE_F, as MaxScale's
binlogrouter fills holes: MySQL and MariaDB servers, replicas and mariadb-binlog read an ignorable
event of a type they need not know and skip it (log_event.cc, Ignorable_log_event); a MySQL 8
replica's transaction boundary parser (trx_boundary_parser.cpp) takes any event it does not list
that carries LOG_EVENT_IGNORABLE_F as EVENT_BOUNDARY_TYPE_IGNORE, outside any transaction, and
mysqlbinlog never filters type 28 out. dumpfilter groups it as a control event. Each filler is at most
`FILLER_MAX` bytes (a replica's max_allowed_packet bounds one event), so a large gap takes several."""

from __future__ import annotations

import struct
from typing import Protocol, cast

import pymysql

from dumpfilter.codec import Event, EventType
from dumpfilter.codec.constants import HEADER_LEN, LOG_EVENT_ARTIFICIAL_F, LOG_EVENT_IGNORABLE_F
from dumpfilter.codec.encode import build_event
from dumpfilter.codec.format_description import FormatDescription
from dumpfilter.codec.gtid import MariadbGtidList, MysqlGtidSet
from dumpfilter.errors import BinlogError
from dumpfilter.master.upstream.binlog_mirror import MirrorError
from dumpfilter.master.upstream.series_reads import MariadbState, UnitGtids
from dumpfilter.master.protocol.commands import (
    BINLOG_DUMP_NON_BLOCK,
    BINLOG_SEND_ANNOTATE_ROWS_EVENT,
    COM_BINLOG_DUMP,
)

# One filler's largest size: far below any max_allowed_packet a replica runs with (16 MiB default).
FILLER_MAX = 1 << 20


class _Packet(Protocol):
    def get_all_data(self) -> bytes: ...


class _RawCommands(Protocol):
    """What the binlog protocol asks of pymysql's connection beyond its public API (its stubs
    leave these out): a command sent with its payload as it is, the next packet read whole."""

    def _execute_command(self, command: int, sql: bytes) -> None: ...
    def _read_packet(self) -> _Packet: ...


def send_command(conn: pymysql.connections.Connection, command: int, payload: bytes) -> None:
    """A replication command (COM_REGISTER_SLAVE, COM_BINLOG_DUMP...) on pymysql's connection."""
    cast(_RawCommands, conn)._execute_command(command, payload)


def read_packet(conn: pymysql.connections.Connection) -> bytes:
    """The next packet's payload, whole (an ERR packet is raised as pymysql's MySQLError)."""
    return cast(_RawCommands, conn)._read_packet().get_all_data()


class MidFileError(MirrorError):
    """--source-pos names no transaction boundary of the file (or lies past its end)."""


def read_head(conn: pymysql.connections.Connection, file: str, pos: int, server_id: int, *, mysql: bool = False,
              lacking: MysqlGtidSet | None = None) -> tuple[bytes, MariadbState | MysqlGtidSet, int]:
    """Reads the primary's `file` from its start up to `pos` (a non-blocking dump on `conn`, a
    session with @master_binlog_checksum set) and returns its Format_description as sent, the GTID
    state at `pos` (MariaDB's binlog state, or with `mysql` MySQL's executed set) and `pos`. `pos`
    must end a whole unit (a transaction, a DDL, a control event): otherwise one MidFileError line
    says where the unit around it starts and ends. With `lacking` (a MySQL --source-gtid set) the
    position is found instead: the start of the first transaction whose GTID the set lacks (4 when
    that is the file's first), or the end of the file's last whole unit when it lacks none."""
    where = f"--source-gtid in {file}" if lacking is not None else f"--source-file {file} --source-pos {pos}"
    flags = BINLOG_DUMP_NON_BLOCK if mysql else BINLOG_DUMP_NON_BLOCK | BINLOG_SEND_ANNOTATE_ROWS_EVENT
    send_command(conn, COM_BINLOG_DUMP, struct.pack("<IHI", 4, flags, server_id) + file.encode())
    fde: bytes | None = None
    fmt: FormatDescription | None = None
    gtids = UnitGtids()
    offset = unit_start = 4
    while True:
        data = read_packet(conn)
        raw = data[1:]
        kind, log_pos, flags = (raw[4], *struct.unpack_from("<IH", raw, 13)) if len(raw) >= HEADER_LEN else (0, 0, 0)
        ended = data[:1] == b"\xfe" and len(data) < 9 or (
            kind == EventType.ROTATE and (log_pos == 0 or flags & LOG_EVENT_ARTIFICIAL_F) and offset > 4)
        if ended and lacking is not None and fde is not None:  # the set holds every GTID of the file
            return fde, gtids.mysql, unit_start if gtids.grouper.current is not None else offset
        if ended:  # (an artificial Rotate past the file's start: the dump went on into the next file)
            raise MidFileError(f"{where}: past the end of {file} ({offset} bytes)")
        if len(raw) < HEADER_LEN:
            raise MidFileError(f"{where}: the primary sent an event of {len(raw)} bytes")
        if kind == EventType.ROTATE and (log_pos == 0 or flags & LOG_EVENT_ARTIFICIAL_F):
            continue
        if kind == EventType.ROTATE and lacking is not None and fde is not None:
            return fde, gtids.mysql, offset  # the set lacks nothing in the file: the series starts at its Rotate
        if kind in (EventType.HEARTBEAT, EventType.HEARTBEAT_V2):
            continue
        if kind == EventType.FORMAT_DESCRIPTION and fde is None:
            fde, fmt = raw, FormatDescription.parse(raw)
        end = log_pos or offset + len(raw)
        was_open = gtids.grouper.current is not None
        try:
            gtids.push(Event(raw, offset, fmt))
        except BinlogError as exc:  # (a malformed set or GTID too: the decoders raise it as one)
            raise MidFileError(f"{where}: {file} at {offset}: {exc}") from None
        opened = not was_open and gtids.grouper.current is not None
        if lacking is not None and opened and fde is not None and (
                gtids.mysql_gtid is None or gtids.mysql_gtid not in lacking):
            return fde, gtids.mysql, offset if gtids.joined else 4  # the first transaction the set lacks starts here
        if opened:
            unit_start = offset
        if lacking is None and end > pos:
            raise MidFileError(f"{where}: not a transaction boundary of {file} (inside the event at "
                               f"{offset}..{end})")
        if lacking is None and end == pos:
            if gtids.grouper.current is not None:
                raise MidFileError(f"{where}: not a transaction boundary of {file} (inside the transaction "
                                   f"that starts at {unit_start})")
            if fde is None:
                raise MidFileError(f"{where}: {file} has no Format_description before it")
            return fde, gtids.mysql if mysql else gtids.mariadb, pos
        offset = end


def series_head(fde: bytes, state: MariadbState | MysqlGtidSet, pos: int) -> bytes:
    """The bytes the local file opens with, up to `pos`: MAGIC, the primary's FDE, a Gtid_list
    with `state` (MariaDB) or a Previous_gtids with it (a MysqlGtidSet), fillers. MidFileError
    when `pos` leaves no room for them."""
    fmt = FormatDescription.parse(fde)
    server_id = struct.unpack_from("<I", fde, 5)[0]
    timestamp = struct.unpack_from("<I", fde, 0)[0]
    out = bytearray(b"\xfebin" + fde)
    if isinstance(state, MysqlGtidSet):
        body = state.encode()
        out += build_event(EventType.PREVIOUS_GTIDS, body, fmt=fmt, server_id=server_id, timestamp=timestamp,
                           log_pos=len(out) + HEADER_LEN + len(body) + fmt.checksum_len).raw
    elif "mariadb" in fmt.server_version.lower():
        out += build_event(EventType.MARIADB_GTID_LIST, MariadbGtidList(dict(state)).encode(), fmt=fmt,
                           server_id=server_id, timestamp=timestamp,
                           log_pos=len(out) + HEADER_LEN + 4 + 16 * len(state) + fmt.checksum_len).raw
    smallest = HEADER_LEN + fmt.checksum_len
    gap = pos - len(out)
    if gap != 0 and gap < smallest:
        raise MidFileError(f"--source-pos {pos}: too close to the file's start for the series' own head "
                           f"({len(out)} bytes and fillers of at least {smallest}); start at 4 or at a later "
                           "transaction")
    while gap:
        size = min(gap, FILLER_MAX)
        if 0 < gap - size < smallest:
            size = gap - smallest
        out += build_event(EventType.IGNORABLE, bytes(size - smallest), fmt=fmt, server_id=server_id,
                           timestamp=timestamp, log_pos=len(out) + size, flags=LOG_EVENT_IGNORABLE_F).raw
        gap -= size
    return bytes(out)
