"""One stream's keep byte per statement key of a segment (issue #43, StreamStatementKeys, held by
master.stream.slave_stream.SlaveStream): the statement units of a MIXED/STATEMENT binlog, read
once for every stream by the core (`UnitIndex.statement_units`: each single-table DML Query's
key, kind, default database and table), are answered from one decision per key per slave through
the rules' one seam (`Decider.decide_statement_key`, the form `filter`'s StatementKeys asks) ANDed
with the slave's master-policy gate (`rules.decider.gate_table` on the key's table, for the
statements the core shows reach that table alone), then sent by the core (`UnitList.send`) with
no Python per unit; the rule hits of the statements sent come back as a tally per key id
(`account`)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING

from dumpfilter.codec.scanner import KEEP_DROP, KEEP_KEEP, KEEP_PYTHON
from dumpfilter.rules.decisions import Decision
from dumpfilter.rules.evaluate import RuleEngine
from dumpfilter.rules.gate import Gate
from dumpfilter.rules.statement_keys import gated_key

if TYPE_CHECKING:
    from dumpfilter.master.decide.rule_hits import RuleHits
    from dumpfilter.master.read.columns import UnitIndex
    from dumpfilter.master.registry import RegisteredSlave
    from dumpfilter.master.service import DumpService

# A key's answer for one slave: its keep code (KEEP_KEEP, KEEP_DROP, KEEP_PYTHON), its decision and
# the rule hits it counts.
KeyAnswer = tuple[int, Decision, tuple[str, ...]]
# A segment's answers by key for one stream (`StreamStatementKeys.keep_for`): the keep byte per key
# id, each key's answer, and under a policy gate a byte per key id, 1 where its KEEP_KEEP holds only
# for statements whose text reaches the key's table alone (`UnitList.statement_rows`' `gated`).
KeyRows = tuple[bytes, list[KeyAnswer | None], bytes | None]


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
    """One stream's answers per statement key: `keep_for` gives a segment's keep bytes (1 kept, 0
    dropped, by the segment's key id), each key decided once for the slave (by its bytes, across
    segments) while its rule engine and gate stay the same."""

    __slots__ = ("svc", "slave", "counts", "_group", "_known")

    def __init__(self, svc: DumpService, slave: RegisteredSlave, counts: StatementPathCounts) -> None:
        self.svc, self.slave, self.counts = svc, slave, counts
        self._group: tuple[RuleEngine, Gate] | None = None  # (engine, gate) the answers in `_known` are of
        self._known: dict[bytes, KeyAnswer] = {}

    def keep_for(self, index: UnitIndex) -> KeyRows | None:
        """(keep byte per key id, (decision, rule hits) per key id, gated byte per key id or
        None) for the segment of `index`, or None where its units go on to Python: no statement
        unit decided by keys, or the slave's rules are not a function of the key
        (`Decider.keys_statements`: a schema timeline, derived tables).

        Under a restricted policy gate (WL#2387's master-controlled filter) a key's answer is its
        rules' AND the gate's: a key whose updated table the gate refuses is dropped for every
        statement of it (each one's reach holds that table); one it allows is kept for the
        statements whose text reaches that table alone (the core tells them:
        `UnitList.statement_rows`' `gated`, a 1 per such key), the others going to Python, which
        reads their whole reach; an INSERT ... SELECT key, whose statements read other tables, is
        Python's (KEEP_PYTHON)."""
        keys, units = index.statement_units()
        if not units:
            return None
        state, gate = self.slave.state, self.slave.gate
        assert state is not None, "a stream's slave has its state"
        engine = state.engine
        decider = engine  # the gate is ANDed per key below (`_gated_key`)
        # The master's engines share the series' schema timeline: a key's decision is kept for
        # every statement of the key only when it was pure (see `RuleEngine.keys_statements_if_pure`).
        if not (decider.keys_statements or (decider is engine and state.engine.keys_statements_if_pure)):
            return None
        if self._group != (engine, gate):
            self._group, self._known = (engine, gate), {}
        keep = bytearray(len(keys))
        decided: list[KeyAnswer | None] = [None] * len(keys)
        by_text = bytearray(len(keys)) if gate.restricted else None
        known = self._known
        for key_id, key, db, sql in keys:
            answer = known.get(key)
            if answer is None:
                with self.svc.engine_lock(engine):
                    engine.consulted = False
                    decision = decider.decide_statement_key(sql, db)
                    pure = not engine.consulted and decision.assumption is None
                # An impure key (KEEP_PYTHON) leaves its units to Python, decided at their position.
                kept = KEEP_KEEP if decision.apply else KEEP_DROP
                code, counted = (kept if pure else KEEP_PYTHON), decision.counted
                if gate.restricted and code == KEEP_KEEP:
                    code, counted = gated_key(key, sql, db, decision, gate)
                answer = known[key] = code, decision, counted
                self.counts.keys_decided += 1
            keep[key_id] = answer[0]
            decided[key_id] = answer
            if by_text is not None and answer[0] == KEEP_KEEP:
                by_text[key_id] = 1
        self.counts.key_units += units
        return bytes(keep), decided, None if by_text is None else bytes(by_text)

    def account(self, decided: list[KeyAnswer | None], tally: bytearray, hits: RuleHits) -> None:
        """The statements a send answered by key (`tally`: a u32 per key id), into the rule hits
        (`hits`: RuleHits) and the engine's counters, as each decision would have counted them."""
        counts = memoryview(tally).cast("I").tolist()
        state = self.slave.state
        assert state is not None, "a stream's slave has its state"
        engine = state.engine
        total: Counter[str] = Counter()
        for key_id, times in enumerate(counts):
            if times:
                answer = decided[key_id]
                assert answer is not None, "the core sends by key only the keys `keep_for` answered"
                _, decision, counted = answer
                for name in counted:
                    total[name] += times
                with self.svc.engine_lock(engine):
                    engine.account(decision, times)
        if total:
            hits.add(total)
