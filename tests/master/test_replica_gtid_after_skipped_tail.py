"""A real MariaDB replica behind --mysql-listen ends at the primary's GTID position whatever ends
the binlog after a transaction its rules skip (issue #58 goal 6): a Rotate (FLUSH BINARY LOGS), a
Stop (a clean restart) or nothing (kill -9), under every skip policy, in GTID and file/position
mode. Its @@gtid_slave_pos equals the primary's @@gtid_binlog_pos, as a replica filtering for
itself records a filtered transaction's GTID: before, it stayed at the last kept transaction for
good once the skipped one was followed by a Rotate (0-1-344762 against 0-1-344763), and a replica
repointed at the primary by slave_pos got that transaction again.

Each replica's IO thread is stopped while the primary writes, so that its stream reads the skipped
transaction and the file's end together (a stream caught up between them sent the skipped GTIDs at
once, and hid the fault)."""

from __future__ import annotations

import pytest

from tests.support.waiting import wait_for

SEED = "CREATE DATABASE kept; CREATE DATABASE gone; CREATE TABLE kept.t (i INT PRIMARY KEY); CREATE TABLE gone.t (i INT PRIMARY KEY);"
REPLICAS = {91: ("heartbeat", True), 92: ("heartbeat", False), 93: ("placeholder", True),
            94: ("placeholder", False), 95: ("empty-transaction", True), 96: ("empty-transaction", False)}


def _gtid(server, variable: str) -> str:
    return server.query(f"SELECT @@{variable} AS g")[0]["g"]


@pytest.mark.mariadb
@pytest.mark.timeout(600)
def test_a_replica_ends_at_the_primarys_gtid_whatever_ends_the_binlog(mariadb_factory, tmp_path):
    from dumpfilter.lab.sandbox import diff_snapshots, snapshot
    from dumpfilter.lab.verify.against_replicas import _run_script
    from dumpfilter.lab.verify.against_replicas import split_statements
    from dumpfilter.master.endpoint import MysqlEndpoint, ReplicaMap
    from dumpfilter.master.serve.grpc_server import create_server

    from tests.support.mysql_replicas import point_at, wait_applied

    primary = mariadb_factory("tail-primary", options=["--innodb-flush-log-at-trx-commit=1", "--sync-binlog=1"])
    replicas = {sid: mariadb_factory(f"tail-real-{sid}", server_id=sid, log_bin=False) for sid in REPLICAS}
    for server in (primary, *replicas.values()):
        _run_script(server, split_statements(SEED), log_bin=False, what="seed")
    lines = []
    for sid, (policy, _gtid_mode) in REPLICAS.items():
        lines += ["[[slaves]]", f'name = "r{sid}"', f"server_id = {sid}", 'flavor = "mariadb"',
                  f'skip_policy = "{policy}"', 'rules = ["replicate-do-db=kept"]', ""]
    (tmp_path / "replicas.toml").write_text("\n".join(lines))
    first_file = primary.binlog_files()[0].name
    master, _port = create_server(primary.binlog_dir, "127.0.0.1:0")
    endpoint = MysqlEndpoint(master.service, "127.0.0.1:0", replicas=ReplicaMap.load(tmp_path / "replicas.toml"))
    ends = {"rotate": primary.flush_logs, "stop": primary.restart, "nothing": lambda: primary.restart(crash=True)}
    try:
        for sid, replica in replicas.items():
            point_at(replica, endpoint.port, gtid=REPLICAS[sid][1], log_file=first_file)
        for k, (how, end) in enumerate(ends.items()):
            for sid, replica in replicas.items():
                wait_applied(replica, service=master.service, server_id=sid, timeout=90)
                replica.execute("STOP SLAVE IO_THREAD")
            primary.execute([f"INSERT INTO kept.t VALUES ({10 * k + 1})", f"INSERT INTO kept.t VALUES ({10 * k + 2})"],
                            db="kept")
            primary.execute(f"INSERT INTO gone.t VALUES ({10 * k + 3})", db="gone")  # the last: skipped
            end()
            expected = _gtid(primary, "gtid_binlog_pos")
            for replica in replicas.values():
                replica.execute("START SLAVE IO_THREAD")
            for sid, replica in replicas.items():
                wait_applied(replica, service=master.service, server_id=sid, timeout=90)
                wait_for(lambda: _gtid(replica, "gtid_slave_pos") == expected, give_up=30)
                assert _gtid(replica, "gtid_slave_pos") == expected, (how, sid, REPLICAS[sid])
                assert diff_snapshots(snapshot(primary, schemas=["kept"]), snapshot(replica, schemas=["kept"])) == []
    finally:
        endpoint.stop()
        master.stop(grace=1.0)
