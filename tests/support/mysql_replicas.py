"""Helpers for the MySQL-endpoint tests: pointing a real MariaDB replica at dumpfilter's
--mysql-listen, and waiting until it has applied everything the master sent it."""

from __future__ import annotations

import subprocess
import time

from dumpfilter.lab.sandbox import MariaDBServer, diff_snapshots, replica_status, snapshot

IDLE_SQL_STATE = "Slave has read all relay log"


def point_at(replica: MariaDBServer, port: int, *, gtid: bool, user: str = "repl", password: str = "x",
             log_file: str = "", heartbeat: float | None = None, extra: str = "") -> None:
    """CHANGE MASTER TO dumpfilter's endpoint (GTID slave_pos, or file/position from `log_file`:4)
    and START SLAVE. MASTER_CONNECT_RETRY=1: a restarted master is found again within a second.
    `extra`: more CHANGE MASTER options (", MASTER_SSL=1, ...")."""
    start = "MASTER_USE_GTID=slave_pos" if gtid else \
        f"MASTER_LOG_FILE='{log_file}', MASTER_LOG_POS=4, MASTER_USE_GTID=no"
    period = f", MASTER_HEARTBEAT_PERIOD={heartbeat}" if heartbeat is not None else ""
    replica.execute(["STOP SLAVE", "RESET SLAVE ALL",
                     f"CHANGE MASTER TO MASTER_HOST='127.0.0.1', MASTER_PORT={port}, MASTER_USER='{user}', "
                     f"MASTER_PASSWORD='{password}', {start}, MASTER_CONNECT_RETRY=1{period}{extra}",
                     "START SLAVE"])


def _caught_up(service, server_id: int) -> bool:
    slave = service.slaves.get(server_id)
    if slave is None or slave.stream is None:
        return False
    rows = service.stats(server_id)
    return bool(rows) and rows[0][0].position is not None and rows[0][0].position == rows[0][1] and rows[0][2] == 0


def wait_applied(replica: MariaDBServer, *, service=None, server_id: int | None = None,
                 timeout: float = 60.0, errors_ok: bool = False) -> dict:
    """Wait until the replica's IO thread is connected, the master's stream for it (when `service`
    is given) reached the binlog end, and its SQL thread executed all it read, twice in a row
    0.3 s apart. Returns SHOW SLAVE STATUS; a thread stopped with an error fails the wait, or
    with `errors_ok` returns its status at once. Without `service` a replica whose dump request
    is not answered yet looks idle too: to wait for a refusal, use wait_io_error."""
    deadline = time.monotonic() + timeout
    stable = 0
    status: dict = {}
    while time.monotonic() < deadline:
        status = replica_status(replica)
        if status.get("Last_SQL_Errno") or (status.get("Slave_IO_Running") == "No" and status.get("Last_IO_Errno")):
            if errors_ok:
                return status
            raise AssertionError(f"{replica.name} stopped: SQL error {status.get('Last_SQL_Errno')} "
                                 f"{status.get('Last_SQL_Error')!r}; IO error {status.get('Last_IO_Errno')} "
                                 f"{status.get('Last_IO_Error')!r}\n{replica.error_log_tail(6)}")
        idle = (status.get("Slave_IO_Running") == "Yes" and status.get("Slave_SQL_Running") == "Yes"
                and status.get("Relay_Master_Log_File") == status.get("Master_Log_File")
                and status.get("Exec_Master_Log_Pos") == status.get("Read_Master_Log_Pos")
                and IDLE_SQL_STATE in str(status.get("Slave_SQL_Running_State") or ""))
        if idle and (service is None or _caught_up(service, server_id)):
            stable += 1
            if stable >= 2:
                return status
        else:
            stable = 0
        time.sleep(0.3)
    raise AssertionError(f"{replica.name} did not apply everything within {timeout}s: "
                         f"IO {status.get('Slave_IO_Running')} ({status.get('Last_IO_Error')}), "
                         f"SQL {status.get('Slave_SQL_Running')} ({status.get('Last_SQL_Error')}), "
                         f"read {status.get('Master_Log_File')}:{status.get('Read_Master_Log_Pos')}, "
                         f"executed {status.get('Relay_Master_Log_File')}:{status.get('Exec_Master_Log_Pos')}")


def wait_io_error(replica: MariaDBServer, *, timeout: float = 60.0) -> dict:
    """Wait until the replica's IO thread has stopped with an error; returns SHOW SLAVE STATUS.
    The IO thread reports "Yes" / "Waiting for master to send event" as soon as it has *sent*
    COM_BINLOG_DUMP (slave.cc sets MYSQL_SLAVE_RUN_READING before its first read_event), so
    until the master's ERR packet arrives a refused replica looks exactly like an idle one:
    only the error itself ends this wait. `timeout` only gives up; it asserts nothing on speed."""
    deadline = time.monotonic() + timeout
    status: dict = {}
    while time.monotonic() < deadline:
        status = replica_status(replica)
        if status.get("Slave_IO_Running") == "No" and status.get("Last_IO_Errno"):
            return status
        time.sleep(0.1)
    raise AssertionError(f"{replica.name}: no IO error within {timeout}s: IO {status.get('Slave_IO_Running')} "
                         f"({status.get('Slave_IO_State')!r}), read {status.get('Master_Log_File')}:"
                         f"{status.get('Read_Master_Log_Pos')}\n{replica.error_log_tail(6)}")


def insert_rows(primary: MariaDBServer, first: int, rows: int, size: int) -> None:
    """Rows first.. into s1.t (id INT PRIMARY KEY, v VARCHAR), each with a value of `size` bytes:
    a known amount of binlog on a live primary."""
    conn = primary.connect()
    with conn.cursor() as cur:
        for i in range(first, first + rows):
            cur.execute("INSERT INTO s1.t VALUES (%s, %s)", (i, "x" * size))
    conn.close()


def converge(expected_server, replica, timeout: float = 90.0) -> list[str]:
    """Wait until `replica` holds what `expected_server` holds (no SQL error on the way); the
    differences left at the deadline, [] when equal."""
    expected = snapshot(expected_server)
    deadline = time.monotonic() + timeout
    while True:
        status = replica_status(replica)
        assert not status.get("Last_SQL_Errno"), status.get("Last_SQL_Error")
        differences = diff_snapshots(expected, snapshot(replica))
        if not differences or time.monotonic() > deadline:
            return differences
        time.sleep(0.5)


def serve_master(binlog_dir, log, ports, *options: str) -> subprocess.Popen:
    """`dumpfilter master serve --binlog-dir DIR OPTIONS...` as a process (stderr appended to
    `log`), returned once every port of `ports` accepts connections."""
    import os
    import socket
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    cmd = [sys.executable, "-m", "dumpfilter", "master", "serve", "--binlog-dir", str(binlog_dir), *options]
    proc = subprocess.Popen(cmd, cwd=root, stdout=subprocess.DEVNULL, stderr=open(log, "ab"),
                            env={**os.environ, "PYTHONPATH": str(root)})
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            for port in ports:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return proc
        except OSError:
            if proc.poll() is not None:
                raise AssertionError(f"master exited with {proc.returncode}:\n{log.read_text()}") from None
            time.sleep(0.1)
    proc.kill()
    raise AssertionError(f"master did not listen on {ports}:\n{log.read_text()}")
