"""The dump service, free of gRPC: slave registrations (master.registry) and their streams
(master.stream.slave_stream) over one binlog directory's shared segment cache (master.read.segments).
Every request is authorized here: a server_id belongs to the identity that registered it, and
streams are counted per identity and in all."""

from __future__ import annotations

import contextlib
import gc
import os
import stat
from collections.abc import Callable, Generator
from pathlib import Path

from dumpfilter.errors import DumpFilterError, PositionError, ResourceExhaustedError, ShuttingDownError
from dumpfilter.binlogs import served_paths
from dumpfilter.binlogs.watch import SAFETY_POLL, DirectoryWatch
from dumpfilter.rules import lazy_sqlglot
from dumpfilter.rules.keep_table import KeyShapes
from dumpfilter.rules.lazy_pattern import compile_all
from dumpfilter.rules.schema import SchemaModel
from dumpfilter.master.model import Batch
from dumpfilter.master.policy import Identity, MasterPolicy
from dumpfilter.master.lint_jobs import LINT_MAX_BYTES
from dumpfilter.master.registry import RegisteredSlave, SlaveRegistry, StreamHandle
from dumpfilter.master.read.schema_feed import schema_timeline
from dumpfilter.master.shares import STREAMS
from dumpfilter.master.shadow.board import ShadowBoard
from dumpfilter.master.read.segments import CACHE_BYTES, INDEX_BYTES, RESIDENT_BYTES, SEGMENT_BYTES, TRAIL_BYTES, SegmentCache
from dumpfilter.master.read.units import Pos
from dumpfilter.master.stream.send_ahead import OUTPUT_BYTES
from dumpfilter.master.stream.slave_stream import SlaveStream

# A batch ends once it holds this many bytes (after the unit that fills it), or at a segment's end.
# 1 MiB: a stream's fixed costs per batch (the reply, grpc's send, the slave's check and relay
# write) stay small beside its bytes; at 256 KiB the one-slave bench took about 0.1 s longer.
BATCH_BYTES = 1 << 20
CPUS = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
# With many streams each one's batches are smaller, so that all their replies in flight fit the
# output budget (see DumpService.reply_bytes), but never smaller than this.
MIN_BATCH_BYTES = 128 << 10


class DumpService(SlaveRegistry):
    def __init__(self, binlog_dir: str | Path, *, policy: MasterPolicy | None = None, safety_poll: float = SAFETY_POLL,
                 segment_bytes: int = SEGMENT_BYTES, cache_bytes: int = CACHE_BYTES, batch_bytes: int = BATCH_BYTES,
                 verify_checksums: bool = True, schema: SchemaModel | None = None, segments: SegmentCache | None = None,
                 max_streams: int | None = None, max_streams_per_identity: int | None = None,
                 lint_bytes: int = LINT_MAX_BYTES, index_bytes: int = INDEX_BYTES,
                 resident_bytes: int = RESIDENT_BYTES, trail_bytes: int = TRAIL_BYTES):
        binlog_dir = Path(binlog_dir)
        if not binlog_dir.is_dir():
            raise PositionError(f"binlog directory {binlog_dir} does not exist")
        super().__init__(binlog_dir, policy=policy, schema=schema, lint_bytes=lint_bytes)
        # Streams at the binlog's end wait for its next change here (inotify; the safety-net
        # poll only where inotify is unavailable): no stream sleeps on a timer while a slave waits.
        self.watch = DirectoryWatch(self.binlog_dir, safety_poll=safety_poll)
        self.lint.watch = self.watch  # lint follows the binlog as it grows (master.lint_jobs)
        self.lint.verify_checksums = verify_checksums
        self.batch_bytes = batch_bytes
        self.live_streams = 0  # streams running now (`stream`'s generators entered and not ended)
        self.cpus = CPUS  # see crowded
        # CRC32s are checked as the binlog is read (MySQL's source_verify_checksum=ON); off, a
        # corrupt event body reaches the slaves, whose receivers check what they get.
        # `segments`: a cache to read through instead (the tests' reference reader).
        self.segments = segments if segments is not None else SegmentCache(
            self.binlog_dir, segment_bytes=segment_bytes, cache_bytes=cache_bytes, verify_checksums=verify_checksums,
            index_bytes=index_bytes, resident_bytes=resident_bytes, trail_bytes=trail_bytes)
        # read for the policy check (guard_row), where a gate can refuse a text
        self.segments.annotations_ahead = policy is not None and policy.bounds_any
        self.timeline = schema_timeline(self.segments, schema)
        self.shutting_down = False
        self.max_streams = max_streams                            # None: no limit
        self.shares.totals[STREAMS] = max_streams  # an identity's default share is counted from it
        self.shares.per_identity[STREAMS] = max_streams_per_identity  # a policy entry's max_streams wins
        # `master serve --source`: the replicator keeping the series (its `status()` dict feeds
        # `master status` and the metrics), else None
        self.source = None
        # Shadow candidates (master.shadow.board): set by `master serve`, which hands it the counting
        self.shadow: ShadowBoard | None = None
        # The streams' statement keys numbered by shape, each segment's once for all of them
        # (master.decide.statement_keys), each shape's first statement parsed once
        self.key_shapes = KeyShapes()

    def warm_up(self, freeze: bool = False) -> None:
        """What a long-running master does once as it starts, off its first slave's path (`master
        serve` runs it on a thread of its own): its directory watch put in place (inotify's import
        took 20-30 ms, `ctypes.util` running `ldconfig -p` among it), the rule modules' patterns
        compiled (about 25 ms), and the last file's written end found (the first stream to reach
        the end of a 220 MB file hopped over all of it: about 0.1 s of reads). `freeze` (`master
        serve`): then all that is made frozen out of the cyclic collector (its full passes walked
        sqlglot's modules again and again: 5% of a DDL-heavy binlog's shadow pass)."""
        self.watch.start()
        compile_all()
        # The statement parser's general path (sqlglot and its MySQL dialect: about 0.3 s of CPU to
        # import), which the first statement the core cannot read would otherwise wait for.
        lazy_sqlglot.sqlglot.Dialect.get_or_raise("mysql")
        # no binlog yet, or a bad one, or unreadable: the streams say so, each to its slave
        with contextlib.suppress(DumpFilterError, OSError, ValueError):
            self.segments.end()
        if freeze:
            gc.freeze()

    def stats(self, server_id: int = 0, caller: Identity | None = None) -> list[tuple[RegisteredSlave, Pos, int]]:
        """(slave, binlog end, bytes behind) for one or every slave `caller` may see."""
        slaves = self._visible(server_id, caller)
        try:
            end = self.segments.end()
        except DumpFilterError:
            end = ("", 0)
        return [(s, end, self.segments.bytes_between(s.position, end) if s.position else 0) for s in slaves]

    def streamed_to_end(self, server_id: int) -> bool:
        """Whether slave `server_id`'s stream has sent the binlog to its end: its position is the end,
        or nothing is left between them (a last Rotate names a file the server never created: the
        stream waits at its offset 4)."""
        rows = self.stats(server_id) if server_id in self.slaves else []
        return bool(rows) and rows[0][0].position is not None and (rows[0][0].position == rows[0][1]
                                                                   or rows[0][2] == 0)

    # -- shutdown ---------------------------------------------------------------------------
    def shutdown(self) -> None:
        """Refuse new streams and ask every running stream to end after its current batch."""
        with self.lock:
            self.shutting_down = True
            for slave in self.slaves.values():
                if slave.stream is not None:
                    slave.stream.cancel("shutdown")
        if self.shadow is not None:
            self.shadow.close()
        self.lint.close()
        self.watch.close()

    # -- Dump -------------------------------------------------------------------------------
    def stream(self, server_id: int, *, channel: str = "", start: Pos | None = None, gtid_state: str | None = None,
               heartbeat_period: float = 1.0, is_active: Callable[[], bool] = lambda: True,
               caller: Identity | None = None, placeholder_runs: bool = False,
               skip_stretches: bool = False) -> Generator[Batch, None, None]:
        """Batches of whole transactions from `start` (or from the first file, skipping what
        `gtid_state` contains) until cancelled. Errors before the first batch are raised from the
        first next(). `placeholder_runs`, `skip_stretches`: the gRPC slave asked for runs of
        placeholders as one, and for skipped transactions in a row as one (DumpRequest)."""
        self._owned(server_id, caller)  # authorized first: an unauthorized caller learns nothing of the index
        if start and start[0]:
            self._check_binlog_name(start[0])
        with self.lock:
            if self.shutting_down:
                raise ShuttingDownError("the master is shutting down")
            slave = self._owned(server_id, caller)
            self._check_stream_limits(slave)
            handle = StreamHandle(channel)
            state = self._state(slave, channel)
            self._end_stream(slave, "replaced")
            slave.stream = handle
            old, slave.state = slave.state, state
            if old is None or old.engine is not state.engine:
                self.words.invalidate()  # the flag words only depend on (bit, engine, gate)
                self._release()  # the channel's engine it streamed before
        self.watch.add(handle.wake)
        with self.lock:
            self.live_streams += 1
        try:
            yield from SlaveStream(self, slave, handle, start, gtid_state, heartbeat_period, is_active,
                                   placeholder_runs=placeholder_runs, skip_stretches=skip_stretches).run()
        finally:
            self.watch.discard(handle.wake)
            with self.lock:
                self.live_streams -= 1
                if slave.stream is handle:
                    slave.stream = None

    def reply_bytes(self) -> int:
        """A stream's batch limit now: `batch_bytes` while the streams are few; with many, the
        output budget (send_ahead.OUTPUT_BYTES) shared so that every stream's reply fits it twice
        (the one being made, and the one grpc sends: its wire bytes, the pieces given up once
        serialized, `_dump_reply_bytes`), and never under MIN_BATCH_BYTES. A stream that holds no
        reply always makes its next (OutputBudget), so 64 slaves started together held 64 replies
        of 1 MiB and grpc's copies of them: the master's private memory passed 300 MB (bench
        fanout_procs). Up to 24 streams keep 1 MiB batches."""
        share = OUTPUT_BYTES // (2 * max(self.live_streams, 1))
        return min(self.batch_bytes, max(MIN_BATCH_BYTES, share))

    def crowded(self) -> bool:
        """More streams run than the master has CPUs: a stream's replies are then made by its
        handler between its sends, not ahead on a thread of its own (SendAhead's lent mode). The
        other streams keep the CPUs busy while one sends, and each reply made ahead cost two
        thread switches under the GIL: with 64 slaves on 2 CPUs, a fifth of the master's CPU went
        to switching threads (perf: finish_task_switch, futex waits)."""
        return self.live_streams > self.cpus

    def wake(self, server_id: int) -> None:
        """Wake the stream of `server_id` if it waits (its call ended: it looks at is_active now)."""
        slave = self.slaves.get(server_id)
        handle = slave.stream if slave is not None else None
        if handle is not None:
            handle.wake.set()

    def _check_binlog_name(self, name: str) -> None:
        """A start file must be a regular file named by the binlog index (or the directory's
        numbered series): never a path, never a FIFO or device. Every refused name gets the same
        answer, so the reply tells nothing about what exists outside the index."""
        unknown = PositionError(f"binlog file {name[:256]!r} is not in the binlog index (purged or never written)")
        if "/" in name or "\\" in name or "\0" in name or name in (".", ".."):
            raise unknown
        try:
            names = {p.name: p for p in served_paths(self.binlog_dir)}
        except DumpFilterError:
            raise unknown from None
        path = names.get(name)
        if path is None or path.parent.resolve() != self.binlog_dir.resolve():
            raise unknown
        try:
            if not stat.S_ISREG(os.stat(path).st_mode):
                raise unknown
        except OSError:
            raise unknown from None

    def _check_stream_limits(self, slave: RegisteredSlave) -> None:
        """Under self.lock. The stream being replaced (same server_id) does not count. The share is
        the slave's owner's (an admin streaming another identity's slave uses that one's)."""
        others = [s for s in self.slaves.values() if s.stream is not None and s is not slave]
        if self.max_streams is not None and len(others) >= self.max_streams:
            raise ResourceExhaustedError(f"the master already serves {len(others)} streams "
                                         f"(at most {self.max_streams}: --max-streams)")
        self.shares.check(slave.identity, STREAMS, sum(1 for s in others if s.account == slave.account))
