"""Silent divergence (`dumpfilter lint`, issue #60): the writes a replica with these rules gets wrong
without ever stopping, beside the stops `rules.lint` predicts.

MySQL's own definition (rpl_filter.cc): a row event is judged by its table's database, a statement by
the default database of the session that ran it (the Query event's db). Where the two disagree about a
write, the replica silently differs from the primary on a table:
- lost: a DML statement skipped although every table it writes is one the rules keep at table level
  (`USE logs; UPDATE crm.t ...` under `replicate-do-db=crm`): the kept table misses the write;
- applied: a DML statement applied although a table it writes is one the rules do not keep
  (`USE crm; UPDATE logs.t ...` under `replicate-do-db=crm`), and it did not stop the replica (the
  table is there; else it is the 1146 `rules.lint` reports): a table outside the rules is written.
Row events never diverge (each is judged by its own table) and neither do the `wild-do-table` forms
(they test the written table in both formats), nor `--filter-semantics effective` (WL#2516).
Counted per rule, with the first few positions and statements, the cause and the fix.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from dumpfilter.rules.decisions import Decision
from dumpfilter.rules.evaluate import RuleEngine
from dumpfilter.rules.ruleset import RuleSet
from dumpfilter.rules.sqltokens import one_line
from dumpfilter.rules.statement_info import Kind, StatementInfo

if TYPE_CHECKING:
    from dumpfilter.errors import BinlogError
    from dumpfilter.rules.lint import Break, Linter

LOST, APPLIED = "lost", "applied"
KEEP = 5  # examples kept per rule and kind
WRITES = frozenset({Kind.INSERT, Kind.REPLACE, Kind.UPDATE, Kind.UPDATE_MULTI, Kind.DELETE, Kind.DELETE_MULTI,
                    Kind.LOAD_DATA})
_WILD = {"replicate-do-db": "replicate-wild-do-table", "replicate-ignore-db": "replicate-wild-ignore-table"}


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

    def to_json(self) -> dict[str, object]:
        return {"file": self.file, "pos": self.pos, "gtid": self.gtid, "default_db": self.db,
                "tables": list(self.tables), "statement": self.statement}


@dataclass
class Group:
    """The writes one rule gets wrong one way (`kind`: lost or applied)."""

    rule: str
    kind: str
    count: int = 0
    writes: list[Write] = field(default_factory=list)
    # (default database tested, database of the table written) -> writes
    pairs: dict[tuple[str, str], int] = field(default_factory=dict)

    def cause(self) -> str:
        shown = ", ".join(f"'{db or '(none)'}' for {table_db}" for (db, table_db), _ in
                          sorted(self.pairs.items(), key=lambda p: -p[1])[:3])
        if self.kind == LOST:
            return (f"{self.rule} tested the statement's default database ({shown}), not the database of the "
                    "tables it writes, which the rules keep: skipped (a row event of the same write is applied)")
        return (f"{self.rule} tested the statement's default database ({shown}), not the database of the "
                "table it writes, which the rules do not keep: applied (a row event of the same write is skipped)")

    def fix(self, rules: RuleSet) -> str:
        wild = _WILD.get(self.rule)
        if wild is None:
            return "--filter-semantics effective (WL#2516: each statement judged by the tables it writes)"
        values = rules.do_db if self.rule == "replicate-do-db" else rules.ignore_db
        forms = " ".join(f"--{wild}={db}.%" for db in values)
        return (f"{forms} in place of {self.rule} (the table's database is tested in both formats), "
                "or --filter-semantics effective (WL#2516)")

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
             info: StatementInfo, decision: Decision, thread: int) -> None:
        """A DML statement the replica skips (`decision.apply` false) or applies without stopping: a
        divergence when its tables' own judgement (as rows of them would be judged) disagrees."""
        if info.kind not in WRITES or not info.parse_ok or not info.updated or decision.assumption is not None:
            return
        tables = [ref for ref in info.updated if not linter._is_temp(thread, ref)]
        if not tables:
            return
        judged = [(ref, linter.engine.decide_table(*ref)) for ref in tables]
        if decision.apply:
            outside = [(ref, d) for ref, d in judged if not d.apply]
            if not outside:
                return
            kind, rule, table_db = APPLIED, decision.rule or outside[0][1].rule, outside[0][0][0]
        else:
            if not all(d.apply for _, d in judged):
                return
            kind, rule, table_db = LOST, decision.rule, tables[0][0]
        key = (rule or "rule", kind)
        group = self.groups.get(key)
        if group is None:
            group = self.groups[key] = Group(*key)
        group.count += 1
        group.pairs[(db, table_db)] = group.pairs.get((db, table_db), 0) + 1
        if len(group.writes) < self.keep:
            group.writes.append(Write(file, pos, gtid, db, tuple(f"{d}.{t}" for d, t in tables), sql))

    def to_json(self) -> dict[str, object]:
        return {"writes": self.writes, "rules": [g.to_json(self.rules) for g in self.groups.values()]}

    def lines(self) -> list[str]:
        """The report lint prints: one block per rule and kind (nothing when nothing diverges)."""
        if not self.groups:
            return []
        out = [f"{self.writes} write(s) silently diverge on a replica with these rules (it never stops for them):"]
        for group in self.groups.values():
            what = "skipped, though the rules keep every table it writes" if group.kind == LOST else \
                "applied to a table the rules do not keep"
            out.append(f"- {group.rule}: {group.count} write(s) {what}")
            out.append(f"  cause: {group.cause()}")
            out.append(f"  fix: {group.fix(self.rules)}")
            for w in group.writes:
                out.append(f"  {w.file}:{w.pos}" + (f" (GTID {w.gtid})" if w.gtid else "")
                           + f": USE {w.db or '(none)'}; {one_line(w.statement, 120)}")
        return out


def may_diverge(engine: RuleEngine, sql: str, db: str, info: StatementInfo) -> bool:
    """Whether a statement's write is judged otherwise by its default database `db` than by the tables
    it writes (only a table of another database can be): `binlogs.lint_scan` feeds it to the Linter."""
    if not info.parse_ok or info.kind not in WRITES or all(tdb == db for tdb, _ in info.updated):
        return False
    return engine.decide_statement(sql, db).apply != all(engine.decide_table(*r).apply for r in info.updated)


class Breaks(list["Break"]):
    """A Linter's breaks (a list of `rules.lint.Break`), carrying its `divergence`: every caller of
    lint (`lint`, `experiment --candidates`, `simulate`, the master's lint) gets both in one result."""

    def __init__(self, divergence: Divergence):
        super().__init__()
        self.divergence = divergence
        self.cut: BinlogError | None = None  # where the input was cut, linted up to it (lint_scan's stop_at_cut)
