"""replicate-rewrite-db on the slave (WL#2387 keeps the rewrite there): an event's database names
rewritten as the slave's rules say, and the renamer the receive path and the lab apply."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from dumpfilter.codec import Event, EventType
from dumpfilter.rules.ruleset import RuleSet, Settings
from dumpfilter.slave.relay_log import query_db_offsets

if TYPE_CHECKING:
    from dumpfilter.rules.evaluate import RuleEngine


def rewrite_event(event: Event, rewrite: Callable[[str], tuple[str, bool]],
                  rename: Callable[[str, str], tuple[str, str, bool]] | None = None) -> Event:
    """replicate-rewrite-db on one event: the default database of a Query event (only that: the
    server never rewrites names inside the SQL text) and the db of a Table_map event. The CRC is
    recomputed by `with_body`. With `rename` (WL#2516 REWRITE over db.table patterns, effective
    semantics) a Table_map's table name can change too, and `rewrite` is not used."""
    if event.is_query:
        if rename is not None:
            new, _, changed = rename(event.db, "") if event.db else ("", "", False)
        else:
            new, changed = rewrite(event.db)
        if not changed or not event.db:
            return event
        start, length = query_db_offsets(event)
        body = bytearray(event.body)
        raw_new = new.encode("utf-8", "surrogateescape")
        body[8] = len(raw_new)
        return event.with_body(bytes(body[:start]) + raw_new + bytes(body[start + length:]))
    if event.type_code == EventType.TABLE_MAP:
        _tid, db, table = event.table_map
        if rename is not None:
            new, new_table, changed = rename(db, table)
        else:
            (new, changed), new_table = rewrite(db), table
        if not changed:
            return event
        body = event.body
        off = event.fmt.post_header_len(EventType.TABLE_MAP)
        old_len = body[off]
        raw_new = new.encode("utf-8", "surrogateescape")
        rest = body[off + 1 + old_len:]  # NUL, table length, table, NUL, the column data
        if new_table != table:
            raw_table = new_table.encode("utf-8", "surrogateescape")
            rest = rest[:1] + bytes((len(raw_table),)) + raw_table + rest[2 + rest[1]:]
        return event.with_body(body[:off] + bytes((len(raw_new),)) + raw_new + rest)
    return event


def event_renamer(engine: RuleEngine, rules: RuleSet, settings: Settings) -> Callable[[Event], Event] | None:
    """What a slave renames in the events it writes (WL#2387 keeps rewriting on the slave):
    replicate-rewrite-db, or under effective semantics WL#2516 REWRITE patterns (which include
    the rewrite-db rules); None when it renames nothing."""
    effective = bool(rules.effective_rewrite) and settings.semantics == "effective"
    if not (rules.rewrite_db or effective):
        return None
    rename = engine.effective_rename if effective else None
    return lambda event: rewrite_event(event, engine.rewrite_db, rename)
