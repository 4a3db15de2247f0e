"""Statement keys (issue #43): one consumer's answer per statement key the compiled core interns,
the form its assembly decides statement-logged transactions from.

The core reads, in its one pass, what a single-table DML statement's decision reads: its kind,
the Query's default database and the one table it updates (`_core.statement_key`; exactly what
`rules.statements.statement_tables` answers for those shapes, and nothing where it is not sure).
Under a decider whose statement decisions are a function of that key (`Decider.keys_statements`),
each key is decided once, from the first statement met with it (`Decider.decide_statement_key`),
and every statement it answers is accounted (`Decider.account`): the rule-hit counters come out
as if each had been decided on its own.

Why a rule engine's decision is the key's (`RuleEngine.keys_statements`), under both semantics:
* standard (rpl_filter.cc): db_ok on the (rewritten) default database, tables_ok on the one
  updated table; no trigger is looked at (MariaDB adds the tables fired triggers write for a
  multi-table UPDATE only, never keyed);
* effective (WL#2516, rules.effective): the effective object is the one table the statement
  changes (`effective_objects`: the key's table, qualified by the key's default database),
  matched against DO/IGNORE and the binlog side's, then REWRITE of the key's default database.
  Neither reads the trigger knowledge or the schema model (a DROP TRIGGER's and a multi-table
  UPDATE's decisions do: they are not keyed), so a trigger on the table, which writes other
  tables on the replica, changes nothing: WL#2516 filters on the tables the statement changes
  (docs/effective-semantics.md). On the master's schema timeline `consulted` is checked after
  each key's decision all the same (master.decide.statement_keys). Not with derived tables
  (WL#40): their ignore set grows with the stream."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import NamedTuple

from dumpfilter import _core
from dumpfilter.codec.scanner import KEEP_ASK, KEEP_DROP, KEEP_KEEP, KEEP_PYTHON
from dumpfilter.rules.decider import Decider, gate_table
from dumpfilter.rules.decisions import Decision
from dumpfilter.rules.gate import Gate
from dumpfilter.rules.statements import statement_tables


def _text(raw: bytes) -> str:
    return raw.decode("utf-8", "surrogateescape")  # as codec.event decodes a Query's texts


_SELECT_KINDS = (_core.KIND_INSERT_SELECT, _core.KIND_REPLACE_SELECT)  # a key's first byte


def gated_key(key: bytes, sql: str, db: str | None, decision: Decision, gate: Gate) -> tuple[int, tuple[str, ...]]:
    """A key its rules keep (`decision`, from its first statement `sql`), under a restricted master
    policy gate: KEEP_DROP with the gate's refusal when the gate refuses its updated table (every
    statement of the key reaches it), KEEP_PYTHON for an INSERT ... SELECT key (its statements read
    other tables) or a text not of the key's shape after all, else KEEP_KEEP, which holds for the
    statements whose text reaches that table alone (`UnitList.statement_rows`' `gated`: the others
    go to Python, which reads their whole reach); with the rule hits each statement of the key
    counts (the gate's refusal adds MASTER_POLICY). The master's streams and `experiment` ask it."""
    updated = statement_tables(sql, db).updated
    if len(updated) != 1:
        return KEEP_PYTHON, decision.counted
    refused = gate_table(decision, gate, *updated[0])
    if not refused.apply:
        return KEEP_DROP, refused.counted
    return (KEEP_PYTHON if key[:1] and key[0] in _SELECT_KINDS else KEEP_KEEP), decision.counted


class KeyAnswer(NamedTuple):
    """A statement key's answer for one decider under one gate: its keep code (KEEP_KEEP,
    KEEP_DROP, KEEP_PYTHON), its rules' decision, and the rule hits each statement of it counts."""

    code: int
    decision: Decision
    counted: tuple[str, ...]


# A key's decision from its first statement (text, default database) and whether it is the key's
# alone (pure: the decider read no schema timeline for it).
DecideKey = Callable[[str, "str | None"], "tuple[Decision, bool]"]


class KeyAnswers:
    """One decider's answer per statement key under a master policy gate, by the key's bytes (so
    across segments and buffers, whose key ids differ), decided once from the first statement met
    with it: its rules' decision (KEEP_PYTHON where it was not pure), ANDed with a restricting
    gate (`gated_key`). The master's streams (master.decide.statement_keys) and `experiment`'s
    counters (one for the slaves whose rules and gate are the same) keep their answers here."""

    __slots__ = ("_decide", "gate", "_known", "decided")

    def __init__(self, decide: DecideKey, gate: Gate | None) -> None:
        self._decide = decide
        self.gate = gate if gate is not None and gate.restricted else None
        self._known: dict[bytes, KeyAnswer] = {}
        self.decided = 0  # keys decided (each once)

    def answer(self, key: bytes, sql: str, db: str | None) -> KeyAnswer:
        found = self._known.get(key)
        if found is not None:
            return found
        decision, pure = self._decide(sql, db)
        code, counted = (KEEP_KEEP if decision.apply else KEEP_DROP), decision.counted
        if not pure:  # its units decided in Python, at their position
            code = KEEP_PYTHON
        elif self.gate is not None and code == KEEP_KEEP:
            code, counted = gated_key(key, sql, db, decision, self.gate)
        answer = self._known[key] = KeyAnswer(code, decision, counted)
        self.decided += 1
        return answer

    def keep(self, keys: Sequence[tuple[int, bytes, str | None, str]]) -> tuple[bytes, list[KeyAnswer | None]]:
        """The keep byte per key id of a UnitList's keys ((key id, key bytes, default database,
        first statement)), and each id's answer."""
        keep = bytearray(len(keys))
        answers: list[KeyAnswer | None] = [None] * len(keys)
        answer = self.answer
        for key_id, key, db, sql in keys:
            found = answers[key_id] = answer(key, sql, db)
            keep[key_id] = found.code
        return bytes(keep), answers

    def gated(self, keep: bytes) -> bytes | None:
        """Under a restricting gate, a byte per key id of `keep` (`keep`'s result): 1 where its
        KEEP_KEEP holds only for the statements whose text reaches the key's table alone
        (`UnitList.statement_rows`' `gated`: the others go to Python, which reads their reach)."""
        return None if self.gate is None else keep.translate(_GATED)


_GATED = bytes(1 if b == KEEP_KEEP else 0 for b in range(256))  # keep byte -> `KeyAnswers.gated` byte


class StatementKeeps:
    """The keep byte per key id (KEEP_KEEP, KEEP_DROP; KEEP_ASK not answered yet) and each key's decision, for one decider.
    `enabled`: whether the decider's statements may be answered by key at all."""

    __slots__ = ("_decider", "enabled", "_keep", "_bytes", "_decisions", "keys_decided", "statements", "units")

    def __init__(self, decider: Decider):
        self._decider = decider
        self.enabled = decider.keys_statements
        self._keep = bytearray()
        self._bytes: bytes | None = b""
        self._decisions: list[Decision | None] = []
        self.keys_decided = 0   # keys decided in Python (each once)
        self.statements = 0     # statements answered by key
        self.units = 0          # statement units written from keys

    def restart(self) -> None:
        """A new scanner (the next input file): its key ids start again, so do the answers (the
        counters go on)."""
        self._keep.clear()
        self._decisions.clear()
        self._bytes = b""

    def keep_bytes(self) -> bytes:
        """One byte per key id, as the core's assembly takes them."""
        if self._bytes is None:
            self._bytes = bytes(self._keep)
        return self._bytes

    def learn(self, new_keys: Iterable[_core.NewKey]) -> None:
        """Decide the keys the core met for the first time (key id, default database, the
        statement it was met in)."""
        decide = self._decider.decide_statement_key
        for key in new_keys:
            key_id, db, sql = key.id, key.db, key.sql
            if len(self._keep) <= key_id:
                grow = key_id + 1 - len(self._keep)
                self._keep.extend(bytes([KEEP_ASK]) * grow)
                self._decisions.extend([None] * grow)
            decision = decide(_text(sql), _text(db))
            self._decisions[key_id] = decision
            self._keep[key_id] = KEEP_KEEP if decision.apply else KEEP_DROP
            self.keys_decided += 1
        self._bytes = None

    def used(self, key_uses: Iterable[_core.KeyUse], units: int, statements: int) -> None:
        """Account the statements an assembly answered: (key id, how many) per key."""
        account = self._decider.account
        decisions = self._decisions
        for use in key_uses:
            key_id, times = use.id, use.statements
            decision = decisions[key_id]
            assert decision is not None  # the core uses only keys it handed to `learn` first
            account(decision, times)
        self.units += units
        self.statements += statements
