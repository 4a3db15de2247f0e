"""The master-wide flag words (WL#2387's FILTER_BINLOG_SEND_F: one bit per slave, computed once for all
slaves), per table and per statement, and each slave's decider, which answers TransactionFilter from them."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Sequence

from dumpfilter import _core
from dumpfilter.codec import Event, EventType
from dumpfilter.rules.decider import Decider, gate_statement, gate_table
from dumpfilter.rules.decisions import Decision
from dumpfilter.rules.evaluate import RuleEngine, parse_statement
from dumpfilter.rules.gate import MASTER_POLICY, MASTER_POLICY_ANNOTATION, Gate
from dumpfilter.rules.statement_info import Kind, Parses, StatementInfo
from dumpfilter.rules.statements import plain_statement
from dumpfilter.rules.transaction_filter import framing_statement

ASSUMED_DECISIONS = "ASSUMED_DECISIONS"  # a pseudo rule hit: decisions with Decision.assumption set
# A pseudo rule hit: statement decisions that read the schema model or the trigger knowledge
# (`RuleEngine.consulted`). The kept ones reach the slave as DumpBatch.schema_decided.
SCHEMA_DECISIONS = "SCHEMA_DECISIONS"
# The master policy's pseudo rule hits (MASTER_POLICY, MASTER_POLICY_UNANALYSED,
# MASTER_POLICY_ANNOTATION) are rules.gate's.
_PLAIN = object()  # StatementWords' key kind for a `plain_statement` (rules without table rules)
_TEXT = object()   # a rule group's key kind for a statement remembered by its text (see `_group_key`)

Hits = Counter[str]  # rule hits by rule name
# A statement flag word (bit i: slave i keeps it) and the rule hits by bit (shared: read only).
WordAnswer = tuple[int, dict[int, Hits]]
OrderKey = tuple[int, str, int]  # a unit's position key (master.read.schema_feed.order_key)
Members = list[tuple[int, RuleEngine, Gate]]  # (bit, rule engine, policy gate) of each slave


class FlagWords:
    """One word per (db, table): bit i set when slave i keeps the table (its rules AND its policy).
    The words live in the compiled core (`_core.FlagWords`), which answers a stream's per-segment
    keep bytes and per-table bit tests; a miss calls `_compute` (the rule engines, in Python) once
    per table, slaves with equal rules evaluating once. Thrown away whenever a slave's rules change
    or slaves come and go (a word computed across that is not kept)."""

    def __init__(self, members: Callable[[], Members]) -> None:
        self._members = members
        self._core = _core.FlagWords(self._compute)

    def kept(self, db: str, table: str, bit: int) -> bool:
        return self._core.kept(db, table, bit)

    def keep(self, names: list[tuple[str, str]], bit: int) -> bytes:
        """A byte per (db, table) of `names`, 1 where slave `bit` keeps it."""
        return self._core.keep(names, bit)

    def keeps(self, names: list[tuple[str, str]]) -> list[bytes]:
        """`keep` for every registered slave (a segment's rows made for all of them at once)."""
        return [self._core.keep(names, bit) for bit, _, _ in self._members()]

    @property
    def generation(self) -> int:
        return self._core.generation  # bumped at every invalidation: per-segment answers are remade

    @property
    def computed(self) -> int:
        return self._core.computed

    def _compute(self, db: str, table: str) -> bytes:
        word = 0
        answers: dict[tuple[int, Gate], bool] = {}
        for bit, engine, gate in self._members():
            key = (id(engine), gate)
            kept = answers.get(key)
            if kept is None:
                kept = answers[key] = gate_table(engine.decide_table(db, table), gate, db, table).apply
            if kept:
                word |= 1 << bit
        return word.to_bytes((word.bit_length() + 7) // 8, "little")

    def invalidate(self) -> None:
        self._core.invalidate()


class SlaveDecider(Decider):
    """What TransactionFilter asks, for one slave: tables by its bit in the shared flag words,
    statements by its rule engine, both ANDed with the master policy (rules.decider's gate_*);
    rule hits collected."""

    def __init__(self, words: FlagWords, bit: int, engine: RuleEngine, gate: Gate) -> None:
        self.words, self.bit, self.engine, self.gate = words, bit, engine, gate
        self.checks_annotations = gate.bounds
        self.hits: Hits = Counter()
        self.at: OrderKey | None = None  # the position key of the unit being decided (set by the stream)
        self.parses: Parses | None = None  # that unit's parse memo, shared by every rule group (set by the stream)
        # (sql, default db) of the statements of that unit kept by a decision that read the schema
        # model (reset by the stream with `hits`): the stream marks their events for the slave.
        self.schema_kept: set[tuple[str, str | None]] = set()

    def table_kept(self, db: str, table: str) -> bool:
        kept = self.words.kept(db, table, self.bit)
        counted = self.engine.decide_table(db, table).counted
        if counted:
            self.hits.update(counted)
        if not kept and self.gate.bounds and not self.gate.table_allowed(db, table):
            self.hits[MASTER_POLICY] += 1
        return kept

    def decide_table(self, db: str, table: str) -> Decision:
        """The flag word's answer with its reason (explain, tests): the same composition `FlagWords`
        computes the bit from."""
        return gate_table(self.engine.decide_table(db, table), self.gate, db, table)

    def invalidate(self) -> None:
        self.engine.invalidate()

    def annotation_kept(self, sql: str, tables: Sequence[tuple[str, str]]) -> bool:
        """An Annotate_rows / Rows_query text goes with its rows only if the policy allows every
        table it names (TransactionFilter asks once its statement's Table_maps are read)."""
        if not self.gate.bounds or self.gate.annotation_allowed(sql, tables):
            return True
        self.hits[MASTER_POLICY_ANNOTATION] += 1
        return False

    def decide_statement(self, sql: str, current_db: str | None) -> Decision:
        decision, counted = statement_decision(self.engine, self.gate, sql, current_db, self.at, self.parses)
        hits = self.hits
        for name in counted:  # (a loop: Counter.update's Mapping check costs more here)
            hits[name] += 1
        if decision.apply and SCHEMA_DECISIONS in counted:
            self.schema_kept.add((sql, current_db))
        return decision


def statement_decision(engine: RuleEngine, gate: Gate, sql: str, current_db: str | None, at: OrderKey | None,
                       parses: Parses | None) -> tuple[Decision, tuple[str, ...]]:
    """A slave's decision of a statement: its rule engine's, ANDed with the master policy; with the
    rule hits the slave counts for it (the engine's, ASSUMED_DECISIONS, SCHEMA_DECISIONS, MASTER_POLICY)."""
    engine.consulted = False
    decision = engine.decide_statement(sql, current_db, at=at, parses=parses)
    counted = decision.counted
    if decision.assumption is not None:
        counted += (ASSUMED_DECISIONS,)
    if engine.consulted:
        counted += (SCHEMA_DECISIONS,)
    gated = gate_statement(decision, gate, sql, current_db)
    if gated is not decision:  # refused by the policy: its hits follow the engine's
        counted += gated.counted[len(decision.counted):]
    return gated, counted


def schema_marks(file: str, events: list[Event], schema_kept: frozenset[tuple[str, str | None]]
                 ) -> list[tuple[str, int]]:
    """(file, end position: the header's log_pos, as the slave reads it) of the Query events among
    `events` kept by a decision that read the schema model (`schema_kept`: their (sql, default db),
    SlaveDecider.schema_kept). A statement inside a Transaction_payload (MySQL compression: inner
    events carry no position) marks the payload."""
    if not schema_kept:
        return []
    return [(file, e.log_pos) for e in events
            if any(i.is_query and (i.sql, i.db) in schema_kept
                   for i in (e.payload_events() if e.type_code == EventType.TRANSACTION_PAYLOAD else (e,)))]


class StatementWords:
    """The flag words of statements (WL#2387's FILTER_BINLOG_SEND_F for a GTID and one statement:
    DDL, MariaDB's standalone groups): one word with bit i set when slave i keeps the statement,
    with the rule hits each slave counts for it, computed once for every slave and remembered by
    the statement's key while nothing else can change the answer:

    - (kind, named database, default database) when every slave's rules decide it by databases
      alone (`RuleEngine.databases_only`, not a multi-table UPDATE, no master policy restriction):
      the usual schema-per-replica fan-out, where thousands of DDL statements share a few keys. A
      `plain_statement` (not a database or transaction statement, not a multi-table UPDATE) is
      then keyed by its default database alone, without being parsed;
    - else (statement text, default database), when no decision read the schema model or the
      trigger knowledge (`RuleEngine.consulted`: its answer may differ at another position),
      none carries an assumption and the statement parsed.

    Other statements are not remembered (`answer` decides them each time, rule group by rule
    group, as `StatementAnswers.lone_answer` did). Thrown away with the table flag words (a slave's
    rules change, slaves come and go): an answer computed across that is not kept.

    But each rule group's own decision of a key is remembered across that (`_by_group`): a word
    is one bit per slave, and a slave that registers (or changes its rules) brings one new rule
    group whose decisions are the only ones missing. Remaking the words then asks the rule
    engines once per key for the new group alone, not once per group: with N slaves arriving one
    by one, O(N) decisions per key instead of O(N^2) (issue #30: each of eight do-db slaves
    decided the binlog's DDL again for every slave before it). A group's decision is a function
    of its (engine, gate) and key alone: an engine holds one rule set for good (new rules are a
    new engine), and a key is remembered only where the decision is the same for every statement
    it stands for (see `_group_key`)."""

    MAX = 65536  # remembered keys; cleared when full

    def __init__(self, members: Callable[[], Members], words: FlagWords,
                 lock_of: Callable[[RuleEngine], threading.Lock]) -> None:
        self._members = members
        self._words = words
        self._lock_of = lock_of
        self._lock = threading.Lock()
        self._answers: dict[tuple[object, ...], WordAnswer] = {}
        self._generation = words.generation
        self._group: tuple[Members, bool] | None = None  # (members, every one decides by databases alone)
        # (engine, gate) -> {group key: (kept, rule hits)}: each rule group's decisions, kept across
        # generations while the group has a member (see the class's doc)
        self._by_group: dict[tuple[RuleEngine, Gate], dict[tuple[object, ...], tuple[bool, Hits]]] = {}
        self.computed = 0  # keys decided (misses), for tests
        self.decided = 0   # rule-group decisions made (not found in `_by_group`), for tests

    def known(self, sql: str, current_db: str | None) -> WordAnswer | None:
        """The remembered answer of a plain statement (`plain_statement`, keyed without a parse)
        when every slave's rules are database rules; None otherwise (ask `answer`)."""
        return self.known_plain(current_db) if plain_statement(sql) else None

    def known_plain(self, current_db: str | None) -> WordAnswer | None:
        """`known` for a statement already found plain (by the core, `_core.plain_statement`)."""
        group = self._group
        if group is None or self._generation != self._words.generation or not group[1]:
            return None
        return self._answers.get((_PLAIN, current_db))

    def answer(self, sql: str, current_db: str | None, at: OrderKey | None, parses: Parses) -> WordAnswer:
        """(word, rule hits by bit, shared: read only) for a GTID-and-one-statement unit at position
        `at` (its parse memo `parses`, shared by every rule group)."""
        generation = self._words.generation
        with self._lock:
            if generation != self._generation:
                self._answers.clear()
                self._generation = generation
                self._group = None
            group = self._group
            if group is None:
                members = self._members()
                databases_only = all(engine.databases_only and not gate.bounds for _, engine, gate in members)
                group = self._group = (members, databases_only)
                live = {(engine, gate) for _, engine, gate in members}
                for gone in [g for g in self._by_group if g not in live]:  # groups with no member left
                    del self._by_group[gone]
        members, databases_only = group
        if framing_statement(sql):  # kept by every slave, no rule asked (TransactionFilter.lone_text_kept)
            return sum(1 << bit for bit, _, _ in members), {}
        plain = plain_statement(sql)
        info: StatementInfo | None = None
        key: tuple[object, ...]
        if databases_only and plain:
            key, by_database, parse_ok = (_PLAIN, current_db), True, True  # no parse needed to tell the key
        else:
            info = parse_statement(sql, current_db or "", parses)
            by_database = databases_only and info.kind is not Kind.UPDATE_MULTI
            key = (info.kind, info.db_statement_name, current_db) if by_database else (sql, current_db)
            parse_ok = info.parse_ok
        known = self._answers.get(key)
        if known is not None:
            return known
        word, pure = 0, parse_ok
        hits: dict[int, Hits] = {}
        decided: dict[tuple[RuleEngine, Gate], tuple[bool, Hits]] = {}
        for bit, engine, gate in members:
            rule_group = (engine, gate)
            answer = decided.get(rule_group)
            if answer is None:
                memo = self._by_group.get(rule_group)
                if memo is None:
                    memo = self._by_group.setdefault(rule_group, {})
                if info is None and not (engine.databases_only and not gate.bounds and plain):
                    info = parse_statement(sql, current_db or "", parses)
                group_key = _group_key(engine, gate, sql, current_db, plain, info)
                answer = memo.get(group_key)
                if answer is None:
                    with self._lock_of(engine):
                        engine.consulted = False
                        decision, counted = statement_decision(engine, gate, sql, current_db, at, parses)
                        group_pure = parse_ok and not engine.consulted and decision.assumption is None
                    self.decided += 1
                    answer = (decision.apply, Counter(counted))
                    if group_pure:
                        if len(memo) >= self.MAX:
                            memo.clear()
                        memo[group_key] = answer
                    pure = pure and group_pure
                decided[rule_group] = answer
            if answer[0]:
                word |= 1 << bit
            if answer[1]:
                hits[bit] = answer[1]
        self.computed += 1
        known = (word, hits)
        if pure or by_database:
            with self._lock:
                if self._generation == generation == self._words.generation:
                    if len(self._answers) >= self.MAX:
                        self._answers.clear()
                    self._answers[key] = known
        return known


def _group_key(engine: RuleEngine, gate: Gate, sql: str, current_db: str | None, plain: bool,
               info: StatementInfo | None) -> tuple[object, ...]:
    """What one rule group's decision of a statement is remembered by (StatementWords._by_group):
    for a group whose rules decide by databases alone (and no policy restriction), a plain
    statement by its default database and any other one but a multi-table UPDATE by (kind, the
    database it names, the default database), as StatementWords keys them when every group does;
    for any other group the text itself. Either is kept only when the decision was pure (read no
    schema model, made no assumption, parsed): one that was not may differ at another position."""
    if engine.databases_only and not gate.bounds:
        if plain:
            return (_PLAIN, current_db)
        assert info is not None, "StatementWords.answer parses a statement that is not plain first"
        if info.kind is not Kind.UPDATE_MULTI:
            return (info.kind, info.db_statement_name, current_db)
    return (_TEXT, sql, current_db)
