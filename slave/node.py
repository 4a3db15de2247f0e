"""The slave node, the whole of one slave: registers with a master over gRPC, streams filtered
events, applies replicate-rewrite-db itself (WL#2387 keeps rewrite on the slave), writes relay logs,
commits its master position after the relay data is durable, and optionally executes what it
received. (Named `node`, not `client`: it is the slave process `dumpfilter slave run` runs, of which
the gRPC client is one part.)"""

from __future__ import annotations

import contextlib
import functools
import struct
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING

import grpc
import grpc.experimental

from dumpfilter.codec import Event, EventType, TransactionGrouper, fix_transaction_length
from dumpfilter.codec.constants import HEADER_LEN
from dumpfilter.errors import (BinlogError, ChecksumError, DumpFilterError, ExternalError, MalformedEventError,
                               RuleError)
from dumpfilter.codec.format_description import FormatDescription
from dumpfilter.codec.scanner import Scanner, UnitRecord, UnitScan
from dumpfilter.codec.transactions import CONTROL, CONTROL_TYPES, Transaction
from dumpfilter.v1 import dump_pb2, dump_pb2_grpc
from dumpfilter.wire import client_channel, credentials, rules_to_proto, schema_to_proto, skip_policy_to_proto
from dumpfilter.rules.ruleset import REPLICATE_TYPES, filter_name
from dumpfilter.skip_policy import is_placeholder
from dumpfilter.slave.receive import BatchWalk
from dumpfilter.slave.info_file import read_json, write_json_atomic
from dumpfilter.slave.relay_log import APPLY_INFO, RelayInfo, RelayLog
from dumpfilter.slave.status import (
    clear_sql_error,
    mark_running,
    mark_stopped,
    note_batch,
    record_io_error,
    record_retry,
    record_sql_error,
)
from dumpfilter.slave.config import Counters, SlaveConfig
from dumpfilter.slave.apply import ApplyError, apply_relay, parse_mysql_url
from dumpfilter.slave.master_link import (FINAL_CODES, MAX_BACKOFF, LinkTimeoutError,
                                          MasterError, NetWatch, master_error, say)
from dumpfilter.rules.renamer import AppliedNames, applied_names, event_renamer
from dumpfilter.rules.walk_driver import Driver

if TYPE_CHECKING:  # the rule engine's modules load at the first batch (Slave.engine)
    from dumpfilter.rules.keep_table import KeepTable
    from dumpfilter.rules.evaluate import RuleEngine
    from dumpfilter.slave.trust import MasterTrust

_TYPE_SIZE = struct.Struct("<4xB4xI")  # type_code, event_size of a common header
# Master events that frame files; the relay log has its own framing and does not copy them.
_NOT_RELAYED = frozenset({EventType.ROTATE, EventType.STOP, EventType.PREVIOUS_GTIDS, EventType.MARIADB_GTID_LIST,
                          EventType.BINLOG_CHECKPOINT, EventType.HEARTBEAT, EventType.HEARTBEAT_V2,
                          EventType.START_ENCRYPTION})


class RelayLogError(ExternalError):
    """The relay log could not be written (disk full, file size limit). Nothing after the last
    committed batch is kept: the next start cuts the relay log back to relay-log.info."""


def scan_batch(blob: bytes, fmt: FormatDescription | None, scanner: Scanner) -> UnitScan:
    """A DumpBatch through the compiled scanner: every event bounds- and CRC-checked, grouped
    into units; each is self-delimiting, and an FDE changes the format of those after it. A
    batch that is not whole events, or a bad CRC, raises with its offset in the batch."""
    if not scanner.core.has_format and fmt is not None:
        scanner.load_format(fmt.raw)
    scan = scanner.units(blob, 0, 0, at_eof=True)
    error = scan.error
    if isinstance(error, ChecksumError):
        raise ChecksumError(f"{error.message} received from the master", path="<stream>", offset=error.offset)
    if error is not None:
        raise error
    if scan.stop < len(blob):
        left = len(blob) - scan.stop
        if left < HEADER_LEN:
            raise BinlogError("batch ends inside an event header", path="<stream>", offset=scan.stop)
        size = _TYPE_SIZE.unpack_from(blob, scan.stop)[1]
        raise BinlogError(f"event size {size} runs past the batch", path="<stream>", offset=scan.stop)
    return scan


class Slave:
    def __init__(self, config: SlaveConfig, *, after_unit: Callable[[int], None] | None = None):
        self.config = config
        self.relay_dir = Path(config.relay_dir)
        self.relay_dir.mkdir(parents=True, exist_ok=True)
        self.after_unit = after_unit
        self._placeholders_in_unit = False  # the unit being grouped lost placeholders
        self.counters = Counters()
        self.info = RelayInfo.load(self.relay_dir) or RelayInfo()
        self._earlier_stats = dict(self.info.stats)  # committed counters of earlier runs: the totals go on
        self.relay = RelayLog(self.relay_dir, max_size=config.relay_log_size, server_id=config.server_id,
                              commit_interval=config.relay_commit_interval)
        self.relay.recover(self.info if self.info.relay_file else None)
        self.fmt: FormatDescription | None = self.relay.fde.fmt if self.relay.fde is not None else None
        self.units_written = 0
        self.caught_up = False
        # This run's first Dump call, and the seconds from it to the first batch that was caught
        # up (the summary line's "caught up in"): the stream's own time, the process's start aside.
        self._dumped_at: float | None = None
        self.caught_up_after: float | None = None
        self._scanner = Scanner("<stream>")
        # A batch is about 1 MiB, the size from which the scanner checks CRC runs on a thread of
        # its own: one thread started per batch, where the slave's other threads (the stream's
        # receive, the relay's writes) already fill the second core.
        self._scanner.core.pipeline_min = None
        # A unit the placeholder policy keeps in part (a kept table's rows, placeholders for a
        # dropped one's) stays a fast unit's shape for the compiled relay run (core scan::F_HOLES).
        self._scanner.core.holes = True
        self.effective: list[dump_pb2.EffectiveFilters] = []
        self._give_up_at: float | None = None  # --connect-timeout's deadline while the master has not answered
        self._told: set[str] = set()  # the master's warnings printed in this run

    # The slave's own rules, made when the first batch needs them: their modules (the rule engine,
    # the schema model, the statement parser) then load while the master reads and sends, not
    # between the slave's start and its Register/Dump (the master waits for those).
    @functools.cached_property
    def engine(self) -> RuleEngine:
        from dumpfilter.rules.evaluate import RuleEngine

        config = self.config
        engine = RuleEngine(config.rules, config.settings,
                            schema=config.schema.copy() if config.schema is not None else None)
        # The slave reads its decisions' answers alone (the check, its keep table), and database
        # rules alone answer by names (rpl_filter.cc's db_ok), never by the schema model: no DDL is
        # replayed into one then (under replicate-rewrite-db, a second parse of each DDL).
        engine.replay_ddl = engine.replay_ddl and not engine.databases_only
        return engine

    @functools.cached_property
    def rename(self) -> Callable[[Event], Event] | None:
        return event_renamer(self.engine, self.config.rules, self.config.settings)

    @functools.cached_property
    def names_applied(self) -> AppliedNames | None:  # the relay run's renames (slave.receive)
        return applied_names(self.engine, self.config.rules, self.config.settings)

    @functools.cached_property
    def trust(self) -> MasterTrust:  # the slave's own check (its rules) of what the master sends
        from dumpfilter.slave.trust import MasterTrust

        return MasterTrust(self.engine, self.config.on_disagreement, self.counters,
                           lambda text: setattr(self.info, "last_disagreement", text), say)

    # -- gRPC -------------------------------------------------------------------------------
    def _channel(self) -> grpc.Channel:
        cfg = self.config
        # A channel of its own per attempt (no subchannel shared through grpc's global pool): a
        # retry must not ride the connection that just went dead.
        options = [("grpc.max_receive_message_length", 64 << 20), ("grpc.use_local_subchannel_pool", 1),
                   # Dump's batches are read on the thread that asks for them, from the call's own
                   # completion queue: by default a channel thread takes each one and wakes the
                   # reader, a thread hop on the path of every live batch.
                   (grpc.experimental.ChannelOptions.SingleThreadedUnaryStream, 1)]
        return client_channel(cfg.master, options, cfg.tls_ca, cfg.tls_cert, cfg.tls_key, error=RuleError)

    def _metadata(self) -> list[tuple[str, str]]:
        return credentials(self.config.user, self.config.password)

    def register(self, stub: dump_pb2_grpc.DumpFilterStub) -> dump_pb2.RegisterReply:
        cfg = self.config
        request = dump_pb2.RegisterRequest(
            server_id=cfg.server_id, hostname=cfg.hostname, channels=[cfg.channel],
            filters=[dump_pb2.ChannelFilters(channel=cfg.channel, rules=rules_to_proto(cfg.rules))],
            semantics=dump_pb2.FILTER_SEMANTICS_EFFECTIVE if cfg.settings.semantics == "effective"
            else dump_pb2.FILTER_SEMANTICS_MYSQL,
            skip_policy=skip_policy_to_proto(cfg.skip_policy), credentials=dump_pb2.Credentials(user=cfg.user, password=cfg.password),
            flavor=cfg.settings.flavor, lower_case_table_names=cfg.settings.lower_case_table_names,
            replica_schema=schema_to_proto(cfg.replica_schema) if cfg.replica_schema is not None else None)
        reply: dump_pb2.RegisterReply = stub.Register(request, timeout=self._rpc_timeout(), metadata=self._metadata())
        self.effective = list(reply.effective)
        self._warn(reply.warnings)
        return reply

    def _warn(self, warnings: Iterable[str]) -> None:
        """The master's warnings (lint's predictions among them), each once a run: from the
        Register reply, a batch (when lint finished after Register) or Stats."""
        for warning in warnings:
            if warning not in self._told:
                self._told.add(warning)
                say(f"master warns: {warning}")

    def _await_lint(self, stub: dump_pb2_grpc.DumpFilterStub) -> None:
        """--until-caught-up may end before the master's background lint of these rules is done:
        ask Stats for up to `lint_wait` seconds, then print its predictions or say where to look."""
        cfg = self.config
        deadline = time.monotonic() + cfg.lint_wait
        while True:
            try:
                reply: dump_pb2.StatsReply = stub.Stats(dump_pb2.StatsRequest(server_id=cfg.server_id), timeout=self._rpc_timeout(),
                                   metadata=self._metadata())
            except grpc.RpcError:
                return  # an older master, or one going away: the warnings are optional
            mine = next((s for s in reply.slaves if s.server_id == cfg.server_id), None)
            if mine is None or mine.lint_state != "pending":
                if mine is not None:
                    self._warn(mine.lint_warnings)
                return
            if time.monotonic() >= deadline:
                say(f"the master's lint of these rules is still running; `dumpfilter master status --server-id "
                     f"{cfg.server_id}` shows its predictions when it ends")
                return
            time.sleep(0.2)

    def _filters_in_force(self, stub: dump_pb2_grpc.DumpFilterStub) -> dict[str, str] | None:
        """FILTER_NAME -> rule text of this slave's channel's rows in the master's ListFilters
        (performance_schema.replication_applier_filters), every REPLICATE_* name present ("" for none);
        None when the master cannot say (an older master, or one going away).

        A `dumpfilter master change-filter` (CHANGE REPLICATION FILTER run on the master for this slave)
        reaches the slave only as DumpBatch.filter_changed_at, where the change took effect; the rules
        themselves are the master's, so SHOW SLAVE STATUS's Replicate_* fields are read back from it,
        as MySQL's show the filter in force after CHANGE REPLICATION FILTER."""
        cfg = self.config
        try:
            reply = stub.ListFilters(dump_pb2.ListFiltersRequest(server_id=cfg.server_id), timeout=self._rpc_timeout(),
                                     metadata=self._metadata())
        except grpc.RpcError:
            return None
        filters = {filter_name(rule_type): "" for rule_type in REPLICATE_TYPES}
        for row in reply.filters:
            if row.server_id == cfg.server_id and row.channel_name == cfg.channel and row.filter_name in filters:
                filters[row.filter_name] = row.filter_rule
        return filters

    def _rpc_timeout(self) -> float:
        """The RPC deadline, never past --connect-timeout while the master has not answered yet."""
        deadline = self._give_up_at
        if deadline is None:
            return self.config.rpc_timeout
        return max(0.05, min(self.config.rpc_timeout, deadline - time.monotonic()))

    def run(self) -> int:
        """Register and stream until caught up (with --until-caught-up) or forever; returns 0.
        Each failed attempt is told with its cause and the backoff before the next; a final
        error, --retry-count failed attempts in a row or --connect-timeout seconds without
        reaching the master end it with an error (exit 2). The threads' state, and the error that
        stops them, are recorded for `slave status`."""
        mark_running(self.info, self.relay_dir, self.config)
        try:
            code = self._run()
        except ApplyError as exc:
            record_sql_error(self.info, self.relay_dir, exc)
            raise
        except (DumpFilterError, OSError) as exc:
            record_io_error(self.info, self.relay_dir, exc)
            raise
        except KeyboardInterrupt:
            mark_stopped(self.info, self.relay_dir)
            raise
        mark_stopped(self.info, self.relay_dir)
        return code

    def _run(self) -> int:
        cfg = self.config
        report = cfg.report or say
        failures = 0
        started = time.monotonic()
        self._give_up_at = started + cfg.connect_timeout if cfg.connect_timeout is not None else None
        while True:
            batches_before = self.counters.batches
            try:
                with self._channel() as channel:
                    stub = dump_pb2_grpc.DumpFilterStub(channel)  # type: ignore[no-untyped-call]  # generated, unannotated
                    self.register(stub)
                    if self._stream(stub):
                        return 0
            except grpc.RpcError as exc:
                if self.counters.batches > batches_before:  # the master was reached: a fresh start
                    failures, started = 0, time.monotonic()
                    if cfg.connect_timeout is not None:
                        self._give_up_at = started + cfg.connect_timeout
                failures += 1
                code = exc.code()
                cause = f"{code.name if code else 'UNKNOWN'}: {(exc.details() or '').strip()}"
                no_retry = cfg.until_caught_up and self.counters.batches == 0 and cfg.connect_retry <= 0
                if code in FINAL_CODES or no_retry:
                    self._save_error(exc)
                    raise master_error(exc) from None
                elapsed = time.monotonic() - started
                backoff = min(MAX_BACKOFF, max(cfg.connect_retry, 0.05) * 2 ** (failures - 1))
                out_of_tries = cfg.retry_count is not None and failures > cfg.retry_count
                out_of_time = cfg.connect_timeout is not None and elapsed >= cfg.connect_timeout
                if cfg.connect_timeout is not None:  # the last attempt is made at the deadline
                    backoff = max(0.0, min(backoff, cfg.connect_timeout - elapsed))
                if out_of_tries or out_of_time:
                    self._save_error(exc)
                    why = (f"after {failures} failed attempts (--retry-count {cfg.retry_count})" if out_of_tries
                           else f"within --connect-timeout {cfg.connect_timeout:g}s")
                    raise MasterError(code.name if code else "UNKNOWN",
                                      f"{cfg.master} not reached {why}; last error: {cause}") from None
                report(f"attempt {failures} to reach master {cfg.master} failed ({cause}); "
                       f"retrying in {backoff:.1f}s")
                record_retry(self.info, self.relay_dir, master_error(exc))  # Connecting, with the error
                time.sleep(backoff)
            except OSError as exc:  # ENOSPC, EFBIG (RLIMIT_FSIZE), EIO writing the relay log or its info
                committed = f"{self.info.master_file}:{self.info.master_pos}" if self.info.master_file else "nothing"
                raise RelayLogError(f"relay log in {self.relay_dir}: cannot write: {exc.strerror or exc}; "
                                    f"committed up to {committed}, the rest is discarded (free space and run "
                                    "again to resume)") from None
            finally:
                with contextlib.suppress(OSError):  # buffered bytes of an uncommitted batch: cut away by recover()
                    self.relay.close()
                try:
                    self.relay = RelayLog(self.relay_dir, max_size=cfg.relay_log_size, server_id=cfg.server_id,
                                          commit_interval=cfg.relay_commit_interval)
                    self.relay.recover(self.info if self.info.relay_file else None)
                except OSError:
                    pass  # the next start recovers

    def _stream(self, stub: dump_pb2_grpc.DumpFilterStub) -> bool:
        cfg = self.config
        stretches = cfg.skip_stretches and self.rename is None and self.after_unit is None  # (the relay run's)
        request = dump_pb2.DumpRequest(server_id=cfg.server_id, channel=cfg.channel, heartbeat_period=cfg.heartbeat_period,
                                       placeholder_runs=cfg.placeholder_runs, skip_stretches=stretches)
        if self.info.master_file:
            request.position.file, request.position.pos = self.info.master_file, self.info.master_pos
        elif cfg.start_gtid:
            request.gtid_state = cfg.start_gtid
        else:
            request.position.file, request.position.pos = "", 4
        if self._dumped_at is None:
            self._dumped_at = time.monotonic()
        stream: grpc._CallIterator[dump_pb2.DumpBatch] = stub.Dump(request, metadata=self._metadata())
        self._record_filters()  # while the master starts the stream (the call is under way)
        watch = NetWatch(stream, cfg.net_timeout)
        try:
            batches = iter(stream)
            while True:
                watch.waiting_since = time.monotonic()  # only waiting counts, not writing or --apply
                try:
                    batch = next(batches)
                except StopIteration:
                    break
                except grpc.RpcError:
                    if watch.fired and cfg.net_timeout is not None:  # (it fires only with a timeout)
                        raise LinkTimeoutError(cfg.net_timeout) from None
                    raise
                watch.waiting_since = None
                self._give_up_at = None  # the master answered: --connect-timeout is over
                if batch.warnings:
                    self._warn(batch.warnings)
                if batch.filter_changed_at.file:  # a live change on the master: show its rules
                    self.info.filters = self._filters_in_force(stub) or self.info.filters
                self._batch(batch)
                if batch.caught_up:
                    if not self.caught_up and self._dumped_at is not None:
                        self.caught_up_after = time.monotonic() - self._dumped_at
                    self.caught_up = True
                    if cfg.apply_url:
                        self.relay.committer.drain()  # --apply runs only what relay-log.info has committed
                        self.apply()
                    if cfg.until_caught_up:
                        if cfg.lint_wait > 0:
                            self._await_lint(stub)
                        return True
        finally:
            watch.stop()
            stream.cancel()
            # Every batch received is committed before the stream's end is handled (a retry, an
            # error recorded in relay-log.info, the summary): as when each batch waited for its own.
            self.relay.committer.close()
        return False

    # -- one batch --------------------------------------------------------------------------
    def _batch(self, batch: dump_pb2.DumpBatch) -> None:
        c = self.counters
        c.batches += 1
        events = batch.events  # protobuf (upb) copies a bytes field at each read: read once
        c.bytes_received += len(events)
        c.wire_bytes += len(events)
        self.trust.batch(batch, self.info.master_file)
        try:
            grouper = self._receive(events)
        except MalformedEventError as exc:  # offsets are the master's (log_pos - size) in its file
            raise exc.in_file(f"master {batch.position.file}") from None
        for unit in grouper.flush():  # a batch never ends inside a transaction on a faithful master
            raise BinlogError(f"the master's batch ended inside a transaction ({len(unit.events)} events)",
                              path=batch.position.file, offset=batch.position.pos)
        # Durable relay data first, then the position that says it is there (relay-log.info):
        # the committer fsyncs and writes while the next batch is received (RelayLog.commit).
        self.relay.maybe_rotate()
        info = self.info
        info.master, info.server_id, info.channel = self.config.master, self.config.server_id, self.config.channel
        info.skip_policy = self.config.skip_policy
        info.master_file, info.master_pos = batch.position.file, batch.position.pos
        if batch.gtid_state:
            info.gtid_state = batch.gtid_state
        info.relay_file, info.relay_pos = self.relay.current, self.relay.position
        info.stats = {k: self._earlier_stats.get(k, 0) + getattr(c, k) for k in c.__dataclass_fields__}
        note_batch(info, batch, events)
        self.relay.commit(info, now=batch.caught_up)  # a live slave's batch is durable at once

    def _event(self, event: Event, grouper: TransactionGrouper) -> None:
        t = event.type_code
        if t in (EventType.HEARTBEAT, EventType.HEARTBEAT_V2):
            self.counters.heartbeats += 1
            return
        if is_placeholder(event):
            self.counters.placeholders += 1  # stands in for a skipped event: advances nothing we track
            self._placeholders_in_unit = True
            # Standing in for a DDL's statement right after its GTID, it ends that group: nothing
            # else of it will come (and the batch may end here).
            unit = grouper.end_statement_group()
            if unit is not None:
                self._unit(unit)
            return
        for unit in grouper.push(event):
            self._unit(unit)

    def _receive(self, blob: bytes) -> TransactionGrouper:
        """One batch: checked whole by the scanner (sizes, CRCs) before anything is written.
        A fast unit (the common ROW transaction) whose tables the slave's own rules all keep
        (what the check on a faithful master finds) goes to the relay log as the byte range it
        came in, with no Event made; every other unit's Events go through
        the grouper, the slave's own rules and the rewrites."""
        scan = scan_batch(blob, self.fmt, self._scanner)
        self.trust.scanned(scan.last_rotate >= 0)
        self._received(scan)
        walk = BatchWalk(self, blob, scan)
        Driver(self._keep_table).drive(walk, len(scan.units))
        self.fmt = walk.fmt
        return walk.grouper

    def _received(self, scan: UnitScan) -> None:
        """A batch's events counted as a replica is sent them: each run of placeholders sent as
        one (DumpRequest.placeholder_runs) as the placeholders it stands for (its one event is
        counted where the batch's units are walked, as every placeholder is), each stretch of
        skipped transactions (DumpRequest.skip_stretches) as their events and placeholders."""
        c = self.counters
        c.events_received += scan.events
        if scan.run_events:  # (a stream with neither runs nor stretches has none)
            c.events_received += scan.run_events
            c.bytes_received += scan.run_bytes
            c.placeholders += scan.run_placeholders

    @functools.cached_property
    def _keep_table(self) -> KeepTable:
        """The slave's own answer for every table name and statement key its scanner has met (its
        rules alone: never forgotten, a Format_description event does not change them; the
        scanner and its key ids live as long as the slave); statement keys only where its rules
        decide statements by key (issue #43)."""
        from dumpfilter.rules.keep_table import KeepTable

        return KeepTable(self.engine)

    def _keeps(self) -> bytes:
        """One byte per name id, 1 kept, 0 not (the rules asked once per name)."""
        return self._keep_table.tables(self._scanner.names)

    def _keeps_tables(self, tables: memoryview, rec: UnitRecord) -> bool:
        """Whether the slave's own rules keep every table of a fast unit."""
        keep = self._keeps()
        return all(keep[i] for i in tables[rec.tables_lo : rec.tables_hi])

    def _unit(self, unit: Transaction) -> None:
        events = unit.events
        if unit.kind == CONTROL:
            event = events[0]
            if event.type_code == EventType.FORMAT_DESCRIPTION:
                self.relay.format_event(event)
                self.engine.invalidate()  # table ids restart with the server: its per-table answers too
                return
            if event.type_code in _NOT_RELAYED:
                return self.trust.control(event)  # a Rotate: the master file of what follows
        if self.relay.file is None:
            raise BinlogError("the master sent events before any Format_description event", path="<stream>")
        if unit.kind != CONTROL:
            self.trust.unit(unit)  # the slave's own rules: what they drop is a disagreement or marked
        if self._placeholders_in_unit and unit.kind != CONTROL:
            events = self._without_placeholders(unit, events)
        if self.rename is not None:
            rewritten = [self.rename(e) for e in events]
            changed = sum(a is not b for a, b in zip(rewritten, events))
            if changed:
                self.counters.rewritten += changed
                events = fix_transaction_length(rewritten)
        self.relay.write(events)
        self.relayed(len(events), sum(e.size for e in events))

    def relayed(self, events: int, size: int) -> None:
        """One unit written to the relay log (by `_unit`, or as it came by slave.receive), counted."""
        self.counters.events_relayed += events
        self.counters.bytes_relayed += size
        self.units_written += 1
        if self.after_unit is not None:
            self.after_unit(self.units_written)

    def _without_placeholders(self, unit: Transaction, events: list[Event]) -> list[Event]:
        """A unit whose placeholders were dropped: its GTID transaction_length still counted
        them, and a unit left with nothing but framing (a skipped DDL is a GTID and one
        placeholder) must still be a whole transaction: written as the empty transaction a
        MySQL replica persists for a filtered one (GTID, BEGIN, COMMIT)."""
        self._placeholders_in_unit = False
        # The grouper keeps control events that arrive inside an open group (the Rotate, FDE and
        # Previous_GTIDs of the next file after a file's last, bodiless, DDL GTID): they follow.
        body = [e for e in events if e.type_code not in CONTROL_TYPES]
        trailing = events[len(body):] if events[: len(body)] == body else None
        if trailing is None:
            return fix_transaction_length(events)
        if len(body) == 1 and body[0].is_gtid:
            return unit.emptied() + trailing
        return fix_transaction_length(body) + trailing

    def _record_filters(self) -> None:
        from dumpfilter.rules.channels import format_rule

        rules = self.config.rules
        self.info.filters = {filter_name(t): format_rule(t, getattr(rules, t)) for t in REPLICATE_TYPES}
        self.info.policy_allow = next((list(e.policy_allow) for e in reversed(self.effective)
                                       if e.channel == self.config.channel and e.policy_restricted), [])

    def _save_error(self, exc: grpc.RpcError) -> None:
        self.info.last_error = f"{exc.code().name}: {exc.details()}"
        self.info.save(self.relay_dir)

    # -- --apply ----------------------------------------------------------------------------
    def apply(self) -> None:
        """Execute the committed relay log not yet executed on the --apply server:
        `mariadb-binlog [--start-position] relay files | mariadb`, then record the executed point
        in relay-apply.info. A crash between the two re-executes that stretch (at-least-once),
        as a replica without crash-safe positions would."""
        target = parse_mysql_url(self.config.apply_url or "")  # (called under --apply only)
        done = read_json(self.relay_dir / APPLY_INFO) or {}
        names = self.relay.names
        if not names:
            return
        start_file = done.get("relay_file") or names[0]
        start_pos = int(done.get("relay_pos") or 4)
        end_file, end_pos = self.info.relay_file, self.info.relay_pos
        if (start_file, start_pos) == (end_file, end_pos) or start_file not in names:
            return
        files = names[names.index(start_file): names.index(end_file) + 1]
        apply_relay(self.relay_dir, files, start_pos, end_pos, target)
        write_json_atomic(self.relay_dir / APPLY_INFO, {
            "relay_file": end_file, "relay_pos": end_pos, "master_file": self.info.master_file,
            "master_pos": self.info.master_pos, "gtid_state": self.info.gtid_state})
        clear_sql_error(self.info)
