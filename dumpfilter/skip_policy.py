"""The skip policies, one class each: what the master sends in place of what a slave's filters
drop (WL#2387), for a gRPC slave and for a real MySQL or MariaDB replica. Every consumer (the
master's stream and the core's send walk, the MySQL endpoint, the slave, the lab, the Spark cost
model, the CLI) asks a policy object; the policies' names are spelled here only (and in the .proto).

* heartbeat: nothing, then one heartbeat that moves the slave's position past the skipped stretch;
* placeholder: each dropped event as a RAND_EVENT of the same log_pos (MaxScale binlogfilter's
  replacement), inside the transaction's own framing;
* empty-transaction: the GTID with an empty body (MySQL 5.7's way for a filtered transaction).

Each answers for three things: a skipped stretch (`skips_as_heartbeat`, `skipped`), a partial
transaction (`partial_as_kept`, `partial`) and an emptied transaction (`skipped` with its
FilterResult); `tally` counts what it sent; `for_replica` and `replica_tail` say what a real
replica gets instead.
"""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING, ClassVar, Protocol

from dumpfilter._core import SKIP_EMPTY, SKIP_HEARTBEAT, SKIP_PLACEHOLDER, SKIP_STOP, SendResult
from dumpfilter.codec import Event, EventType, fix_transaction_length
from dumpfilter.codec.constants import HEADER_LEN, LOG_EVENT_ARTIFICIAL_F, LOG_EVENT_SKIP_REPLICATION_F
from dumpfilter.codec.encode import artificial_rotate, build_event, query_body
from dumpfilter.codec.gtid import MariadbGtidList
from dumpfilter.codec.rename import replayed_fde
from dumpfilter.sent import SentCounts

MARIADB_FLAG_IGN_GTIDS = 1 << 29  # Gtid_list_log_event::FLAG_IGN_GTIDS: the SQL thread records the GTIDs listed
PLACEHOLDER_SQL = "# dumpfilter: a statement this replica's rules skip"
_QUERY_FIXED = HEADER_LEN + 13 + 1  # header, Query post-header, the empty database's NUL


# The transaction filter's module is imported where it is used, not here: a slave starts (Register,
# Dump) before its rule engine loads (tests/slave/test_slave_cli_startup.py).
if TYPE_CHECKING:
    from dumpfilter.codec import FormatDescription, Transaction
    from dumpfilter.rules.transaction_filter import FilterResult


class UnitSink(Protocol):
    """Where `SkipPolicy.send_unit` sends: the master's stream queues bytes, experiment's counter
    only counts them."""

    def emit(self, events: list[Event]) -> int:
        """Send `events` after the heartbeat a skipped stretch owes, if any; count them sent
        (events_sent, bytes_sent); return their bytes."""
        ...

    def stretch(self) -> None:
        """A skipped unit joins a skipped stretch: one heartbeat before what is sent next."""
        ...

    def skipped(self, events: int, size: int) -> None:
        """Count events and bytes of the unit that were not sent as themselves."""
        ...


def placeholder(event: Event) -> Event:
    """The RAND_EVENT sent in place of `event`."""
    # MaxScale binlogfilter's replacement: RAND_EVENT, seeds = original size and type, server_id 0,
    # timestamp 0, LOG_EVENT_SKIP_REPLICATION_F; we keep the original log_pos (newer MaxScale).
    return build_event(EventType.RAND, struct.pack("<QQ", event.size, event.type_code), fmt=event.fmt,
                       server_id=0, timestamp=0, log_pos=event.log_pos, flags=LOG_EVENT_SKIP_REPLICATION_F)


def is_placeholder(event: Event) -> bool:
    """A placeholder (a master-made RAND_EVENT), which a slave drops instead of relaying: the
    one placeholder test of the tree."""
    return (event.type_code == EventType.RAND and event.server_id == 0
            and bool(event.flags & LOG_EVENT_SKIP_REPLICATION_F))


class SkipPolicy:
    """What one skip policy makes of what a slave's filters drop. The base answers as the
    heartbeat policy does; each policy overrides what differs."""

    name: ClassVar[str]
    # For a gRPC slave. A skipped unit joins a skipped stretch, sent as one heartbeat before the
    # next event sent (the core's skip_ok); a transaction kept in part is sent as its kept events
    # (the core's partial_ok). Where False, the unit goes the per-unit way (`skipped`, `partial`).
    skips_as_heartbeat: ClassVar[bool] = False
    partial_as_kept: ClassVar[bool] = True
    # What the core's send walk makes of a skipped unit (`_core.SKIP_*`): it makes this policy's
    # form for the MariaDB and MySQL GTID units it can (skip_forms.rs, skip_forms/mysql.rs), and
    # stops at any other (a transaction payload, a MySQL unit without a GTID) for `skipped`.
    walk_skip: ClassVar[int] = SKIP_STOP

    def send_unit(self, txn: Transaction, result: FilterResult, counts: SentCounts, sink: UnitSink) -> int:
        """A transaction the compiled walk left (control units are not transactions), decided by
        TransactionFilter (`result`), sent to `sink` as this policy says and counted in `counts`:
        the one model of that step, run by the master's stream (master/stream/slave_stream.py)
        and counted by `experiment` (spark_jobs/tasks/bandwidth.py). Returns the master events
        kept (sent as themselves)."""
        from dumpfilter.rules.transaction_filter import KEPT, PARTIAL

        outcome = result.outcome
        if outcome == KEPT or outcome == PARTIAL:
            kept = result.events
            events = kept if outcome == KEPT else self.partial(txn.events, kept)
            sent = sink.emit(events)
            counts.kept_bytes += sent - self.tally(counts, events, skipped=False)
            counts.transactions_kept += outcome == KEPT
            counts.transactions_partial += outcome == PARTIAL
            sink.skipped(len(txn.events) - len(kept), txn.size - sum(e.size for e in kept))
            return len(kept)
        counts.transactions_skipped += 1
        sink.skipped(len(txn.events), txn.size)
        instead = self.skipped(txn.events, result)
        if instead is None:
            sink.stretch()
        else:
            sink.emit(instead)
            self.tally(counts, instead, skipped=True)
        return 0

    def partial(self, events: list[Event], kept: list[Event]) -> list[Event]:
        """What a transaction of `events` kept in part (`kept`) is sent as."""
        return kept

    def skipped(self, events: list[Event], result: FilterResult) -> list[Event] | None:
        """What a transaction of `events` skipped (FilterResult `result`: skipped or emptied) is
        sent as; None: nothing, the unit joins a skipped stretch (one heartbeat)."""
        return None

    def tally(self, counts: SentCounts, sent: list[Event], *, skipped: bool) -> int:
        """Counts in `counts` (SlaveStats, SlaveCounts: placeholders, empty_transactions and their
        bytes) what this policy added to `sent` (a partial transaction's, or a skipped one's);
        returns those bytes. Every byte sent for a skipped transaction is the policy's."""
        return 0

    def tally_walk(self, counts: SentCounts, walked: SendResult) -> None:
        """Counts in `counts` what the core's walk sent in this policy's form (`walked`, a
        `_core.SendResult`: its skip_units, skip_bytes, placeholders), as `tally` counts them."""

    def relayed(self, txn: Transaction) -> list[Event] | None:
        """What a slave's relay log holds for a transaction `txn` its filters skip: None for nothing."""
        return None

    # -- a real replica, through the MySQL endpoint ----------------------------------------
    def for_replica(self, event: Event, *, gtid_log_pos: int | None, end: int | None, server_id: int) -> Event | None:
        """What a real replica's IO thread gets for `event` of a batch (None: left out).
        `gtid_log_pos` is the log_pos of the transaction's GTID, `end` where the next event starts
        in the master's binlog."""
        return event

    def replica_tail(self, *, flavor: str, file: str, end: int, gtids: dict[tuple[int, int], int],
                     fmt: FormatDescription | None,
                     server_id: int, fde: Event | None = None) -> list[Event]:
        """What a skipped stretch at the end of the binlog becomes for a real MySQL or MariaDB replica,
        once its stream is caught up there: the events that bring the replica's Read_Master_Log_Pos
        and Exec_Master_Log_Pos to `end` in `file`, as they stand behind a real master. Sent once per
        idle point after such a stretch, never per skipped transaction.

        Every policy ends up here the same way: under the heartbeat policy for any skipped tail (a
        replica's IO thread counts a heartbeat, never moves its position on one: slave.cc queue_event,
        and MySQL's only under GTID auto-positioning); under placeholder and empty-transaction only
        for skipped units they cannot stand in for (no GTID, nothing to frame).

        - MariaDB: a Gtid_list event dated at `end`, as MariaDB's own dump thread sends after event
          groups it skipped for a GTID start (sql_repl.cc, send_fake_gtid_list): the IO thread moves
          its position to the event's log_pos, the SQL thread its executed position. `gtids` are the
          skipped tail's last GTID per domain that the replica was never sent: flagged
          FLAG_IGN_GTIDS, the SQL thread records them in gtid_slave_pos as it does for the event
          groups its own IO thread ignored (slave.cc, the Gtid_list it writes for rli->ign_gtids),
          so gtid_slave_pos reaches what a replica filtering for itself records (it commits a
          filtered-out group's GTID too).
        - MySQL: what a dump thread sends when it starts, an artificial Rotate to `file` at `end`
          (process_io_rotate sets the IO position; Rotate_log_event::do_update_pos the executed
          one) and the file's Format_description (log_pos 0: not counted; created 0: the replica's
          temporary tables stay), which a replica's IO thread expects after a Rotate."""
        if flavor == "mariadb":
            listed = MariadbGtidList(dict(gtids), flags=MARIADB_FLAG_IGN_GTIDS >> 28 if gtids else 0)
            return [build_event(EventType.MARIADB_GTID_LIST, listed.encode(), fmt=fmt, server_id=server_id,
                                timestamp=0, log_pos=end, flags=LOG_EVENT_ARTIFICIAL_F)]
        rotate = artificial_rotate(file, end, fmt=fmt, server_id=server_id)
        return [rotate] if fde is None else [rotate, replayed_fde(fde)]


class Heartbeat(SkipPolicy):
    """MySQL's dump thread: nothing for what is skipped, then one heartbeat past the stretch."""

    name = "heartbeat"
    skips_as_heartbeat = True
    walk_skip = SKIP_HEARTBEAT


class Placeholder(SkipPolicy):
    """MaxScale binlogfilter: every dropped event of a transaction becomes a RAND placeholder of
    the same log_pos inside the transaction's own framing, partial or skipped alike."""

    name = "placeholder"
    partial_as_kept = False
    walk_skip = SKIP_PLACEHOLDER

    def partial(self, events: list[Event], kept: list[Event]) -> list[Event]:
        return _with_placeholders(events, {e.pos: e for e in kept})

    def skipped(self, events: list[Event], result: FilterResult) -> list[Event]:
        return _with_placeholders(events, {})

    def tally(self, counts: SentCounts, sent: list[Event], *, skipped: bool) -> int:
        holes = [e for e in sent if is_placeholder(e)]
        counts.placeholders += len(holes)
        added = sum(e.size for e in (sent if skipped else holes))
        counts.placeholder_bytes += added
        return added

    def tally_walk(self, counts: SentCounts, walked: SendResult) -> None:
        counts.placeholders += walked.placeholders
        counts.placeholder_bytes += walked.skip_bytes

    def relayed(self, txn: Transaction) -> list[Event] | None:
        """The framing (the slave drops the placeholders), or the empty transaction when the
        framing is the GTID alone (a skipped DDL)."""
        from dumpfilter.rules.transaction_filter import is_framing

        framing = [e for e in txn.events if is_framing(e)]
        if len(framing) == 1 and framing[0].is_gtid:
            return txn.emptied()
        return framing or None

    def for_replica(self, event: Event, *, gtid_log_pos: int | None, end: int | None, server_id: int) -> Event | None:
        return replica_placeholder(event, server_id=server_id) if is_placeholder(event) else event


class EmptyTransaction(SkipPolicy):
    """GTID style: a skipped GTID transaction is sent as its GTID with an empty body (MySQL 5.7);
    a skipped unit without a GTID joins a skipped stretch (a heartbeat)."""

    name = "empty-transaction"
    walk_skip = SKIP_EMPTY

    def skipped(self, events: list[Event], result: FilterResult) -> list[Event] | None:
        from dumpfilter.rules.transaction_filter import EMPTIED

        return result.events if result.outcome == EMPTIED else None

    def tally(self, counts: SentCounts, sent: list[Event], *, skipped: bool) -> int:
        if not skipped:
            return 0  # a partial transaction is sent as its kept events: nothing of the policy's
        added = sum(e.size for e in sent)
        counts.empty_transactions += 1
        counts.empty_transaction_bytes += added
        return added

    def tally_walk(self, counts: SentCounts, walked: SendResult) -> None:
        counts.empty_transactions += walked.skip_units
        counts.empty_transaction_bytes += walked.skip_bytes

    def relayed(self, txn: Transaction) -> list[Event] | None:
        return txn.emptied() or None  # what was sent: the emptied transaction (none without a GTID)

    def for_replica(self, event: Event, *, gtid_log_pos: int | None, end: int | None, server_id: int) -> Event | None:
        """The COMMIT closing an emptied transaction carries its GTID's log_pos (the filter has no
        position for a statement it made up). A real replica counting positions (MariaDB's IO
        thread adds each event's size unless log_pos jumps ahead) would record a position inside
        the body it never received and, after a reconnect, ask for it (1236: not at an event
        boundary). Dated at the transaction's end (where the next event starts), the replica
        records the end, as after the original COMMIT."""
        if (event.type_code == EventType.QUERY and event.log_pos and event.log_pos == gtid_log_pos
                and end is not None and end > event.log_pos and event.sql == "COMMIT"):
            return event.with_header(log_pos=end)
        return event


POLICIES: dict[str, SkipPolicy] = {p.name: p for p in (Heartbeat(), Placeholder(), EmptyTransaction())}
NAMES = tuple(POLICIES)        # in the order the lab and the CLI list them
DEFAULT = Heartbeat.name       # what a MySQL master does, and an unspecified SkipPolicy


def named(name: str) -> SkipPolicy:
    """The policy called `name`; ValueError naming the known ones otherwise."""
    try:
        return POLICIES[name]
    except (KeyError, TypeError):
        raise ValueError(f"skip policy {name!r} is not one of {', '.join(NAMES)}") from None


def _with_placeholders(events: list[Event], kept: dict[int, Event]) -> list[Event]:
    """MaxScale style: kept events as kept, transaction framing as is, every other event
    replaced by a RAND placeholder with the original log_pos."""
    from dumpfilter.rules.transaction_filter import is_framing

    return fix_transaction_length([kept[event.pos] if event.pos in kept else event if is_framing(event)
                                   else placeholder(event) for event in events])


def replica_placeholder(rand: Event, *, server_id: int) -> Event | None:
    """What a real replica gets for a placeholder (a RAND event whose seeds are the size and type
    of the event it stands for), never more bytes than that event had: a replica's IO thread
    counts each event's size and jumps ahead to a larger log_pos, a hole the master left, but
    never back (slave.cc queue_event). The 39-byte RAND for a 38-byte Table_map left MariaDB one
    byte past the transaction's end: its next heartbeat "not compatible with local info" (1623),
    its reconnect at a position past the file's end (1236).

    - For a Query: a Query of the same size holding only a comment, as MariaDB's dump thread
      replaces an event a replica must not apply (Query_log_event::dummy_event). A standalone
      GTID group (DDL) must end at a Query ("Unexpected break of being relay-logged GTID").
    - For any other event as large as the RAND or larger: the RAND (a hole the next event's
      log_pos crosses). Not a comment Query: inside a row-based statement a Query closes the
      statement's tables, and its Rows events are then lost (seen on MariaDB 10.11).
    - For a smaller one: None, the event is left out (a hole, which a replica that understands
      GTIDs tolerates, as MariaDB's dump thread leaves Annotate_rows out)."""
    size, kind = rand.rand_seeds
    fmt = rand.fmt
    crc = rand.checksum_len
    if kind in (EventType.QUERY, EventType.QUERY_COMPRESSED) and size - crc > _QUERY_FIXED:
        length = size - crc - _QUERY_FIXED
        body = query_body(PLACEHOLDER_SQL[:length].ljust(length), thread_id=0)  # no status vars, no database
        return build_event(EventType.QUERY, body, fmt=fmt, server_id=server_id, timestamp=rand.timestamp,
                           log_pos=rand.log_pos)
    return rand if size >= rand.size else None
