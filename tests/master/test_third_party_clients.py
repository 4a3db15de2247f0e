"""Binlog clients other than a replica's IO thread read through --mysql-listen exactly the row
changes their rules keep, in the primary's order (issue #58): python-mysql-replication in each of
its modes (MariaDB: COM_BINLOG_DUMP with an empty file name; file and position; MariaDB GTID by
@slave_connect_state; MySQL against a MySQL binlog), blocking and not, and `mariadb-binlog
--read-from-remote-server`, one-shot (server_id 0: a dump that does not register) and
--stop-never. Each reads once straight from a real MariaDB 10.11 primary (ROW,
binlog_row_metadata=FULL) and once through the endpoint, where server_id 77 (and user `cdc`) has
`replicate-do-db=db1`; the rows it reads through the endpoint are the primary's db1 rows.

What broke them: python-mysql-replication's MariaDB dump request is one byte longer than its
header says, and the endpoint took that stray byte for a closed connection (a reset, the client
retrying forever); mariadb-binlog cannot read a heartbeat, which the endpoint sent for each skipped
stretch to a client that asked for none; a server_id 0 dump was refused; the Gtid_list ending a
skipped tail carried FLAG_IGN_GTIDS, whose flag bits python-mysql-replication reads as a count;
column names came out as UNKNOWN_COL0... for want of @@binlog_row_metadata."""

from __future__ import annotations

import json
import logging
import shutil
import subprocess
import threading
from pathlib import Path

import pytest
from pymysqlreplication import BinLogStreamReader
from pymysqlreplication.row_event import DeleteRowsEvent, UpdateRowsEvent, WriteRowsEvent

from tests.conftest import skip_or_fail
from tests.support.waiting import wait_for

pytestmark = pytest.mark.timeout(120)

RULES = 'rules = ["replicate-do-db=db1"]'
ROWS = [WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent]


@pytest.fixture(scope="module")
def primary(mariadb_factory):
    """A MariaDB primary whose rows go to db1 and db2 over two files; its first CREATE TABLE and
    its last transaction are db2's (skipped by the rules: the tail a Gtid_list ends)."""
    server = mariadb_factory("clients-primary", options=["--binlog-row-metadata=FULL"])
    server.execute(["CREATE DATABASE db1", "CREATE DATABASE db2"])
    server.execute("CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(20))", db="db2")
    server.execute("CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(20))", db="db1")
    for i in range(1, 4):
        server.execute([f"INSERT INTO db1.t VALUES ({i}, 'a{i}')", f"INSERT INTO db2.t VALUES ({i}, 'b{i}')"])
    server.gtid_middle = server.query("SELECT @@gtid_binlog_pos AS g")[0]["g"]
    conn = server.connect()  # one transaction writing both: its db1 rows are kept
    with conn.cursor() as cur:
        cur.execute("BEGIN")
        cur.execute("INSERT INTO db2.t VALUES (10, 'both')")
        cur.execute("INSERT INTO db1.t VALUES (10, 'both')")
        cur.execute("COMMIT")
    conn.close()
    server.flush_logs()
    for i in range(4, 7):
        server.execute([f"INSERT INTO db2.t VALUES ({i}, 'b{i}')", f"INSERT INTO db1.t VALUES ({i}, 'a{i}')"])
    server.execute(["UPDATE db1.t SET v = 'u' WHERE id = 1", "DELETE FROM db1.t WHERE id = 2",
                    "DELETE FROM db2.t WHERE id = 2", "INSERT INTO db2.t VALUES (7, 'tail')"])
    return server


@pytest.fixture(scope="module")
def endpoint(primary, tmp_path_factory):
    from dumpfilter.master.endpoint import MysqlEndpoint, ReplicaMap
    from dumpfilter.master.serve.grpc_server import create_server

    replicas = tmp_path_factory.mktemp("clients") / "replicas.toml"
    replicas.write_text(f'[[slaves]]\nname = "cdc"\nserver_id = 77\nuser = "cdc"\nflavor = "mariadb"\n{RULES}\n')
    master, _port = create_server(primary.binlog_dir, "127.0.0.1:0")
    mysql = MysqlEndpoint(master.service, "127.0.0.1:0", replicas=ReplicaMap.load(replicas))
    yield mysql
    mysql.stop()
    master.stop(grace=1.0)


def _reader(port: int, server_id: int, blocking: bool, user: str = "cdc", **mode) -> BinLogStreamReader:
    """Through the endpoint as `cdc`; straight from the primary as its root (no password on TCP)."""
    return BinLogStreamReader(connection_settings={"host": "127.0.0.1", "port": port, "user": user, "password": ""},
                              server_id=server_id, blocking=blocking, only_events=ROWS, **mode)


def _row(event, row) -> tuple:
    return (type(event).__name__, event.schema, event.table, json.dumps(row, sort_keys=True, default=str))


def _read(port: int, server_id: int = 77, user: str = "cdc", **mode) -> list[tuple]:
    """Every row change a non-blocking read gives (it ends at the binlog's end)."""
    stream = _reader(port, server_id, False, user, **mode)
    try:
        return [_row(event, row) for event in stream for row in event.rows]
    finally:
        stream.close()


def _read_blocking(port: int, primary, tag: str, **mode) -> list[tuple]:
    """A blocking read's rows up to a row the primary writes now, `tag` in db1 (after a db2 one):
    the client waits at the binlog's end for it, and nothing else comes between."""
    got: list[tuple] = []
    stream = _reader(port, 77, True, **mode)

    def read() -> None:
        try:
            for event in stream:
                for row in event.rows:
                    got.append(_row(event, row))
                if any(tag in r[3] for r in got):
                    return
        except Exception as exc:  # the test reports it: the rows stop coming
            got.append(("error", repr(exc)))

    thread = threading.Thread(target=read, daemon=True)
    thread.start()
    try:
        assert wait_for(lambda: got, give_up=60), "nothing read before the primary wrote again"
        primary.execute(["INSERT INTO db2.t (id, v) SELECT MAX(id) + 1, 'not-kept' FROM db2.t",
                         f"INSERT INTO db1.t (id, v) SELECT MAX(id) + 1, '{tag}' FROM db1.t"])
        assert wait_for(lambda: not thread.is_alive(), give_up=60), got
    finally:
        stream.close()
    return got


def _kept(rows: list[tuple]) -> list[tuple]:
    return [r for r in rows if r[1] == "db1"]


NON_BLOCK_END = "ended: a non-blocking dump (BINLOG_DUMP_NON_BLOCK) reached the end of the binlog"


def _logged_end(caplog) -> bool:
    """The endpoint logs a connection's end after its last packet, so the client may exit first."""
    return wait_for(lambda: NON_BLOCK_END in caplog.text, give_up=30)


# -- python-mysql-replication --------------------------------------------------------------------

MODES = {
    "mariadb": {"is_mariadb": True},  # COM_BINLOG_DUMP, an empty file name, position 4
    "file": {"log_file": "FIRST", "log_pos": 4, "resume_stream": True},
    "mariadb-gtid": {"is_mariadb": True, "auto_position": "MIDDLE"},  # @slave_connect_state
}


def _mode(name: str, primary) -> dict:
    mode = dict(MODES[name])
    if mode.get("log_file") == "FIRST":
        mode["log_file"] = primary.binlog_files()[0].name
    if mode.get("auto_position") == "MIDDLE":
        mode["auto_position"] = primary.gtid_middle
    return mode


@pytest.mark.mariadb
@pytest.mark.parametrize("mode", sorted(MODES))
def test_python_mysql_replication_reads_the_kept_rows(primary, endpoint, mode, caplog):
    caplog.set_level(logging.INFO, logger="dumpfilter.master.mysql")
    straight = _read(primary.port, user="root", **_mode(mode, primary))
    through = _read(endpoint.port, **_mode(mode, primary))
    assert _kept(straight) and len(_kept(straight)) < len(straight)
    assert through == _kept(straight), (mode, through)
    assert all('"id"' in r[3] for r in through)  # column names, not UNKNOWN_COL0
    assert _logged_end(caplog)


@pytest.mark.mariadb
@pytest.mark.parametrize("mode", sorted(MODES))
def test_python_mysql_replication_blocking_follows_the_primary(primary, endpoint, mode):
    tag = f"live-{mode}"
    through = _read_blocking(endpoint.port, primary, tag, **_mode(mode, primary))
    straight = _read(primary.port, user="root", **_mode(mode, primary))
    assert tag in through[-1][3]
    assert through == _kept(straight), through


@pytest.mark.mariadb
def test_the_tail_gtid_list_reads_and_records_for_replicas_alone(primary, endpoint):
    """The skipped tail's Gtid_list, sent at the binlog's end, carries FLAG_IGN_GTIDS (the GTIDs a
    replica's SQL thread records) only to a client that registered as a replica: read as a
    count, the flag made python-mysql-replication fail (`Expected=4. Actual=0`)."""
    from pymysqlreplication.event import MariadbGtidListEvent

    primary.execute("INSERT INTO db2.t (id, v) SELECT MAX(id) + 1, 'tail' FROM db2.t")  # the binlog ends skipped
    stream = BinLogStreamReader(connection_settings={"host": "127.0.0.1", "port": endpoint.port, "user": "cdc",
                                                     "password": ""}, server_id=77, blocking=False,
                                log_file=primary.binlog_files()[0].name, log_pos=4, resume_stream=True,
                                only_events=[MariadbGtidListEvent])
    try:
        lists = [event.gtid_list for event in stream]
    finally:
        stream.close()
    assert lists and all(len(listed) < 16 for listed in lists)


# -- python-mysql-replication on a MySQL binlog ----------------------------------------------------

MYSQL_FILES = ["rust-us-mysql-cdc-rs/binlog.000693", "rust-us-mysql-cdc-rs/binlog.000733"]  # one MySQL 8.0.31


def test_python_mysql_replication_mysql_mode_on_a_mysql_binlog(shared_fixtures, tmp_path, caplog):
    from dumpfilter.master.endpoint import MysqlEndpoint, ReplicaMap
    from dumpfilter.master.serve.grpc_server import create_server

    caplog.set_level(logging.INFO, logger="dumpfilter.master.mysql")
    served = tmp_path / "binlogs"
    served.mkdir()
    names = [path.rsplit("/", 1)[1] for path in MYSQL_FILES]
    for path, name in zip(MYSQL_FILES, names):
        shutil.copyfile(shared_fixtures / path, served / name)
    (served / "binlog.index").write_text("".join(f"./{n}\n" for n in names))
    (tmp_path / "replicas.toml").write_text('[[slaves]]\nname = "cdc"\nserver_id = 78\nflavor = "mysql"\n'
                                            'rules = ["replicate-wild-ignore-table=hdb_meta.table_usage"]\n')
    master, _port = create_server(served, "127.0.0.1:0")
    mysql = MysqlEndpoint(master.service, "127.0.0.1:0", replicas=ReplicaMap.load(tmp_path / "replicas.toml"))
    try:
        mode = {"log_file": names[0], "log_pos": 4, "resume_stream": True}
        every = _read(mysql.port, server_id=79, **mode)      # no rules: the files' rows
        kept = _read(mysql.port, server_id=78, **mode)
        ended = wait_for(lambda: caplog.text.count(NON_BLOCK_END) == 2, give_up=30)  # logged before the stop
    finally:
        mysql.stop()
        master.stop(grace=1.0)
    tables = {(r[1], r[2]) for r in every}
    assert ("hdb_meta", "table_usage") in tables and ("test", "LINEITEM") in tables
    assert kept == [r for r in every if (r[1], r[2]) != ("hdb_meta", "table_usage")]
    assert ended, caplog.text


# -- mariadb-binlog ------------------------------------------------------------------------------

def _client() -> str:
    client = shutil.which("mariadb-binlog")
    if client is None:
        skip_or_fail("mariadb-binlog is not installed (make system-deps)")
    return client


def _binlog_rows(text: str) -> list[str]:
    """The row changes of `mariadb-binlog -v` output, each its `### ` lines joined."""
    rows: list[list[str]] = []
    for line in text.splitlines():
        if line.startswith(("### INSERT INTO", "### UPDATE", "### DELETE FROM")):
            rows.append([line])
        elif line.startswith("### ") and rows:
            rows[-1].append(line)
    return ["\n".join(r) for r in rows]


def _binlog_args(port: int, first: str, user: str = "cdc") -> list[str]:
    return [_client(), "--read-from-remote-server", "--host=127.0.0.1", f"--port={port}", f"--user={user}",
            "-v", "--base64-output=DECODE-ROWS", first]


@pytest.mark.mariadb
def test_mariadb_binlog_one_shot_reads_the_kept_rows(primary, endpoint):
    first = primary.binlog_files()[0].name
    straight = subprocess.run(_binlog_args(primary.port, first, "root") + ["--to-last-log"], capture_output=True, text=True,
                              timeout=60)
    through = subprocess.run(_binlog_args(endpoint.port, first) + ["--to-last-log"], capture_output=True, text=True,
                             timeout=60)
    assert straight.returncode == 0, straight.stderr
    assert through.returncode == 0, through.stderr
    kept = [r for r in _binlog_rows(straight.stdout) if "`db1`." in r.splitlines()[0]]
    assert kept and len(kept) < len(_binlog_rows(straight.stdout))
    assert _binlog_rows(through.stdout) == kept
    assert not endpoint.service.slaves.get(0) and all(sid == 77 for sid in endpoint.service.slaves)


@pytest.mark.mariadb
def test_mariadb_binlog_stop_never_follows_the_primary(primary, endpoint, tmp_path):
    first = primary.binlog_files()[0].name
    out = tmp_path / "through.txt"
    with open(out, "w") as sink:
        reader = subprocess.Popen(_binlog_args(endpoint.port, first) + ["--stop-never", "--stop-never-slave-server-id=77"],
                                  stdout=sink, stderr=subprocess.STDOUT, text=True)
    try:
        assert wait_for(lambda: "`db1`" in out.read_text() or reader.poll() is not None, give_up=60)
        primary.execute(["INSERT INTO db2.t (id, v) SELECT MAX(id) + 1, 'not-kept' FROM db2.t",
                         "INSERT INTO db1.t (id, v) SELECT MAX(id) + 1, 'stop-never' FROM db1.t"])
        assert wait_for(lambda: "'stop-never'" in out.read_text() or reader.poll() is not None, give_up=60)
        assert reader.poll() is None, out.read_text()[-2000:]  # it waits for more, as from a primary
    finally:
        reader.kill()
        reader.wait(10)
    straight = subprocess.run(_binlog_args(primary.port, first, "root") + ["--to-last-log"], capture_output=True, text=True,
                              timeout=60)
    kept = [r for r in _binlog_rows(straight.stdout) if "`db1`." in r.splitlines()[0]]
    assert _binlog_rows(out.read_text()) == kept


# -- a Rust client: the `mysql` crate's binlog stream ----------------------------------------------

RUST_CLIENT = Path(__file__).resolve().parents[1] / "clients" / "rust-binlog"


@pytest.fixture(scope="module")
def rust_client() -> Path:
    """tests/clients/rust-binlog built with cargo (its crates from crates.io on a first build)."""
    cargo = shutil.which("cargo") or shutil.which(str(Path.home() / ".cargo" / "bin" / "cargo"))
    if cargo is None:
        skip_or_fail("cargo is not installed: the Rust binlog client (tests/clients/rust-binlog) cannot be built")
    built = subprocess.run([cargo, "build", "--quiet", "--manifest-path", str(RUST_CLIENT / "Cargo.toml")],
                           capture_output=True, text=True, timeout=1500)
    assert built.returncode == 0, built.stderr[-3000:]
    return RUST_CLIENT / "target" / "debug" / "rust-binlog"


@pytest.mark.mariadb
@pytest.mark.timeout(1800)  # a first build downloads and compiles the crates
def test_a_rust_binlog_client_reads_the_kept_rows(primary, endpoint, rust_client, caplog):
    caplog.set_level(logging.INFO, logger="dumpfilter.master.mysql")
    first = primary.binlog_files()[0].name

    def rows(port: int, user: str) -> list[str]:
        run = subprocess.run([str(rust_client), "127.0.0.1", str(port), user, "77", first, "4"], capture_output=True,
                             text=True, timeout=60)
        assert run.returncode == 0, run.stderr
        return run.stdout.splitlines()

    straight = rows(primary.port, "root")
    through = rows(endpoint.port, "cdc")
    kept = [line for line in straight if line.split()[1].startswith("db1.")]
    assert kept and len(kept) < len(straight)
    assert through == kept
    assert _logged_end(caplog)
