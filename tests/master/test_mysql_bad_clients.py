"""Hostile and broken clients of the MySQL endpoint: a wrong password, an unknown command, an
unsupported statement, a dump from an unknown or purged position, garbage instead of a handshake
or a command. Each gets one clear ERR packet; a real replica streaming beside them goes on; no
traceback is logged."""

from __future__ import annotations

import logging
import socket
import struct

import pymysql
import pytest

from dumpfilter.master.serve.grpc_server import create_server
from dumpfilter.master.endpoint import MysqlEndpoint
from dumpfilter.master.protocol.packets import PacketStream

from tests.support.mysql_replicas import point_at, wait_applied, wait_io_error
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.mariadb, pytest.mark.timeout(240)]

POLICY = """
[slave.repl]
password = "s3cret"
allow = ["%.%"]

[slave.nopass]
allow = ["s1.%"]
"""


def _error(call) -> tuple[int, str]:
    with pytest.raises(pymysql.err.MySQLError) as info:
        call()
    return info.value.args[0], info.value.args[1]


def _command(conn, command: int, body: bytes) -> tuple[int, str]:
    conn._execute_command(command, body)
    return _error(conn._read_packet)


def _raw_error(port: int, after_handshake: bytes) -> tuple[int, str]:
    """Read the server's handshake, send `after_handshake` as is, return the ERR packet."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        stream = PacketStream(sock)
        assert stream.read()[0] == 0x0A  # protocol v10
        sock.sendall(after_handshake)
        reply = stream.read()
    assert reply[0] == 0xFF, reply[:40]
    return struct.unpack("<H", reply[1:3])[0], reply[9:].decode()


def test_bad_clients_get_error_packets_and_the_replica_streams_on(mariadb_factory, tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="dumpfilter")
    primary = mariadb_factory("primary-bad")
    replica = mariadb_factory("real-bad", server_id=51, log_bin=False)
    primary.execute(["CREATE DATABASE s1"])
    primary.execute(["CREATE TABLE t (id INT PRIMARY KEY)", "INSERT INTO t VALUES (1)"], db="s1")
    policy = tmp_path / "policy.toml"
    policy.write_text(POLICY)
    master, _port = create_server(primary.binlog_dir, "127.0.0.1:0", policy=str(policy))
    endpoint = MysqlEndpoint(master.service, "127.0.0.1:0")
    port = endpoint.port
    try:
        point_at(replica, port, gtid=True, password="s3cret")
        wait_applied(replica, service=master.service, server_id=51)

        # credentials
        code, message = _error(lambda: pymysql.connect(host="127.0.0.1", port=port, user="repl", password="wrong"))
        assert code == 1045 and "Access denied for user 'repl'" in message
        code, _ = _error(lambda: pymysql.connect(host="127.0.0.1", port=port, user="nobody", password="x"))
        assert code == 1045  # not in the policy and no [default]

        conn = pymysql.connect(host="127.0.0.1", port=port, user="repl", password="s3cret")
        try:
            # what a replica asks is answered; anything else is refused, and the session goes on
            with conn.cursor() as cur:
                cur.execute("SELECT UNIX_TIMESTAMP(), @@GLOBAL.SERVER_ID, @@global.binlog_checksum")
                _ts, server_id, checksum = cur.fetchone()
                assert int(server_id) == primary.server_id and checksum == "CRC32"
                code, message = _error(lambda: cur.execute("SELECT * FROM s1.t"))
                assert code == 1235 and "replica" in message
                code, message = _error(lambda: cur.execute("SELECT @@no_such_variable"))
                assert code == 1193
                cur.execute("SHOW VARIABLES LIKE 'server\\_id'")
                assert cur.fetchall() == (("server_id", str(primary.server_id)),)
            # unknown commands: COM_STATISTICS, COM_PROCESS_KILL, a command byte nobody uses
            for command in (0x09, 0x0C, 0xEE):
                code, message = _command(conn, command, b"")
                assert code == 1047 and "Unknown command" in message
            # a truncated COM_BINLOG_DUMP
            code, message = _command(conn, 0x12, b"\x04\x00")
            assert code == 1835 and "COM_BINLOG_DUMP" in message
            conn.ping(reconnect=False)  # still alive after all of that
        finally:
            conn.close()

        # a dump without announcing checksums, then from a file the index never had
        conn = pymysql.connect(host="127.0.0.1", port=port, user="repl", password="s3cret")
        code, message = _command(conn, 0x12, struct.pack("<IHI", 4, 0, 901) + b"mariadb-bin.000001")
        assert code == 1236 and "checksum" in message
        conn = pymysql.connect(host="127.0.0.1", port=port, user="repl", password="s3cret")
        conn.query("SET @master_binlog_checksum = @@global.binlog_checksum")
        code, message = _command(conn, 0x12, struct.pack("<IHI", 4, 0, 902) + b"mariadb-bin.000999")
        assert code == 1236 and "mariadb-bin.000999" in message
        conn = pymysql.connect(host="127.0.0.1", port=port, user="repl", password="s3cret")
        conn.query("SET @master_binlog_checksum = @@global.binlog_checksum")
        code, message = _command(conn, 0x12, struct.pack("<IHI", 4, 0, 903) + b"../../etc/passwd")
        assert code == 1236
        # the policy: identity `nopass` may not take a server_id that `repl` registered
        conn = pymysql.connect(host="127.0.0.1", port=port, user="nopass", password="")
        code, message = _command(conn, 0x15, struct.pack("<I", 51) + b"\0\0\0" + struct.pack("<HII", 0, 0, 0))
        assert code == 1045 and "server_id 51" in message

        # garbage: instead of a handshake response, and a packet announcing 16 MB of nothing
        code, message = _raw_error(port, b"\x05\x00\x00\x01hello")
        assert code == 1043 and "Bad handshake" in message
        code, message = _raw_error(port, b"\xff\xff\xff\x01" + b"x" * 100)
        assert code in (1043, 1835)

        # the replica kept streaming through all of it
        primary.execute(["INSERT INTO t VALUES (2)"], db="s1")
        wait_applied(replica, service=master.service, server_id=51)
        assert replica.query("SELECT id FROM s1.t ORDER BY id") == [{"id": 1}, {"id": 2}]
        assert endpoint.errors_sent >= 12
    finally:
        endpoint.stop()
        master.stop(grace=1.0)
    assert not [r for r in caplog.records if r.exc_info], "a traceback was logged"
    assert "Traceback" not in caplog.text


def test_purged_position_stops_the_real_replica_with_1236(mariadb_factory):
    primary = mariadb_factory("primary-purged")
    replica = mariadb_factory("real-purged", server_id=52, log_bin=False)
    primary.execute(["CREATE DATABASE s1"])
    first = primary.binlog_files()[0].name
    primary.flush_logs()
    last = primary.binlog_files()[-1].name

    def purged() -> bool:
        # MariaDB keeps a file its binlog checkpoint still needs (written a moment after the
        # FLUSH): the PURGE only warns then, and the file stays. Purge until it is gone.
        primary.execute([f"PURGE BINARY LOGS TO '{last}'"])
        return first not in [p.name for p in primary.binlog_files()]

    assert wait_for(purged, every=0.2), f"MariaDB kept {first}"
    master, _port = create_server(primary.binlog_dir, "127.0.0.1:0")
    endpoint = MysqlEndpoint(master.service, "127.0.0.1:0")
    try:
        point_at(replica, endpoint.port, gtid=False, log_file=first)
        # The refusal, not an idle replica: the IO thread looks idle from the moment it sent its
        # dump request until the ERR arrives (the old wait returned there, with Last_IO_Errno 0).
        status = wait_io_error(replica)
        assert status["Last_IO_Errno"] == 1236, status
        assert status["Read_Master_Log_Pos"] == 4 and endpoint.errors_sent == 1, status  # nothing was served
        assert first in status["Last_IO_Error"] and "from master when reading data from binary log" in \
            status["Last_IO_Error"]
    finally:
        endpoint.stop()
        master.stop(grace=1.0)
