"""The codec against binlogs a real MariaDB writes while the test runs: ROW, STATEMENT and MIXED,
compressed events, a live directory read across rotations, and writer output that
mariadb-binlog reads and a fresh server applies."""

from __future__ import annotations

import subprocess

import pytest

from dumpfilter.codec import BinlogReader, EventType, group_transactions
from dumpfilter.binlogs import FILE_FRAMING_TYPES, BinlogSeriesWriter, TailingReader, binlog_paths
from dumpfilter.lab.sandbox import diff_snapshots, snapshot
from tests.support.binlog_apply import apply_binlog
from dumpfilter.lab.sandbox.server import find_binary

pytestmark = pytest.mark.mariadb

WORKLOAD = [
    "CREATE DATABASE shop", "CREATE DATABASE `web-log`",
    "CREATE TABLE shop.items (id INT PRIMARY KEY, name VARCHAR(40), price DECIMAL(8,2)) ENGINE=InnoDB",
    "CREATE TABLE `web-log`.hits (id INT AUTO_INCREMENT PRIMARY KEY, url TEXT) ENGINE=InnoDB",
    "INSERT INTO shop.items VALUES (1, 'pen', 1.50), (2, 'ink', 7.25)",
    "INSERT INTO `web-log`.hits (url) VALUES ('/'), ('/items')",
    "UPDATE shop.items SET price = price * 2 WHERE id = 1",
    "DELETE FROM `web-log`.hits WHERE id = 1",
    "ALTER TABLE shop.items ADD COLUMN stock INT DEFAULT 0",
    "INSERT INTO shop.items (id, name) SELECT id + 10, url FROM `web-log`.hits",
]


def read_all(server) -> list:
    events = []
    for path in server.binlog_files():
        events.extend(BinlogReader(open(path, "rb"), str(path)))
    return events


@pytest.mark.parametrize("binlog_format", ["ROW", "STATEMENT", "MIXED"])
def test_codec_reads_what_mariadb_writes(mariadb_factory, binlog_format):
    server = mariadb_factory(f"codec-{binlog_format.lower()}", binlog_format=binlog_format)
    server.execute(WORKLOAD)
    server.flush_logs()
    events = read_all(server)
    assert events and all(e.fmt.flavor == "mariadb" for e in events)
    units = list(group_transactions(events))
    assert all(u.complete for u in units)
    dml = [u for u in units if any(e.is_rows for e in u.events) or any(
        e.is_query and e.sql.split()[0].upper() in ("INSERT", "UPDATE", "DELETE") for e in u.events)]
    assert len(dml) == 5  # each autocommit DML statement is one transaction
    tables = {e.table_map[1:] for e in events if e.type_code == EventType.TABLE_MAP}
    if binlog_format == "ROW":
        assert tables == {("shop", "items"), ("web-log", "hits")}
    if binlog_format == "STATEMENT":
        assert not tables
        assert any(e.is_query and e.sql.startswith("UPDATE shop.items") for e in events)
    ddl = [e for e in events if e.is_query and e.sql.startswith("CREATE DATABASE")]
    assert [e.db for e in ddl] == ["shop", "web-log"]  # the Query db is the new database itself
    assert all(e.gtid.startswith("0-") for e in events if e.type_code == EventType.MARIADB_GTID)


def test_compressed_events(mariadb_factory):
    server = mariadb_factory("codec-compressed", binlog_format="MIXED",
                             options=["--log-bin-compress=ON", "--log-bin-compress-min-len=10"])
    server.execute(WORKLOAD)
    server.execute("INSERT INTO shop.items (id, name) VALUES (100, UUID())")  # unsafe: logged as rows
    server.flush_logs()
    events = read_all(server)
    compressed = [e for e in events if e.type_code == EventType.QUERY_COMPRESSED]
    assert any(e.sql == WORKLOAD[4] for e in compressed)
    rows = [e for e in events if e.type_code in (EventType.WRITE_ROWS_COMPRESSED_V1, EventType.WRITE_ROWS_COMPRESSED)]
    assert rows, "an unsafe statement under MIXED is logged as (compressed) rows"
    maps = {e.table_id: e.table_map for e in events if e.type_code == EventType.TABLE_MAP}
    assert all(maps[r.table_id][1:] == ("shop", "items") for r in rows)


def test_reading_a_live_server_across_rotations(mariadb_factory):
    server = mariadb_factory("codec-tail", binlog_format="ROW")
    server.execute(WORKLOAD[:5])
    early = list(TailingReader(server.binlog_dir))  # the file in use, to the end of what is written
    server.flush_logs()
    server.execute(WORKLOAD[5:])
    server.flush_logs()
    server.execute("INSERT INTO shop.items (id, name) VALUES (50, 'late')")
    seen = list(TailingReader(server.binlog_dir))
    files = server.binlog_files()
    assert [p.name for p in files] == sorted({name for name, _ in seen}) and len(files) == 3
    assert any(e.type_code == EventType.TABLE_MAP and e.table_map[1:] == ("shop", "items")
               for name, e in seen if name == files[-1].name)
    # Every event of the closed files, in order, exactly once. The early FDE was read while the
    # file was in use: the server clears its IN_USE flag in place when it closes the file.
    def unflagged(raw: bytes) -> bytes:
        return raw[:17] + bytes((raw[17] & ~1,)) + raw[18:] if raw[4] == EventType.FORMAT_DESCRIPTION else raw
    on_disk = {path.name: [e.raw for e in BinlogReader(open(path, "rb"))] for path in files[:-1]}
    assert [unflagged(e.raw) for _, e in early] == on_disk[files[0].name][:len(early)]
    for name, raws in on_disk.items():
        assert [e.raw for n, e in seen if n == name] == raws


def test_writer_output_is_read_by_mariadb_binlog_and_applied(mariadb_factory, tmp_path):
    source = mariadb_factory("codec-writer-src", binlog_format="ROW")
    server_sql = WORKLOAD + [f"INSERT INTO shop.items (id, name) VALUES ({i}, 'n{i}')" for i in range(200, 230)]
    source.execute(server_sql)
    source.flush_logs()
    events = read_all(source)
    # Rewritten into a series of small files: positions renumbered, a Gtid_list per file, Rotates.
    units = [u for u in group_transactions(events) if u.events[0].type_code not in FILE_FRAMING_TYPES]
    start_state = next(e for e in events if e.type_code == EventType.MARIADB_GTID_LIST)
    with BinlogSeriesWriter(tmp_path / "out", "copy-bin", events[0], max_size=2048, start_state=start_state) as series:
        for u in units:
            series.write_transaction(u.events)
    paths = series.close()
    assert len(paths) >= 3
    tool = find_binary("mariadb-binlog")
    proc = subprocess.run([tool, "--no-defaults", *map(str, paths)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "ERROR" not in proc.stderr
    for path, next_path in zip(paths, paths[1:]):
        assert list(BinlogReader(open(path, "rb")))[-1].rotate == (4, next_path.name)
    assert binlog_paths(tmp_path / "out") == paths
    replica = mariadb_factory("codec-writer-dst", log_bin=False)
    ok, error = apply_binlog(replica, paths)
    assert ok, error
    assert diff_snapshots(snapshot(source), snapshot(replica)) == []
