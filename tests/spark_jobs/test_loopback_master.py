"""Issue #58 goal 7: `--spark-master` with a master on loopback binds the session on loopback
(SPARK_LOCAL_IP=127.0.0.1 when unset, as local mode does). Without it, on a machine whose
hostname resolves to a loopback address, Spark warned ("Your hostname, ... resolves to a loopback
address: ...; using <another interface's address> instead") and advertised the driver there. A
real standalone cluster on loopback (pyspark's own jars), the command a process of its own
with SPARK_LOCAL_IP unset and no driver address given."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from dumpfilter.spark_jobs.session import on_loopback

from tests.spark_jobs.conftest import IN_CI

LOOPBACK_WARNING = "resolves to a loopback address"


@pytest.mark.parametrize(("master", "loopback"), [
    ("local[2]", True), ("spark://127.0.0.1:7077", True), ("spark://localhost:7077", True),
    ("spark://127.0.0.1:7077,127.0.0.2:7078", True), ("spark://[::1]:7077", True),
    ("spark://192.0.2.7:7077", False), ("spark://127.0.0.1:7077,10.0.0.1:7077", False),
    ("spark://spark-master.example:7077", False), ("yarn", False), (None, False),
])
def test_which_masters_are_on_loopback(master, loopback):
    assert on_loopback(master) is loopback


@pytest.mark.spark
@pytest.mark.timeout(600)
def test_a_loopback_cluster_gets_a_loopback_driver(workloads, tmp_path):
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        message = "Java not found (a Spark standalone cluster needs a JRE)"
        if IN_CI:
            pytest.fail(f"{message} (CI=true: failing instead of skipping)", pytrace=False)
        pytest.skip(message)
    from dumpfilter.lab.spark_cluster import StandaloneCluster

    cluster = StandaloneCluster(workers=1, cores=1, memory="1g").start()
    try:
        env = {k: v for k, v in os.environ.items() if k != "SPARK_LOCAL_IP"}
        env["PYSPARK_PYTHON"] = sys.executable
        run = subprocess.run(
            [sys.executable, "-m", "dumpfilter", "split", str(workloads["row-mariadb"]), "--out",
             str(tmp_path / "out"), "--spark-master", cluster.url, "--spark-conf", "spark.executor.memory=512m",
             "--spark-conf", "spark.ui.enabled=false"],
            capture_output=True, text=True, env=env, stdin=subprocess.DEVNULL, timeout=480)
    finally:
        cluster.stop()
    assert run.returncode == 0, run.stderr[-3000:]
    assert LOOPBACK_WARNING not in run.stderr, run.stderr[-3000:]
    assert any(Path(tmp_path / "out").glob("*-bin.index"))
