"""kill -9 of `dumpfilter master serve --mysql-listen` while real replicas stream from it, then a
restart on the same port: the replicas reconnect by themselves (MASTER_CONNECT_RETRY) and resume
where they were, GTID and file/position alike; nothing is lost or applied twice (every row has a
primary key: a second apply stops the replica with a duplicate-key error)."""

from __future__ import annotations

import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

from dumpfilter.lab.sandbox import make_replica, replica_status, wait_caught_up

from tests.support.mysql_replicas import converge, point_at, serve_master
from tests.support.waiting import wait_for
from dumpfilter.lab.ports import free_port

pytestmark = [pytest.mark.mariadb, pytest.mark.timeout(300)]


def _serve(binlog_dir, port: int, replicas: Path, log: Path) -> subprocess.Popen:
    return serve_master(binlog_dir, log, (port,), "--listen", "127.0.0.1:0", "--mysql-listen", f"127.0.0.1:{port}",
                        "--replicas", str(replicas))


def test_replicas_reconnect_after_kill_9_and_restart(mariadb_factory, tmp_path):
    primary = mariadb_factory("primary-restart")
    reference = mariadb_factory("reference-restart", log_bin=False, options=["--replicate-ignore-db=s2"])
    real = {61: mariadb_factory("real-61", server_id=61, log_bin=False),   # GTID
            62: mariadb_factory("real-62", server_id=62, log_bin=False)}   # file/position
    primary.execute(["CREATE DATABASE s1", "CREATE DATABASE s2"])
    for db in ("s1", "s2"):
        primary.execute(["CREATE TABLE t (id INT PRIMARY KEY, v INT)"], db=db)
    make_replica(primary, reference)
    replicas = tmp_path / "replicas.toml"
    replicas.write_text("".join(f'[[slaves]]\nname = "r{sid}"\nserver_id = {sid}\nflavor = "mariadb"\n'
                                f'rules = ["replicate-ignore-db=s2"]\nskip_policy = "{policy}"\n\n'
                                for sid, policy in ((61, "heartbeat"), (62, "empty-transaction"))))
    port, log = free_port(), tmp_path / "master.log"
    proc = _serve(primary.binlog_dir, port, replicas, log)
    stop = threading.Event()
    written = []

    def writer():
        conn = primary.connect()
        with conn.cursor() as cur:
            i = 0
            while not stop.is_set():
                i += 1
                cur.execute(f"INSERT INTO s{1 + i % 2}.t VALUES ({i}, {i})")  # one transaction each
                written.append(i)
                time.sleep(0.005)
        conn.close()

    thread = threading.Thread(target=writer)
    try:
        point_at(real[61], port, gtid=True)
        point_at(real[62], port, gtid=False, log_file=primary.binlog_files()[0].name)
        thread.start()

        def more_written(n: int) -> bool:  # the writer's progress: states, not seconds
            at = len(written)
            return wait_for(lambda: len(written) >= at + n)
        assert more_written(20)           # the replicas stream while the primary writes
        proc.send_signal(signal.SIGKILL)  # mid-stream, while the primary writes
        proc.wait(10)
        assert wait_for(lambda: all(replica_status(r)["Slave_IO_Running"] == "Connecting" for r in real.values()))
        assert more_written(10)           # the IO threads noticed and are retrying; the primary writes on
        primary.flush_logs()              # a rotation while the master is down
        assert more_written(10)
        proc = _serve(primary.binlog_dir, port, replicas, log)
        assert more_written(20)           # and after the restart
        stop.set()
        thread.join()
        assert len(written) > 50
        assert wait_caught_up(primary, reference, timeout=60).caught_up
        for sid, replica in real.items():
            status = replica_status(replica)
            assert converge(reference, replica) == [], (f"server_id {sid}: IO {status.get('Slave_IO_Running')} "
                                                         f"{status.get('Last_IO_Error')}; read {status.get('Master_Log_File')}:"
                                                         f"{status.get('Read_Master_Log_Pos')}\n{replica.error_log_tail(8)}"
                                                         f"\n{log.read_text()[-3000:]}")
            status = replica_status(replica)
            assert status["Slave_IO_Running"] == "Yes" and status["Slave_SQL_Running"] == "Yes"
            assert int(replica.query("SELECT COUNT(*) AS n FROM s1.t")[0]["n"]) == sum(1 for i in written if i % 2 == 0)
        assert "Traceback" not in log.read_text()
    finally:
        stop.set()
        if thread.is_alive():
            thread.join()
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
