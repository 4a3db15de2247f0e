"""Spark test wiring: one session-scoped local[2] session (UI off, 2 shuffle partitions, workers on
this interpreter), and workloads generated once per session. Without Java the Spark tests skip,
or fail under CI=true."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

from dumpfilter.workload import WorkloadSpec, generate

IN_CI = os.environ.get("CI", "").strip().lower() in ("true", "1", "yes")


@pytest.fixture(scope="session")
def spark():
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        message = "Java not found (Spark needs a JRE: apt-get install default-jre-headless)"
        if IN_CI:
            pytest.fail(f"{message} (CI=true: failing instead of skipping)", pytrace=False)
        pytest.skip(message)
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from dumpfilter.spark_jobs.session import get_session

    session = get_session("dumpfilter-tests", "local[2]", {
        "spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "2",
        "spark.default.parallelism": "2", "spark.driver.memory": "1g"})
    yield session
    session.stop()


@pytest.fixture(scope="session")
def workloads(tmp_path_factory) -> dict[str, Path]:
    """Directories of generated binlogs, several files each (small max_binlog_size)."""
    root = tmp_path_factory.mktemp("workloads")
    specs = {
        "row-mariadb": WorkloadSpec(seed=11, schemas=4, tables_per_schema=2, transactions=600,
                                    binlog_format="row", flavor="mariadb", max_binlog_size=60_000),
        "statement-mariadb": WorkloadSpec(seed=12, schemas=4, tables_per_schema=2, transactions=600,
                                          binlog_format="statement", flavor="mariadb", max_binlog_size=60_000),
        "mixed-mysql": WorkloadSpec(seed=13, schemas=4, tables_per_schema=2, transactions=600,
                                    binlog_format="mixed", flavor="mysql", max_binlog_size=60_000),
    }
    out = {}
    for name, spec in specs.items():
        generate(spec, root / name, "master-bin")
        out[name] = root / name
    return out
