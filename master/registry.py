"""Slave registrations: which identity may register which server_id, each slave's channels and rules
(built from its Register request), ChangeFilter at transaction boundaries, ListFilters, and the lint
predictions each slave gets (computed off the Register path by master.lint_jobs). Streams live in master.stream; DumpService (master.service) joins both."""

from __future__ import annotations

import dataclasses
import datetime as dt
import itertools
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dumpfilter.errors import (AccessDeniedError, ChangeTimeoutError, DumpFilterError,
                               ResourceExhaustedError, RuleError, StreamReplacedError, UnknownSlaveError)
from dumpfilter.rules.assembly import EXTRA_TYPES, registry_from_requests
from dumpfilter.rules.channels import FilterRegistry
from dumpfilter.rules.evaluate import RuleEngine
from dumpfilter.rules.parse import FilterChange, parse_filter_statement
from dumpfilter.rules.ruleset import ALL_TYPES, RuleSet, Settings
from dumpfilter.rules.schema import SchemaModel
from dumpfilter.rules.schema_timeline import SchemaTimeline
from dumpfilter.rules.transaction_filter import KEEP, TransactionFilter
from dumpfilter import skip_policy
from dumpfilter.master.decide.flags import FlagWords, SlaveDecider, StatementWords
from dumpfilter.master.decide.statement_keys import StatementPathCounts
from dumpfilter.binlogs.lint_worker import MAX_QUEUED
from dumpfilter.master.lint_jobs import LintJobs
from dumpfilter.master.model import Effective, Registration, RegisterResult, SlaveStats
from dumpfilter.master.policy import OPEN, Identity, MasterPolicy
from dumpfilter.rules.gate import UNRESTRICTED, Gate
from dumpfilter.master.read.units import Pos
from dumpfilter.master.shares import LINT_JOBS, REGISTRATIONS, RULES, Shares, account

MAX_SLAVES = 1024
# Filter rules held by every registration together (each channel's rules counted, global ones once
# per channel): a registration's memory is its rules' (a compiled wild rule about 0.8 KB), so the
# registrations of one identity hold at most its share of this.
MAX_RULES_TOTAL = 1_000_000
# ChangeFilter calls queued on one slave for its stream's next transaction boundary (a call that
# timed out leaves its change queued): more are RESOURCE_EXHAUSTED.
MAX_PENDING_CHANGES = 16
# What one Register may ask besides its rules, as MySQL bounds a replica: its channels (MySQL's
# 256 replication channels, names of at most 64 characters), its report_host (255 characters),
# and its filter requests (a channel's rules, a CHANGE REPLICATION FILTER each). Unbounded, one
# 4 MiB Register of 200 000 channels cost the master 30 s of CPU and a 50 MB reply; 120 000
# filter requests, 24 s (their rules are joined one request at a time).
MAX_CHANNELS, CHANNEL_NAME_LEN, HOSTNAME_LEN = 256, 64, 255
MAX_FILTER_REQUESTS = 512


@dataclass
class PendingChange:
    change: FilterChange
    done: threading.Event = field(default_factory=threading.Event)
    position: Pos | None = None
    error: DumpFilterError | None = None


@dataclass
class StreamHandle:
    channel: str
    cancelled: str | None = None  # None, "replaced", "shutdown", "purged"
    wake: threading.Event = field(default_factory=threading.Event)
    error: DumpFilterError | None = None  # what the stream ends with (its file was purged under it)

    def cancel(self, reason: str) -> None:
        self.cancelled = reason
        self.wake.set()

    def fail(self, error: DumpFilterError, reason: str) -> None:
        self.error = error
        self.cancel(reason)


@dataclass
class SlaveState:
    """The rules a slave's stream filters with right now (swapped only at transaction boundaries)."""

    channel: str
    rules: RuleSet
    engine: RuleEngine
    key: int            # the rule group (distinct rules, settings and gate): answers are shared per group
    decider: SlaveDecider
    txn_filter: TransactionFilter


class RegisteredSlave:
    """One registered server_id: its registration, rules per channel, policy gate, flag bit and stats."""

    def __init__(self, reg: Registration, registry: FilterRegistry, extra: dict[str, Any], gate: Gate, bit: int,
                 identity: Identity = OPEN, schema_items: int = 0):
        self.reg = reg
        self.identity = identity    # the identity that registered this server_id
        self.owner = identity.name
        self.account = account(identity)  # what its resources are counted under (master.shares)
        self.server_id = reg.server_id
        self.registry = registry
        self.extra = extra          # effective_* / binlog_* rules (global: FilterRegistry has no place for them)
        self.gate = gate
        self.bit = bit
        self.stats = SlaveStats()
        self.schema_items = schema_items  # its replica schema's databases, tables, columns: counted as rules
        self.rule_count = rule_count(registry, extra) + schema_items
        self.stream: StreamHandle | None = None
        self.state: SlaveState | None = None
        self.position: Pos | None = None
        self.pending: list[PendingChange] = []
        self.lock = threading.Lock()
        self.registered_at = dt.datetime.now(dt.UTC)
        self.statement_path: StatementPathCounts | None = None  # its stream's (SlaveStream), for tests and bench

    def rules_for(self, channel: str) -> RuleSet:
        return self.registry.rules_for(channel).replace(**self.extra)

    def effective(self) -> list[Effective]:
        return [Effective(name, self.rules_for(name), self.gate) for name in self.registry.channels]


class SlaveRegistry:
    """The registered slaves and everything done to them short of streaming."""

    def __init__(self, binlog_dir: Path, *, policy: MasterPolicy | None, schema: SchemaModel | None,
                 lint_bytes: int):
        self.binlog_dir = binlog_dir
        self.policy = policy
        self.schema = schema  # the starting schema (--schema)
        # The one schema model of the binlog series, versioned by position (#14): every rule engine
        # shares it; set by DumpService, which owns the segment cache it reads the DDL through.
        self.timeline: SchemaTimeline | None = None
        self.slaves: dict[int, RegisteredSlave] = {}
        self.lock = threading.RLock()
        self.words = FlagWords(self._members)
        # The rule engines, their locks and rule-group keys of the registrations: only those some
        # registration uses are kept (`_release`), so re-registering with new rules frees the old.
        self._engines: dict[tuple[RuleSet, Settings], RuleEngine] = {}
        self.group_locks: dict[int, threading.Lock] = {}
        self.statement_words = StatementWords(self._members, self.words, self.engine_lock)
        self._group_ids: dict[tuple[RuleSet, Settings, Gate], int] = {}
        # Never reused: a cached unit's answer under a released group's key is never read again.
        self._group_counter = itertools.count()
        # Each identity's share of registrations, streams, calls and lint jobs (master.shares).
        self.shares = Shares(policy, {REGISTRATIONS: MAX_SLAVES, RULES: MAX_RULES_TOTAL, LINT_JOBS: MAX_QUEUED})
        # Lint from Register on (issues #17, #44): a background follower per distinct rule set, each
        # look reading at most `lint_bytes` of binlog (0: off); Register only asks, and never waits.
        self.lint = LintJobs(binlog_dir, lint_bytes, schema)

    # -- authorization ----------------------------------------------------------------------
    def authenticate(self, user: str = "", password: str = "", certificate_name: str | None = None) -> Identity:
        """The caller's identity. Without a policy file the master is open (every caller may do
        everything, as before policies existed)."""
        if self.policy is None:
            return OPEN
        return self.policy.authenticate(user, password, certificate_name)

    def proven(self, user: str, certificate_name: str | None = None) -> Identity:
        """The identity of a caller whose password an exchange already proved (the MySQL endpoint)."""
        if self.policy is None:
            return OPEN
        return self.policy.proven(user, certificate_name)

    def _owned(self, server_id: int, caller: Identity | None) -> RegisteredSlave:
        """The slave `caller` may act on. Another identity's slave answers exactly as an unknown
        server_id does: a caller cannot learn which server_ids others use."""
        slave = self.slaves.get(server_id)
        if slave is None or caller is not None and not caller.admin and slave.owner != caller.name:
            raise UnknownSlaveError(f"server_id {server_id} is not registered with this master")
        return slave

    def _visible(self, server_id: int, caller: Identity | None) -> list[RegisteredSlave]:
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
        _check_bounds(reg)
        schema_items = _schema_items(reg)
        try:
            skip_policy.named(reg.skip_policy)
        except ValueError as exc:
            raise RuleError(str(exc)) from None
        gate = self.policy.gate_for_identity(caller, reg.server_id) if self.policy else UNRESTRICTED
        registry, extra = registry_from_requests(((s.channel, s.rules, s.text) for s in reg.filters), reg.channels)
        adding = rule_count(registry, extra) + schema_items
        with self.lock:  # counted before they are compiled: the budget bounds that work too
            self._check_registered(caller, adding, schema_items, self.slaves.get(reg.server_id))
        for name in registry.channels:  # compile now: malformed combinations fail the Register
            self._engine(registry.rules_for(name).replace(**extra), reg.settings, keep=False)
        with self.lock:
            old = self.slaves.get(reg.server_id)
            if old is not None and old.owner != caller.name:
                # A server_id is bound to the identity that registered it: another identity, an
                # admin too, cannot take its place (MySQL's kill_zombie_dump_threads would let it).
                raise AccessDeniedError(f"identity {caller.name!r} may not register server_id {reg.server_id}: "
                                        "it is registered by another identity")
            self._check_registered(caller, adding, schema_items, old)  # again: others may have registered
            if old is not None:
                # MySQL: a second connection with the same server_id kills the first one's dump
                # thread (kill_zombie_dump_threads). We do the same: the newer registration wins.
                self._end_stream(old, "replaced")
                bit = old.bit
            else:
                mine = account(caller)
                self.shares.check(caller, REGISTRATIONS, sum(1 for s in self.slaves.values() if s.account == mine))
                used = {s.bit for s in self.slaves.values()}
                free = next((b for b in range(MAX_SLAVES) if b not in used), None)
                if free is None:
                    raise ResourceExhaustedError(f"too many slaves registered (at most {MAX_SLAVES})")
                bit = free
            # Kept: what the slave's stream and Stats read. Not its credentials, filter requests
            # (their rules are in `registry`) or replica schema (lint's): no memory outside the budget.
            kept = dataclasses.replace(reg, user="", password="", filters=(), replica_schema=None)
            slave = RegisteredSlave(kept, registry, extra, gate, bit, identity=caller, schema_items=schema_items)
            # A reconnecting slave's last position holds its file until its new Dump reads on:
            # retention keeps what a registered slave reads, and its Dump comes after this Register.
            slave.position = old.position if old is not None else None
            slave.state = self._state(slave, reg.channels[0] if reg.channels else "")
            self.slaves[reg.server_id] = slave
            self.words.invalidate()
            self._release()  # the replaced registration's engines and rule groups
        rules = slave.rules_for(slave.state.channel if slave.state is not None else "")
        # Cached predictions, or none yet; a job this server_id's old rules queued is dropped.
        lint = self.lint.request(reg.server_id, rules, reg.settings, slave.account,
                                 lambda queued: self.shares.check(caller, LINT_JOBS, queued),
                                 replica_schema=reg.replica_schema)
        return RegisterResult(reg.server_id, slave.effective(), [*registry.warnings, *lint], old is not None)

    def unregister(self, server_id: int, caller: Identity | None = None) -> bool:
        with self.lock:
            slave = self._owned(server_id, caller)
            had_stream = slave.stream is not None
            self._end_stream(slave, "replaced")
            del self.slaves[server_id]
            self.words.invalidate()
            self._release()
        self.lint.forget(server_id)
        return had_stream

    def _check_rules(self, caller: Identity, adding: int, replaced: RegisteredSlave | None) -> None:
        """Under self.lock: RESOURCE_EXHAUSTED when `adding` more rules (in place of `replaced`'s)
        would pass the identity's share or the master's total."""
        others = [s for s in self.slaves.values() if s is not replaced]
        total = sum(s.rule_count for s in others)
        if total + adding > MAX_RULES_TOTAL:
            raise ResourceExhaustedError(f"the master already holds {total} filter rules, {adding} more asked "
                                         f"(at most {MAX_RULES_TOTAL} in all)")
        mine = account(caller)
        self.shares.check(caller, RULES, sum(s.rule_count for s in others if s.account == mine), adding)

    def _check_registered(self, caller: Identity, adding: int, schema_items: int,
                          replaced: RegisteredSlave | None) -> None:
        """`_check_rules` for a Register, whose replica schema's items count as rules."""
        try:
            self._check_rules(caller, adding, replaced)
        except ResourceExhaustedError as exc:
            if not schema_items:
                raise
            raise ResourceExhaustedError(f"{exc} (its replica_schema's {schema_items} databases, tables and "
                                         "columns count as rules)") from None

    def check_replica_schema(self, caller: Identity, server_id: int, items: int) -> None:
        """`_check_registered` for a Register's replica schema alone, its `items` counted from the
        request (each database, table and column it lists): one over the rule budget is refused before
        its model is built (a 4 MiB one's took about 90 MB, for nothing)."""
        with self.lock:
            self._check_registered(caller, items, items, self.slaves.get(server_id))

    def _end_stream(self, slave: RegisteredSlave, reason: str) -> None:
        if slave.stream is not None:
            slave.stream.cancel(reason)
        for pending in slave.pending:
            pending.error = StreamReplacedError("the stream ended before the change took effect")
            pending.done.set()
        slave.pending = []

    def engine_lock(self, engine: RuleEngine) -> threading.Lock:
        """The lock of a rule engine: groups with the same rules and different policy gates share one
        engine, whose decision state (the position being decided) is one at a time. Made with the
        engine (`_engine`); one a replaced stream still holds gets its lock here."""
        lock = self.group_locks.get(id(engine))
        if lock is None:
            with self.lock:
                lock = self.group_locks.setdefault(id(engine), threading.Lock())
        return lock

    def _release(self) -> None:
        """Under self.lock: forget the engines (with their locks and remembered answers) and the
        rule-group keys no registration uses any more: a replaced or unregistered slave's, the
        rules a ChangeFilter replaced. A stream that still runs on them keeps its own references."""
        states = [(s.state, s) for s in self.slaves.values() if s.state is not None]
        live = {id(state.engine) for state, _ in states}
        groups = {(state.rules, slave.reg.settings, slave.gate) for state, slave in states}
        for key in [k for k, engine in self._engines.items() if id(engine) not in live]:
            del self._engines[key]
        for engine_id in [k for k in self.group_locks if k not in live]:
            del self.group_locks[engine_id]
        for group in [k for k in self._group_ids if k not in groups]:
            del self._group_ids[group]

    def _members(self) -> list[tuple[int, RuleEngine, Gate]]:
        return [(s.bit, s.state.engine, s.gate) for s in list(self.slaves.values()) if s.state is not None]

    def _engine(self, rules: RuleSet, settings: Settings, keep: bool = True) -> RuleEngine:
        """The shared engine of these rules; `keep=False` only compiles them (a check), keeping nothing."""
        key = (rules, settings)
        engine = self._engines.get(key)
        if engine is None:
            schema = self.timeline if self.timeline is not None else self.schema.copy() if self.schema else None
            engine = RuleEngine(rules, settings, schema=schema)
            if keep:
                with self.lock:
                    engine = self._engines.setdefault(key, engine)
                    self.group_locks.setdefault(id(engine), threading.Lock())
        return engine

    def _state(self, slave: RegisteredSlave, channel: str) -> SlaveState:
        if channel not in slave.registry.channels:
            raise UnknownSlaveError(f"server_id {slave.server_id} has no channel '{channel}' "
                                    f"(registered channels: {', '.join(map(repr, slave.registry.channels))})")
        rules = slave.rules_for(channel)
        engine = self._engine(rules, slave.reg.settings)
        decider = SlaveDecider(self.words, slave.bit, engine, slave.gate)
        # The rule group's key in every unit's answers: a small int (hashing the RuleSet per unit cost more
        # than some decisions), one per distinct (rules, settings, gate).
        group = (rules, slave.reg.settings, slave.gate)
        with self.lock:
            key = self._group_ids.get(group)
            if key is None:
                key = self._group_ids[group] = next(self._group_counter)
        return SlaveState(channel, rules, engine, key, decider, TransactionFilter(decider, empty_transactions=KEEP))

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
            if len(slave.pending) >= MAX_PENDING_CHANGES:
                raise ResourceExhaustedError(f"server_id {server_id} already has {len(slave.pending)} changes waiting "
                                             f"for its stream's next transaction boundary (at most "
                                             f"{MAX_PENDING_CHANGES})")
            pending = PendingChange(change)
            slave.pending.append(pending)
        handle.wake.set()
        if not pending.done.wait(timeout):
            raise ChangeTimeoutError(f"the stream of server_id {server_id} did not reach a transaction boundary "
                                     f"within {timeout:.1f}s; the change stays queued")
        if pending.error is not None:
            raise pending.error
        return pending.position, True, slave.effective()

    def _check_change(self, slave: RegisteredSlave, change: FilterChange) -> None:
        """Compile the rules the change would produce, so a bad change fails the RPC, not the stream;
        counted first against the owner's rule budget, in place of the slave's present rules."""
        extra = dict(slave.extra)
        extra.update({t: r for t, r in change.changes if t in EXTRA_TYPES})
        after = [(change.apply(slave.rules_for(name)) if change.channel in (None, name)
                  else slave.rules_for(name)).replace(**extra) for name in slave.registry.channels]
        with self.lock:
            self._check_rules(slave.identity, sum(map(_count, after)) + slave.schema_items, slave)
        for rules in after:
            self._engine(rules, slave.reg.settings, keep=False)

    def _apply_change(self, slave: RegisteredSlave, change: FilterChange) -> None:
        for rule_type, rules in change.changes:
            if rule_type in EXTRA_TYPES:
                slave.extra[rule_type] = rules
        plain = FilterChange(tuple((t, r) for t, r in change.changes if t not in EXTRA_TYPES), change.channel)
        if plain.changes:
            slave.registry.change_replication_filter(plain)
        channel = slave.state.channel if slave.state else ""
        with self.lock:
            slave.rule_count = rule_count(slave.registry, slave.extra) + slave.schema_items
            slave.state = self._state(slave, channel)
            self.words.invalidate()
            self._release()  # the rules it replaced

    def apply_pending(self, slave: RegisteredSlave, position: Pos) -> Pos | None:
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
    def list_filters(self, server_id: int = 0, caller: Identity | None = None
                     ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        slaves = self._visible(server_id, caller)
        rows, global_rows = [], []
        for slave in slaves:
            rows += [{"server_id": slave.server_id, **row} for row in slave.registry.applier_filters()]
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
            global_rows += [{"server_id": slave.server_id, **row} for row in slave.registry.applier_global_filters()]
        return rows, global_rows


def _count(rules: RuleSet) -> int:
    return sum(len(getattr(rules, rule_type)) for rule_type in ALL_TYPES)


def rule_count(registry: FilterRegistry, extra: dict[str, Any]) -> int:
    """The rules a registration holds: each channel's, with the global (effective_*, binlog_*) ones."""
    return sum(_count(registry.rules_for(name).replace(**extra)) for name in registry.channels)


def _check_bounds(reg: Registration) -> None:
    """RuleError (INVALID_ARGUMENT) for a Register asking more than MySQL lets a replica have."""
    if len(reg.channels) > MAX_CHANNELS:
        raise RuleError(f"{len(reg.channels)} channels: at most {MAX_CHANNELS} (MySQL's limit)")
    for name in reg.channels:
        if len(name) > CHANNEL_NAME_LEN:
            raise RuleError(f"channel name {name[:CHANNEL_NAME_LEN]!r}...: at most {CHANNEL_NAME_LEN} characters")
    if len(reg.hostname) > HOSTNAME_LEN:
        raise RuleError(f"hostname of {len(reg.hostname)} characters: at most {HOSTNAME_LEN} (MySQL's report_host)")
    if len(reg.filters) > MAX_FILTER_REQUESTS:
        raise RuleError(f"{len(reg.filters)} filter requests (ChannelFilters): at most {MAX_FILTER_REQUESTS}")


def _schema_items(reg: Registration) -> int:
    """The replica schema's databases, tables and columns: each counts as a rule against the
    identity's rule budget (`_check_rules`). Its model is kept while lint follows the slave's rules,
    and a 4 MiB one (50 000 tables of 20 columns) held about 87 MB: unbounded, 1024
    registrations of one would have held 89 GB."""
    schema = reg.replica_schema
    if schema is None:
        return 0
    return len(schema.databases) + sum(1 + len(columns or ()) for columns in schema.tables.values())
