"""Silent divergence (`dumpfilter lint`, issues #60, #81): the writes a replica with these rules gets
wrong without ever stopping, beside the stops `rules.lint` predicts.

A write is judged against what a replica fed the same write as row events holds: row events are
judged table by table, each by its own table's database (rpl_filter.cc), and land in the table's
database rewritten. A Query event is kept or skipped whole, by its default database (db rules) or by
the first table it writes that a table rule decides (tables_ok), and replicate-rewrite-db rewrites
only its default database. Where the two disagree, the replica silently differs from the primary:
- lost: a DML statement skipped although a table it writes is one the rules keep: under db rules
  (`USE logs; UPDATE crm.t ...` under `replicate-do-db=crm`), and a multi-table UPDATE or DELETE
  skipped whole (`USE crm; UPDATE logs.t1 a JOIN shop.t1 b ... SET a.v = 1, b.v = 1` under
  `replicate-ignore-table=logs.t1`: shop.t1 misses the write);
- applied: a DML statement applied although a table it writes is one the rules do not keep
  (`USE crm; UPDATE logs.t ...` under `replicate-do-db=crm`; `UPDATE crm.t a JOIN logs.t b ...` kept
  whole by `replicate-wild-do-table=crm.%`), and it did not stop the replica (the table is there; else
  it is the 1146 `rules.lint` reports): a table outside the rules is written;
- misplaced: under replicate-rewrite-db, a kept statement writing a table qualified with a database a
  rule rewrites (`USE crm; UPDATE crm.t3 ...` with `crm->crm_rw`): it lands in crm.t3, where a row
  event of the same write lands in crm_rw.t3 (MariaDB and MySQL rewrite the default database only);
  so does a trigger's or function's write, whose body keeps the names it was written with;
- shadowed: a kept statement of a session whose CREATE TEMPORARY TABLE the replica skipped, naming a
  table a base table of that name stands for there (the temporary table shadows it in its own session
  only): no 1146, the base table is read or written instead.
A write through a view is decided by the view's name and writes its base tables (as rows of them
are judged); a stored function a statement calls (`UPDATE ... SET v = f()`, `SELECT f()`, logged as
that statement) writes what its body writes, on both sides; REPLACE fires DELETE triggers and
INSERT ... ON DUPLICATE KEY UPDATE UPDATE triggers besides the INSERT ones (`events`).
Triggers both ways: a kept statement fires the triggers the replica has (`Linter.replica`'s model:
--schema, --replica-schema, the CREATE TRIGGERs it applied), whose writes to tables the rules do not
keep are applied; what the primary's triggers wrote would arrive as rows, so a skipped statement
loses their writes to kept tables, and so does a kept one whose trigger the replica lacks.
Every table a statement writes is counted (`Write.tables`: those the replica gets wrong). Row events
never diverge (each is judged by its own table), nor does `--filter-semantics effective` (WL#2516).
Counted per rule and kind, with the first few positions and statements, the cause and the fix.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from collections.abc import Iterable
from typing import TYPE_CHECKING

from dumpfilter import _core
from dumpfilter.errors import one_line
from dumpfilter.rules.decisions import Decision
from dumpfilter.rules.lazy_pattern import LazyPattern
from dumpfilter.rules.ruleset import RuleSet
from dumpfilter.rules.schema import SchemaModel
from dumpfilter.rules.statement_info import WRITE_KINDS, Kind, StatementInfo

if TYPE_CHECKING:
    from dumpfilter.errors import BinlogError
    from dumpfilter.rules.lint import Break, Cause, Linter

TableRef = tuple[str, str]
LOST, APPLIED, MISPLACED, SHADOWED = "lost", "applied", "misplaced", "shadowed"
KEEP = 5  # examples kept per rule and kind
_WILD = {"replicate-do-db": "replicate-wild-do-table", "replicate-ignore-db": "replicate-wild-ignore-table"}
_DB_RULES = frozenset({"replicate-do-db", "replicate-ignore-db"})
WHAT = {LOST: "skipped, though the rules keep a table it writes",
         APPLIED: "applied to a table the rules do not keep",
         MISPLACED: "applied to the table its text names, not the rewritten database's",
         SHADOWED: "applied from a base table where the primary used a temporary table of that name"}


@dataclass(frozen=True)
class Write:
    """One write the replica gets wrong: the Query event's file and position, its transaction's GTID,
    the default database it ran under and the tables it writes."""

    file: str
    pos: int
    gtid: str | None
    db: str
    tables: tuple[str, ...]
    statement: str
    landed: tuple[str, ...] = ()  # misplaced: the replica tables the statement wrote instead

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = {"file": self.file, "pos": self.pos, "gtid": self.gtid, "default_db": self.db,
                                  "tables": list(self.tables), "statement": self.statement}
        if self.landed:
            out["landed_in"] = list(self.landed)
        return out


@dataclass
class Group:
    """The writes one rule gets wrong one way (`kind`: lost or applied)."""

    rule: str
    kind: str
    count: int = 0
    writes: list[Write] = field(default_factory=list)
    # (default database tested, database of the table written) -> writes
    pairs: Counter[tuple[str, str]] = field(default_factory=Counter)
    tables: Counter[str] = field(default_factory=Counter)  # db.table -> writes that got it wrong

    def cause(self) -> str:
        shown = ", ".join(f"'{db or '(none)'}' for {table_db}" for (db, table_db), _ in self.pairs.most_common(3))
        tables = ", ".join(t for t, _ in self.tables.most_common(3))
        if self.kind == MISPLACED:
            return (f"{self.rule} rewrote the statement's default database only ({shown}); a table its text "
                    "qualifies keeps that database on the replica, where a row event of the same write lands "
                    "in the rewritten one")
        if self.kind == SHADOWED:
            return (f"{self.rule} skipped a CREATE TEMPORARY TABLE and kept a later statement of its session, "
                    f"which on the replica opened the base table of that name (a temporary table shadows it in "
                    f"its own session only): its write to {tables} is made from the wrong rows")
        if self.rule not in _DB_RULES:
            outcome = f"skipped whole, so its write to {tables} is lost" if self.kind == LOST else \
                f"applied whole, so its write to {tables} is made"
            return (f"{self.rule} decided the whole statement by the first table it writes that a table rule "
                    f"names (tables_ok): {outcome} (row events of the same write are judged table by table)")
        if self.kind == LOST:
            return (f"{self.rule} tested the statement's default database ({shown}), not the database of the "
                    "tables it writes, which the rules keep: skipped (a row event of the same write is applied)")
        return (f"{self.rule} tested the statement's default database ({shown}), not the database of the "
                "table it writes, which the rules do not keep: applied (a row event of the same write is skipped)")

    def fix(self, rules: RuleSet) -> str:
        if self.kind == MISPLACED:
            return ("binlog_format=ROW on the primary (row events land in the rewritten database), or "
                    "statements that name the rewritten database's tables unqualified under it")
        if self.kind == SHADOWED:
            return ("temporary tables named apart from base tables, rules that keep a temporary table with the "
                    "statements that use it, or binlog_format=ROW on the primary (temporary tables are not logged)")
        wild = _WILD.get(self.rule)
        if wild is None:
            return ("binlog_format=ROW on the primary (each row judged by its own table), one table per "
                    "statement, or --filter-semantics effective (WL#2516)")
        values = rules.do_db if self.rule == "replicate-do-db" else rules.ignore_db
        forms = " ".join(f"--{wild}={db}.%" for db in values)
        return (f"{forms} in place of {self.rule} (the table's database is tested in both formats; a "
                "multi-table statement is still kept or skipped whole), or --filter-semantics effective (WL#2516)")

    def to_json(self, rules: RuleSet) -> dict[str, object]:
        return {"rule": self.rule, "kind": self.kind, "writes": self.count, "cause": self.cause(),
                "fix": self.fix(rules), "first": [w.to_json() for w in self.writes]}


@dataclass
class Divergence:
    """Every silent divergence a Linter found, by (rule, kind), in the order first found, for a replica
    with `rules`. `keep`: the writes kept per group (all are counted)."""

    rules: RuleSet
    groups: dict[tuple[str, str], Group] = field(default_factory=dict)
    keep: int = KEEP

    @property
    def writes(self) -> int:
        return sum(g.count for g in self.groups.values())

    def note(self, linter: Linter, file: str, gtid: str | None, pos: int, sql: str, db: str,
             info: StatementInfo, decision: Decision, thread: int, replica: StatementInfo | None = None) -> None:
        """A DML statement the replica skips (`decision.apply` false) or applies without stopping
        (`replica`: its tables as the replica reads them): a divergence when its tables' own judgement
        (as rows of them would be judged, and where they would land) disagrees."""
        if info.kind not in WRITE_KINDS or not info.parse_ok or not info.updated or _unplaced(decision):
            if not _calls(linter, sql, db, info):
                return
        for kind, rule, tables, landed in judge(linter, info, decision, thread, replica, sql, db):
            self._count(file, gtid, pos, sql, db, kind, rule, tables, landed)

    def _count(self, file: str, gtid: str | None, pos: int, sql: str, db: str, kind: str, rule: str,
               tables: tuple[TableRef, ...], landed: tuple[TableRef, ...]) -> None:
        key = (rule, kind)
        group = self.groups.get(key)
        if group is None:
            group = self.groups[key] = Group(*key)
        group.count += 1
        group.pairs.update((db, table_db) for table_db in dict.fromkeys(ref[0] for ref in tables))
        group.tables.update(f"{d}.{t}" for d, t in tables)
        if len(group.writes) < self.keep:
            group.writes.append(Write(file, pos, gtid, db, tuple(f"{d}.{t}" for d, t in tables), sql,
                                      tuple(f"{d}.{t}" for d, t in landed)))

    def to_json(self) -> dict[str, object]:
        return {"writes": self.writes, "rules": [g.to_json(self.rules) for g in self.groups.values()]}

    def lines(self) -> list[str]:
        """The report lint prints: one block per rule and kind (nothing when nothing diverges)."""
        if not self.groups:
            return []
        out = [f"{self.writes} write(s) silently diverge on a replica with these rules (it never stops for them):"]
        for group in self.groups.values():
            what = WHAT[group.kind]
            out.append(f"- {group.rule}: {group.count} write(s) {what}")
            out.append(f"  cause: {group.cause()}")
            out.append(f"  fix: {group.fix(self.rules)}")
            for w in group.writes:
                out.append(f"  {w.file}:{w.pos}" + (f" (GTID {w.gtid})" if w.gtid else "")
                           + f": USE {w.db or '(none)'}; {one_line(w.statement, 120)}"
                           + (f" (lands in {', '.join(w.landed)})" if w.landed else ""))
        return out


def _calls(linter: Linter, sql: str, db: str, info: StatementInfo) -> bool:
    """A statement other than DML that calls a stored function whose body writes (`SELECT f()`, `SET @a
    = f()`, `DO f()`): the primary logs it as it is (MIXED too), and a real MariaDB replica runs it
    by its default database's rules; table rules never skip it (it names no table: tables_ok is not
    asked), whatever tables the body writes."""
    return info.kind in _CALLERS and bool(called(linter.primary.model, sql, db) or
                                          called(linter.replica.model, sql, linter._replica_db(db)))


def _unplaced(decision: Decision) -> bool:
    """Whether the engine could not tell which tables a multi-table UPDATE writes (a SET column it
    could not place: `RuleEngine._multi_update`'s note): no divergence is counted for it. Its other
    assumptions (triggers unknown) leave the statement's own written tables known."""
    return decision.assumption is not None and "SET column '" in decision.assumption


Found = tuple[str, str, tuple[TableRef, ...], tuple[TableRef, ...]]
# The trigger events a DML statement fires on the tables it writes.
_EVENT = {Kind.INSERT: "INSERT", Kind.REPLACE: "INSERT", Kind.LOAD_DATA: "INSERT", Kind.UPDATE: "UPDATE",
          Kind.UPDATE_MULTI: "UPDATE", Kind.DELETE: "DELETE", Kind.DELETE_MULTI: "DELETE"}
_CALLERS = frozenset({Kind.OTHER, Kind.SET})  # statements besides DML that may call a function (SELECT, DO, SET)
_UPSERT = LazyPattern(r"\bON\s+DUPLICATE\s+KEY\s+UPDATE\b", re.IGNORECASE)
_LOAD_REPLACE = LazyPattern(r"\bREPLACE\s+INTO\s+TABLE\b", re.IGNORECASE)


def events(kind: Kind, sql: str) -> tuple[str, ...]:
    """The trigger events a write fires. A row meeting a duplicate key: REPLACE (and LOAD DATA ...
    REPLACE) deletes the old row before inserting, so its DELETE triggers fire too (with a DELETE
    trigger the server never takes the in-place update shortcut: sql_insert.cc write_record); INSERT
    ... ON DUPLICATE KEY UPDATE updates the old row, so its UPDATE triggers fire for that row, not the
    AFTER INSERT ones. Lint cannot see rows: both events' triggers are counted, as for a statement that
    inserts one row and meets a duplicate with another (it overcounts one that only inserts)."""
    event = _EVENT.get(kind)
    if event is None:
        return ()
    if kind is Kind.REPLACE or (kind is Kind.LOAD_DATA and _LOAD_REPLACE.search(sql)):
        return (event, "DELETE")
    if kind is Kind.INSERT and _UPSERT.search(sql):
        return (event, "UPDATE")
    return (event,)


def fired(model: SchemaModel, starts: Iterable[tuple[TableRef, str]]) -> list[TableRef]:
    """The tables the triggers fired by writing each (table, event) of `starts` write on a server with
    `model` (nested triggers too; a body not followed writes nothing known), not those tables themselves."""
    out: list[TableRef] = []
    if not model.triggers:  # the common case: nothing to walk
        return out
    seen: set[tuple[str, str]] = set()
    queue = list(starts)
    while queue:
        table, what = queue.pop(0)
        for trigger in model.triggers_on(table, what):
            if (trigger.db, trigger.name) in seen or trigger.writes is None:
                continue
            seen.add((trigger.db, trigger.name))
            for written, written_event in trigger.writes:
                if written not in out:
                    out.append(written)
                queue.append((written, written_event))
    return out


def called(model: SchemaModel, sql: str, db: str) -> list[tuple[TableRef, str]]:
    """The (table, event) writes of the stored functions of `model` that `sql` calls (`f(`, `db.f(`;
    an unqualified name is the default database `db`'s). MySQL and MariaDB log a statement calling a
    function as that statement (the body's writes are not logged apart, unlike a CALL's under
    STATEMENT), and the replica runs the body as it runs the statement."""
    functions = model.functions
    if not functions:
        return []
    lowered = sql.lower()
    if not any(name in lowered for _, name in functions):
        return []
    tokens = _core.sql_tokens(sql).tokens
    out: list[tuple[TableRef, str]] = []
    for i, token in enumerate(tokens[:-1]):
        after = tokens[i + 1]
        if token.kind not in ("word", "quoted_ident") or after.kind != "punct" or after.value != "(":
            continue
        dotted = i >= 2 and tokens[i - 1].kind == "punct" and tokens[i - 1].value == "." \
            and tokens[i - 2].kind in ("word", "quoted_ident")
        writes = functions.get((tokens[i - 2].value if dotted else db, token.value.lower()))
        out += [write for write in writes or () if write not in out]
    return out


@dataclass(frozen=True)
class _Applied:
    """What a kept statement writes on the replica, in its names: the tables it names (a view's base
    tables in the replica's model), base tables where the primary wrote a temporary table the replica
    never made (`shadowed`), what its triggers and functions write besides (`effects`), and whether
    it reads such a base table (`reads_shadow`)."""

    own: list[TableRef]
    shadowed: list[TableRef]
    effects: list[TableRef]
    reads_shadow: bool


def _on_replica(linter: Linter, info: StatementInfo, replica: StatementInfo, thread: int, fires: tuple[str, ...],
                sql: str, db: str) -> _Applied:
    model, replica_model = linter.primary.model, linter.replica.model
    own: list[TableRef] = []
    shadowed: list[TableRef] = []
    borrowed: list[TableRef] = []
    for ref, lands in zip(info.updated, replica.updated):
        if linter._is_temp(thread, ref):
            if linter._shadowed(thread, ref, lands):
                shadowed.append(lands)
            continue
        if lands != linter.replica_ref(ref) and not replica_model.knows(*lands) and model.knows(*ref):
            # a rewritten database's table the replica's model lacks: taken as the primary's copy
            borrowed += fired(model, [(t, e) for t in model.base_tables(ref) for e in fires])
        own += replica_model.base_tables(lands)
    calls = called(replica_model, sql, linter._replica_db(db))
    effects = dict.fromkeys([*borrowed, *(t for t, _ in calls), *fired(
        replica_model, [*((t, e) for t in (*own, *shadowed) for e in fires), *calls])])
    return _Applied(own, shadowed, [ref for ref in effects if ref not in own],
                    any(linter._shadowed(thread, ref, lands) for ref, lands in zip(info.read, replica.read)))


def judge(linter: Linter, info: StatementInfo, decision: Decision, thread: int,
          replica: StatementInfo | None = None, sql: str = "", db: str = "") -> list[Found]:
    """How a DML statement's write diverges (module docstring): (kind, rule, the tables the replica
    gets wrong in the primary's names, for MISPLACED the replica tables it lands in instead) for
    each way it does. A statement is kept or skipped whole, and on the replica writes through the
    views, fires the triggers and runs the functions the replica has; row events of it, and of what
    its triggers and functions wrote on the primary, would be judged table by table."""
    engine, model = linter.engine, linter.primary.model
    fires = events(info.kind, sql) if model.triggers or linter.replica.model.triggers else ()  # (a text read only then)
    # The tables writes naming them write: a view's base tables (SchemaModel.base_tables).
    tables = list(dict.fromkeys(base for ref in info.updated if not linter._is_temp(thread, ref)
                                for base in model.base_tables(ref)))
    calls = called(model, sql, db)
    effects = [ref for ref in dict.fromkeys([*(t for t, _ in calls), *fired(model, [
        *((t, e) for t in tables for e in fires), *calls])]) if ref not in tables]
    rule = decision.rule or "rule"
    if not decision.apply:
        kept = tuple(ref for ref in (*tables, *effects) if engine.decide_table(*ref).apply)
        return [(LOST, rule, kept, ())] if kept else []
    done = _on_replica(linter, info, replica if replica is not None else info, thread, fires, sql, db)
    own, shadowed, on_replica = done.own, done.shadowed, done.effects
    rewrites = bool(engine.rules.rewrite_db) and engine.settings.semantics != "effective"
    # The replica table each kept write of a trigger or function would reach as a row event.
    expected = {(linter._replica_table(*ref) if rewrites else linter.replica_ref(ref)): ref
                for ref in effects if engine.decide_table(*ref).apply}
    found: list[Found] = []
    outside = [*(ref for ref in (*tables, *shadowed) if not engine.decide_table(*ref).apply),
               *(ref for ref in on_replica if ref not in expected and ref not in tables
                 and not engine.decide_table(*ref).apply)]
    if outside:
        first = next((engine.decide_table(*ref).rule for ref in outside), None)
        found.append((APPLIED, decision.rule or first or "rule", tuple(dict.fromkeys(outside)), ()))
    missing: list[TableRef] = []
    wrong: list[TableRef] = []
    landed: list[TableRef] = []
    for lands, ref in expected.items():
        if lands in on_replica:
            continue
        if linter.replica_ref(ref) != lands and linter.replica_ref(ref) in on_replica:
            wrong.append(ref)  # written under its own name, where its rows would reach the rewritten one
            landed.append(linter.replica_ref(ref))
        else:
            missing.append(ref)  # the primary's trigger or function wrote a kept table; the replica's does not
    if missing:
        found.append((LOST, rule, tuple(missing), ()))
    kept_shadow = [ref for ref in shadowed if engine.decide_table(*ref).apply]
    if done.reads_shadow:
        kept_shadow += [ref for ref in tables if engine.decide_table(*ref).apply and ref not in kept_shadow]
    if kept_shadow:
        found.append((SHADOWED, rule, tuple(kept_shadow), ()))
    if replica is not None and rewrites:
        for ref, lands in zip(tables, own):
            # (a table the rules do not keep is an applied write above: its rows would not reach the replica)
            if linter.replica_ref(lands) != linter._replica_table(*ref) and engine.decide_table(*ref).apply:
                wrong.append(ref)
                landed.append(linter.replica_ref(lands))
    if wrong:
        found.append((MISPLACED, "replicate-rewrite-db", tuple(wrong), tuple(landed)))
    return found


class Breaks(list["Break"]):
    """A Linter's breaks (a list of `rules.lint.Break`), carrying its `divergence`: every caller of
    lint (`lint`, `experiment --candidates`, `simulate`, the master's lint) gets both in one result.
    It holds the first `keep` breaks `add`ed, the rest counted in `dropped` (a look of the master's
    lint over a binlog where most units break holds a few, not one per unit: binlogs.lint.look_together);
    `last_cause` is the latest one's (a transaction's later statements read it: `Linter.feed`)."""

    def __init__(self, divergence: Divergence):
        super().__init__()
        self.divergence = divergence
        self.cut: BinlogError | None = None  # where the input was cut, linted up to it (lint_scan's stop_at_cut)
        self.keep = 1 << 62
        self.dropped = 0
        self.last_cause: Cause | None = None

    def add(self, found: Break) -> None:
        self.last_cause = found.cause
        if len(self) < self.keep:
            self.append(found)
        else:
            self.dropped += 1
