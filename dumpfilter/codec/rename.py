"""replicate-rewrite-db written into events: one rewriter for every consumer (the MySQL-protocol
endpoint's replicas, `filter`'s output, `slave run`'s relay log). It renames what a replica's
applier renames and nothing else (log_event.cc / log_event_server.cc): a Query event's default
database (`set_thd_db`: never the names inside the statement text), the database of a
Table_map, and an Execute_load_query's (LOAD DATA is a Query event there). The names the rule
engine gives are written as they are; the CRC is recomputed. Positions are the caller's affair:
an event keeps its log_pos, and `PositionKeeper` brings a real replica's counted position back
to the master's when a longer name carried it past.

Pure codec: the renaming functions come from the rules (dumpfilter.rules.renamer)."""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable, Iterator

from dumpfilter.codec.constants import (
    HEADER_LEN, LOG_EVENT_ARTIFICIAL_F, LOG_EVENT_BINLOG_IN_USE_F, EventType,
)
from dumpfilter.codec.event import Event

# db -> (the name the applier uses, whether a rule renamed it)
RewriteDb = Callable[[str], tuple[str, bool]]
# (db, table) -> (db, table, renamed): WL#2516 REWRITE over db.table patterns
RenameTable = Callable[[str, str], tuple[str, str, bool]]


def _encode(name: str) -> bytes:
    return name.encode("utf-8", "surrogateescape")


def query_db_span(event: Event) -> tuple[int, int]:
    """(offset, length) of a Query (or Execute_load_query) event's default database inside its
    body: after the post-header and the status variables."""
    body = event.body
    fmt = event.fmt
    if fmt is None:
        raise ValueError("a Query event read without its Format_description")
    post = fmt.post_header_len(event.type_code)
    status_len = int.from_bytes(body[11:13], "little")
    return post + status_len, body[8]


def rewrite_event(event: Event, rewrite: RewriteDb, rename: RenameTable | None = None) -> Event:
    """replicate-rewrite-db on one event: the default database of a Query event and the db of a
    Table_map event (WL#2516 `rename` may change a Table_map's table too; `rewrite` is then not
    used). Any other event, and an event no rule renames, comes back as it was (the same object)."""
    if event.is_query:
        db = event.db
        if not db:
            return event
        new, changed = (rename(db, "")[0::2] if rename is not None else rewrite(db))
        if not changed or new == db:
            return event
        start, length = query_db_span(event)
        raw_new = _encode(new)
        if len(raw_new) > 255:
            return event  # not a database name a server could have written
        body = event.body
        head = body[:8] + bytes((len(raw_new),)) + body[9:start]
        return event.with_body(head + raw_new + body[start + length:])
    if event.type_code == EventType.TABLE_MAP:
        _tid, db, table = event.table_map
        if rename is not None:
            new, new_table, changed = rename(db, table)
        else:
            (new, changed), new_table = rewrite(db), table
        if not changed or (new, new_table) == (db, table):
            return event
        body = event.body
        if event.fmt is None:
            raise ValueError("a Table_map event read without its Format_description")
        off = event.fmt.post_header_len(EventType.TABLE_MAP)
        old_len = body[off]
        raw_new = _encode(new)
        rest = body[off + 1 + old_len:]  # NUL, table length, table, NUL, the column data
        if new_table != table:
            raw_table = _encode(new_table)
            rest = rest[:1] + bytes((len(raw_table),)) + raw_table + rest[2 + rest[1]:]
        return event.with_body(body[:off] + bytes((len(raw_new),)) + raw_new + rest)
    return event


def position_reset(file: str, pos: int, fde: Event, server_id: int) -> list[Event]:
    """What a dump thread sends when it starts: an artificial Rotate naming `file` at `pos` (a
    replica's IO thread sets its position there, process_io_rotate, and its SQL thread its executed
    position between groups, Rotate_log_event::do_update_pos), then the file's Format_description
    (log_pos 0: not counted; created 0: the replica's temporary tables stay), which the IO thread
    needs after a Rotate. Checksummed as `fde` says the file is."""
    head = struct.pack("<IBIIIH", 0, EventType.ROTATE, server_id, 0, 0, LOG_EVENT_ARTIFICIAL_F)
    rotate = fde.replaced(head + struct.pack("<Q", pos) + _encode(file))
    created_at = HEADER_LEN + 2 + 50  # binlog_version, server_version, then `created`
    raw = fde.raw
    body = raw[HEADER_LEN:created_at] + b"\0\0\0\0" + raw[created_at + 4:len(raw) - fde.checksum_len]
    return [rotate, fde.with_body(body).with_header(log_pos=0, flags=fde.flags & ~LOG_EVENT_BINLOG_IN_USE_F)]


class PositionKeeper:
    """Renames the events sent to one real replica and keeps the position its IO thread counts
    the master's.

    A replica's IO thread adds each event's size to its position and jumps ahead to an event's
    log_pos when that is further (a hole the master left), never back (slave.cc queue_event).
    Every event keeps the master's log_pos, so a shorter name is a hole the replica crosses at the
    next event. A longer one carries the count past the master's position by the bytes the name
    grew: a heartbeat then behind it stops the IO thread (1623, "heartbeat is not compatible with
    local info"), a reconnect by file and position asks for a position that is no event's start.
    So after a batch that left the count past the master's, and before a heartbeat, the replica
    is sent what a dump thread sends at its start, an artificial Rotate to the master's position
    and the file's Format_description (`position_reset`): its Read_Master_Log_Pos is the master's
    again. Exec_Master_Log_Pos never drifts (the SQL thread takes each event's log_pos)."""

    def __init__(self, rename: Callable[[Event], Event], *, file: str, pos: int, server_id: int):
        """`file`, `pos`: where the dump starts (its first, artificial Rotate)."""
        self.rename = rename
        self.file = file
        self.server_id = server_id
        self.fde: Event | None = None
        self.master_pos = pos  # the master's position after the last event sent
        self.counted = pos     # where the replica's IO thread counts itself

    def events(self, events: Iterable[Event]) -> Iterator[Event]:
        """One batch's events for the replica (renamed), with a position reset where needed."""
        for event in events:
            kind = event.type_code
            if kind in (EventType.HEARTBEAT, EventType.HEARTBEAT_V2):
                yield from self._reset()
                yield event
                continue
            if kind == EventType.ROTATE:
                pos, self.file = event.rotate
                self.master_pos = self.counted = pos
                yield event
                continue
            if kind == EventType.FORMAT_DESCRIPTION:
                self.fde = event
            sent = self.rename(event)
            log_pos = event.log_pos
            if log_pos:
                if kind == EventType.MARIADB_GTID_LIST:
                    self.counted = max(self.counted, log_pos)
                else:
                    self.counted = max(self.counted + sent.size, log_pos)
                self.master_pos = log_pos
            yield sent
        yield from self._reset()

    def _reset(self) -> list[Event]:
        if self.counted <= self.master_pos or self.fde is None or not self.master_pos:
            return []
        self.counted = self.master_pos
        return position_reset(self.file, self.master_pos, self.fde, self.server_id)
