"""Classic (file/position) replication between two sandbox servers, and waiting on it."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from .server import MariaDBServer, SandboxError

__all__ = [
    "ReplicaStatus",
    "ReplicationTimeout",
    "make_replica",
    "replica_status",
    "wait_caught_up",
]


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
    relay_log_file: str
    relay_log_pos: int
    read_master_log_file: str
    read_master_log_pos: int
    primary_file: str  # primary's SHOW MASTER STATUS when the status was taken
    primary_pos: int
    raw: dict[str, Any] = field(repr=False, compare=False)

    @property
    def stopped_with_error(self) -> bool:
        return (self.sql_running == "No" and self.last_sql_errno != 0) or (
            self.io_running == "No" and self.last_io_errno != 0
        )

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
    replica.execute([
        "STOP SLAVE",
        "RESET SLAVE ALL",
        "CHANGE MASTER TO MASTER_HOST='127.0.0.1', "
        f"MASTER_PORT={int(primary.port)}, "
        f"MASTER_USER='{primary.repl_user}', MASTER_PASSWORD='{primary.repl_password}', "
        f"MASTER_LOG_FILE='{files[0].name}', MASTER_LOG_POS=4, "
        "MASTER_USE_GTID=no, MASTER_CONNECT_RETRY=1",
    ])
    replica.execute("START SLAVE")


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
        relay_log_file=str(raw.get("Relay_Log_File") or ""),
        relay_log_pos=_to_int(raw.get("Relay_Log_Pos")),
        read_master_log_file=str(raw.get("Master_Log_File") or ""),
        read_master_log_pos=_to_int(raw.get("Read_Master_Log_Pos")),
        primary_file=primary_pos[0],
        primary_pos=primary_pos[1],
        raw=raw,
    )


def wait_caught_up(
    primary: MariaDBServer,
    replica: MariaDBServer,
    timeout: float = 30.0,
    poll: float = 0.05,
) -> ReplicaStatus:
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
        time.sleep(poll)
