"""python-mysql-replication as a MySQL-flavor GTID client of --mysql-listen (issue #31 item 3): its
auto_position sends COM_BINLOG_DUMP_GTID with a MySQL GTID set, and the endpoint serves a real
MySQL binlog from the first transaction the set lacks. The MySQL 9.6 fixture's Previous_gtids holds
tagged GTIDs (`uuid:mytag:1-2`), which python-mysql-replication 1.0.x cannot write in a set: an
untagged set lacks them, and the endpoint refuses it with 1236 as a MySQL source does."""

from __future__ import annotations

import shutil
import struct

import pymysql
import pytest
from pymysqlreplication import BinLogStreamReader
from pymysqlreplication.event import GtidEvent

from dumpfilter.codec.gtid import MysqlGtidSet
from dumpfilter.codec.reader import read_events
from tests.support.master_command import free_port, serve_master, stop_master
from tests.support.source_checks import dump_by_gtid

pytestmark = pytest.mark.timeout(120)

UUID_57 = "e3e2a4ee-b6dc-11ea-8bcf-0242ac150002"  # the MySQL 5.7 fixture's source: GTIDs 1-3
UUID_96 = "55778904-0299-11f1-b1b8-4ef0c4956feb"  # the MySQL 9.6 fixture's: 1-13 and mytag:1-2 before it
TAGGED = "blackbeam-rust_mysql_common/binlog_transaction_with_GTID_TAG.000001"
GTID_TAGGED_LOG_EVENT = 42


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
    proc, port = _served(shared_fixtures, tmp_path, TAGGED, "binlog.000004")
    try:
        with pytest.raises(pymysql.err.OperationalError) as refused:
            _gtids(port, f"{UUID_96}:1-13")
        assert refused.value.args[0] == 1236 and "binlog.000004" in refused.value.args[1], refused.value.args
    finally:
        stderr = stop_master(proc)
    assert "Traceback" not in stderr, stderr


def _dump_tagged(port: int, executed: str) -> list[bytes]:
    """The events a COM_BINLOG_DUMP_GTID with `executed` in MySQL 8.3+'s tagged encoding receives."""
    encoded = MysqlGtidSet.parse(executed)
    assert encoded.encode()[7] == 1  # the tagged format byte
    return dump_by_gtid(port, encoded)


@pytest.mark.parametrize("mytag", ["1-2", "1-3"])
def test_a_tagged_set_starts_after_the_tagged_gtids_it_holds(shared_fixtures, tmp_path, mytag):
    fixture = (shared_fixtures / TAGGED).read_bytes()
    tagged = [e.raw for e in read_events(fixture, TAGGED, verify_checksums=False)
              if e.type_code == GTID_TAGGED_LOG_EVENT]
    assert len(tagged) == 1  # mytag:3
    proc, port = _served(shared_fixtures, tmp_path, TAGGED, "binlog.000004")
    try:
        events = _dump_tagged(port, f"{UUID_96}:1-13,{UUID_96}:mytag:{mytag}")
    finally:
        stderr = stop_master(proc)
    assert "Traceback" not in stderr, stderr
    received = [e for e in events if e[4] == GTID_TAGGED_LOG_EVENT]
    assert received == (tagged if mytag == "1-2" else []), [e[4] for e in events]


def test_tagged_sets_decode_and_a_foreign_format_is_one_protocol_error():
    from dumpfilter.master.endpoint.dump import decode_gtid_set
    from dumpfilter.master.protocol.packets import ProtocolError

    text = f"{UUID_96}:1-13,{UUID_96}:mytag:1-2:5"
    assert decode_gtid_set(MysqlGtidSet.parse(text).encode()) == text
    encoded = bytearray(MysqlGtidSet.parse(text).encode())
    encoded[7] = 2  # a format byte MySQL does not write
    with pytest.raises(ProtocolError, match="unknown format 2"):
        decode_gtid_set(bytes(encoded))
    with pytest.raises(ProtocolError, match="GTID set"):
        decode_gtid_set(bytes(encoded[:7]) + b"\x01" + bytes(encoded[8:30]))  # cut inside the intervals
    empty = MysqlGtidSet.parse(f"{UUID_96}:5").encode()[:-16] + struct.pack("<qq", 5, 5)
    with pytest.raises(ProtocolError, match="interval 5-5 .* is empty"):  # MySQL: malformed GTID_set encoding
        decode_gtid_set(empty)
