"""The differential property of master-side filtering, per slave: what the slave received with
master-side filtering, after its own replicate-rewrite-db, equals slave-side filtering of the
full stream (TransactionFilter over everything a rule-less slave received, then the same
rewrite), transaction by transaction.

Both sides are read from relay logs, which hold what a slave received (after its rewrite) in
master coordinates. What a skip policy leaves in a relay log for a transaction slave-side
filtering empties is part of the expectation: the policy says it (`SkipPolicy.relayed`).

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
from dumpfilter.codec.constants import GTID_EVENT_TYPES, LOG_EVENT_ARTIFICIAL_F, MAGIC
from dumpfilter.codec.format_description import FormatDescription
from dumpfilter.codec.event import HEADER
from dumpfilter.codec.scanner import F_UNKNOWN_NON_IGNORABLE, Scanner, unit_events
from dumpfilter.codec.transactions import CONTROL, Transaction
from dumpfilter.binlogs import FILE_FRAMING_TYPES, TailingReader
from dumpfilter.binlogs.files import binlog_listing
from dumpfilter.binlogs.tail import _rotated_name
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


def relay_transactions(relay_dir: Path, start_file: str | None = None, start_pos: int = 4) -> Iterator[Transaction]:
    """The transactions of a relay log, in order (bounded memory), each event placed at its
    MASTER position. A relay log keeps the master's log_pos in every header, but a reader's
    `pos` is the relay file offset; TransactionFilter frames an empty transaction with the
    GTID's end position (COMMIT log_pos), which must be the master's, as the master computed it.
    From `start_file` at `start_pos` (a unit's start) when given."""
    grouper = TransactionGrouper()
    for _name, event in TailingReader(relay_dir, start_file, start_pos, follow=False):
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


_RELAY_CHUNK = 1 << 20  # (a chunk per relay log read at once: 8 MB ones held 75 MB more over five logs)
_ROTATE = int(EventType.ROTATE)
_GTID_TYPES = frozenset(int(t) for t in GTID_EVENT_TYPES)


class RelayUnit:
    """One unit of a received relay log as verify compares it: its key (`_key`), and either its
    bytes as the compiled scanner found them (`raw`, at relay offset `pos`, in format `fmt`; its
    Events made only when asked for) or the Events of a Transaction the Python reader grouped."""

    __slots__ = ("key", "raw", "pos", "fmt", "_events")

    def __init__(self, key: str, raw: memoryview | None, pos: int = 0, fmt: FormatDescription | None = None,
                 events: list[Event] | None = None) -> None:
        self.key, self.raw, self.pos, self.fmt, self._events = key, raw, pos, fmt, events

    @property
    def events(self) -> list[Event]:
        if self._events is None:
            assert self.raw is not None
            self._events = unit_events(bytes(self.raw), self.pos, self.fmt)[0]
        return self._events


class _Piece:
    """What `_scanned` hands out: a unit the scanner found whole (`kind`, buf[start:end] at file
    offset base + start, its last event at buf[last], `fmt` the format in force; a control unit's
    `events` made), or, as the last piece, where the Python reader takes over (`fallback`)."""

    __slots__ = ("kind", "buf", "start", "end", "base", "last", "fmt", "events", "fallback")

    def __init__(self, kind: str, buf: bytes, start: int, end: int, base: int, last: int,
                 fmt: FormatDescription | None, events: list[Event] | None = None,
                 fallback: tuple[str | None, int] | None = None) -> None:
        self.kind, self.buf, self.start, self.end, self.base, self.last = kind, buf, start, end, base, last
        self.fmt, self.events, self.fallback = fmt, events, fallback


def _scanned(directory: Path) -> Iterator[_Piece]:
    """The units of a relay log's files, as the compiled scanner finds them a few MB at a time,
    in the order `TailingReader` reads the files (a Rotate's target, else the listing's next). A
    unit the scanner cannot hand out whole (cut by the file's end, a framing event inside it, an
    unknown event the server would refuse, a malformed event) ends it: the last piece says where
    `relay_transactions` takes over, whose answers (and errors) are the reference."""
    listing = binlog_listing(directory)
    if not listing or listing.problem is not None:
        yield _Piece(CONTROL, b"", 0, 0, 0, 0, None, fallback=(None, 4))
        return
    name: str | None = listing[0]
    fmt: FormatDescription | None = None
    while name is not None:
        path = directory / name
        if not path.is_file():
            yield _Piece(CONTROL, b"", 0, 0, 0, 0, None, fallback=(name, 4))
            return
        scanner = Scanner(str(path))
        rotated_to = None
        with open(path, "rb") as f:
            if f.read(4) != MAGIC:
                yield _Piece(CONTROL, b"", 0, 0, 0, 0, None, fallback=(name, 4))
                return
            base, want = 4, _RELAY_CHUNK
            while True:
                buf = f.read(want)
                eof = len(buf) < want
                scan = scanner.units(buf, 0, base, at_eof=eof)
                for rec in scan.units:
                    start, end = rec.start, rec.end
                    if not rec.complete or rec.flags & F_UNKNOWN_NON_IGNORABLE:
                        yield _Piece(CONTROL, b"", 0, 0, 0, 0, None, fallback=(name, base + start))
                        return
                    if rec.kind == CONTROL:
                        events, fmt = unit_events(buf[start:end], base + start, fmt)
                        for event in events:
                            if event.type_code == _ROTATE and not event.flags & LOG_EVENT_ARTIFICIAL_F:
                                rotated_to = _rotated_name(event, name)
                        yield _Piece(CONTROL, buf, start, end, base, rec.last, fmt, events)
                        continue
                    yield _Piece(rec.kind, buf, start, end, base, rec.last, fmt)
                if scan.error is not None or (eof and scan.stop < len(buf)):
                    yield _Piece(CONTROL, b"", 0, 0, 0, 0, None, fallback=(name, base + scan.stop))
                    return
                if eof:
                    break
                want = _RELAY_CHUNK if scan.stop else want * 2  # a unit longer than the chunk: more at once
                f.seek(base + scan.stop)  # the unit cut at the chunk's end, read again
                base += scan.stop
        name = rotated_to or binlog_listing(directory).next_after(directory, name)


def relay_units(relay_dir: Path) -> Iterator[RelayUnit]:
    """The non-control units of a relay log, in order, as `relay_transactions` groups them, with
    their keys: read by the compiled scanner (`_scanned`; no Event per event: reading and grouping
    the relay logs event by event was half of --verify's time)."""
    directory = Path(relay_dir)
    for piece in _scanned(directory):
        if piece.fallback is not None:
            for txn in relay_transactions(directory, *piece.fallback):
                if txn.kind != CONTROL:
                    yield RelayUnit(_key(txn), None, events=txn.events)
            return
        if piece.kind == CONTROL:
            continue
        buf, start, fmt = piece.buf, piece.start, piece.fmt
        key = None
        if buf[start + 4] in _GTID_TYPES:
            gtid = Event(buf[start:start + int.from_bytes(buf[start + 9:start + 13], "little")], piece.base + start, fmt)
            if not gtid.gtid_info.anonymous:
                key = gtid.gtid_info.text
        if key is None:
            key = f"end_log_pos {int.from_bytes(buf[piece.last + 13:piece.last + 17], 'little')}"
        yield RelayUnit(key, memoryview(buf)[start:piece.end], piece.base + start, fmt)


def scanned_transactions(relay_dir: Path) -> Iterator[Transaction]:
    """`relay_transactions`, with the units found by the compiled scanner (`_scanned`) instead of
    an event-by-event grouping: the same Transactions, kinds and master positions."""
    directory = Path(relay_dir)
    for piece in _scanned(directory):
        if piece.fallback is not None:
            yield from relay_transactions(directory, *piece.fallback)
            return
        if piece.kind == CONTROL:
            assert piece.events is not None
            for event in piece.events:  # (the relay log's own framing left out: see relay_transactions)
                if event.type_code in FILE_FRAMING_TYPES and event.type_code != EventType.FORMAT_DESCRIPTION:
                    continue
                yield Transaction(CONTROL, [_at_master(event)])
            continue
        buf, fmt, at, end = piece.buf, piece.fmt, piece.start, piece.end
        pos = piece.base
        events = []
        unpack = HEADER.unpack_from
        while at < end:
            header = unpack(buf, at)
            size, log_pos = header[3], header[4]
            events.append(Event(buf[at:at + size], max(0, log_pos - size) if log_pos else pos + at, fmt, header))
            at += size
        yield Transaction(piece.kind, events)


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
        self.streams = {policy: relay_units(path) for policy, path in received.items()}
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
            if head is not None and head.key == key:
                self.heads[policy] = next(stream, None)
                if expected is None:
                    result.add(Difference(policy, key, f"received {_describe(head.events)}; slave-side filtering "
                                                       "skips the whole transaction"))
                elif (head.raw is None or head.raw != b"".join([e.raw for e in expected])) and \
                        _norm(head.events) != _norm(expected):  # (the same bytes: the same events)
                    result.add(Difference(policy, key, f"received {_describe(head.events)}; slave-side filtering "
                                                       f"keeps {_describe(expected)}"))
                else:
                    result.compared[policy] += 1
            elif expected is not None:
                result.add(Difference(policy, key, f"not received; slave-side filtering keeps {_describe(expected)}"))

    def finish(self) -> SlaveVerification:
        for policy, stream in self.streams.items():
            head = self.heads[policy]
            while head is not None:
                self.result.add(Difference(policy, head.key, "received, but not in the full stream (or out of order)"))
                head = next(stream, None)
        return self.result


def verify_slaves(full_relay: Path, checks: Iterable[Check]) -> list[SlaveVerification]:
    """Each (spec, received, slave_check_dropped, gate) of `checks`: every relay log in `received`
    (skip policy -> relay dir of that slave's stream) against slave-side filtering of `full_relay`
    with `spec`'s rules (ANDed with the master policy's `gate`, when there is one). One pass over the
    full stream for every slave: it is read and grouped once."""
    states = [_Check(spec, received, dropped, gate) for spec, received, dropped, gate in checks]
    for txn in scanned_transactions(full_relay):
        key = _key(txn) if txn.kind != CONTROL else None  # (its GTID decoded once, not once per slave)
        for state in states:
            state.feed(txn, key)
    return [state.finish() for state in states]


def verify_slave(full_relay: Path, spec: SlaveSpec, received: dict[str, Path],
                 slave_check_dropped: dict[str, int] | None = None, gate: Gate | None = None) -> SlaveVerification:
    """`verify_slaves` for one slave."""
    return verify_slaves(full_relay, [(spec, received, slave_check_dropped, gate)])[0]
