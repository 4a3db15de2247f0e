"""The MySQL endpoint's ERR packets carry the SQLSTATE that goes with their error code, as a
server's do (MySQL's error list pairs each code with one): a dump ended by the master's shutdown is
ER_SERVER_SHUTDOWN (1053) with 08S01, not HY000; a result over max_allowed_packet 1153 with 08S01;
a statement the endpoint does not serve 1235 with 42000. No MySQL server is needed: pymysql is the
dump's client, its packet read as it came (pymysql drops the SQLSTATE), and mysql-connector-python
the queries' (its errors carry it)."""

from __future__ import annotations

import struct

import mysql.connector
import pymysql
import pytest

from dumpfilter.master.endpoint import MysqlEndpoint
from dumpfilter.master.serve.grpc_server import create_server
from dumpfilter.workload.generator import WorkloadSpec, generate

pytestmark = [pytest.mark.timeout(120)]
COM_BINLOG_DUMP = 0x12


def _packet(conn: pymysql.connections.Connection) -> bytes:
    """The next packet's payload, an ERR packet too (pymysql's own read raises on one)."""
    header = conn._read_bytes(4)
    return conn._read_bytes(int.from_bytes(header[:3], "little"))


def test_a_dump_ended_by_shutdown_is_1053_with_sqlstate_08s01(tmp_path):
    generate(WorkloadSpec(seed=3, transactions=20, max_binlog_size=60_000), tmp_path)
    first = sorted(p.name for p in tmp_path.glob("*.0*"))[0]
    master, _port = create_server(tmp_path, "127.0.0.1:0")
    endpoint = MysqlEndpoint(master.service, "127.0.0.1:0")
    conn = pymysql.connect(host="127.0.0.1", port=endpoint.port, user="repl", password="x", read_timeout=30)
    try:
        conn.query("SET @master_binlog_checksum = @@global.binlog_checksum")
        conn._execute_command(COM_BINLOG_DUMP, struct.pack("<IHI", 4, 0, 905) + first.encode())
        assert _packet(conn)[:1] == b"\x00"  # the dump began: its first event came
        master.stop(grace=1.0)
        packet = _packet(conn)
        while packet[:1] == b"\x00":  # the events sent before the shutdown
            packet = _packet(conn)
        assert packet[:1] == b"\xff", packet[:40]
        assert struct.unpack("<H", packet[1:3])[0] == 1053
        assert packet[3:9] == b"#08S01", packet[:40]
    finally:
        conn.close()
        endpoint.stop()
        master.stop(grace=1.0)


@pytest.mark.parametrize(("statement", "errno", "sqlstate"), [
    ("SELECT @big, @big, @big, @big, @big", 1153, "08S01"),  # 5 x 250 KB: over the 1 MiB max_allowed_packet
    ("CREATE TABLE t (a INT)", 1235, "42000"),
    ("SELECT 1 +", 1235, "42000"),
])
def test_a_query_error_carries_its_codes_sqlstate(tmp_path, statement, errno, sqlstate):
    generate(WorkloadSpec(seed=3, transactions=5, max_binlog_size=60_000), tmp_path)
    master, _port = create_server(tmp_path, "127.0.0.1:0")
    endpoint = MysqlEndpoint(master.service, "127.0.0.1:0")
    conn = mysql.connector.connect(host="127.0.0.1", port=endpoint.port, user="repl", password="x",
                                   ssl_disabled=True, connection_timeout=30)
    try:
        cursor = conn.cursor()
        cursor.execute("SET @big = '" + "x" * 250_000 + "'")
        with pytest.raises(mysql.connector.Error) as raised:
            cursor.execute(statement)
            cursor.fetchall()
        assert (raised.value.errno, raised.value.sqlstate) == (errno, sqlstate)
    finally:
        conn.close()
        endpoint.stop()
        master.stop(grace=1.0)
