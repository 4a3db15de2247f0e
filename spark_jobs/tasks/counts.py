"""What master-side filtering would send each slave over one chunk of binlog (`ChunkCounts`, made
by spark_jobs.tasks.bandwidth), and those counts joined over every chunk: per slave, per hour of
binlog time, per table and statement group. A heartbeat stretch cut by a chunk boundary is one
Heartbeat again, and a file entered without a Rotate of its own gets the artificial one the
master's stream sends (pure)."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from dumpfilter.charts import saved_percent
from dumpfilter.errors import CutEventError
from dumpfilter.sent import SentCounts
from dumpfilter.spark_jobs.tasks.statement_tables import Statements, Tables


@dataclass
class SlaveCounts(SentCounts):
    """One slave's totals (over one chunk, or merged over many): the master's sent counts, with
    the slave's name and the master events kept for it (`kept_events`, as `kept_bytes` counts)."""

    slave: str = ""
    kept_events: int = 0

    def as_row(self) -> dict[str, Any]:
        row: dict[str, Any] = {f.name: getattr(self, f.name) for f in fields(self)}
        # "all": everything a dump thread without master-side filtering goes through, what was read
        row["events_all"], row["bytes_all"] = self.events_read, self.bytes_read
        row["saving_bytes"] = self.bytes_read - self.bytes_sent
        row["saving_pct"] = saved_percent(self.bytes_read, self.bytes_sent) or 0.0  # as the chart labels it
        return row


@dataclass
class ChunkCounts:
    """One slave's counts over one chunk, with what is needed to join heartbeat stretches."""

    file_index: int
    start: int
    counts: SlaveCounts
    leading_skip: bool = False  # the chunk opens inside a skipped stretch (nothing sent before it)
    trailing_skip: bool = False  # the chunk ends with a stretch whose heartbeat it counted
    heartbeat_size: int = 0
    # The chunk's last unit ends with a real Rotate. A file whose last chunk does not (a Stop, or
    # nothing: a crash) is followed by the artificial Rotate the master's stream sends as it
    # enters the next file (SlaveStream._rotate_into): `merge_counts` counts it.
    rotate_end: bool = False
    # The latest timestamp of the chunk's events (0: none): where the by-hour chart's time ends.
    last_time: int = 0
    # The chunk's file is cut inside an event at its end (codec.reader.truncated): the error, its
    # whole events counted (count_chunk); the experiment reads no file after it.
    cut: CutEventError | None = None
    # Hour of binlog time (its first second, UTC epoch) -> [bytes read, bytes sent] in it.
    by_hour: dict[int, list[int]] = field(default_factory=dict)
    # Minute of binlog time -> [bytes read, bytes sent], when the chunk was walked by minutes
    # (tasks.bandwidth.MINUTE_BUCKETS); None when it was walked by hours.
    by_minute: dict[int, list[int]] | None = field(default_factory=dict)
    # The chunk's bytes by "db.table" (its Table_map and Rows events), the same dict for every
    # slave of the chunk; FRAMING, OTHER and UNATTRIBUTED hold the rest (see `_unit_tables`).
    tables: Tables = field(default_factory=dict)
    # The chunk's statements (and their context events) by what decides and names them:
    # (default database, kind, updated tables) -> [bytes, one statement's text]; the same dict
    # for every slave of the chunk (see `statement_bytes`).
    statements: Statements = field(default_factory=dict)


def merge_hours(parts: list[ChunkCounts], slave_names: list[str],
                minutes: bool = False) -> dict[str, dict[int, list[int]]] | None:
    """Per slave, hour (UTC epoch of its first second) -> [bytes read, bytes sent], over every
    chunk; a stretch joined across chunks is one Heartbeat (as `merge_counts` joins it), taken off
    the hour the earlier chunk counted it in. The hours add up to the slave's totals. `minutes`:
    the same per minute, None unless every chunk was walked by minutes (every chunk has its hours)."""
    out: dict[str, dict[int, list[int]]] = {name: {} for name in slave_names}
    previous: dict[str, ChunkCounts] = {}
    for part in sorted(parts, key=lambda p: (p.file_index, p.start)):
        name = part.counts.slave
        mine = part.by_minute if minutes else part.by_hour
        if mine is None:
            return None
        buckets = out[name]
        for bucket, (read, sent) in mine.items():
            got = buckets.setdefault(bucket, [0, 0])
            got[0] += read
            got[1] += sent
        before = previous.get(name)
        theirs = (before.by_minute if minutes else before.by_hour) if before is not None else None
        if (before is not None and before.file_index == part.file_index and before.trailing_skip
                and part.leading_skip and theirs):
            buckets[max(theirs)][1] -= part.heartbeat_size
        if before is not None and part.file_index > before.file_index and not before.rotate_end and mine:
            buckets[min(mine)][1] += _artificial_rotate_size(part)  # sent as the file is entered
        previous[name] = part
    return {name: dict(sorted(buckets.items())) for name, buckets in out.items()}


def _artificial_rotate_size(part: ChunkCounts) -> int:
    """The artificial Rotate to the file a chunk opens: a heartbeat's header and name (and CRC),
    and the 8-byte position."""
    return part.heartbeat_size + 8


def _each_chunk(parts: list[ChunkCounts]) -> list[ChunkCounts]:
    """Each chunk's counts once (its first), whatever its number of slaves, in their order."""
    firsts: dict[tuple[int, int], ChunkCounts] = {}
    for part in parts:
        firsts.setdefault((part.file_index, part.start), part)
    return list(firsts.values())


def merge_tables(parts: list[ChunkCounts]) -> Tables:
    """Bytes by (db, table) over every chunk (each chunk's once, whatever its number of slaves)."""
    out: Tables = {}
    for part in _each_chunk(parts):
        _add_tables(out, part.tables)
    return out


def merge_statements(parts: list[ChunkCounts]) -> Statements:
    """The statements by (default database, kind, updated tables, text or "") over every chunk
    (each chunk's once): [bytes, one statement's text]."""
    out: Statements = {}
    for part in _each_chunk(parts):
        _add_statements(out, part.statements)
    return out


def joined_tables(before: Tables, part: Tables) -> Tables:
    """`merge_tables` of a running total and the next chunk's, as a new dict: the total's copied
    whole (a C loop), the chunk's added one by one. A live master folds each range into totals that
    grow with the binlog's tables (a DDL-heavy binlog's scratch tables: 922 after 534 MB); a Python
    loop over both made each range cost what the history held."""
    out = dict(before)
    _add_tables(out, part)
    return out


def joined_statements(before: Statements, part: Statements) -> Statements:
    """`merge_statements` of a running total and the next chunk's, as `joined_tables` joins
    tables (the total's entry lists are shared with it, never changed: `_add_statements`)."""
    out = dict(before)
    _add_statements(out, part)
    return out


def _add_tables(out: Tables, part: Tables) -> None:
    """A chunk's bytes by table added to `out`."""
    for table, size in part.items():
        out[table] = out.get(table, 0) + size


def _add_statements(out: Statements, part: Statements) -> None:
    """A chunk's statement groups added to `out`, each with the first text met; an entry added to
    is a new list, so that `out`'s lists may be another total's."""
    for group, (size, sql) in part.items():
        found = out.get(group)
        out[group] = [size, sql] if found is None else [found[0] + size, found[1]]


def merge_counts(parts: list[ChunkCounts], slave_names: list[str]) -> list[SlaveCounts]:
    """Sum chunk counts per slave, in `slave_names` order. A stretch that ends one chunk and opens
    the next chunk of the same file is one heartbeat, not two."""
    totals = {name: SlaveCounts(slave=name) for name in slave_names}
    by_slave: dict[str, list[ChunkCounts]] = {name: [] for name in slave_names}
    for part in parts:
        by_slave[part.counts.slave].append(part)
    for name, chunks in by_slave.items():
        chunks.sort(key=lambda p: (p.file_index, p.start))
        previous = None
        for part in chunks:
            totals[name].add(part.counts)
            if previous is not None and part.file_index > previous.file_index and not previous.rotate_end:
                size = _artificial_rotate_size(part)  # one event sent, a master event kept
                totals[name].add(SlaveCounts(events_sent=1, bytes_sent=size, kept_events=1, kept_bytes=size))
            if (previous is not None and previous.file_index == part.file_index and previous.trailing_skip
                    and part.leading_skip):
                totals[name].add_heartbeats(part.heartbeat_size, -1)  # one Heartbeat, counted by both chunks
            previous = part
    return [totals[name] for name in slave_names]
