"""A closed last binlog file under the heartbeat policy (issue #41, item 4): the primary shut down,
its last file ends with a Stop event, and the replica's rules skip the transactions before it. A
replica's IO thread never counts a Stop event (slave.cc queue_event), so a replica filtering for
itself ends where the Stop starts; a filter-free replica behind --mysql-listen with the same rules
registered must end there too, not at its last kept event."""

from __future__ import annotations

import pytest

from dumpfilter.codec import BinlogReader, EventType
from dumpfilter.lab.sandbox import diff_snapshots, make_replica, replica_status, snapshot, wait_caught_up
from dumpfilter.lab.verify.against_replicas import _run_script
from dumpfilter.lab.verify.against_replicas import split_statements
from dumpfilter.master.serve.grpc_server import create_server
from dumpfilter.master.endpoint import MysqlEndpoint, ReplicaMap

from tests.support.mysql_replicas import point_at, wait_applied

pytestmark = [pytest.mark.mariadb, pytest.mark.timeout(300)]

SEED = "CREATE DATABASE kept; CREATE DATABASE gone; CREATE TABLE kept.t (i INT); CREATE TABLE gone.t (i INT);"
WORKLOAD = ("INSERT INTO kept.t VALUES (1); INSERT INTO kept.t VALUES (2); "
            "INSERT INTO gone.t VALUES (1); INSERT INTO gone.t VALUES (2); INSERT INTO gone.t VALUES (3);")
REPLICAS = {71: ("heartbeat", False), 72: ("heartbeat", True), 73: ("placeholder", False),
            74: ("empty-transaction", False)}
POSITIONS = ("Master_Log_File", "Read_Master_Log_Pos", "Relay_Master_Log_File", "Exec_Master_Log_Pos")


@pytest.mark.parametrize("binlog_format", ["ROW", "STATEMENT"])
def test_a_stop_event_after_a_skipped_tail(mariadb_factory, tmp_path, binlog_format):
    rules = ["replicate-ignore-db=gone"] if binlog_format == "STATEMENT" else ["replicate-wild-ignore-table=gone.%"]
    primary = mariadb_factory(f"stop-primary-{binlog_format}", binlog_format=binlog_format)
    truth = mariadb_factory(f"stop-truth-{binlog_format}", log_bin=False, options=["--" + r for r in rules])
    replicas = {sid: mariadb_factory(f"stop-real-{sid}-{binlog_format}", server_id=sid, log_bin=False)
                for sid in REPLICAS}
    for server in (primary, truth, *replicas.values()):
        _run_script(server, split_statements(SEED), log_bin=False, what="seed")
    make_replica(primary, truth)
    _run_script(primary, split_statements("USE kept; " + WORKLOAD), log_bin=True, what="workload")
    status = wait_caught_up(primary, truth, timeout=60)
    assert status.caught_up, status.describe()
    last = primary.binlog_files()[-1]
    primary.stop(keep=True)  # a clean shutdown: the last file ends with a Stop event
    with open(last, "rb") as f:
        assert list(BinlogReader(f, str(last)))[-1].type_code == EventType.STOP
    expected, truth_at = snapshot(truth), {k: replica_status(truth)[k] for k in POSITIONS}
    lines = []
    for sid, (policy, _gtid) in REPLICAS.items():
        quoted = ", ".join(f'"{r}"' for r in rules)
        lines += ["[[slaves]]", f'name = "r{sid}"', f"server_id = {sid}", 'flavor = "mariadb"',
                  f'skip_policy = "{policy}"', f"rules = [{quoted}]", ""]
    (tmp_path / "replicas.toml").write_text("\n".join(lines))
    master, _port = create_server(primary.binlog_dir, "127.0.0.1:0")
    endpoint = MysqlEndpoint(master.service, "127.0.0.1:0", replicas=ReplicaMap.load(tmp_path / "replicas.toml"))
    try:
        for sid, replica in replicas.items():
            point_at(replica, endpoint.port, gtid=REPLICAS[sid][1], log_file=primary.binlog_files()[0].name)
        for sid, replica in replicas.items():
            state = wait_applied(replica, service=master.service, server_id=sid, timeout=90)
            assert diff_snapshots(expected, snapshot(replica)) == [], sid
            assert {k: state[k] for k in POSITIONS} == truth_at, f"server_id {sid} {REPLICAS[sid]}"
    finally:
        endpoint.stop()
        master.stop(grace=1.0)
