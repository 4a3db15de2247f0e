"""The differential property of master-side filtering, per slave: what the slave received with
master-side filtering, after its own replicate-rewrite-db, equals slave-side filtering of the
full stream (TransactionFilter over everything a rule-less slave received, then the same
rewrite), transaction by transaction.

Both sides are read from relay logs, which hold what a slave received (after its rewrite) in
master coordinates. What a skip policy leaves in a relay log for a transaction slave-side
filtering empties is part of the expectation: the policy says it (`SkipPolicy.relayed`).

Two ways answer it, with the same verdicts. The compiled way (`_verify_compiled`) answers the
full stream's units from each slave's own rules through the core (`UnitList.rows`, statement
keys), compares the runs kept whole with what the slave received as byte ranges, and hands only
the units the core declines to the slave's Python reference filter. The Python way
(`_verify_python`) reads every relay log event by event (`relay_transactions`, this check's one
reader of relay logs as Transactions) and filters each transaction of the full stream; it answers
for a slave the compiled way does not take (replicate-rewrite-db, a master policy restricting it)
or declines (a relay log it cannot read whole, a unit cut by a file's end, any difference: the
Python way names each one).

MySQL quirk: a MySQL GTID event carries `transaction_length`, the bytes of the transaction as
the master sent it. Under the placeholder policy that count includes the placeholders the slave
then drops, so GTID events are compared by their GTID (and type), every other event byte for byte.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from dumpfilter.codec import Event, EventType, TransactionGrouper
from dumpfilter.codec.constants import GTID_EVENT_TYPES, LOG_EVENT_ARTIFICIAL_F, MAGIC
from dumpfilter.codec.format_description import FormatDescription
from dumpfilter.codec.event import HEADER
from dumpfilter.codec.scanner import (F_COMPLETE, F_HAS_FDE, F_UNKNOWN_NON_IGNORABLE, KEEP_DROP, KEEP_KEEP, KINDS,
                                      Scanner, unit_events)
from dumpfilter.codec.transactions import CONTROL, Transaction
from dumpfilter.binlogs import FILE_FRAMING_TYPES, TailingReader
from dumpfilter.binlogs.files import binlog_listing
from dumpfilter.binlogs.tail import _rotated_name
from dumpfilter.topology import SlaveSpec
from dumpfilter import _core
from dumpfilter.rules.decider import Decider, TableKeeps, gated
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


def _received_transactions(relay_dir: Path) -> Iterator[tuple[str, Transaction]]:
    """The transactions a slave received (its relay log's, but its control units), each with its `_key`."""
    return ((_key(txn), txn) for txn in relay_transactions(relay_dir) if txn.kind != CONTROL)


_RELAY_CHUNK = 1 << 20  # (a chunk per relay log read at once: 8 MB ones held 75 MB more over five logs)


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


def verify_slave(full_relay: Path, spec: SlaveSpec, received: dict[str, Path],
                 slave_check_dropped: dict[str, int] | None = None, gate: Gate | None = None) -> SlaveVerification:
    """`verify_slaves` for one slave."""
    return verify_slaves(full_relay, [(spec, received, slave_check_dropped, gate)])[0]


# -- the compiled way --------------------------------------------------------------------------
# The full stream's units are answered for each slave by the core from the slave's own rules (its
# keep byte per table name, `UnitList.rows`; per statement key, `UnitList.statement_rows`): a run
# of units every table of which the rules keep is what the slave relays byte for byte, whatever
# its skip policy, and is compared with what it received as one byte range; a unit no table of
# which they keep leaves nothing in a heartbeat stream's relay log. Every other unit (control
# events, DDL, units kept in part, statements the keys do not read, a skipped unit under a policy
# that relays a form of it) goes through the slave's Python reference filter, in stream order.
# What a slave received is read as one byte string: its relay log's units back to back.

_CHUNK = 8 << 20  # full-stream bytes scanned at once (a UnitList each)
_ROW_KEEP, _ROW_SKIP = _core.ROW_KEEP, _core.ROW_SKIP
_QUERY = int(EventType.QUERY)
_HEARTBEAT = skip_policy.named("heartbeat").name


class _Declined(Exception):
    """The compiled way does not answer for a slave: the Python way does, transaction by transaction."""


class _Chunk:
    """One read of a relay file: its bytes at file offset `base`; the reader sets `stop` (where
    its scan stopped) and `rotated_to` (a real Rotate's target) before the next read."""

    __slots__ = ("name", "buf", "base", "eof", "new_file", "stop", "rotated_to")

    def __init__(self, name: str, buf: bytes, base: int, eof: bool, new_file: bool) -> None:
        self.name, self.buf, self.base, self.eof, self.new_file = name, buf, base, eof, new_file
        self.stop = len(buf)
        self.rotated_to: str | None = None


def _relay_chunks(directory: Path, size: int = _CHUNK) -> Iterator[_Chunk]:
    """A relay log's files in the order `TailingReader` reads them (a real Rotate's target, else
    the listing's next), `size` bytes at a time from where the last scan stopped; _Declined where
    the files are not all there or one ends inside an event."""
    listing = binlog_listing(directory)
    if not listing or listing.problem is not None:
        raise _Declined
    name: str | None = listing[0]
    while name is not None:
        path = directory / name
        if not path.is_file():
            raise _Declined
        rotated_to: str | None = None
        with open(path, "rb") as f:
            if f.read(4) != MAGIC:
                raise _Declined
            base, want, new_file = 4, size, True
            while True:
                buf = f.read(want)
                chunk = _Chunk(name, buf, base, len(buf) < want, new_file)
                new_file = False
                yield chunk
                rotated_to = chunk.rotated_to or rotated_to
                if chunk.eof:
                    if chunk.stop < len(buf):
                        raise _Declined  # a unit cut by the file's end
                    break
                want = size if chunk.stop else want * 2  # a unit longer than the chunk: more at once
                base += chunk.stop
                f.seek(base)
        name = rotated_to or binlog_listing(directory).next_after(directory, name)


def _rotate_target(buf: bytes, at: int, base: int, fmt: FormatDescription | None, name: str) -> str | None:
    """The target of the Rotate at buf[at], None for an artificial one."""
    event = Event(buf[at:at + int.from_bytes(buf[at + 9:at + 13], "little")], base + at, fmt)
    return None if event.flags & LOG_EVENT_ARTIFICIAL_F else _rotated_name(event, name)


def _units_of(scan: _core.UnitsResult) -> np.ndarray[Any, np.dtype[np.uint64]]:
    """A scan's unit records as rows of UNIT_WORDS words (word 0 start, 1 end, 2 events | kind
    << 32 | flags << 40: see codec.scanner's `_record`)."""
    return np.frombuffer(scan.packed, dtype="<u8").reshape(-1, _core.UNIT_WORDS)


def _runs(mask: np.ndarray[Any, np.dtype[np.bool_]]) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """The runs of True in `mask`: their first indices and the indices after them."""
    edges = np.diff(np.concatenate(([0], mask.view(np.int8), [0])))
    return np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)


def _received_spans(directory: Path) -> Iterator[tuple[bytes, int, int]]:
    """The byte ranges of a received relay log's units that are not control units (the relay
    log's own framing), in order, as (buffer, start, end): read by the compiled scanner, its
    checksums not checked (the bytes are compared with the full stream's, which are)."""
    scanner = _core.Scanner(False)
    fmt: FormatDescription | None = None
    for chunk in _relay_chunks(directory, _RELAY_CHUNK):
        buf, base = chunk.buf, chunk.base
        if chunk.new_file:
            scanner = _core.Scanner(False)
        scan = scanner.units(buf, 0, base, 1 << 62, chunk.eof)
        if scan.error is not None:
            raise _Declined
        words = _units_of(scan)
        flags = words[:, 2] >> np.uint64(40)
        if np.any(flags & np.uint64(F_COMPLETE) == 0) or np.any(flags & np.uint64(F_UNKNOWN_NON_IGNORABLE)):
            raise _Declined
        control = (words[:, 2] >> np.uint64(32)) & np.uint64(0xFF) == 0
        for k in np.flatnonzero(control & (flags & np.uint64(F_HAS_FDE) != 0)).tolist():
            fmt = unit_events(buf[int(words[k, 0]):int(words[k, 1])], base + int(words[k, 0]), fmt)[1]
        lo, hi = _runs(~control)
        yield from zip([buf] * len(lo), words[lo, 0].tolist(), words[hi - 1, 1].tolist())
        if scan.last_rotate >= 0:
            chunk.rotated_to = _rotate_target(buf, scan.last_rotate, base, fmt, chunk.name)
        chunk.stop = scan.stop


class _Received:
    """What a slave received, as one byte string (`_received_spans`), matched in order."""

    __slots__ = ("_spans", "_buf", "_at", "_end")

    def __init__(self, directory: Path) -> None:
        self._spans = _received_spans(directory)
        self._buf, self._at, self._end = b"", 0, 0

    def match(self, data: memoryview) -> bool:
        """Whether the next len(data) bytes received are `data` (consumed)."""
        n, at = len(data), 0
        while at < n:
            if self._at == self._end:
                nxt = next(self._spans, None)
                if nxt is None:
                    return False
                self._buf, self._at, self._end = nxt
            k = min(n - at, self._end - self._at)
            if not self._buf.startswith(data[at:at + k], self._at):
                return False
            self._at += k
            at += k
        return True

    def finished(self) -> bool:
        """Whether nothing more was received."""
        return self._at == self._end and next(self._spans, None) is None


def _compilable(check: Check) -> bool:
    """Whether the compiled way takes a slave: its rules rename nothing and the master policy
    restricts nothing for it (a gate bounds annotation texts and statements by their text)."""
    spec, _received, _dropped, gate = check
    if gate is not None and gate.restricted:
        return False
    engine = RuleEngine(spec.rules, spec.settings)
    return event_renamer(engine, spec.rules, spec.settings) is None and not engine.checks_annotations


class _SlaveWalk:
    """One slave of the compiled way: its answers per unit, its Python reference for the units
    the core declines, and what it received per skip policy."""

    def __init__(self, spec: SlaveSpec, received: dict[str, Path], dropped: dict[str, int] | None) -> None:
        self.result = SlaveVerification(spec.name)
        self.result.compared = dict.fromkeys(received, 0)
        for policy, count in (dropped or {}).items():
            if count:
                self.result.add(Difference(policy, "-", f"the master sent {count} event(s) the slave's own rules drop"))
        decider = _ByKey(RuleEngine(spec.rules, spec.settings))
        self.reference = TransactionFilter(decider, empty_transactions=KEEP)
        self.keeps = TableKeeps(decider)
        self.keyed = decider.by_key
        self.decide_key = decider.inner.decide_statement_key
        self.key_answers: dict[tuple[bytes, bytes], int] = {}
        self.received = {policy: _Received(path) for policy, path in received.items()}
        self.policies = {policy: skip_policy.named(policy) for policy in received}
        # Skipped units leave nothing in a heartbeat stream's relay log: answered by the core when
        # every policy of the slave is heartbeat; else each goes to the reference for its form.
        self.core_skips = all(p.name == _HEARTBEAT for p in self.policies.values())
        self.by_core = 0    # full-stream units the core answered
        self.by_python = 0  # and those the reference filter did

    def stmt_keep(self, keys: list[_core.StatementKey]) -> bytes:
        """The keep byte per key id of a chunk's statement keys, each (key, default database)
        decided once."""
        out = bytearray(len(keys) and max(k.id for k in keys) + 1)
        answers = self.key_answers
        for key in keys:
            found = answers.get((key.key, key.db))
            if found is None:
                decision = self.decide_key(key.sql.decode("utf-8", "surrogateescape"),
                                           key.db.decode("utf-8", "surrogateescape"))
                found = answers[(key.key, key.db)] = KEEP_KEEP if decision.apply else KEEP_DROP
            out[key.id] = found
        return bytes(out)

    def walk(self, chunk: _FullChunk, start: int, stop: int) -> None:
        """Units start..stop of a chunk (no Format_description before `stop` - 1): the runs kept
        whole between two units the core declines compared at once, the declined ones fed."""
        units = chunk.units
        row = units.rows(self.keeps.for_names(chunk.names))
        if self.keyed and chunk.keys:
            row = units.statement_rows(row, self.stmt_keep(chunk.keys))
        answers = np.frombuffer(row, dtype=np.uint8)[start:stop]
        kept = answers == _ROW_KEEP
        declined = ~kept
        result, received = self.result, list(self.received.items())
        if self.core_skips:  # skipped: nothing relayed
            skipped = answers == _ROW_SKIP
            declined &= ~skipped
            count = int(np.count_nonzero(skipped))
            result.transactions += count
            self.by_core += count
        lo, hi = _runs(kept)
        lo += start
        hi += start
        first, last = chunk.starts[lo].tolist(), chunk.ends[hi - 1].tolist()
        cuts = np.searchsorted(lo, np.flatnonzero(declined) + start).tolist()
        view = memoryview(chunk.buf)
        done = 0  # runs compared
        for k, cut in zip([*(np.flatnonzero(declined) + start).tolist(), None], [*cuts, len(lo)]):
            if cut > done:  # the runs before unit k: what the slave relays of them, back to back
                data = view[first[done]:last[done]] if cut == done + 1 else \
                    memoryview(b"".join([view[a:b] for a, b in zip(first[done:cut], last[done:cut])]))
                count = int((hi[done:cut] - lo[done:cut]).sum())
                for policy, stream in received:
                    if not stream.match(data):
                        raise _Declined
                    result.compared[policy] += count
                result.transactions += count
                self.by_core += count
                done = cut
            if k is not None:
                for txn in chunk.transactions(k):
                    self.feed(txn)

    def feed(self, txn: Transaction) -> None:
        """A unit the core declined, as `_Check.feed` judges it."""
        outcome = self.reference.filter(txn)
        if txn.kind == CONTROL:
            if txn.events[0].type_code == EventType.FORMAT_DESCRIPTION:
                self.keeps.clear()
                self.key_answers.clear()
            return
        self.result.transactions += 1
        self.by_python += 1
        for policy, stream in self.received.items():
            expected: list[Event] | None
            if outcome.outcome in (KEPT, PARTIAL):
                expected = outcome.events
            else:
                expected = self.policies[policy].relayed(txn, outcome, self.reference)
            if expected is None:
                continue
            if not stream.match(memoryview(b"".join([e.raw for e in expected]))):
                raise _Declined
            self.result.compared[policy] += 1

    def finish(self) -> SlaveVerification:
        if not all(stream.finished() for stream in self.received.values()):
            raise _Declined
        self.result.by_core, self.result.by_python = self.by_core, self.by_python
        return self.result


class _FullChunk:
    """One chunk of the full stream as every slave walks it: its units (a UnitList), their
    formats, the scanner's table names and the chunk's statement keys."""

    def __init__(self, scanner: Scanner, offsets: _core.Scanner, chunk: _Chunk, fmt: FormatDescription | None,
                 keyed: bool) -> None:
        self.buf, self.base, self.names = chunk.buf, chunk.base, scanner.names
        self.units = units = _core.UnitList()
        scan = scanner.scan_into(units, chunk.buf, 0, chunk.base, chunk.name, at_eof=chunk.eof)
        if scan.error is not None:
            raise _Declined  # (the Python way reports it)
        self.n, self.stop = scan.added, scan.stop
        # Every unit's start and end at once (the UnitList hands them out one unit a call): the
        # same units found again by a scanner of their own, checksums checked once already.
        again = offsets.units(chunk.buf, 0, chunk.base, 1 << 62, chunk.eof)
        words = _units_of(again)
        if len(words) != self.n or again.stop != self.stop:
            raise _Declined
        self.starts, self.ends = words[:, 0], words[:, 1]
        self.fmt_in = fmt
        # The Format_description units, and the format after each: the slaves' walks stop there.
        self.fdes: list[tuple[int, FormatDescription | None]] = []
        for k in units.with_flags(F_HAS_FDE):
            u = units.unit(k)
            if u.kind == 0:
                fmt = unit_events(chunk.buf[u.start:u.end], chunk.base + u.start, fmt)[1]
                self.fdes.append((k, fmt))
        self.fmt_out = fmt
        self.keys: list[_core.StatementKey] = []
        if keyed and fmt is not None:
            first = self.fdes[-1][0] + 1 if self.fdes else 0
            self.keys = units.statement_units([(fmt.post_header_len(_QUERY), fmt.checksum_len, first)]).keys
        self.rotated_to = (_rotate_target(chunk.buf, scan.last_rotate, chunk.base, fmt, chunk.name)
                           if scan.last_rotate >= 0 else None)

    def fmt_at(self, k: int) -> FormatDescription | None:
        fmt = self.fmt_in
        for at, after in self.fdes:
            if at >= k:
                break
            fmt = after
        return fmt

    def transactions(self, k: int) -> list[Transaction]:
        """Unit k as `relay_transactions` groups it (a control unit: a Transaction per event
        the relay log's own framing does not account for)."""
        u = self.units.unit(k)
        if not u.flags & F_COMPLETE or u.flags & F_UNKNOWN_NON_IGNORABLE:
            raise _Declined  # (a unit the Python reader groups on: `relay_transactions`)
        return _unit_transactions(KINDS[u.kind], self.buf, u.start, u.end, self.base, self.fmt_at(k))


def _verify_compiled(full_relay: Path, checks: list[Check]) -> list[SlaveVerification | None]:
    """The compiled way for each slave of `checks` (`_compilable` ones), one pass over the full
    stream: a SlaveVerification, or None where it declined (the Python way answers)."""
    walks: list[_SlaveWalk | None] = [_SlaveWalk(spec, received, dropped) for spec, received, dropped, _ in checks]
    try:
        scanner, offsets = Scanner(str(full_relay)), _core.Scanner(False)
        fmt: FormatDescription | None = None
        for chunk in _relay_chunks(Path(full_relay)):
            if chunk.new_file:
                scanner, offsets = Scanner(str(Path(full_relay) / chunk.name)), _core.Scanner(False)
            live = [w for w in walks if w is not None]
            if not live:
                break
            full = _FullChunk(scanner, offsets, chunk, fmt, any(w.keyed for w in live))
            cuts = [k + 1 for k, _ in full.fdes]
            for i, walk in enumerate(walks):
                if walk is None:
                    continue
                try:
                    start = 0
                    for stop in [*cuts, full.n]:
                        if stop > start:
                            walk.walk(full, start, stop)
                        start = stop
                except _Declined:
                    walks[i] = None
            fmt, chunk.stop, chunk.rotated_to = full.fmt_out, full.stop, full.rotated_to
    except _Declined:
        return [None] * len(walks)
    results: list[SlaveVerification | None] = []
    for walk in walks:
        try:
            results.append(None if walk is None else walk.finish())
        except _Declined:
            results.append(None)
    return results
