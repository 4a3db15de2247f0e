"""The gRPC edge of a simulation: one master (`master.grpc_server.create_server`) on a loopback
port and one `slave.client.Slave` thread per stream, each over its own real gRPC channel, each
streaming from the first binlog file until it is caught up. After each stream the master's own
counters for that slave are read over the Stats RPC."""

from __future__ import annotations

import struct
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import grpc



from dumpfilter.codec import Event, EventType
from dumpfilter.errors import DumpFilterError
from dumpfilter.topology import SlaveSpec
from dumpfilter.v1 import dump_pb2, dump_pb2_grpc
from dumpfilter.rules.ruleset import RuleSet, Settings
from dumpfilter.slave.client import Slave, SlaveConfig

MAIN, EVERYTHING, POLICY = "main", "everything", "policy"
_SIZE_POS = struct.Struct("<II")  # event_size, log_pos of a v4 header (at offset 9)
_ROTATE = int(EventType.ROTATE)
_HEARTBEATS = frozenset({int(EventType.HEARTBEAT), int(EventType.HEARTBEAT_V2)})
MAX_CONCURRENT_STREAMS = 16  # the master's pool is sized for 64; leave room for the unary calls


@dataclass(frozen=True)
class StreamPlan:
    """One Dump stream: a topology slave with its own skip policy (`main`), the same slave with
    another skip policy (`policy`), or a slave with no rules that receives everything
    (`everything`: the slave-side filtering baseline)."""

    label: str
    role: str
    server_id: int
    skip_policy: str
    relay_dir: Path
    spec: SlaveSpec | None = None


@dataclass
class StreamResult:
    plan: StreamPlan
    wall_seconds: float = 0.0
    counters: dict = field(default_factory=dict)   # the slave's own counts (slave.client._Counters)
    stats: dict = field(default_factory=dict)      # the master's counts for this server_id (Stats RPC)
    error: str | None = None
    # After each durable batch: (master file, position, bytes received so far) -- the timeline chart.
    timeline: list[tuple[str, int, int]] = field(default_factory=list)
    heartbeat_bytes: int = 0  # heartbeat event bytes the slave received
    real_replica: dict | None = None  # kind = "mariadb": the real replica's outcome (simulate.real_replicas)


class _CountingSlave(Slave):
    """A Slave that reports its master position after every batch it has made durable, and
    keeps (file, position, bytes received) per batch."""

    def __init__(self, config: SlaveConfig, on_batch: Callable[[str, int], None], start_file: str = ""):
        super().__init__(config)
        self._on_batch = on_batch
        self.timeline: list[tuple[str, int, int]] = []
        # The file of the events before the first Rotate: where the stream starts. A fresh slave
        # asks for no position and the master starts at its first file, which a first batch that
        # crosses a Rotate does not name (its position is in the next file).
        self._file = start_file
        self.heartbeat_bytes = 0  # as received: the master also counts idle heartbeats sent after the last read

    def _batch(self, batch) -> None:
        sent = self.counters.bytes_received
        super()._batch(batch)
        # One point per event that carries a master position (log_pos: its end in the current
        # master file; heartbeats and placeholders carry the end of what they stand for). A
        # Rotate names the next file; log_pos 0 marks events with no position of their own.
        blob, off, file = batch.events, 0, self._file or batch.position.file
        while off + 19 <= len(blob):
            size, log_pos = _SIZE_POS.unpack_from(blob, off + 9)
            if size < 19:
                break
            sent += size
            if blob[off + 4] in _HEARTBEATS:
                self.heartbeat_bytes += size
            if log_pos:
                self.timeline.append((file, log_pos, sent))
            if blob[off + 4] == _ROTATE:
                file = Event(blob[off : off + size], 0, self.fmt).rotate[1]
            off += size
        self._file = batch.position.file
        self.timeline.append((batch.position.file, batch.position.pos, self.counters.bytes_received))
        self._on_batch(batch.position.file, batch.position.pos)


def _stats(address: str, server_id: int, user: str = "", password: str = "") -> dict:
    # Under a master policy, Stats shows a caller only the slaves its identity registered.
    metadata = [("dumpfilter-user", user), ("dumpfilter-password", password)] if user else None
    with grpc.insecure_channel(address) as channel:
        reply = dump_pb2_grpc.DumpFilterStub(channel).Stats(dump_pb2.StatsRequest(server_id=server_id), timeout=10,
                                                            metadata=metadata)
    if not reply.slaves:
        return {}
    message = reply.slaves[0]
    out = {f.name: getattr(message, f.name) for f in message.DESCRIPTOR.fields
           if f.message_type is None}
    out["rule_hits"] = dict(message.rule_hits)
    return out


def run_streams(address: str, plans: list[StreamPlan], *,
                on_progress: Callable[[StreamPlan, str, int], None] | None = None,
                concurrency: int = MAX_CONCURRENT_STREAMS, first_file: str = "") -> list[StreamResult]:
    """Run every plan to caught-up, at most `concurrency` at a time; results in plan order.
    A stream that fails is recorded with its error (the caller decides what that means).
    `first_file`: the master's first binlog file, where every stream starts."""
    results = [StreamResult(plan) for plan in plans]
    gate = threading.Semaphore(max(1, concurrency))

    def one(result: StreamResult) -> None:
        plan = result.plan
        spec = plan.spec
        config = SlaveConfig(
            master=address, server_id=plan.server_id, relay_dir=plan.relay_dir,
            rules=spec.rules if spec else RuleSet(), settings=spec.settings if spec else Settings(),
            channel=spec.channel if spec else "", skip_policy=plan.skip_policy,
            user=spec.user if spec else "", password=spec.password if spec else "",
            hostname=plan.label, until_caught_up=True, connect_retry=0)
        with gate:
            try:
                slave = _CountingSlave(config, lambda file, pos: on_progress and on_progress(plan, file, pos),
                                       first_file)
                start = time.perf_counter()
                slave.run()
                result.wall_seconds = time.perf_counter() - start
                result.counters = {k: getattr(slave.counters, k) for k in slave.counters.__dataclass_fields__}
                result.timeline = slave.timeline
                result.heartbeat_bytes = slave.heartbeat_bytes
                result.stats = _stats(address, plan.server_id, config.user, config.password)
            except DumpFilterError as exc:
                result.error = str(exc)
            except grpc.RpcError as exc:  # Stats after the stream
                result.error = f"{exc.code().name}: {exc.details()}"

    threads = [threading.Thread(target=one, args=(r,), name=f"slave-{r.plan.label}", daemon=True) for r in results]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results
