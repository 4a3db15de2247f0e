"""Starting (or joining) a Spark session for the jobs.

The master is never hard-coded: under `spark-submit` the session takes spark-submit's `--master`;
run directly (`python -m spark_jobs...`, `dumpfilter split`), it takes `--spark-master`, else the
`SPARK_MASTER` environment variable, else `local[*]`. In local mode every port it opens is on loopback. Python workers run this interpreter
(`spark.pyspark.python`) unless PYSPARK_PYTHON says otherwise, so they see the same packages.
"""

from __future__ import annotations

import os
import sys


def under_spark_submit() -> bool:
    """spark-submit launches the Python driver with a gateway to its already-started JVM."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


def get_session(app_name: str, master: str | None = None, conf: dict[str, str] | None = None):
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.appName(app_name)
    master = master or os.environ.get("SPARK_MASTER")
    if master:
        builder = builder.master(master)
    elif not under_spark_submit():
        master = "local[*]"
        builder = builder.master(master)
    settings = {"spark.pyspark.python": os.environ["PYSPARK_PYTHON"], "spark.ui.showConsoleProgress": "false",
                "spark.sql.execution.arrow.pyspark.enabled": "true"}
    if master and master.startswith("local"):
        # Local mode talks only to itself: the driver's RPC and block manager ports, and the web
        # UI (which listens on SPARK_LOCAL_IP, else on every interface), stay on loopback.
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        settings.update({"spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1"})
    settings.update(conf or {})
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    return spark
