"""Writes a valid binlog from kept events: magic, FDE, renumbered log_pos, fresh CRCs, GTID
transaction_length fixed, Rotate/Stop at the end. Copying every event unchanged reproduces the
input byte for byte."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from dumpfilter.codec import gtid as gtids
from dumpfilter.codec.constants import HEADER_LEN, MAGIC, EventType
from dumpfilter.codec.encode import build_event, rotate_body
from dumpfilter.codec.event import Event
from dumpfilter.codec.format_description import FormatDescription

_CREATED_OFFSET = HEADER_LEN + 2 + 50


def fde_for_new_file(fde: Event, *, first: bool) -> Event:
    """The source FDE, re-used to open an output file: `created` is zeroed for every file but the
    first of a run, as the server does after a rotation."""
    if first:
        return fde
    raw = fde.raw[: len(fde.raw) - fde.checksum_len]
    body = raw[HEADER_LEN:_CREATED_OFFSET] + b"\0\0\0\0" + raw[_CREATED_OFFSET + 4 :]
    return fde.with_body(body)


def fix_transaction_length(events: Sequence[Event]) -> list[Event]:
    """MySQL 8.0+ GTID events carry the byte length of their whole transaction (GTID included).
    When a filter drops events it must be rewritten; its own size can change with the new value's
    width, so recompute until stable."""
    events = list(events)
    if not events or events[0].type_code not in (EventType.GTID, EventType.ANONYMOUS_GTID, EventType.GTID_TAGGED):
        return events
    gtid_event = events[0]
    if not gtid_event.gtid_info.transaction_length:
        return events
    rest = sum(e.size for e in events[1:])
    for _ in range(4):
        wanted = rest + gtid_event.size
        if gtid_event.gtid_info.transaction_length == wanted:
            break
        body = gtids.with_transaction_length(gtid_event.type_code, gtid_event.body, wanted)
        gtid_event = gtid_event.with_body(body)
    events[0] = gtid_event
    return events


class Output(Protocol):
    """What a BinlogWriter writes into: a binary file, or one written behind (binlogs.background)."""

    def write(self, data: bytes | bytearray | memoryview, /) -> int: ...


class BinlogWriter:
    """Writes one binlog file to a binary stream.

    `renumber_positions`: each event's log_pos becomes its new end offset, except where the
    source wrote 0 (MariaDB 11.4+ inside groups, artificial events), which stays 0. Turn it off
    to copy relay logs, whose log_pos are the source server's coordinates.
    """

    def __init__(self, out: Output, fde: Event, *, renumber_positions: bool = True):
        self.out = out
        self.renumber_positions = renumber_positions
        self.fmt: FormatDescription = FormatDescription.parse(fde.raw)
        self.server_id = fde.server_id
        self.last_timestamp = fde.timestamp
        self.position = 0
        out.write(MAGIC)
        self.position = len(MAGIC)
        self.write(fde)

    def write(self, event: Event) -> Event:
        """Write one event at the current position; returns the event as written."""
        if self.renumber_positions and event.log_pos != 0:
            event = event.with_header(log_pos=self.position + event.size)
        self.out.write(event.raw)
        event = Event(event.raw, self.position, self.fmt) if event.pos != self.position else event
        self.position += event.size
        if event.timestamp:
            self.last_timestamp = event.timestamp
        return event

    def write_transaction(self, events: Sequence[Event]) -> None:
        for event in fix_transaction_length(events):
            self.write(event)

    def _control(self, type_code: int, body: bytes) -> Event:
        return build_event(type_code, body, fmt=self.fmt, server_id=self.server_id,
                           timestamp=self.last_timestamp, log_pos=1)

    def rotate(self, next_name: str) -> None:
        """End the file with a Rotate naming the next file (position 4)."""
        self.write(self._control(EventType.ROTATE, rotate_body(next_name)))

    def stop(self) -> None:
        self.write(self._control(EventType.STOP, b""))

    def write_gtid_state(self, state: gtids.MysqlGtidSet | gtids.MariadbGtidList) -> None:
        """A file's GTID state after its FDE: MySQL's Previous_GTIDs or MariaDB's Gtid_list."""
        if isinstance(state, gtids.MysqlGtidSet):
            self.write(self._control(EventType.PREVIOUS_GTIDS, state.encode()).with_header(flags=0x80))
        else:
            self.write(self._control(EventType.MARIADB_GTID_LIST, state.encode()))


class GtidTracker:
    """What a stream of transactions has executed, for the Previous_GTIDs / Gtid_list of the next
    output file. Start it from the source's set, then add every GTID written."""

    def __init__(self) -> None:
        self.mysql = gtids.MysqlGtidSet()
        self.mariadb = gtids.MariadbGtidList()

    def start_from(self, event: Event) -> None:
        """From the source file's set; a malformed one is the event's MalformedEventError (file
        and offset), as any decode of it is. Decoded afresh: `add` changes the tracker's copy."""
        if event.type_code in (EventType.PREVIOUS_GTIDS, EventType.MARIADB_GTID_LIST):
            event.gtid_set  # noqa: B018 -- raises for a malformed set, naming the event
        if event.type_code == EventType.PREVIOUS_GTIDS:
            self.mysql = gtids.MysqlGtidSet.decode(event.body)
        elif event.type_code == EventType.MARIADB_GTID_LIST:
            self.mariadb = gtids.MariadbGtidList.decode(event.body)
            self.mariadb.flags = 0

    def add(self, event: Event) -> None:
        info = event.gtid_info
        if info.flavor == "mariadb":
            self.mariadb.add(info.domain, info.server_id, info.gno)
        elif not info.anonymous:
            self.mysql.add(info.source, info.gno, info.tag)


