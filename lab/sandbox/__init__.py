"""Throwaway MariaDB servers on loopback ports, for tests and `dumpfilter verify`.

Start servers, wire replication, replay binlogs and compare table contents.
"""

from .binlog_apply import BinlogApplyError, apply_binlog
from .replication import (
    ReplicaStatus,
    ReplicationTimeout,
    make_replica,
    replica_status,
    wait_caught_up,
)
from .server import (
    MariaDBServer,
    SandboxError,
    ServerStartError,
    find_binary,
    mariadb_available,
    stop_all_servers,
    stop_servers,
)
from .snapshot import SYSTEM_SCHEMAS, Snapshot, TableSnapshot, diff_snapshots, snapshot

__all__ = [
    "SYSTEM_SCHEMAS",
    "BinlogApplyError",
    "MariaDBServer",
    "ReplicaStatus",
    "ReplicationTimeout",
    "SandboxError",
    "ServerStartError",
    "Snapshot",
    "TableSnapshot",
    "apply_binlog",
    "diff_snapshots",
    "find_binary",
    "make_replica",
    "mariadb_available",
    "replica_status",
    "snapshot",
    "stop_all_servers",
    "stop_servers",
    "wait_caught_up",
]
