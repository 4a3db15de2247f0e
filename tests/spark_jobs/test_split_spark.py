"""The Spark split equals the single-process split byte for byte (whole files and chunks)."""

from __future__ import annotations

import pytest

from dumpfilter.cli.app import main as dumpfilter_main
from dumpfilter.rules.ruleset import Settings
from dumpfilter.spark_jobs.tasks.local import split_local
from dumpfilter.spark_jobs.tasks.routing import SplitConfig, config_from_maps
from dumpfilter.spark_jobs.split_by_schema import split_spark
from tests.spark_jobs.helpers import same_tree

pytestmark = pytest.mark.spark


@pytest.mark.parametrize("workload, config, chunk_bytes", [
    ("row-mariadb", SplitConfig(), 15_000),
    ("statement-mariadb", SplitConfig(settings=Settings(semantics="effective")), None),
    ("mixed-mysql", config_from_maps(["low=db1%", "low=db2%", "high=replicate-wild-do-table=db3.%"]), 20_000),
])
def test_spark_split_is_byte_identical_to_single_process(spark, workloads, tmp_path, workload, config, chunk_bytes):
    src = workloads[workload]
    local = split_local([src], tmp_path / "local", config, max_size=25_000, chunk_bytes=chunk_bytes)
    summaries = split_spark(spark, [src], tmp_path / "spark", config, max_size=25_000, chunk_bytes=chunk_bytes)
    assert summaries == local.outputs
    same_tree(tmp_path / "local", tmp_path / "spark")


def test_cli_split_with_and_without_spark(spark, workloads, tmp_path, capsys):
    src = str(workloads["row-mariadb"])
    common = ["split", src, "--max-binlog-size", "30K", "--map", "a=db1%", "--map", "b=db2.%"]
    assert dumpfilter_main([*common, "--out", str(tmp_path / "s"), "--spark-master", "local[2]"]) == 0
    assert dumpfilter_main([*common, "--out", str(tmp_path / "n"), "--no-spark"]) == 0
    same_tree(tmp_path / "s", tmp_path / "n")
    names = {p.name for p in (tmp_path / "n").iterdir()}
    assert {"a-bin.index", "b-bin.index", "unassigned-bin.index", "a-bin.000001"} <= names
    assert dumpfilter_main([*common, "--out", str(tmp_path / "n"), "--no-spark"]) == 2  # not empty
    assert "not an empty directory" in capsys.readouterr().err
