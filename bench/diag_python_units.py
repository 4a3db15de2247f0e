"""Diagnostic (in process, session 53): which units a command still hands to TransactionFilter's
per-event loop, by the function that asked and the unit's shape (its GTID type or none, a
Transaction_payload, rows, how many Query events). Any dumpfilter command line works: `filter`,
`simulate --verify` (the master's streams, verify, experiment's rule groups), `split --no-spark`.

    python -m bench.diag_python_units filter BINLOG -o OUT --summary none --replicate-do-db db1
    python -m bench.diag_python_units simulate --verify --out DIR --no-progress"""

from __future__ import annotations

import contextlib
import sys
import traceback
from collections import Counter

from dumpfilter.codec import EventType, Transaction
from dumpfilter.rules.transaction_filter import FilterResult, TransactionFilter


def shape(txn: Transaction) -> str:
    if txn.kind == "control":
        return "control"
    gtid = txn.gtid_event
    parts = ["no GTID" if gtid is None else EventType(gtid.type_code).name]
    if any(e.type_code == EventType.TRANSACTION_PAYLOAD for e in txn.events):
        parts.append("payload")
    if any(e.is_rows for e in txn.events):
        parts.append("rows")
    parts.append(f"{sum(e.is_query for e in txn.events)} Query")
    return " ".join(parts) + ("" if txn.complete else " (cut)")


def main(argv: list[str]) -> None:
    seen: Counter[tuple[str, str]] = Counter()
    whole = TransactionFilter.filter

    def counted(self: TransactionFilter, txn: Transaction) -> FilterResult:
        caller = traceback.extract_stack(limit=2)[0]
        seen[(f"{caller.filename.rsplit('/', 2)[-1]}:{caller.name}", shape(txn))] += 1
        return whole(self, txn)

    TransactionFilter.filter = counted  # type: ignore[method-assign]
    from dumpfilter.cli.app import main as cli

    with contextlib.suppress(SystemExit):  # (its error line is printed: the counts still are)
        cli(argv)
    for (caller, what), n in sorted(seen.items()):
        if what != "control":
            print(f"{n:8d}  {caller:40s} {what}")


if __name__ == "__main__":
    main(sys.argv[1:])
