"""simulate --verify's one way (see `equivalence`): the full stream's units answered for each slave
from its own rules, what each of its relay logs holds of them made by the core, and each run
compared with what the slave received as one byte range.

A unit is answered by the slave's keep table through the core (its keep byte per table name,
`UnitList.rows_many`, per statement key too), and where the table leaves it
(DDL, a statement its keys do not read; every unit of a slave whose master policy bounds statement
texts, or whose rules read annotations) by the rules themselves, as the master's StatementAnswers
asks them: kept whole, skipped or emptied. What a relay log holds of a run of answered units is
made by the send walk in relay mode (`_core.relayed`, core/src/send.rs): a unit kept whole byte
for byte, whatever the skip policy; a unit kept in part as its kept events; a skipped unit as its
policy's form as the slave relays it (nothing under heartbeat; the GTID and XID of the placeholder
policy's unit; the empty transaction), then renamed as the slave's replicate-rewrite-db renames
it. Only a unit the walk cannot make goes by the rules' kept events or the policy's `relayed`: a
unit kept in part it cannot cut (a MySQL statement unit), a form it does not make (a MariaDB
statement unit's placeholder framing, a transaction payload's). What a slave received is read as
one byte string: its relay log's units back to back."""

from __future__ import annotations

import bisect
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from dumpfilter import _core, skip_policy
from dumpfilter.binlogs.files import binlog_listing
from dumpfilter.binlogs.tail import _rotated_name
from dumpfilter.codec import Event, EventType
from dumpfilter.codec.constants import LOG_EVENT_ARTIFICIAL_F, MAGIC, QUERY_EVENT_TYPES
from dumpfilter.codec.format_description import FormatDescription
from dumpfilter._core import SKIP_HEARTBEAT, SKIP_STOP
from dumpfilter.codec.scanner import (F_COMPLETE, F_HAS_FDE, F_UNKNOWN_NON_IGNORABLE, KINDS,
                                      Scanner, UnitScan, unit_events)
from dumpfilter.codec.transactions import CONTROL, Transaction
from dumpfilter.codec.event import HEADER
from dumpfilter.codec.scanner import ROW_KEEP, ROW_SKIP, ROW_SLOW
from dumpfilter.lab.simulate.equivalence import (Difference, SlaveVerification, _describe, _key, _norm,
                                                 relay_transactions)
from dumpfilter.rules.decider import gated
from dumpfilter.rules.keep_table import KeepTable, KeyRows
from dumpfilter.rules.walk_driver import Driver, Unaccounted
from dumpfilter.rules.evaluate import RuleEngine
from dumpfilter.rules.renamer import event_renamer
from dumpfilter.rules.transaction_filter import EMPTIED, KEEP, KEPT, PARTIAL, SKIPPED, TransactionFilter

if TYPE_CHECKING:
    from dumpfilter.lab.simulate.equivalence import Check

_CHUNK = 8 << 20  # full-stream bytes scanned at once (a UnitList each)
_RELAY_CHUNK = 1 << 20  # a received relay log's (8 MB ones held 75 MB more over five logs)
_QUERY = int(EventType.QUERY)
_NAMING = frozenset({*QUERY_EVENT_TYPES, EventType.EXECUTE_LOAD_QUERY, EventType.TABLE_MAP})  # what a rename reads


class _Declined(Exception):
    """What a slave received differs from the runs (or cannot be read whole): the keyed way names where."""


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


class _Columns:
    """A scan's units as numpy columns (the codec's `UnitRecords.columns`)."""

    __slots__ = ("starts", "ends", "control", "flags")

    def __init__(self, scan: UnitScan) -> None:
        starts, ends, words = (np.asarray(c) for c in scan.units.columns())
        self.starts, self.ends = starts, ends
        self.control = (words >> np.uint64(32)) & np.uint64(0xFF) == KINDS.index(CONTROL)
        self.flags = words >> np.uint64(40)

    def __len__(self) -> int:
        return len(self.starts)


def _runs(mask: np.ndarray[Any, np.dtype[np.bool_]]) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """The runs of True in `mask`: their first indices and the indices after them."""
    edges = np.diff(np.concatenate(([0], mask.view(np.int8), [0])))
    return np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)


def _received_spans(directory: Path) -> Iterator[tuple[bytes, int, int]]:
    """The byte ranges of a received relay log's units that are not control units (the relay
    log's own framing), in order, as (buffer, start, end): read by the compiled scanner, its
    checksums not checked (the bytes are compared with the full stream's, which are)."""
    scanner = Scanner("<relay>", verify_checksums=False)
    fmt: FormatDescription | None = None
    for chunk in _relay_chunks(directory, _RELAY_CHUNK):
        buf, base = chunk.buf, chunk.base
        if chunk.new_file:
            scanner = Scanner(str(directory / chunk.name), verify_checksums=False)
        scan = scanner.units(buf, 0, base, at_eof=chunk.eof)
        if scan.error is not None:
            raise _Declined
        units = _Columns(scan)
        flags = units.flags
        if np.any(flags & np.uint64(F_COMPLETE) == 0) or np.any(flags & np.uint64(F_UNKNOWN_NON_IGNORABLE)):
            raise _Declined
        for k in np.flatnonzero(units.control & (flags & np.uint64(F_HAS_FDE) != 0)).tolist():
            start = int(units.starts[k])
            fmt = unit_events(buf[start:int(units.ends[k])], base + start, fmt)[1]
        lo, hi = _runs(~units.control)
        yield from zip([buf] * len(lo), units.starts[lo].tolist(), units.ends[hi - 1].tolist())
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


class _SlaveWalk:
    """One slave: the rules' answer for each unit of the full stream, what the core's send walk in
    relay mode makes of it under each skip policy, and what the slave received per skip policy.
    In runs (`_Received`: one byte range per run) until a difference, or `keyed`: unit by unit,
    each received transaction found by its GTID (`relay_transactions`), every difference named."""

    def __init__(self, check: Check, keyed: bool = False) -> None:
        spec, received, dropped, gate = check
        self.result = SlaveVerification(spec.name)
        self.result.compared = dict.fromkeys(received, 0)
        for policy, count in (dropped or {}).items():
            if count:
                self.result.add(Difference(policy, "-", f"the master sent {count} event(s) the slave's own rules drop"))
        engine = RuleEngine(spec.rules, spec.settings)
        # The rules' answer (ANDed with the master policy's gate for the slave, as the master
        # composes them) for a unit the keep table does not answer: DDL, a statement its keys do
        # not read; every unit where a gate bounds statement texts or the rules read annotations.
        decider = gated(engine, gate)
        self.reference = TransactionFilter(decider, empty_transactions=KEEP)
        self.keeps = KeepTable(engine)
        self.by_table = decider is engine and not engine.checks_annotations  # (else the rules answer every unit)
        self.rename = event_renamer(engine, spec.rules, spec.settings)
        self.keyed = keyed
        self.received = {policy: _Received(path) for policy, path in received.items()} if not keyed else {}
        self.heads = {policy: _Heads(path) for policy, path in received.items()} if keyed else {}
        self.policies = [skip_policy.named(policy) for policy in received]
        # What each policy makes of a skipped unit (`_core.relayed` makes its relayed form).
        self.skips = bytes(p.walk_skip for p in self.policies)
        self.driver: Driver[KeyRows, _core.KeysUsed] = Driver(self.keeps)

    def walk(self, chunk: _FullChunk, start: int, stop: int) -> None:
        """Units start..stop of a chunk (no Format_description before `stop` - 1): the runs the
        core answers (units kept whole as they are, kept in part as their kept events, skipped
        whole as the form each policy relays: `_core.relayed`), by the one driver
        (rules.walk_driver) with this slave's keep table, each compared at once with what each relay
        log received (`run`); a unit the core does not answer goes the general way (`step`)."""
        self.full, self.start, self.stop = chunk, start, stop
        self.fmt = fmt = chunk.fmt_at(start)
        # Without a format, a skipped unit's form is not made: the general way takes it.
        self.run_skips = self.skips if fmt is not None else bytes(
            s if s == SKIP_HEARTBEAT else SKIP_STOP for s in self.skips)
        self.crc = fmt is not None and fmt.checksum_len > 0
        self._row: tuple[KeyRows | None, bytes, bytes, bytes | None] | None = None  # answers, keep bytes
        self._declined = -1  # where the core last stopped: the general way's unit
        if self.keyed:
            at = start
            while at < stop:
                at = self.step(at)
        else:
            self.driver.drive(self, stop, start)

    def key_space(self, at: int) -> object | None:
        return self.full if self.by_table and self.keeps.keys_enabled and self.full.keys else None

    def statement_units(self, at: int, space: object) -> list[_core.StatementKey] | None:
        return self.full.keys

    def _answers(self, keys: KeyRows | None) -> tuple[KeyRows | None, bytes, bytes, bytes | None]:
        """This slave's answer byte per unit of the chunk, those of units start..stop the keep table
        leaves ROW_SLOW asked of the rules (`reference`): kept whole, ROW_KEEP; skipped or emptied,
        ROW_SKIP; kept in part, left to the general way."""
        made = self._row
        if made is not None and made[0] is keys:
            return made
        units = self.full.units
        keep, stmt_keep = b"", None
        if not self.by_table:
            row = bytearray([ROW_SLOW]) * self.stop
        else:
            keep = self.keeps.tables(self.full.names)
            by_table = units.rows_many([keep], None if keys is None else [keys.keep])[0]
            stmt_keep = None if keys is None else keys.keep
            row = bytearray(by_table)
        k = row.find(ROW_SLOW, self.start, self.stop)
        while k >= 0:
            if units.unit(k).kind:  # (a control unit: the general way's)
                txn = self.full.transaction(k)
                outcome = self.reference.filter(txn)
                if outcome.outcome == KEPT and len(outcome.events) == len(txn.events):
                    row[k] = ROW_KEEP
                elif outcome.outcome in (EMPTIED, SKIPPED):
                    row[k] = ROW_SKIP
            k = row.find(ROW_SLOW, k + 1, self.stop)
        made = self._row = (keys, bytes(row), keep, stmt_keep)
        return made

    def run(self, at: int, keys: KeyRows | None) -> Unaccounted | None:
        if at == self._declined:
            return None
        _, row, keep, stmt_keep = self._answers(keys)
        run = _core.relayed(self.full.units, row, keep, at, self.stop, self.run_skips, self.crc, stmt_keep)
        self._declined = run.next
        if run.next > at:
            result = self.result
            for (policy, stream), data, count in zip(self.received.items(), run.data, run.units):
                if not stream.match(memoryview(self._renamed(data))):
                    raise _Declined
                result.compared[policy] += count
            result.transactions += run.next - at
            result.by_core += run.next - at
        return Unaccounted(run.next)

    def step(self, at: int) -> int:
        """Unit `at` alone: a control unit to the rules (a Format_description resets them), any
        other compared with what each relay log received of it."""
        u = self.full.units.unit(at)
        if not u.kind:  # (a control unit)
            if u.flags & F_HAS_FDE:  # table ids restart with the server, as a replica's do
                self.reference.reset()
                self.keeps.forget_tables()
            return at + 1
        txn = self.full.transaction(at)
        self.result.transactions += 1
        expected = self._expected(at, txn)
        if self.keyed:
            self._compare(_key(txn), expected)
            return at + 1
        for (policy, stream), data in zip(self.received.items(), expected):
            if data is None:
                continue
            if not stream.match(memoryview(data)):
                raise _Declined
            self.result.compared[policy] += 1
        return at + 1

    def _expected(self, at: int, txn: Transaction) -> list[bytes | None]:
        """What each relay log holds of unit `at` (None: nothing): the core's relayed form of the
        rules' answer; where the core does not make it (a unit kept in part it cannot cut, a MySQL
        statement unit's placeholder framing, a transaction payload's), the rules' kept events or
        the form the skip policy says."""
        _, row, keep, stmt_keep = self._row or self._answers(None)
        run = _core.relayed(self.full.units, row, keep, at, at + 1, self.run_skips, self.crc, stmt_keep)
        if run.next > at:
            self.result.by_core += 1
            return [self._renamed(data) if count else None for data, count in zip(run.data, run.units)]
        self.result.by_python += 1
        outcome = self.reference.filter(txn)
        out: list[bytes | None] = []
        for policy in self.policies:
            events = outcome.events if outcome.outcome in (KEPT, PARTIAL) else policy.relayed(txn)
            if events is not None and self.rename is not None:
                events = [self.rename(e) for e in events]
            out.append(None if events is None else b"".join([e.raw for e in events]))
        return out

    def _renamed(self, data: bytes) -> bytes:
        """`data`'s events as the slave's replicate-rewrite-db renames them."""
        if self.rename is None or not data:
            return data
        out: list[bytes] = []
        run, at, n, rename = 0, 0, len(data), self.rename
        while at < n:  # (the events between two that name a database copied as one)
            size = int.from_bytes(data[at + 9:at + 13], "little")
            if data[at + 4] in _NAMING:
                out += (data[run:at], rename(Event(data[at:at + size], at, self.fmt)).raw)
                run = at + size
            at += size
        out.append(data[run:])
        return b"".join(out)

    def _compare(self, key: str, expected: list[bytes | None]) -> None:
        """The unit `key` expected of each relay log, against the transaction received there."""
        result = self.result
        for (policy, heads), data in zip(self.heads.items(), expected):
            want = None if data is None else _events(data, self.fmt, 0, len(data))
            got = heads.take(key)
            if got is None:
                if want is not None:
                    result.add(Difference(policy, key, f"not received; slave-side filtering keeps {_describe(want)}"))
            elif want is None:
                result.add(Difference(policy, key, f"received {_describe(got)}; slave-side filtering "
                                                   "skips the whole transaction"))
            elif _norm(got) != _norm(want):
                result.add(Difference(policy, key, f"received {_describe(got)}; slave-side filtering "
                                                   f"keeps {_describe(want)}"))
            else:
                result.compared[policy] += 1

    def finish(self) -> SlaveVerification:
        if not all(stream.finished() for stream in self.received.values()):
            raise _Declined
        for policy, heads in self.heads.items():
            for key in heads.rest():
                self.result.add(Difference(policy, key, "received, but not in the full stream (or out of order)"))
        return self.result


class _Heads:
    """A relay log's transactions (`relay_transactions`, but its control units), taken in order by key."""

    def __init__(self, directory: Path) -> None:
        self._it = (txn for txn in relay_transactions(directory) if txn.kind != CONTROL)
        self._head = next(self._it, None)

    def take(self, key: str) -> list[Event] | None:
        """The events of the next transaction received, where it is `key`'s."""
        head = self._head
        if head is None or _key(head) != key:
            return None
        self._head = next(self._it, None)
        return head.events

    def rest(self) -> Iterator[str]:
        while self._head is not None:
            yield _key(self._head)
            self._head = next(self._it, None)


def _events(buf: bytes, fmt: FormatDescription | None, start: int, end: int, base: int = 0) -> list[Event]:
    """The events of buf[start:end], back to back, each at its master position (where its log_pos
    says, else at base + its offset)."""
    out, at, unpack = [], start, HEADER.unpack_from
    while at < end:
        header = unpack(buf, at)
        size, log_pos = header[3], header[4]
        out.append(Event(buf[at:at + size], max(0, log_pos - size) if log_pos else base + at, fmt, header))
        at += size
    return out


class _FullChunk:
    """One chunk of the full stream as every slave walks it: its units (a UnitList), their
    formats, the scanner's table names and the chunk's statement keys."""

    def __init__(self, scanner: Scanner, chunk: _Chunk, fmt: FormatDescription | None, keyed: bool) -> None:
        self.buf, self.base, self.names = chunk.buf, chunk.base, scanner.names
        self.units = units = _core.UnitList()
        scan = scanner.scan_into(units, chunk.buf, 0, chunk.base, chunk.name, at_eof=chunk.eof)
        if scan.error is not None:
            raise _Declined  # (the keyed way reports it)
        self.n, self.stop = scan.added, scan.stop
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
        i = bisect.bisect_left(self.fdes, k, key=lambda fde: fde[0])
        return self.fdes[i - 1][1] if i else self.fmt_in

    def transaction(self, k: int) -> Transaction:
        """Unit k (not a control unit) as `relay_transactions` groups it."""
        u = self.units.unit(k)
        if not u.flags & F_COMPLETE or u.flags & F_UNKNOWN_NON_IGNORABLE:
            raise _Declined  # (a unit the Python reader groups on: `relay_transactions`)
        return Transaction(KINDS[u.kind], _events(self.buf, self.fmt_at(k), u.start, u.end, self.base))


def _verify_compiled(full_relay: Path, checks: list[Check], keyed: bool = False) -> list[SlaveVerification | None]:
    """Each slave of `checks` in one pass over the full stream: a SlaveVerification, or None where
    what it received differs (not `keyed`: the keyed way names the differences), or cannot be read
    whole (`verify_slaves` says so)."""
    walks: list[_SlaveWalk | None] = [_SlaveWalk(check, keyed) for check in checks]
    try:
        scanner = Scanner(str(full_relay))
        fmt: FormatDescription | None = None
        for chunk in _relay_chunks(Path(full_relay)):
            if chunk.new_file:
                scanner = Scanner(str(Path(full_relay) / chunk.name))
            live = [w for w in walks if w is not None]
            if not live:
                break
            full = _FullChunk(scanner, chunk, fmt, any(w.by_table and w.keeps.keys_enabled for w in live))
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
