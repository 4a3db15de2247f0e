"""Throwaway MariaDB servers on loopback ports, for tests and `dumpfilter verify`.

Start servers, wire replication and compare table contents.
"""

from .replication import (
    ReplicationTimeout,
    follow,
    make_replica,
    relay_group_at,
    replica_status,
    stopped_on_error,
    wait_caught_up,
    wait_fed,
)
from .server import (
    MariaDBServer,
    SandboxError,
    ServerStartError,
    find_binary,
    mariadb_available,
    stop_servers,
)
from .snapshot import Snapshot, diff_snapshots, snapshot

__all__ = [
    "MariaDBServer",
    "ReplicationTimeout",
    "SandboxError",
    "ServerStartError",
    "Snapshot",
    "diff_snapshots",
    "find_binary",
    "follow",
    "make_replica",
    "mariadb_available",
    "relay_group_at",
    "replica_status",
    "snapshot",
    "stop_servers",
    "stopped_on_error",
    "wait_caught_up",
    "wait_fed",
]
