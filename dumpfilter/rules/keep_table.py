"""One decider's keep table (issue #57): its keep byte per table name and per statement key, each
asked of the decider once, the form every compiled walk takes its answers in (`filter`'s assembly,
the slave's relay run, `split`'s route per --map, `experiment`'s counters, `simulate`'s
reference, the master's statement units). No consumer keeps answers of its own beside it.

Tables: by the scanner's name id (`tables`), asked once per name until `forget_tables` (a
Format_description event, for a decider whose table answers may change with it).

Statement keys (issue #43): the core reads, in its one pass, what a single-table DML statement's
decision reads: its kind, the Query's default database and the one table it updates (its key,
`_core.StatementKey`; exactly what `rules.statements.statement_tables` answers for those shapes,
and nothing where it is not sure). Under a decider whose statement decisions are a function of that
key (`Decider.keys_statements`), each key is decided once by its bytes, from the first statement
met with it (`Decider.decide_statement_key`), whatever scanner or segment met it (their ids
differ), plain DML twins once for all (`_core.KeyIndex`'s `twins`: not INSERT ... SELECT, parsed apart); every statement it answers is accounted
(`Decider.account`), so the rule-hit counters come out as if each was decided alone. The keys reach
the table one way, the same for every walk: before it walks a buffer (a segment's UnitList, a
scanner's last scan), its statement units are read and their keys answered up front (`rows`, in
that buffer's own id space), each key's text decoded only when the table has not met its bytes
before; the walk then reports the statements it answered (`account`).

Why a rule engine's decision is the key's (`RuleEngine.keys_statements`), under both semantics:
* standard (rpl_filter.cc): db_ok on the (rewritten) default database, tables_ok on the one
  updated table, neither reading the verb; no trigger is looked at (MariaDB adds the tables
  fired triggers write for a multi-table UPDATE only, never keyed);
* effective (WL#2516, rules.effective): the effective object is the one table the statement
  changes (`effective_objects`: the key's table, qualified by the key's default database),
  matched against DO/IGNORE and the binlog side's, then REWRITE of the key's default database.
  Neither reads the trigger knowledge or the schema model (a DROP TRIGGER's and a multi-table
  UPDATE's decisions do: they are not keyed), so a trigger on the table, which writes other
  tables on the replica, changes nothing: WL#2516 filters on the tables the statement changes
  (docs/effective-semantics.md). On the master's schema timeline a key's decision is kept only
  when it was pure (`DecideKey`'s flag; master.decide.statement_keys). Not with derived tables
  (WL#40): their ignore set grows with the stream.

Under a restricting master-policy gate (a `Gated` decider) a key's answer is its rules' ANDed with
the gate's (`_gated_key`), as the master's streams send it."""

from __future__ import annotations

import struct
import threading
from collections.abc import Callable, Hashable, Sequence
from typing import NamedTuple, cast

from dumpfilter import _core
from dumpfilter.codec.event import decode_text
from dumpfilter.codec.scanner import KEEP_DROP, KEEP_KEEP, KEEP_ASK
from dumpfilter.rules.decider import Decider, Gated, gate_table
from dumpfilter.rules.decisions import Decision, lower_tables
from dumpfilter.rules.evaluate import parse_statement
from dumpfilter.rules.gate import Gate
from dumpfilter.rules.statement_info import DATABASE_KINDS, READS_STATE, Kind, Parses, TableRef
from dumpfilter.rules.statements import statement_tables


_SELECT_KINDS = (_core.KIND_INSERT_SELECT, _core.KIND_REPLACE_SELECT)  # a key's first byte


class KeyAnswer(NamedTuple):
    """A statement key's answer: its keep code (KEEP_KEEP, KEEP_DROP, KEEP_ASK), its rules'
    decision, and the rule hits each statement of it counts."""

    code: int
    decision: Decision
    counted: tuple[str, ...]
    # Its class among the table's answers that count alike (the same rule hits, engine counters
    # and assumption): a stream's statements answered by key are counted per class (KeyRows.hits).
    hits: int = 0


class KeyRows(NamedTuple):
    """A segment's answers by its key ids (`KeepTable.rows`): the keep byte per key id, each id's
    shape (`KeyShapes`) and the answers by shape (`answer`), and under a restricting gate a byte
    per key id, 1 where its KEEP_KEEP holds only for the statements whose text reaches the key's
    table alone (`UnitList.rows_many`' `gated`: the others go to Python, which reads their
    whole reach); else None."""

    keep: bytes
    ids: Sequence[int]
    by_shape: Sequence[KeyAnswer | None]
    gated: bytes | None
    hits: bytes = b""  # each key id's KeyAnswer.hits (a byte: HIT_CLASSES of them)

    def answer(self, k: int) -> KeyAnswer:
        """Key id k's answer."""
        return cast(KeyAnswer, self.by_shape[self.ids[k]])


# Hit classes a table numbers (KeyAnswer.hits: a byte each); the last holds every class past it,
# whose keys are then counted one by one.
HIT_CLASSES = 256

# A key's decision from its first statement (text, default database) and whether it is the key's
# alone (pure: the decider read no schema timeline for it).
DecideKey = Callable[[str, "str | None"], "tuple[Decision, bool]"]

_GATED = bytes(1 if b == KEEP_KEEP else 0 for b in range(256))  # keep byte -> `KeyRows.gated` byte
_UNDECIDED = 0xFF  # a keep table's code for a shape it has not decided (no KEEP_* code)


def _gated_key(key: bytes, sql: str, db: str | None, decision: Decision, gate: Gate) -> tuple[int, tuple[str, ...]]:
    """A key its rules keep (`decision`, from its first statement `sql`), under a restricted master
    policy gate: KEEP_DROP with the gate's refusal when the gate refuses its updated table (every
    statement of the key reaches it), KEEP_ASK for an INSERT ... SELECT key (its statements read
    other tables) or a text not of the key's shape after all, else KEEP_KEEP, which holds for the
    statements whose text reaches that table alone (`KeyRows.gated`); with the rule hits each
    statement of the key counts (the gate's refusal adds MASTER_POLICY)."""
    updated = statement_tables(sql, db).updated
    if len(updated) != 1:
        return KEEP_ASK, decision.counted
    refused = gate_table(decision, gate, *updated[0])
    if not refused.apply:
        return KEEP_DROP, refused.counted
    return (KEEP_ASK if key[:1] and key[0] in _SELECT_KINDS else KEEP_KEEP), decision.counted


class KeyShapes:
    """Statement keys numbered by their bytes, twins as one (a shape id each, from 0:
    `_core.KeyIndex`), for the keep tables that answer the same buffers (`experiment`'s rule
    groups, a shadow pass's candidates): a buffer's keys are looked up once for all of them (the
    last buffers' ids are kept), and each table reads its answers by shape id, not by the key's
    bytes. A master's streams share one (`DumpService.key_shapes`): each segment's keys are
    numbered once, not once per stream, and each key's first statement is parsed once for every
    slave (`parses`); the index numbers under a lock (an id is the count of shapes before it)."""

    KEPT = 16  # the key lists whose ids are kept: streams at different segments each find theirs
    TEXTS_KEPT = 4096  # decoded first statements kept (`texts`), at most: a memo, emptied when past it

    def __init__(self) -> None:
        self.index = _core.KeyIndex(twins=True)
        self.parses: Parses = {}
        self.texts: dict[int, tuple[str, str | None]] = {}  # a shape's first statement and its database, decoded
        self._tables: dict[tuple[str, str, bool], tuple[Kind, tuple[TableRef, ...]] | None] = {}  # `tables_of`
        self._numbered: dict[int, tuple[Sequence[_core.StatementKey], Numbered]] = {}  # by id(keys)
        self.names: dict[tuple[str, str], int] = {}  # table names numbered alike (`name_ids`)
        self._last_names: tuple[Sequence[tuple[str, str]], int, bytes] = ((), 0, b"")
        self._lock = threading.Lock()

    def __len__(self) -> int:
        """The shapes numbered so far."""
        return len(self.index)

    def number(self, keys: Sequence[_core.StatementKey]) -> Numbered:
        """The shape ids of `keys`, and what reads a table's bytes by shape id at them (the core's
        `gather`: one call per table)."""
        known = self._numbered.get(id(keys))
        if known is not None and known[0] is keys:
            return known[1]
        packed = self.index.number(keys).numbers
        found: Numbered = (memoryview(packed).cast("I"), lambda codes: _core.gather(bytes(codes), packed))
        with self._lock:
            numbered = self._numbered
            if len(numbered) >= self.KEPT:
                del numbered[next(iter(numbered))]  # the oldest list (each holds its keys alive)
            numbered[id(keys)] = (keys, found)
        return found

    def tables_of(self, sql: str, db: str, lower: bool) -> tuple[Kind, tuple[TableRef, ...]] | None:
        """`TablesOf`: `sql` parsed under `db` (a rule set's session database, rewritten), its names
        as the applier opens them (`lower`: `Names.lower_incoming`); None where a decision by table
        rules reads more than its tables' answers (no parse, no table, DDL, READS_STATE, exempt)."""
        key, tables = (sql, db, lower), self._tables
        if key in tables:
            return tables[key]
        info = parse_statement(sql, db, self.parses)
        found = None if (not info.parse_ok or not info.updated or info.kind in READS_STATE or info.kind in DATABASE_KINDS
                         or info.exempt_from_table_rules) else (info.kind, lower_tables(info).updated if lower else info.updated)
        tables[key] = found  # (one a shape, as `parses`; a dict's writes are atomic under the GIL: a memo)
        return found

    def name_ids(self, names: Sequence[tuple[str, str]]) -> bytes:
        """The ids of `names` (a buffer's, by its name ids) among the names numbered, packed as
        `_core.gather` reads them: looked up once for every table that answers the buffer (a
        scanner's list only grows: its new names then)."""
        last, done, packed = self._last_names
        if last is not names:
            done, packed = 0, b""
        if done < len(names):
            with self._lock:
                more = [self.names.setdefault(name, len(self.names)) for name in names[done:]]
            packed += struct.pack(f"<{len(more)}I", *more)
            self._last_names = (names, len(names), packed)
        return packed


Numbered = tuple[Sequence[int], Callable[[bytearray], bytes]]  # KeyShapes.number's


class KeepTable:
    """One decider's keep bytes, per table name and per statement key (see the module's text).
    `decide_key`: how a key is decided, where not by the rules' `decide_statement_key` alone (the
    master's, under its engine lock, telling whether the answer was pure). `keys_enabled`: whether
    statements may be answered by key at all (the rules' `keys_statements`, unless the caller says).
    `shapes`: the key numbering it shares with the tables that answer the same buffers (its own if none)."""

    __slots__ = ("decider", "_account", "_decide", "gate", "keys_enabled", "_hit_classes", "_by_name", "shapes",
                 "_codes", "_answers", "_hits", "_reads", "_by_reads", "keys_decided", "statements", "units")

    def __init__(self, decider: Decider, *, decide_key: DecideKey | None = None,
                 keys_enabled: bool | None = None, shapes: KeyShapes | None = None) -> None:
        self.decider = decider
        self.shapes = KeyShapes() if shapes is None else shapes
        parses = self.shapes.parses  # each key's first statement parsed once for the tables that share them
        rules = decider.rules if isinstance(decider, Gated) else decider
        gate = decider.gate if isinstance(decider, Gated) else None
        self.gate = gate if gate is not None and gate.bounds else None
        self._account = rules.account
        self._decide: DecideKey = decide_key or (lambda sql, db: (rules.decide_statement_key(sql, db, parses), True))
        self._reads = rules.key_reads
        self.keys_enabled = rules.keys_statements if keys_enabled is None else keys_enabled
        self._by_name = bytearray()  # by the shapes' name id: each table's keep byte, asked once (`tables`)
        # By shape id: each key decided once, its keep code (_UNDECIDED until then), answer, hit class.
        self._codes = bytearray()
        self._answers: list[KeyAnswer | None] = []
        self._hits = bytearray()
        self._hit_classes: dict[tuple[tuple[str, ...], tuple[str, ...], str | None], int] = {}  # KeyAnswer.hits
        # A key's answer (a gate aside) by what it reads (`Decider.key_reads`): the first key met
        # that reads it decided, the rest answered alike (`_decide_key`).
        self._by_reads: dict[Hashable, KeyAnswer] = {}
        self.keys_decided = 0   # keys decided (each once)
        self.statements = 0     # statements answered by key (`account`)
        self.units = 0          # statement units written from keys (`account`)

    # -- tables -------------------------------------------------------------------------------
    def tables(self, names: Sequence[tuple[str, str]]) -> bytes:
        """The keep bytes of `names` by name id (a scanner's list, which only grows; or another
        scanner's ids: a master's next segment, counted by `experiment`'s walk), read by the names'
        ids among those the shapes number (`KeyShapes.name_ids`): a table is asked once until
        `forget_tables`."""
        ids, by_name, numbered = self.shapes.name_ids(names), self._by_name, self.shapes.names
        keep = _core.gather(bytes(by_name), ids)  # (_UNDECIDED past its end)
        if _UNDECIDED in keep:
            by_name += bytes([_UNDECIDED]) * (len(numbered) - len(by_name))
            table_kept, k = self.decider.table_kept, -1
            while (k := keep.find(_UNDECIDED, k + 1)) >= 0:  # (the new names by a bytes search, as `rows`)
                at = numbered[names[k]]
                if by_name[at] == _UNDECIDED:
                    by_name[at] = KEEP_KEEP if table_kept(*names[k]) else KEEP_DROP
            keep = _core.gather(bytes(by_name), ids)
        return keep

    def forget_tables(self) -> None:
        """A Format_description event: every table asked again."""
        self._by_name.clear()

    # -- statement keys -----------------------------------------------------------------------
    def _decide_key(self, shape: int, key: _core.StatementKey) -> None:
        """Shape `shape`'s answer, decided from `key`, its first statement met. A key that reads
        what one decided before reads (`Decider.key_reads`: under rules on databases alone its
        default database, rpl_filter.cc's db_ok, never a table; with table rules that and its
        table's answer) has that one's decision (its `reason` and `tables` are that key's: a
        key's answer counts, it lists nothing); a restricting gate still reads each key's table."""
        texts = self.shapes.texts
        text = texts.get(shape)
        if text is None:  # (decoded once for every table that shares the shapes)
            if len(texts) >= KeyShapes.TEXTS_KEPT:
                texts.clear()
            text = texts[shape] = (decode_text(key.sql), decode_text(key.db) or None)
        sql, db = text
        reads = self._reads(sql, db, self.shapes.tables_of)
        answer = None if reads is None else self._by_reads.get(reads)
        if answer is None:
            decision, pure = self._decide(sql, db)  # (not pure: its units decided in Python, at their position)
            code = (KEEP_KEEP if decision.apply else KEEP_DROP) if pure else KEEP_ASK
            answer = self._answer(decision, code, decision.counted)
            if reads is not None:
                self._by_reads[reads] = answer
        if self.gate is not None and answer.code == KEEP_KEEP:
            answer = self._answer(answer.decision, *_gated_key(key.key, sql, db, answer.decision, self.gate))
        self._store(shape, answer)

    def _store(self, shape: int, answer: KeyAnswer) -> None:
        """Shape `shape`'s answer kept: its code, hit class and decision."""
        self._answers[shape] = answer
        self._codes[shape], self._hits[shape] = answer.code, answer.hits
        self.keys_decided += 1

    def _answer(self, decision: Decision, code: int, counted: tuple[str, ...]) -> KeyAnswer:
        """A key's answer in its hit class (`KeyAnswer.hits`), numbered in the order met."""
        alike = self._hit_classes
        klass = alike.setdefault((counted, decision.counted, decision.assumption), min(len(alike), HIT_CLASSES - 1))
        return KeyAnswer(code, decision, counted, klass)

    def rows(self, keys: Sequence[_core.StatementKey], hits: bool = True) -> KeyRows:
        """A buffer's keys answered (`KeyRows`): its own id space, each id in turn from 0, as
        `UnitList.statement_units` and `Scanner.statement_units` give them (`hits`: with each id's
        hit class, which only a stream's rule hits read)."""
        # (a count's rule groups each ask for each of its segments' ~320 keys, whose shape ids
        # their KeyShapes looked up once: a shape's code is read by its id; one met for the first
        # time is decided, once)
        shapes, codes = self.shapes, self._codes
        ids, gather = shapes.number(keys)
        if len(codes) < (numbered := len(shapes.index)):
            more = numbered - len(codes)
            codes += bytes([_UNDECIDED]) * more
            self._hits += bytes(more)
            self._answers += [None] * more
        keep = gather(codes)
        if _UNDECIDED in keep:
            self._decide_keys(keep, ids, keys)
            keep = gather(codes)
        return KeyRows(keep, ids, self._answers, None if self.gate is None else keep.translate(_GATED),
                       gather(self._hits) if hits else b"")

    def _decide_keys(self, keep: bytes, ids: Sequence[int], keys: Sequence[_core.StatementKey]) -> None:
        """The shapes of a buffer's keys not decided yet (`keep`: the keys' codes, _UNDECIDED
        where not), each decided once: one that reads what one decided before reads, its text
        decoded and no gate to ask, takes that one's answer at once (48 rule groups x each new
        shape of a DDL-heavy binlog), the others through `_decide_key`."""
        codes, texts, k = self._codes, self.shapes.texts, -1
        by_reads, reads_of, tables_of = self._by_reads, self._reads, self.shapes.tables_of
        while (k := keep.find(_UNDECIDED, k + 1)) >= 0:  # (new shapes found by a bytes search, not a loop)
            shape = ids[k]
            if codes[shape] != _UNDECIDED:  # (a shape met twice in the buffer: decided at its first)
                continue
            text = texts.get(shape)
            reads = None if text is None or self.gate is not None else reads_of(text[0], text[1], tables_of)
            answer = None if reads is None else by_reads.get(reads)
            if answer is None:
                self._decide_key(shape, keys[k])
            else:
                self._store(shape, answer)

    def account(self, rows: KeyRows, used: _core.KeysUsed) -> None:
        """Account the statements a walk answered by `rows`' key ids (`used`: the walk's
        `by_keys`), as each decision would have counted them."""
        account, answer = self._account, rows.answer
        for use in used.uses:
            account(answer(use.id).decision, use.statements)
        self.units += used.units
        self.statements += used.statements
