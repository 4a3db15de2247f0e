"""A stream's answers for the units that are not fast (statements, DDL) in a segment's row
(StatementAnswers, held by master.stream.slave_stream.SlaveStream): a GTID-and-one-statement unit
answered from the statement flag words shared by every slave, any other decided once for the
slave's rule group (`result`, which the stream's unit-by-unit path asks too)."""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

from dumpfilter._core import SKIP_STOP, mark_slow
from dumpfilter.codec.scanner import ROW_KEEP, ROW_SKIP, ROW_SLOW
from dumpfilter.codec.transactions import CONTROL
from dumpfilter.errors import MalformedEventError
from dumpfilter.rules.statements import plain_statement
from dumpfilter.rules.transaction_filter import EMPTIED, KEPT, SKIPPED, FilterResult
from dumpfilter.master.decide.flags import SCHEMA_DECISIONS, Hits, WordAnswer
from dumpfilter.master.decide.rule_hits import RuleHits
from dumpfilter.master.decide.statement_keys import StatementPathCounts
from dumpfilter.master.read.schema_feed import order_key, unit_start
from dumpfilter.master.read.columns import LoneAnswers
from dumpfilter.master.read.units import Segment, Unit

if TYPE_CHECKING:
    from dumpfilter.master.registry import RegisteredSlave
    from dumpfilter.master.service import DumpService
    from dumpfilter.skip_policy import SkipPolicy

# A rule group's answer for a unit: its FilterResult, rule hits, (sql, db) kept by the schema model.
GroupAnswer = tuple[FilterResult, Hits, frozenset[tuple[str, str | None]]]

_LONE = "lone"  # Unit.results key of a GTID-and-one-statement unit's statement flag word


class StatementAnswers:
    """One stream's answers for its slave's units that are not fast: from the dump service (`svc`:
    its flag words, statement words and engine locks), for the registered `slave` under its skip
    `policy`, with the rule hits of a row's answers recorded in `hits` (RuleHits)."""

    __slots__ = ("svc", "slave", "policy", "hits", "counts")

    def __init__(self, svc: DumpService, slave: RegisteredSlave, policy: SkipPolicy, hits: RuleHits,
                 counts: StatementPathCounts) -> None:
        self.svc, self.slave, self.policy, self.hits = svc, slave, policy, hits
        self.counts = counts  # StatementPathCounts: `python_units` counts the units `result` decides

    def row(self, seg: Segment, row: bytes) -> bytes:
        """Units that are not fast (statements, DDL) joined to the runs: a unit kept as it came
        marked ROW_KEEP and a skipped one ROW_SKIP (sent as a heartbeat in a skipped stretch under the
        heartbeat policy; under the others the run stops there and `_unit` writes what the policy
        sends). Only units kept in part stay ROW_SLOW. Their rule hits are recorded in `hits` and
        counted as the stream passes them (its `_fast_runs`).

        A GTID and one statement (under the heartbeat policy, where a skip needs no FilterResult)
        is answered from the statement flag words (`StatementWords`, one word for every slave);
        any other unit is decided once for the slave's rule group (`result`)."""
        unit_hits, group_hits = self.hits.for_segment()
        if ROW_SLOW not in row:
            return row
        out = bytearray(row)
        units = seg.units
        bit = self.slave.bit
        # Where the core's walk makes what the policy sends of a skipped unit (a heartbeat, its
        # placeholders, its empty transaction: every policy's `walk_skip`). A unit it cannot make
        # that of (a MySQL unit under the placeholder or empty-transaction policy) goes on to
        # `_unit`, which decides it again for its FilterResult.
        heartbeat = self.policy.walk_skip != SKIP_STOP
        if heartbeat:  # the units read in bulk first, in tight loops (thousands per segment)
            groups, singles = self.lone_answers(seg)
            for ks, raw, (word, by_bit) in groups:
                code = ROW_KEEP if word >> bit & 1 else ROW_SKIP
                rest = mark_slow(out, raw, code)  # (None: all of them, a lone unit being never fast)
                marked = ks if rest is None else memoryview(rest).cast("I")
                hits = by_bit.get(bit)
                if hits and marked:
                    group_hits.append((marked, hits))
            for k, (word, by_bit) in singles.items():
                if out[k] == ROW_SLOW:
                    hits = by_bit.get(bit)
                    if word >> bit & 1 and hits and SCHEMA_DECISIONS in hits:
                        continue  # kept by the schema model: `_unit` marks it for the slave
                    out[k] = ROW_KEEP if word >> bit & 1 else ROW_SKIP
                    if hits:
                        unit_hits[k] = hits
        k = out.find(ROW_SLOW)
        while k >= 0:
            answer, unit = None, None
            if heartbeat:  # not read in bulk (a part whose format changes)
                unit = units[k]
                text = unit.lone_text()
                answer = self.lone_answer(unit, text) if text is not None else None
            hits = None
            if answer is not None:
                word, by_bit = answer
                hits = by_bit.get(bit)
                if not (word >> bit & 1 and hits and SCHEMA_DECISIONS in hits):  # else `_unit` marks it
                    out[k] = ROW_KEEP if word >> bit & 1 else ROW_SKIP
            elif (unit := unit or units[k]).txn.kind != CONTROL and unit.txn.complete:
                result, hits, schema_kept = self.result(unit)
                if result.outcome == KEPT and len(result.events) == unit.events and not schema_kept:
                    out[k] = ROW_KEEP
                elif result.outcome in (EMPTIED, SKIPPED):
                    out[k] = ROW_SKIP
            if out[k] != ROW_SLOW and hits:
                unit_hits[k] = hits
            k = out.find(ROW_SLOW, k + 1)
        return bytes(out)

    def lone_answers(self, seg: Segment) -> LoneAnswers:
        """The statement flag answers (`lone_answer`) of all the segment's GTID-and-one-statement
        units: their texts read by the core in one call (`UnitIndex.lone_queries`), no Unit made
        but on a miss, computed once per flag-word generation for every stream. Returned as
        (groups, singles): groups [(unit indices, answer)] of plain statements answered by their
        default database alone, singles {unit index: answer}."""
        index = seg.index
        if index is None:  # the reference reader's segments: unit by unit
            return [], {}
        lone_queries = index.lone_queries
        generation = self.svc.words.generation
        done = index.lone_answers
        if done is not None and done[0] == generation:
            return done[1]
        with index.lock:
            done = index.lone_answers
            if done is not None and done[0] == generation:
                return done[1]
            statement_words = self.svc.statement_words
            known_plain = statement_words.known_plain
            units = seg.units

            def answer(k: int, db: str, sql: str | None) -> WordAnswer:
                unit = units[k]
                if sql is None:  # a plain statement's text, read only on a miss
                    text = unit.lone_text()
                    assert text is not None, "the core found this unit a GTID and one statement"
                    sql = text[1]
                return statement_words.answer(sql, db, order_key(unit_start(unit)), unit.parses)

            found = lone_queries()
            groups: list[tuple[memoryview[int], bytes, WordAnswer]] = []
            singles: dict[int, WordAnswer] = {}
            for group in found.plain:
                db = group.db
                ks = memoryview(group.units).cast("I")
                for i, k in enumerate(ks):
                    words = known_plain(db)  # known once the first is answered, under database rules
                    if words is not None:
                        groups.append((ks[i:], group.units[4 * i:], words))
                        break
                    singles[k] = answer(k, db, None)
            for query in found.others:
                k, db, plain_sql, sql = query.unit, query.db, query.plain, query.sql
                if plain_sql is None:  # the core left it to Python (non-ASCII text, a leading comment)
                    plain_sql = plain_statement(sql)
                words = known_plain(db) if plain_sql else None
                singles[k] = words if words is not None else answer(k, db, sql)
            index.lone_answers = (generation, (groups, singles))
        return groups, singles

    def lone_answer(self, unit: Unit, text: tuple[str, str]) -> WordAnswer:
        """The statement flag word of a GTID-and-one-statement unit (bit i: slave i keeps it whole,
        else it is emptied) and the rule hits by bit: asked once per unit, whatever the number of
        slaves, and shared through the segment cache."""
        answer: tuple[int, WordAnswer] | None = unit.results.get(_LONE)
        if answer is None or answer[0] != self.svc.words.generation:
            generation = self.svc.words.generation
            db, sql = text
            statement_words = self.svc.statement_words
            words = statement_words.known(sql, db)
            if words is None:
                words = statement_words.answer(sql, db, order_key(unit_start(unit)), unit.parses)
            answer = unit.results[_LONE] = (generation, words)
        return answer[1]

    def result(self, unit: Unit) -> GroupAnswer:
        """The slave's rule group's answer for a unit (FilterResult, rule hits, (sql, db) kept by the
        schema model): computed by the first slave of the group that reaches it, then shared (the
        Unit and its Events are shared through the segment cache)."""
        state = self.slave.state
        assert state is not None, "a stream's slave has its state"
        self.counts.python_units += 1
        answer: GroupAnswer | None = unit.results.get(state.key)
        if answer is None:
            with self.svc.engine_lock(state.engine):
                answer = unit.results.get(state.key)
                if answer is None:
                    decider = state.decider
                    decider.hits, decider.schema_kept = Counter(), set()
                    decider.at = order_key(unit_start(unit))  # the schema as it was just before
                    decider.parses = unit.parses  # each statement parsed once for every group
                    try:
                        filtered = state.txn_filter.filter(unit.txn)
                    except MalformedEventError as exc:  # a rows event without its own Table_map
                        raise exc.in_file(unit.file) from None
                    answer = unit.results[state.key] = (filtered, decider.hits, frozenset(decider.schema_kept))
        return answer
