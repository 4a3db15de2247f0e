"""`--spark-conf KEY=VALUE` (issue #44 item 3): `split` and `experiment` hand each pair to the
session builder, after the defaults, so a harness can pin Spark's ports. Checked without Spark:
`session_settings` is the builder's whole configuration, and `get_session` is run against a
stand-in SparkSession that records what it is given."""

from __future__ import annotations

import sys
import types

import pytest

from dumpfilter.cli.app import build_parser
from dumpfilter.cli.options import spark_conf
from dumpfilter.spark_jobs import session

PORTS = ["spark.ui.port=4050", "spark.driver.port=7078", "spark.blockManager.port=7079"]


@pytest.mark.parametrize("command", [["split", "in", "--out", "o"],
                                     ["experiment", "--binlogs", "b", "--topology", "t", "--out", "o"]])
def test_split_and_experiment_take_repeated_spark_conf(command):
    args = build_parser().parse_args([*command, *(a for p in PORTS for a in ("--spark-conf", p))])
    assert spark_conf(args) == {"spark.ui.port": "4050", "spark.driver.port": "7078",
                                "spark.blockManager.port": "7079"}


def test_a_pair_without_equals_is_refused(capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args(["split", "in", "--out", "o", "--spark-conf", "spark.ui.port"])
    assert "KEY=VALUE" in capsys.readouterr().err


def test_conf_comes_last_and_wins(monkeypatch):
    monkeypatch.delenv("SPARK_MASTER", raising=False)
    master, settings = session.session_settings("local[2]", {"spark.ui.port": "4050",
                                                             "spark.driver.host": "10.0.0.5"})
    assert master == "local[2]"
    assert settings["spark.ui.port"] == "4050"
    assert settings["spark.driver.host"] == "10.0.0.5"  # over the loopback default
    assert session.session_settings("local[2]")[1]["spark.driver.host"] == "127.0.0.1"


def test_the_jvms_compile_with_c1_only(monkeypatch):
    """The driver JVM (in local mode the executor too) runs on C1 (its C2 compiler cost up to a
    third of a job's CPU on 2 cores); on a cluster each executor is a JVM of its own and runs on C1
    too; --spark-conf still wins."""
    monkeypatch.delenv("SPARK_MASTER", raising=False)
    c1 = "-XX:TieredStopAtLevel=1"
    local = session.session_settings("local[2]")[1]
    assert local["spark.driver.extraJavaOptions"] == c1
    assert "spark.executor.extraJavaOptions" not in local  # no executor JVM of its own
    cluster = session.session_settings("spark://127.0.0.1:7077")[1]
    assert cluster["spark.driver.extraJavaOptions"] == c1 and cluster["spark.executor.extraJavaOptions"] == c1
    mine = {"spark.driver.extraJavaOptions": "-Xss4m", "spark.executor.extraJavaOptions": "-Xss8m"}
    assert session.session_settings("local[2]", mine)[1]["spark.driver.extraJavaOptions"] == "-Xss4m"
    assert session.session_settings("spark://h:7077", mine)[1]["spark.executor.extraJavaOptions"] == "-Xss8m"


class _Builder:
    """SparkSession.builder's chain, recording each call."""

    def __init__(self):
        self.configs: dict[str, str] = {}
        self.master_url = None

    def appName(self, name):  # noqa: N802 - pyspark's spelling
        return self

    def master(self, url):
        self.master_url = url
        return self

    def config(self, key, value):
        self.configs[key] = value
        return self

    def getOrCreate(self):  # noqa: N802
        return types.SimpleNamespace(sparkContext=types.SimpleNamespace(setLogLevel=lambda level: None))


def test_the_cli_conf_reaches_the_session_builder(monkeypatch):
    builder = _Builder()
    fake = types.ModuleType("pyspark.sql")
    fake.SparkSession = types.SimpleNamespace(builder=builder)
    monkeypatch.setitem(sys.modules, "pyspark", types.ModuleType("pyspark"))
    monkeypatch.setitem(sys.modules, "pyspark.sql", fake)
    monkeypatch.setenv("SPARK_LOCAL_IP", "127.0.0.1")  # get_session sets these only when unset
    monkeypatch.setenv("PYSPARK_PYTHON", sys.executable)
    args = build_parser().parse_args(["split", "in", "--out", "o", "--spark-master", "local[1]",
                                      "--spark-conf", "spark.ui.port=4050"])
    session.get_session("dumpfilter-split", args.spark_master, spark_conf(args))
    assert builder.master_url == "local[1]"
    assert builder.configs["spark.ui.port"] == "4050"
