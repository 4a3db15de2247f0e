"""A served file whose Previous_GTIDs (MySQL) or Gtid_list (MariaDB) says it holds more than its
bytes do: each stream gets one line naming the file and the event's offset (1236 over the MySQL
protocol, DATA_LOSS to a slave), never an internal error; the master serves on."""

from __future__ import annotations

import struct
import subprocess
import sys
import zlib

import pymysql
import pytest
from pymysqlreplication import BinLogStreamReader

from dumpfilter.codec.reader import read_events
from tests.support.master_command import free_port, serve_master, stop_master

pytestmark = pytest.mark.timeout(180)

PREVIOUS_GTIDS, GTID_LIST = 35, 163
CASES = {  # fixture, the name it is served under, the set event, where its count sits in the body
    "mysql-previous-gtids": ("rust-us-mysql-cdc-rs/5.7_14_user_var/log.bin", "mysql_bin.000001", PREVIOUS_GTIDS, "<Q"),
    "mariadb-gtid-list": ("mariadb-operator-mariadb-poc/domain_id_0/mariadb-repl-bin.000005",
                          "mariadb-repl-bin.000005", GTID_LIST, "<I"),
}


def _hostile_copy(shared_fixtures, directory, case: str) -> int:
    """The fixture with its set's count raised past what the body holds (CRC made right again):
    the offset of that event."""
    source, name, kind, count = CASES[case]
    data = bytearray((shared_fixtures / source).read_bytes())
    event = next(e for e in read_events(bytes(data), source, verify_checksums=False) if e.type_code == kind)
    struct.pack_into(count, data, event.pos + 19, 1000)
    end = event.pos + len(event.raw)
    struct.pack_into("<I", data, end - 4, zlib.crc32(bytes(data[event.pos:end - 4])))
    directory.mkdir()
    (directory / name).write_bytes(bytes(data))
    (directory / f"{name.rsplit('.', 1)[0]}.index").write_text(f"./{name}\n")
    return event.pos


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_set_longer_than_its_event_is_one_line_naming_file_and_offset(shared_fixtures, tmp_path, case):
    offset = _hostile_copy(shared_fixtures, tmp_path / "binlogs", case)
    where = f"{CASES[case][1]} at byte {offset}: malformed"
    port = free_port()
    proc, address = serve_master(tmp_path / "binlogs", "--mysql-listen", f"127.0.0.1:{port}")
    try:
        slave = subprocess.run([sys.executable, "-m", "dumpfilter", "slave", "run", "--master", address,
                                "--server-id", "71", "--relay-log-dir", str(tmp_path / "relay"),
                                "--until-caught-up", "--connect-retry", "0"],
                               capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
        lines = [line for line in slave.stderr.splitlines() if "error" in line.lower()]
        assert slave.returncode == 2 and len(lines) == 1 and where in lines[0], slave.stderr
        assert "Traceback" not in slave.stderr and "internal error" not in slave.stderr, slave.stderr
        if CASES[case][2] == PREVIOUS_GTIDS:  # a MySQL-flavor client by auto-position
            stream = BinLogStreamReader(connection_settings={"host": "127.0.0.1", "port": port, "user": "gtid-client",
                                                             "password": "x"}, server_id=4242, blocking=False,
                                        auto_position="e3e2a4ee-b6dc-11ea-8bcf-0242ac150002:1")
            with pytest.raises(pymysql.err.OperationalError) as refused:
                list(stream)
            stream.close()
            assert refused.value.args[0] == 1236 and where in refused.value.args[1], refused.value.args
    finally:
        stderr = stop_master(proc)
    assert "internal error" not in stderr and "Traceback" not in stderr, stderr
