"""Issue #27 6.3: nothing outside a policy's allowed set reaches the identity, from a real MariaDB
primary's binlog through a real `master serve --policy` to a real `slave run` (and, under ROW, a
real MariaDB replica behind --mysql-listen): account statements under `USE shop` (passwords, and
they write `mysql.*`), a multi-table UPDATE's Annotate_rows naming a forbidden table, subqueries in
VALUES and ON DUPLICATE KEY UPDATE, SET STATEMENT, CTEs, CREATE ... SELECT, view / trigger /
procedure bodies, CREATE SERVER, LOAD DATA's file (Begin_load_query), user variables. Every
forbidden literal holds the marker `pw-`; allowed data holds `ok-` and must still arrive."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from dumpfilter.binlogs import TailingReader
from dumpfilter.codec import EventType
from dumpfilter.lab.sandbox import replica_status

from tests.support.mysql_replicas import point_at, serve_master, wait_applied
from dumpfilter.lab.ports import free_port

pytestmark = [pytest.mark.mariadb, pytest.mark.grpc, pytest.mark.timeout(300)]

ROOT = Path(__file__).resolve().parents[2]
USER, PASSWORD = "shopper", "s3cret-shopper"
POLICY = f'[slave.{USER}]\npassword = "{PASSWORD}"\nallow = ["shop.%"]\n'
MARKER = b"pw-"


def _workload(tmp_path: Path) -> list[str]:
    """Run under `USE shop` (the default database the rules would judge them by)."""
    secret_csv = tmp_path / "secret.csv"
    secret_csv.write_text("50\tpw-load-file\n51\tpw-load-file2\n")
    shop_csv = tmp_path / "shop.csv"
    shop_csv.write_text("60\tok-load\n")
    return [
        "INSERT INTO a VALUES (1, 'ok-1'), (2, 'ok-2')",
        "UPDATE a SET x = 'ok-upd' WHERE id = 1",
        # Account statements: plaintext passwords and a hash, writing mysql.* whatever the default db.
        "CREATE USER 'u1'@'%' IDENTIFIED BY 'pw-create'",
        "GRANT SELECT ON shop.* TO 'u1'@'%'",
        "GRANT SELECT ON shop.* TO 'u3'@'%' IDENTIFIED BY 'pw-grant'",
        "ALTER USER 'u1'@'%' IDENTIFIED BY 'pw-alter'",
        "SET PASSWORD FOR 'u1'@'%' = PASSWORD('pw-setpass')",
        "CREATE ROLE r1",
        "GRANT r1 TO 'u1'@'%'",
        "REVOKE r1 FROM 'u1'@'%'",
        "RENAME USER 'u1'@'%' TO 'u2'@'%'",
        "DROP USER 'u2'@'%'",
        "CREATE SERVER s1 FOREIGN DATA WRAPPER mysql OPTIONS (USER 'u', PASSWORD 'pw-server', HOST '127.0.0.1')",
        # A multi-table UPDATE: under ROW its annotation carries the forbidden table's literal.
        "UPDATE a JOIN secret.b ON a.id = b.id SET a.x = 'ok-multi', b.pw = 'pw-multi'",
        # Subqueries in VALUES and ON DUPLICATE KEY UPDATE (the values copied are not secret).
        "INSERT INTO a VALUES (5, (SELECT CONCAT('ok-', id) FROM secret.b WHERE pw = 'pw-probe' OR id = 1 LIMIT 1))",
        "INSERT INTO a VALUES (2, 'ok-dup') ON DUPLICATE KEY UPDATE x = "
        "(SELECT CONCAT('ok-', id) FROM secret.b WHERE pw <> 'pw-odku' LIMIT 1)",
        "SET STATEMENT max_statement_time = 100 FOR INSERT INTO secret.b VALUES (3, 'pw-setstmt')",
        "INSERT INTO a SELECT id + 100, 'ok-copy' FROM secret.b WHERE pw <> 'pw-insel'",
        "INSERT INTO a WITH c AS (SELECT id FROM secret.b WHERE pw <> 'pw-cte') SELECT id + 200, 'ok-cte' FROM c",
        "CREATE TABLE c AS SELECT id FROM secret.b WHERE pw <> 'pw-ctas'",
        "CREATE VIEW v AS SELECT pw FROM secret.b WHERE pw <> 'pw-view'",
        "CREATE TRIGGER tr AFTER INSERT ON a FOR EACH ROW INSERT INTO secret.b VALUES (NEW.id + 1000, 'pw-trigger')",
        "CREATE PROCEDURE p() INSERT INTO secret.b VALUES (77, 'pw-proc')",
        "INSERT INTO a VALUES (7, 'ok-7')",  # fires the trigger: its secret.b row must not follow
        f"LOAD DATA INFILE '{secret_csv}' INTO TABLE secret.b",
        f"LOAD DATA INFILE '{shop_csv}' INTO TABLE a",
        "SET @p = 'pw-uservar'",
        "INSERT INTO secret.b VALUES (9, @p)",
        "INSERT INTO a VALUES (8, 'ok-8')",
    ]


def _serve(binlog_dir: Path, policy: Path, grpc_port: int, mysql_port: int, log: Path) -> subprocess.Popen:
    return serve_master(binlog_dir, log, (grpc_port, mysql_port), "--listen", f"127.0.0.1:{grpc_port}",
                        "--mysql-listen", f"127.0.0.1:{mysql_port}", "--policy", str(policy), "--lint-max-mb", "0")


def _cli(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "dumpfilter", *argv], cwd=ROOT, capture_output=True, text=True,
                          timeout=120, env={**os.environ, "PYTHONPATH": str(ROOT)})


def _received(relay_dir: Path) -> tuple[list, list[str], set]:
    """(raw events, statement texts, Table_map (db, table)) of a slave's relay log."""
    raws, texts, tables = [], [], set()
    for _, event in TailingReader(relay_dir):
        if event.type_code == EventType.FORMAT_DESCRIPTION:
            continue
        raws.append(event.raw)
        if event.type_code == EventType.TABLE_MAP:
            tables.add(event.table_map[1:])
        elif event.sql:
            texts.append(event.sql)
    return raws, texts, tables


class Served:
    """One format's run: the primary, the master serving its binlog, what slave 71 received."""

    def __init__(self, binlog_format, primary, proc, master, mysql_port, relay):
        self.binlog_format, self.primary, self.proc = binlog_format, primary, proc
        self.master, self.mysql_port = master, mysql_port
        self.raws, self.texts, self.tables = _received(relay)
        status = _cli("master", "status", "--master", master, "--user", USER, "--password", PASSWORD,
                      "--server-id", "71", "--json")
        assert status.returncode == 0, status.stderr
        (row,) = json.loads(status.stdout)
        self.hits = row["Rule_hits"]

    def carrying(self, *literals: str) -> list:
        return [raw for raw in self.raws if any(literal.encode() in raw for literal in literals)]


@pytest.fixture(scope="module", params=["ROW", "STATEMENT", "MIXED"])
def served(request, mariadb_factory, tmp_path_factory):
    binlog_format = request.param
    tmp_path = tmp_path_factory.mktemp(f"leaks-{binlog_format}")
    primary = mariadb_factory(f"primary-leaks-{binlog_format}", binlog_format=binlog_format,
                              options=[f"--secure-file-priv={tmp_path}"])
    primary.execute(["CREATE DATABASE shop", "CREATE DATABASE secret",
                     "CREATE TABLE shop.a (id INT PRIMARY KEY, x VARCHAR(40))",
                     "CREATE TABLE secret.b (id INT PRIMARY KEY, pw VARCHAR(40))",
                     "INSERT INTO secret.b VALUES (1, 'pw-seed'), (2, 'pw-seed2')"])
    primary.execute(_workload(tmp_path), db="shop")
    policy = tmp_path / "policy.toml"
    policy.write_text(POLICY)
    grpc_port, mysql_port = free_port(), free_port()
    proc = _serve(primary.binlog_dir, policy, grpc_port, mysql_port, tmp_path / "master.log")
    try:
        master = f"127.0.0.1:{grpc_port}"
        relay = tmp_path / "relay"
        run = _cli("slave", "run", "--master", master, "--server-id", "71", "--relay-log-dir", str(relay),
                   "--until-caught-up", "--user", USER, "--password", PASSWORD, "--lint-wait", "0")
        assert run.returncode == 0, run.stderr
        yield Served(binlog_format, primary, proc, master, mysql_port, relay)
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_account_statements_do_not_reach_a_slave_allowed_only_shop(served):
    """CREATE/ALTER/RENAME/DROP USER, GRANT ... IDENTIFIED BY, SET PASSWORD (a hash in the binlog),
    roles, REVOKE and CREATE SERVER, all under `USE shop`: they write mysql.*, which the identity
    may not receive, whatever replicate-do-db=shop would make of them on a replica."""
    assert not served.carrying("pw-create", "pw-grant", "pw-alter", "pw-server")
    for text in served.texts:
        upper = text.upper()
        assert not any(word in upper for word in ("IDENTIFIED", "PASSWORD", " USER ", " ROLE ", "GRANT", "REVOKE",
                                                  "SERVER")), text
    assert served.hits.get("MASTER_POLICY", 0) > 0


def test_a_multi_table_updates_annotation_naming_a_forbidden_table_is_dropped(served):
    """Under ROW (and MIXED, which logs it in rows) the Annotate_rows of `UPDATE a JOIN secret.b
    ... SET b.pw = 'pw-multi'` is dropped, the shop.a rows it annotates still sent; an annotation
    naming only allowed tables is kept."""
    assert not served.carrying("pw-multi")
    if served.binlog_format == "STATEMENT":
        return  # the statement names secret.b: refused whole
    assert served.carrying("ok-multi")  # the shop.a row image
    assert "UPDATE a SET x = 'ok-upd' WHERE id = 1" in served.texts
    assert served.hits.get("MASTER_POLICY_ANNOTATION", 0) > 0, served.hits


def test_subqueries_in_values_and_on_duplicate_key_update_are_checked(served):
    assert not served.carrying("pw-probe", "pw-odku")
    assert not [t for t in served.texts if "SELECT" in t.upper()]


def test_the_rest_of_the_class_does_not_reach_a_slave(served):
    """SET STATEMENT, INSERT ... SELECT, CTEs, CREATE TABLE ... SELECT, view / trigger / procedure
    bodies, LOAD DATA's file (Begin_load_query), a user variable set for a forbidden statement,
    the rows a trigger writes to a forbidden table: nothing of them; the allowed data arrives."""
    assert not served.carrying("pw-")
    for text in served.texts:
        assert "SECRET" not in text.upper() and "MYSQL" not in text.upper(), text
    assert all(db == "shop" for db, _ in served.tables), served.tables
    assert (("shop", "a") in served.tables) == (served.binlog_format != "STATEMENT")
    assert served.carrying("ok-8") and served.carrying("ok-load")


@pytest.mark.parametrize("served", ["ROW"], indirect=True)  # statement runs refuse whole statements
def test_a_real_replica_of_the_identity_applies_the_allowed_rows(served, mariadb_factory):
    """A real MariaDB replica of the same identity behind --mysql-listen (ROW) applies every allowed
    row, the multi-table UPDATE's included, without the dropped annotations, and holds nothing else."""
    primary = served.primary
    replica = mariadb_factory("replica-leaks", server_id=72, log_bin=False)
    point_at(replica, served.mysql_port, gtid=True, user=USER, password=PASSWORD)
    wait_applied(replica, timeout=90)
    assert replica.query("SELECT id, x FROM shop.a ORDER BY id") == primary.query("SELECT id, x FROM shop.a ORDER BY id")
    assert replica.query("SHOW DATABASES LIKE 'secret'") == []
    assert replica.query("SELECT User FROM mysql.user WHERE User IN ('u1', 'u2', 'u3')") == []
    assert replica.query("SELECT * FROM mysql.servers") == []
    assert not replica_status(replica).get("Last_SQL_Errno")
    relay_logs = list(replica.datadir.glob("*relay-bin.0*"))
    assert relay_logs and not [path for path in relay_logs if MARKER in path.read_bytes()]
