"""The gRPC edge of a simulation: one master (`master.serve.grpc_server.create_server`) on a loopback
port and `slave.node.Slave`s, each over its own real gRPC channel, each streaming from the first
binlog file until it is caught up, WORKERS at a time (`run_streams`, which Ctrl-C ends early). After
each stream the master's own counters for that slave are read over the Stats RPC."""

from __future__ import annotations

import collections
import logging
import struct
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc

from dumpfilter.codec import Event, EventType
from dumpfilter.errors import DumpFilterError
from dumpfilter.topology import SlaveSpec
from dumpfilter.wire import credentials
from dumpfilter.v1 import dump_pb2, dump_pb2_grpc
from dumpfilter.rules.ruleset import RuleSet, Settings
from dumpfilter.slave.node import Slave
from dumpfilter.slave.config import SlaveConfig

MAIN, EVERYTHING, POLICY = "main", "everything", "policy"
_SIZE_POS = struct.Struct("<II")  # event_size, log_pos of a v4 header (at offset 9)
_ROTATE = int(EventType.ROTATE)
_HEARTBEATS = frozenset({int(EventType.HEARTBEAT), int(EventType.HEARTBEAT_V2)})
WORKERS = 2  # streams at once (one per core): more only fight over the GIL and hold more memory at once
TIMELINE_POINTS = 1000  # per stream: a point each time the stream covers another 1/1000 of the binlog
log = logging.getLogger("dumpfilter.lab.simulate")


class _Stopped(Exception):
    """Raised inside a stream's thread to end it once the run's stop event is set (Ctrl-C)."""


@dataclass(frozen=True)
class StreamJob:
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
    plan: StreamJob
    wall_seconds: float = 0.0
    counters: dict[str, int] = field(default_factory=dict)   # the slave's own counts (slave.config.Counters)
    stats: dict[str, Any] = field(default_factory=dict)      # the master's counts for this server_id (Stats RPC)
    error: str | None = None
    # After each durable batch: (master file, position, bytes received so far) -- the timeline chart.
    timeline: list[tuple[str, int, int]] = field(default_factory=list)
    heartbeat_bytes: int = 0  # heartbeat event bytes the slave received
    real_replica: dict[str, Any] | None = None  # kind = "mariadb": the real replica's outcome (simulate.real_replicas)


class _CountingSlave(Slave):
    """A Slave that reports its master position after every batch it has made durable, and
    keeps (file, position, bytes received) per batch."""

    def __init__(self, config: SlaveConfig, on_batch: Callable[[str, int], None], start_file: str,
                 stop: threading.Event, step: int):
        super().__init__(config)
        self._on_batch = on_batch
        self._stop = stop
        self._step = step  # binlog bytes between two timeline points within a file
        self._last = ("", -step)
        self.timeline: list[tuple[str, int, int]] = []
        # The file of the events before the first Rotate: where the stream starts. A fresh slave
        # asks for no position and the master starts at its first file, which a first batch that
        # crosses a Rotate does not name (its position is in the next file).
        self._file = start_file
        self.heartbeat_bytes = 0  # as received: the master also counts idle heartbeats sent after the last read

    def _warn(self, warnings: Iterable[str]) -> None:
        """The master's warnings (lint's among them) are not printed per stream: the report shows
        lint once per slave."""

    def _batch(self, batch: dump_pb2.DumpBatch) -> None:
        if self._stop.is_set():
            raise _Stopped
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
            if log_pos and (file != self._last[0] or log_pos - self._last[1] >= self._step):
                self._last = (file, log_pos)
                # (the wire's bytes: a run or a stretch stands for more, but a stretch of empty
                # transactions is its units and a head, more than it stands for)
                self.timeline.append((file, log_pos, min(sent, self.counters.bytes_received)))
            if blob[off + 4] == _ROTATE:
                file = Event(blob[off : off + size], 0, self.fmt).rotate[1]
            off += size
        self._file = batch.position.file
        self.timeline.append((batch.position.file, batch.position.pos, self.counters.bytes_received))
        self._on_batch(batch.position.file, batch.position.pos)


def master_stats(address: str, server_id: int, user: str = "", password: str = "",
                 timeout: float = 10.0) -> dict[str, Any]:
    """The master's counts for one slave over the Stats RPC ({} when it does not know it); a call
    that fails raises grpc.RpcError."""
    # Under a master policy, Stats shows a caller only the slaves its identity registered.
    with grpc.insecure_channel(address) as channel:
        stub = dump_pb2_grpc.DumpFilterStub(channel)  # type: ignore[no-untyped-call]  # generated, unannotated
        reply: dump_pb2.StatsReply = stub.Stats(dump_pb2.StatsRequest(server_id=server_id), timeout=timeout,
                                                metadata=credentials(user, password))
    message = next((s for s in reply.slaves if s.server_id == server_id), None)
    if message is None:
        return {}
    return {**{f.name: getattr(message, f.name) for f in message.DESCRIPTOR.fields if f.message_type is None},
            "rule_hits": dict(message.rule_hits)}


def run_streams(address: str, plans: list[StreamJob], *,
                on_progress: Callable[[StreamJob, str, int], None] | None = None,
                concurrency: int = WORKERS, first_file: str = "", binlog_bytes: int = 0) -> list[StreamResult]:
    """Run every plan to caught-up, `concurrency` at a time; results in plan order. A stream that
    fails is recorded with its error (the caller decides what that means). `first_file`: the
    master's first binlog file, where every stream starts. On KeyboardInterrupt, every stream ends
    (the run's stop event: each worker returns at its next batch or failed attempt) and every worker
    is joined before it propagates: nothing writes afterwards."""
    results = [StreamResult(plan) for plan in plans]
    stop = threading.Event()  # set: every stream ends
    todo = collections.deque(results)  # (popleft is atomic: the workers share it)
    step = binlog_bytes // TIMELINE_POINTS

    def report(message: str) -> None:  # a failed attempt: told once, unless the run is being stopped
        if stop.is_set():
            raise _Stopped
        log.warning(message)

    def one(result: StreamResult) -> None:
        plan = result.plan
        spec = plan.spec
        config = SlaveConfig(
            master=address, server_id=plan.server_id, relay_dir=plan.relay_dir,
            rules=spec.rules if spec else RuleSet(), settings=spec.settings if spec else Settings(),
            channel=spec.channel if spec else "", skip_policy=plan.skip_policy,
            user=spec.user if spec else "", password=spec.password if spec else "",
            hostname=plan.label, until_caught_up=True, connect_retry=0, report=report,
            on_disagreement="warn")  # counted, and reported by the equivalence check
        try:
            slave = _CountingSlave(config, lambda file, pos: on_progress and on_progress(plan, file, pos),
                                   first_file, stop, step)
            start = time.perf_counter()
            slave.run()
            result.wall_seconds = time.perf_counter() - start
            result.counters = {k: getattr(slave.counters, k) for k in slave.counters.__dataclass_fields__}
            result.timeline = slave.timeline
            result.heartbeat_bytes = slave.heartbeat_bytes
            result.stats = master_stats(address, plan.server_id, config.user, config.password)
        except DumpFilterError as exc:
            result.error = str(exc)
        except grpc.RpcError as exc:  # Stats after the stream
            result.error = f"{exc.code().name}: {exc.details()}"

    def worker() -> None:
        while not stop.is_set():
            try:
                result = todo.popleft()
            except IndexError:
                return
            try:
                one(result)
            except _Stopped:
                return

    threads = [threading.Thread(target=worker, name=f"simulate-streams-{n}", daemon=True)
               for n in range(max(1, min(concurrency, len(plans))))]
    try:
        # Started inside the try: a signal between two starts (the first stream already writing
        # its relay log) must stop and join the streams started, or they write on into a work
        # directory the caller is removing.
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    except BaseException:  # Ctrl-C: each stream ends at its next batch (or failed attempt, see report)
        stop.set()
        for thread in threads:
            if thread.ident is not None:  # started
                thread.join()
        raise
    return results
