"""`Slave`: a dumpfilter slave of a master, registered with its rules over real gRPC, run until
caught up (`catch_up`) or in the background (`start` ... `stop`); what it received (`received`,
`position`) and its relay log (`relay_log`: the files, their events and transactions)."""

from __future__ import annotations

import itertools
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from dumpfilter.binlogs import TailingReader
from dumpfilter.binlogs.files import binlog_listing
from dumpfilter.errors import DumpFilterError
from dumpfilter.harness import _wiring
from dumpfilter.harness._rules import Rules, as_rules
from dumpfilter.harness._types import Position, Received
from dumpfilter.skip_policy import DEFAULT as DEFAULT_SKIP_POLICY, named as skip_policy_named

if TYPE_CHECKING:
    from dumpfilter.codec import Event, Transaction
    from dumpfilter.harness._master import Master

_SERVER_IDS = itertools.count(1000)  # a Slave given no server_id gets the next one (unique in this process)
_COUNTERS = ("events_received", "bytes_received", "heartbeats", "placeholders", "events_relayed", "bytes_relayed")
# Received's fields from the master's Stats for this server_id
_MASTER_COUNTS = ("transactions_kept", "transactions_partial", "transactions_skipped", "empty_transactions", "kept_bytes")


@dataclass(frozen=True)
class RelayLog:
    """A slave's relay log: the directory, its files in order (`paths`), and readers over them.
    Events keep the master's end position in `log_pos`; their `pos` is the relay file's offset."""

    directory: Path

    @property
    def paths(self) -> list[Path]:
        """The relay log files in order ([] before the first batch)."""
        return [self.directory / name for name in binlog_listing(self.directory) if (self.directory / name).exists()]

    def events(self) -> Iterator[Event]:
        """Every event of the relay log, in order (bounded memory; `dumpfilter.codec.Event`)."""
        if self.paths:
            yield from (event for _file, event in TailingReader(self.directory))

    def transactions(self) -> Iterator[Transaction]:
        """The relay log's transactions in order (`dumpfilter.codec.Transaction`), each event
        placed at its master position; the relay log's own file framing left out."""
        if not self.paths:
            return
        from dumpfilter.lab.simulate.equivalence import relay_transactions

        yield from relay_transactions(self.directory)


class Slave:
    """A slave of `master` (a `Master`, or a gRPC HOST:PORT) with `rules` (a `Rules`, option
    strings such as "replicate-do-db=db1", or None for everything).

    `server_id`: unique per master (default: one this process has not given out). `skip_policy`:
    one of `SKIP_POLICIES`. `relay_dir`: where the relay log goes (default: a temporary directory,
    removed by `close()` or the end of a `with` block). `user`/`password`: the identity a master
    policy checks. `name`: the report_host the master shows. `connect_timeout`: give up when the
    master cannot be reached for that long (None: keep trying). `heartbeat_period`: seconds between
    the master's heartbeats on an idle stream (how soon `wait_caught_up` notices an idle end).
    """

    def __init__(self, master: Master | str, rules: Rules | Sequence[str] | str | None = None, *,
                 server_id: int | None = None, skip_policy: str = DEFAULT_SKIP_POLICY,
                 relay_dir: str | os.PathLike[str] | None = None, user: str = "", password: str = "",
                 name: str = "", connect_timeout: float | None = 30.0, heartbeat_period: float = 1.0):
        skip_policy_named(skip_policy)  # a name that is none raises here
        self.master = master
        self.rules = as_rules(rules)
        self.server_id = server_id if server_id is not None else next(_SERVER_IDS)
        self.skip_policy = skip_policy
        self.user, self.password, self.name = user, password, name
        self.connect_timeout, self.heartbeat_period = connect_timeout, heartbeat_period
        self._own_relay = relay_dir is None
        self.relay_dir = Path(relay_dir) if relay_dir is not None else Path(tempfile.mkdtemp(prefix="dumpfilter-relay-"))
        self._client: _wiring.StoppableSlave | None = None
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None
        self._totals = dict.fromkeys(_COUNTERS, 0)  # finished runs; the running one is added on read

    @property
    def address(self) -> str:
        return self.master if isinstance(self.master, str) else self.master.address

    # -- running ---------------------------------------------------------------------------
    def catch_up(self, timeout: float | None = None) -> Received:
        """Register, stream until everything up to the master's current binlog end is in the relay
        log, and return what was received. A master error raises it (a `DumpFilterError`);
        `timeout` seconds without finishing raise TimeoutError (the stream is stopped first)."""
        if self.running:
            raise DumpFilterError("the slave runs in the background: use wait_caught_up()")
        self._error = None
        self._launch(until_caught_up=True)
        try:
            self._join(timeout)
        except BaseException:
            self.stop()
            raise
        if self._error is not None:
            raise self._error
        return self.received

    def start(self) -> Slave:
        """Stream in the background (following new binlog) until `stop()`; returns self."""
        if not self.running:
            self._error = None
            self._launch(until_caught_up=False)
        return self

    def wait_caught_up(self, timeout: float = 60.0) -> Received:
        """Wait (background slave) until a batch received after this call says the master had
        nothing more to send; raises the slave's error if it stopped with one, TimeoutError after
        `timeout` seconds. An idle slave is told so at its next heartbeat."""
        client = self._client
        if client is None:
            raise DumpFilterError("the slave is not running: start() it, or use catch_up()")
        deadline = time.monotonic() + timeout
        with client.changed:
            seen = client.caught_up_batches
            while client.caught_up_batches == seen:
                if self._error is not None:
                    raise self._error
                if not self.running:
                    raise DumpFilterError("the slave stopped before it caught up")
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"slave {self.server_id} did not catch up within {timeout:g}s")
                client.changed.wait(min(left, 0.5))
        return self.received

    def close(self) -> None:
        """Stop, and remove the relay directory when it is the temporary default."""
        try:
            self.stop()
        finally:
            if self._own_relay:
                shutil.rmtree(self.relay_dir, ignore_errors=True)

    def __enter__(self) -> Slave:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    @property
    def error(self) -> BaseException | None:
        """The error a background slave stopped with (None: none)."""
        return self._error

    def _launch(self, until_caught_up: bool) -> None:
        client = self._client = _wiring.StoppableSlave(_wiring.SlaveConfig(
            master=self.address, server_id=self.server_id, relay_dir=self.relay_dir, rules=self.rules._ruleset,
            settings=self.rules.settings_for(), channel=self.rules.channel, skip_policy=self.skip_policy,
            user=self.user, password=self.password, hostname=self.name, until_caught_up=until_caught_up,
            connect_timeout=self.connect_timeout, heartbeat_period=self.heartbeat_period,
            report=lambda message: None))

        def failed(exc: BaseException) -> None:
            self._error = exc

        self._thread = threading.Thread(target=client.run_until_stopped, args=(failed,),
                                        name=f"dumpfilter-slave-{self.server_id}", daemon=True)
        self._thread.start()

    def _join(self, timeout: float | None) -> None:
        thread = self._thread
        assert thread is not None
        deadline = None if timeout is None else time.monotonic() + timeout
        while thread.is_alive():  # in short waits: Ctrl-C reaches the caller between them
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise TimeoutError(f"slave {self.server_id} did not catch up within {timeout:g}s")
            thread.join(0.2 if left is None else min(0.2, left))
        self._finish_run()

    def stop(self, timeout: float = 30.0) -> None:
        """Stop a background slave (its relay log stays committed up to its last whole batch)."""
        client, thread = self._client, self._thread
        if client is None or thread is None:
            return
        client.request_stop()
        thread.join(timeout)
        if thread.is_alive():
            raise DumpFilterError(f"slave {self.server_id} did not stop within {timeout:g}s")
        self._finish_run()

    def _finish_run(self) -> None:
        client = self._client
        if client is None or self._thread is None:
            return
        for name in _COUNTERS:
            self._totals[name] += getattr(client.counters, name)
        self._thread = None

    # -- what it received ------------------------------------------------------------------
    @property
    def position(self) -> Position:
        """The master position the relay log is committed up to, with the GTID state there."""
        info = _wiring.RelayInfo.load(self.relay_dir)
        return Position("", 4) if info is None else Position(info.master_file, info.master_pos, info.gtid_state)

    @property
    def received(self) -> Received:
        """What this slave received over all its runs, and the master's counts for it."""
        counts = dict(self._totals)
        if self._thread is not None and self._client is not None:  # the run under way
            for name in _COUNTERS:
                counts[name] += getattr(self._client.counters, name)
        running = isinstance(self.master, str) or self.master.running
        stats = _wiring.master_stats(self.address, self.server_id, self.user, self.password) if running else {}
        return Received(events=counts["events_received"], bytes=counts["bytes_received"],
                        heartbeats=counts["heartbeats"], placeholders=counts["placeholders"],
                        relayed_events=counts["events_relayed"], relayed_bytes=counts["bytes_relayed"],
                        **{name: int(stats.get(name, 0)) for name in _MASTER_COUNTS},
                        rule_hits={k: int(v) for k, v in stats.get("rule_hits", {}).items()})

    @property
    def relay_log(self) -> RelayLog:
        return RelayLog(self.relay_dir)

    def __repr__(self) -> str:
        return f"Slave(server_id={self.server_id}, master={self.address!r}, rules={self.rules.lines!r})"
