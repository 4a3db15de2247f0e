"""Bad input gets one clear line naming the file and byte offset, never a traceback."""

from __future__ import annotations

import io
import struct

import pytest

from dumpfilter.codec import BinlogReader, read_events
from dumpfilter.errors import BinlogError, ChecksumError, TruncatedBinlogError
from dumpfilter.codec.encode import build_event, format_description, query_body, xid_body
from dumpfilter.codec.constants import EventType
from dumpfilter.cli.app import main


def small_binlog() -> bytes:
    fde = format_description("10.11.6-MariaDB-log")
    out = bytearray(b"\xfebin" + fde.raw)
    for ev in (build_event(EventType.QUERY, query_body("INSERT INTO t VALUES (1)", "db1"), fmt=fde.fmt),
               build_event(EventType.XID, xid_body(7), fmt=fde.fmt)):
        out += ev.raw
    return bytes(out)


def test_bad_magic():
    with pytest.raises(BinlogError, match=r"x\.bin at byte 0: bad magic"):
        read_events(b"\x00bin" + small_binlog()[4:], "x.bin")


def test_truncated_inside_event():
    data = small_binlog()
    with pytest.raises(TruncatedBinlogError, match=r"at byte \d+: event size \d+ runs past the end"):
        read_events(data[:-5], "t.bin")


def test_truncated_inside_header():
    data = small_binlog()
    cut = len(data) - 31 + 10  # ten bytes into the last event's header
    with pytest.raises(TruncatedBinlogError, match=f"at byte {len(data) - 31}: file ends inside an event header"):
        read_events(data[:cut], "t.bin")


def test_bad_crc_names_the_event_and_offset():
    data = bytearray(small_binlog())
    fde_end = 4 + struct.unpack_from("<I", data, 4 + 9)[0]
    data[fde_end + 30] ^= 0xFF
    with pytest.raises(ChecksumError, match=f"at byte {fde_end}: CRC32 mismatch in QUERY"):
        read_events(bytes(data), "c.bin")
    with pytest.raises(ChecksumError, match=f"at byte {fde_end}: CRC32 mismatch in QUERY"):
        list(BinlogReader(io.BytesIO(bytes(data)), "c.bin"))
    # --no-verify-checksums reads it
    assert len(read_events(bytes(data), "c.bin", verify_checksums=False)) == 3
    assert len(list(BinlogReader(io.BytesIO(bytes(data)), "c.bin", verify_checksums=False))) == 3


def test_missing_fde():
    data = small_binlog()
    fde_size = struct.unpack_from("<I", data, 4 + 9)[0]
    with pytest.raises(BinlogError, match="no Format_description event before QUERY"):
        read_events(data[:4] + data[4 + fde_size :], "n.bin")
    with pytest.raises(BinlogError, match="no Format_description event before QUERY"):
        list(BinlogReader(io.BytesIO(data[:4] + data[4 + fde_size :]), "n.bin"))


def test_impossible_event_size():
    data = bytearray(small_binlog())
    fde_end = 4 + struct.unpack_from("<I", data, 4 + 9)[0]
    struct.pack_into("<I", data, fde_end + 9, 5)
    with pytest.raises(BinlogError, match=f"at byte {fde_end}: event size 5 is impossible"):
        read_events(bytes(data), "s.bin")
    with pytest.raises(BinlogError, match=f"at byte {fde_end}: event size 5 is impossible"):
        list(BinlogReader(io.BytesIO(bytes(data)), "s.bin"))


def test_cli_reports_one_line_and_nonzero_exit(tmp_path, capsys):
    bad = tmp_path / "bad.000001"
    bad.write_bytes(small_binlog()[:-3])
    assert main(["binlog", "inspect", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert f"{bad} at byte" in err


def test_cli_missing_file(tmp_path, capsys):
    assert main(["binlog", "inspect", str(tmp_path / "nope.000001")]) == 2
    assert "no such file" in capsys.readouterr().err


def test_cli_inspect_json_keys(tmp_path, capsys):
    import json
    good = tmp_path / "good.000001"
    good.write_bytes(small_binlog())
    assert main(["binlog", "inspect", "--json", str(good)]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["type"] for r in rows] == ["FORMAT_DESCRIPTION", "QUERY", "XID"]
    for key in ("pos", "type", "size", "log_pos", "db", "table", "sql", "gtid"):
        assert all(key in r for r in rows)
    assert rows[1]["db"] == "db1" and rows[1]["sql"] == "INSERT INTO t VALUES (1)"
    assert rows[1]["pos"] == rows[0]["pos"] + rows[0]["size"]


def test_a_table_map_under_an_fde_without_its_post_header_length_is_malformed(capsys, tmp_path):
    # Found by the atheris binlog target: an FDE that lists fewer event types than Table_map's (19)
    # made `Event.table_names` raise IndexError (a traceback) instead of one clear line.
    from dumpfilter.codec.encode import table_map_body
    from dumpfilter.codec.format_description import FormatDescription
    from dumpfilter.codec.event import HEADER
    from dumpfilter.errors import MalformedEventError

    body = struct.pack("<H50sIB", 4, b"8.0.36", 0, 19) + bytes(10) + b"\x00"  # 10 post-header lengths, no CRC
    fmt = FormatDescription.parse(HEADER.pack(0, EventType.FORMAT_DESCRIPTION, 0, 0, 0, 0) + body)
    fde = build_event(EventType.FORMAT_DESCRIPTION, body, fmt=fmt, log_pos=4 + 19 + len(body))
    table_map = build_event(EventType.TABLE_MAP, table_map_body(7, "db1", "t1"), fmt=fmt, log_pos=0)
    data = b"\xfebin" + fde.raw + table_map.raw
    events = list(BinlogReader(io.BytesIO(data), "short-fde.bin"))
    with pytest.raises(MalformedEventError, match="no post-header length"):
        events[-1].table_names
    path = tmp_path / "short-fde.bin"
    path.write_bytes(data)
    assert main(["binlog", "inspect", str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no post-header length" in err[0], err
