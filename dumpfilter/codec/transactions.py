"""Groups events into the units filters act on: a transaction (GTID/BEGIN ... XID/COMMIT), a lone
statement with its GTID and context events (DDL), or a single control event."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from dumpfilter.codec.constants import (
    GTID_EVENT_TYPES,
    MARIADB_FL_STANDALONE,
    STMT_END_F,
    EventType,
)
from dumpfilter.codec.encode import build_event, query_body
from dumpfilter.codec.event import Event
from dumpfilter.codec.writer import fix_transaction_length

CONTROL, TRANSACTION, STATEMENT = "control", "transaction", "statement"

# MariaDB GTID flags2 bit FL_DDL (log_event.h).
MARIADB_FL_DDL = 0x20

# Events that never belong to a transaction's content and are never filtered.
CONTROL_TYPES = frozenset(
    {
        EventType.FORMAT_DESCRIPTION, EventType.ROTATE, EventType.STOP, EventType.PREVIOUS_GTIDS,
        EventType.MARIADB_GTID_LIST, EventType.BINLOG_CHECKPOINT, EventType.HEARTBEAT,
        EventType.HEARTBEAT_V2, EventType.INCIDENT, EventType.START_ENCRYPTION,
        # No server writes one; a binlog server's filler (MaxScale's, --source-pos) is one.
        EventType.IGNORABLE,
    }
)


# The common case of statement_verb: ASCII blanks, then an ASCII keyword that ends before an ASCII
# character. Anything else (a comment first, Unicode blanks or letters) takes the general walk.
_ASCII_VERB = re.compile(r"[ \t\n\r\f\v]*([A-Za-z_]+)")


def statement_verb(sql: str) -> str:
    """The statement's first keyword, upper-cased, skipping leading comments and blanks."""
    m = _ASCII_VERB.match(sql)
    if m is not None:
        end = m.end()
        if end == len(sql) or sql[end] < "\x80":
            return m.group(1).upper()
    return general_verb(sql)


def general_verb(sql: str) -> str:
    """statement_verb for any text: str.lstrip's blanks, /* */ comments, then str.isalpha letters
    and '_'."""
    s = sql.lstrip()
    while s.startswith("/*"):
        end = s.find("*/")
        if end < 0:
            return ""
        s = s[end + 2 :].lstrip()
    end = 0
    while end < len(s) and (s[end].isalpha() or s[end] == "_"):
        end += 1
    return s[:end].upper()


def _is_begin(sql: str) -> bool:
    verb = statement_verb(sql)
    return verb == "BEGIN" or verb == "XA" and sql.upper().split()[1:2] == ["START"]


def _is_end(sql: str) -> bool:
    verb = statement_verb(sql)
    if verb in ("COMMIT", "ROLLBACK"):
        # "ROLLBACK TO SAVEPOINT" stays inside the transaction.
        return "TO" not in sql.upper().split()[1:2]
    return verb == "XA" and sql.upper().split()[1:2] == ["PREPARE"]


@dataclass
class Transaction:
    """A unit of events. `kind` is CONTROL (one event never filtered), TRANSACTION or STATEMENT.
    `complete` is False when the input ended before the unit's terminator."""

    kind: str
    events: list[Event] = field(default_factory=list)
    complete: bool = True

    @property
    def gtid_event(self) -> Event | None:
        first = self.events[0] if self.events else None
        return first if first is not None and first.type_code in GTID_EVENT_TYPES else None

    @property
    def gtid(self) -> str | None:
        event = self.gtid_event
        return event.gtid if event is not None else None

    @property
    def start_pos(self) -> int:
        return self.events[0].pos

    @property
    def size(self) -> int:
        """Total bytes of the unit's events (cached while the event list is unchanged in length)."""
        cached = self.__dict__.get("_size")
        if cached is not None and cached[0] == len(self.events):
            size: int = cached[1]
            return size
        total = sum(e.size for e in self.events)
        self.__dict__["_size"] = (len(self.events), total)
        return total

    def emptied(self) -> list[Event]:
        """What a MySQL replica persists for a filtered GTID transaction: its GTID with an empty
        body (BEGIN, COMMIT), transaction_length fixed. MariaDB groups have no BEGIN: the GTID,
        without FL_STANDALONE, closed by COMMIT. A unit without a GTID leaves nothing."""
        gtid = self.gtid_event
        if gtid is None:
            return []
        def stmt(sql: str) -> Event:
            # The synthesised statements take the GTID's log_pos: they have no master position of
            # their own, and the GTID's is in master coordinates wherever the unit was read (the
            # master's binlog, or a relay log whose offsets are not the master's).
            return build_event(EventType.QUERY, query_body(sql, ""), fmt=gtid.fmt, server_id=gtid.server_id,
                               timestamp=gtid.timestamp, log_pos=gtid.log_pos)
        if gtid.type_code == EventType.MARIADB_GTID:
            flags2 = gtid.mariadb_gtid_flags
            # A filtered DDL (FL_STANDALONE|FL_DDL) becomes an ordinary empty group closed by
            # COMMIT: a standalone GTID would make the applier take the COMMIT for a second group,
            # and FL_DDL would make parallel replication serialise around a statement that is gone.
            cleared = flags2 & ~(MARIADB_FL_STANDALONE | MARIADB_FL_DDL)
            if cleared != flags2:
                body = bytearray(gtid.body)
                body[12] = cleared
                return [gtid.with_body(bytes(body)), stmt("COMMIT")]  # the same header as `gtid`'s
            return [gtid, stmt("COMMIT")]
        events = self.events
        begin = events[1] if len(events) > 2 and events[1].is_query and statement_verb(events[1].sql or "") == "BEGIN" \
            else stmt("BEGIN")
        last = events[-1]
        terminator = last if last.type_code == EventType.XID else stmt("COMMIT")
        return fix_transaction_length([gtid, begin, terminator])


class TransactionGrouper:
    """Incremental grouping: `push(event)` returns the units it completes (0, 1 or 2)."""

    def __init__(self) -> None:
        self.current: Transaction | None = None
        self._standalone = False  # the group ends with the next Query (DDL after a GTID)
        self._in_body = False     # a BEGIN (or equivalent) was seen

    def push(self, event: Event) -> list[Transaction]:
        out: list[Transaction] = []
        t = event.type_code
        cur = self.current
        if t in GTID_EVENT_TYPES:
            if cur is not None:  # the previous group never ended (crash, truncation)
                cur.complete = False
                out.append(cur)
            self.current = Transaction(TRANSACTION, [event])
            self._standalone = event.is_standalone
            # A MariaDB GTID replaces BEGIN: unless standalone, the statements that follow are
            # inside the group until XID or COMMIT.
            self._in_body = t == EventType.MARIADB_GTID and not self._standalone
            return out
        if t in CONTROL_TYPES:
            if cur is not None:
                # Relay logs may carry a Rotate/FDE inside a transaction: keep order, keep it in.
                cur.events.append(event)
                return out
            return [Transaction(CONTROL, [event])]
        if cur is None:
            self.current = cur = Transaction(STATEMENT)
            self._standalone = False
            self._in_body = False
        cur.events.append(event)
        if t in (EventType.XID, EventType.XA_PREPARE, EventType.TRANSACTION_PAYLOAD):
            return self._finish(out)
        if event.is_query:
            sql = event.sql or ""
            if not self._in_body and _is_begin(sql):
                self._in_body = True
                cur.kind = TRANSACTION
                return out
            if self._in_body and _is_end(sql):
                return self._finish(out)
            if not self._in_body:
                # A statement outside BEGIN ... COMMIT: MySQL DDL after its GTID, MariaDB
                # FL_STANDALONE, or a pre-GTID autocommit statement. It ends the unit.
                if cur.kind != TRANSACTION:
                    cur.kind = STATEMENT
                return self._finish(out)
            return out
        if (event.is_rows and not self._in_body and not self._standalone and event.rows_flags & STMT_END_F
                and cur.gtid_event is None):  # rows outside any BEGIN (old non-transactional RBR)
            return self._finish(out)
        return out

    def _finish(self, out: list[Transaction]) -> list[Transaction]:
        assert self.current is not None  # only called with a unit open
        out.append(self.current)
        self.current = None
        self._in_body = False
        self._standalone = False
        return out

    def end_statement_group(self) -> Transaction | None:
        """End the open unit when it is a GTID still waiting for its one statement (a DDL's
        GTID: MariaDB FL_STANDALONE, or a MySQL GTID with no BEGIN yet) and return it; None
        otherwise. For a receiver whose stream replaced that statement by a stand-in (a skip
        policy's placeholder): the group is over, with nothing else to come."""
        cur = self.current
        if cur is None or self._in_body or len(cur.events) != 1 or not cur.events[0].is_gtid:
            return None
        self.current = None
        self._standalone = False
        return cur

    def flush(self) -> list[Transaction]:
        """End of input: the open unit, if any, comes out marked incomplete."""
        if self.current is None:
            return []
        self.current.complete = False
        return self._finish([])


def group_transactions(events: Iterable[Event]) -> Iterator[Transaction]:
    grouper = TransactionGrouper()
    for event in events:
        yield from grouper.push(event)
    yield from grouper.flush()

