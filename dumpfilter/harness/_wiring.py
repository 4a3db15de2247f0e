"""The harness's one contact with the internals of the master and slave edges (issue #44): every
name the public API needs from `dumpfilter.master` and `dumpfilter.slave` is imported here and
nowhere else in `dumpfilter.harness`, so a move inside those packages is followed in this file
alone. It owns the small adapters over them: starting and stopping a master (gRPC and MySQL
protocol), a stoppable slave that counts its caught-up batches, and the master's per-slave counts."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from typing import Any

import grpc

from dumpfilter.master.serve.grpc_server import MasterServer, create_server
from dumpfilter.master.endpoint import MysqlEndpoint
from dumpfilter.slave.node import Slave as _InternalSlave
from dumpfilter.slave.config import SlaveConfig
from dumpfilter.slave.relay_log import RelayInfo
from dumpfilter.lab.simulate import streams
from dumpfilter.topology import SlaveSpec
from dumpfilter.v1 import dump_pb2

__all__ = ["MasterServer", "MysqlEndpoint", "RelayInfo", "SlaveConfig", "StoppableSlave", "add_replica_spec",
           "create_server", "master_stats"]


def add_replica_spec(endpoint: MysqlEndpoint, spec: SlaveSpec) -> None:
    """A real replica connecting with `spec.server_id` (or `spec.user`) gets `spec`'s rules."""
    endpoint.replicas.by_server_id[spec.server_id] = spec
    if spec.user:
        endpoint.replicas.by_user[spec.user] = spec


def master_stats(address: str, server_id: int, user: str = "", password: str = "",
                 timeout: float = 10.0) -> dict[str, Any]:
    """The master's counts for one slave over the Stats RPC ({} when it does not know it, or
    cannot be asked: a master stopped)."""
    try:
        return streams.master_stats(address, server_id, user, password, timeout)
    except grpc.RpcError:
        return {}


class _Stopped(Exception):
    """Raised inside a background slave's thread to end it."""


class StoppableSlave(_InternalSlave):
    """The slave client, stoppable from another thread, counting the batches that said
    "caught up" (a condition to wait on)."""

    def __init__(self, config: SlaveConfig):
        super().__init__(config)
        self.stopping = threading.Event()
        self.changed = threading.Condition()
        self.caught_up_batches = 0
        self._open: grpc.Channel | None = None

    def _channel(self) -> grpc.Channel:
        if self.stopping.is_set():
            raise _Stopped
        self._open = super()._channel()
        return self._open

    def _batch(self, batch: dump_pb2.DumpBatch) -> None:
        if self.stopping.is_set():
            raise _Stopped
        super()._batch(batch)
        with self.changed:
            self.caught_up_batches += batch.caught_up
            self.changed.notify_all()

    def request_stop(self) -> None:
        """Ends the stream at its next batch, or at once by closing the channel it waits on."""
        self.stopping.set()
        channel = self._open
        if channel is not None:
            with contextlib.suppress(Exception):  # closing a channel another thread closes too
                channel.close()
        with self.changed:
            self.changed.notify_all()

    def run_until_stopped(self, on_error: Callable[[BaseException], None]) -> None:
        """run(), where a stop asked for is a clean end and any other failure goes to `on_error`."""
        try:
            self.run()
        except _Stopped:
            pass
        except BaseException as exc:  # noqa: BLE001 - handed to the owner's thread
            if not self.stopping.is_set():
                on_error(exc)
        finally:
            with self.changed:
                self.changed.notify_all()
