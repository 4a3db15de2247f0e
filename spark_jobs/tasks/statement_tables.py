"""Where the bytes of a unit go in `experiment`'s bytes by table (issue #60): each statement under
the tables it updates, each transaction's envelope (its GTID, BEGIN, annotations, XID or COMMIT:
sent only because of the writes inside it) split evenly between the tables it writes, and the
envelope of a transaction that writes no table and the control events in rows of their own (used
by spark_jobs.tasks.bandwidth, per chunk)."""

from __future__ import annotations

import struct

from dumpfilter import _core
from dumpfilter.codec import EventType, Transaction
from dumpfilter.codec.constants import HEADER_LEN

FRAMING = ("", "(transaction framing)")  # GTID, BEGIN, annotations, XID/COMMIT of a transaction that writes no table
OTHER = ("", "(control events)")  # FDE, Gtid_list, Rotate, Binlog_checkpoint, Stop...: the control units
UNATTRIBUTED = ("", "(statements not attributed)")  # statements that update no table its parser names
STATEMENT_GROUPS_MAX = 4096  # statements updating no table, grouped by their text up to this many per chunk


ENVELOPE = "(envelope)"
# A table's share of its transactions' envelopes is counted under (ENVELOPE, (db, table), group):
# group None where a Table_map/Rows event wrote the table (sent where the slave keeps the table), else
# the key of the first statement group that wrote it in the transaction (sent where the slave applies
# that group's statements: spark_jobs.bandwidth_experiment.table_rows).


def envelope_key(table: tuple[str, str], group: tuple | None) -> tuple:
    return (ENVELOPE, table, group)


def share_envelope(tables: dict, envelope: int, written: dict) -> None:
    """One transaction's `envelope` bytes split evenly between the tables it writes (`written`:
    table -> group, in the order first written; the bytes a division leaves go to the first, as
    a statement's are split), or into FRAMING when it writes none."""
    if not written:
        if envelope:
            tables[FRAMING] = tables.get(FRAMING, 0) + envelope
        return
    each, left = divmod(envelope, len(written))
    for k, (table, group) in enumerate(written.items()):
        key = (ENVELOPE, table, group)
        tables[key] = tables.get(key, 0) + each + (left if k == 0 else 0)


_FRAMING_EVENTS = frozenset({EventType.MARIADB_GTID, EventType.GTID, EventType.ANONYMOUS_GTID, EventType.XID,
                             EventType.ANNOTATE_ROWS, EventType.ROWS_QUERY})
_FRAMING_VERBS = frozenset({"BEGIN", "COMMIT", "ROLLBACK", "XA", "START", "SAVEPOINT", "RELEASE"})


_CONTEXT_EVENTS = frozenset({EventType.INTVAR, EventType.RAND, EventType.USER_VAR})
_KEY_KINDS = {1: "INSERT", 2: "REPLACE", 3: "UPDATE", 4: "DELETE", 5: "INSERT", 6: "REPLACE"}
_EVENT_HEAD = struct.Struct("<IBIII")  # timestamp, type, server id, size, log_pos
_QUERY_HEAD = struct.Struct("<IIBHH")  # thread id, exec time, db length, error code, status length


def _unit_tables_fast(buf, start: int, end: int, fmt, tables: dict, statements: dict) -> bool:
    """`_unit_tables` over the unit buf[start:end] read from its event headers, without Events:
    the GTID, XID, annotations and context events by their header, a Query's default database
    and text by its post-header, its tables by the core's key (`_core.statement_key`: a
    single-table DML statement). False, with nothing counted, where the unit holds anything else
    (a Table_map, Rows, a statement the key does not read): `_unit_tables` then reads it."""
    if fmt is None:
        return False
    post, crc = fmt.post_header_len(EventType.QUERY), fmt.checksum_len
    head, query = _EVENT_HEAD.unpack_from, _QUERY_HEAD.unpack_from
    framing = context = 0
    found: list[tuple[tuple, int, bytes]] = []
    at = start
    while at + HEADER_LEN <= end:
        _, code, _, size, _ = head(buf, at)
        if size < HEADER_LEN or at + size > end:
            return False
        if code in _FRAMING_EVENTS:
            framing += size
        elif code in _CONTEXT_EVENTS:
            context += size
        elif code == EventType.QUERY:
            _, _, db_len, _, status_len = query(buf, at + HEADER_LEN)
            db_at = at + HEADER_LEN + post + status_len
            sql = bytes(buf[db_at + db_len + 1:at + size - crc])
            shape = _core.statement_key(sql)
            if shape is None:
                if sql.upper() in (b"BEGIN", b"COMMIT", b"ROLLBACK"):
                    framing += size + context
                    context = 0
                    at += size
                    continue
                return False
            kind, qualifier, table = shape
            db = bytes(buf[db_at:db_at + db_len])
            name = (_utf8(qualifier if qualifier is not None else db), _utf8(table))
            found.append(((_utf8(db), _KEY_KINDS.get(kind, str(kind)), (name,), ""), size + context, sql))
            context = 0
        else:
            return False
        at += size
    written: dict = {}
    for group, _, _ in found:
        written.setdefault(group[2][0], group)
    share_envelope(tables, framing + context, written)
    for group, size, sql in found:
        got = statements.get(group)
        if got is None:
            statements[group] = [size, _utf8(sql)]
        else:
            got[0] += size
    return True


_ROWS = frozenset([*range(20, 26), *range(30, 33), 39, *range(166, 172)])  # core/src/types.rs is_rows
_TABLE_MAP = int(EventType.TABLE_MAP)


def fast_envelopes(units: _core.UnitList, n: int, buf, names: list, by_name: list[int], framing: int,
                   tables: dict) -> None:
    """The envelopes of the fast units among the first `n` of `units` (row-logged transactions:
    `UnitList.table_bytes` gave each name id's Table_map and Rows bytes, `by_name`, and `framing`,
    the rest of every fast unit) shared between the tables each one writes (`share_envelope`); the
    envelope of a fast unit that writes no table into FRAMING. A unit that writes one table gives it
    all of its bytes but that table's events: summed per table, its size less the table's bytes
    (less those of the units of several tables, which are read event by event here)."""
    single = [0] * len(names)  # bytes of the units that write only name id i
    several = [0] * len(names)  # name id i's Table_map and Rows bytes in units of several tables
    attributed = 0
    head = _EVENT_HEAD.unpack_from
    for k in units.with_flags(_core.F_FAST, 0):
        if k >= n:
            continue
        ids = units.tables(k)
        if not ids:
            continue
        first = ids[0]
        u = units.unit(k)
        if all(i == first for i in ids):
            single[first] += u.end - u.start
            continue
        maps: dict[int, int] = {}
        payload = dict.fromkeys(ids, 0)
        m, at = 0, u.start
        while at + HEADER_LEN <= u.end:
            _, code, _, size, _ = head(buf, at)
            if size < HEADER_LEN or at + size > u.end:
                break
            if code == _TABLE_MAP or code in _ROWS:
                tid = int.from_bytes(bytes(buf[at + HEADER_LEN:at + HEADER_LEN + 6]), "little")
                if code == _TABLE_MAP:
                    name = ids[m] if m < len(ids) else None
                    m += 1
                    if name is not None:
                        maps[tid] = name
                else:
                    name = maps.get(tid)
                if name is not None:
                    payload[name] += size
            at += size
        envelope = u.end - u.start - sum(payload.values())
        for i, size in payload.items():
            several[i] += size
        share_envelope(tables, envelope, {names[i]: None for i in payload})
        attributed += envelope
    for i, size in enumerate(single):
        if size:
            envelope = size - (by_name[i] - several[i])
            share_envelope(tables, envelope, {names[i]: None})
            attributed += envelope
    tables[FRAMING] = tables.get(FRAMING, 0) + framing - attributed


def _unit_tables(txn: Transaction, tables: dict, statements: dict) -> None:
    """Where a unit that is not fast puts its bytes (a statement-logged transaction, DDL, a MIXED
    transaction of statements and rows): each Table_map and Rows event under its table, as
    `tally::table_bytes` counts a fast unit's; each statement with the context events before it
    (INTVAR, RAND, USER_VAR) into `statements` by (default database, kind, the tables it updates:
    `rules.statements.statement_tables`, the parser the rules decide with); the GTID, BEGIN,
    annotations, XID or COMMIT (and any other event of the unit) are its envelope, split between
    the tables it writes (`share_envelope`). A statement that updates no table its parser names
    (SET, a database statement, what it cannot parse) is grouped by its text (up to
    STATEMENT_GROUPS_MAX per chunk, then by its kind): `table_rows` puts it in UNATTRIBUTED."""
    from dumpfilter.codec.transactions import statement_verb
    from dumpfilter.rules.statements import statement_tables

    maps: dict[int, tuple[str, str]] = {}
    context = envelope = 0
    written: dict = {}
    for e in txn.events:
        code = e.type_code
        if code in _FRAMING_EVENTS:
            envelope += e.size
        elif code in (EventType.INTVAR, EventType.RAND, EventType.USER_VAR):
            context += e.size
        elif code == EventType.TABLE_MAP:
            _, db, table = e.table_map
            maps[e.table_id] = (db, table)
            tables[(db, table)] = tables.get((db, table), 0) + e.size
            written.setdefault((db, table), None)
        elif e.is_rows and e.table_id in maps:
            name = maps[e.table_id]
            tables[name] = tables.get(name, 0) + e.size
        elif e.is_query:
            sql, db = e.sql or "", e.db or ""
            if statement_verb(sql) in _FRAMING_VERBS:
                envelope += e.size + context
            else:
                info = statement_tables(sql, db or None)
                updated = tuple(dict.fromkeys((t[0], t[1]) for t in info.updated))
                if updated or len(statements) < STATEMENT_GROUPS_MAX:
                    key: tuple = (db, str(info.kind), updated, "" if updated else sql)
                else:
                    key = (db, str(info.kind), (), "")
                got = statements.get(key)
                if got is None:
                    statements[key] = [e.size + context, sql]
                else:
                    got[0] += e.size + context
                for table in updated:
                    written.setdefault(table, key)
            context = 0
        else:
            envelope += e.size
    share_envelope(tables, envelope + context, written)




def _utf8(raw: bytes) -> str:
    return raw.decode("utf-8", "surrogateescape")  # as codec.event decodes a Query's texts
