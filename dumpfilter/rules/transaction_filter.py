"""Applies one slave's rules to whole transactions of binlog events: which events it keeps, with
the fix-ups that keep the result a valid binlog (STMT_END_F moved, GTID transaction_length,
Transaction_payload re-packed, empty transactions framed). The unit every consumer shares:
`dumpfilter filter`, the master's dump service and the Spark split."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from dumpfilter.codec import Event, EventType, Transaction, fix_transaction_length
from dumpfilter.codec.constants import (
    GTID_EVENT_TYPES,
    STATEMENT_CONTEXT_TYPES,
    STMT_END_F,
)
from dumpfilter.errors import MalformedEventError
from dumpfilter.codec.payload import repack_payload
from dumpfilter import _core
from dumpfilter.codec.transactions import CONTROL
from dumpfilter.rules.decider import Decider

KEEP, DROP = "keep", "drop"

# Outcomes of one transaction for one slave.
PASSED = "control"     # a control event: never filtered
KEPT = "kept"          # every content event kept
PARTIAL = "partial"    # some content kept (ROW format can split a transaction)
EMPTIED = "emptied"    # nothing kept; framing kept as an empty transaction
SKIPPED = "skipped"    # nothing sent at all


def is_framing(event: Event) -> bool:
    """GTID, XID, XA_PREPARE and the framing statements (`framing_statement`): the events that
    frame a transaction and are never filtered."""
    t = event.type_code
    if t in GTID_EVENT_TYPES or t == EventType.XID or t == EventType.XA_PREPARE:
        return True
    return event.is_query and framing_statement(event.sql or "")


class FilterResult:
    """One transaction's outcome for one slave. The events of an emptied transaction are built
    on first use: a master stream under the heartbeat policy never sends them."""

    __slots__ = ("outcome", "_events", "_build", "bytes_in", "events_in")

    def __init__(self, outcome: str, events: list[Event] | None = None, bytes_in: int = 0, events_in: int = 0,
                 build: Callable[[], list[Event]] | None = None):
        self.outcome = outcome
        self._events = [] if events is None and build is None else events
        self._build = build
        self.bytes_in = bytes_in
        self.events_in = events_in

    @property
    def events(self) -> list[Event]:
        if self._events is None:
            assert self._build is not None  # no events: built on first use (__init__)
            self._events = self._build()
            self._build = None
        return self._events

    @property
    def bytes_out(self) -> int:
        return sum(e.size for e in self.events)


def framing_statement(sql: str) -> bool:
    """Whether a replica applies a Query with this text whatever its database filter: MySQL's
    `Query_log_event::is_trans_keyword` on the raw text, read by the core (stmt::framing, with its
    quirks). A text opening with none of "BCSsRrXx" is answered without it."""
    return (not sql or sql[0] in "BCSsRrXx") and _core.framing_statement(sql.encode("utf-8", "surrogateescape"))


def decided_events(txn: Transaction) -> Iterator[tuple[Event, Event]]:
    """The events of `txn` a slave's rules decide, in order: each statement but a framing one and
    each Table_map (rows go with their Table_map, context events with their statement), as (event,
    the event holding its position: a Transaction_payload's events have none of their own). A rows
    event without a Table_map of its own statement is refused, as `TransactionFilter` refuses it."""
    maps: set[int] = set()
    for at in txn.events:
        for event in at.payload_events() if at.type_code == EventType.TRANSACTION_PAYLOAD else (at,):
            if event.is_rows:
                if event.table_id not in maps:
                    raise MalformedEventError(f"{event.type_name} event for table id {event.table_id} has no "
                                              "Table_map in its statement", offset=at.pos)
                if event.rows_flags & STMT_END_F:
                    maps.clear()
            elif event.type_code == EventType.TABLE_MAP:
                maps.add(event.table_id)
                yield event, at
            elif event.is_query and not framing_statement(event.sql or ""):
                yield event, at


def lone_statement(events: list[Event]) -> Event | None:
    """The Query event of a unit made of a GTID and that one statement, else None."""
    if len(events) == 2 and events[1].is_query and events[0].type_code in GTID_EVENT_TYPES:
        return events[1]
    return None


class TransactionFilter:
    """One slave's view of the stream. Holds the table-id cache, which is reset at every
    Format_description event (table ids only mean something within one server lifetime)."""

    def __init__(self, decider: Decider, *, empty_transactions: str = KEEP):
        if not isinstance(decider, Decider):
            raise TypeError(f"TransactionFilter needs a rules.decider.Decider, not {type(decider).__name__}")
        if empty_transactions not in (KEEP, DROP):
            raise ValueError(f"empty_transactions must be 'keep' or 'drop', not {empty_transactions!r}")
        self.decider = decider
        self.empty_transactions = empty_transactions
        self.table_ids: dict[int, bool] = {}

    def reset(self) -> None:
        """At a Format_description event: table ids restart with the server, and the engine's
        per-table caches are invalidated too (issue 3: "invalidated ... at each FDE")."""
        self.table_ids.clear()
        self.decider.invalidate()

    def filter(self, txn: Transaction) -> FilterResult:
        size = txn.size
        if txn.kind == CONTROL:
            if txn.events[0].type_code == EventType.FORMAT_DESCRIPTION:
                self.reset()
            return FilterResult(PASSED, list(txn.events), size, len(txn.events))
        events = txn.events
        self.table_ids.clear()  # a transaction's rows are mapped by its own Table_maps only
        query = lone_statement(events)
        if query is not None:
            if self.lone_text_kept(query.sql or "", query.db):
                return FilterResult(KEPT, list(events), size, 2)
            kept, content_in, content_kept = [events[0]], 1, 0
        else:
            kept, content_in, content_kept = self._filter_events(events)
        if content_kept == 0 and content_in > 0:
            # Emptied when kept as an empty transaction, which needs a GTID to frame; built lazily.
            if self.empty_transactions == KEEP and txn.gtid_event is not None:
                return FilterResult(EMPTIED, None, size, len(txn.events),
                                    build=txn.emptied)
            return FilterResult(SKIPPED, [], size, len(txn.events))
        if kept != txn.events:
            kept = fix_transaction_length(kept)
        return FilterResult(PARTIAL if content_kept < content_in else KEPT, kept, size, len(txn.events))

    def lone_text_kept(self, sql: str, current_db: str | None) -> bool:
        """Whether a unit made of a GTID and one Query event (DDL, MariaDB's standalone groups:
        most statement units of a ROW binlog), given by the Query's text and default database, is
        kept whole, or else emptied: what the loop below answers for that shape, without it."""
        if framing_statement(sql):
            return True
        return self.decider.statement_kept(sql, current_db)

    # -- event by event -------------------------------------------------------------------
    def _filter_events(self, events: list[Event]) -> tuple[list[Event], int, int]:
        """Returns (kept events, content events in, content events kept)."""
        kept: list[Event] = []
        pending: list[Event] = []      # context events waiting for their Query
        annotations: list[Event] = []  # Annotate_rows / Rows_query waiting for their rows
        last_kept_rows: int | None = None  # index in `kept` of the statement's last kept rows event
        content_in = content_kept = 0
        # A decider with a policy bound (the master's) judges the annotation of a statement once its
        # Table_maps are read: kept in `kept` at `held`, taken out if the text may not go.
        check = self.decider.annotation_kept if self.decider.checks_annotations else None
        held: int | None = None
        maps: list[tuple[str, str]] = []
        for event in events:
            t = event.type_code
            if held is not None and check is not None and t != EventType.TABLE_MAP:
                if not check(kept[held].sql or "", maps):
                    del kept[held]  # before any of the statement's rows: no index in `kept` moves
                held = None
            if t in GTID_EVENT_TYPES or t == EventType.XID or t == EventType.XA_PREPARE:
                kept.append(event)
            elif t in STATEMENT_CONTEXT_TYPES:
                pending.append(event)
            elif t in (EventType.ANNOTATE_ROWS, EventType.ROWS_QUERY):
                annotations = [event]
                maps = []
            elif event.is_query:
                sql = event.sql
                assert sql is not None  # a Query event's text is never None
                if framing_statement(sql):
                    kept.extend(pending)
                    kept.append(event)
                else:
                    content_in += 1
                    if self.decider.statement_kept(sql, event.db):
                        content_kept += 1
                        kept.extend(pending)
                        kept.append(event)
                pending = []
            elif t == EventType.TABLE_MAP:
                content_in += 1
                table_id, db, table = event.table_map
                keep = self.decider.table_kept(db, table)
                self.table_ids[table_id] = keep
                maps.append((db, table))
                if keep:
                    content_kept += 1
                    if annotations and check is not None:
                        held = len(kept)
                    kept.extend(annotations)
                    annotations = []
                    kept.append(event)
            elif event.is_rows:
                content_in += 1
                flags = event.rows_flags
                # Its table is the Table_map of its own statement (a replica forgets every map at
                # the statement's end, STMT_END_F, and at the transaction's). A rows event without
                # one there would be routed by a map an earlier transaction left: one table's rows
                # sent as another's. Refused, as the replica's applier refuses it (error 1032/1146).
                kept_rows = self.table_ids.get(event.table_id)
                if kept_rows is None:
                    raise MalformedEventError(f"{event.type_name} event for table id {event.table_id} has no "
                                              "Table_map in its statement", offset=event.pos)
                if kept_rows:
                    content_kept += 1
                    kept.append(event)
                    last_kept_rows = len(kept) - 1
                elif flags & STMT_END_F and last_kept_rows is not None:
                    # The statement's last rows event is filtered out: the applier closes the
                    # statement (and releases its table maps) at STMT_END_F, so move the flag to
                    # the last rows event we keep.
                    moved = kept[last_kept_rows]
                    kept[last_kept_rows] = moved.with_rows_flags(moved.rows_flags | STMT_END_F)
                if flags & STMT_END_F:
                    last_kept_rows = None
                    annotations = []
                    self.table_ids.clear()
            elif t == EventType.TRANSACTION_PAYLOAD:
                inner, inner_in, inner_kept = self._filter_events(event.payload_events())
                content_in += inner_in
                content_kept += inner_kept
                if inner_kept == inner_in:
                    # Everything kept (or nothing to filter, e.g. only BEGIN ... XID): the payload
                    # goes out as it came, compressed bytes untouched.
                    kept.append(event)
                elif inner_kept:
                    kept.append(repack_payload(event, inner))
            else:
                kept.append(event)  # control events inside a transaction, unknown types
        if held is not None and check is not None and not check(kept[held].sql or "", maps):
            del kept[held]
        return kept, content_in, content_kept
