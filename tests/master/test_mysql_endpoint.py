"""Real MariaDB replicas on dumpfilter's MySQL-protocol endpoint (master serve --mysql-listen): with
MASTER_USE_GTID=slave_pos and with file/position, under each skip policy, their data equals a
real replica that applied the same --replicate-* rules itself (the sharp-edge workload, under
ROW, STATEMENT and MIXED). The rules come from a topology file mapping server_ids; the replicas
are slaves of the shared DumpService (ListFilters, ChangeFilter, metrics)."""

from __future__ import annotations

import time

import pytest

from dumpfilter.rules.schema import SchemaModel
from dumpfilter.lab.sandbox import diff_snapshots, make_replica, snapshot, wait_caught_up
from dumpfilter.master.serve.grpc_server import create_server
from dumpfilter.master.serve.metrics import registry_for
from dumpfilter.master.endpoint import MysqlEndpoint, ReplicaMap
from dumpfilter.lab.verify import builtin_paths
from dumpfilter.lab.verify.against_replicas import _run_script
from dumpfilter.lab.verify.against_replicas import split_statements

from tests.support.mysql_replicas import point_at, wait_applied

pytestmark = [pytest.mark.mariadb, pytest.mark.timeout(300)]

# server_id -> (skip policy, GTID start?)
MATRIX = {
    31: ("heartbeat", True), 32: ("heartbeat", False),
    33: ("placeholder", True), 34: ("placeholder", False),
    35: ("empty-transaction", True), 36: ("empty-transaction", False),
}
RULES = {  # per binlog format: the rules of every replica of that run (and of its reference)
    "ROW": ["replicate-wild-ignore-table=b.%", "replicate-wild-ignore-table=c.t_1",
            "replicate-wild-ignore-table=%.tmp%"],
    "STATEMENT": ["replicate-do-db=a", "replicate-do-db=d_x"],
    "MIXED": ["replicate-ignore-db=b", "replicate-ignore-db=d_x"],
}
SUBSETS = {"ROW": tuple(MATRIX), "STATEMENT": (31, 34), "MIXED": (33, 36)}


def _workload() -> tuple[list, list, str]:
    _topology, workload, seed = builtin_paths()
    text = workload.read_text()
    part1 = text.split("\n-- Part 2:", 1)[0]  # part 2 stops replicas on purpose (tests/verify covers it)
    seed_text = seed.read_text()
    return split_statements(part1), split_statements(seed_text), seed_text


def _topology(tmp_path, rules: list[str], server_ids) -> str:
    lines = []
    for sid in server_ids:
        policy, _gtid = MATRIX[sid]
        quoted = ", ".join('"' + r.replace("\\", "\\\\") + '"' for r in rules)
        lines += ["[[slaves]]", f'name = "real-{sid}"', f"server_id = {sid}", 'flavor = "mariadb"',
                  f'skip_policy = "{policy}"', f"rules = [{quoted}]", ""]
    path = tmp_path / "replicas.toml"
    path.write_text("\n".join(lines))
    return str(path)


@pytest.mark.parametrize("binlog_format", ["ROW", "STATEMENT", "MIXED"])
def test_real_replicas_match_a_replica_filtering_itself(mariadb_factory, tmp_path, binlog_format):
    workload, seed, seed_text = _workload()
    rules = RULES[binlog_format]
    server_ids = SUBSETS[binlog_format]
    primary = mariadb_factory(f"primary-{binlog_format}", binlog_format=binlog_format)
    reference = mariadb_factory(f"reference-{binlog_format}", log_bin=False, options=["--" + r for r in rules])
    replicas = {sid: mariadb_factory(f"real-{sid}-{binlog_format}", server_id=sid, log_bin=False) for sid in server_ids}
    for server in (primary, reference, *replicas.values()):
        _run_script(server, seed, log_bin=False, what="seed")
    make_replica(primary, reference)
    master, _port = create_server(primary.binlog_dir, "127.0.0.1:0", schema=SchemaModel.from_sql(seed_text, "seed"))
    endpoint = MysqlEndpoint(master.service, "127.0.0.1:0",
                             replicas=ReplicaMap.load(_topology(tmp_path, rules, server_ids)))
    try:
        first_file = primary.binlog_files()[0].name
        for sid, replica in replicas.items():
            point_at(replica, endpoint.port, gtid=MATRIX[sid][1], log_file=first_file)
        _run_script(primary, workload, log_bin=True, what="workload")
        status = wait_caught_up(primary, reference, timeout=90)
        assert status.caught_up, status.describe()
        expected = snapshot(reference)
        assert sum(t.row_count for t in expected.tables.values()) > 0
        for sid, replica in replicas.items():
            state = wait_applied(replica, service=master.service, server_id=sid, timeout=90)
            assert state["Using_Gtid"] == ("Slave_Pos" if MATRIX[sid][1] else "No")
            differences = diff_snapshots(expected, snapshot(replica))
            assert differences == [], f"server_id {sid} {MATRIX[sid]}:\n" + "\n".join(differences)
        stats = {sid: master.service.slaves[sid].stats for sid in server_ids}
        # Each replica went through the filter (it skipped something) and got its policy's events.
        assert all(s.bytes_skipped > 0 for s in stats.values()), {k: (v.events_read, v.bytes_read, v.bytes_skipped, v.transactions_kept) for k, v in stats.items()}
        for sid in server_ids:
            policy = MATRIX[sid][0]
            if policy == "placeholder":
                assert stats[sid].placeholders > 0
            elif policy == "empty-transaction" and binlog_format == "ROW":
                assert stats[sid].empty_transactions > 0
            elif policy == "heartbeat":
                assert stats[sid].heartbeats > 0
    finally:
        endpoint.stop()
        master.stop(grace=1.0)


def test_real_replica_is_a_slave_like_any_other(mariadb_factory, tmp_path):
    """ListFilters and the metrics show a real replica's rules and counters; ChangeFilter on it
    takes effect on its running stream at a transaction boundary."""
    primary = mariadb_factory("primary-cf")
    replica = mariadb_factory("real-cf", server_id=41, log_bin=False)
    primary.execute(["CREATE DATABASE s1", "CREATE DATABASE s2"])
    for db in ("s1", "s2"):  # under USE: ignore-db judges DDL by the default database
        primary.execute(["CREATE TABLE t (id INT PRIMARY KEY)", "INSERT INTO t VALUES (1)"], db=db)
    topology = tmp_path / "replicas.toml"
    topology.write_text('[[slaves]]\nname = "reporting"\nserver_id = 41\nflavor = "mariadb"\n'
                        'rules = ["replicate-ignore-db=s2"]\n')
    master, _port = create_server(primary.binlog_dir, "127.0.0.1:0")
    endpoint = MysqlEndpoint(master.service, "127.0.0.1:0", replicas=ReplicaMap.load(topology))
    try:
        point_at(replica, endpoint.port, gtid=True)
        wait_applied(replica, service=master.service, server_id=41)
        assert replica.query("SHOW DATABASES LIKE 's2'") == []
        assert replica.query("SELECT id FROM s1.t") == [{"id": 1}]
        rows, _global = master.service.list_filters(41)
        assert {(r["FILTER_NAME"], r["FILTER_RULE"]) for r in rows} >= {("REPLICATE_IGNORE_DB", "s2")}
        assert next(r for r in rows if r["FILTER_NAME"] == "REPLICATE_IGNORE_DB")["COUNTER"] > 0
        metrics = registry_for(master.service)
        assert metrics.get_sample_value("dumpfilter_connected_slaves") == 1
        assert metrics.get_sample_value("dumpfilter_bytes_filtered_total", {"slave": "41"}) > 0

        # ChangeFilter: from now on s1 is ignored and s2 is not (s2's schema is made on the replica
        # by hand: its CREATE DATABASE was filtered before the change).
        replica.execute(["SET sql_log_bin=0", "CREATE DATABASE s2", "CREATE TABLE s2.t (id INT PRIMARY KEY)"])
        position, running, _effective = master.service.change_filter(
            41, "CHANGE REPLICATION FILTER REPLICATE_IGNORE_DB = (s1)", timeout=20)
        assert running and position is not None
        primary.execute(["INSERT INTO s1.t VALUES (2)", "INSERT INTO s2.t VALUES (2)"])
        wait_applied(replica, service=master.service, server_id=41)
        assert replica.query("SELECT id FROM s1.t ORDER BY id") == [{"id": 1}]
        assert replica.query("SELECT id FROM s2.t ORDER BY id") == [{"id": 2}]

        # The replica reconnects (STOP/START SLAVE): it keeps the changed rules and its counters.
        before = master.service.slaves[41].stats.events_read
        replica.execute(["STOP SLAVE", "START SLAVE"])
        primary.execute(["INSERT INTO s1.t VALUES (3)", "INSERT INTO s2.t VALUES (3)"])
        wait_applied(replica, service=master.service, server_id=41)
        assert replica.query("SELECT id FROM s2.t ORDER BY id") == [{"id": 2}, {"id": 3}]
        assert replica.query("SELECT id FROM s1.t ORDER BY id") == [{"id": 1}]
        assert master.service.slaves[41].stats.events_read > before
    finally:
        endpoint.stop()
        master.stop(grace=1.0)


def test_heartbeats_at_the_requested_period(mariadb_factory):
    primary = mariadb_factory("primary-hb")
    replica = mariadb_factory("real-hb", server_id=42, log_bin=False)
    primary.execute(["CREATE DATABASE s1"])
    master, _port = create_server(primary.binlog_dir, "127.0.0.1:0")
    periods = []
    stream = master.service.stream

    def recording_stream(*args, **kwargs):
        periods.append(kwargs.get("heartbeat_period"))
        return stream(*args, **kwargs)

    master.service.stream = recording_stream
    endpoint = MysqlEndpoint(master.service, "127.0.0.1:0")

    def received() -> int:
        return int(replica.query("SHOW STATUS LIKE 'Slave_received_heartbeats'")[0]["Value"])
    try:
        point_at(replica, endpoint.port, gtid=True, heartbeat=0.5)
        wait_applied(replica, service=master.service, server_id=42)
        assert periods == [0.5]  # the replica's MASTER_HEARTBEAT_PERIOD is the stream's
        before, took = master.service.slaves[42].stats.heartbeats, received()
        started = time.monotonic()
        deadline = started + 60  # a give-up: the wait is for four heartbeats, however long they take
        while received() - took < 4 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert received() - took >= 4  # sent while idle, and the replica took them (no heartbeat error)
        sent = master.service.slaves[42].stats.heartbeats - before
        # never more often than the period (a loaded machine only spaces them further apart)
        assert sent <= (time.monotonic() - started) / 0.5 + 2, sent  # not a speed bound
        assert replica.query("SHOW SLAVE STATUS")[0]["Slave_IO_Running"] == "Yes"
    finally:
        endpoint.stop()
        master.stop(grace=1.0)
