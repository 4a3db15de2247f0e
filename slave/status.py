"""The slave's SHOW SLAVE STATUS: the state a running slave records in relay-log.info (its
threads, its last IO and SQL errors with MySQL's error numbers, the newest master timestamp) and
`status_fields`, which reads it back as the fields of SHOW SLAVE STATUS that apply to dumpfilter.

Only whole states are written (relay-log.info is replaced atomically here; the committer's
writes in place carry a check a reader verifies, see slave.info_file), and a state never moves
the committed positions: those change only after the relay data they describe is fsync'd."""

from __future__ import annotations

import datetime as dt
import os
import re
import time
from pathlib import Path
from typing import TYPE_CHECKING

from dumpfilter.errors import BinlogError, ChecksumError, PositionError, RuleError, without_password
from dumpfilter.slave.info_file import read_json
from dumpfilter.slave.relay_log import APPLY_INFO, BASENAME, RelayInfo

if TYPE_CHECKING:
    from dumpfilter.slave.config import SlaveConfig
    from dumpfilter.v1.dump_pb2 import DumpBatch

# MySQL's error numbers for what ends a replica's threads (include/mysqld_error.h,
# errmsg-utf8.txt), so that a replication engineer reads them as from SHOW SLAVE STATUS.
ER_MASTER_FATAL_ERROR_READING_BINLOG = 1236  # the master refused or failed the dump
ER_SLAVE_RELAY_LOG_WRITE_FAILURE = 1595      # what was received cannot be relayed
ER_NETWORK_READ_EVENT_CHECKSUM_FAILURE = 1743
ER_SLAVE_RELAY_LOG_READ_FAILURE = 1594       # the relay log could not be decoded for the SQL thread
ER_ACCESS_DENIED_ERROR = 1045
ER_SLAVE_FATAL_ERROR = 1593                  # e.g. rules the master refuses at registration
CR_CONN_HOST_ERROR = 2003                    # "Can't connect to MySQL server"
_CLIENT_ERROR = re.compile(r"ERROR (\d+) \(\w+\)")  # `mariadb` client: ERROR 1146 (42S02) at line 12: ...


def _now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%y%m%d %H:%M:%S")  # MySQL's *_Error_Timestamp format


def _p_s_time(at: float) -> str:
    """A performance_schema TIMESTAMP(6): '0000-00-00 00:00:00.000000' for none, as MySQL shows it."""
    if at <= 0:
        return "0000-00-00 00:00:00.000000"
    return dt.datetime.fromtimestamp(at, dt.UTC).strftime("%Y-%m-%d %H:%M:%S.%f")


def io_errno(exc: BaseException) -> int:
    """The Last_IO_Errno a MySQL replica would show for an error that ended the IO thread."""
    from dumpfilter.slave.master_link import MasterError

    if isinstance(exc, MasterError):
        if exc.code in ("UNAVAILABLE", "DEADLINE_EXCEEDED"):
            return CR_CONN_HOST_ERROR
        if exc.code in ("PERMISSION_DENIED", "UNAUTHENTICATED"):
            return ER_ACCESS_DENIED_ERROR
        return ER_MASTER_FATAL_ERROR_READING_BINLOG
    if isinstance(exc, RuleError):
        return ER_SLAVE_FATAL_ERROR
    if isinstance(exc, ChecksumError):
        return ER_NETWORK_READ_EVENT_CHECKSUM_FAILURE
    if isinstance(exc, PositionError) or str(exc).startswith("master: "):
        return ER_MASTER_FATAL_ERROR_READING_BINLOG
    if isinstance(exc, BinlogError | OSError):
        return ER_SLAVE_RELAY_LOG_WRITE_FAILURE
    return ER_SLAVE_FATAL_ERROR


def sql_errno(message: str) -> int:
    """The Last_SQL_Errno of an --apply failure: the server's own error number when the client printed one."""
    match = _CLIENT_ERROR.search(message)
    return int(match.group(1)) if match else ER_SLAVE_RELAY_LOG_READ_FAILURE


def mark_running(info: RelayInfo, relay_dir: Path, config: SlaveConfig) -> None:
    """The slave's threads start (START SLAVE): a running pid, the connection settings, errors kept
    until the threads succeed (as MySQL keeps Last_IO_Error until the IO thread reconnects)."""
    info.pid = os.getpid()
    info.io_running, info.sql_running = True, bool(config.apply_url)
    info.connected, info.caught_up = False, False
    info.master, info.server_id, info.channel = config.master, config.server_id, config.channel
    info.skip_policy, info.user = config.skip_policy, config.user
    info.ssl_ca = str(config.tls_ca or "")
    info.connect_retry = config.connect_retry
    info.apply_target = without_password(config.apply_url)
    info.save(relay_dir)


def mark_stopped(info: RelayInfo, relay_dir: Path) -> None:
    info.io_running = info.sql_running = info.connected = False
    info.save(relay_dir)


def note_batch(info: RelayInfo, batch: DumpBatch, events: bytes) -> None:
    """A batch was relayed (called before the info is saved with its position): the IO thread is
    connected, its error is cleared; the first event's timestamp dates what the master sent
    (`events`: the batch's events, read once by the caller)."""
    info.connected, info.caught_up = True, bool(batch.caught_up)
    info.last_error, info.last_io_errno, info.last_io_error_timestamp = "", 0, ""
    changed = batch.filter_changed_at
    if changed.file:  # a live CHANGE REPLICATION FILTER on the master took effect here
        info.filters_changed_at = f"{changed.file}:{changed.pos}"
    if len(events) >= 19 and not batch.heartbeat:
        stamp = int.from_bytes(events[0:4], "little")
        if stamp:
            info.master_timestamp = stamp


def record_io_error(info: RelayInfo, relay_dir: Path, exc: BaseException) -> None:
    info.last_io_errno, info.last_error, info.last_io_error_timestamp = io_errno(exc), str(exc), _now()
    mark_stopped(info, relay_dir)


def record_retry(info: RelayInfo, relay_dir: Path, exc: BaseException) -> None:
    """The IO thread lost the master and will retry: still running, Connecting, error shown
    (as MySQL shows `error reconnecting to master ...` while it retries)."""
    info.last_io_errno, info.last_error, info.last_io_error_timestamp = io_errno(exc), str(exc), _now()
    info.connected = False
    info.save(relay_dir)


def record_sql_error(info: RelayInfo, relay_dir: Path, exc: BaseException) -> None:
    message = str(exc)
    info.last_sql_errno, info.last_sql_error, info.last_sql_error_timestamp = sql_errno(message), message, _now()
    mark_stopped(info, relay_dir)


def clear_sql_error(info: RelayInfo) -> None:
    info.last_sql_errno, info.last_sql_error, info.last_sql_error_timestamp = 0, "", ""


def _alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def status_fields(relay_dir: Path) -> dict[str, object]:
    """SHOW SLAVE STATUS fields that apply, in MySQL's order, then MariaDB's and dumpfilter's own."""
    relay_dir = Path(relay_dir)
    info = RelayInfo.load(relay_dir)
    if info is None:
        raise PositionError(f"no {relay_dir}/relay-log.info: this slave never started")
    applied = read_json(relay_dir / APPLY_INFO) or {}
    host, _, port = info.master.rpartition(":")
    filters = info.filters or {}
    stats = info.stats or {}
    # A slave killed without a chance to say so left io_running set: its pid tells.
    running = info.io_running and _alive(info.pid)
    io_running = ("Yes" if info.connected else "Connecting") if running else "No"
    sql_running = "Yes" if running and info.sql_running else "No"
    if not running:
        io_state = ""
    elif not info.connected:
        io_state = "Connecting to master"
    elif info.caught_up:
        io_state = "Waiting for master to send event"
    else:
        io_state = "Queueing master event to the relay log"
    behind: str | int
    if not running or not info.connected:
        behind = "NULL"  # MySQL: NULL while the threads are not running
    elif info.caught_up or not info.master_timestamp:
        behind = 0
    else:
        behind = max(0, int(time.time() - info.master_timestamp))
    exec_pos = applied.get("master_pos", "")
    sql_state = ""
    if sql_running == "Yes":
        done = (applied.get("relay_file"), applied.get("relay_pos")) == (info.relay_file, info.relay_pos)
        sql_state = "Slave has read all relay log; waiting for more updates" if done else "Reading event from the relay log"
    relay_space = sum(p.stat().st_size for p in relay_dir.glob(f"{BASENAME}.[0-9]*"))
    return {
        "Slave_IO_State": io_state,
        "Master_Host": host, "Master_User": info.user, "Master_Port": port, "Connect_Retry": info.connect_retry,
        "Master_Log_File": info.master_file, "Read_Master_Log_Pos": info.master_pos,
        "Relay_Log_File": info.relay_file, "Relay_Log_Pos": info.relay_pos,
        "Relay_Master_Log_File": applied.get("master_file", ""),
        "Slave_IO_Running": io_running, "Slave_SQL_Running": sql_running,
        **{field: filters.get(field.upper(), "") for field in ("Replicate_Do_DB", "Replicate_Ignore_DB",
           "Replicate_Do_Table", "Replicate_Ignore_Table", "Replicate_Wild_Do_Table", "Replicate_Wild_Ignore_Table")},
        "Last_Errno": info.last_sql_errno, "Last_Error": info.last_sql_error,  # MySQL: the SQL thread's
        "Exec_Master_Log_Pos": exec_pos, "Relay_Log_Space": relay_space,
        "Master_SSL_Allowed": "Yes" if info.ssl_ca else "No", "Master_SSL_CA_File": info.ssl_ca,
        "Seconds_Behind_Master": behind,
        "Last_IO_Errno": info.last_io_errno, "Last_IO_Error": info.last_error,
        "Last_SQL_Errno": info.last_sql_errno, "Last_SQL_Error": info.last_sql_error,
        "Server_Id": info.server_id,
        "Slave_SQL_Running_State": sql_state,
        "Last_IO_Error_Timestamp": info.last_io_error_timestamp,
        "Last_SQL_Error_Timestamp": info.last_sql_error_timestamp,
        "Channel_Name": info.channel,
        # MariaDB
        "Replicate_Rewrite_DB": filters.get("REPLICATE_REWRITE_DB", ""),
        "Gtid_IO_Pos": info.gtid_state,
        "Gtid_Slave_Pos": applied.get("gtid_state", ""),
        # dumpfilter
        "Apply_Target": info.apply_target,
        "Master_Policy_Allow": ",".join(info.policy_allow),
        # Replicate_* above are the rules in force: those this slave registered, then, after a live
        # change on the master (dumpfilter master change-filter), the master's (Slave._filters_in_force).
        "Filters_Changed_On_Master_At": info.filters_changed_at,
        "Skip_Policy": info.skip_policy,
        # performance_schema.replication_connection_status's, in its form (UTC): when the relay
        # bytes recorded last were found on disk.
        "Last_Queued_Transaction_End_Queue_Timestamp": _p_s_time(info.committed_at),
        "Events_Received": stats.get("events_received", 0), "Bytes_Received": stats.get("bytes_received", 0),
        "Wire_Bytes_Received": stats.get("wire_bytes", 0),
        "Heartbeats_Received": stats.get("heartbeats", 0), "Placeholders_Received": stats.get("placeholders", 0),
        "Events_Relayed": stats.get("events_relayed", 0), "Bytes_Relayed": stats.get("bytes_relayed", 0),
        # The slave's own check of what the master sent (slave/trust.py): events its rules drop
        # (relayed under --on-disagreement warn), and statements the master decided with its schema.
        "Check_Disagreements": stats.get("check_disagreements", 0),
        "Last_Check_Disagreement": info.last_disagreement,
        "Kept_By_Master_Schema": stats.get("master_schema_kept", 0),
    }
