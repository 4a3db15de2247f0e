"""Where the bytes of a unit go in `experiment`'s bytes by table (issue #60): each statement under
the tables it updates, each transaction's envelope (its GTID, BEGIN, annotations, XID or COMMIT:
sent only because of the writes inside it) split evenly between the tables it writes, and the
envelope of a transaction that writes no table and the control events in rows of their own (used
by spark_jobs.tasks.bandwidth, per chunk)."""

from __future__ import annotations

import threading
from array import array
from typing import TYPE_CHECKING, Any

from dumpfilter import _core
from dumpfilter.codec import EventType, Transaction
from dumpfilter.codec.event import decode_text

if TYPE_CHECKING:
    from dumpfilter.rules.statement_info import Kind, TableRef

FRAMING = ("", "(transaction framing)")  # GTID, BEGIN, annotations, XID/COMMIT of a transaction that writes no table
OTHER = ("", "(control events)")  # FDE, Gtid_list, Rotate, Binlog_checkpoint, Stop...: the control units
UNATTRIBUTED = ("", "(statements not attributed)")  # statements that update no table its parser names
STATEMENT_GROUPS_MAX = 4096  # statements updating no table, grouped by their text up to this many per chunk


ENVELOPE = "(envelope)"
# A table's share of its transactions' envelopes is counted under (ENVELOPE, (db, table), group):
# group None where a Table_map/Rows event wrote the table (sent where the slave keeps the table), else
# the key of the first statement group that wrote it in the transaction (sent where the slave applies
# that group's statements: spark_jobs.bandwidth_experiment.table_rows).


TableName = tuple[str, str]  # (db, table); FRAMING, OTHER and UNATTRIBUTED are rows of this shape too
# A group of statements, by what decides and names them: (default database, kind, the tables they
# update, their text where they update none its parser names, else "").
StatementGroup = tuple[str, str, tuple[TableName, ...], str]
EnvelopeKey = tuple[str, TableName, StatementGroup | None]  # (ENVELOPE, table, group): see above
TableKey = TableName | EnvelopeKey
Tables = dict[TableKey, int]  # a chunk's bytes by table (and envelope share)
Statements = dict[StatementGroup, list[Any]]  # a chunk's statements: group -> [bytes, one statement's text]
Buffer = bytes | memoryview  # a chunk's buffer (tasks.chunks.chunk_buffers)


def envelope_key(table: TableName, group: StatementGroup | None) -> EnvelopeKey:
    return (ENVELOPE, table, group)


def share_envelope(tables: Tables, envelope: int, written: dict[TableName, StatementGroup | None]) -> None:
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


_KEY_KINDS = {1: "INSERT", 2: "REPLACE", 3: "UPDATE", 4: "DELETE", 5: "INSERT", 6: "REPLACE"}


_NO_GROUP = (1 << 32) - 1  # a key the core leaves to Python (`UnitList.statement_tables`)


class _Groups:
    """Every key met, numbered by its bytes across chunks (`_core.KeyIndex`), and each number's
    group (`_key_group`) and each group's table, as the core reads them (`UnitList.statement_tables`):
    a key is looked at here once per process, not once per chunk (a 542 MB MIXED binlog's 65
    segments meet about 320 keys each, few new). Forgotten past KEPT keys (a binlog of that many
    tables and databases: memory stays bounded). Shared by the threads that count."""

    KEPT = 1 << 16

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self._forget()

    def _forget(self) -> None:
        # (new objects, not emptied ones: a thread's last `number` still reads its own)
        self.index = _core.KeyIndex()
        self.group_of = array("I")  # by key number: its group's id, or _NO_GROUP
        self.groups: list[tuple[StatementGroup, EnvelopeKey]] = []  # by group id: with its table's envelope key
        self.ids: dict[StatementGroup, int] = {}
        self.table_of = array("I")  # by group id: its table's id
        self.tables: dict[TableName, int] = {}

    def number(self, keys: list[_core.StatementKey]) -> tuple[bytes, bytes, bytes, list[tuple[StatementGroup, EnvelopeKey]]]:
        """`keys`' numbers, the groups by number and the tables by group (packed for the core), and
        the groups by id."""
        with self.lock:
            if len(self.index) >= self.KEPT:
                self._forget()
            got = self.index.number(keys)
            for k in got.new:
                group = _key_group(keys[k].db, keys[k].sql)
                self.group_of.append(_NO_GROUP if group is None else self._id(group))
            return got.numbers, self.group_of.tobytes(), self.table_of.tobytes(), self.groups

    def _id(self, group: StatementGroup) -> int:
        if (g := self.ids.get(group)) is None:
            g = self.ids[group] = len(self.groups)
            self.groups.append((group, envelope_key(group[2][0], group)))
            self.table_of.append(self.tables.setdefault(group[2][0], len(self.tables)))
        return g


_GROUPS = _Groups()


def _key_group(db: bytes, sql: bytes) -> StatementGroup | None:
    """The group of the statements of one key (its default database and a statement of it): by
    (default database, kind, the table it updates), as `_unit_tables` groups a statement's."""
    if (shape := _core.statement_key(sql)) is None:
        return None
    name = (decode_text(shape.db if shape.db is not None else db), decode_text(shape.table))
    return (decode_text(db), _KEY_KINDS.get(shape.kind, str(shape.kind)), (name,), "")


class KeyedSums:
    """A chunk's statement units decided by keys, summed by group id (`keyed_tables`) by the core
    into `sums` (16 bytes a group id: its statements' bytes, its envelopes' share): each group's
    entry in the chunk's statements (put in place as the units first meet it, with its text) and
    its envelope key in the chunk's tables (as they first meet its share), the sums added to both
    once (`flush`). The core returns the groups a segment met first; a chunk's later segments,
    which meet the same ~320 groups, then cost Python a few of them (a tenth of a DDL-heavy shadow
    pass's Python went to finding every group's entry and adding to it, segment after segment)."""

    def __init__(self) -> None:
        self.sums = bytearray()
        self.met: dict[int, tuple[list[Any], EnvelopeKey]] = {}  # group id -> its statements entry, its envelope key
        self.groups: object = None  # the groups the ids number (`_Groups.number`'s; new when it forgets)

    def cover(self, groups: int) -> None:
        """Room in `sums` for `groups` group ids."""
        if len(self.sums) < 16 * groups:
            self.sums += bytes(16 * groups - len(self.sums))

    def flush(self, tables: Tables) -> None:
        """The sums added to the chunk's statements and tables, and set to 0; none summed after."""
        if not self.met:
            return
        with memoryview(self.sums).cast("Q") as sums:
            for g, (entry, share) in self.met.items():
                entry[0] += sums[2 * g]
                if envelope := sums[2 * g + 1]:
                    tables[share] += envelope
                sums[2 * g] = sums[2 * g + 1] = 0
        self.met.clear()


def keyed_tables(units: _core.UnitList, n: int, keys: list[_core.StatementKey], tables: Tables,
                 statements: Statements, sums: KeyedSums) -> list[int]:
    """`_unit_tables` for the units among the first `n` of `units` that the core reads: the
    control units into OTHER, the statement units decided by keys (`UnitList.statement_units`'
    `keys`, asked for first) into `statements` and their envelopes into `tables` (through `sums`,
    the chunk's), by the core in one walk (`UnitList.statement_tables`), each key's group made once
    (`_Groups`). The groups go into `statements` in the order the units first meet them, each with
    that statement's text (as one unit at a time does). Returns the other units that are not
    fast, for `_unit_tables` one at a time."""
    ids, group_of, table_of, groups = _GROUPS.number(keys)
    if sums.groups is not groups:  # (the ids numbered again past _Groups.KEPT: the sums by the old ones added)
        sums.flush(tables)
        sums.groups = groups
    sums.cover(len(groups))
    got = units.statement_tables(ids, group_of, table_of, n, sums.sums)
    met = sums.met
    for g, envelope, k in zip(got.groups, got.envelopes, got.keys):
        found = met.get(g)
        if found is None:  # (its first unit this chunk)
            group, share = groups[g]
            entry = statements.get(group)
            if entry is None:
                entry = statements[group] = [0, decode_text(keys[k].sql)]
            found = met[g] = (entry, share)
        if envelope:  # (its first share this chunk, or with its first unit)
            tables.setdefault(found[1], 0)
    for key, size in ((FRAMING, got.framing), (OTHER, got.other)):
        if size:
            tables[key] = tables.get(key, 0) + size
    return got.left


def _unit_tables(txn: Transaction, tables: Tables, statements: Statements) -> None:
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
    written: dict[TableName, StatementGroup | None] = {}
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
                key = statement_group(db, info.kind, info.updated, sql, len(statements))
                got = statements.get(key)
                if got is None:
                    statements[key] = [e.size + context, sql]
                else:
                    got[0] += e.size + context
                for written_table in key[2]:
                    written.setdefault(written_table, key)
            context = 0
        else:
            envelope += e.size
    share_envelope(tables, envelope + context, written)


def statement_group(db: str, kind: Kind, tables: tuple[TableRef, ...], sql: str, groups: int) -> StatementGroup:
    """The group of statement `sql` of default database `db` (its parse's `kind` and `tables`) where
    `groups` groups are met: (db, kind, the tables it updates, ""), or for one that updates no table
    its parser names, its text in place of the tables (its kind alone past STATEMENT_GROUPS_MAX)."""
    updated = tuple(dict.fromkeys((t[0], t[1]) for t in tables))
    return (db, str(kind), updated, "" if updated or groups >= STATEMENT_GROUPS_MAX else sql)


def lone_tables(group: StatementGroup, sql: str, sums: list[int], tables: Tables, statements: Statements) -> None:
    """`_unit_tables` of a chunk's units of a GTID and one statement `sql` of `group`, which updates
    tables (`lone_units.LoneUnits.tally`): their `sums` (the statements' bytes, each table's share
    of the envelopes and what the divisions left the first, as `share_envelope` splits each) added."""
    statements.setdefault(group, [0, sql])[0] += sums[0]
    for k, table in enumerate(group[2]):
        key = envelope_key(table, group)
        tables[key] = tables.get(key, 0) + sums[1] + (sums[2] if k == 0 else 0)
