"""What the harness answers without a server: a generated binlog (`generate_binlog`), `lint`'s
prediction of where a replica with these rules stops, and `explain` (one statement or table, or
every transaction of a binlog) as the rule engine decides it, all as `_types` values."""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from dumpfilter.binlogs.files import binlog_format, binlog_paths
from dumpfilter.binlogs.lint import lint_files, units
from dumpfilter.codec import EventType
from dumpfilter.codec.transactions import CONTROL
from dumpfilter.errors import RuleError
from dumpfilter.harness._rules import Rules, as_rules
from dumpfilter.harness._types import Decision, EventDecision, LintBreak, LintResult, TransactionExplanation
from dumpfilter.rules.decisions import Decision as _EngineDecision
from dumpfilter.rules.evaluate import RuleEngine
from dumpfilter.rules.transaction_filter import decided_events
from dumpfilter.workload import WorkloadSpec, generate

if TYPE_CHECKING:  # imported where used: the schema reader loads sqlglot
    from dumpfilter.rules.lint import Break
    from dumpfilter.rules.schema import SchemaModel

PathLike = str | os.PathLike[str]


def generate_binlog(directory: PathLike, *, transactions: int = 500, schemas: int = 3, tables_per_schema: int = 2,
                    binlog_format: str = "row", flavor: str = "mariadb", seed: int = 1,
                    max_binlog_size: int = 1 << 30, schema_prefix: str = "db") -> list[Path]:
    """Write the built-in deterministic workload (schemas db1..dbN, tables t1..tM of
    `(id INT PRIMARY KEY, v INT)`) as real binlog files in `directory`; returns them in order.
    The same arguments write the same bytes. `binlog_format`: row, statement or mixed."""
    spec = WorkloadSpec(seed=seed, schemas=schemas, tables_per_schema=tables_per_schema, transactions=transactions,
                        binlog_format=binlog_format, flavor=flavor, max_binlog_size=max_binlog_size,
                        schema_prefix=schema_prefix)
    Path(directory).mkdir(parents=True, exist_ok=True)
    return generate(spec, directory)


def _paths(binlog: PathLike | Sequence[PathLike]) -> list[Path]:
    targets = [binlog] if isinstance(binlog, str | os.PathLike) else list(binlog)
    paths = [path for target in targets for path in binlog_paths(target)]
    if not paths:
        raise RuleError(f"no binlog files in {binlog}")
    return paths


def _schema(source: PathLike | None, what: str) -> SchemaModel | None:
    if source is None:
        return None
    from dumpfilter.rules.schema import load_schema

    return load_schema(str(source), what)


def lint(binlog: PathLike | Sequence[PathLike], rules: Rules | Sequence[str] | str | None = None, *,
         schema: PathLike | None = None, replica_schema: PathLike | None = None) -> LintResult:
    """Where a replica with `rules` would stop applying `binlog` (a file, a directory of binlogs,
    or several): `dumpfilter lint`'s prediction. `schema`: the master's schema before the binlog
    (a `mariadb-dump --no-data` file or mysql://USER@HOST:PORT); `replica_schema`: the replica's,
    when it differs. Rules without a flavor take the binlog's server's."""
    paths = _paths(binlog)
    rules = as_rules(rules)
    settings = rules.settings_for(binlog_format(paths[0]).flavor)
    breaks = lint_files(paths, rules._ruleset, settings, _schema(schema, "schema"),
                        replica_schema=_schema(replica_schema, "replica_schema"))
    return LintResult(tuple(_break(b) for b in breaks))


def _break(item: Break) -> LintBreak:
    cause = item.cause
    return LintBreak(item.file, item.pos, item.gtid, item.errno, item.message, item.statement,
                     cause.file if cause else None, cause.pos if cause else None, cause.rule if cause else "",
                     cause.reason if cause else "", str(item))


def _decision(decision: _EngineDecision) -> Decision:
    return Decision(decision.apply, decision.reason, decision.rule, tuple(decision.tables), decision.assumption)


def explain(rules: Rules | Sequence[str] | str | None = None, *, sql: str | None = None, table: str | None = None,
            current_db: str | None = None, schema: PathLike | None = None) -> Decision:
    """What a replica with `rules` does with one Query event's `sql` (run with default database
    `current_db`), or with a Table_map of `table` ("db.t"): `dumpfilter explain`."""
    if (sql is None) == (table is None):
        raise RuleError("explain: give exactly one of sql= or table=")
    rules = as_rules(rules)
    engine = RuleEngine(rules._ruleset, rules.settings_for(), schema=_schema(schema, "schema"))
    if table is not None:
        db, dot, name = table.partition(".")
        if not dot:
            raise RuleError(f"explain: table {table!r} is not of the form db.table")
        return _decision(engine.decide_table(db, name))
    assert sql is not None  # exactly one of sql= and table= (checked above)
    return _decision(engine.decide_statement(sql, current_db))


def explain_binlog(binlog: PathLike | Sequence[PathLike], rules: Rules | Sequence[str] | str | None = None, *,
                   schema: PathLike | None = None) -> Iterator[TransactionExplanation]:
    """Every transaction of `binlog` under `rules`, in order: its outcome as `dumpfilter filter`
    (and the master) decide it -- "skipped" where the rules keep nothing, as the master's
    `transactions_skipped` counts it -- and the decision on each statement and Table_map in it."""
    paths = _paths(binlog)
    rules = as_rules(rules)
    engine = RuleEngine(rules._ruleset, rules.settings_for(binlog_format(paths[0]).flavor),
                        schema=_schema(schema, "schema"))
    for file, txn in units(paths):
        if txn.kind == CONTROL:  # never filtered; a Format_description restarts the table ids
            if txn.events[0].type_code == EventType.FORMAT_DESCRIPTION:
                engine.invalidate()
            yield TransactionExplanation(file, txn.start_pos, txn.gtid, "control")
            continue
        decisions = []
        for event, at in decided_events(txn):
            if event.type_code == EventType.TABLE_MAP:
                _, db, name = event.table_map
                decisions.append(EventDecision(at.pos, f"table: {db}.{name}", _decision(engine.decide_table(db, name))))
            else:
                decisions.append(EventDecision(at.pos, f"statement: {event.sql}",
                                               _decision(engine.decide_statement(event.sql or "", event.db))))
        # Rows go with their Table_map: nothing kept is "skipped", the master's word (its Transactions_skipped).
        kept = sum(d.decision.apply for d in decisions)
        outcome = "kept" if kept == len(decisions) else "partial" if kept else "skipped"
        yield TransactionExplanation(file, txn.start_pos, txn.gtid, outcome, tuple(decisions))
