"""Where the bytes of a unit that is not fast go in `experiment`'s bytes by table (issue #60):
each statement under the tables it updates, each transaction's framing and the control events
in rows of their own (used by spark_jobs.tasks.bandwidth, per chunk)."""

from __future__ import annotations

import struct

from dumpfilter import _core
from dumpfilter.codec import EventType, Transaction
from dumpfilter.codec.constants import HEADER_LEN

FRAMING = ("", "(transaction framing)")  # GTID, BEGIN, annotations, XID/COMMIT of every transaction
OTHER = ("", "(control events)")  # FDE, Gtid_list, Rotate, Binlog_checkpoint, Stop...: the control units
UNATTRIBUTED = ("", "(statements not attributed)")  # statements that update no table its parser names
STATEMENT_GROUPS_MAX = 4096  # statements updating no table, grouped by their text up to this many per chunk


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
    tables[FRAMING] = tables.get(FRAMING, 0) + framing + context
    for group, size, sql in found:
        got = statements.get(group)
        if got is None:
            statements[group] = [size, _utf8(sql)]
        else:
            got[0] += size
    return True


def _unit_tables(txn: Transaction, tables: dict, statements: dict) -> None:
    """Where a unit that is not fast puts its bytes (a statement-logged transaction, DDL, a MIXED
    transaction of statements and rows): each Table_map and Rows event under its table, as
    `tally::table_bytes` counts a fast unit's; each statement with the context events before it
    (INTVAR, RAND, USER_VAR) into `statements` by (default database, kind, the tables it updates:
    `rules.statements.statement_tables`, the parser the rules decide with); the GTID, BEGIN,
    annotations, XID or COMMIT into FRAMING. A statement that updates no table its parser names
    (SET, a database statement, what it cannot parse) is grouped by its text (up to
    STATEMENT_GROUPS_MAX per chunk, then by its kind): `table_rows` puts it in UNATTRIBUTED."""
    from dumpfilter.codec.transactions import statement_verb
    from dumpfilter.rules.statements import statement_tables

    maps: dict[int, tuple[str, str]] = {}
    context = 0
    for e in txn.events:
        code = e.type_code
        if code in _FRAMING_EVENTS:
            tables[FRAMING] = tables.get(FRAMING, 0) + e.size
        elif code in (EventType.INTVAR, EventType.RAND, EventType.USER_VAR):
            context += e.size
        elif code == EventType.TABLE_MAP:
            _, db, table = e.table_map
            maps[e.table_id] = (db, table)
            tables[(db, table)] = tables.get((db, table), 0) + e.size
        elif e.is_rows and e.table_id in maps:
            name = maps[e.table_id]
            tables[name] = tables.get(name, 0) + e.size
        elif e.is_query:
            sql, db = e.sql or "", e.db or ""
            if statement_verb(sql) in _FRAMING_VERBS:
                tables[FRAMING] = tables.get(FRAMING, 0) + e.size + context
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
            context = 0
        else:
            tables[FRAMING] = tables.get(FRAMING, 0) + e.size
    if context:
        tables[FRAMING] = tables.get(FRAMING, 0) + context




def _utf8(raw: bytes) -> str:
    return raw.decode("utf-8", "surrogateescape")  # as codec.event decodes a Query's texts
