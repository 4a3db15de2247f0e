"""HEARTBEAT_LOG_EVENT_V2 (issue #31 item 3): a MySQL 8.0.26+ replica asks for it with the dump
flag USE_HEARTBEAT_EVENT_V2 and MySQL's dump thread then sends every heartbeat as type 41, whose
body carries the file name and a 64-bit position as length-encoded fields (libbinlogevents'
codecs/binary Heartbeat), so positions past 4 GiB reach the replica whole. No library here parses
type 41 (python-mysql-replication 1.0.17 knows only type 27), so the events are read by a decoder
written in this file from MySQL's codec, on pymysql's own length-encoded integer reader. Positions
past 4 GiB are synthetic: no binlog of that size is written."""

from __future__ import annotations

import shutil
import struct
import zlib

import pymysql
import pytest
from hypothesis import given, settings, strategies as st
from pymysql.protocol import MysqlPacket

from dumpfilter.codec.encode import format_description, heartbeat_v2
from dumpfilter.codec.event import Event
from dumpfilter.codec.gtid import MysqlGtidSet
from dumpfilter.codec.reader import read_events
from dumpfilter.master.upstream.binlog_mirror import BinlogMirror, MirrorError
from dumpfilter.master.endpoint.dump import widened
from dumpfilter.master.protocol.commands import BINLOG_THROUGH_GTID, COM_BINLOG_DUMP_GTID, USE_HEARTBEAT_EVENT_V2
from tests.support.master_command import free_port, serve_master, stop_master

pytestmark = pytest.mark.timeout(120)
TAGGED = "blackbeam-rust_mysql_common/binlog_transaction_with_GTID_TAG.000001"
FMT = format_description().fmt  # CRC32


def mysql_decode(event: bytes) -> tuple[str, int]:
    """(file, position) of a type-41 event, as MySQL's Heartbeat::decode reads it: the CRC is
    checked, then (type, length, value) fields until type 0; unknown types are passed over."""
    assert event[4] == 41 and struct.unpack_from("<I", event, 9)[0] == len(event)
    assert zlib.crc32(event[:-4]) == struct.unpack_from("<I", event, len(event) - 4)[0]
    body = MysqlPacket(event[19:-4], "utf8")
    file = position = None
    while True:
        kind = body.read_length_encoded_integer()
        if kind == 0:
            break
        length = body.read_length_encoded_integer()
        if kind == 1:
            file = body.read(length).decode()
        elif kind == 2:
            position = MysqlPacket(body.read(length), "utf8").read_length_encoded_integer()
        else:
            body.read(length)
    return file, position


@settings(max_examples=300)
@given(name=st.text(st.characters(min_codepoint=33, max_codepoint=0x2FFF), min_size=1, max_size=80),
       position=st.integers(0, (1 << 64) - 1))
def test_heartbeat_v2_round_trips_through_mysqls_decoding(name, position):
    raw = heartbeat_v2(name, position, fmt=FMT, server_id=9).raw
    assert mysql_decode(raw) == (name, position)
    assert Event(raw, 0, FMT).heartbeat == (name, position)
    assert struct.unpack_from("<I", raw, 13)[0] == position & 0xFFFFFFFF


def test_a_position_past_4_gib_is_whole_in_v2_and_cut_in_v1():
    """A v1 heartbeat's log_pos is 32 bits: the dump service's heartbeat for 5 GiB + 123 holds 123
    there. The endpoint widens it with the batch's end (the greatest position at or below it with
    those low bits) before building the v2 event."""
    position = (5 << 30) + 123
    low = position & 0xFFFFFFFF
    assert low == (1 << 30) + 123
    for batch_end in (position, position + 4096, position + (1 << 31)):
        assert widened(low, batch_end) == position
    assert widened(low, None) == low and widened(500, 4 << 20) == 500
    assert mysql_decode(heartbeat_v2("binlog.000123", widened(low, position + 10), fmt=FMT, server_id=1).raw) == \
        ("binlog.000123", position)


def test_malformed_v2_heartbeats_are_one_line_for_the_source(tmp_path):
    """--source reads the primary's heartbeats (both versions): a torn one stops the stream with a
    message, never a traceback; a well-formed one changes nothing in the series."""
    good = heartbeat_v2("binlog.000001", 1 << 33, fmt=FMT, server_id=1).raw
    mirror = BinlogMirror(tmp_path / "series")
    mirror.event(good)
    assert mirror.files() == [] and mirror.safe is None
    for torn in (b"\x01\x40abc", b"\x02\x09", b"\x00", b"\x01\x03abc\x00"):
        raw = good[:9] + struct.pack("<I", 19 + len(torn) + 4) + good[13:19] + torn
        with pytest.raises(MirrorError, match="malformed heartbeat"):
            mirror.event(raw + struct.pack("<I", zlib.crc32(raw)))


def _heartbeats(port: int, *, flags: int, mariadb: bool, count: int = 2) -> list[bytes]:
    """The first `count` heartbeats of a blocking COM_BINLOG_DUMP_GTID (the fixture's whole set
    executed, so the stream is idle at once), with a 50 ms heartbeat period."""
    conn = pymysql.connect(host="127.0.0.1", port=port, user="hb", password="x")
    try:
        with conn.cursor() as cur:
            cur.execute("SET @source_binlog_checksum = @@global.binlog_checksum")
            cur.execute("SET @source_heartbeat_period = 50000000")
            if mariadb:
                cur.execute("SET @mariadb_slave_capability = 4")
        encoded = MysqlGtidSet.parse("55778904-0299-11f1-b1b8-4ef0c4956feb:1-13,"
                                     "55778904-0299-11f1-b1b8-4ef0c4956feb:mytag:1-3").encode()
        conn._execute_command(COM_BINLOG_DUMP_GTID, struct.pack("<HII", flags | BINLOG_THROUGH_GTID, 4250, 0)
                              + struct.pack("<QI", 4, len(encoded)) + encoded)
        beats = []
        while len(beats) < count:
            event = conn._read_packet().get_all_data()[1:]
            if event[4] in (27, 41):
                beats.append(event)
        return beats
    finally:
        conn.close()


def test_the_endpoint_sends_v2_to_a_mysql_replica_that_asks_and_v1_otherwise(shared_fixtures, tmp_path):
    directory = tmp_path / "binlogs"
    directory.mkdir()
    shutil.copyfile(shared_fixtures / TAGGED, directory / "binlog.000004")
    (directory / "binlog.index").write_text("./binlog.000004\n")
    port = free_port()
    proc, _address = serve_master(directory, "--mysql-listen", f"127.0.0.1:{port}")
    try:
        v2 = _heartbeats(port, flags=USE_HEARTBEAT_EVENT_V2, mariadb=False)
        v1 = _heartbeats(port, flags=0, mariadb=False)
        # The same bit from a MariaDB replica is BINLOG_SEND_ANNOTATE_ROWS_EVENT: v1 heartbeats.
        mariadb = _heartbeats(port, flags=USE_HEARTBEAT_EVENT_V2, mariadb=True)
    finally:
        stderr = stop_master(proc)
    assert "Traceback" not in stderr, stderr
    # The executed set holds the file's one transaction: as MySQL's dump thread does, a heartbeat
    # names the end of that skipped stretch (where the closing Rotate starts) before the Rotate is
    # sent; then, the Rotate leading to binlog.000005, an idle dump waits at that file's start.
    rotate = read_events((shared_fixtures / TAGGED).read_bytes(), TAGGED, verify_checksums=False)[-1]
    assert rotate.type_code == 4
    expected = [("binlog.000004", rotate.pos), ("binlog.000005", 4)]
    assert [mysql_decode(e) for e in v2] == expected
    for events in (v1, mariadb):
        assert [(e[4], e[19:-4].decode(), struct.unpack_from("<I", e, 13)[0]) for e in events] == \
            [(27, name, pos) for name, pos in expected]
