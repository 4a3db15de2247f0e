"""SHOW MASTER STATUS / SHOW BINARY LOG STATUS / SHOW BINLOG STATUS on --mysql-listen: the newest
file and the end of its last whole transaction, and for a MySQL file the executed GTID set, as a
server answers; python-mysql-replication asks it when given no start, then reads from there."""

from __future__ import annotations


import pymysql
import pytest
from pymysqlreplication import BinLogStreamReader
from pymysqlreplication.event import GtidEvent

from dumpfilter.codec.reader import read_events
from tests.support.master_command import free_port, serve_master, stop_master

pytestmark = pytest.mark.timeout(120)

MYSQL_57 = "rust-us-mysql-cdc-rs/5.7_14_user_var/log.bin"
MARIADB = "mariadb-operator-mariadb-poc/domain_id_0/mariadb-repl-bin.000005"


def _serve(shared_fixtures, tmp_path, source: str, name: str, tail: bytes = b""):
    directory = tmp_path / "binlogs"
    directory.mkdir()
    (directory / name).write_bytes((shared_fixtures / source).read_bytes() + tail)
    (directory / f"{name.rsplit('.', 1)[0]}.index").write_text(f"./{name}\n")
    port = free_port()
    proc, _address = serve_master(directory, "--mysql-listen", f"127.0.0.1:{port}")
    return proc, port


def _status(port: int, statement: str):
    conn = pymysql.connect(host="127.0.0.1", port=port, user="monitor", password="x")
    try:
        with conn.cursor() as cur:
            cur.execute(statement)
            return [d[0] for d in cur.description], cur.fetchall()
    finally:
        conn.close()


@pytest.mark.parametrize("tail", [b"", b"\x00" * 11], ids=["whole", "partial-tail"])
def test_a_mysql_file_shows_its_end_and_executed_set(shared_fixtures, tmp_path, tail):
    data = (shared_fixtures / MYSQL_57).read_bytes()
    events = list(read_events(data, MYSQL_57, verify_checksums=False))
    gtids = [e.gtid_info for e in events if e.type_code == 33]
    expected = f"{gtids[0].source}:1-{max(g.gno for g in gtids)}"
    proc, port = _serve(shared_fixtures, tmp_path, MYSQL_57, "mysql_bin.000001", tail)
    try:
        for statement in ("SHOW MASTER STATUS", "SHOW BINARY LOG STATUS"):
            columns, rows = _status(port, statement)
            assert columns == ["File", "Position", "Binlog_Do_DB", "Binlog_Ignore_DB", "Executed_Gtid_Set"]
            assert rows == (("mysql_bin.000001", len(data), "", "", expected),), rows  # never the partial tail
        # python-mysql-replication with no start: it asks the status, then dumps that file from 4
        stream = BinLogStreamReader(connection_settings={"host": "127.0.0.1", "port": port, "user": "reader",
                                                         "password": "x"}, server_id=4301, blocking=False,
                                    only_events=[GtidEvent])
        try:
            assert [event.gtid for event in stream] == [f"{g.source}:{g.gno}" for g in gtids]
        finally:
            stream.close()
    finally:
        stderr = stop_master(proc)
    assert "Traceback" not in stderr and "internal error" not in stderr, stderr


@pytest.mark.parametrize("tail", [b"", b"\x00" * 11], ids=["whole", "partial-tail"])
def test_a_mariadb_file_shows_four_columns(shared_fixtures, tmp_path, tail):
    size = (shared_fixtures / MARIADB).stat().st_size
    proc, port = _serve(shared_fixtures, tmp_path, MARIADB, "mariadb-repl-bin.000005", tail)
    try:
        for statement in ("SHOW MASTER STATUS", "SHOW BINLOG STATUS"):
            assert _status(port, statement) == (["File", "Position", "Binlog_Do_DB", "Binlog_Ignore_DB"],
                                                (("mariadb-repl-bin.000005", size, "", ""),))
    finally:
        stderr = stop_master(proc)
    assert "Traceback" not in stderr, stderr
