"""`slave status` shows the filter in force after `master change-filter`, not the rules the slave
registered with: real `master serve`, `slave run`, `master change-filter` and `slave status` processes."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import grpc
import pytest

from dumpfilter.slave.status import status_fields
from dumpfilter.lab.ports import free_port

pytestmark = pytest.mark.grpc
ROOT = Path(__file__).resolve().parents[2]


def _cli(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "dumpfilter", *argv], cwd=ROOT, capture_output=True, text=True,
                          timeout=60)


def _wait_for(predicate, steps: int = 600) -> bool:
    for _ in range(steps):
        if predicate():
            return True
        time.sleep(0.1)
    return False


def test_slave_status_shows_the_filter_the_master_changed(workload_dir, tmp_path):
    port = free_port()
    address = f"127.0.0.1:{port}"
    relay = tmp_path / "relay"
    master = subprocess.Popen([sys.executable, "-m", "dumpfilter", "master", "serve", "--binlog-dir",
                               str(workload_dir), "--listen", address], cwd=ROOT, stderr=subprocess.PIPE, text=True)
    slave = None
    try:
        with grpc.insecure_channel(address) as channel:
            grpc.channel_ready_future(channel).result(timeout=30)
        slave = subprocess.Popen([sys.executable, "-m", "dumpfilter", "slave", "run", "--master", address,
                                  "--server-id", "12", "--relay-log-dir", str(relay), "--replicate-do-db", "db1",
                                  "--replicate-ignore-table", "db1.t9"],
                                 cwd=ROOT, stderr=subprocess.PIPE, text=True)
        assert _wait_for(lambda: (relay / "relay-log.info").exists()
                         and status_fields(relay)["Slave_IO_State"] == "Waiting for master to send event")
        assert status_fields(relay)["Replicate_Do_DB"] == "db1"
        change = _cli("master", "change-filter", "--master", address, "--server-id", "12", "--json",
                      "CHANGE REPLICATION FILTER REPLICATE_DO_DB = (db2, db3)")
        assert change.returncode == 0, change.stderr
        at = json.loads(change.stdout)["effective_at"]
        assert _wait_for(lambda: status_fields(relay)["Filters_Changed_On_Master_At"] == f"{at['file']}:{at['pos']}")
        assert _wait_for(lambda: status_fields(relay)["Replicate_Do_DB"] == "db2,db3"), status_fields(relay)
        status = _cli("slave", "status", "--relay-log-dir", str(relay))
        assert status.returncode == 0, status.stderr
        assert "Replicate_Do_DB: db2,db3" in status.stdout
        # a type the statement did not name keeps its rule (CHANGE REPLICATION FILTER semantics)
        assert "Replicate_Ignore_Table: db1.t9" in status.stdout
        slave.send_signal(signal.SIGTERM)
        assert slave.wait(timeout=20) == 143  # SIGTERM ends it as Ctrl-C does, with SIGTERM's status
        assert status_fields(relay)["Replicate_Do_DB"] == "db2,db3"  # the stop does not put the old rules back
    finally:
        for proc in (slave, master):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait()
    assert "Traceback" not in slave.stderr.read()
