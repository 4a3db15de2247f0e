"""`explain --binlog-format ROW` against a real MariaDB replica: under ROW a write's rows reach the
replica behind a Table_map per table, and the replica decides each table alone, by its own database
(never the statement's default one). Each write of a small workload (single-table writes with the
same, another and no default database; multi-table UPDATE and DELETE) runs on a real primary in
ROW; each rule set is set on a real replica, which replicates the whole binlog, and `explain --batch`
(the command, one process per rule set) must name, table by table, the writes the replica's rows show
applied and skipped."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from dumpfilter.rules.ruleset import RuleSet
from tests.support.divergence_grammar import Item, seed_rows
from tests.support.divergence_oracle import replicate, run_primary

pytestmark = pytest.mark.mariadb

ROOT = Path(__file__).resolve().parents[2]
ITEMS = [Item(sid, shape, op, use, dbs) for sid, (shape, op, use, dbs) in enumerate([
    ("single-same-db", "insert", "crm", ("crm",)), ("single-cross-db", "update", "logs", ("crm",)),
    ("single-cross-db", "delete", "crm", ("shop",)), ("single-no-db", "update", None, ("logs",)),
    ("multi-update", "update", "logs", ("crm", "shop")), ("multi-delete", "delete", "shop", ("logs", "crm")),
    ("multi-update", "update", None, ("shop", "logs"))], 1)]
RULE_SETS = [RuleSet(do_db=("crm",)), RuleSet(ignore_db=("crm", "shop")), RuleSet(do_table=("crm.t1", "logs.t1")),
             RuleSet(wild_ignore_table=("shop.%",)), RuleSet(rewrite_db=(("crm", "crm_copy"),), do_db=("crm_copy",))]


def _explain(rules: RuleSet, fmt: str) -> list[dict]:
    filters: dict[str, list[str]] = {}
    for line in rules.option_lines():
        name, _, value = line.partition("=")
        filters.setdefault(name.replace("-", "_"), []).append(value)
    lines = [json.dumps({"sql": item.sql()[-1], "current_db": item.use, "binlog_format": fmt, "filters": filters})
             for item in ITEMS]
    proc = subprocess.run([sys.executable, "-m", "dumpfilter", "explain", "--flavor", "mariadb", "--batch", "-"],
                          input="\n".join(lines) + "\n", cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return [json.loads(line) for line in proc.stdout.splitlines()]


def _per_table(item: Item, document: dict) -> dict[str, bool]:
    """Table (the master's name) -> whether explain says the replica applies its rows."""
    if "rows" in document:
        return {row["table"]: row["decision"] == "apply" for row in document["rows"]}
    return {f"{item.dbs[0]}.t1": document["decision"] == "apply"}


@pytest.fixture(scope="module")
def servers(mariadb_factory):
    primary = mariadb_factory("explain-row", binlog_format="ROW")
    return primary, mariadb_factory("explain-row-replica", log_bin=False), run_primary(primary, "ROW", ITEMS)


@pytest.mark.parametrize("rules", RULE_SETS, ids=lambda r: r.option_lines()[0])
def test_explain_row_names_the_rows_a_real_replica_applies(servers, rules):
    primary, replica, run = servers
    stop, rows = replicate(primary, replica, rules, len(ITEMS))
    assert stop is None, stop
    rewrite = dict(rules.rewrite_db)
    said = _explain(rules, "ROW")
    for item, document in zip(ITEMS, said):
        tables = _per_table(item, document)
        assert set(tables) == {f"{db}.t1" for db in item.dbs}, (item, document)
        for table, applied in tables.items():
            db, name = table.split(".")
            there = rows.get((f"{rewrite.get(db, db)}.{name}", item.sid), [])
            primary_rows, seeded = run.rows.get((table, item.sid), []), seed_rows(table, item.sid)
            assert primary_rows != seeded, (item, table)  # the write changed rows: the test tells them apart
            assert there == (primary_rows if applied else seeded), (item.sql(), table, document["reason"], there)


def test_row_and_statement_answers_differ_where_the_default_database_decides():
    """Not vacuous: under replicate-do-db the ROW answer of a cross-database write is the table's,
    the STATEMENT answer the default database's."""
    rules = RuleSet(do_db=("crm",))
    row, statement = _explain(rules, "ROW"), _explain(rules, "STATEMENT")
    cross = ITEMS.index(next(i for i in ITEMS if i.shape == "single-cross-db" and i.dbs == ("crm",)))
    assert (row[cross]["decision"], statement[cross]["decision"]) == ("apply", "skip")
    assert "table database 'crm'" in row[cross]["reason"] and "default database 'logs'" in statement[cross]["reason"]
