"""python-mysql-replication as a MySQL-flavor GTID client of --mysql-listen (issue #31 item 3): its
auto_position sends COM_BINLOG_DUMP_GTID with a MySQL GTID set, and the endpoint serves a real
MySQL binlog from the first transaction the set lacks. The MySQL 9.6 fixture's Previous_gtids holds
tagged GTIDs (`uuid:mytag:1-2`), which python-mysql-replication 1.0.x cannot write in a set: an
untagged set lacks them, and the endpoint refuses it with 1236 as a MySQL source does."""

from __future__ import annotations

import shutil

import pymysql
import pytest
from pymysqlreplication import BinLogStreamReader
from pymysqlreplication.event import GtidEvent

from tests.support.master_command import free_port, serve_master, stop_master

pytestmark = pytest.mark.timeout(120)

UUID_57 = "e3e2a4ee-b6dc-11ea-8bcf-0242ac150002"  # the MySQL 5.7 fixture's source: GTIDs 1-3
UUID_96 = "55778904-0299-11f1-b1b8-4ef0c4956feb"  # the MySQL 9.6 fixture's: 1-13 and mytag:1-2 before it


def _served(shared_fixtures, tmp_path, source: str, name: str):
    """The fixture under the name its own Rotate implies, served with --mysql-listen."""
    directory = tmp_path / "binlogs"
    directory.mkdir()
    shutil.copyfile(shared_fixtures / source, directory / name)
    (directory / f"{name.rsplit('.', 1)[0]}.index").write_text(f"./{name}\n")
    port = free_port()
    proc, _address = serve_master(directory, "--mysql-listen", f"127.0.0.1:{port}")
    return proc, port


def _gtids(port: int, auto_position: str) -> list[str]:
    stream = BinLogStreamReader(connection_settings={"host": "127.0.0.1", "port": port, "user": "gtid-client",
                                                     "password": "x"},
                                server_id=4242, auto_position=auto_position, blocking=False,
                                only_events=[GtidEvent])
    try:
        return [event.gtid for event in stream]
    finally:
        stream.close()


@pytest.mark.parametrize("executed, expected", [(f"{UUID_57}:1", [2, 3]), (f"{UUID_57}:1-2", [3]),
                                                (f"{UUID_57}:1-3", [])])
def test_auto_position_starts_after_the_executed_set(shared_fixtures, tmp_path, executed, expected):
    proc, port = _served(shared_fixtures, tmp_path, "rust-us-mysql-cdc-rs/5.7_14_user_var/log.bin",
                         "mysql_bin.000001")
    try:
        assert _gtids(port, executed) == [f"{UUID_57}:{n}" for n in expected]
    finally:
        stderr = stop_master(proc)
    assert "Traceback" not in stderr, stderr


def test_an_untagged_set_lacking_the_tagged_gtids_before_the_file_is_refused(shared_fixtures, tmp_path):
    proc, port = _served(shared_fixtures, tmp_path, "blackbeam-rust_mysql_common/binlog_transaction_with_GTID_TAG.000001",
                         "binlog.000004")
    try:
        with pytest.raises(pymysql.err.OperationalError) as refused:
            _gtids(port, f"{UUID_96}:1-13")
        assert refused.value.args[0] == 1236 and "binlog.000004" in refused.value.args[1], refused.value.args
    finally:
        stderr = stop_master(proc)
    assert "Traceback" not in stderr, stderr
