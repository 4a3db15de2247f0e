"""Classic (file/position) replication between two sandbox servers, and waiting on it."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dumpfilter.codec import Event, EventType, read_events
from dumpfilter.errors import DumpFilterError

from .server import MariaDBServer, SandboxError


class ReplicationTimeout(SandboxError, TimeoutError):
    """wait_caught_up ran out of time; `.status` is the last status seen."""

    def __init__(self, message: str, status: ReplicaStatus) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class ReplicaStatus:
    """What wait_caught_up saw last. Positions are in the primary's binlog coordinates."""

    caught_up: bool
    sql_running: str  # Slave_SQL_Running: Yes / No
    io_running: str  # Slave_IO_Running: Yes / No / Connecting
    last_sql_errno: int
    last_sql_error: str
    last_io_errno: int
    last_io_error: str
    relay_master_log_file: str  # primary binlog holding the last executed event group
    exec_master_log_pos: int  # ... and the position the SQL thread executed up to
    read_master_log_file: str
    read_master_log_pos: int
    primary_file: str  # primary's SHOW MASTER STATUS when the status was taken
    primary_pos: int
    raw: dict[str, Any] = field(repr=False, compare=False)

    @property
    def stopped_with_error(self) -> bool:
        return stopped_on_error(self.raw)

    def describe(self) -> str:
        if self.caught_up:
            return f"caught up at {self.primary_file}:{self.primary_pos}"
        parts = [
            f"SQL thread {self.sql_running}, IO thread {self.io_running}",
            f"executed up to {self.relay_master_log_file}:{self.exec_master_log_pos}",
            f"read up to {self.read_master_log_file}:{self.read_master_log_pos}",
            f"primary at {self.primary_file}:{self.primary_pos}",
        ]
        if self.last_sql_errno:
            parts.append(f"SQL error {self.last_sql_errno}: {self.last_sql_error}")
        if self.last_io_errno:
            parts.append(f"IO error {self.last_io_errno}: {self.last_io_error}")
        return "; ".join(parts)


def replica_status(server: MariaDBServer) -> dict[str, Any]:
    """SHOW SLAVE STATUS as a dict ({} when the server is not a replica)."""
    rows = server.query("SHOW SLAVE STATUS")
    return dict(rows[0]) if rows else {}


def make_replica(primary: MariaDBServer, replica: MariaDBServer) -> None:
    """Point `replica` at `primary` (file/position, no GTID) and START SLAVE.

    Replication starts at the primary's first binlog, so the replica
    receives everything the primary ever logged.
    """
    if not primary.log_bin:
        raise SandboxError(f"primary {primary.name} runs without --log-bin")
    if primary.server_id == replica.server_id:
        raise SandboxError("primary and replica must have different server_id values")
    files = primary.binlog_files()
    if not files:
        raise SandboxError(f"primary {primary.name} has no binlog files")
    if primary.port is None:
        raise SandboxError(f"primary {primary.name} is not running")
    follow(replica, "127.0.0.1", int(primary.port), user=primary.repl_user, password=primary.repl_password,
           start=f"MASTER_LOG_FILE='{files[0].name}', MASTER_LOG_POS=4, MASTER_USE_GTID=no")


def follow(replica: MariaDBServer, host: str, port: int, *, user: str = "repl", password: str = "",
           start: str = "MASTER_USE_GTID=slave_pos") -> None:
    """Point `replica` at HOST:PORT (a primary, or a dumpfilter master's MySQL endpoint) from
    `start`, retrying its connection every second, and START SLAVE."""
    replica.execute(["STOP SLAVE", "RESET SLAVE ALL",
                     f"CHANGE MASTER TO MASTER_HOST='{host}', MASTER_PORT={port}, MASTER_USER='{user}', "
                     f"MASTER_PASSWORD='{password}', {start}, MASTER_CONNECT_RETRY=1", "START SLAVE"])


def stopped_on_error(status: dict[str, Any]) -> bool:
    """SHOW SLAVE STATUS of a replica whose SQL thread, or whose stopped IO thread, has an error."""
    return bool(status.get("Last_SQL_Errno") or (status.get("Slave_IO_Running") == "No" and status.get("Last_IO_Errno")))


def wait_fed(replica: MariaDBServer, streamed_to_end: Callable[[], bool], timeout: float) -> dict[str, Any]:
    """Wait on a replica of a dumpfilter master's MySQL endpoint until it stops on an error
    (`stopped_on_error`) or is caught up: the master streamed it to its binlog end, both threads
    run and the SQL thread executed all the IO thread read, seen twice in a row. Returns SHOW SLAVE
    STATUS with "caught_up" added (False also after `timeout` seconds)."""
    deadline = time.monotonic() + timeout
    stable = 0
    while True:
        status = replica_status(replica)
        if stopped_on_error(status):
            return {**status, "caught_up": False}
        idle = (status.get("Slave_IO_Running") == "Yes" and status.get("Slave_SQL_Running") == "Yes"
                and status.get("Relay_Master_Log_File") == status.get("Master_Log_File")
                and status.get("Exec_Master_Log_Pos") == status.get("Read_Master_Log_Pos")
                and "Slave has read all relay log" in str(status.get("Slave_SQL_Running_State") or "")
                and streamed_to_end())
        stable = stable + 1 if idle else 0
        if stable >= 2 or time.monotonic() > deadline:
            return {**status, "caught_up": stable >= 2}
        time.sleep(0.3)


def relay_group_at(replica: MariaDBServer, relay_file: str, relay_pos: int) -> Event | None:
    """The GTID event of the group a stopped SQL thread failed in: the first GTID at or after its
    relay log position (the start of the failed group). The primary's position cannot tell it for a
    replica of a filtered stream: Exec_Master_Log_Pos stays at the end of the last group it
    executed, and the skipped groups after it never reached it."""
    path = replica.datadir / Path(relay_file).name
    if not relay_file or not path.exists():
        return None
    try:
        events = read_events(path.read_bytes(), str(path), verify_checksums=False)
    except DumpFilterError:
        return None  # a relay log being written may end inside an event
    return next((e for e in events if e.pos >= relay_pos and e.type_code == EventType.MARIADB_GTID), None)


def _to_int(v: Any) -> int:
    try:
        return int(v)
    except (TypeError, ValueError):
        return 0


def _status(raw: dict[str, Any], primary_pos: tuple[str, int], caught_up: bool) -> ReplicaStatus:
    return ReplicaStatus(
        caught_up=caught_up,
        sql_running=str(raw.get("Slave_SQL_Running", "")),
        io_running=str(raw.get("Slave_IO_Running", "")),
        last_sql_errno=_to_int(raw.get("Last_SQL_Errno")),
        last_sql_error=str(raw.get("Last_SQL_Error") or ""),
        last_io_errno=_to_int(raw.get("Last_IO_Errno")),
        last_io_error=str(raw.get("Last_IO_Error") or ""),
        relay_master_log_file=str(raw.get("Relay_Master_Log_File") or ""),
        exec_master_log_pos=_to_int(raw.get("Exec_Master_Log_Pos")),
        read_master_log_file=str(raw.get("Master_Log_File") or ""),
        read_master_log_pos=_to_int(raw.get("Read_Master_Log_Pos")),
        primary_file=primary_pos[0],
        primary_pos=primary_pos[1],
        raw=raw,
    )


def wait_caught_up(primary: MariaDBServer, replica: MariaDBServer, timeout: float = 30.0) -> ReplicaStatus:
    """Wait until the replica executed up to the primary's current binlog end.

    Returns early (caught_up=False, stopped_with_error=True) when the SQL or IO
    thread stopped with an error. Raises ReplicationTimeout after `timeout` s.
    The target is the primary position when the call begins.
    """
    target = primary.master_position()
    deadline = time.monotonic() + timeout
    while True:
        raw = replica_status(replica)
        if not raw:
            raise SandboxError(f"{replica.name} is not configured as a replica")
        st = _status(raw, target, caught_up=False)
        executed = (st.relay_master_log_file, st.exec_master_log_pos)
        if executed[0] and executed >= target:
            return _status(raw, target, caught_up=True)
        if st.stopped_with_error:
            return st
        if st.sql_running == "No" and st.io_running == "No":
            return st  # stopped by someone, no error: cannot progress
        if time.monotonic() > deadline:
            raise ReplicationTimeout(
                f"{replica.name} did not catch up with {primary.name} within "
                f"{timeout}s: {st.describe()}",
                st,
            )
        time.sleep(0.05)
