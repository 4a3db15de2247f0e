"""`Master`: a dump master over a binlog directory, started in this process on a chosen or a free
loopback port (gRPC, and optionally the MySQL protocol for real replicas), stopped by `stop()` or
at the end of its `with` block, whatever ended it."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from dumpfilter.binlogs.files import binlog_listing
from dumpfilter.errors import DumpFilterError
from dumpfilter.harness import _wiring
from dumpfilter.harness._rules import Rules, as_rules
from dumpfilter.harness._types import Position
from dumpfilter.skip_policy import DEFAULT as DEFAULT_SKIP_POLICY

if TYPE_CHECKING:
    from dumpfilter.harness._slave import Slave


class Master:
    """A master serving `binlog_dir` (a live server may still be writing it).

    `listen` is HOST:PORT; port 0 picks a free port, which `port` and `address` report once
    started. `policy`: a master policy TOML file (who may receive what). `mysql_listen`:
    also serve real MySQL/MariaDB replicas (CHANGE MASTER TO) there, port 0 for a free one
    (`mysql_port`); `map_replica` gives a real replica its rules. `lint_max_mb`: lint each
    registering slave's rules in the background over binlogs up to this size (0: off, the default
    here; `lint()` predicts on demand). `grace`: seconds `stop()` lets streams drain.

        with Master(binlog_dir) as master:
            print(master.address)       # 127.0.0.1:<the bound port>
    """

    def __init__(self, binlog_dir: str | os.PathLike[str], *, listen: str = "127.0.0.1:0",
                 policy: str | os.PathLike[str] | None = None, mysql_listen: str | None = None,
                 lint_max_mb: int = 0, grace: float = 1.0):
        self.binlog_dir = Path(binlog_dir)
        self.listen = listen
        self.policy = Path(policy) if policy is not None else None
        self.mysql_listen = mysql_listen
        self.lint_max_mb = lint_max_mb
        self.grace = grace
        self._server: _wiring.MasterServer | None = None
        self._endpoint: _wiring.MysqlEndpoint | None = None
        self._port: int | None = None

    # -- life ------------------------------------------------------------------------------
    def start(self) -> Master:
        """Start serving (once); returns self."""
        if self._server is not None:
            return self
        server, port = _wiring.create_server(self.binlog_dir, self.listen, policy=self.policy,
                                             lint_bytes=max(0, self.lint_max_mb) << 20)
        self._server, self._port = server, port
        if self.mysql_listen is not None:
            try:
                # (an empty map of replica rules, which `map_replica` fills while it runs)
                self._endpoint = _wiring.MysqlEndpoint(server.service, self.mysql_listen)
            except BaseException:
                self.stop()
                raise
        return self

    def stop(self) -> None:
        """Stop serving: the MySQL endpoint, then the gRPC master (streams end after their
        current batch; `grace` seconds to drain). Safe to call twice, and on a master never started."""
        endpoint, server = self._endpoint, self._server
        self._endpoint = self._server = None
        try:
            if endpoint is not None:
                endpoint.stop()
        finally:
            if server is not None:
                server.stop(grace=self.grace)

    @property
    def running(self) -> bool:
        return self._server is not None

    def __enter__(self) -> Master:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = f"on {self.address}" if self.running else "stopped"
        return f"Master({str(self.binlog_dir)!r}, {state})"

    # -- where -----------------------------------------------------------------------------
    @property
    def host(self) -> str:
        return self.listen.rpartition(":")[0]

    @property
    def port(self) -> int:
        """The bound gRPC port (raises before `start()`)."""
        if self._port is None:
            raise DumpFilterError("the master is not started")
        return self._port

    @property
    def address(self) -> str:
        """HOST:PORT to give a slave (`--master`)."""
        return f"{self.host}:{self.port}"

    @property
    def mysql_port(self) -> int | None:
        """The MySQL-protocol endpoint's bound port (None without `mysql_listen`)."""
        return self._endpoint.port if self._endpoint is not None else None

    def binlog_end(self) -> Position:
        """The end of the binlog as it is now: its last file and that file's size."""
        last = self._files()[-1]
        return Position(last, (self.binlog_dir / last).stat().st_size)

    def _files(self) -> list[str]:
        """The binlog's file names in order (a DumpFilterError when there is none)."""
        listing = binlog_listing(self.binlog_dir)
        if not listing:
            raise listing.problem or DumpFilterError(f"no binlog files in {self.binlog_dir}")
        return listing

    # -- slaves and replicas ---------------------------------------------------------------
    def slave(self, rules: Rules | Sequence[str] | str | None = None, **options: object) -> Slave:
        """A `Slave` of this master (see `Slave` for the options); not started."""
        from dumpfilter.harness._slave import Slave

        return Slave(self, rules, **options)  # type: ignore[arg-type]

    def map_replica(self, server_id: int, rules: Rules | Sequence[str] | str | None = None, *, user: str = "",
                    skip_policy: str = DEFAULT_SKIP_POLICY, name: str = "") -> None:
        """Rules for a real replica that connects to the MySQL endpoint with this server_id (or
        user), as `master serve --replicas` gives them; a replica the map does not name gets
        everything."""
        if self._endpoint is None:
            raise DumpFilterError("map_replica needs a master started with mysql_listen")
        spec = as_rules(rules)._spec(name or f"replica-{server_id}", server_id, skip_policy, user)
        _wiring.add_replica_spec(self._endpoint, spec)

    def replica_streamed_to_end(self, server_id: int) -> bool:
        """Whether the master has sent the real replica `server_id` everything up to the binlog end."""
        return self._server is not None and self._server.service.streamed_to_end(server_id)
