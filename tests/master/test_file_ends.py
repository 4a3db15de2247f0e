"""Whatever ends a binlog file (a Rotate, a Stop, nothing at all: a crash or kill -9), the stream
enters the next file with a Rotate to it, before any heartbeat, placeholder or kept event of
that file (issue #61), as a server's dump thread does whenever it opens a file. A real replica's
IO thread takes its master file from Rotates alone and refuses a heartbeat naming another file
(error 1623, "heartbeat is not compatible with local info"): without the Rotate, rules that skip
the first transactions of the next file stopped every real replica behind --mysql-listen.

Here the gRPC stream is read as a replica counts it, and real MariaDB replicas under each skip
policy, in GTID and file/position mode, follow a primary whose files end each way while they
stream; their data and positions equal a real replica's that filters for itself."""

from __future__ import annotations

import grpc
import pytest

from dumpfilter.codec import EventType, read_events
from dumpfilter.codec.constants import LOG_EVENT_ARTIFICIAL_F
from dumpfilter.codec.reader import batch_events
from dumpfilter.v1 import dump_pb2, dump_pb2_grpc
from dumpfilter.rules.ruleset import RuleSet

from tests.master.test_dump_stream import expected_units
from tests.support.dump_helpers import relay_units, run_slave
from tests.support.file_ends import series_with_every_end

POLICIES = ("heartbeat", "placeholder", "empty-transaction")


def _dump(address, server_id: int, rules: str, policy: str) -> list:
    """Every batch of a Dump call from the first file to the end of the binlog."""
    with grpc.insecure_channel(address) as channel:
        stub = dump_pb2_grpc.DumpFilterStub(channel)
        stub.Register(dump_pb2.RegisterRequest(
            server_id=server_id, skip_policy=dump_pb2.SkipPolicy.Value("SKIP_POLICY_" + policy.upper().replace("-", "_")),
            filters=[dump_pb2.ChannelFilters(change_replication_filter=rules)]), timeout=30)
        batches = []
        for batch in stub.Dump(dump_pb2.DumpRequest(server_id=server_id, heartbeat_period=3600), timeout=60):
            batches.append(batch)
            if batch.caught_up:
                break
        return batches


@pytest.mark.grpc
@pytest.mark.timeout(180)
@pytest.mark.parametrize("policy", POLICIES)
def test_every_later_file_begins_with_a_rotate_to_it(workload_dir, master_factory, tmp_path, policy):
    names, ends = series_with_every_end(workload_dir, tmp_path / "binlog")
    master, address = master_factory(tmp_path / "binlog")
    rules = "CHANGE REPLICATION FILTER REPLICATE_DO_DB = (db1)"
    batches = _dump(address, 21, rules, policy)
    fmt = read_events((tmp_path / "binlog" / names[0]).read_bytes(), names[0])[0].fmt
    current = names[0]  # the file a replica's IO thread counts itself in (Master_Log_File)
    entered = [names[0]]
    heartbeats_after_a_crash = 0
    for batch in batches:
        for event in batch_events(batch.events, fmt):
            kind = event.type_code
            if kind == EventType.ROTATE:
                pos, current = event.rotate
                assert pos == 4
                entered.append(current)
            elif kind == EventType.HEARTBEAT:
                assert event.heartbeat[0] == current, "a heartbeat names a file no Rotate has named"
                heartbeats_after_a_crash += ends.get(names[names.index(current) - 1]) == "nothing"
            elif kind == EventType.FORMAT_DESCRIPTION and event.log_pos:
                assert current == entered[-1]
        # The position the slave persists is in the file the replica counts itself in.
        assert batch.position.file == current
    assert entered == names  # every file entered once, in order
    artificial = [e for b in batches for e in batch_events(b.events, fmt)
                  if e.type_code == EventType.ROTATE and e.flags & LOG_EVENT_ARTIFICIAL_F]
    assert len(artificial) == sum(how != "rotate" for how in ends.values())
    if policy == "heartbeat":
        # The case that broke real replicas: a skipped stretch at the start of a file a crash began.
        assert heartbeats_after_a_crash
    stats = master.service.slaves[21].stats
    assert stats.bytes_sent == (stats.kept_bytes + stats.heartbeat_bytes + stats.placeholder_bytes
                                + stats.empty_transaction_bytes)


@pytest.mark.grpc
@pytest.mark.timeout(180)
@pytest.mark.parametrize("policy", POLICIES)
def test_a_slave_relays_a_series_whatever_ends_its_files(workload_dir, master_factory, tmp_path, policy):
    series_with_every_end(workload_dir, tmp_path / "binlog")
    _, address = master_factory(tmp_path / "binlog")
    rules = RuleSet(do_db=("db1",))
    slave = run_slave(address, tmp_path / "relay", 22, rules=rules, skip_policy=policy, relay_log_size=300_000)
    assert slave.counters.check_disagreements == 0
    assert relay_units(tmp_path / "relay") == expected_units(tmp_path / "binlog", rules, policy)


# -- real replicas ---------------------------------------------------------------------------------

SEED = ("CREATE DATABASE kept; CREATE DATABASE gone; CREATE TABLE kept.t (i INT PRIMARY KEY); "
        "CREATE TABLE gone.t (i INT PRIMARY KEY);")
REPLICAS = {81: ("heartbeat", True), 82: ("heartbeat", False), 83: ("placeholder", True),
            84: ("placeholder", False), 85: ("empty-transaction", True), 86: ("empty-transaction", False)}
POSITIONS = ("Master_Log_File", "Read_Master_Log_Pos", "Relay_Master_Log_File", "Exec_Master_Log_Pos")


def _writes(primary, first: int, *, skipped_first: bool = True) -> None:
    """Transactions the rules skip, then kept ones, then skipped ones: a new file opens with a
    skipped stretch."""
    gone = [f"INSERT INTO gone.t VALUES ({first + k})" for k in range(6)]
    kept = [f"INSERT INTO kept.t VALUES ({first + k})" for k in range(3)]
    update = f"UPDATE kept.t SET i = i + 1000 WHERE i = {first}"
    if skipped_first:
        primary.execute(gone[:4], db="gone")  # (a statement's default database decides under STATEMENT)
    primary.execute(kept + [update], db="kept")
    primary.execute(gone[4:], db="gone")


@pytest.mark.mariadb
@pytest.mark.timeout(400)
@pytest.mark.parametrize("binlog_format", ["ROW", "STATEMENT"])
def test_real_replicas_follow_a_primary_whose_files_end_every_way(mariadb_factory, tmp_path, binlog_format):
    from dumpfilter.lab.sandbox import diff_snapshots, make_replica, replica_status, snapshot, wait_caught_up
    from dumpfilter.lab.verify.against_replicas import _run_script
    from dumpfilter.lab.verify.against_replicas import split_statements
    from dumpfilter.master.serve.grpc_server import create_server
    from dumpfilter.master.endpoint import MysqlEndpoint, ReplicaMap

    from tests.support.mysql_replicas import point_at, wait_applied

    rules = ["replicate-ignore-db=gone"] if binlog_format == "STATEMENT" else ["replicate-wild-ignore-table=gone.%"]
    tag = binlog_format.lower()
    primary = mariadb_factory(f"ends-primary-{tag}", binlog_format=binlog_format,
                              options=["--innodb-flush-log-at-trx-commit=1", "--sync-binlog=1"])
    truth = mariadb_factory(f"ends-truth-{tag}", log_bin=False, options=["--" + r for r in rules])
    replicas = {sid: mariadb_factory(f"ends-real-{sid}-{tag}", server_id=sid, log_bin=False) for sid in REPLICAS}
    for server in (primary, truth, *replicas.values()):
        _run_script(server, split_statements(SEED), log_bin=False, what="seed")
    make_replica(primary, truth)
    lines = []
    for sid, (policy, _gtid) in REPLICAS.items():
        quoted = ", ".join(f'"{r}"' for r in rules)
        lines += ["[[slaves]]", f'name = "r{sid}"', f"server_id = {sid}", 'flavor = "mariadb"',
                  f'skip_policy = "{policy}"', f"rules = [{quoted}]", ""]
    (tmp_path / "replicas.toml").write_text("\n".join(lines))
    first_file = primary.binlog_files()[0].name
    master, _port = create_server(primary.binlog_dir, "127.0.0.1:0")
    endpoint = MysqlEndpoint(master.service, "127.0.0.1:0", replicas=ReplicaMap.load(tmp_path / "replicas.toml"))
    try:
        for sid, replica in replicas.items():
            point_at(replica, endpoint.port, gtid=REPLICAS[sid][1], log_file=first_file)
        _writes(primary, 100, skipped_first=False)
        primary.flush_logs()                    # the file ends with a Rotate
        _writes(primary, 200)
        primary.restart()                       # with a Stop (a clean shutdown)
        _writes(primary, 300)
        primary.restart(crash=True)             # with nothing: kill -9
        _writes(primary, 400)
        assert len(primary.binlog_files()) >= 4
        status = wait_caught_up(primary, truth, timeout=90)
        assert status.caught_up, status.describe()
        expected, truth_at = snapshot(truth), {k: replica_status(truth)[k] for k in POSITIONS}
        assert truth_at["Master_Log_File"] == primary.master_position()[0]
        for sid, replica in replicas.items():
            state = wait_applied(replica, service=master.service, server_id=sid, timeout=90)
            print(f"{binlog_format} server_id {sid} {REPLICAS[sid]}: "
                  + ", ".join(f"{k} {state[k]}" for k in (*POSITIONS, "Last_IO_Errno", "Last_SQL_Errno", "Gtid_IO_Pos")))
            assert diff_snapshots(expected, snapshot(replica)) == [], sid
            assert {k: state[k] for k in POSITIONS} == truth_at, f"server_id {sid} {REPLICAS[sid]}"
    finally:
        endpoint.stop()
        master.stop(grace=1.0)
