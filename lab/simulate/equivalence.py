"""The differential property of master-side filtering, per slave: what the slave received with
master-side filtering, after its own replicate-rewrite-db, equals slave-side filtering of the
full stream (TransactionFilter over everything a rule-less slave received, then the same
rewrite), transaction by transaction.

Both sides are read from relay logs, which hold what a slave received (after its rewrite) in
master coordinates. What a skip policy leaves in a relay log for a transaction slave-side
filtering empties is part of the expectation: the policy says it (`SkipPolicy.relayed`).

lab.simulate.verify_compiled answers it: in runs, then, where they differ, unit by unit, each
received transaction found by its GTID (`relay_transactions`, this check's one reader of relay
logs as Transactions), and each difference is named.

MySQL quirk: a MySQL GTID event carries `transaction_length`, the bytes of the transaction as
the master sent it. Under the placeholder policy that count includes the placeholders the slave
then drops, so GTID events are compared by their GTID (and type), every other event byte for byte.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dumpfilter.codec import Event, EventType, TransactionGrouper
from dumpfilter.codec.constants import GTID_EVENT_TYPES
from dumpfilter.codec.transactions import Transaction
from dumpfilter.binlogs import FILE_FRAMING_TYPES, TailingReader
from dumpfilter.topology import SlaveSpec

if TYPE_CHECKING:
    from dumpfilter.rules.gate import Gate

    # One slave to verify: its spec, its relay log per skip policy, what its own check dropped per
    # policy, and the master policy's gate for it (verify_slaves).
    Check = tuple[SlaveSpec, dict[str, Path], dict[str, int] | None, Gate | None]

MAX_LISTED = 20  # differences listed per slave; all are counted


@dataclass
class Difference:
    policy: str
    transaction: str   # GTID, or "end_log_pos N" for a unit without one
    problem: str


@dataclass
class SlaveVerification:
    slave: str
    transactions: int = 0                 # transactions of the full stream compared
    compared: dict[str, int] = field(default_factory=dict)   # policy -> transactions received and matched
    differences: list[Difference] = field(default_factory=list)
    total_differences: int = 0
    # Of `transactions`, those whose relay forms the core made, and those it does not make (by the
    # rules' kept events or the skip policy's `relayed`).
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
                "differences": [asdict(d) for d in self.differences]}


def relay_transactions(relay_dir: Path) -> Iterator[Transaction]:
    """The transactions of a relay log, in order (bounded memory), each event placed at its
    MASTER position. A relay log keeps the master's log_pos in every header, but a reader's
    `pos` is the relay file offset; TransactionFilter frames an empty transaction with the
    GTID's end position (COMMIT log_pos), which must be the master's, as the master computed it."""
    grouper = TransactionGrouper()
    for _name, event in TailingReader(relay_dir):
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


def _key(txn: Transaction) -> str:
    gtid = txn.gtid_event
    if gtid is not None and not gtid.gtid_info.anonymous:
        return gtid.gtid_info.text
    return f"end_log_pos {txn.events[-1].log_pos}"


def _norm(events: Iterable[Event]) -> tuple[object, ...]:
    # (a MySQL GTID event by its GTID: its transaction_length differs, see the docstring)
    return tuple(("gtid", e.type_code, e.gtid) if e.type_code in GTID_EVENT_TYPES
                 and e.type_code != EventType.MARIADB_GTID else e.raw for e in events)


def _describe(events: list[Event]) -> str:
    names = [e.type_name for e in events]
    return f"{len(events)} events ({', '.join(names[:6])}{', ...' if len(names) > 6 else ''})"


def verify_slaves(full_relay: Path, checks: Iterable[Check]) -> list[SlaveVerification]:
    """Each (spec, received, slave_check_dropped, gate) of `checks`: every relay log in `received`
    (skip policy -> relay dir of that slave's stream) against slave-side filtering of `full_relay`
    with `spec`'s rules (ANDed with the master policy's `gate`, when there is one), in one pass over
    the full stream in runs; a slave whose relay logs differ (or cannot be read whole) in a second,
    unit by unit, which names each difference."""
    from dumpfilter.lab.simulate.verify_compiled import _verify_compiled

    checks = list(checks)
    results = _verify_compiled(full_relay, checks)
    rest = [i for i, found in enumerate(results) if found is None]
    if rest:
        for i, found in zip(rest, _verify_compiled(full_relay, [checks[i] for i in rest], keyed=True)):
            if found is None:
                found = SlaveVerification(checks[i][0].name)
                found.add(Difference("-", "-", f"the full stream's relay log {full_relay} cannot be read whole"))
            results[i] = found
    return [found for found in results if found is not None]
