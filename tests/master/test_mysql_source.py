"""`master serve --source`: the master replicates a live MariaDB primary into a local binlog series
(the primary's names and offsets, a valid .index, a new file at each rotation) and serves real
replicas from it while the primary writes. Two real replicas and one dumpfilter slave with
different rules match references that filter for themselves, through a FLUSH LOGS and a kill -9
and restart of the primary; the
series is byte for byte the primary's binlog (but for the in-use flag the dump thread clears)."""

from __future__ import annotations

import threading
import time

import pytest

from dumpfilter.lab.sandbox import (diff_snapshots, find_binary, make_replica, replica_status, snapshot,
                                    wait_caught_up)
from dumpfilter.master.serve.grpc_server import create_server
from dumpfilter.rules.ruleset import RuleSet, Settings
from dumpfilter.master.endpoint import MysqlEndpoint, ReplicaMap
from dumpfilter.master.upstream.binlog_mirror import BinlogMirror, MirrorError
from dumpfilter.master.upstream.source import SourceReplicator, SourceURL, _file_for_gtid

from tests.support.dump_helpers import run_slave
from tests.support.mysql_replicas import converge, point_at, wait_applied
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.mariadb, pytest.mark.timeout(300)]

RULES = {71: ["replicate-ignore-db=s2"], 72: ["replicate-do-db=s2", "replicate-do-db=s3"]}
# Real replicas behind --mysql-listen: server_id -> (its rules' reference, skip policy, GTID mode). Each
# rule set under every skip policy, GTID and file/position mode (issue #61: after the kill -9 the
# series' file ends without a Rotate, and the next file begins with transactions rules skip).
REPLICAS = {71: (71, "heartbeat", True), 72: (72, "heartbeat", False), 74: (71, "placeholder", False),
            75: (72, "placeholder", True), 76: (71, "empty-transaction", True), 77: (72, "empty-transaction", False)}
POSITIONS = ("Master_Log_File", "Read_Master_Log_Pos", "Relay_Master_Log_File", "Exec_Master_Log_Pos")
GRPC_RULES = ["replicate-wild-ignore-table=s3.%"]  # dumpfilter's own slave (server_id 73)


def _restart(server) -> None:
    """kill -9 a sandbox server and start it again on the same datadir and port."""
    server._proc.kill()
    server._proc.wait(10)
    server._launch(find_binary("mariadbd"))
    server._wait_ready()


def _same_series(local, primary, names) -> None:
    """The local series is the primary's binlog, file for file and byte for byte, but for
    LOG_EVENT_BINLOG_IN_USE_F (FDE flags, byte 21), which the dump thread clears as it sends."""
    assert BinlogMirror(local).files() == names
    assert (local / f"{names[0].rsplit('.', 1)[0]}.index").read_text().split() == [f"./{n}" for n in names]
    for name in names:
        ours, theirs = bytearray((local / name).read_bytes()), bytearray((primary.binlog_dir / name).read_bytes())
        ours[21] &= ~1
        theirs[21] &= ~1
        assert ours == theirs, name


def test_source_primary_to_real_replicas(mariadb_factory, tmp_path):
    # durable commits: the primary is killed with -9 below (the sandbox's defaults trade them for speed)
    primary = mariadb_factory("primary-source", options=["--innodb-flush-log-at-trx-commit=1", "--sync-binlog=1"])
    references = {sid: mariadb_factory(f"reference-{sid}", log_bin=False, options=["--" + r for r in rules])
                  for sid, rules in RULES.items()}
    real = {sid: mariadb_factory(f"real-{sid}", server_id=sid, log_bin=False) for sid in REPLICAS}
    references[73] = mariadb_factory("reference-73", log_bin=False, options=["--" + r for r in GRPC_RULES])
    target = mariadb_factory("target-73", log_bin=False)
    primary.execute([f"CREATE DATABASE s{i}" for i in (1, 2, 3)])
    for i in (1, 2, 3):
        primary.execute(["CREATE TABLE t (id INT PRIMARY KEY, v INT)"], db=f"s{i}")
    for reference in references.values():
        make_replica(primary, reference)
    topology = tmp_path / "replicas.toml"
    topology.write_text("".join(f'[[slaves]]\nname = "r{sid}"\nserver_id = {sid}\nflavor = "mariadb"\n'
                                f'skip_policy = "{policy}"\n' + f"rules = {RULES[of]!r}\n\n".replace("'", '"')
                                for sid, (of, policy, _gtid) in REPLICAS.items()))
    local = tmp_path / "series"
    url = SourceURL.parse(f"mysql://{primary.repl_user}:{primary.repl_password}@127.0.0.1:{primary.port}")
    replicator = SourceReplicator(url, BinlogMirror(local))
    replicator.start()
    assert replicator.wait_ready(30), replicator.last_error
    master, grpc_port = create_server(local, "127.0.0.1:0")
    endpoint = MysqlEndpoint(master.service, "127.0.0.1:0", replicas=ReplicaMap.load(topology))
    stop, written = threading.Event(), []

    def writer():
        i, conn = 0, None
        while not stop.is_set():
            try:
                conn = conn or primary.connect()
                with conn.cursor() as cur:
                    cur.execute(f"INSERT INTO s{1 + (i + 1) % 3}.t VALUES ({i + 1}, {i + 1})")
                i += 1
                written.append(i)
            except Exception:  # the primary is down for a moment: go on with the next id (the
                conn = None      # failed one may have committed before the connection died)
                i += 1
                time.sleep(0.2)

    thread = threading.Thread(target=writer)
    try:
        for sid, (_of, _policy, gtid) in REPLICAS.items():
            point_at(real[sid], endpoint.port, gtid=gtid, log_file=replicator.mirror.files()[0])
        thread.start()

        def more_written(n: int) -> bool:  # the writer's progress: states, not seconds
            at = len(written)
            return wait_for(lambda: len(written) >= at + n)
        assert more_written(20)     # streaming while the primary writes
        primary.flush_logs()
        assert more_written(20)     # into the next file
        _restart(primary)           # the source goes away mid-stream and comes back
        assert wait_for(lambda: replicator.reconnects >= 1), replicator.last_error
        assert more_written(20)     # and writes again
        stop.set()
        thread.join()
        for reference in references.values():
            assert wait_caught_up(primary, reference, timeout=60).caught_up
        for sid, (of, policy, gtid) in REPLICAS.items():
            assert converge(references[of], real[sid]) == [], f"server_id {sid} ({policy}, GTID {gtid})"
        # ... and stand where a replica filtering for itself stands (the primary's file and offsets)
        deadline = time.monotonic() + 30
        while replicator.mirror.safe != primary.master_position() and time.monotonic() < deadline:
            time.sleep(0.2)
        for sid, (of, policy, gtid) in REPLICAS.items():
            state = wait_applied(real[sid], service=master.service, server_id=sid, timeout=60)
            truth = replica_status(references[of])
            print(f"server_id {sid} ({policy}, {'GTID' if gtid else 'file/position'}): "
                  + ", ".join(f"{k} {state[k]}" for k in (*POSITIONS, "Slave_IO_Running", "Slave_SQL_Running",
                                                          "Last_IO_Errno", "Last_SQL_Errno", "Gtid_IO_Pos")))
            assert {k: state[k] for k in POSITIONS} == {k: truth[k] for k in POSITIONS}, f"server_id {sid}"
        # dumpfilter's own slave, from the same series, applying its relay log to `target`
        deadline = time.monotonic() + 30
        while replicator.mirror.safe != primary.master_position() and time.monotonic() < deadline:
            time.sleep(0.2)
        run_slave(f"127.0.0.1:{grpc_port}", tmp_path / "relay73", 73, rules=RuleSet(wild_ignore_table=("s3.%",)),
                  settings=Settings(flavor="mariadb"), apply_url=f"mysql://root@127.0.0.1:{target.port}")
        assert diff_snapshots(snapshot(references[73]), snapshot(target)) == []
        # The series is the primary's binlog, file for file, byte for byte (what was written so far).
        deadline = time.monotonic() + 30
        while replicator.mirror.safe != primary.master_position() and time.monotonic() < deadline:
            time.sleep(0.2)
        names = [p.name for p in primary.binlog_files()]
        _same_series(local, primary, names)

        # A restarted dumpfilter master continues its series after its last complete transaction.
        replicator.stop()
        primary.execute([f"INSERT INTO t VALUES ({i}, 0)" for i in range(100_000, 100_020)], db="s1")
        replicator = SourceReplicator(url, BinlogMirror(local))
        assert replicator.mirror.resume_position() is not None
        replicator.start()
        deadline = time.monotonic() + 30
        while replicator.mirror.safe != primary.master_position() and time.monotonic() < deadline:
            time.sleep(0.2)
        _same_series(local, primary, [p.name for p in primary.binlog_files()])

        # --source-gtid: the newest primary file whose starting GTID position the state covers
        names = [p.name for p in primary.binlog_files()]
        conn = primary.connect()
        with conn.cursor() as cur:
            cur.execute("SELECT BINLOG_GTID_POS(%s, 4)", (names[-1],))
            at_last = cur.fetchone()[0]
            assert _file_for_gtid(cur, names, at_last) == names[-1]
            assert _file_for_gtid(cur, names, "") == names[0]
            with pytest.raises(MirrorError, match="MariaDB GTID position"):
                _file_for_gtid(cur, names, "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5")
        conn.close()
    finally:
        stop.set()
        if thread.is_alive():
            thread.join()
        endpoint.stop()
        master.stop(grace=1.0)
        replicator.stop()
