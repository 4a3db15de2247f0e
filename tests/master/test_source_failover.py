"""`master serve --source P --source D --source S` through a failover of its primary (issue #32 part
1), with real MariaDB servers: primary P, standby S (log_slave_updates), D a server whose binlog
never held P's transactions. P is killed with SIGKILL and S promoted: the master refuses D with one
line naming the series' last GTID, moves to S by GTID in a new file, and a real replica and a
`slave run` behind it end exactly as S; mariadb-binlog reads the whole series."""

from __future__ import annotations

import subprocess

import pytest

from dumpfilter.lab.sandbox import diff_snapshots, find_binary, make_replica, snapshot, wait_caught_up
from dumpfilter.master.upstream.binlog_mirror import BinlogMirror
from dumpfilter.rules.ruleset import Settings
from tests.support.dump_helpers import run_slave
from tests.support.master_command import free_port, master_status, serve_master, stop_master
from tests.support.mysql_replicas import converge, insert_rows, point_at
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.mariadb, pytest.mark.timeout(300)]


def test_the_series_follows_a_promoted_standby_and_refuses_a_diverged_candidate(mariadb_factory, tmp_path):
    durable = ["--innodb-flush-log-at-trx-commit=1", "--sync-binlog=1", "--log-slave-updates"]
    primary = mariadb_factory("p-failover", options=durable)
    standby = mariadb_factory("s-failover", options=durable)
    diverged = mariadb_factory("d-failover")
    replica = mariadb_factory("replica-failover", log_bin=False)
    target = mariadb_factory("target-failover", log_bin=False)
    diverged.execute(["CREATE DATABASE other"] + [f"CREATE TABLE other.t{i} (id INT)" for i in range(40)])
    # A GTID domain with transactions before the series only: the series' position must still
    # name it (from its first file's Gtid_list), or the new source would send them again.
    primary.execute(["SET SESSION gtid_domain_id = 5", "CREATE DATABASE d5"])
    for server in (replica, target):
        server.execute(["CREATE DATABASE d5"])
    primary.flush_logs()
    start = primary.master_position()[0]
    # the replica is provisioned at the series' start, every domain named (as a MariaDB replica must be)
    position = primary.query("SELECT @@gtid_binlog_pos AS p")[0]["p"]
    replica.execute([f"SET GLOBAL gtid_slave_pos = '{position}'"])
    primary.execute(["CREATE DATABASE s1", "CREATE TABLE s1.t (id INT PRIMARY KEY, v VARCHAR(3000))"])
    make_replica(primary, standby)
    local = tmp_path / "series"
    mysql_port = free_port()
    urls = [f"mysql://{s.repl_user}:{s.repl_password}@127.0.0.1:{s.port}" for s in (primary, diverged, standby)]
    proc, address = serve_master(local, *(arg for url in urls for arg in ("--source", url)), "--source-file", start,
                                 "--mysql-listen", f"127.0.0.1:{mysql_port}")
    try:
        point_at(replica, mysql_port, gtid=True)
        insert_rows(primary, 1, 50, 100)
        assert wait_caught_up(primary, standby, timeout=60).caught_up
        assert wait_for(lambda: (local / primary.master_position()[0]).exists() and
                        (local / primary.master_position()[0]).stat().st_size == primary.master_position()[1],
                        every=0.1)
        before = BinlogMirror(local).files()
        primary._proc.kill()  # SIGKILL
        primary._proc.wait(10)
        standby.execute(["STOP SLAVE", "RESET SLAVE ALL"])  # promoted
        insert_rows(standby, 1000, 50, 100)
        assert wait_for(lambda: "switches 1" in master_status(address), every=0.2), master_status(address)
        assert f"127.0.0.1:{standby.port}" in master_status(address)
        assert converge(standby, replica) == []
        run_slave(address, tmp_path / "relay", 31, settings=Settings(flavor="mariadb"),
                  apply_url=f"mysql://root@127.0.0.1:{target.port}")
        assert diff_snapshots(snapshot(standby), snapshot(target)) == []
        after = BinlogMirror(local).files()
        assert after[:len(before)] == before and len(after) > len(before)  # a new file at the switch
        decoded = subprocess.run([find_binary("mariadb-binlog"), *(str(local / n) for n in after)],
                                 capture_output=True, text=True, timeout=60)
        assert decoded.returncode == 0 and "ERROR" not in decoded.stderr, decoded.stderr
    finally:
        stderr = stop_master(proc)
    assert "Traceback" not in stderr, stderr
    refused = [line for line in stderr.splitlines() if " refused: " in line]
    assert len(refused) == 1 and f"127.0.0.1:{diverged.port}" in refused[0] and "GTID 0-" in refused[0], stderr
    assert stderr.count("source: now ") == 1, stderr

    # A restarted master continues the switched series by GTID (never at a source's file name and
    # offset, which no longer match its own), in a new file; the replica behind it follows.
    proc, address = serve_master(local, "--source", urls[2], "--mysql-listen", f"127.0.0.1:{mysql_port}")
    try:
        insert_rows(standby, 2000, 20, 100)
        assert converge(standby, replica) == []
        assert len(BinlogMirror(local).files()) == len(after) + 1
    finally:
        stderr = stop_master(proc)
    assert "Traceback" not in stderr and stderr.count("source: now ") == 1, stderr
