"""`dumpfilter slave status` as SHOW SLAVE STATUS: thread state, positions, the errors that stopped
the slave (with MySQL's numbers and the real message), counters summed over restarts, and the
summary line `slave run` prints when it ends. Real master on loopback; real MariaDB for --apply."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dumpfilter.cli.app import main
from dumpfilter.rules.ruleset import RuleSet
from tests.support import SimulatedCrash
from dumpfilter.slave.status import status_fields
from tests.support.dump_helpers import run_slave

pytestmark = pytest.mark.grpc
ROOT = Path(__file__).resolve().parents[2]


def test_status_after_a_run_shows_positions_rules_and_stopped_threads(binlog_copy, master_factory, tmp_path,
                                                                      capsys):
    _, address = master_factory(binlog_copy)
    relay = tmp_path / "r"
    code = main(["slave", "run", "--master", address, "--server-id", "4", "--relay-log-dir", str(relay),
                 "--replicate_do_db", "db1", "--replicate-wild-ignore-table", "db1.t2%", "--until-caught-up"])
    assert code == 0
    err = capsys.readouterr().err
    fields = status_fields(relay)
    summary = [line for line in err.splitlines() if line.startswith("dumpfilter slave:")]
    assert len(summary) == 1
    assert f"stopped at {fields['Master_Log_File']}:{fields['Read_Master_Log_Pos']}" in summary[0]
    assert f"{fields['Events_Received']} events, {fields['Bytes_Received']} bytes received" in summary[0]
    # The stream's own seconds, on the slave's clock, last (this run caught up).
    assert re.search(r"; caught up [0-9]+\.[0-9]{3} s after its first dump request$", summary[0]), summary[0]
    assert fields["Slave_IO_Running"] == "No" and fields["Slave_SQL_Running"] == "No"
    assert fields["Seconds_Behind_Master"] == "NULL" and fields["Slave_IO_State"] == ""
    assert fields["Replicate_Do_DB"] == "db1" and fields["Replicate_Wild_Ignore_Table"] == "db1.t2%"
    assert fields["Master_Log_File"] == sorted(p.name for p in binlog_copy.glob("*.0*"))[-1]
    assert fields["Relay_Log_Space"] == sum(p.stat().st_size for p in relay.glob("relay-bin.0*"))
    assert fields["Last_IO_Errno"] == 0 and fields["Last_SQL_Errno"] == 0
    assert fields["Gtid_IO_Pos"]
    # When the relay bytes recorded last were found on disk, in performance_schema's form.
    queued = fields["Last_Queued_Transaction_End_Queue_Timestamp"]
    assert queued != "0000-00-00 00:00:00.000000" and re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{6}", queued)
    # the CLI prints the same fields, \G style
    assert main(["slave", "status", "--relay-log-dir", str(relay)]) == 0
    out = capsys.readouterr().out
    assert "Slave_IO_Running: No" in out and "Replicate_Do_DB: db1" in out


def test_counters_survive_a_restart(workload_dir, master_factory, tmp_path):
    _, address = master_factory(workload_dir, batch_bytes=256 << 10)  # the crash comes after a committed batch
    whole = run_slave(address, tmp_path / "whole", 10, rules=RuleSet(ignore_db=("db2",)))
    relay = tmp_path / "restarted"

    def crash(units):
        if units >= whole.units_written * 2 // 3:
            raise SimulatedCrash

    with pytest.raises(SimulatedCrash):
        run_slave(address, relay, 11, after_unit=crash, rules=RuleSet(ignore_db=("db2",)))
    first = status_fields(relay)
    assert 0 < first["Events_Relayed"] < whole.counters.events_relayed
    second = run_slave(address, relay, 11, rules=RuleSet(ignore_db=("db2",)))
    fields = status_fields(relay)
    assert second.counters.events_relayed < fields["Events_Relayed"]  # this run alone is not the total
    assert fields["Events_Relayed"] == whole.counters.events_relayed
    assert fields["Bytes_Relayed"] == whole.counters.bytes_relayed


def test_running_slave_shows_yes_and_a_sigterm_records_the_stop(binlog_copy, master_factory, tmp_path, capsys):
    _, address = master_factory(binlog_copy)
    relay = tmp_path / "r"
    proc = subprocess.Popen([sys.executable, "-m", "dumpfilter", "slave", "run", "--master", address,
                             "--server-id", "12", "--relay-log-dir", str(relay), "--replicate-do-db", "db1"],
                            cwd=ROOT, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 30
        fields = {}
        while time.monotonic() < deadline:
            if (relay / "relay-log.info").exists():
                fields = status_fields(relay)
                if fields["Slave_IO_State"] == "Waiting for master to send event":
                    break
            time.sleep(0.1)
        assert fields["Slave_IO_Running"] == "Yes", fields
        assert fields["Seconds_Behind_Master"] == 0
        # a live change on the master: the slave's status says where it took effect
        assert main(["master", "change-filter", "--master", address, "--server-id", "12", "--json",
                     "CHANGE REPLICATION FILTER REPLICATE_DO_DB = (db2)"]) == 0
        at = json.loads(capsys.readouterr().out)["effective_at"]
        while time.monotonic() < deadline and not status_fields(relay)["Filters_Changed_On_Master_At"]:
            time.sleep(0.1)
        assert status_fields(relay)["Filters_Changed_On_Master_At"] == f"{at['file']}:{at['pos']}"
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 143  # SIGTERM ends it as Ctrl-C does, with SIGTERM's status
    assert err.count("dumpfilter slave: server_id 12 stopped at") == 1
    assert "Traceback" not in err
    fields = status_fields(relay)
    assert fields["Slave_IO_Running"] == "No" and fields["Seconds_Behind_Master"] == "NULL"


def test_a_dead_slave_process_is_not_running(binlog_copy, master_factory, tmp_path):
    """kill -9 leaves io_running recorded: the pid says the threads are gone."""
    _, address = master_factory(binlog_copy)
    relay = tmp_path / "r"
    proc = subprocess.Popen([sys.executable, "-m", "dumpfilter", "slave", "run", "--master", address,
                             "--server-id", "13", "--relay-log-dir", str(relay)], cwd=ROOT,
                            stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not (
            (relay / "relay-log.info").exists() and status_fields(relay)["Slave_IO_Running"] == "Yes"):
        time.sleep(0.1)
    assert status_fields(relay)["Slave_IO_Running"] == "Yes"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(10)
    assert status_fields(relay)["Slave_IO_Running"] == "No"


def test_master_error_is_recorded_as_last_io_error(binlog_copy, master_factory, tmp_path, capsys):
    master, address = master_factory(binlog_copy)
    relay = tmp_path / "r"
    run_slave(address, relay, 14)
    for name in sorted(p.name for p in binlog_copy.glob("*.0*")):  # purge everything: the saved position is gone
        (binlog_copy / name).unlink()
    (binlog_copy / next(binlog_copy.glob("*.index")).name).write_text("")
    code = main(["slave", "run", "--master", address, "--server-id", "14", "--relay-log-dir", str(relay),
                 "--until-caught-up"])
    err = capsys.readouterr().err
    assert code == 2
    error_line = [line for line in err.splitlines() if line.startswith("dumpfilter: error:")]
    assert len(error_line) == 1
    fields = status_fields(relay)
    assert fields["Last_IO_Errno"] == 1236
    assert fields["Last_IO_Error"] and fields["Last_IO_Error"] in error_line[0]
    assert fields["Last_IO_Error_Timestamp"]
    assert fields["Slave_IO_Running"] == "No"


@pytest.mark.mariadb
@pytest.mark.timeout(180)
def test_apply_failure_is_recorded_with_the_servers_message(mariadb_factory, master_factory, tmp_path, capsys):
    primary = mariadb_factory("status-primary")
    primary.execute(["SET sql_log_bin=0", "CREATE DATABASE s1", "SET sql_log_bin=1",
                     "CREATE TABLE s1.t1 (id INT PRIMARY KEY)", "INSERT INTO s1.t1 VALUES (1), (2)"])
    target = mariadb_factory("status-target")
    # The target already has the table: the relayed CREATE TABLE fails there, as on a replica.
    target.execute(["CREATE DATABASE s1", "CREATE TABLE s1.t1 (id INT PRIMARY KEY)"])
    _, address = master_factory(primary.binlog_dir)
    relay = tmp_path / "r"
    code = main(["slave", "run", "--master", address, "--server-id", "15", "--relay-log-dir", str(relay),
                 "--until-caught-up", "--apply", f"mysql://root@127.0.0.1:{target.port}"])
    err = capsys.readouterr().err
    assert code == 2
    (error_line,) = [line for line in err.splitlines() if line.startswith("dumpfilter: error:")]
    assert "already exists" in error_line  # the server's own message, not an empty one
    fields = status_fields(relay)
    assert fields["Last_SQL_Errno"] == 1050  # ER_TABLE_EXISTS_ERROR
    assert "already exists" in fields["Last_SQL_Error"] and fields["Last_SQL_Error_Timestamp"]
    assert fields["Last_Errno"] == 1050
    assert fields["Slave_SQL_Running"] == "No" and fields["Slave_IO_Running"] == "No"
    assert fields["Last_IO_Errno"] == 0
    assert fields["Apply_Target"] == f"mysql://root@127.0.0.1:{target.port}"
    # The table dropped on the target, the slave runs again: the relay log is applied from where
    # the failure left it, and the SQL error is cleared once it succeeds.
    target.execute(["DROP TABLE s1.t1"])
    assert main(["slave", "run", "--master", address, "--server-id", "15", "--relay-log-dir", str(relay),
                 "--until-caught-up", "--apply", f"mysql://root@127.0.0.1:{target.port}"]) == 0
    fields = status_fields(relay)
    assert fields["Last_SQL_Errno"] == 0 and fields["Last_SQL_Error"] == ""
    assert fields["Exec_Master_Log_Pos"] == fields["Read_Master_Log_Pos"]
    assert fields["Relay_Master_Log_File"] == fields["Master_Log_File"]
    assert fields["Gtid_Slave_Pos"] == fields["Gtid_IO_Pos"]
    assert target.query("SELECT COUNT(*) AS n FROM s1.t1")[0]["n"] == 2


def test_a_lost_master_shows_connecting_with_the_error(binlog_copy, master_factory, tmp_path):
    master, address = master_factory(binlog_copy)
    relay = tmp_path / "r"
    proc = subprocess.Popen([sys.executable, "-m", "dumpfilter", "slave", "run", "--master", address,
                             "--server-id", "16", "--relay-log-dir", str(relay)], cwd=ROOT,
                            stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not (
                (relay / "relay-log.info").exists() and status_fields(relay)["Slave_IO_Running"] == "Yes"):
            time.sleep(0.1)
        assert status_fields(relay)["Slave_IO_Running"] == "Yes"
        master.stop(grace=0.5)
        while time.monotonic() < deadline and status_fields(relay)["Slave_IO_Running"] != "Connecting":
            time.sleep(0.1)
        fields = status_fields(relay)
        assert fields["Slave_IO_Running"] == "Connecting" and fields["Slave_IO_State"] == "Connecting to master"
        assert fields["Last_IO_Errno"] == 2003 and "UNAVAILABLE" in fields["Last_IO_Error"]
        assert fields["Seconds_Behind_Master"] == "NULL"
    finally:
        proc.terminate()
        proc.wait(20)
