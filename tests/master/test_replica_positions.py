"""Issue #27 item 5: real MariaDB replicas behind `master serve --mysql-listen` whose rules skip the
binlog's tail. Once caught up, each shows the master's end (Read_Master_Log_Pos,
Exec_Master_Log_Pos, Relay_Master_Log_File) and the gtid_slave_pos a replica filtering for itself
records, under every skip policy, by file/position and by GTID; a reconnect right after such a
skip resumes there (no 1236, nothing sent twice) and the data equal the reference's."""

from __future__ import annotations

import time

import pytest

from dumpfilter.lab.sandbox import diff_snapshots, make_replica, replica_status, snapshot
from dumpfilter.master.serve.grpc_server import create_server
from dumpfilter.master.endpoint import MysqlEndpoint, ReplicaMap

from tests.support.mysql_replicas import point_at, wait_applied

pytestmark = [pytest.mark.mariadb, pytest.mark.timeout(300)]

RULE = "replicate-wild-ignore-table=s2.%"
MATRIX = {  # server_id -> (skip policy, GTID start?)
    51: ("heartbeat", True), 52: ("heartbeat", False),
    53: ("placeholder", True), 54: ("placeholder", False),
    55: ("empty-transaction", True), 56: ("empty-transaction", False),
}


def _positions(server) -> dict:
    status = replica_status(server)
    return {"Master_Log_File": status.get("Master_Log_File"), "Read_Master_Log_Pos": status.get("Read_Master_Log_Pos"),
            "Relay_Master_Log_File": status.get("Relay_Master_Log_File"),
            "Exec_Master_Log_Pos": status.get("Exec_Master_Log_Pos"),
            "gtid_slave_pos": server.query("SELECT @@gtid_slave_pos AS p")[0]["p"],
            "errors": (status.get("Last_IO_Error"), status.get("Last_SQL_Error"))}


def _at_master_end(primary, reference, replicas, deadline_s: float = 60.0) -> None:
    """Wait (a bound, not a measure) until every replica shows what the reference shows: the
    primary's end, and the reference's gtid_slave_pos; then assert it."""
    file, pos = primary.master_position()
    expected = {"Master_Log_File": file, "Read_Master_Log_Pos": pos, "Relay_Master_Log_File": file,
                "Exec_Master_Log_Pos": pos, "gtid_slave_pos": primary.query("SELECT @@gtid_binlog_pos AS p")[0]["p"],
                "errors": ("", "")}
    deadline = time.monotonic() + deadline_s
    servers = {"reference": reference, **replicas}
    while True:
        seen = {name: _positions(server) for name, server in servers.items()}
        if all(s == expected for s in seen.values()) or time.monotonic() > deadline:
            break
        time.sleep(0.3)
    wrong = {f"{name} {MATRIX.get(name, '')}": s for name, s in seen.items() if s != expected}
    assert not wrong, f"expected {expected}, got:\n" + "\n".join(f"  {k}: {v}" for k, v in wrong.items())


def test_caught_up_replicas_show_the_masters_end_after_a_skipped_tail(mariadb_factory, tmp_path):
    primary = mariadb_factory("primary-tail")
    reference = mariadb_factory("reference-tail", log_bin=False, options=["--" + RULE])
    replicas = {sid: mariadb_factory(f"real-{sid}-tail", server_id=sid, log_bin=False) for sid in MATRIX}
    primary.execute(["CREATE DATABASE s1", "CREATE DATABASE s2"])
    primary.execute(["CREATE TABLE t (id INT PRIMARY KEY)", "INSERT INTO t VALUES (1)"], db="s1")
    primary.execute(["CREATE TABLE t (id INT PRIMARY KEY)"], db="s2")
    topology = tmp_path / "replicas.toml"
    topology.write_text("".join(f'[[slaves]]\nname = "real-{sid}"\nserver_id = {sid}\nflavor = "mariadb"\n'
                                f'skip_policy = "{policy}"\nrules = ["{RULE}"]\n\n'
                                for sid, (policy, _gtid) in MATRIX.items()))
    first = primary.binlog_files()[0].name
    make_replica(primary, reference)
    master, _port = create_server(primary.binlog_dir, "127.0.0.1:0")
    endpoint = MysqlEndpoint(master.service, "127.0.0.1:0", replicas=ReplicaMap.load(topology))
    try:
        for sid, replica in replicas.items():
            point_at(replica, endpoint.port, gtid=MATRIX[sid][1], log_file=first)
        for sid, replica in replicas.items():
            wait_applied(replica, service=master.service, server_id=sid)
        # The tail every replica's rules skip: rows, across a new binlog file, DDL (a standalone
        # GTID group), and last rows again (s2.t's Table_map is smaller than a placeholder's RAND).
        primary.execute(["INSERT INTO t VALUES (1)", "INSERT INTO t VALUES (2)"], db="s2")
        primary.flush_logs()
        primary.execute(["CREATE TABLE u (id INT PRIMARY KEY)", "INSERT INTO t VALUES (3)"], db="s2")
        _at_master_end(primary, reference, replicas)
        assert all(master.service.slaves[sid].stats.transactions_skipped > 0 for sid in MATRIX)

        # A reconnect right after the skip resumes at the end (file/position) or after the
        # skipped GTIDs (slave_pos): no position inside an event, nothing sent twice.
        for replica in replicas.values():
            replica.execute(["STOP SLAVE", "START SLAVE"])
        primary.execute(["INSERT INTO t VALUES (2)"], db="s1")
        primary.execute(["INSERT INTO t VALUES (4)"], db="s2")
        _at_master_end(primary, reference, replicas)
        expected = snapshot(reference)
        assert expected.table("s1", "t").row_count == 2 and not [t for s, t in expected.tables if s == "s2"]
        for sid, replica in replicas.items():
            differences = diff_snapshots(expected, snapshot(replica))
            assert differences == [], f"server_id {sid} {MATRIX[sid]}:\n" + "\n".join(differences)
    finally:
        endpoint.stop()
        master.stop(grace=1.0)
