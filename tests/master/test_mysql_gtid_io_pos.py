"""What a real MariaDB replica's GTID positions say behind the master (docs/operating.md,
"Provisioning a replica"). Under the `heartbeat` skip policy skipped transactions reach it as
heartbeats, which carry no GTID: its IO thread's Gtid_IO_Pos stays at the last transaction it was
sent. Once its stream is caught up past a skipped tail, the endpoint sends the Gtid_list MariaDB's
own dump thread sends (FLAG_IGN_GTIDS: the skip policy's replica_tail), and the SQL thread records
those GTIDs: gtid_slave_pos is the primary's. Under `empty-transaction` both are the primary's."""

from __future__ import annotations

import pytest

from dumpfilter.master.endpoint import MysqlEndpoint, ReplicaMap
from dumpfilter.master.serve.grpc_server import create_server
from tests.support.mysql_replicas import point_at, wait_applied

pytestmark = [pytest.mark.mariadb, pytest.mark.timeout(240)]


def test_gtid_io_pos_stays_at_the_last_kept_transaction_under_heartbeat(mariadb_factory, tmp_path):
    primary = mariadb_factory("primary-iopos")
    heartbeat = mariadb_factory("hb-iopos", server_id=51, log_bin=False)
    empty = mariadb_factory("empty-iopos", server_id=52, log_bin=False)
    topology = tmp_path / "replicas.toml"
    topology.write_text("".join(f'[[slaves]]\nname = "{name}"\nserver_id = {sid}\nflavor = "mariadb"\n'
                                f'skip_policy = "{policy}"\nrules = ["replicate-do-db=kept"]\n\n'
                                for name, sid, policy in (("hb", 51, "heartbeat"), ("empty", 52, "empty-transaction"))))
    primary.execute(["CREATE DATABASE kept", "CREATE DATABASE other"])
    for db in ("kept", "other"):  # under USE: do-db judges DDL by the default database
        primary.execute(["CREATE TABLE t (id INT PRIMARY KEY)"], db=db)
    master, _port = create_server(primary.binlog_dir, "127.0.0.1:0")
    endpoint = MysqlEndpoint(master.service, "127.0.0.1:0", replicas=ReplicaMap.load(topology))
    try:
        for replica in (heartbeat, empty):
            point_at(replica, endpoint.port, gtid=True)
        primary.execute(["INSERT INTO kept.t VALUES (1)"])
        last_kept = primary.query("SELECT @@gtid_binlog_pos AS p")[0]["p"]
        primary.execute([f"INSERT INTO other.t VALUES ({i})" for i in range(1, 6)])
        primary_pos = primary.query("SELECT @@gtid_binlog_pos AS p")[0]["p"]
        assert primary_pos != last_kept
        states = {sid: wait_applied(r, service=master.service, server_id=sid) for sid, r in ((51, heartbeat),
                                                                                              (52, empty))}
        # Both read to the primary's end (the heartbeat carries the position) ...
        end = primary.master_position()
        for state in states.values():
            assert (state["Master_Log_File"], int(state["Read_Master_Log_Pos"])) == end
        # ... and both have the primary's GTID position, not the last kept transaction's.
        # Under heartbeat the IO thread's Gtid_IO_Pos stays at the last transaction it was sent;
        # the SQL thread's gtid_slave_pos takes the caught-up Gtid_list's ignored GTIDs.
        assert states[51]["Gtid_IO_Pos"] == last_kept
        assert heartbeat.query("SELECT @@gtid_slave_pos AS p")[0]["p"] == primary_pos
        # Empty transactions carry every GTID: both are the primary's.
        assert states[52]["Gtid_IO_Pos"] == primary_pos
        assert empty.query("SELECT @@gtid_slave_pos AS p")[0]["p"] == primary_pos
    finally:
        endpoint.stop()
        master.stop(grace=1.0)
