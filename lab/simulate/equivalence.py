"""The differential property of master-side filtering, per slave: what the slave received with
master-side filtering, after its own replicate-rewrite-db, equals slave-side filtering of the
full stream (TransactionFilter over everything a rule-less slave received, then the same
rewrite), transaction by transaction.

Both sides are read from relay logs, which hold what a slave received (after its rewrite) in
master coordinates. What a skip policy leaves in a relay log for a transaction slave-side
filtering empties is part of the expectation: the policy says it (`SkipPolicy.relayed`).

Two ways answer it, with the same verdicts. The compiled way (`_verify_compiled`) answers the
full stream's units from each slave's own rules through the core (`UnitList.rows`, statement
keys), compares each run of units (kept whole, kept in part, or skipped whole in the form each
skip policy relays: the send walk in relay mode, `_core.relayed`) with what the slave received
as one byte range, and hands only the units the core declines to the slave's Python reference
filter. The Python way (`_verify_python`) reads every relay log event by event
(`relay_transactions`, this check's one reader of relay logs as Transactions) and filters each
transaction of the full stream; it answers for a slave the compiled way does not take
(replicate-rewrite-db, a master policy restricting it) or declines (a relay log it cannot read
whole, a unit cut by a file's end, any difference: the Python way names each one).

MySQL quirk: a MySQL GTID event carries `transaction_length`, the bytes of the transaction as
the master sent it. Under the placeholder policy that count includes the placeholders the slave
then drops, so GTID events are compared by their GTID (and type), every other event byte for byte.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dumpfilter.codec import Event, EventType, TransactionGrouper
from dumpfilter.codec.constants import GTID_EVENT_TYPES
from dumpfilter.codec.format_description import FormatDescription
from dumpfilter.codec.event import HEADER
from dumpfilter.codec.scanner import unit_events
from dumpfilter.codec.transactions import CONTROL, Transaction
from dumpfilter.binlogs import FILE_FRAMING_TYPES, TailingReader
from dumpfilter.topology import SlaveSpec
from dumpfilter import _core
from dumpfilter.rules.decider import Decider, gated
from dumpfilter.rules.decisions import Decision
from dumpfilter.rules.evaluate import RuleEngine
from dumpfilter.rules.transaction_filter import KEEP, KEPT, PARTIAL, TransactionFilter
from dumpfilter.rules.renamer import event_renamer

if TYPE_CHECKING:
    from dumpfilter.rules.gate import Gate

    # One slave to verify: its spec, its relay log per skip policy, what its own check dropped per
    # policy, and the master policy's gate for it (verify_slaves).
    Check = tuple[SlaveSpec, dict[str, Path], dict[str, int] | None, Gate | None]
from dumpfilter import skip_policy

MAX_LISTED = 20  # differences listed per slave; all are counted


@dataclass
class Difference:
    policy: str
    transaction: str   # GTID, or "end_log_pos N" for a unit without one
    problem: str

    def to_json(self) -> dict[str, Any]:
        return {"policy": self.policy, "transaction": self.transaction, "problem": self.problem}


@dataclass
class SlaveVerification:
    slave: str
    transactions: int = 0                 # transactions of the full stream compared
    compared: dict[str, int] = field(default_factory=dict)   # policy -> transactions received and matched
    differences: list[Difference] = field(default_factory=list)
    total_differences: int = 0
    # Of `transactions`, those the compiled core answered and those the Python reference filter did.
    by_core: int = 0
    by_python: int = 0

    @property
    def ok(self) -> bool:
        return self.total_differences == 0

    def add(self, difference: Difference) -> None:
        self.total_differences += 1
        if len(self.differences) < MAX_LISTED:
            self.differences.append(difference)

    def to_json(self) -> dict[str, Any]:
        return {"slave": self.slave, "ok": self.ok, "transactions": self.transactions, "compared": self.compared,
                "total_differences": self.total_differences,
                "differences": [d.to_json() for d in self.differences]}


def relay_transactions(relay_dir: Path) -> Iterator[Transaction]:
    """The transactions of a relay log, in order (bounded memory), each event placed at its
    MASTER position. A relay log keeps the master's log_pos in every header, but a reader's
    `pos` is the relay file offset; TransactionFilter frames an empty transaction with the
    GTID's end position (COMMIT log_pos), which must be the master's, as the master computed it."""
    grouper = TransactionGrouper()
    for _name, event in TailingReader(relay_dir, follow=False):
        if event.type_code in FILE_FRAMING_TYPES:
            # The relay log's own file framing (the slave does not relay the master's Rotate,
            # Previous_gtids, Gtid_list...). A relay file can end inside a GTID group the
            # placeholder policy left without a body (a skipped DDL: GTID + placeholder); the
            # next file's FDE must not join that group. FDEs between groups reset table ids.
            if event.type_code != EventType.FORMAT_DESCRIPTION or grouper.current is not None:
                continue
        if event.log_pos:
            event = Event(event.raw, max(0, event.log_pos - event.size), event.fmt)
        yield from grouper.push(event)
    yield from grouper.flush()


def _received_transactions(relay_dir: Path) -> Iterator[tuple[str, Transaction]]:
    """The transactions a slave received (its relay log's, but its control units), each with its `_key`."""
    return ((_key(txn), txn) for txn in relay_transactions(relay_dir) if txn.kind != CONTROL)




def _unit_transactions(kind: str, buf: bytes, start: int, end: int, base: int,
                       fmt: FormatDescription | None) -> list[Transaction]:
    """The whole unit buf[start:end] (file offset base + start) as `relay_transactions` groups it,
    each event at its master position: a Transaction, or for a control unit one per event the
    relay log's own framing does not account for."""
    if kind == CONTROL:
        events, _ = unit_events(buf[start:end], base + start, fmt)
        return [Transaction(CONTROL, [_at_master(e)]) for e in events
                if e.type_code not in FILE_FRAMING_TYPES or e.type_code == EventType.FORMAT_DESCRIPTION]
    at, out = start, []
    unpack = HEADER.unpack_from
    while at < end:
        header = unpack(buf, at)
        size, log_pos = header[3], header[4]
        out.append(Event(buf[at:at + size], max(0, log_pos - size) if log_pos else base + at, fmt, header))
        at += size
    return [Transaction(kind, out)]


def _at_master(event: Event) -> Event:
    return Event(event.raw, max(0, event.log_pos - event.size), event.fmt) if event.log_pos else event


def _key(txn: Transaction) -> str:
    gtid = txn.gtid_event
    if gtid is not None and not gtid.gtid_info.anonymous:
        return gtid.gtid_info.text
    return f"end_log_pos {txn.events[-1].log_pos}"


def _norm(events: Iterable[Event]) -> tuple[object, ...]:
    out: list[object] = []
    for e in events:
        if e.type_code in GTID_EVENT_TYPES and e.type_code != EventType.MARIADB_GTID:
            out.append(("gtid", e.type_code, e.gtid))  # transaction_length differs: see the docstring
        else:
            out.append(e.raw)
    return tuple(out)


def _describe(events: list[Event]) -> str:
    names = [e.type_name for e in events]
    return f"{len(events)} events ({', '.join(names[:6])}{', ...' if len(names) > 6 else ''})"


class _ByKey(Decider):
    """A decider whose single-table DML statements are decided once per statement key (kind, default
    database, the table it updates: `_core.statement_key`), as the master and `filter` decide them,
    where its decisions are a function of that key (`Decider.keys_statements`); everything else is
    asked of `inner`. Slave-side filtering of the full stream decides the same, without parsing
    each of a sysbench binlog's statements again (two thirds of --verify's time)."""

    def __init__(self, inner: Decider):
        self.inner = inner
        self.checks_annotations = inner.checks_annotations
        self.by_key = inner.keys_statements
        self.known: dict[tuple[Hashable, str | None], bool] = {}  # (statement key, default database)

    def decide_table(self, db: str, table: str) -> Decision:
        return self.inner.decide_table(db, table)

    def decide_statement(self, sql: str, current_db: str | None) -> Decision:
        return self.inner.decide_statement(sql, current_db)

    def table_kept(self, db: str, table: str) -> bool:
        return self.inner.table_kept(db, table)

    def statement_kept(self, sql: str, current_db: str | None) -> bool:
        if not self.by_key:
            return self.inner.statement_kept(sql, current_db)
        shape = _core.statement_key(sql.encode("utf-8", "surrogateescape"))
        if shape is None:
            return self.inner.statement_kept(sql, current_db)
        key = (shape, current_db)
        kept = self.known.get(key)
        if kept is None:
            kept = self.known[key] = self.inner.decide_statement_key(sql, current_db).apply
        return kept

    def annotation_kept(self, sql: str, tables: Sequence[tuple[str, str]]) -> bool:
        return self.inner.annotation_kept(sql, tables)

    def invalidate(self) -> None:
        self.known.clear()
        self.inner.invalidate()


class _Check:
    """One slave's side of the single pass over the full stream: its reference filter and the
    heads of the relay logs it received (one per skip policy)."""

    def __init__(self, spec: SlaveSpec, received: dict[str, Path], dropped: dict[str, int] | None,
                 gate: Gate | None) -> None:
        self.result = SlaveVerification(spec.name)
        engine = RuleEngine(spec.rules, spec.settings)
        # The slave's rules ANDed with the master policy's gate for its identity, as the master composes them.
        self.reference = TransactionFilter(_ByKey(gated(engine, gate)), empty_transactions=KEEP)
        self.rename = event_renamer(engine, spec.rules, spec.settings)
        self.streams = {policy: _received_transactions(path) for policy, path in received.items()}
        self.heads = {policy: next(it, None) for policy, it in self.streams.items()}
        self.result.compared = dict.fromkeys(received, 0)
        for policy, count in (dropped or {}).items():
            if count:
                self.result.add(Difference(policy, "-", f"the master sent {count} event(s) the slave's own rules drop"))

    def feed(self, txn: Transaction, key: str | None = None) -> None:
        """`key`: the transaction's `_key`, when the caller made it once for every slave."""
        result, reference = self.result, self.reference
        outcome = reference.filter(txn)  # resets its table-id cache at FDEs, as a replica does
        if txn.kind == CONTROL:
            return
        result.transactions += 1
        if key is None:
            key = _key(txn)
        for policy, stream in self.streams.items():
            expected: list[Event] | None
            if outcome.outcome in (KEPT, PARTIAL):
                expected = outcome.events
            else:
                expected = skip_policy.named(policy).relayed(txn, outcome, reference)
            if expected is not None and self.rename is not None:
                expected = [self.rename(e) for e in expected]
            head = self.heads[policy]
            if head is not None and head[0] == key:
                self.heads[policy] = next(stream, None)
                got = head[1].events
                if expected is None:
                    result.add(Difference(policy, key, f"received {_describe(got)}; slave-side filtering "
                                                       "skips the whole transaction"))
                elif _norm(got) != _norm(expected):
                    result.add(Difference(policy, key, f"received {_describe(got)}; slave-side filtering "
                                                       f"keeps {_describe(expected)}"))
                else:
                    result.compared[policy] += 1
            elif expected is not None:
                result.add(Difference(policy, key, f"not received; slave-side filtering keeps {_describe(expected)}"))

    def finish(self) -> SlaveVerification:
        self.result.by_python = self.result.transactions
        for policy, stream in self.streams.items():
            head = self.heads[policy]
            while head is not None:
                self.result.add(Difference(policy, head[0], "received, but not in the full stream (or out of order)"))
                head = next(stream, None)
        return self.result


def verify_slaves(full_relay: Path, checks: Iterable[Check]) -> list[SlaveVerification]:
    """Each (spec, received, slave_check_dropped, gate) of `checks`: every relay log in `received`
    (skip policy -> relay dir of that slave's stream) against slave-side filtering of `full_relay`
    with `spec`'s rules (ANDed with the master policy's `gate`, when there is one). The compiled
    way first (`_verify_compiled`: the slave's rules answer each unit through the core, the
    Python reference filter only the units the core declines); a slave it cannot answer for (a
    difference to describe, a relay log it cannot read whole, rules it does not take) is checked
    transaction by transaction (`_verify_python`), which names each difference."""
    from dumpfilter.lab.simulate.verify_compiled import _compilable, _verify_compiled

    checks = list(checks)
    results: list[SlaveVerification | None] = [None] * len(checks)
    compiled = [i for i, check in enumerate(checks) if _compilable(check)]
    if compiled:
        for i, found in zip(compiled, _verify_compiled(full_relay, [checks[i] for i in compiled])):
            results[i] = found
    rest = [i for i, found in enumerate(results) if found is None]
    if rest:
        for i, found in zip(rest, _verify_python(full_relay, [checks[i] for i in rest])):
            results[i] = found
    return [found for found in results if found is not None]


def _verify_python(full_relay: Path, checks: list[Check]) -> list[SlaveVerification]:
    """One pass over the full stream for every slave, transaction by transaction: it is read and
    grouped once."""
    states = [_Check(spec, received, dropped, gate) for spec, received, dropped, gate in checks]
    for txn in relay_transactions(full_relay):
        key = _key(txn) if txn.kind != CONTROL else None  # (its GTID decoded once, not once per slave)
        for state in states:
            state.feed(txn, key)
    return [state.finish() for state in states]

