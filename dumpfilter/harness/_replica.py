"""`Replica`: a real MariaDB replica (a throwaway sandbox server: temp datadir, free loopback port,
its own process group, stopped by process id) pointed with CHANGE MASTER TO at a `Master`'s MySQL
endpoint, fed what the master's filtering with its rules keeps."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

from dumpfilter.errors import DumpFilterError, ExternalError, InvalidArgumentError
from dumpfilter.harness._master import Master
from dumpfilter.harness._rules import Rules
from dumpfilter.lab.sandbox import MariaDBServer, follow, mariadb_available, replica_status, snapshot, stopped_on_error, wait_fed

_SERVER_IDS = itertools.count(2_000_000)


class ReplicaError(ExternalError):
    """A real replica's IO or SQL thread stopped with an error (the message has SHOW SLAVE STATUS's)."""


class Replica:
    """A MariaDB replica of `master` (started with `mysql_listen`) under `rules`, which the master
    applies for it (its server_id is mapped to them). `gtid`: start with MASTER_USE_GTID=slave_pos
    (else from the first binlog file at position 4). `port`: the loopback port its server listens
    on (default: a free one). Needs `mariadbd` (see `available()`).

        with Master(binlog_dir, mysql_listen="127.0.0.1:0") as master, \\
                Replica(master, ["replicate-do-db=db1"]) as replica:
            replica.wait_caught_up()
            replica.tables()      # {"db1.t1": 12, ...}
    """

    def __init__(self, master: Master, rules: Rules | Sequence[str] | str | None = None, *,
                 server_id: int | None = None, name: str = "replica", user: str = "repl", password: str = "",
                 gtid: bool = True, port: int | None = None):
        if port is not None and (isinstance(port, bool) or not isinstance(port, int) or not 0 < port < 65536):
            raise InvalidArgumentError(f"Replica port {port!r}: must be a TCP port, 1..65535")
        self.requested_port = port
        self.master = master
        self.rules = rules
        self.server_id = server_id if server_id is not None else next(_SERVER_IDS)
        self.name, self.user, self.password, self.gtid = name, user, password, gtid
        self.server: MariaDBServer | None = None

    @staticmethod
    def available() -> bool:
        """Whether the MariaDB server and client programs are installed (PATH, then /usr/sbin...)."""
        return mariadb_available()

    def start(self) -> Replica:
        """Start the server and replication; returns self."""
        if self.server is not None:
            return self
        port = self.master.mysql_port
        if port is None:
            raise DumpFilterError("a Replica needs a master started with mysql_listen=\"127.0.0.1:0\"")
        self.master.map_replica(self.server_id, self.rules, name=self.name)
        server = self.server = MariaDBServer(self.name[:40].replace("/", "_"), server_id=self.server_id,
                                             log_bin=False, port=self.requested_port)
        try:
            server.start()
            follow(server, self.master.host, port, user=self.user, password=self.password,
                   start="MASTER_USE_GTID=slave_pos" if self.gtid else
                   f"MASTER_LOG_FILE='{self.master._files()[0]}', MASTER_LOG_POS=4, MASTER_USE_GTID=no")
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Stop the server (SIGTERM by process id, SIGKILL if it lingers) and remove its files."""
        server, self.server = self.server, None
        if server is not None:
            server.stop()

    def __enter__(self) -> Replica:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _need(self) -> MariaDBServer:
        if self.server is None:
            raise DumpFilterError(f"replica {self.name} is not started")
        return self.server

    @property
    def pid(self) -> int | None:
        return self.server.pid if self.server is not None else None

    @property
    def port(self) -> int | None:
        return self.server.port if self.server is not None else None

    def status(self) -> dict[str, Any]:
        """SHOW SLAVE STATUS as a dict."""
        return replica_status(self._need())

    def query(self, sql: str) -> list[dict[str, Any]]:
        """Run `sql` as root; the rows as dicts."""
        return [dict(row) for row in self._need().query(sql)]

    def tables(self) -> dict[str, int]:
        """Every user table ("db.table") with its row count."""
        snap = snapshot(self._need())
        return {f"{schema}.{table}": t.row_count for (schema, table), t in sorted(snap.tables.items())}

    def wait_caught_up(self, timeout: float = 60.0) -> dict[str, Any]:
        """Wait until the master has sent this replica everything up to its binlog end and the SQL
        thread has executed all it read (seen twice in a row); returns SHOW SLAVE STATUS. A thread
        stopped with an error raises ReplicaError; `timeout` seconds raise TimeoutError."""
        status = wait_fed(self._need(), lambda: self.master.replica_streamed_to_end(self.server_id), timeout)
        if stopped_on_error(status):
            raise ReplicaError(f"replica {self.name} stopped: SQL error {status.get('Last_SQL_Errno')} "
                               f"{status.get('Last_SQL_Error')!r}; IO error {status.get('Last_IO_Errno')} "
                               f"{status.get('Last_IO_Error')!r}")
        if not status.pop("caught_up"):
            raise TimeoutError(f"replica {self.name} did not catch up within {timeout:g}s: IO "
                               f"{status.get('Slave_IO_Running')}, SQL {status.get('Slave_SQL_Running')}, read "
                               f"{status.get('Master_Log_File')}:{status.get('Read_Master_Log_Pos')}, executed "
                               f"{status.get('Relay_Master_Log_File')}:{status.get('Exec_Master_Log_Pos')}")
        return status
