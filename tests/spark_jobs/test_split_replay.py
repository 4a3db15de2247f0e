"""The split's correctness property on real MariaDB: replaying every binlog of schema X into a
server with no user databases gives the same contents for X as replaying the original binlog.

One server holds the original replay; a second one is emptied (every non-system database dropped)
before each schema's binlogs are replayed into it, which is the same as a fresh server for the
user data compared."""

from __future__ import annotations

import pytest

from dumpfilter.binlogs import read_index
from dumpfilter.workload import WorkloadSpec, generate
from dumpfilter.rules.ruleset import Settings
from dumpfilter.lab.sandbox import diff_snapshots, snapshot
from tests.support.binlog_apply import apply_binlog
from dumpfilter.lab.sandbox.snapshot import SYSTEM_SCHEMAS
from dumpfilter.spark_jobs.tasks.local import split_local
from dumpfilter.spark_jobs.tasks.routing import SplitConfig
from dumpfilter.spark_jobs.split_by_schema import split_spark

pytestmark = pytest.mark.mariadb


@pytest.fixture(scope="module")
def servers(mariadb_factory):
    return mariadb_factory("split-orig"), mariadb_factory("split-fresh")


def _empty(server) -> None:
    for row in server.query("SELECT SCHEMA_NAME AS s FROM information_schema.SCHEMATA"):
        if row["s"].lower() not in {s.lower() for s in SYSTEM_SCHEMAS}:
            server.execute(f"DROP DATABASE `{row['s']}`")


CASES = [
    ("row", 0.3, "mysql"),
    ("statement", 0.3, "effective"),  # cross-database statements follow the tables they update
    ("statement", 0.0, "mysql"),      # the MySQL statement rule holds when statements stay in their db
]


@pytest.mark.parametrize("binlog_format, cross, semantics", CASES)
def test_replaying_each_schema_binlog_reproduces_that_schema(servers, tmp_path, binlog_format, cross, semantics):
    orig, fresh = servers
    spec = WorkloadSpec(seed=21, schemas=3, tables_per_schema=2, transactions=300, binlog_format=binlog_format,
                        flavor="mariadb", cross_db_share=cross, ddl_share=0.05, max_binlog_size=40_000)
    paths = generate(spec, tmp_path / "in", "master-bin")
    result = split_local([tmp_path / "in"], tmp_path / "out", SplitConfig(settings=Settings(semantics=semantics)),
                         max_size=30_000, chunk_bytes=20_000)
    assert sorted(s.name for s in result.outputs) == spec.schema_names
    _empty(orig)
    ok, error = apply_binlog(orig, paths)
    assert ok, error
    expected = snapshot(orig, schemas=spec.schema_names)
    for summary in result.outputs:
        _empty(fresh)
        ok, error = apply_binlog(fresh, read_index(tmp_path / "out" / f"{summary.name}-bin.index"))
        assert ok, f"{summary.name}: {error}"
        got = snapshot(fresh, schemas=[summary.name])
        want = snapshot(orig, schemas=[summary.name])
        assert got.tables, summary.name
        assert diff_snapshots(want, got) == [], summary.name
    assert len(expected.tables) >= 6


@pytest.mark.spark
def test_spark_split_replays_too(servers, spark, tmp_path):
    """The Spark output is the same bytes, so it replays the same; checked once end to end."""
    orig, fresh = servers
    spec = WorkloadSpec(seed=22, schemas=2, tables_per_schema=2, transactions=150, binlog_format="row",
                        flavor="mariadb", cross_db_share=0.3, max_binlog_size=30_000)
    paths = generate(spec, tmp_path / "in", "master-bin")
    split_spark(spark, [tmp_path / "in"], tmp_path / "out", SplitConfig(), max_size=20_000, chunk_bytes=10_000)
    _empty(orig)
    assert apply_binlog(orig, paths)[0]
    for schema in spec.schema_names:
        _empty(fresh)
        ok, error = apply_binlog(fresh, read_index(tmp_path / "out" / f"{schema}-bin.index"))
        assert ok, error
        assert diff_snapshots(snapshot(orig, schemas=[schema]), snapshot(fresh, schemas=[schema])) == []
