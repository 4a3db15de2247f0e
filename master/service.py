"""The dump service's domain logic, free of gRPC: slave registrations, per-slave streams with their
skip policies, the master-wide per-table flag words (WL#2387's FILTER_BINLOG_SEND_F, one bit per
slave), shared per-rule-group filter answers, ChangeFilter at transaction boundaries, and stats.
Every request is authorized here: a server_id belongs to the identity that registered it, and
streams are counted per identity and in all."""

from __future__ import annotations

import bisect
import dataclasses
import datetime as dt
import os
import re
import stat
import struct
import threading
import time
import zlib
from collections import Counter, _count_elements
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from binlog_codec import Event, EventType, GtidTracker, fix_transaction_length, read_format_description
from binlog_codec.constants import CHECKSUM_CRC32, HEADER_LEN, LOG_EVENT_SKIP_REPLICATION_F
from binlog_codec.event import HEADER
from binlog_codec.encode import build_event
from binlog_codec.errors import BinlogError, DumpFilterError, PositionError, RuleError, UnknownSlaveError
from binlog_codec.transactions import CONTROL
from binlog_files import binlog_paths, open_binlog
from binlog_files.gtid_start import GtidState, start_file
from binlog_files.lint import lint_files
from filter_rules.channels import FilterRegistry
from filter_rules.evaluate import Decision, RuleEngine
from filter_rules.parse import FilterChange, StartupFilters, parse_filter_statement
from filter_rules.ruleset import ALL_TYPES, REPLICATE_TYPES, RuleSet, Settings
from filter_rules.schema import SchemaModel
from filter_rules.transaction_filter import EMPTIED, KEEP, KEPT, PARTIAL, TransactionFilter, is_framing
from master.policy import OPEN, UNRESTRICTED, AccessDeniedError, Gate, Identity, MasterPolicy
from master.segments import LazyUnits, Pos, Segment, SegmentCache, Unit

HEARTBEAT, PLACEHOLDER, EMPTY_TRANSACTION = "heartbeat", "placeholder", "empty-transaction"
SKIP_POLICIES = (HEARTBEAT, PLACEHOLDER, EMPTY_TRANSACTION)
BATCH_BYTES = 256 << 10
MAX_SLAVES = 1024
# Register can lint the binlog for the new slave (issue #17) when the binlog is at most this big.
# Off by default: lint reads all of it (about 2 MB per CPU second) inside the Register call, and
# a burst of registrations (simulate's) then misses its deadlines; it wants a background job.
LINT_ON_REGISTER_BYTES = 0
LINT_WARNINGS = 5
BINLOG_IN_USE_F = 0x0001
# Types WL#2516 / binlog-* rules use that FilterRegistry (replicate-* only) does not hold.
ASSUMED_DECISIONS = "ASSUMED_DECISIONS"  # a pseudo rule hit: decisions with Decision.assumption set
_EXTRA_TYPES = tuple(t for t in ALL_TYPES if t not in REPLICATE_TYPES)


class StreamReplacedError(DumpFilterError):
    """The stream was replaced by a newer one with the same server_id, or the slave unregistered."""


class ShuttingDownError(DumpFilterError):
    """The master is shutting down and accepts no new streams."""


class ResourceExhaustedError(DumpFilterError):
    """Too many streams: in all (--max-streams) or for one identity (mapped to RESOURCE_EXHAUSTED)."""


class ChangeTimeoutError(DumpFilterError):
    """A ChangeFilter whose stream did not reach a transaction boundary before the deadline.
    The change stays queued and still takes effect at the next boundary."""


# ---------------------------------------------------------------------------------------------
# requests and results


@dataclass(frozen=True)
class ChannelSpec:
    """Requested filters for one channel (None: global), as structured rules or CRF text."""

    channel: str | None
    rules: RuleSet | None = None
    text: str | None = None


@dataclass(frozen=True)
class Registration:
    server_id: int
    hostname: str = ""
    channels: tuple[str, ...] = ("",)
    filters: tuple[ChannelSpec, ...] = ()
    settings: Settings = Settings()
    skip_policy: str = HEARTBEAT
    user: str = ""
    password: str = ""


@dataclass(frozen=True)
class Effective:
    channel: str
    rules: RuleSet
    gate: Gate


@dataclass
class RegisterResult:
    server_id: int
    effective: list[Effective]
    warnings: list[str]
    replaced: bool


@dataclass
class Batch:
    events: bytes
    position: Pos
    transactions: int = 0
    skipped_bytes: int = 0
    caught_up: bool = False
    heartbeat: bool = False
    gtid_state: str = ""
    filter_changed_at: Pos | None = None


@dataclass
class SlaveStats:
    events_read: int = 0
    bytes_read: int = 0
    events_sent: int = 0
    bytes_sent: int = 0          # every event byte sent, skip-policy events included
    kept_bytes: int = 0          # master events sent as themselves
    events_skipped: int = 0
    bytes_skipped: int = 0
    heartbeats: int = 0
    heartbeat_bytes: int = 0
    placeholders: int = 0
    placeholder_bytes: int = 0
    empty_transactions: int = 0
    empty_transaction_bytes: int = 0
    transactions_kept: int = 0
    transactions_partial: int = 0
    transactions_skipped: int = 0
    rule_hits: Counter = field(default_factory=Counter)
    assumed_decisions: int = 0   # statement decisions that assumed what the schema model lacks


@dataclass
class _PendingChange:
    change: FilterChange
    done: threading.Event = field(default_factory=threading.Event)
    position: Pos | None = None
    error: DumpFilterError | None = None


@dataclass
class _StreamHandle:
    channel: str
    cancelled: str | None = None  # None, "replaced", "shutdown"
    wake: threading.Event = field(default_factory=threading.Event)

    def cancel(self, reason: str) -> None:
        self.cancelled = reason
        self.wake.set()


class _SlaveDecider:
    """What TransactionFilter asks, for one slave: tables by its bit in the shared flag words,
    statements by its rule engine, both ANDed with the master policy; rule hits collected."""

    def __init__(self, words: FlagWords, bit: int, engine: RuleEngine, gate: Gate):
        self.words, self.bit, self.engine, self.gate = words, 1 << bit, engine, gate
        self.hits: Counter = Counter()

    def table_kept(self, db: str, table: str) -> bool:
        kept = bool(self.words.get(db, table) & self.bit)
        counted = self.engine.decide_table(db, table).counted
        if counted:
            self.hits.update(counted)
        if not kept and self.gate.restricted and not self.gate.table_allowed(db, table):
            self.hits["MASTER_POLICY"] += 1
        return kept

    def decide_statement(self, sql: str, current_db: str | None) -> Decision:
        decision = self.engine.decide_statement(sql, current_db)
        self.hits.update(decision.counted)
        if decision.assumption is not None:
            self.hits[ASSUMED_DECISIONS] += 1
        if decision.apply and self.gate.restricted and not self.gate.statement_allowed(sql, current_db):
            self.hits["MASTER_POLICY"] += 1
            return dataclasses.replace(decision, apply=False, rule="master-policy",
                                       reason="master policy: the statement touches data outside what this slave may receive")
        return decision


@dataclass
class _SlaveState:
    """The rules a slave's stream filters with right now (swapped only at transaction boundaries)."""

    channel: str
    rules: RuleSet
    engine: RuleEngine
    key: tuple
    decider: _SlaveDecider
    txn_filter: TransactionFilter


class Slave:
    def __init__(self, reg: Registration, registry: FilterRegistry, extra: dict, gate: Gate, bit: int,
                 owner: str = ""):
        self.reg = reg
        self.owner = owner          # the identity that registered this server_id
        self.server_id = reg.server_id
        self.registry = registry
        self.extra = extra          # effective_* / binlog_* rules (global: FilterRegistry has no place for them)
        self.gate = gate
        self.bit = bit
        self.stats = SlaveStats()
        self.stream: _StreamHandle | None = None
        self.state: _SlaveState | None = None
        self.position: Pos | None = None
        self.pending: list[_PendingChange] = []
        self.lock = threading.Lock()
        self.registered_at = dt.datetime.now(dt.timezone.utc)

    def rules_for(self, channel: str) -> RuleSet:
        return self.registry.rules_for(channel).replace(**self.extra)

    def effective(self) -> list[Effective]:
        return [Effective(name, self.rules_for(name), self.gate) for name in self.registry.channels]


class FlagWords:
    """One word per (db, table): bit i set when slave i keeps the table (its rules AND its policy).
    Computed once per table for all slaves (slaves with equal rules evaluate once), read with one
    dict lookup; thrown away whenever a slave's rules change or slaves come and go."""

    def __init__(self, members: Callable[[], list[tuple[int, RuleEngine, Gate]]]):
        self._members = members
        self._words: dict[tuple[str, str], int] = {}
        self._lock = threading.Lock()
        self.computed = 0
        self.generation = 0   # bumped at every invalidation: per-segment masks are recomputed

    def get(self, db: str, table: str) -> int:
        word = self._words.get((db, table))
        return self._compute(db, table) if word is None else word

    def _compute(self, db: str, table: str) -> int:
        with self._lock:
            word = 0
            answers: dict[tuple[int, Gate], bool] = {}
            for bit, engine, gate in self._members():
                key = (id(engine), gate)
                kept = answers.get(key)
                if kept is None:
                    kept = answers[key] = engine.table_kept(db, table) and gate.table_allowed(db, table)
                if kept:
                    word |= 1 << bit
            self._words[(db, table)] = word
            self.computed += 1
            return word

    def invalidate(self) -> None:
        with self._lock:
            self._words = {}
            self.generation += 1


# ---------------------------------------------------------------------------------------------
# the service


class DumpService:
    def __init__(self, binlog_dir: str | Path, *, policy: MasterPolicy | None = None, poll_interval: float = 0.05,
                 segment_bytes: int = 1 << 20, cache_bytes: int = 8 << 20, batch_bytes: int = BATCH_BYTES,
                 fast: bool = True, verify_checksums: bool = True, schema: SchemaModel | None = None,
                 max_streams: int | None = None, max_streams_per_identity: int | None = None,
                 lint_bytes: int = LINT_ON_REGISTER_BYTES):
        self.binlog_dir = Path(binlog_dir)
        self.schema = schema  # the starting schema (--schema); each rule engine replays the DDL into a copy
        if not self.binlog_dir.is_dir():
            raise PositionError(f"binlog directory {self.binlog_dir} does not exist")
        self.policy = policy
        self.poll_interval = poll_interval
        self.batch_bytes = batch_bytes
        # CRC32s are checked as the binlog is read (MySQL's source_verify_checksum=ON); off, a
        # corrupt event body reaches the slaves, whose receivers check what they get.
        self.segments = SegmentCache(self.binlog_dir, segment_bytes=segment_bytes, cache_bytes=cache_bytes, fast=fast,
                                     verify_checksums=verify_checksums)
        self.fast = fast  # False: every unit through TransactionFilter (the reference path, for tests)
        self.slaves: dict[int, Slave] = {}
        self.lock = threading.RLock()
        self.words = FlagWords(self._members)
        self._engines: dict[tuple[RuleSet, Settings], RuleEngine] = {}
        self._group_locks: dict[tuple, threading.Lock] = {}
        self.shutting_down = False
        self.max_streams = max_streams                            # None: no limit
        self.max_streams_per_identity = max_streams_per_identity  # a policy entry's max_streams wins
        self.lint_bytes = lint_bytes  # lint the binlog for each Register up to this size (0: never)
        self._lint_cache: dict = {}  # the last lint's breaks, by (rules, settings, binlog files and sizes)

    # -- authorization ----------------------------------------------------------------------
    def authenticate(self, user: str = "", password: str = "", certificate_name: str | None = None) -> Identity:
        """The caller's identity. Without a policy file the master is open (every caller may do
        everything, as before policies existed)."""
        if self.policy is None:
            return OPEN
        return self.policy.authenticate(user, password, certificate_name)

    def _owned(self, server_id: int, caller: Identity | None) -> Slave:
        """The slave `caller` may act on. Another identity's slave answers exactly as an unknown
        server_id does: a caller cannot learn which server_ids others use."""
        slave = self._slave(server_id)
        if caller is not None and not caller.admin and slave.owner != caller.name:
            raise UnknownSlaveError(f"server_id {server_id} is not registered with this master")
        return slave

    def _visible(self, server_id: int, caller: Identity | None) -> list[Slave]:
        if server_id:
            return [self._owned(server_id, caller)]
        slaves = list(self.slaves.values())
        if caller is not None and not caller.admin:
            slaves = [s for s in slaves if s.owner == caller.name]
        return slaves

    # -- registrations ----------------------------------------------------------------------
    def register(self, reg: Registration, caller: Identity | None = None) -> RegisterResult:
        """`caller`: the authenticated identity (the gRPC layer's); None authenticates with the
        registration's own credentials."""
        if caller is None:
            caller = self.authenticate(reg.user, reg.password)
        if reg.server_id <= 0 or reg.server_id > 0xFFFFFFFF:
            raise RuleError(f"server_id {reg.server_id} must be between 1 and 4294967295")
        if reg.skip_policy not in SKIP_POLICIES:
            raise RuleError(f"skip policy {reg.skip_policy!r} is not one of {', '.join(SKIP_POLICIES)}")
        gate = self.policy.gate_for_identity(caller, reg.server_id) if self.policy else UNRESTRICTED
        registry, extra = self._build_filters(reg)
        for name in registry.channels:  # compile now: malformed combinations fail the Register
            self._engine(registry.rules_for(name).replace(**extra), reg.settings)
        with self.lock:
            old = self.slaves.get(reg.server_id)
            if old is not None and old.owner != caller.name:
                # A server_id is bound to the identity that registered it: another identity, an
                # admin too, cannot take its place (MySQL's kill_zombie_dump_threads would let it).
                raise AccessDeniedError(f"identity {caller.name!r} may not register server_id {reg.server_id}: "
                                        "it is registered by another identity")
            if old is not None:
                # MySQL: a second connection with the same server_id kills the first one's dump
                # thread (kill_zombie_dump_threads). We do the same: the newer registration wins.
                self._end_stream(old, "replaced")
                bit = old.bit
            else:
                used = {s.bit for s in self.slaves.values()}
                bit = next((b for b in range(MAX_SLAVES) if b not in used), None)
                if bit is None:
                    raise ResourceExhaustedError(f"too many slaves registered (at most {MAX_SLAVES})")
            slave = Slave(reg, registry, extra, gate, bit, owner=caller.name)
            slave.state = self._state(slave, reg.channels[0] if reg.channels else "")
            self.slaves[reg.server_id] = slave
            self.words.invalidate()
        return RegisterResult(reg.server_id, slave.effective(), [*registry.warnings, *self._lint_warnings(slave)],
                              old is not None)

    def _lint_warnings(self, slave: Slave) -> list[str]:
        """`dumpfilter lint`'s predictions for this slave over the binlog the master holds now:
        where a replica with these filters would stop, one warning each (the first
        LINT_WARNINGS). Linting reads the whole binlog, so above `lint_bytes` it is not run at
        Register and the warning says so."""
        if self.lint_bytes <= 0:
            return []
        try:
            paths = binlog_paths(self.binlog_dir)
            # Regular files only: an index naming a FIFO or a device must not block a Register.
            if not paths or not all(p.is_file() and not p.is_symlink() for p in paths):
                return []
            total = sum(p.stat().st_size for p in paths)
        except (BinlogError, OSError):
            return []
        if total > self.lint_bytes:
            return [f"lint: not run at Register (the binlog holds {total / 1e6:.0f} MB, above "
                    f"{self.lint_bytes / 1e6:.0f} MB): run `dumpfilter lint` on it"]
        rules = slave.rules_for(slave.state.channel if slave.state is not None else "")
        key = (rules, slave.reg.settings, tuple((p.name, p.stat().st_size) for p in paths))
        breaks = self._lint_cache.get(key)  # slaves with equal rules over the same binlog: linted once
        if breaks is None:
            try:
                breaks = lint_files(paths, rules, slave.reg.settings, schema=self.schema)
            except DumpFilterError as exc:
                return [f"lint: not run: {exc}"]
            self._lint_cache = {key: breaks}
        out = []
        for b in breaks[:LINT_WARNINGS]:
            cause = b.cause
            why = (f"; the event it needs was skipped at {cause.file}:{cause.pos} by {cause.rule}"
                   if cause is not None and cause.file else f"; {cause.rule}" if cause is not None else "")
            gtid = f" (GTID {b.gtid})" if b.gtid else ""
            out.append(f"lint: a replica with these filters would stop at {b.file}:{b.pos}{gtid} with error "
                       f"{b.errno}: {b.message}{why}")
        if len(breaks) > LINT_WARNINGS:
            out.append(f"lint: {len(breaks) - LINT_WARNINGS} more predicted break(s): run `dumpfilter lint`")
        return out

    def _build_filters(self, reg: Registration) -> tuple[FilterRegistry, dict]:
        channels = tuple(reg.channels) or ("",)
        startup_global: dict[str, tuple] = {}
        startup_channels: dict[str, dict[str, tuple]] = {}
        extra: dict[str, tuple] = {}
        texts: list[FilterChange] = []
        warnings: list[str] = []
        for spec in reg.filters:
            if spec.text is not None:
                change = parse_filter_statement(spec.text)
                if spec.channel is not None and change.channel is None:
                    change = FilterChange(change.changes, spec.channel)
                elif spec.channel is not None and change.channel != spec.channel:
                    raise RuleError(f"FOR CHANNEL '{change.channel}' in filters given for channel '{spec.channel}'")
                texts.append(change)
                continue
            rules = spec.rules or RuleSet()
            for rule_type in ALL_TYPES:
                values = getattr(rules, rule_type)
                if not values:
                    continue
                if rule_type in _EXTRA_TYPES:
                    extra[rule_type] = extra.get(rule_type, ()) + values
                elif spec.channel is None:
                    startup_global[rule_type] = startup_global.get(rule_type, ()) + values
                else:
                    per = startup_channels.setdefault(spec.channel, {})
                    per[rule_type] = per.get(rule_type, ()) + values
        startup = StartupFilters(RuleSet(**startup_global), startup_channels)
        registry = FilterRegistry.from_startup(startup, channels, reg.settings)
        for change in texts:
            extra_changes = [(t, r) for t, r in change.changes if t in _EXTRA_TYPES]
            for rule_type, rules in extra_changes:
                extra[rule_type] = rules
            change = FilterChange(tuple((t, r) for t, r in change.changes if t not in _EXTRA_TYPES), change.channel)
            if change.channel is not None and change.channel not in registry.channels:
                warnings.append(f"filters for channel '{change.channel}' which does not exist were discarded")
                continue
            registry.change_replication_filter(change)
        registry.warnings.extend(warnings)
        return registry, extra

    def unregister(self, server_id: int, caller: Identity | None = None) -> bool:
        with self.lock:
            slave = self._owned(server_id, caller)
            had_stream = slave.stream is not None
            self._end_stream(slave, "replaced")
            del self.slaves[server_id]
            self.words.invalidate()
        return had_stream

    def _slave(self, server_id: int) -> Slave:
        slave = self.slaves.get(server_id)
        if slave is None:
            raise UnknownSlaveError(f"server_id {server_id} is not registered with this master")
        return slave

    def _end_stream(self, slave: Slave, reason: str) -> None:
        if slave.stream is not None:
            slave.stream.cancel(reason)
        for pending in slave.pending:
            pending.error = StreamReplacedError("the stream ended before the change took effect")
            pending.done.set()
        slave.pending = []

    def _members(self) -> list[tuple[int, RuleEngine, Gate]]:
        return [(s.bit, s.state.engine, s.gate) for s in list(self.slaves.values()) if s.state is not None]

    def _engine(self, rules: RuleSet, settings: Settings) -> RuleEngine:
        key = (rules, settings)
        engine = self._engines.get(key)
        if engine is None:
            engine = self._engines[key] = RuleEngine(rules, settings,
                                                     schema=self.schema.copy() if self.schema is not None else None)
        return engine

    def _state(self, slave: Slave, channel: str) -> _SlaveState:
        if channel not in slave.registry.channels:
            raise UnknownSlaveError(f"server_id {slave.server_id} has no channel '{channel}' "
                                    f"(registered channels: {', '.join(map(repr, slave.registry.channels))})")
        rules = slave.rules_for(channel)
        engine = self._engine(rules, slave.reg.settings)
        decider = _SlaveDecider(self.words, slave.bit, engine, slave.gate)
        key = (rules, slave.reg.settings, slave.gate)
        return _SlaveState(channel, rules, engine, key, decider, TransactionFilter(decider, empty_transactions=KEEP))

    # -- ChangeFilter -----------------------------------------------------------------------
    def change_filter(self, server_id: int, text: str, timeout: float | None = None,
                      caller: Identity | None = None) -> tuple[Pos | None, bool, list[Effective]]:
        slave = self._owned(server_id, caller)
        change = parse_filter_statement(text)
        if change.channel is not None and change.channel not in slave.registry.channels:
            raise RuleError(f"FOR CHANNEL '{change.channel}': no such replication channel on server_id {server_id}")
        self._check_change(slave, change)
        with slave.lock:
            handle = slave.stream
            if handle is None:
                self._apply_change(slave, change)
                return slave.position, False, slave.effective()
            pending = _PendingChange(change)
            slave.pending.append(pending)
        handle.wake.set()
        if not pending.done.wait(timeout):
            raise ChangeTimeoutError(f"the stream of server_id {server_id} did not reach a transaction boundary "
                                     f"within {timeout:.1f}s; the change stays queued")
        if pending.error is not None:
            raise pending.error
        return pending.position, True, slave.effective()

    def _check_change(self, slave: Slave, change: FilterChange) -> None:
        """Compile the rules the change would produce, so a bad change fails the RPC, not the stream."""
        extra = dict(slave.extra)
        extra.update({t: r for t, r in change.changes if t in _EXTRA_TYPES})
        for name in slave.registry.channels:
            rules = change.apply(slave.rules_for(name)) if change.channel in (None, name) else slave.rules_for(name)
            self._engine(rules.replace(**extra), slave.reg.settings)

    def _apply_change(self, slave: Slave, change: FilterChange) -> None:
        for rule_type, rules in change.changes:
            if rule_type in _EXTRA_TYPES:
                slave.extra[rule_type] = rules
        plain = FilterChange(tuple((t, r) for t, r in change.changes if t not in _EXTRA_TYPES), change.channel)
        if plain.changes:
            slave.registry.change_replication_filter(plain)
        channel = slave.state.channel if slave.state else ""
        slave.state = self._state(slave, channel)
        self.words.invalidate()

    def _apply_pending(self, slave: Slave, position: Pos) -> Pos | None:
        """At a transaction boundary: apply queued changes; returns where they took effect."""
        with slave.lock:
            pending, slave.pending = slave.pending, []
        for item in pending:
            try:
                self._apply_change(slave, item.change)
                item.position = position
            except DumpFilterError as exc:
                item.error = exc
            item.done.set()
        return position if pending else None

    # -- ListFilters, Stats ----------------------------------------------------------------
    def list_filters(self, server_id: int = 0, caller: Identity | None = None) -> tuple[list[dict], list[dict]]:
        slaves = self._visible(server_id, caller)
        rows, global_rows = [], []
        for slave in slaves:
            for row in slave.registry.applier_filters():
                rows.append({"server_id": slave.server_id, **row})
            for rule_type, values in slave.extra.items():
                rows.append({"server_id": slave.server_id, "CHANNEL_NAME": "", "FILTER_NAME": rule_type.upper(),
                             "FILTER_RULE": ",".join("->".join(v) if isinstance(v, tuple) else v for v in values),
                             "CONFIGURED_BY": "STARTUP_OPTIONS", "ACTIVE_SINCE": slave.registered_at,
                             "COUNTER": slave.stats.rule_hits.get(rule_type.upper(), 0)})
            if slave.gate.restricted:
                for name in slave.registry.channels:
                    rows.append({"server_id": slave.server_id, "CHANNEL_NAME": name, "FILTER_NAME": "MASTER_POLICY_ALLOW",
                                 "FILTER_RULE": ",".join(slave.gate.allow), "CONFIGURED_BY": "MASTER_POLICY",
                                 "ACTIVE_SINCE": slave.registered_at,
                                 "COUNTER": slave.stats.rule_hits.get("MASTER_POLICY", 0)})
            for row in slave.registry.applier_global_filters():
                global_rows.append({"server_id": slave.server_id, **row})
        return rows, global_rows

    def stats(self, server_id: int = 0, caller: Identity | None = None) -> list[tuple[Slave, Pos, int]]:
        """(slave, binlog end, bytes behind) for one or every slave `caller` may see."""
        slaves = self._visible(server_id, caller)
        try:
            end = self.segments.end()
        except DumpFilterError:
            end = ("", 0)
        return [(s, end, self.segments.bytes_between(s.position, end) if s.position else 0) for s in slaves]

    # -- shutdown ---------------------------------------------------------------------------
    def shutdown(self) -> None:
        """Refuse new streams and ask every running stream to end after its current batch."""
        with self.lock:
            self.shutting_down = True
            for slave in self.slaves.values():
                if slave.stream is not None:
                    slave.stream.cancel("shutdown")

    # -- Dump -------------------------------------------------------------------------------
    def stream(self, server_id: int, *, channel: str = "", start: Pos | None = None, gtid_state: str | None = None,
               heartbeat_period: float = 1.0, is_active: Callable[[], bool] = lambda: True,
               caller: Identity | None = None) -> Iterator[Batch]:
        """Batches of whole transactions from `start` (or from the first file, skipping what
        `gtid_state` contains) until cancelled. Errors before the first batch are raised from the
        first next()."""
        self._owned(server_id, caller)  # authorized first: an unauthorized caller learns nothing of the index
        if start and start[0]:
            self._check_binlog_name(start[0])
        with self.lock:
            if self.shutting_down:
                raise ShuttingDownError("the master is shutting down")
            slave = self._owned(server_id, caller)
            self._check_stream_limits(slave, caller)
            handle = _StreamHandle(channel)
            state = self._state(slave, channel)
            self._end_stream(slave, "replaced")
            slave.stream = handle
            old, slave.state = slave.state, state
            if old is None or old.engine is not state.engine:
                self.words.invalidate()  # the flag words only depend on (bit, engine, gate)
        try:
            yield from _Stream(self, slave, handle, start, gtid_state, heartbeat_period, is_active).run()
        finally:
            with self.lock:
                if slave.stream is handle:
                    slave.stream = None


    def _check_binlog_name(self, name: str) -> None:
        """A start file must be a regular file named by the binlog index (or the directory's
        numbered series): never a path, never a FIFO or device. Every refused name gets the same
        answer, so the reply tells nothing about what exists outside the index."""
        unknown = PositionError(f"binlog file {name[:256]!r} is not in the binlog index (purged or never written)")
        if "/" in name or "\\" in name or "\0" in name or name in (".", ".."):
            raise unknown
        try:
            names = {p.name: p for p in binlog_paths(self.binlog_dir)}
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

    def _check_stream_limits(self, slave: Slave, caller: Identity | None) -> None:
        """Under self.lock. The stream being replaced (same server_id) does not count."""
        others = [s for s in self.slaves.values() if s.stream is not None and s is not slave]
        if self.max_streams is not None and len(others) >= self.max_streams:
            raise ResourceExhaustedError(f"the master already serves {len(others)} streams (--max-streams)")
        limit = caller.max_streams if caller is not None and caller.max_streams is not None \
            else self.max_streams_per_identity
        owner = slave.owner
        if limit is not None:
            mine = sum(1 for s in others if s.owner == owner)
            if mine >= limit:
                raise ResourceExhaustedError(f"identity {owner!r} already has {mine} streams (at most {limit})")


def _gtid_filter(state: GtidState | None) -> Callable[[Event], bool] | None:
    """A predicate 'this GTID is already in the slave's state' for a start by GTID."""
    if state is None:
        return None
    if state.mysql is not None:
        wanted = state.mysql
        return lambda event: not event.gtid_info.anonymous and (
            event.gtid_info.source, event.gtid_info.tag, event.gtid_info.gno) in wanted
    limits = state.limits
    # MariaDB's dump thread skips, per domain, every GTID at or below the slave's sequence number.
    known = lambda event: event.gtid_info.gno <= limits.get(event.gtid_info.domain, -1)  # noqa: E731
    known.limits = limits  # for the fast path: whole segments past the state skip nothing
    return known


class _Stream:
    """One Dump call: walks shared segments, filters each unit for this slave, applies its skip
    policy and cuts batches at transaction boundaries."""

    def __init__(self, service: DumpService, slave: Slave, handle: _StreamHandle, start: Pos | None,
                 gtid_state: str | None, heartbeat_period: float, is_active: Callable[[], bool]):
        self.svc, self.slave, self.handle = service, slave, handle
        self.policy = slave.reg.skip_policy
        state = GtidState.parse(gtid_state) if gtid_state and gtid_state.strip() else None
        self.skip_known = _gtid_filter(state)
        if state is not None:
            # Like the servers' dump threads: start in the newest file whose Previous_GTIDs /
            # Gtid_list the slave already has, not at the first file.
            start = (start_file(binlog_paths(service.binlog_dir), state).name, 4)
        file, pos = start if start and start[0] else (service.segments.first_file(), 4)
        self.pos: Pos = (file, max(pos, 4) if start and start[0] else 4)
        self.heartbeat_period = heartbeat_period if heartbeat_period > 0 else 1.0
        self.is_active = is_active
        self.tracker = GtidTracker()
        self.fmt = None
        self.master_server_id = 0
        self.parts: list[bytes] = []
        self.batch_bytes = 0
        self.batch_units = 0
        self.batch_skipped = 0
        self.pending_hb: Pos | None = None
        self.changed_at: Pos | None = None
        # The run loop over fast units (see _fast_run): off when a GTID start has to be checked
        # unit by unit; `occurrences` are Table_maps whose rule hits are not counted yet.
        self.gtid_limits: dict[int, int] | None = getattr(self.skip_known, "limits", None)
        self.gtid_wanted = state.mysql if state is not None else None  # a MySQL GTID start's set
        self.fast = service.fast
        self.occurrences: Counter = Counter()
        self._states: tuple | None = None
        self._hb_parts: tuple | None = None

    def run(self) -> Iterator[Batch]:
        svc, slave = self.svc, self.slave
        first = self._start_fde()
        seg = svc.segments.get(self.pos)  # a bad start position fails here, before any batch
        if first is not None:
            self._send(first, kept=True)
        last_sent = time.monotonic()
        reported_end_at: Pos | None = None
        while True:
            if self.handle.cancelled == "replaced":
                raise StreamReplacedError(f"server_id {slave.server_id}: replaced by a newer registration or "
                                          "stream with the same server_id, or unregistered")
            if self.handle.cancelled or not self.is_active():
                return
            units = seg.units
            i, n = 0, len(units)
            while i < n:
                if slave.pending:
                    self._boundary()
                j = self._fast_runs(seg, i) if self.fast else i
                if j == i:
                    self._unit(units[i])
                    j = i + 1
                i = j
                if self.batch_bytes >= svc.batch_bytes:
                    yield self._batch(False)
                    last_sent = time.monotonic()
                    if self.handle.cancelled:
                        break
            if slave.pending:
                self._boundary()
            if seg.units:
                caught_up = seg.at_end and self._at_binlog_end()
                yield self._batch(caught_up)
                last_sent = time.monotonic()
                if caught_up:
                    reported_end_at = self.pos
            elif seg.at_end:
                now = time.monotonic()
                if reported_end_at != self.pos or now - last_sent >= self.heartbeat_period:
                    caught_up = self._at_binlog_end()
                    yield self._idle_heartbeat(caught_up)
                    last_sent = now
                    reported_end_at = self.pos
                self.handle.wake.wait(svc.poll_interval)
                self.handle.wake.clear()
            if self.handle.cancelled or not self.is_active():
                continue
            seg = svc.segments.get(self.pos)

    def _start_fde(self) -> Event | None:
        """The start file's FDE, sent first when the stream starts after offset 4. Like MySQL's
        Binlog_sender: log_pos 0 (the slave must not count it) and the in-use flag cleared."""
        file, pos = self.pos
        path = self.svc.binlog_dir / file
        if not path.exists():
            raise PositionError(f"binlog file '{file}' is not in {self.svc.binlog_dir} (purged or never written)")
        with open_binlog(path) as f:
            fde, fmt = read_format_description(f, str(path))
        self.fmt = fmt
        self.master_server_id = fde.server_id
        if pos <= 4:
            return None
        return fde.with_header(log_pos=0, flags=fde.flags & ~BINLOG_IN_USE_F)

    def _at_binlog_end(self) -> bool:
        try:
            end = self.svc.segments.end()
        except DumpFilterError:
            return False
        if self.pos[0] == end[0]:
            return self.pos[1] >= end[1]
        # After the last file's Rotate, before the server creates the file it names.
        return self.pos[1] == 4 and self.pos[0] > end[0] and not (self.svc.binlog_dir / self.pos[0]).exists()

    def _boundary(self) -> None:
        self._flush_hits()  # counted under the rules they were decided with
        at = self.svc._apply_pending(self.slave, self.pos)
        if at is not None:
            self.changed_at = at

    # -- one unit ---------------------------------------------------------------------------
    def _unit(self, unit: Unit) -> None:
        slave, stats = self.slave, self.slave.stats
        txn = unit.txn
        stats.events_read += len(txn.events)
        stats.bytes_read += unit.size
        self.batch_units += 1
        if txn.kind == CONTROL:
            event = txn.events[0]
            t = event.type_code
            if t == EventType.FORMAT_DESCRIPTION:
                slave.state.txn_filter.reset()
                self.fmt = event.fmt
                self.master_server_id = event.server_id
            elif t in (EventType.PREVIOUS_GTIDS, EventType.MARIADB_GTID_LIST):
                self.tracker.start_from(event)
            if t in (EventType.HEARTBEAT, EventType.HEARTBEAT_V2):
                self._advance(unit)
                return
            self._flush_heartbeat()
            self._send(event, kept=True)
            self._advance(unit)
            return
        gtid_event = txn.gtid_event
        if gtid_event is not None and self.skip_known is not None and self.skip_known(gtid_event):
            self._advance(unit)  # before the slave's GTID start: never sent, not a filter decision
            return
        if gtid_event is not None:
            self.tracker.add(gtid_event)
        result, hits = self._result(unit)
        if hits:
            stats.rule_hits.update(hits)
            stats.assumed_decisions += hits.get(ASSUMED_DECISIONS, 0)
            self._count_filter_hits(hits)
        if result.outcome in (KEPT, PARTIAL):
            events = result.events
            if self.policy == PLACEHOLDER and result.outcome == PARTIAL:
                events = self._with_placeholders(txn.events, {e.pos: e for e in result.events})
            self._flush_heartbeat()
            for event in events:
                self._send(event, kept=not _is_placeholder(event))
            kept_bytes = sum(e.size for e in result.events)
            stats.transactions_kept += result.outcome == KEPT
            stats.transactions_partial += result.outcome == PARTIAL
            self._skipped(len(txn.events) - len(result.events), unit.size - kept_bytes)
        else:
            stats.transactions_skipped += 1
            self._skipped(len(txn.events), unit.size)
            if self.policy == PLACEHOLDER:
                self._flush_heartbeat()
                for event in self._with_placeholders(txn.events, {}):
                    self._send(event, kept=False, policy_bytes=True)
            elif self.policy == EMPTY_TRANSACTION and result.outcome == EMPTIED:
                self._flush_heartbeat()
                for event in result.events:
                    self._send(event, kept=False)
                    stats.empty_transaction_bytes += event.size
                stats.empty_transactions += 1
            else:  # heartbeat, and empty-transaction for units without a GTID
                self.pending_hb = unit.end
        self._advance(unit)

    def _row(self, seg: Segment) -> bytes | None:
        """This slave's answer for each unit of `seg`, one byte per unit: _KEEP (every table
        kept), _SKIP (none), _PARTIAL, or _SLOW (not a fast unit). From the segment's per-unit
        masks (one AND/OR per unit for every slave) and this slave's bit; cached per segment and
        flag-word generation."""
        index = seg.index
        if index is None or self.fmt is None:
            return None
        words = self.svc.words
        states = self._states
        if states is None or states[0] is not seg or states[1] != words.generation:
            if self.skip_known is not None and self._holds_known_gtids(index):
                # Started by GTID: a segment holding GTIDs the slave already has goes unit by unit.
                self._states = (seg, words.generation, None, None)
                return None
            bit = 1 << self.slave.bit
            get = words.get
            rows = index.rows_for(lambda db, table: get(db, table) & bit)
            if rows is None:  # the reference reader's segments: per-unit masks
                keep_all, keep_any = index.masks_for(seg.units, words)
                rows = (bytes([_SLOW if not f else _KEEP if k & bit else _PARTIAL if a & bit else _SKIP
                               for f, k, a in zip(index.fast, keep_all, keep_any)]), None)
            states = self._states = (seg, words.generation, *rows)
        return states[2]

    def _holds_known_gtids(self, index) -> bool:
        """Whether a segment may hold GTIDs this slave's start state already has (or GTIDs of the
        other flavor, which the state's predicate judges unit by unit)."""
        limits, wanted = self.gtid_limits, self.gtid_wanted
        mysql, mariadb = index.mysql_gtids, index.gtids
        if limits is not None:  # MariaDB state: domain -> last seq_no
            return mysql is not None or any(g is not None and g[1] <= limits.get(g[0][0], -1) for g in mariadb)
        if wanted is not None:  # MySQL GTID set
            return any(g is not None for g in mariadb) or (
                mysql is not None and any(g is not None and g in wanted for g in mysql))
        return True

    def _fast_runs(self, seg: Segment, i: int) -> int:
        """Handle fast units from `i` on, in runs that get the same answer for this slave (all
        kept; or all skipped under the heartbeat policy), without an Event or a TransactionFilter
        call per unit; the segment's prefix sums give the counts. Stops at a unit that needs
        more (partly kept, skipped under another policy, not a fast unit), when the batch is
        full (after the unit that fills it, as the reference path cuts), or when a ChangeFilter
        is pending. Returns the index of the first unit not handled."""
        row = self._row(seg)
        if row is None:
            return i
        n = len(row)
        index, units = seg.index, seg.units
        cum, evc, run_bytes = index.cum, index.evc, index.run_bytes
        end_of = units.end_of if isinstance(units, LazyUnits) else (lambda k: units[k].end)
        slave, stats = self.slave, self.slave.stats
        limit = self.svc.batch_bytes
        skip_ok = self.policy == HEARTBEAT
        match_keep, match_skip, bisect_left = _KEEP_RUN.match, _SKIP_RUN.match, bisect.bisect_left
        start = i
        kept_units = partial_units = skipped_units = sent_bytes = sent_events = 0
        partial_ok = self.policy != PLACEHOLDER
        bit = 1 << slave.bit
        while i < n and not slave.pending:
            state = row[i]
            if state == _KEEP:
                j = match_keep(row, i).end()
                if self.pending_hb is not None:
                    self._flush_heartbeat()
                # Cut where the reference path would: after the unit that fills the batch.
                cut = bisect_left(cum, limit - self.batch_bytes + cum[i], i + 1, j + 1)
                if cut <= j:
                    j = cut
                self.parts.append(run_bytes(i, j))
                nbytes = cum[j] - cum[i]
                self.batch_bytes += nbytes
                kept_units += j - i
                sent_bytes += nbytes
                sent_events += evc[j] - evc[i]
                i = j
                if self.batch_bytes >= limit:
                    break
            elif state == _SKIP and skip_ok:
                j = match_skip(row, i).end()
                skipped_units += j - i
                self.pending_hb = end_of(j - 1)
                i = j
            elif state == _PARTIAL and partial_ok:
                keep = self._states[3]
                kept = index.partial(i, keep) if keep is not None else _partial_bytes(units[i], self.svc.words.get, bit)
                if kept is None:
                    break
                out, events = kept
                if self.pending_hb is not None:
                    self._flush_heartbeat()
                self.parts.append(out)
                self.batch_bytes += len(out)
                partial_units += 1
                sent_bytes += len(out)
                sent_events += events
                i += 1
                if self.batch_bytes >= limit:
                    break
            else:
                break
        if i == start:
            return i
        nevents = evc[i] - evc[start]
        nbytes = cum[i] - cum[start]
        stats.events_read += nevents
        stats.bytes_read += nbytes
        self.batch_units += i - start
        if index.mysql_gtids is not None:  # MySQL units (Anonymous_GTID ones have none)
            add = self.tracker.mysql.add
            for g in index.mysql_gtids[start:i]:
                if g is not None:
                    add(g[0], g[2], g[1])
        elif index.gtids[i - 1] is not None:  # MariaDB units (MySQL Anonymous_GTID units have none)
            if index.one_gtid_source:
                self.tracker.mariadb.gtids.update((index.gtids[i - 1],))
            else:
                self.tracker.mariadb.gtids.update(index.gtids[start:i])
        _count_elements(self.occurrences, index.occ[index.toff[start] : index.toff[i]])
        stats.events_sent += sent_events
        stats.bytes_sent += sent_bytes
        stats.kept_bytes += sent_bytes
        stats.transactions_kept += kept_units
        stats.transactions_partial += partial_units
        stats.transactions_skipped += skipped_units
        stats.events_skipped += nevents - sent_events
        stats.bytes_skipped += nbytes - sent_bytes
        self.batch_skipped += nbytes - sent_bytes
        self.pos = slave.position = end_of(i - 1)
        return i

    def _flush_hits(self) -> None:
        """Rule hits of the Table_maps decided in runs: what _SlaveDecider.table_kept counts per
        Table_map (the engine's COUNTER names, MASTER_POLICY when the policy refused it), added
        to the stats and P_S counters as the reference path adds its per-unit hits."""
        occurrences = self.occurrences
        if not occurrences:
            return
        self.occurrences = Counter()
        state = self.slave.state
        decider, engine, gate = state.decider, state.engine, self.slave.gate
        hits: Counter = Counter()
        for (db, table), count in occurrences.items():
            counted = engine.decide_table(db, table).counted
            for name in counted:
                hits[name] += count
            if count > 1 and counted:
                engine.counters.update({name: count - 1 for name in counted})
            if gate.restricted and not (decider.words.get(db, table) & decider.bit) \
                    and not gate.table_allowed(db, table):
                hits["MASTER_POLICY"] += count
        hits = +hits
        if hits:
            self.slave.stats.rule_hits.update(hits)
            self._count_filter_hits(hits)

    def _advance(self, unit: Unit) -> None:
        self.pos = unit.end
        self.slave.position = unit.end

    def _skipped(self, events: int, size: int) -> None:
        self.slave.stats.events_skipped += max(0, events)
        self.slave.stats.bytes_skipped += max(0, size)
        self.batch_skipped += max(0, size)

    def _result(self, unit: Unit):
        """The slave's rule group's answer for a unit: computed by the first slave of the group
        that reaches it, then shared (the Unit and its Events are shared through the segment cache)."""
        state = self.slave.state
        answer = unit.results.get(state.key)
        if answer is None:
            lock = self.svc._group_locks.get(state.key)
            if lock is None:
                lock = self.svc._group_locks.setdefault(state.key, threading.Lock())
            with lock:
                answer = unit.results.get(state.key)
                if answer is None:
                    state.decider.hits = Counter()
                    answer = unit.results[state.key] = (state.txn_filter.filter(unit.txn), state.decider.hits)
        return answer

    def _count_filter_hits(self, hits: Counter) -> None:
        """P_S COUNTER of the slave's channel rows."""
        channel = self.slave.registry.channels.get(self.slave.state.channel)
        if channel is None:
            return
        for name, n in hits.items():
            entry = channel.entries.get(name.removeprefix("REPLICATE_").lower())
            if entry is not None:
                entry.counter += n

    def _with_placeholders(self, events: list[Event], kept: dict[int, Event]) -> list[Event]:
        """MaxScale style: kept events as kept, transaction framing as is, every other event
        replaced by a RAND placeholder with the original log_pos."""
        out = []
        for event in events:
            if event.pos in kept:
                out.append(kept[event.pos])
            elif is_framing(event):
                out.append(event)
            else:
                out.append(_placeholder(event))
        return fix_transaction_length(out)

    # -- sending ----------------------------------------------------------------------------
    def _send(self, event: Event, *, kept: bool, policy_bytes: bool = False) -> None:
        """Queue one event. Bytes are accounted as kept (master events sent as themselves) or as
        the skip policy's: placeholders, and the framing sent with them, count as placeholder bytes."""
        stats = self.slave.stats
        self.parts.append(event.raw)
        self.batch_bytes += event.size
        stats.events_sent += 1
        stats.bytes_sent += event.size
        if kept:
            stats.kept_bytes += event.size
        elif _is_placeholder(event):
            stats.placeholders += 1
            stats.placeholder_bytes += event.size
        elif policy_bytes:
            stats.placeholder_bytes += event.size

    def _heartbeat_event(self, pos: Pos) -> Event:
        # MySQL's Binlog_sender::send_heartbeat_event: timestamp 0, the master's server_id,
        # log_pos = the position, body = the file name (CRC when the binlog is checksummed).
        return build_event(EventType.HEARTBEAT, pos[0].encode(), fmt=self.fmt, server_id=self.master_server_id,
                           timestamp=0, log_pos=pos[1])

    def _heartbeat_raw(self, pos: Pos) -> bytes:
        """`_heartbeat_event(pos).raw`, built without an Event (one per skipped stretch)."""
        file, log_pos = pos
        key = (file, self.fmt, self.master_server_id)
        cached = self._hb_parts
        if cached is None or cached[0] != key:
            body = file.encode()
            crc = self.fmt is not None and self.fmt.checksum_alg == CHECKSUM_CRC32
            size = HEADER_LEN + len(body) + (4 if crc else 0)
            cached = self._hb_parts = (key, HEADER.pack(0, EventType.HEARTBEAT, self.master_server_id, size, 0, 0)[:13],
                                       struct.pack("<H", 0) + body, crc)
        _, head, tail, crc = cached
        raw = head + _U32.pack(log_pos) + tail
        return raw + _U32.pack(zlib.crc32(raw)) if crc else raw

    def _flush_heartbeat(self) -> None:
        if self.pending_hb is None:
            return
        raw = self._heartbeat_raw(self.pending_hb)
        size = len(raw)
        self.pending_hb = None
        self.parts.append(raw)
        self.batch_bytes += size
        stats = self.slave.stats
        stats.heartbeats += 1
        stats.heartbeat_bytes += size
        stats.events_sent += 1
        stats.bytes_sent += size

    def _batch(self, caught_up: bool) -> Batch:
        self._flush_heartbeat()
        self._flush_hits()
        batch = Batch(b"".join(self.parts), self.pos, self.batch_units, self.batch_skipped, caught_up,
                      False, self._gtid_text(), self.changed_at)
        self.parts, self.batch_bytes, self.batch_units, self.batch_skipped = [], 0, 0, 0
        self.changed_at = None
        return batch

    def _idle_heartbeat(self, caught_up: bool) -> Batch:
        self.pending_hb = self.pos
        batch = self._batch(caught_up)
        batch.heartbeat = True
        return batch

    def _gtid_text(self) -> str:
        return str(self.tracker.mariadb) if self.tracker.mariadb.gtids else str(self.tracker.mysql)


_U32 = struct.Struct("<I")
_SKIP, _PARTIAL, _KEEP, _SLOW = 0, 1, 2, 3
_KEEP_RUN, _SKIP_RUN = re.compile(b"\x02+"), re.compile(b"\x00+")


def _partial_bytes(unit: Unit, get: Callable[[str, str], int], bit: int) -> tuple[bytes, int] | None:
    """What TransactionFilter keeps of a fast unit whose tables are partly kept, when every
    statement's Table_maps get one answer: the GTID, the kept statements whole (annotations,
    Table_maps, rows: no STMT_END_F has to move) and the XID; a MariaDB GTID has no
    transaction_length to fix. (bytes, events), or None for the reference path (a statement
    whose tables are partly kept, or a unit not cut into whole statements)."""
    if unit.gtid is None:
        return None  # a MySQL unit: its GTID's transaction_length must be rewritten (reference path)
    statements = unit.statements
    if statements is None:
        return None
    tables, raw = unit.tables, unit.raw
    at = unit.gtid_end
    parts = [raw[:at]]
    kept = 2  # GTID, XID
    t0 = 0
    for stmt_end, events, t1 in statements:
        if t1 == t0:
            return None  # a statement without its own Table_map
        keep = get(*tables[t0]) & bit
        for k in range(t0 + 1, t1):
            if (get(*tables[k]) & bit) != keep:
                return None
        if keep:
            parts.append(raw[at:stmt_end])
            kept += events
        at, t0 = stmt_end, t1
    parts.append(raw[at:])
    return b"".join(parts), kept


def _placeholder(event: Event) -> Event:
    # MaxScale binlogfilter's replacement: RAND_EVENT, seeds = original size and type, server_id 0,
    # timestamp 0, LOG_EVENT_SKIP_REPLICATION_F; we keep the original log_pos (newer MaxScale).
    return build_event(EventType.RAND, struct.pack("<QQ", event.size, event.type_code), fmt=event.fmt,
                       server_id=0, timestamp=0, log_pos=event.log_pos, flags=LOG_EVENT_SKIP_REPLICATION_F)


def _is_placeholder(event: Event) -> bool:
    return (event.type_code == EventType.RAND and event.server_id == 0
            and bool(event.flags & LOG_EVENT_SKIP_REPLICATION_F))
