"""One stream's keep byte per statement key of a segment (issue #43, StreamStatementKeys, held by
master.stream.slave_stream.SlaveStream): the statement units of a MIXED/STATEMENT binlog, read
once for every stream by the core (`UnitIndex.statement_units`: each single-table DML Query's
key, kind, default database and table), are answered from one decision per key per slave through
the rules' one seam (`Decider.decide_statement_key`, the form `filter`'s StatementKeys asks) ANDed
with the slave's master-policy gate (`rules.decider.gate_table` on the key's table, for the
statements the core shows reach that table alone), then sent by the core (`UnitList.send`) with
no Python per unit; the rule hits of the statements sent come back as a tally per key id
(`account`). It is the keep table the stream's walk driver answers with (rules.walk_driver)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from itertools import compress
from dataclasses import dataclass
from typing import TYPE_CHECKING

from dumpfilter import _core
from dumpfilter.rules.decider import gated
from dumpfilter.rules.decisions import Decision
from dumpfilter.rules.evaluate import RuleEngine
from dumpfilter.rules.gate import Gate
from dumpfilter.rules.keep_table import HIT_CLASSES, DecideKey, KeepTable, KeyRows

if TYPE_CHECKING:
    from dumpfilter.master.decide.rule_hits import RuleHits
    from dumpfilter.master.registry import RegisteredSlave
    from dumpfilter.master.service import DumpService

# The first statements' parses kept for the streams (DumpService.key_shapes.parses), at most:
# a memo, emptied when past it.
PARSES_KEPT = 4096
# Per hit class, the table that makes a key id's class byte 1 where it is that class, else 0.
_MASKS = [bytes(int(b == k) for b in range(256)) for k in range(256)]


@dataclass
class StatementPathCounts:
    """What one stream did with its statement units (tests, `bench`): units answered from keys
    (per segment read), units decided in Python (TransactionFilter, through StatementAnswers),
    keys decided in Python (each once per slave), units whose annotations the policy check read
    in Python."""

    key_units: int = 0
    python_units: int = 0
    keys_decided: int = 0
    # Under a policy gate: fast units whose Annotate_rows / Rows_query texts Python read (the core
    # could not show they name only kept tables: master.decide.policy_check.guard_row).
    policy_text_units: int = 0


class StreamStatementKeys:
    """One stream's answers per statement key (rules.walk_driver.Answers): `space` names what a
    segment's keys are answered in while the slave's rules and gate stay the same, `rows` gives
    their keep bytes (1 kept, 0 dropped, by the segment's key id), each key decided once for the
    slave (by its bytes, across segments), and `account` counts what a send answered by them.

    Under a restricted policy gate (WL#2387's master-controlled filter) a key's answer is its
    rules' AND the gate's: a key whose updated table the gate refuses is dropped for every
    statement of it (each one's reach holds that table); one it allows is kept for the
    statements whose text reaches that table alone (the core tells them:
    `UnitList.rows_many`' `gated`, a 1 per such key), the others going to Python, which
    reads their whole reach; an INSERT ... SELECT key, whose statements read other tables, is
    Python's (KEEP_ASK)."""

    __slots__ = ("svc", "slave", "counts", "hits", "_group", "_answers", "_pending")

    def __init__(self, svc: DumpService, slave: RegisteredSlave, counts: StatementPathCounts, hits: RuleHits) -> None:
        self.svc, self.slave, self.counts, self.hits = svc, slave, counts, hits
        self._group: tuple[RuleEngine, Gate] | None = None  # (engine, gate) `_answers` are of
        self._answers: KeepTable | None = None
        self._pending: tuple[KeyRows, bytearray] | None = None  # what `account` left to `settle`

    def space(self) -> object | None:
        """What a segment's keys are answered in (the same object while the slave's rules and its
        gate stay; the driver begins again with each segment, so the segment is not part of it and
        no segment is held here), or None where its units go on to Python: the slave's rules are
        not a function of the key (`Decider.keys_statements`: a schema timeline, derived tables)."""
        state, gate = self.slave.state, self.slave.gate
        assert state is not None, "a stream's slave has its state"
        engine = state.engine
        # The master's engines share the series' schema timeline: a key's decision is kept for
        # every statement of the key only when it was pure (see `RuleEngine.keys_statements_if_pure`).
        if not (engine.keys_statements or engine.keys_statements_if_pure):
            return None
        group = self._group
        if self._answers is None or group is None or group[0] is not engine or group[1] is not gate:
            self._answers = KeepTable(gated(engine, gate), decide_key=self._decider(engine), keys_enabled=True,
                                      shapes=self.svc.key_shapes)
            group = self._group = (engine, gate)
        return group

    def rows(self, keys: Sequence[_core.StatementKey]) -> KeyRows:
        """The keys of a segment (`UnitIndex.statement_units`) answered for the slave, in the
        space `space` named last."""
        answers = self._answers
        assert answers is not None, "`space` comes first"
        before = answers.keys_decided
        rows = answers.rows(keys)
        self.counts.keys_decided += answers.keys_decided - before
        return rows

    def _decider(self, engine: RuleEngine) -> DecideKey:
        """A key's decision by `engine` (under the service's lock: the master's engines share
        the series' schema timeline) and whether it was pure: the engine consulted no schema for
        it and assumed nothing. An impure key (KEEP_ASK) leaves its units to Python, decided
        at their position."""
        parses = self.svc.key_shapes.parses  # a key's first statement parsed once for every slave

        def decide(sql: str, db: str | None) -> tuple[Decision, bool]:
            if len(parses) > PARSES_KEPT:  # (a stream started later meets other first statements)
                parses.clear()
            with self.svc.engine_lock(engine):
                engine.consulted = False
                decision = engine.decide_statement_key(sql, db, parses)
                return decision, not engine.consulted and decision.assumption is None
        return decide

    def account(self, rows: KeyRows, tally: bytearray) -> None:
        """The statements a send answered by key (`tally`: a u32 per key id of `rows`, which the
        stream's sends of one segment add to in place): counted when the stream is done with the
        segment's keys or folds its rule hits (`settle`), once, not after each send."""
        pending = self._pending
        if pending is not None and (pending[0] is not rows or pending[1] is not tally):
            self.settle()
        self._pending = (rows, tally)

    def settle(self) -> None:
        """The statements answered by key since the last settle, into the stream's rule hits and
        the engine's counters, as each decision would have counted them: one count per distinct
        answer's counters, not per key (eight do-db streams each took the engine's lock per key
        of each segment after each send, the most of their Python on a MIXED binlog)."""
        pending, self._pending = self._pending, None
        if pending is None:
            return
        rows, tally = pending
        answer, classes = rows.answer, rows.hits
        sums = _core.class_sums(tally, classes)  # per hit class, its keys' statements
        if not sums:
            return
        # One count per class; the last class holds every class past it, its keys counted one by one.
        alike: list[tuple[Decision, tuple[str, ...], int]] = []
        for klass, times in sums.items():
            if klass < HIT_CLASSES - 1:
                first = answer(classes.index(klass))
                alike.append((first.decision, first.counted, times))
            else:
                with memoryview(tally).cast("I") as counts:
                    keys = compress(range(len(counts)), classes.translate(_MASKS[klass]))
                    alike += [(answer(k).decision, answer(k).counted, counts[k]) for k in keys if counts[k]]
        tally[:] = bytes(len(tally))  # (a send may add to it again: counted from zero)
        state = self.hits.state  # (the rules the stream decided with: a replacing stream's may be the slave's now)
        assert state is not None, "a stream's slave has its state"
        engine = state.engine
        total: Counter[str] = Counter()
        with self.svc.engine_lock(engine):
            for decision, counted, times in alike:
                for name in counted:
                    total[name] += times
                engine.account(decision, times)
        if total:
            self.hits.add(total)
