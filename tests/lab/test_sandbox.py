"""Real-server tests for dumpfilter.lab.sandbox: lifecycle, replication, snapshots, binlog replay."""

from __future__ import annotations

import importlib
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pymysql
import pytest

from dumpfilter.lab.sandbox import (
    MariaDBServer,
    ServerStartError,
    diff_snapshots,
    make_replica,
    replica_status,
    snapshot,
    stop_servers,
    wait_caught_up,
)
from tests.support.binlog_apply import BinlogApplyError, apply_binlog

pytestmark = pytest.mark.mariadb

PROJECT_ROOT = Path(__file__).resolve().parents[2]

WORKLOAD = {
    None: ["CREATE DATABASE a", "CREATE DATABASE b"],
    # DDL runs with a default database: replicate-do-db filters DDL on it.
    "a": [
        "CREATE TABLE t (id INT PRIMARY KEY AUTO_INCREMENT, v VARCHAR(20), n DECIMAL(8,2))",
        "CREATE TABLE nokey (x INT, y VARBINARY(8))",
        "INSERT INTO t (v, n) VALUES ('x', 1.50), ('y', NULL), (NULL, -3)",
        "INSERT INTO nokey VALUES (1, 0x00ff), (1, 0x00ff), (2, NULL)",
        "UPDATE t SET v = 'z' WHERE id = 3",
    ],
    "b": [
        "CREATE TABLE u (id INT PRIMARY KEY, w TEXT)",
        "INSERT INTO u VALUES (1, 'only on primary'), (2, 'b')",
    ],
}


def run_workload(server: MariaDBServer) -> None:
    for db, statements in WORKLOAD.items():
        server.execute(statements, db=db)


def pid_alive(pid: int) -> bool:
    """True while the process exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def wait_pid_gone(pid: int, timeout: float = 15.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not pid_alive(pid):
            return True
        time.sleep(0.05)
    return False


@pytest.fixture(scope="module")
def replicated(mariadb_factory):
    """(primary, replica with --replicate-do-db=a), caught up after WORKLOAD."""
    primary = mariadb_factory("primary")
    replica = mariadb_factory("replica", options=["--replicate-do-db=a"])
    make_replica(primary, replica)
    run_workload(primary)
    status = wait_caught_up(primary, replica, timeout=20)
    assert status.caught_up, status.describe()
    return primary, replica


def test_server_starts_and_answers(mariadb_factory):
    srv = mariadb_factory("solo")
    assert srv.running and srv.port and srv.port != 3306
    row = srv.query("SELECT VERSION() AS v, @@server_id AS sid, @@log_bin AS lb, "
                    "@@binlog_format AS fmt, @@bind_address AS bind")[0]
    assert "MariaDB" in row["v"]
    assert (row["sid"], row["lb"], row["fmt"], row["bind"]) == (srv.server_id, 1, "ROW", "127.0.0.1")
    assert "ready for connections" in srv.error_log_tail(50)
    files = srv.binlog_files()
    assert len(files) == 1 and files[0].parent == srv.binlog_dir and files[0].is_file()
    srv.flush_logs()
    assert [f.name for f in srv.binlog_files()] == [files[0].name, files[0].name[:-1] + "2"]
    with srv.connect(db="mysql") as conn, conn.cursor() as cur:
        cur.execute("SELECT DATABASE()")
        assert cur.fetchone() == ("mysql",)
    with pytest.raises(pymysql.err.ProgrammingError):
        srv.execute("SELEC nonsense")


def _events_after_reset(srv) -> list[str]:
    return [r["Event_type"] for r in srv.query("SHOW BINLOG EVENTS")]


@pytest.mark.parametrize("checkpoint", ["asked", "unknown variable"])
def test_reset_master_after_dml_starts_the_series_again(mariadb_factory, monkeypatch, checkpoint):
    """reset_master() asks InnoDB for a checkpoint first (else RESET MASTER waits for its redo
    flush); where the server has no innodb_log_checkpoint_now (a non-debug build before MariaDB
    10.11.8: error 1193, drawn here from the real server by a variable no build has), it resets all
    the same."""
    srv = mariadb_factory("reset")
    srv.execute(["CREATE DATABASE d", "CREATE TABLE d.t (id INT PRIMARY KEY)", "INSERT INTO d.t VALUES (1)"])
    srv.flush_logs()
    srv.execute("INSERT INTO d.t VALUES (2)")
    if checkpoint == "unknown variable":
        execute = srv.execute
        monkeypatch.setattr(srv, "execute", lambda sql, db=None: execute(
            sql.replace("innodb_log_checkpoint_now", "innodb_no_such_variable_here") if isinstance(sql, str) else sql, db))
    srv.reset_master()
    assert [f.name for f in srv.binlog_files()] == ["mariadb-bin.000001"]
    assert "Query" not in _events_after_reset(srv)  # none of the DDL or DML before
    assert srv.query("SELECT @@gtid_binlog_pos AS g")[0]["g"] == ""
    assert srv.query("SELECT id FROM d.t ORDER BY id") == [{"id": 1}, {"id": 2}]


def test_restart_keeps_the_datadir_and_runs_the_step_while_down(mariadb_factory):
    srv = mariadb_factory("restarted")
    srv.execute(["CREATE DATABASE kept", "CREATE TABLE kept.t (id INT PRIMARY KEY)", "INSERT INTO kept.t VALUES (7)"])
    port, pid = srv.port, srv.pid
    seen = []
    srv.restart(lambda: seen.append((srv.running, sorted(f.name for f in srv.binlog_files()))))
    assert seen and seen[0][0] is False and seen[0][1], seen  # down, its binlog files in place
    assert srv.running and srv.port == port and srv.pid != pid
    assert srv.query("SELECT id FROM kept.t") == [{"id": 7}]
    # The server opens a new binlog file after the ones it was down with.
    assert len(srv.binlog_files()) == len(seen[0][1]) + 1


def test_replicate_do_db_snapshot(replicated):
    primary, replica = replicated
    sp, sr = snapshot(primary), snapshot(replica)
    assert "b" in sp.schemas and "b" not in sr.schemas
    assert not [t for s, t in sr.tables if s == "b"]
    in_a = {t: ts for (s, t), ts in sp.tables.items() if s == "a"}
    assert set(in_a) == {"t", "nokey"}
    for name, tp in in_a.items():
        tr = sr.table("a", name)
        assert (tr.definition, tr.row_count, tr.content_hash) == (
            tp.definition, tp.row_count, tp.content_hash)
    assert "AUTO_INCREMENT=" not in sp.table("a", "t").definition
    assert sp.table("a", "t").key_columns == ("id",)
    assert sp.table("a", "nokey").row_count == 3
    assert diff_snapshots(sp, sr) == ["schema b: missing on replica"]
    assert diff_snapshots(sp, sr) == diff_snapshots(sp, snapshot(replica, schemas=["a", "b"]))
    assert diff_snapshots(sp, sp) == []
    st = replica_status(replica)
    assert st["Slave_SQL_Running"] == "Yes" and st["Replicate_Do_DB"] == "a"


def test_diff_reports_changed_rows(replicated, monkeypatch):
    primary, replica = replicated
    replica.execute(["UPDATE t SET v = 'changed' WHERE id = 2",
                     "DELETE FROM t WHERE id = 3",
                     "DELETE FROM nokey WHERE x = 1 LIMIT 1"], db="a")
    try:
        diff = diff_snapshots(snapshot(primary, schemas=["a"]), snapshot(replica, schemas=["a"]))
        text = "\n".join(diff)
        assert len(diff) == 2, text
        assert "table a.t: content differs (row count primary=3 replica=2)" in text
        assert "row (id=2) differs primary -> replica: v: 'y' -> 'changed'" in text
        assert "row only on primary: (id=3, v='z', n=-3.00)" in text
        assert "table a.nokey: content differs (row count primary=3 replica=2)" in text
        assert "row only on primary: (x=1, y=0x00ff)" in text
        # (the module: the package's `snapshot` is the function)
        monkeypatch.setattr(importlib.import_module("dumpfilter.lab.sandbox.snapshot"), "MAX_ROWS_SHOWN", 1)
        limited = diff_snapshots(snapshot(primary, schemas=["a"]), snapshot(replica, schemas=["a"]))
        assert "... and 1 more differing rows" in "\n".join(limited)
    finally:  # put the replica back for the other tests of this module
        replica.execute(["UPDATE t SET v = 'y' WHERE id = 2",
                         "INSERT INTO t VALUES (3, 'z', -3)",
                         "INSERT INTO nokey VALUES (1, 0x00ff)"], db="a")
    assert diff_snapshots(snapshot(primary, schemas=["a"]), snapshot(replica, schemas=["a"])) == []


def test_definition_difference_reported(replicated):
    primary, replica = replicated
    replica.execute("ALTER TABLE nokey ADD COLUMN extra INT", db="a")
    try:
        diff = diff_snapshots(snapshot(primary, schemas=["a"]), snapshot(replica, schemas=["a"]))
        assert diff and diff[0].startswith("table a.nokey: definition differs")
        assert "+  `extra` int(11) DEFAULT NULL" in diff[0]
    finally:
        replica.execute("ALTER TABLE nokey DROP COLUMN extra", db="a")


def test_replica_error_is_reported(mariadb_factory):
    primary = mariadb_factory("primary")
    replica = mariadb_factory("replica")
    make_replica(primary, replica)
    primary.execute(["CREATE DATABASE a", "CREATE TABLE a.t (id INT PRIMARY KEY)"])
    assert wait_caught_up(primary, replica, timeout=20).caught_up
    replica.execute("INSERT INTO a.t VALUES (1)")  # the replica diverges
    primary.execute("INSERT INTO a.t VALUES (1), (2)")
    status = wait_caught_up(primary, replica, timeout=20)
    assert not status.caught_up and status.stopped_with_error, status.describe()
    assert status.sql_running == "No"
    assert status.last_sql_errno == 1062, status.last_sql_error
    assert "Duplicate entry" in status.last_sql_error
    assert status.relay_master_log_file == status.primary_file
    assert 0 < status.exec_master_log_pos < status.primary_pos
    assert "SQL error 1062" in status.describe()


def test_apply_binlog_reproduces_primary(replicated, mariadb_factory):
    primary, _ = replicated
    primary.flush_logs()
    primary.execute("INSERT INTO t (v) VALUES ('after flush')", db="a")
    files = primary.binlog_files()
    assert len(files) >= 2
    fresh = mariadb_factory("fresh", log_bin=False)
    ok, err = apply_binlog(fresh, files)
    assert ok, err
    assert diff_snapshots(snapshot(primary), snapshot(fresh)) == []

    # Replaying again: the server rejects the first statement; report it.
    ok, err = apply_binlog(fresh, files)
    assert not ok
    assert err.startswith("ERROR 1007 (HY000): Can't create database 'a'"), err
    assert "at line" in err and "binlog event at position" in err
    assert "CREATE DATABASE a" in err


def test_apply_binlog_rewrite_db_and_row_error(replicated, mariadb_factory):
    primary, _ = replicated
    target = mariadb_factory("rewrite", log_bin=False)
    target.execute(["CREATE DATABASE c", "CREATE TABLE c.placeholder (i INT)",
                    "DROP TABLE c.placeholder"])
    ok, err = apply_binlog(target, primary.binlog_files(), ["--rewrite-db=a->c"])
    assert ok, err
    sp, st = snapshot(primary, schemas=["a"]), snapshot(target, schemas=["c"])
    # the same tables (definition and content) in c as in a
    assert {t: (s.definition, s.content_hash) for (_, t), s in sp.tables.items()} == \
        {t: (s.definition, s.content_hash) for (_, t), s in st.tables.items()}

    # A row event the server rejects is reported with its event header.
    primary.flush_logs()
    primary.execute("INSERT INTO u VALUES (3, 'new row')", db="b")
    last = primary.binlog_files()[-1]
    dup = mariadb_factory("dup", log_bin=False)
    dup.execute(["CREATE DATABASE b", "CREATE TABLE b.u (id INT PRIMARY KEY, w TEXT)",
                 "INSERT INTO b.u VALUES (3, 'blocker')"])
    ok, err = apply_binlog(dup, last)
    assert not ok
    assert err.startswith("ERROR 1062 (23000): Duplicate entry '3'"), err
    assert "Write_rows" in err and f"server id {primary.server_id}" in err, err
    assert "BINLOG '" in err, err


def test_apply_binlog_raises_on_undecodable_input(mariadb_factory, tmp_path):
    srv = mariadb_factory("apply-errors", log_bin=False)
    with pytest.raises(BinlogApplyError, match="not found"):
        apply_binlog(srv, tmp_path / "missing.000001")
    junk = tmp_path / "junk.000001"
    junk.write_bytes(b"this is not a binlog" * 10)
    with pytest.raises(BinlogApplyError, match="mariadb-binlog failed"):
        apply_binlog(srv, junk)


def test_stop_really_ends_the_process():
    srv = MariaDBServer("stopper", server_id=7)
    with srv:
        pid, root = srv.pid, srv.root
        assert pid_alive(pid) and root.is_dir()
    assert not pid_alive(pid)
    assert not root.exists()
    assert not srv.running
    srv.stop()  # idempotent


def test_failed_start_is_clear_and_leaves_nothing(tmp_path):
    srv = MariaDBServer("broken", server_id=8, options=["--no-such-option-xyz"], tmp_root=tmp_path)
    with pytest.raises(ServerStartError, match="exited with .* during startup") as exc:
        srv.start()
    assert "no-such-option-xyz" in str(exc.value)  # the error log tail is in the message
    assert not srv.running and srv.root is None
    assert list(tmp_path.iterdir()) == []


CHILD = textwrap.dedent("""
    import sys, time
    sys.path.insert(0, {root!r})
    from dumpfilter.lab.sandbox import MariaDBServer
    srv = MariaDBServer("orphan", server_id=9).start()
    print(srv.pid, srv.root, flush=True)
    time.sleep(120)
""")


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL, signal.SIGINT])
def test_killed_run_leaves_no_mariadbd(sig):
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD.format(root=str(PROJECT_ROOT))],
        stdout=subprocess.PIPE, text=True,
    )
    try:
        line = child.stdout.readline().split()
        assert line, "child did not start a server"
        pid, root = int(line[0]), Path(line[1])
        assert pid_alive(pid)
        child.send_signal(sig)
        # The child stops its server on the way out: SIGTERM, and SIGKILL only after the
        # server's stop_timeout (15 s). A loaded host (CI runs mariadbd in every worker) can
        # take that long, so the wait is a bound on a hang, not a measure of speed.
        child.wait(MariaDBServer.stop_timeout + 60)
        assert wait_pid_gone(pid), f"mariadbd {pid} survived {sig.name} of its parent"
        if sig != signal.SIGKILL:  # orderly exits also remove the server's files
            assert not root.exists()
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        if "root" in locals():
            shutil.rmtree(root, ignore_errors=True)


@pytest.mark.fixtures
def test_apply_real_mariadb_binlog_reports_missing_table(shared_fixtures, mariadb_factory):
    binlog = shared_fixtures / "blackbeam-rust_mysql_common" / "mariadb-bin.000001"
    if not binlog.is_file():
        pytest.skip(f"{binlog} not in the shared fixtures")
    srv = mariadb_factory("real-fixture", log_bin=False)
    ok, err = apply_binlog(srv, binlog, ["--verbose"])
    assert not ok
    assert err.startswith("ERROR 1146 (42S02): Table 'toddy_test.outbox' doesn't exist"), err
    assert "Table_map: `toddy_test`.`outbox`" in err and "### INSERT INTO `toddy_test`.`outbox`" in err


def test_datadirs_are_copies_of_one_install(tmp_path, monkeypatch):
    """mariadb-install-db runs once per MariaDB build and option set (lab/sandbox/datadir.py);
    each server gets a copy of its datadir, its own; where the cache cannot be written, each
    server installs its own datadir as before."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("DUMPFILTER_CACHE", str(cache))
    installs: list[Path] = []
    install = MariaDBServer._install

    def counted(self, install_db, root):
        installs.append(root)
        return install(self, install_db, root)

    monkeypatch.setattr(MariaDBServer, "_install", counted)
    servers = []
    try:
        for i in range(2):
            servers.append(MariaDBServer(f"copy{i}", server_id=60 + i, tmp_root=tmp_path).start())
        assert len(installs) == 1 and installs[0].parent == cache / "mariadb-datadir"
        template = next((cache / "mariadb-datadir").iterdir()) / "data"
        servers[0].execute(["CREATE DATABASE only_in_copy0"])
        assert servers[1].query("SHOW DATABASES LIKE 'only\\_in\\_copy0'") == []
        assert not (template / "only_in_copy0").exists()
        assert all(s.query("SELECT @@server_id AS i")[0]["i"] == 60 + n for n, s in enumerate(servers))
        monkeypatch.setenv("DUMPFILTER_CACHE", "/proc/no-cache-here")
        servers.append(MariaDBServer("own-install", server_id=62, tmp_root=tmp_path).start())
        assert len(installs) == 2 and installs[1] == servers[2].root
        assert servers[2].query("SELECT COUNT(*) AS n FROM mysql.user")[0]["n"] > 0
    finally:
        assert stop_servers(servers) == []
