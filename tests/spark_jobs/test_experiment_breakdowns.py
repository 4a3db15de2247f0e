"""What `experiment` reports beside its totals (issue #40, goal 6): bytes by hour of binlog time
and by `schema.table`, per slave, as CSV or Parquet, with a chart. The hours add up to each slave's
totals, whatever the chunk cuts; a table's bytes are those of its Table_map and Rows events and
of the statements that update it, as the codec reads them event by event; a slave's table rows add up to what it is sent."""

from __future__ import annotations

import csv
from collections import defaultdict

import pytest

from dumpfilter.codec import EventType, group_transactions, read_events
from dumpfilter.codec.constants import HEADER_LEN
from dumpfilter.rules.statements import statement_tables
from dumpfilter.spark_jobs.bandwidth_experiment import run_experiment
from dumpfilter.spark_jobs.tasks.chunks import input_files
from dumpfilter.topology import parse_topology
from dumpfilter.workload import WorkloadSpec, generate

TOPOLOGY = """
[[slaves]]
name = "all"
server_id = 2

[[slaves]]
name = "db1"
server_id = 3
rules = ["replicate-do-db=db1"]

[[slaves]]
name = "not-t1-ph"
server_id = 4
rules = ["replicate-wild-ignore-table=%.t1"]
skip_policy = "placeholder"

[[slaves]]
name = "db2-empty"
server_id = 5
rules = ["replicate-do-db=db2"]
skip_policy = "empty-transaction"
"""
_ROWS = {EventType.WRITE_ROWS, EventType.UPDATE_ROWS, EventType.DELETE_ROWS, EventType.WRITE_ROWS_V1,
         EventType.UPDATE_ROWS_V1, EventType.DELETE_ROWS_V1}


@pytest.fixture(scope="module")
def hours_long(tmp_path_factory):
    """A ROW binlog series whose binlog time spans about three hours (the generator's clock moves
    0 or 1 second per transaction)."""
    root = tmp_path_factory.mktemp("hours")
    spec = WorkloadSpec(seed=8, schemas=3, tables_per_schema=2, transactions=20_000, binlog_format="row",
                        flavor="mariadb", max_binlog_size=3_000_000)
    generate(spec, root, "master-bin")
    return root


def _csv(path) -> list[dict]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def _reference(src):
    """Per hour, the bytes of the units whose first event falls in it; per (db, table), its
    Table_map and Rows events' bytes: from the codec's events, one by one."""
    hours: dict[int, int] = defaultdict(int)
    tables: dict[str, int] = defaultdict(int)
    for path in input_files([src]):
        events = read_events(path.read_bytes())
        hour = None
        for unit in group_transactions(events):
            stamp = unit.events[0].timestamp  # 0 (an artificial event): the hour before it
            hour = stamp // 3600 * 3600 if stamp else hour
            hours[hour] += unit.size
            names = {}
            for e in unit.events:
                if e.type_code == EventType.TABLE_MAP:
                    names[e.raw[HEADER_LEN:HEADER_LEN + 6]] = "{1}.{2}".format(*e.table_map)
                    tables[names[e.raw[HEADER_LEN:HEADER_LEN + 6]]] += e.size
                elif e.type_code in _ROWS:
                    tables[names[e.raw[HEADER_LEN:HEADER_LEN + 6]]] += e.size
                elif e.is_query:  # a statement's bytes go to the one table it updates (issue #60: the DDL here)
                    updated = statement_tables(e.sql, e.db).updated
                    if len(updated) == 1:
                        tables[f"{updated[0][0]}.{updated[0][1]}"] += e.size
    return dict(hours), dict(tables)


@pytest.mark.parametrize("chunk_bytes", [None, 400_000])
def test_hours_and_tables_add_up_and_match_the_events(tmp_path, hours_long, chunk_bytes):
    topology = parse_topology(TOPOLOGY)
    rows, paths = run_experiment(hours_long, topology, tmp_path / "out", chunk_bytes=chunk_bytes)
    names = {p.name for p in paths}
    assert {"bandwidth_by_hour.csv", "bandwidth_by_table.csv", "bandwidth_by_hour.png"} <= names
    hours, tables = _csv(tmp_path / "out" / "bandwidth_by_hour.csv"), _csv(tmp_path / "out" / "bandwidth_by_table.csv")
    ref_hours, ref_tables = _reference(hours_long)
    assert len(ref_hours) >= 3
    for row in rows:
        mine = [h for h in hours if h["slave"] == row["slave"]]
        assert {int(h["hour_epoch"]): int(h["bytes_all"]) for h in mine} == ref_hours
        assert sum(int(h["bytes_sent"]) for h in mine) == row["bytes_sent"]
        assert sum(int(h["bytes_all"]) for h in mine) == row["bytes_all"]
        by_table = [t for t in tables if t["slave"] == row["slave"]]
        assert sum(int(t["bytes_sent"]) for t in by_table) == row["bytes_sent"]
        assert sum(int(t["bytes_all"]) for t in by_table) == row["bytes_all"]
        named = {t["table"]: int(t["bytes_payload"]) for t in by_table if not t["table"].startswith("(")}
        assert named == ref_tables  # and each table's share of its transactions' envelopes beside it (issue #60)
        assert all(int(t["bytes_all"]) == int(t["bytes_payload"]) + int(t["bytes_envelope"]) for t in by_table)
    db1 = {t["table"]: int(t["bytes_sent"]) for t in tables if t["slave"] == "db1" and not t["table"].startswith("(")}
    assert db1 and all((size > 0) == table.startswith("db1.") for table, size in db1.items())
    everything = {t["table"]: (int(t["bytes_sent"]), int(t["bytes_all"])) for t in tables if t["slave"] == "all"}
    assert all(everything[t][0] == everything[t][1] for t in ref_tables)


def test_parquet_breakdowns(tmp_path, hours_long):
    pq = pytest.importorskip("pyarrow.parquet")
    run_experiment(hours_long, parse_topology(TOPOLOGY), tmp_path / "out", fmt="parquet")
    table = pq.read_table(tmp_path / "out" / "bandwidth_by_table.parquet").to_pylist()
    hours = pq.read_table(tmp_path / "out" / "bandwidth_by_hour.parquet").to_pylist()
    assert {r["slave"] for r in table} == {r["slave"] for r in hours} == {"all", "db1", "not-t1-ph", "db2-empty"}


def test_no_charts_writes_the_tables_only(tmp_path, hours_long):
    rows, paths = run_experiment(hours_long, parse_topology(TOPOLOGY), tmp_path / "out", charts=False)
    assert sorted(p.name for p in paths) == ["bandwidth.csv", "bandwidth_by_hour.csv", "bandwidth_by_table.csv"]
    assert not list((tmp_path / "out").glob("*.png")) and len(rows) == 4
