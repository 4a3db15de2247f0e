"""Issue #81's real-replica oracle for a generated workload: runs it on a real MariaDB primary, lints
the primary's binlog for each rule set, replicates it to a real replica with those rules, and lists
every statement whose writes lint and the replica's rows disagree on (and any stop they disagree on).

Truth, per statement id and table of the primary: a table the rules keep (as a row event of it is
judged: `RuleEngine.decide_table`) must hold on the replica (under its rewrite-db name) the primary's
rows of that statement, else the write is `lost`; a table the rules do not keep, or one the rules
rename away, must hold on the replica (under its own name) the seed's rows, else the write is
`applied`. Lint's side: each divergent write it names (`rules.lint_divergence.Write`) is mapped to its
statement id by the binlog position of its Query event, and to the tables it names of its kind."""

from __future__ import annotations

import bisect
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from hypothesis import HealthCheck, Phase

from dumpfilter.binlogs.lint import new_linter
from dumpfilter.binlogs.lint_scan import lint_scan
from dumpfilter.lab.sandbox import MariaDBServer, make_replica, wait_caught_up
from dumpfilter.rules.lint_divergence import APPLIED, LOST, MISPLACED, SHADOWED
from dumpfilter.rules.ruleset import RuleSet, Settings
from dumpfilter.rules.schema import SchemaModel
from tests.support.divergence_grammar import (DBS, TABLES, WAIT, Item, replica_databases, schema_ddl, seed, seed_rows,
                                              trigger_ddl)
from tests.support.waiting import wait_for

FORMATS = ("STATEMENT", "MIXED", "ROW")
# Hypothesis settings of both tiers: seeds pinned, no example database, no shrinking (each example
# costs real servers, and a failing one lists every mismatching write).
PINNED = dict(database=None, derandomize=True, deadline=None, phases=[Phase.explicit, Phase.generate],
              suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
FILTER_VARS = ("replicate_do_db", "replicate_ignore_db", "replicate_do_table", "replicate_ignore_table",
               "replicate_wild_do_table", "replicate_wild_ignore_table", "replicate_rewrite_db")
SYSTEM = ("mysql", "information_schema", "performance_schema", "sys")
Key = tuple[int, str, str]  # (statement id, primary table db.name, lost/applied)
Rows = dict[tuple[str, int], list[tuple[int, int, int]]]  # (table, sid) -> sorted (id, sid, v)


@dataclass
class Run:
    """The workload as one primary ran it: its binlog files and where each statement's events lie."""

    fmt: str
    items: list[Item]
    binlogs: list[Path]
    file: str
    starts: list[int]  # each item's first byte in `file`, in order
    rows: Rows

    def sid_at(self, file: str, pos: int) -> int | None:
        """The statement id whose events hold (file, pos)."""
        if file != self.file or pos < self.starts[0]:
            return None
        return self.items[bisect.bisect_right(self.starts, pos) - 1].sid

    def item(self, sid: int) -> Item:
        return self.items[sid - 1]


@dataclass
class Verdict:
    """One rule set against one run: the writes each side names, the stop each side names."""

    fmt: str
    rules: RuleSet
    lint: set[Key]
    truth: set[Key]
    lint_stop: tuple[int, str, int] | None  # (errno, file, pos)
    replica_stop: tuple[int, str, int] | None
    last_sid: int  # statements after it are not compared (the replica stopped before them)
    detail: dict[Key, str] = field(default_factory=dict)

    def mismatches(self, run: Run) -> list[str]:
        out = []
        if self.lint_stop != self.replica_stop:
            out.append(f"[{self.fmt}] {self.rules.option_lines()}: stop: lint {self.lint_stop}, "
                       f"replica {self.replica_stop}")
        for key in sorted(self.lint ^ self.truth):
            sid, table, kind = key
            said = "names it" if key in self.lint else "does not name it"
            seen = "shows it" if key in self.truth else "does not show it"
            out.append(f"[{self.fmt}] {self.rules.option_lines()}: sid {sid} ({run.item(sid).shape}) "
                       f"`{run.item(sid).text()}`: {kind} write to {table}: lint {said}, the replica {seen} "
                       f"({self.detail.get(key, '')})")
        return out


def start_servers(mariadb_factory, prefix: str) -> tuple[dict[str, MariaDBServer], MariaDBServer]:
    """One primary per format (format -> primary, each reused across examples) and one replica."""
    primaries = {fmt: mariadb_factory(f"{prefix}-{fmt.lower()}", binlog_format=fmt) for fmt in FORMATS}
    return primaries, mariadb_factory(f"{prefix}-replica", log_bin=False)


def user_databases(server: MariaDBServer) -> list[str]:
    rows = server.query("SELECT SCHEMA_NAME AS s FROM information_schema.SCHEMATA")
    return [r["s"] for r in rows if r["s"] not in SYSTEM]


def table_rows(server: MariaDBServer, databases: list[str]) -> Rows:
    out: Rows = defaultdict(list)
    for db in databases:
        for t in TABLES:
            for r in server.query(f"SELECT id, sid, v FROM {db}.{t} ORDER BY sid, id, v"):
                out[(f"{db}.{t}", r["sid"])].append((r["id"], r["sid"], r["v"]))
    return out


def run_primary(primary: MariaDBServer, fmt: str, items: list[Item]) -> Run:
    """Seeds the primary outside its binlog, then runs each item on a connection of its own (no
    default database unless the item says USE) in `fmt`, noting where its events start."""
    databases = {db: db for db in DBS}
    primary.execute(["SET SESSION sql_log_bin = 0", *[f"DROP DATABASE `{n}`" for n in user_databases(primary)],
                     *seed(databases, len(items))])
    primary.reset_master()
    primary.execute(["SET GLOBAL log_bin_trust_function_creators = 1",  # (CREATE FUNCTION)
                     "SET GLOBAL event_scheduler = ON"])
    files = primary.root / "tmp"  # (the server's own tmpdir: its LOAD DATA INFILE reads there)
    file, starts = "", []
    for item in items:
        for name, text in item.data_files().items():
            (files / name).write_text(text)
        file, pos = primary.master_position()
        starts.append(pos)
        with primary.connect() as conn, conn.cursor() as cur:
            cur.execute(f"SET SESSION binlog_format = '{fmt}'")
            for line in item.sql(str(files)):
                if line.startswith(WAIT):
                    query = line[len(WAIT):]
                    assert wait_for(lambda: list(primary.query(query)[0].values()) == [1]), line
                    continue
                cur.execute(line)
    end_file, _ = primary.master_position()
    assert end_file == file, (file, end_file)  # one binlog file: positions order the statements
    primary.flush_logs()
    return Run(fmt, items, primary.binlog_files(), file, starts, table_rows(primary, list(DBS)))


def master_schema() -> SchemaModel:
    databases = {db: db for db in DBS}
    return SchemaModel.from_sql(";\n".join(schema_ddl(databases) + trigger_ddl(databases)) + ";\n")


def lint_run(run: Run, rule_sets: list[RuleSet]) -> list[tuple[set[Key], tuple[int, str, int] | None]]:
    """Lint's divergent writes (as keys) and first stop, per rule set, in one scan of the run's binlog."""
    settings = Settings(flavor="mariadb")
    schema = master_schema()
    linters = []
    for rules in rule_sets:
        replica = replica_databases(rules)
        own = SchemaModel.from_sql(";\n".join(schema_ddl(replica) + trigger_ddl(replica)) + ";\n")
        linter = new_linter(rules, settings, schema, own)
        linter.breaks.divergence.keep = 1_000_000
        linters.append(linter)
    out = []
    for linter, breaks in zip(linters, lint_scan(run.binlogs, linters)):
        engine = linter.engine
        keys: set[Key] = set()
        for group in breaks.divergence.groups.values():
            for write in group.writes:
                sid = run.sid_at(write.file, write.pos)
                assert sid is not None, write
                if group.kind == MISPLACED:
                    # as the replica's rows show it: the table its rows would reach (the rewritten
                    # database's) lost the write, the table the text names got it
                    keys.update((sid, table, LOST) for table in write.tables)
                    keys.update((sid, table, APPLIED) for table in write.landed)
                    continue
                for table in write.tables:
                    db, name = table.split(".", 1)
                    kept = engine.decide_table(db, name).apply
                    renamed = engine.rewrite_db(db)[0] != db
                    if group.kind == SHADOWED:  # written from the wrong rows: a kept table differs, another was written
                        keys.add((sid, table, LOST if kept else APPLIED))
                    elif (group.kind == LOST and kept) or (group.kind == APPLIED and (not kept or renamed)):
                        keys.add((sid, table, group.kind))
        stop = (breaks[0].errno, breaks[0].file, breaks[0].pos) if breaks else None
        out.append((keys, stop))
    return out


def replicate(primary: MariaDBServer, replica: MariaDBServer, rules: RuleSet, statements: int) \
        -> tuple[tuple[int, str, int] | None, Rows]:
    """The replica seeded as the rules want it (rewrite targets too), its filters set, replicating the
    primary's whole binlog: its stop (errno, file, pos) or None, and its rows."""
    databases = replica_databases(rules)
    replica.execute(["STOP SLAVE", "RESET SLAVE ALL"])
    replica.execute([f"DROP DATABASE `{n}`" for n in user_databases(replica)] + seed(databases, statements))
    values = dict.fromkeys(FILTER_VARS, "")
    for line in rules.option_lines():
        name, _, value = line.partition("=")
        var = name.replace("-", "_")
        values[var] = ",".join(v for v in (values[var], value) if v)
    replica.execute([f"SET GLOBAL {name} = '{value}'" for name, value in values.items()])
    make_replica(primary, replica)
    status = wait_caught_up(primary, replica, timeout=120)
    stop = None
    if not status.caught_up:
        assert status.stopped_with_error, status.describe()
        stop = (status.last_sql_errno, status.relay_master_log_file, status.exec_master_log_pos)
    replica.execute(["STOP SLAVE"])
    return stop, table_rows(replica, list(databases))


def truth(run: Run, rules: RuleSet, rows: Rows, last_sid: int) -> tuple[set[Key], dict[Key, str]]:
    """The writes the replica's rows show diverging, per statement id up to `last_sid`."""
    engine = new_linter(rules, Settings(flavor="mariadb")).engine
    keys: set[Key] = set()
    detail: dict[Key, str] = {}
    for db in DBS:
        for t in TABLES:
            table = f"{db}.{t}"
            kept = engine.decide_table(db, t).apply
            target = f"{engine.rewrite_db(db)[0]}.{t}"
            for sid in range(1, last_sid + 1):
                primary, seeded = run.rows.get((table, sid), []), seed_rows(table, sid)
                there = rows.get((target, sid), [])
                if kept and there != primary:
                    keys.add((sid, table, LOST))
                    detail[(sid, table, LOST)] = f"primary {primary}, replica's {target} {there}"
                if not kept and there != seeded:
                    keys.add((sid, table, APPLIED))
                    detail[(sid, table, APPLIED)] = f"seed {seeded}, replica {there}"
                if target != table and rows.get((table, sid), []) != seeded:
                    keys.add((sid, table, APPLIED))
                    detail[(sid, table, APPLIED)] = f"seed {seeded}, replica's {table} {rows.get((table, sid))}"
    return keys, detail


def check(primary: MariaDBServer, replica: MariaDBServer, fmt: str, items: list[Item],
          rule_sets: list[RuleSet]) -> tuple[Run, list[Verdict]]:
    """Every rule set against one run of `items` on `primary` in `fmt`."""
    run = run_primary(primary, fmt, items)
    verdicts = []
    for rules, (lint_keys, lint_stop) in zip(rule_sets, lint_run(run, rule_sets)):
        replica_stop, rows = replicate(primary, replica, rules, len(items))
        stops = [s for s in (lint_stop, replica_stop) if s is not None]
        last = len(items)
        if stops:  # compare only the statements both sides ran: those before the earlier stop
            errno, file, pos = min(stops, key=lambda s: s[2])
            at = run.sid_at(file, pos)
            last = (at - 1) if at is not None else len(items)
        keys, detail = truth(run, rules, rows, last)
        verdicts.append(Verdict(fmt, rules, {k for k in lint_keys if k[0] <= last}, keys, lint_stop, replica_stop,
                                last, detail))
    return run, verdicts


def check_all(primaries: dict[str, MariaDBServer], replica: MariaDBServer, items: list[Item],
              rule_sets: list[RuleSet]) -> list[tuple[Run, list[Verdict]]]:
    """`check` in each format of `primaries` (format -> the primary that logs in it)."""
    return [check(primary, replica, fmt, items, rule_sets) for fmt, primary in primaries.items()]


def assert_agree(servers: tuple[dict[str, MariaDBServer], MariaDBServer],
                 drawn: tuple[list[Item], list[RuleSet]]) -> None:
    """Both tiers' check of one drawn example: no mismatch in any format, each listed if any."""
    primaries, replica = servers
    items, rule_sets = drawn
    mismatches = report(check_all(primaries, replica, items, rule_sets))
    assert not mismatches, f"{len(mismatches)} mismatch(es) between lint and the real replicas:\n" + \
        "\n".join(mismatches)


def report(checked: list[tuple[Run, list[Verdict]]]) -> list[str]:
    """Each mismatching write or stop, one line each."""
    return [line for run, verdicts in checked for v in verdicts for line in v.mismatches(run)]

