"""Checks shared by the `--source` tests: a raw COM_BINLOG_DUMP_GTID client (a MySQL 8.3+ tagged
set, or an empty one, which python-mysql-replication cannot send) and the one-line refusal of a
--source-pos that is no transaction boundary."""

from __future__ import annotations

import struct
from collections.abc import Callable

import pymysql

from dumpfilter.codec.gtid import MysqlGtidSet
from dumpfilter.master.protocol.commands import BINLOG_DUMP_NON_BLOCK, BINLOG_THROUGH_GTID, COM_BINLOG_DUMP_GTID

HEARTBEATS = (27, 41)  # HEARTBEAT_LOG_EVENT, HEARTBEAT_LOG_EVENT_V2


def dump_by_gtid(port: int, executed: MysqlGtidSet, *, user: str = "tagged-replica", server_id: int = 4243) -> list[bytes]:
    """The events (but heartbeats) a non-blocking COM_BINLOG_DUMP_GTID with `executed` (MySQL's
    binary set encoding, the tagged one when it holds a tag) receives up to the endpoint's EOF; an
    ERR packet raises as pymysql's OperationalError."""
    conn = pymysql.connect(host="127.0.0.1", port=port, user=user, password="x")
    try:
        with conn.cursor() as cur:
            cur.execute("SET @source_binlog_checksum = @@global.binlog_checksum")
        encoded = executed.encode()
        conn._execute_command(COM_BINLOG_DUMP_GTID, struct.pack("<HII", BINLOG_DUMP_NON_BLOCK | BINLOG_THROUGH_GTID,
                                                                server_id, 0) + struct.pack("<QI", 4, len(encoded)) + encoded)
        events = []
        while True:
            data = conn._read_packet().get_all_data()
            if data[:1] == b"\xfe" and len(data) < 9:
                return events
            if data[5] not in HEARTBEATS:
                events.append(data[1:])
    finally:
        conn.close()


def assert_positions_refused(make: Callable[[int, int], object], cases: dict[int, str]) -> None:
    """Each --source-pos in `cases` (position: what the line says) is refused with one line naming
    it; `make(n, pos)` makes the n-th source replicator, on a series of its own."""
    for n, (pos, message) in enumerate(cases.items()):
        replicator = make(n, pos)
        replicator.start()
        try:
            assert not replicator.wait_ready(30)
            error = replicator.last_error or ""
            assert message in error and f"--source-pos {pos}" in error and "\n" not in error, error
        finally:
            replicator.stop()
