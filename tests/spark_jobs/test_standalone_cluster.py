"""`split` and `experiment` submitted to a real Spark standalone cluster (issue #40): a Master and
two Workers from pyspark's own jars on loopback (dumpfilter.lab.spark_cluster), the command a
process of its own with `--spark-master spark://127.0.0.1:PORT`. The split is byte-identical to
the one this process writes, the counts equal, and the Master saw the application run on its
workers' executors. Every cluster process is stopped by its PID."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.spark_jobs.conftest import IN_CI

pytestmark = [pytest.mark.spark, pytest.mark.timeout(600)]

TOPOLOGY = """
[[slaves]]
name = "db1"
server_id = 2
rules = ["replicate-do-db=db1"]

[[slaves]]
name = "not-db2-ph"
server_id = 3
rules = ["replicate-ignore-db=db2"]
skip_policy = "placeholder"

[[slaves]]
name = "one-table-empty"
server_id = 4
rules = ["replicate-do-table=db3.t1"]
skip_policy = "empty-transaction"
"""


@pytest.fixture(scope="module")
def cluster():
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        message = "Java not found (a Spark standalone cluster needs a JRE)"
        if IN_CI:
            pytest.fail(f"{message} (CI=true: failing instead of skipping)", pytrace=False)
        pytest.skip(message)
    from dumpfilter.lab.spark_cluster import StandaloneCluster

    c = StandaloneCluster(workers=2, cores=1, memory="1g").start()
    yield c
    pids = c.pids()
    c.stop()
    for pid in pids:  # stopped by PID: none is left running
        assert not Path(f"/proc/{pid}").exists() or _zombie(pid), pid


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1].startswith("Z")
    except OSError:
        return True


def _dumpfilter(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable)
    proc = subprocess.run([sys.executable, "-m", "dumpfilter", *args], capture_output=True, text=True, env=env,
                          stdin=subprocess.DEVNULL, timeout=480)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


def _tree(directory: Path) -> dict[str, bytes]:
    return {p.relative_to(directory).as_posix(): p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()}


def _spark_conf(cluster) -> list[str]:
    # Executors small enough that both workers run one; the UI off (a port less to pin).
    return ["--spark-master", cluster.url, "--spark-conf", "spark.executor.memory=512m",
            "--spark-conf", "spark.executor.cores=1", "--spark-conf", "spark.ui.enabled=false",
            "--spark-conf", "spark.driver.host=127.0.0.1", "--spark-conf", "spark.driver.bindAddress=127.0.0.1"]


def test_split_on_the_cluster_is_the_split_of_one_process(cluster, workloads, tmp_path):
    src = workloads["row-mariadb"]
    apps_before = len(cluster.status().get("completedapps", []))
    _dumpfilter("split", str(src), "--out", str(tmp_path / "cluster"), "--chunk-bytes", "20000",
                *_spark_conf(cluster))
    _dumpfilter("split", str(src), "--out", str(tmp_path / "local"), "--chunk-bytes", "20000", "--no-spark")
    on_cluster, local = _tree(tmp_path / "cluster"), _tree(tmp_path / "local")
    assert len(local) > 4 and sorted(on_cluster) == sorted(local)
    for name, data in local.items():
        assert on_cluster[name] == data, name
    apps = cluster.status().get("completedapps", [])
    assert len(apps) == apps_before + 1  # the split ran as an application of this Master,
    app = apps[-1]["id"]  # and on an executor of each worker (their work directories name it)
    assert all((cluster.dir / f"worker-{k}" / app).is_dir() for k in range(2)), app


def test_experiment_on_the_cluster_counts_as_one_process(cluster, workloads, tmp_path):
    topology = tmp_path / "topology.toml"
    topology.write_text(TOPOLOGY)
    rows = {}
    for where, extra in (("cluster", _spark_conf(cluster)), ("local", ["--no-spark"])):
        report = tmp_path / f"{where}.json"
        _dumpfilter("experiment", "--binlogs", str(workloads["row-mariadb"]), "--topology", str(topology),
                    "--out", str(tmp_path / where), "--chunk-bytes", "20000", "--json", str(report), *extra)
        rows[where] = json.loads(report.read_text())
    # The same rows for every slave; only the report files' paths differ.
    assert len(rows["local"]["slaves"]) == 3 and rows["local"]["slaves"][0]["events_sent"] > 0
    assert rows["cluster"]["slaves"] == rows["local"]["slaves"]
