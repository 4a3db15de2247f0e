"""Transaction_payload events (MySQL 8.0.20+ binlog_transaction_compression, zstd) through
--mysql-listen (issue #31 item 3): a payload kept whole is sent as it is (the compressed bytes the
primary wrote, CRC included), one whose inner events are all filtered out is not sent, and one
whose inner events are mixed is decompressed, filtered and compressed again. The real MySQL 8.0.28
fixture `mysql-bin.compressed` is served as it is; for the mixed case a real MySQL 8.0.31
transaction touching two tables (binlog.000693) is compressed into a payload as a server with
compression on writes it (the inner events without CRC, log_pos 0). What a replica receives is
read here with the `zstandard` package and MySQL's field layout, not with the codec that wrote it."""

from __future__ import annotations

import struct

import pymysql
import pytest
import zstandard
from pymysql.protocol import MysqlPacket

from dumpfilter.codec import EventType
from dumpfilter.codec.encode import build_event
from dumpfilter.codec.event import Event
from dumpfilter.codec.format_description import FormatDescription
from dumpfilter.codec.gtid import with_transaction_length
from dumpfilter.codec.packing import encode_lenenc
from dumpfilter.codec.reader import read_events
from dumpfilter.codec.transactions import group_transactions
from dumpfilter.master.protocol.commands import BINLOG_DUMP_NON_BLOCK, COM_BINLOG_DUMP
from tests.support.master_command import free_port, serve_master, stop_master

pytestmark = pytest.mark.timeout(120)
COMPRESSED = "osheroff-mysql-binlog-connector-java/mysql-bin.compressed"
VOLUME = "rust-us-mysql-cdc-rs/binlog.000693"
RULES = {61: [], 62: ["replicate-ignore-table=hdb_meta.roles"], 63: ["replicate-ignore-db=hdb_meta"],
         64: ["replicate-ignore-db=demo"]}


def _payload_fields(event: bytes) -> tuple[dict[int, int], bytes]:
    """({field: value}, the compressed data) of a type-40 event, as MySQL's
    Transaction_payload::decode reads it (type, length, value; type 0 ends them)."""
    body = MysqlPacket(event[19:-4], "utf8")
    fields = {}
    while True:
        kind = body.read_length_encoded_integer()
        if kind == 0:
            return fields, body.read_all()
        length = body.read_length_encoded_integer()
        fields[kind] = MysqlPacket(body.read(length), "utf8").read_length_encoded_integer()


def _inner(event: bytes) -> list[tuple[int, bytes]]:
    """(type, raw) of each event inside a payload, decompressed with zstandard."""
    fields, data = _payload_fields(event)
    assert fields[1] == len(data) and fields[2] == 0  # the payload size; zstd
    plain = zstandard.ZstdDecompressor().decompress(data, max_output_size=fields[3])
    assert len(plain) == fields[3]
    out, i = [], 0
    while i < len(plain):
        size = struct.unpack_from("<I", plain, i + 9)[0]
        out.append((plain[i + 4], plain[i:i + size]))
        i += size
    assert i == len(plain)
    return out


def _table(raw: bytes) -> tuple[bytes, bytes]:
    """(database, table) of a Table_map: after its 8-byte post-header, each name is a length byte,
    the name and a NUL."""
    at = 19 + 8
    db = raw[at + 1:at + 1 + raw[at]]
    at += 1 + raw[at] + 1
    return db, raw[at + 1:at + 1 + raw[at]]


def _mixed_payload_binlog(shared_fixtures) -> bytes:
    """binlog.000693's head (FDE, Previous_gtids) and its one transaction on two tables, its inner
    events compressed into a Transaction_payload after its Anonymous_GTID (transaction_length set)."""
    data = (shared_fixtures / VOLUME).read_bytes()
    events = list(read_events(data, VOLUME, verify_checksums=False))
    unit = next(u for u in group_transactions(iter(events))
                if len({e.table_map[1:] for e in u.events if e.type_code == EventType.TABLE_MAP}) == 2)
    gtid, inner = unit.events[0], unit.events[1:]
    plain_fmt = gtid.fmt.without_checksums()
    plain = b"".join(build_event(e.type_code, e.body, fmt=plain_fmt, server_id=e.server_id, timestamp=e.timestamp,
                                 log_pos=0, flags=e.flags).raw for e in inner)
    packed = zstandard.ZstdCompressor().compress(plain)

    def field(kind: int, value: int) -> bytes:
        encoded = encode_lenenc(value)
        return encode_lenenc(kind) + encode_lenenc(len(encoded)) + encoded

    body = field(2, 0) + field(3, len(plain)) + field(1, len(packed)) + b"\0" + packed
    out = bytearray(b"\xfebin")
    head = [e for e in events if e.type_code in (EventType.FORMAT_DESCRIPTION, EventType.PREVIOUS_GTIDS)][:2]
    payload = build_event(EventType.TRANSACTION_PAYLOAD, body, fmt=gtid.fmt, server_id=gtid.server_id)
    gtid_body = gtid.body
    for _ in range(2):  # the length field's width can change the GTID event's own size
        size = 19 + len(gtid_body) + 4 + payload.size
        gtid_body = with_transaction_length(gtid.type_code, gtid.body, size)
    gtid = build_event(gtid.type_code, gtid_body, fmt=gtid.fmt, server_id=gtid.server_id, timestamp=gtid.timestamp)
    for event in [*head, gtid, payload]:
        out += event.with_header(log_pos=len(out) + event.size).raw
    return bytes(out)


def _served(tmp_path, name: str, data: bytes):
    directory = tmp_path / "binlogs"
    directory.mkdir()
    (directory / name).write_bytes(data)
    (directory / f"{name.rsplit('.', 1)[0]}.index").write_text(f"./{name}\n")
    topology = tmp_path / "replicas.toml"
    topology.write_text("".join(f'[[slaves]]\nname = "r{sid}"\nserver_id = {sid}\nflavor = "mysql"\nrules = {rules!r}\n\n'
                                .replace("'", '"') for sid, rules in RULES.items()))
    port = free_port()
    proc, _address = serve_master(directory, "--mysql-listen", f"127.0.0.1:{port}", "--replicas", str(topology))
    return proc, port


def _dump(port: int, server_id: int, name: str) -> list[bytes]:
    """The events a MySQL-flavor replica with `server_id` receives from `name`:4, up to EOF."""
    conn = pymysql.connect(host="127.0.0.1", port=port, user=f"r{server_id}", password="x")
    try:
        with conn.cursor() as cur:
            cur.execute("SET @source_binlog_checksum = @@global.binlog_checksum")
        conn._execute_command(COM_BINLOG_DUMP, struct.pack("<IHI", 4, BINLOG_DUMP_NON_BLOCK, server_id) + name.encode())
        events = []
        while True:
            data = conn._read_packet().get_all_data()
            if data[:1] == b"\xfe" and len(data) < 9:
                return events
            events.append(data[1:])
    finally:
        conn.close()


def _payloads(events: list[bytes]) -> list[bytes]:
    return [e for e in events if e[4] == EventType.TRANSACTION_PAYLOAD]


def test_the_real_compressed_fixture_payload_goes_as_it_is_or_not_at_all(shared_fixtures, tmp_path):
    data = (shared_fixtures / COMPRESSED).read_bytes()
    original = [e.raw for e in read_events(data, COMPRESSED) if e.type_code == EventType.TRANSACTION_PAYLOAD]
    assert len(original) == 1
    assert [_table(raw) for t, raw in _inner(original[0]) if t == EventType.TABLE_MAP] == [(b"demo", b"movies")]
    proc, port = _served(tmp_path, "mysql-bin.000004", data)
    try:
        whole, none = _dump(port, 61, "mysql-bin.000004"), _dump(port, 64, "mysql-bin.000004")
    finally:
        stderr = stop_master(proc)
    assert "Traceback" not in stderr, stderr
    assert _payloads(whole) == original  # byte for byte: compressed data, fields and CRC untouched
    assert _payloads(none) == []


def test_a_mixed_payload_is_decompressed_filtered_and_compressed_again(shared_fixtures, tmp_path):
    data = _mixed_payload_binlog(shared_fixtures)
    original = _payloads([e.raw for e in read_events(data, "binlog.000693")])
    assert sorted(_table(raw) for t, raw in _inner(original[0]) if t == EventType.TABLE_MAP) == \
        [(b"hdb_meta", b"roles"), (b"hdb_meta", b"roles_priv")]
    proc, port = _served(tmp_path, "binlog.000693", data)
    try:
        received = {sid: _dump(port, sid, "binlog.000693") for sid in (61, 62, 63)}
    finally:
        stderr = stop_master(proc)
    assert "Traceback" not in stderr, stderr
    assert _payloads(received[61]) == original
    assert _payloads(received[63]) == []
    [mixed] = _payloads(received[62])
    inner = _inner(mixed)
    assert [_table(raw) for t, raw in inner if t == EventType.TABLE_MAP] == [(b"hdb_meta", b"roles_priv")]
    kinds = [t for t, _ in inner]
    assert kinds[0] == EventType.QUERY and kinds[-1] == EventType.XID and kinds.count(EventType.UPDATE_ROWS) == 1
    # The transaction's GTID carries the new length: its own size and the new payload's.
    fmt = FormatDescription.parse(next(e for e in received[62] if e[4] == EventType.FORMAT_DESCRIPTION))
    gtid = next(e for e in received[62] if e[4] == EventType.ANONYMOUS_GTID)
    assert Event(gtid, 0, fmt).gtid_info.transaction_length == len(gtid) + len(mixed)
