"""What the slaves of one rule group share over a chunk `experiment` counts (`RuleGroup`): the
keep table, the TransactionFilter and its answer for each unit the compiled walk leaves, decided
once for all of them (spark_jobs.tasks.bandwidth's counters read it)."""

from __future__ import annotations

import struct
from collections.abc import Callable, Hashable
from typing import TYPE_CHECKING

from dumpfilter import _core
from dumpfilter._core import CLASS_LEFT, CLASS_STAYS, mark_classes, mark_slow
from dumpfilter.codec import Transaction
from dumpfilter.codec.scanner import ROW_KEEP, ROW_SKIP, ROW_SLOW
from dumpfilter.codec.transactions import CONTROL
from dumpfilter.rules.decider import Gated
from dumpfilter.rules.evaluate import RuleEngine
from dumpfilter.rules.keep_table import KeepTable
from dumpfilter.rules.schema import SCHEMA_KINDS
from dumpfilter.rules.statement_facts import class_declined, core_class
from dumpfilter.rules.statement_info import Kind, StatementInfo, TableRef
from dumpfilter.rules.statements import plain_statement, statement_tables
from dumpfilter.rules.transaction_filter import EMPTIED, KEEP, KEPT, SKIPPED, FilterResult, TransactionFilter
from dumpfilter.spark_jobs.tasks.statement_tables import (STATEMENT_GROUPS_MAX, StatementGroup, Statements, Tables,
                                                           lone_tables, statement_group)

# How the schema model replays a lone statement: by its parse, or (an ALTER TABLE that renames
# nothing) deferred, by its table (`SchemaModel.defer`); None: not at all.
Replay = StatementInfo | TableRef | None
# A buffer's GTID-and-one-plain-statement units by default database: (database, unit indices as
# u32 little-endian, as `_core.mark_slow` takes them).
Lone = list[tuple[str, bytes]]

if TYPE_CHECKING:
    from dumpfilter.rules.ruleset import Settings


class RuleGroup:
    """What the slaves of one rule group (the same rules, settings and gate; their skip policies
    differ) share over a chunk: the keep table, the TransactionFilter, and its answer for each
    unit of the buffer the compiled walk leaves (`result`), decided once for all of them, in
    stream order (`mark`), as the master's StatementAnswers decides a unit once per rule group.
    A unit so answered kept whole or skipped whole is handed back to the compiled walk (`mark`),
    so that a binlog's DDL and lone statements cost one decision per rule group, not one trip
    through Python per slave (issue #80).

    Rules that decide statements by databases alone (`RuleEngine.databases_only`, no master
    policy restriction) decide a GTID and one plain statement by its default database alone
    (rpl_filter.cc checks db_ok only), as the master's statement flag words key it: such units,
    read for the whole buffer by the core (`UnitList.lone_queries`, once for every group), are
    answered once per default database per rule set. Nothing such a decision leaves behind (the
    schema model's replay, trigger knowledge, rule hits) can change a later answer of rules that
    read databases only, and `experiment` reports none of it.

    Rules under standard semantics (no rewrite-db, names as they come) decide any other lone
    statement by what rpl_filter.cc reads of it (its decision class, `LoneUnits.decides`): its
    default database, a database statement's name, whether table rules pass it by, the tables it
    updates, and its kind only where the decision reads it (`RuleEngine.KINDS_READ`); then those
    tables' verdicts (`RuleEngine.table_reads`, once per rule group and set of tables). The core
    sets the units of an answered class (`_core.mark_classes`). No such decision reads the schema
    model: the thread's engines share one, which `answer_all` replays once a unit for all groups
    (`schema`). Trigger DDL, multi-table UPDATEs and what does not parse are decided one by one,
    in stream order."""

    __slots__ = ("filter", "keeps", "results", "by_database", "plain", "lone", "engine", "codes", "by_reads", "steps",
                 "schema")

    def __init__(self, keeps: KeepTable, settings: Settings) -> None:
        self.keeps = keeps  # (held across chunks with the group: bandwidth._rule_group)
        decider = keeps.decider
        self.filter = TransactionFilter(decider, empty_transactions=KEEP)
        # (Every unit is decided ahead of the walk, `mark`: a topology's slave tracks no derived
        # tables, WL#40, so a table's answer is its name's, under WL#2516's effective semantics too.)
        engine = decider if settings.semantics == "mysql" and isinstance(decider, RuleEngine) else None
        self.by_database = engine is not None and engine.databases_only
        self.plain: dict[str, int] = {}  # by_database: a plain lone statement's row byte by its default database
        # Answered by parse: what the statement names is what rpl_filter.cc reads (no rewrite of
        # the default database it is parsed under, no WL#2516 pattern).
        rules = engine.rules if engine is not None else None
        self.engine = engine if (engine is not None and rules is not None
                                 and not (rules.rewrite_db or rules.effective_do or rules.effective_ignore)
                                 and not engine.names.lower_incoming) else None
        self.codes = bytearray()  # a lone statement's row byte by its key (LoneUnits.klass), _UNDECIDED before
        self.by_reads: dict[tuple[int, int], int] = {}  # and by what its decision reads (`_by_reads`)
        self.steps: dict[int, int] = {}  # `table_reads` numbered, by LoneUnits' number of its tables
        self.lone: LoneUnits | None = None
        # The schema model its engine shares with the thread's other engines, which `answer_all`
        # replays once a unit (the engine replays none); None where the engine replays its own.
        inner = decider.rules if isinstance(decider, Gated) else decider
        self.schema = inner.schema if isinstance(inner, RuleEngine) and not inner.replay_ddl else None
        self.results: dict[int, FilterResult] = {}

    def buffer(self, lone: LoneUnits) -> None:
        """A new buffer: its units are numbered from 0 again; `lone` its lone units, read once for
        every group that asks."""
        self.results.clear()
        self.lone = lone

    def result(self, k: int, txn: Transaction) -> FilterResult:
        if (found := self.results.get(k)) is None:
            found = self.results[k] = self.filter.filter(txn)
        return found

    def mark(self, row: bytes, at: int, txn: Callable[[int], Transaction]) -> tuple[bytes | bytearray, list[int]]:
        """`row` (a slave's answers from unit `at` on) with the units the walk leaves to Python
        (ROW_SLOW) that the group answers by database or by parse (no decision of theirs reads the
        schema model) turned ROW_KEEP where the answer keeps the unit whole or ROW_SKIP where it
        keeps nothing: the compiled walk then sends it (or what the slave's skip policy makes of
        it) as the master's does (StatementAnswers.row); and the units left for `decide`, in
        order. Units kept in part and control events stay ROW_SLOW."""
        if ROW_SLOW not in row:
            return row, []
        out = bytearray(row)
        for db, ks in (self.lone.plain() if self.by_database and self.lone is not None else ()):
            code = self.plain.get(db)
            if code is None:  # the database's first: decided, and its answer kept for the others
                if len(self.plain) >= LoneUnits.KEYS_MAX:  # (held across chunks: bounded)
                    self.plain.clear()
                unit = txn(k := int.from_bytes(ks[:4], "little"))
                code = self.plain[db] = self._code(self.result(k, unit), unit)
            mark_slow(out, ks, code)
        left: list[int] = []
        lone = self.lone
        assert lone is not None  # (set by `buffer`)
        codes = self.codes if self.engine is not None else bytearray()
        if self.engine is not None and not self.by_database:  # (database rules read no parse: `plain`)
            lone.classify()
        # The units of a class the group has answered are set by the core; Python reads the others
        # (a unit met first, a class met first, one the group decides on its own).
        codes += bytes([_UNDECIDED]) * (len(lone.parts) - len(codes))  # (the classes numbered so far)
        for k in mark_classes(out, at, lone.class_of, codes):
            # (A Format_description resets nothing here: no answer of a topology's rules follows
            # the server's lifetime, and a unit's table ids are its own Table_maps'.)
            c = lone.klass(k)
            if c >= 0 and self.engine is not None:
                d = lone.decides[c]
                if codes[d] == _UNDECIDED:  # the class's first: answered as the first that read the same
                    codes[d] = self._by_reads(d, k, txn)
                out[k] = codes[d]
            elif c != STAYS:
                left.append(k)
        return out, left

    def _by_reads(self, d: int, k: int, txn: Callable[[int], Transaction]) -> int:
        """Decision class d's row byte, met first at unit k: that of the first class whose decision
        read the same (the class's reads but its tables', `LoneUnits.parts`, and its tables'
        verdicts of the same rules, `RuleEngine.table_reads`, as a tenant's scratch tables' DDL),
        else its own decision's."""
        assert self.engine is not None and self.lone is not None  # (answered by parse)
        base, tables, updated = self.lone.parts[d]
        steps = self.steps.get(tables)
        if steps is None:  # (the tables' verdicts: read once; none under database rules alone, never tables_ok's)
            reads = () if self.engine.databases_only else self.engine.table_reads(updated)
            steps = self.steps[tables] = self.lone.number(reads)
        code = self.by_reads.get((base, steps))
        if code is None:
            code = self.by_reads[(base, steps)] = self._code(self.result(k, unit := txn(k)), unit)
        return code

    def decide(self, out: bytearray, k: int, unit: Transaction) -> None:
        """Unit k, left by `mark`, decided for the group (`answer_all` calls it in stream order)."""
        out[k] = self._code(self.result(k, unit), unit)

    @staticmethod
    def _code(result: FilterResult, unit: Transaction) -> int:
        """A unit's row byte from its answer: ROW_KEEP kept whole, ROW_SKIP kept nothing, else
        ROW_SLOW (kept in part: the slave's walk takes it)."""
        if result.outcome == KEPT and len(result.events) == len(unit.events):
            return ROW_KEEP
        return ROW_SKIP if result.outcome in (EMPTIED, SKIPPED) else ROW_SLOW


# Lone statements whose decision reads the replica's trigger knowledge or the schema model.
_ONE_BY_ONE = frozenset({Kind.CREATE_TRIGGER, Kind.DROP_TRIGGER, Kind.UPDATE_MULTI})
# The kinds `_parsed` reads the whole parse of: those the schema model replays, those above, SET (exempt).
_PARSED = (SCHEMA_KINDS - {Kind.ALTER_TABLE}) | _ONE_BY_ONE | {Kind.ROUTINE, Kind.SET}
LEFT, STAYS = -1, -2  # `LoneUnits.klass`: a unit each group decides (`decide`); one that stays ROW_SLOW
_UNDECIDED = 0xFF  # a class's code not decided yet (`RuleGroup.codes`, `_core.mark_classes`)
_U32 = struct.Struct("<I").pack_into  # a unit's class in `LoneUnits.class_of`, as the core reads it


class LoneUnits:
    """A chunk's GTID-and-one-statement units, read once for every rule group that answers them
    by what their answer depends on (RuleGroup): per buffer, the plain ones by default database
    (`plain`, read by the core: `UnitList.lone_queries`), and each unit's key (`klass`: its
    statement's kind and tables, by which `tally` groups its bytes; or LEFT, or STAYS), each key
    in a decision class (`decides`: a table's CREATE, ALTER, INDEX and DROP are one)."""

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
        # the others, by unit: (default database, text, its GTID's size, its size, its class's number
        # in `core_classes` or -1), each read off the core's record once (its fields are attribute
        # reads, a call each)
        self._queries: dict[int, tuple[str | None, str, int, int, int]] = {}
        # The statements' classes as the core reads them (kind and updated tables, numbered by value
        # across buffers: a DDL workload's texts are each met once, their classes again and again),
        # and each one's class and replay here (`_by_class`), made at its first unit.
        self.core_classes = _core.LoneClasses([kind.value for kind in self.DECLINED])
        self._by_class: list[tuple[int, Replay] | None] = []
        self.classes: dict[int, int] = {}
        self.class_of = bytearray()  # each unit's class as the core reads it (u32; CLASS_UNREAD before `klass`)
        # the buffer's lone units of a key whose statement the schema model replays (DDL, CREATE
        # FUNCTION), by unit: (statement, default database, parse)
        self.replays: dict[int, tuple[str, str | None, Replay]] = {}
        self._groups: dict[int, StatementGroup] = {}  # by key: its statements' group in the bytes by table
        self._sums: dict[int, list[int]] = {}  # by key: its units' bytes this chunk (`tally`)
        self.texts: dict[tuple[str | None, str], tuple[int, Replay]] = {}  # `_parsed`'s, by text
        self._text_chars, self._classified = 0, False
        self.read: Callable[[], _core.LoneQueries] | None = None
        self.txn: Callable[[int], Transaction] | None = None

    def buffer(self, units: _core.UnitList, formats: list[tuple[int, int, int]],
               txn: Callable[[int], Transaction]) -> None:
        """The next buffer's units (`formats` as `UnitList.statement_units` takes them; `txn` unit
        k as a Transaction, made once for every group)."""
        self._plain, self._queries, self.txn, self._classified = [], {}, txn, False
        self.classes.clear()
        self.class_of = bytearray(b"\xff" * (4 * len(units)))
        self.replays.clear()
        self.read = lambda: units.lone_queries(formats, every=True, classes=self.core_classes)

    def plain(self) -> Lone:
        """The buffer's units of a GTID and one plain statement (`plain_statement`), by default database."""
        self._read()
        return self._plain

    def _read(self) -> None:
        """The buffer's lone units, read by the core in one call (`UnitList.lone_queries`), once:
        the plain ones by default database, with those whose text Python must tell
        (`plain_statement`), and the others' texts by unit."""
        if self.read is None:
            return
        found, self.read = self.read(), None
        self._plain = [(group.db, group.units) for group in found.plain]
        queries, plain = self._queries, self._plain
        for q in found.others:
            k, db, sql = q.unit, q.db, q.sql
            queries[k] = (db, sql, q.gtid_size, q.size, q.class_id)
            if q.plain is None and plain_statement(sql):
                plain.append((db, k.to_bytes(4, "little")))

    def tally(self, left: list[int], tables: Tables, statements: Statements, other: Callable[[int], None]) -> None:
        """The bytes by table of each unit of `left` that is a GTID and one statement of a key that updates
        tables (`klass`), as `statement_tables._unit_tables` puts them, from the core's sizes and the key's
        group (not decoded), summed by key and added once a chunk (`flush`; its keys put in place at its
        first unit), in one loop for the buffer; `other` reads each other unit (`_unit_tables`), in order."""
        self.classify()  # (rules on databases alone did not classify the buffer's units)
        classes, queries, summed = self.classes, self._queries, self._sums
        for k in left:
            c, text = classes.get(k, LEFT), queries.get(k)  # (a class is only a lone unit's with a GTID)
            if text is None or (sums := summed.get(c)) is None:  # (a class met first this chunk, or no class's)
                infos = self.infos[c] if c >= 0 and text is not None else None
                group = None if infos is None else self._groups.get(c) or self._groups.setdefault(
                    c, statement_group(infos[0] or "", *infos[1:], "", STATEMENT_GROUPS_MAX))
                if group is None or text is None or not group[2]:  # (not a class's, or grouped by its text)
                    other(k)
                    continue
                sums = summed[c] = [0, 0, 0, len(group[2])]
                lone_tables(group, text[1], sums, tables, statements)  # (the dicts' order: as the units meet them)
            gtid = text[2]
            each, extra = divmod(gtid, sums[3])
            sums[0] += text[3] - gtid
            sums[1] += each
            sums[2] += extra

    def flush(self, tables: Tables, statements: Statements) -> None:
        """The bytes `tally` summed by key added to a chunk's; none summed after."""
        for c, sums in self._sums.items():
            lone_tables(self._groups[c], "", sums, tables, statements)
        self._sums.clear()

    def classify(self) -> None:
        """The class (`klass`) of each of the buffer's units of a GTID and one statement that the
        core read, in one loop, once a buffer, before the core reads them (`_core.mark_classes`):
        a text met before (`texts`: a DDL workload repeats its CREATE and DROP TABLE) is not
        parsed again."""
        if self._classified:
            return
        self._read()
        self._classified, texts, classes, replays, decides = True, self.texts, self.classes, self.replays, self.decides
        class_of, parsed, by_class = self.class_of, self._parsed, self._by_class
        for k, (db, sql, gtid, _, core) in self._queries.items():
            if gtid:
                if core >= 0:  # a class the core read: its answer made at its first unit
                    c, replay = (by_class[core] if core < len(by_class) else None) or self._core_class(db, core)
                else:  # the text's own
                    c, replay = texts.get((db, sql)) or parsed(db, sql)
                classes[k] = c
                if replay is not None:
                    replays[k] = (sql, db, replay)
                _U32(class_of, 4 * k, decides[c] if c >= 0 else CLASS_LEFT)

    def number(self, value: Hashable) -> int:
        """`value`'s number among the values numbered (two per key, and the verdicts of each set of
        tables: bandwidth's `_rule_group` starts again past `KEYS_MAX << 2`)."""
        return self.numbers.setdefault(value, len(self.numbers))

    def klass(self, k: int) -> int:
        """Unit k's class: STAYS (a control unit, or one the input ends inside), the key of a GTID
        and one statement that parses and is neither trigger DDL nor a multi-table UPDATE (what
        rpl_filter.cc reads of it, under rules that answer by parse: the default database, the kind,
        a database statement's name, whether table rules pass it by, the tables it updates; not
        the column or index names that set one ALTER apart from the next; after `classify`), else
        LEFT."""
        found = self.classes.get(k)
        if found is None:  # not a lone unit the core read (`classify`): each group decides it
            assert self.txn is not None  # (set by `buffer`)
            unit = self.txn(k)
            found = self.classes[k] = STAYS if unit.kind == CONTROL or not unit.complete else LEFT
            _U32(self.class_of, 4 * k, CLASS_LEFT if found == LEFT else CLASS_STAYS)
        return found

    def _core_class(self, db: str | None, core: int) -> tuple[int, Replay]:
        """The class and replay of the core's class number `core` (`core_classes`), met first in a
        unit of default database `db` (part of what it numbers), as `_parsed` makes them from a text."""
        read = self.core_classes.get(core)
        assert read is not None  # (numbered by the buffer's read)
        kind, tables = Kind(read.kind), tuple(zip(read.dbs, read.names))
        found = self._keyed((db, kind, tables, None, False, bool(tables)),
                            tables[0] if kind is Kind.ALTER_TABLE and tables else None)
        self._by_class += [None] * (core + 1 - len(self._by_class))
        self._by_class[core] = found
        return found

    def _parsed(self, db: str | None, sql: str) -> tuple[int, Replay]:
        """The class of statement `sql` under default database `db`, and its parse where the schema
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
        """Key `key`'s class (its number: LEFT past KEYS_MAX keys), and `replay` where it has one."""
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
