"""replicate-rewrite-db written into events: the names a replica's applier renames, and nothing
else (log_event.cc / log_event_server.cc): a Query event's default database (`set_thd_db`: never
the names inside the statement text), the database of a Table_map (WL#2516's REWRITE its table
too), and an Execute_load_query's (LOAD DATA is a Query event there). The rules give the names;
the core writes them (`_core.rename_event`, core/src/rename_db.rs: the writer the compiled walks
rename whole units with), the CRC made again. Positions are the caller's affair: an event keeps
its log_pos, and `PositionKeeper` brings a real replica's counted position back to the master's
when a longer name carried it past.

Pure codec: the renaming functions come from the rules (dumpfilter.rules.renamer)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

from dumpfilter import _core
from dumpfilter.codec.constants import LOG_EVENT_BINLOG_IN_USE_F, EventType
from dumpfilter.codec.encode import artificial_rotate
from dumpfilter.codec.event import Event
from dumpfilter.codec.writer import fde_for_new_file

# (db, table) -> (the names the applier uses, whether a rule renamed them): replicate-rewrite-db
# renames the database alone, WL#2516 REWRITE over db.table patterns the table too
Rename = Callable[[str, str], tuple[str, str, bool]]


def _encode(name: str) -> bytes:
    return name.encode("utf-8", "surrogateescape")


def rewrite_event(event: Event, rename: Rename) -> Event:
    """The names a rule renames in one event: the default database of a Query event (its table
    asked as ''), the database and table of a Table_map event. Any other event, an event no rule
    renames, and a name longer than a server writes (255 bytes) come back as they were (the same
    object)."""
    if event.is_query:
        db, table = event.db, ""
    elif event.type_code == EventType.TABLE_MAP:
        _tid, db, table = event.table_map
    else:
        return event
    if not db:
        return event
    new, new_table, changed = rename(db, table)
    new_table = new_table if table else table  # (a Query names no table of its own)
    if not changed or (new, new_table) == (db, table):
        return event
    fmt = event.fmt
    if fmt is None:
        raise ValueError(f"a {event.type_name} event read without its Format_description")
    raw = _core.rename_event(event.raw, _encode(new), _encode(new_table) if new_table != table else None,
                             fmt.post_header_len(event.type_code), event.checksum_len)
    return event if raw is None else Event(raw, event.pos, fmt)


def position_reset(file: str, pos: int, fde: Event, server_id: int) -> list[Event]:
    """What a dump thread sends when it starts: an artificial Rotate naming `file` at `pos` (a
    replica's IO thread sets its position there, process_io_rotate, and its SQL thread its executed
    position between groups, Rotate_log_event::do_update_pos), then the file's Format_description
    (`replayed_fde`), which the IO thread needs after a Rotate. The Rotate is checksummed as the
    file's events are (binlog_checksum), not as its Format_description, which a checksum-aware
    server ends with a CRC even under NONE."""
    return [artificial_rotate(file, pos, fmt=fde.fmt, server_id=server_id), replayed_fde(fde)]


def replayed_fde(fde: Event) -> Event:
    """A file's Format_description as a dump thread sends it after its artificial Rotate: log_pos 0
    (not counted), created 0 (the replica's temporary tables stay), not in use."""
    return fde_for_new_file(fde, first=False).with_header(log_pos=0, flags=fde.flags & ~LOG_EVENT_BINLOG_IN_USE_F)


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
