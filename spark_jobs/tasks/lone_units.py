"""A chunk's GTID-and-one-statement units as every rule group of `experiment`'s count reads them
(`LoneUnits`, held per thread: spark_jobs.tasks.bandwidth's `_rule_group`): read by the core once a
buffer, each numbered by its class or its text and answered once a number, their bytes by table
summed by the core, and the schema statements among them listed for `answer_all`'s replay."""

from __future__ import annotations

import struct
from collections.abc import Callable, Hashable

from dumpfilter import _core
from dumpfilter._core import CLASS_LEFT, CLASS_STAYS, CLASS_UNREAD, LONE_DEFER, LONE_REPLAY, LONE_RESOLVED
from dumpfilter.codec import Transaction
from dumpfilter.codec.transactions import CONTROL
from dumpfilter.rules.evaluate import RuleEngine
from dumpfilter.rules.schema import SCHEMA_KINDS
from dumpfilter.rules.statement_facts import class_declined, core_class
from dumpfilter.rules.statement_info import Kind, StatementInfo, TableRef
from dumpfilter.rules.statements import plain_statement, statement_tables
from dumpfilter.spark_jobs.tasks.statement_tables import (STATEMENT_GROUPS_MAX, StatementGroup, Statements, Tables,
                                                           lone_tables, statement_group)

# How the schema model replays a lone statement: by its parse, or (an ALTER TABLE that renames
# nothing) deferred, by its table (`SchemaModel.defer`); None: not at all.
Replay = StatementInfo | TableRef | None
# A buffer's GTID-and-one-plain-statement units by default database: (database, unit indices as
# u32 little-endian, as `_core.mark_slow` takes them).
Lone = list[tuple[str, bytes]]

# Lone statements whose decision reads the replica's trigger knowledge or the schema model.
_ONE_BY_ONE = frozenset({Kind.CREATE_TRIGGER, Kind.DROP_TRIGGER, Kind.UPDATE_MULTI})
# The kinds `_parsed` reads the whole parse of: those the schema model replays, those above, SET (exempt).
_PARSED = (SCHEMA_KINDS - {Kind.ALTER_TABLE}) | _ONE_BY_ONE | {Kind.ROUTINE, Kind.SET}
LEFT, STAYS = -1, -2  # `LoneUnits.klass`: a unit each group decides (`decide`); one that stays ROW_SLOW
_U32 = struct.Struct("<I").pack_into  # a unit's code or key, as the core reads them
_ENTRY = struct.Struct("<III").pack_into  # a number's answer in `LoneUnits.resolved` (lone_class::resolved_at)
_FROM_CORE = {CLASS_LEFT: LEFT, CLASS_STAYS: STAYS}


class LoneUnits:
    """A chunk's GTID-and-one-statement units, read once for every rule group that answers them
    by what their answer depends on (RuleGroup): per buffer, the plain ones by default database
    (`plain`, read by the core: `UnitList.lone_queries`), and each unit's key (`klass`: its
    statement's kind and tables, by which `tally` groups its bytes; or LEFT, or STAYS), each key
    in a decision class (`decides`: a table's CREATE, ALTER, INDEX and DROP are one).

    The core numbers each unit by its class (kind and tables) or, where Python reads its whole
    parse (a CREATE or DROP TABLE), by its text (`core_classes`). Python answers a number at its
    first unit (`_by_number`, and `resolved` for the core: its key, its decision class, how its
    units replay); the core then writes the key and decision class of each later unit of it
    (`key_of`, `class_of`) and lists those the schema model replays, and a unit costs Python
    nothing (a DDL-heavy pass: 16,870 units, a few hundred numbers)."""

    KEYS_MAX = 1 << 16  # keys numbered per chunk; past it, lone statements are decided one by one
    DECLINED = class_declined(_PARSED)  # the kinds the core's classes leave to `_parsed`

    def __init__(self) -> None:
        self.keys: dict[Hashable, int] = {}
        self.infos: list[tuple[str | None, Kind, tuple[TableRef, ...]]] = []  # by key: (default database, kind, updated)
        self.decides: list[int] = []  # by key: its decision class
        self.classes_by: dict[Hashable, int] = {}  # decision classes by what their decisions read
        # by decision class: the number of what its decision reads but its tables' verdicts, and of
        # its tables (`number`: RuleGroup._by_reads keys by small numbers), and its tables
        self.parts: list[tuple[int, int, tuple[TableRef, ...]]] = []
        self.numbers: dict[Hashable, int] = {}
        self._plain: Lone = []
        # The statements' numbers as the core reads them (classes and declined texts, across
        # buffers), and each one's answer, made at its first unit: (key, its replay: the number's
        # text where it is the replay's, its default database, how it replays), here and for the
        # core (`resolved`).
        self.core_classes = _core.LoneClasses([kind.value for kind in self.DECLINED])
        self._by_number: list[tuple[int, tuple[str, str | None, Replay]] | None] = []
        self.resolved = bytearray()
        self.class_of = bytearray()  # each unit's decision class as the core reads it (u32; CLASS_UNREAD before)
        self.key_of = bytearray()  # each unit's key (u32; CLASS_UNREAD before `klass`, CLASS_LEFT, CLASS_STAYS)
        self._keys_seen: memoryview | None = None
        # the buffer's lone units of a key whose statement the schema model replays (DDL, CREATE
        # FUNCTION), by unit: (statement, default database, parse)
        self.replays: dict[int, tuple[str, str | None, Replay]] = {}
        # The bytes by table (`tally`): by key, its statements' group, its number of tables (u32, 0:
        # grouped by its text), its sums this chunk (three u64, the core's) and whether met this
        # chunk (a byte); the keys met, in order.
        self._groups: dict[int, StatementGroup] = {}
        self._shares, self._sums, self._met = bytearray(), bytearray(), bytearray()
        self._met_keys: list[int] = []
        self.texts: dict[tuple[str | None, str], tuple[int, Replay]] = {}  # `_parsed`'s, by text
        self._text_chars, self._classified = 0, False
        self._found: _core.LoneQueries | None = None
        self._formats: list[tuple[int, int, int]] = []
        self._units: _core.UnitList | None = None
        self.read: Callable[[], _core.LoneQueries] | None = None
        self.txn: Callable[[int], Transaction] | None = None

    def buffer(self, units: _core.UnitList, formats: list[tuple[int, int, int]],
               txn: Callable[[int], Transaction]) -> None:
        """The next buffer's units (`formats` as `UnitList.statement_units` takes them; `txn` unit
        k as a Transaction, made once for every group)."""
        self._plain, self._found, self.txn, self._classified = [], None, txn, False
        self._units, self._formats = units, formats
        self._keys_seen = None
        self.class_of = bytearray(b"\xff" * (4 * len(units)))
        self.key_of = bytearray(b"\xff" * (4 * len(units)))
        self.replays = {}
        self.read = lambda: units.lone_queries(formats, every=True, classes=self.core_classes,
                                               resolved=bytes(self.resolved), class_of=self.class_of,
                                               key_of=self.key_of)

    def plain(self) -> Lone:
        """The buffer's units of a GTID and one plain statement (`plain_statement`), by default database."""
        self._read()
        return self._plain

    def _read(self) -> None:
        """The buffer's lone units, read by the core in one call (`UnitList.lone_queries`), once:
        the plain ones by default database, with those whose text Python must tell
        (`plain_statement`); the units of a number answered before keyed by the core."""
        if self.read is None:
            return
        found, self.read = self.read(), None
        self._found = found
        self._plain = plain = [(group.db, group.units) for group in found.plain]
        for q in found.others:
            if q.plain is None and plain_statement(q.sql):
                plain.append((q.db, q.unit.to_bytes(4, "little")))

    def classify(self) -> None:
        """The key (`klass`) of each of the buffer's units of a GTID and one statement that the
        core read, once a buffer, before the groups read them (`_core.mark_classes`): those of a
        number answered before keyed by the core (`resolved`), with their replays; the others
        answered here, each number at its first unit, and a text met before (`texts`: read where
        the core numbered it not) not parsed again."""
        if self._classified:
            return
        self._read()
        self._classified = True
        found = self._found
        if found is None:
            return
        by_number, replays = self._by_number, self.replays
        with memoryview(found.replays).cast("I") as pairs:  # (unit, number) each
            made = [by_number[n] for n in pairs[1::2].tolist()]  # (numbers the core answers are answered here)
            replays.update(zip(pairs[0::2].tolist(), [
                entry[1] if text is None else (text, *entry[1][1:])  # type: ignore[index]
                for entry, text in zip(made, found.texts)]))
        ordered = True
        for q in found.others:
            if not q.gtid_size:
                continue  # (a class is only a lone unit's with a GTID)
            k, db, sql, n = q.unit, q.db, q.sql, q.class_id
            entry = by_number[n] if 0 <= n < len(by_number) else None
            if entry is not None:  # (a number answered after the core read the buffer)
                c, replay = entry[0], entry[1][2]
            else:
                c, replay = (self._core_class(db, n) if n >= 0 and self.core_classes.get(n) is not None else
                             self.texts.get((db, sql)) or self._parsed(db, sql))
                if n >= 0:
                    self._answer(n, c, db, sql, replay)
            _U32(self.key_of, 4 * k, c if c >= 0 else CLASS_LEFT)
            _U32(self.class_of, 4 * k, self.decides[c] if c >= 0 else CLASS_LEFT)
            if replay is not None:
                ordered = ordered and (not replays or k > next(reversed(replays)))
                replays[k] = (sql, db, replay)
        if not ordered:  # (the core's replays and these, in stream order)
            self.replays = dict(sorted(replays.items()))

    def _answer(self, n: int, c: int, db: str | None, sql: str, replay: Replay) -> None:
        """Number `n` answered (its first unit's `db` and `sql`): key `c`, and how its units
        replay, for the core's later reads (`resolved`). A class's units replay (an ALTER TABLE
        deferred by its table) each with its own text; a declined text's (a CREATE or DROP TABLE
        by its parse) by the number's."""
        by_number = self._by_number
        by_number += [None] * (n + 1 - len(by_number))
        entry: tuple[int, tuple[str, str | None, Replay]]
        if isinstance(replay, StatementInfo):
            if self.core_classes.get(n) is not None:
                return  # (a class's parse is not each of its texts': left to this path)
            flags, entry = LONE_RESOLVED | LONE_REPLAY, (c, (sql, db, replay))
        else:
            flags, entry = LONE_RESOLVED | (LONE_DEFER if replay is not None else 0), (c, ("", db, replay))
        by_number[n] = entry
        resolved = self.resolved
        resolved += bytes(12 * (n + 1) - len(resolved)) if len(resolved) < 12 * (n + 1) else b""
        _ENTRY(resolved, 12 * n, c if c >= 0 else CLASS_LEFT, self.decides[c] if c >= 0 else CLASS_LEFT, flags)

    def tally(self, left: list[int], tables: Tables, statements: Statements, other: Callable[[int], None]) -> None:
        """The bytes by table of each unit of `left` that is a GTID and one statement of a key that updates
        tables (`klass`), as `statement_tables._unit_tables` puts them, from the core's sizes and the key's
        group (not decoded), summed by key by the core (`UnitList.lone_sums`) and added once a chunk
        (`flush`; its keys put in place at its first unit); `other` reads each other unit
        (`_unit_tables`), in order."""
        self.classify()  # (rules on databases alone did not classify the buffer's units)
        if not left:
            return
        assert self._units is not None  # (set by `buffer`)
        if len(self._met) < len(self.keys):  # (keys numbered since: each one's group and tables)
            self._add_keys()
        got = self._units.lone_sums(self._formats, left, bytes(self.key_of), bytes(self._shares), self._sums,
                                    self._met)
        with memoryview(self.key_of).cast("I") as keys:
            for k, summed, q in zip(got.units, got.summed, got.queries):
                # (summed: a key's first unit this chunk, put in place in the dicts' order; any other
                # unit the core leaves is read unit by unit: one without a key, of a key grouped by
                # its text, or whose key it does not know)
                if not summed or q is None:
                    other(k)
                    continue
                c = keys[k]
                self._met_keys.append(c)
                lone_tables(self._groups[c], q.sql, [0, 0, 0], tables, statements)

    def _add_keys(self) -> None:
        """The group and number of tables (`_shares`: 0 where it is grouped by its text) of each key
        numbered since the last, and its sums and met byte, for the core's `lone_sums`."""
        new = range(len(self._met), len(self.keys))
        for c in new:
            db, kind, updated = self.infos[c]
            self._groups[c] = statement_group(db or "", kind, updated, "", STATEMENT_GROUPS_MAX)
        self._shares += struct.pack(f"<{len(new)}I", *[len(self._groups[c][2]) for c in new])
        self._sums += bytes(24 * len(new))
        self._met += bytes(len(new))

    def flush(self, tables: Tables, statements: Statements) -> None:
        """The bytes `tally` summed by key added to a chunk's; none summed after."""
        if not self._met_keys:
            return
        with memoryview(self._sums).cast("Q") as sums:
            for c in self._met_keys:
                i = 3 * c
                lone_tables(self._groups[c], "", [sums[i], sums[i + 1], sums[i + 2]], tables, statements)
                sums[i] = sums[i + 1] = sums[i + 2] = 0
                self._met[c] = 0
        self._met_keys.clear()

    def number(self, value: Hashable) -> int:
        """`value`'s number among the values numbered (two per key, and the verdicts of each set of
        tables: bandwidth's `_rule_group` starts again past `KEYS_MAX << 2`)."""
        return self.numbers.setdefault(value, len(self.numbers))

    def klass(self, k: int) -> int:
        """Unit k's key: STAYS (a control unit, or one the input ends inside), the key of a GTID
        and one statement that parses and is neither trigger DDL nor a multi-table UPDATE (what
        rpl_filter.cc reads of it, under rules that answer by parse: the default database, the kind,
        a database statement's name, whether table rules pass it by, the tables it updates; not
        the column or index names that set one ALTER apart from the next; after `classify`), else
        LEFT."""
        seen = self._keys_seen
        if seen is None:
            seen = self._keys_seen = memoryview(self.key_of).cast("I")
        found = seen[k]
        if found != CLASS_UNREAD:
            return _FROM_CORE.get(found, found)
        # not a lone unit the core read (`classify`): each group decides it
        assert self.txn is not None  # (set by `buffer`)
        unit = self.txn(k)
        code = CLASS_STAYS if unit.kind == CONTROL or not unit.complete else CLASS_LEFT
        seen[k] = code
        _U32(self.class_of, 4 * k, code)
        return _FROM_CORE[code]

    def _core_class(self, db: str | None, core: int) -> tuple[int, Replay]:
        """The key and replay of the core's class number `core` (`core_classes`), met first in a
        unit of default database `db` (part of what it numbers), as `_parsed` makes them from a text."""
        read = self.core_classes.get(core)
        assert read is not None  # (numbered by the buffer's read)
        kind, tables = Kind(read.kind), tuple(zip(read.dbs, read.names))
        return self._keyed((db, kind, tables, None, False, bool(tables)),
                           tables[0] if kind is Kind.ALTER_TABLE and tables else None)

    def _parsed(self, db: str | None, sql: str) -> tuple[int, Replay]:
        """The key of statement `sql` under default database `db`, and its parse where the schema
        model replays it (DDL, CREATE FUNCTION; an ALTER TABLE's table, deferred), else None;
        remembered by text (`texts`)."""
        # (not through the parses the master's decisions remember: a DDL workload's texts, each met
        # once, would push theirs out; `texts` remembers these)
        found, read = LEFT, core_class(sql, db or "", _PARSED)
        # (an ALTER TABLE read so renames nothing: the model replays it once read, `SchemaModel.defer`)
        replay: Replay = read[1][0] if read is not None and read[0] is Kind.ALTER_TABLE and read[1] else None
        key: _Key | None = (
            None if read is None else (db, *read, None, False, bool(read[1])))
        if read is None:  # (a kind the model replays, or one read its own way: the whole parse)
            info = statement_tables(sql, db or "", remember=False)
            if info.parse_ok and info.kind not in _ONE_BY_ONE:
                key = (db, info.kind, info.updated, info.db_statement_name, info.exempt_from_table_rules, info.has_tables)
                replay = info if info.kind in SCHEMA_KINDS or info.kind is Kind.ROUTINE else None
        if key is not None:
            found, replay = self._keyed(key, replay)
        if len(sql) <= _TEXT_MAX:
            if len(self.texts) >= self.KEYS_MAX or self._text_chars + len(sql) > _TEXTS_CHARS:
                self.texts.clear()
                self._text_chars = 0
            self.texts[(db, sql)] = (found, replay)
            self._text_chars += len(sql)
        return found, replay

    def _keyed(self, key: _Key, replay: Replay) -> tuple[int, Replay]:
        """Key `key`'s number (LEFT past KEYS_MAX keys), and `replay` where it has one."""
        found = self.keys.get(key, LEFT)
        if found == LEFT and len(self.keys) < self.KEYS_MAX:
            found = self.keys[key] = len(self.keys)
            db = key[0]
            self.infos.append(key[:3])
            reads = (db, key[1] if key[1] in RuleEngine.KINDS_READ else None, *key[3:])  # (its kind: KINDS_READ's)
            if (d := self.classes_by.get((reads, key[2]))) is None:
                d = self.classes_by[(reads, key[2])] = len(self.parts)
                self.parts.append((self.number(reads), self.number(key[2]), key[2]))
            self.decides.append(d)
        return found, replay if found != LEFT else None


# A lone statement's key: (default database, kind, updated tables, a database statement's name, exempt
# from table rules, has tables).
_Key = tuple[str | None, Kind, tuple[TableRef, ...], str | None, bool, bool]

# `LoneUnits.texts` remembers statements up to this long, and this many characters of them in all
# (its memory stays bounded: a few MB, whatever the texts).
_TEXT_MAX, _TEXTS_CHARS = 4096, 4 << 20
