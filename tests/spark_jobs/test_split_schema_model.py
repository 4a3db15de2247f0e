"""Issue #14: `split` decides with the schema model as `filter` and the master do (docs/schema-model.md),
one model per binlog stream shared by every --map rule set, carried across chunks (and Spark tasks)
by a first in-order pass over the input's DDL, and started from `--schema`."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from dumpfilter.rules.ruleset import Settings
from dumpfilter.rules.schema import SchemaModel
from dumpfilter.spark_jobs.tasks.chunks import plan_chunks, schema_statements
from dumpfilter.spark_jobs.tasks.local import split_local
from dumpfilter.spark_jobs.tasks.routing import Router, chunk_starts, config_from_maps
from tests.rules.test_lint_cases import Build
from tests.spark_jobs.helpers import same_tree, series_events
from tests.oracles.chunk_units import read_units

ROOT = Path(__file__).resolve().parents[2]
UPDATE = "UPDATE t1 LEFT JOIN t4 ON t1.a = t4.c SET d = 0"


def _sqls(directory: Path, name: str) -> list[str]:
    if not (directory / f"{name}-bin.index").exists():
        return []
    return [e.sql for e in series_events(directory, name) if e.is_query]


def _unqualified_set(path: Path, *, ddl: bool = True) -> Path:
    """BUG#37051: only t4 has column d, so t4 is the one table the UPDATE updates."""
    build = Build("mariadb").q("CREATE DATABASE db")
    if ddl:
        build.q("CREATE TABLE t1 (a int, b int)", db="db").q("CREATE TABLE t4 (c int, d int)", db="db")
    build.q("INSERT INTO t1 VALUES (1, 2)", db="db").q(UPDATE, db="db")
    return build.write(path)


@pytest.mark.parametrize("chunk_bytes", [None, 1])  # one chunk; every unit its own chunk
def test_map_split_places_unqualified_set_columns_with_the_model(tmp_path, chunk_bytes):
    # replicate-ignore-table=db.t1: the UPDATE updates t4 only (t1 is read, not written), so a
    # replica with this rule applies it. Without the model every joined table counts as updated
    # and the ignored t1 drops the statement.
    binlog = _unqualified_set(tmp_path / "in-bin.000001")
    config = config_from_maps(["keep=replicate-ignore-table=db.t1"], Settings(flavor="mariadb"))
    split_local([binlog], tmp_path / "out", config, chunk_bytes=chunk_bytes)
    assert UPDATE in _sqls(tmp_path / "out", "keep")
    assert UPDATE not in _sqls(tmp_path / "out", "unassigned")


def _trigger_binlog(path: Path) -> tuple[Path, str]:
    """MariaDB checks a multi-table UPDATE after opening its tables: the tables its triggers write
    count (docs/schema-model.md, observed on 10.11). The trigger on t1 writes db.audit."""
    build = Build("mariadb").q("CREATE DATABASE db")
    for ddl in ("CREATE TABLE t1 (a int)", "CREATE TABLE t2 (b int)", "CREATE TABLE audit (x int)",
                "CREATE TRIGGER tr AFTER UPDATE ON t1 FOR EACH ROW INSERT INTO audit VALUES (NEW.a)"):
        build.q(ddl, db="db")
    sql = "UPDATE t1 JOIN t2 ON t1.a = t2.b SET t1.a = 5"
    build.q("INSERT INTO t2 VALUES (1)", db="db").q(sql, db="db")
    return build.write(path), sql


def test_map_split_counts_the_tables_a_trigger_writes(tmp_path):
    # replicate-ignore-table=db.audit: the replica applied CREATE TRIGGER (its table t1 is kept),
    # and the trigger writes the ignored audit, so the replica skips the UPDATE. Without the model
    # the UPDATE (t1 only) would be kept.
    binlog, sql = _trigger_binlog(tmp_path / "in-bin.000001")
    config = config_from_maps(["x=replicate-ignore-table=db.audit"], Settings(flavor="mariadb"))
    split_local([binlog], tmp_path / "out", config)
    assert "CREATE TABLE t1 (a int)" in _sqls(tmp_path / "out", "x")
    assert sql not in _sqls(tmp_path / "out", "x")
    assert sql in _sqls(tmp_path / "out", "unassigned")


def test_a_chunk_routed_alone_starts_from_the_first_pass_state(tmp_path):
    # Spark routes chunks in any task: a fresh Router on the UPDATE's chunk alone must decide as a
    # reader of the whole stream does, from chunk_starts' model and trigger knowledge.
    binlog, sql = _trigger_binlog(tmp_path / "in-bin.000001")
    config = config_from_maps(["x=replicate-ignore-table=db.audit"], Settings(flavor="mariadb"))
    chunks = plan_chunks([binlog], 1)
    starts = chunk_starts(config, (schema_statements(c) for c in chunks))
    last = chunks[-1]
    routed = []
    router = Router(config)
    router.start_chunk(starts[-1])
    for txn in read_units(last):
        routed += [(name, [e.sql for e in events if e.is_query]) for name, events in router.route(txn)]
    assert any(sql in sqls for name, sqls in routed if name == "unassigned"), routed
    assert not any(sql in sqls for name, sqls in routed if name == "x"), routed


def test_one_model_per_stream_is_shared_by_every_map(tmp_path, monkeypatch):
    binlog = _unqualified_set(tmp_path / "in-bin.000001")
    observed = []
    real = SchemaModel.observe
    monkeypatch.setattr(SchemaModel, "observe", lambda self, sql, *a, **k: (observed.append(sql),
                                                                               real(self, sql, *a, **k))[1])
    replays = {}
    for maps in (["a=db.%"], ["a=db.%", "b=replicate-ignore-table=db.t1", "c=replicate-do-db=db"]):
        config = config_from_maps(maps, Settings(flavor="mariadb"))
        router = Router(config)
        assert len({id(engine.schema) for engine in router._engines}) == 1
        assert all(engine.schema is router.schema for engine in router._engines)
        observed.clear()
        split_local([binlog], tmp_path / f"out{len(maps)}", config)
        replays[len(maps)] = observed.count("CREATE TABLE t4 (c int, d int)")
    # Each DDL is replayed by the first pass and by the stream's router: as often for three maps as
    # for one (one model per stream, not one per rule engine).
    assert replays[3] == replays[1] == 2, replays


def test_split_schema_option_starts_the_model(tmp_path):
    # The tables were created before the binlog: only --schema tells which one has column d.
    binlog = _unqualified_set(tmp_path / "in-bin.000001", ddl=False)
    schema = tmp_path / "schema.sql"
    schema.write_text("CREATE DATABASE db;\nUSE db;\nCREATE TABLE t1 (a int, b int);\nCREATE TABLE t4 (c int, d int);\n")
    common = [sys.executable, "-m", "dumpfilter", "split", str(binlog), "--no-spark",
              "--map", "keep=replicate-ignore-table=db.t1"]
    with_schema = subprocess.run([*common, "--out", str(tmp_path / "with"), "--schema", str(schema)],
                                 capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert with_schema.returncode == 0, with_schema.stderr
    assert UPDATE in _sqls(tmp_path / "with", "keep")
    without = subprocess.run([*common, "--out", str(tmp_path / "without")], capture_output=True, text=True,
                             cwd=ROOT, timeout=120)
    assert without.returncode == 0, without.stderr
    assert UPDATE not in _sqls(tmp_path / "without", "keep")  # assumption 1: every joined table updated


@pytest.mark.spark
def test_spark_split_uses_the_same_model(spark, tmp_path):
    from dumpfilter.spark_jobs.split_by_schema import split_spark

    binlog, sql = _trigger_binlog(tmp_path / "in-bin.000001")
    config = config_from_maps(["x=replicate-ignore-table=db.audit", "keep=replicate-ignore-table=db.t2"],
                              Settings(flavor="mariadb"))
    split_local([binlog], tmp_path / "local", config)
    split_spark(spark, [binlog], tmp_path / "spark", config, chunk_bytes=1)  # every unit its own chunk
    same_tree(tmp_path / "local", tmp_path / "spark")
    assert sql not in _sqls(tmp_path / "spark", "x")
