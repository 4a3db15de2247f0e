"""The by-hour chart spans the binlog's own time range (issue #60, goal 3): a binlog of a few
seconds of a real MariaDB's writes is drawn over those seconds (it was drawn as one dot per slave
on an axis of years), and what the chart draws is the CSV beside it: each hour row carries the
first and last second of the hour that the binlog holds, the chart's edges, and its bytes are the
heights of the chart's steps."""

from __future__ import annotations

import csv
import shutil

import pytest

from dumpfilter.charts import hourly_chart
from dumpfilter.codec import read_events
from dumpfilter.spark_jobs.bandwidth_experiment import run_experiment
from dumpfilter.spark_jobs.tasks.chunks import input_files
from dumpfilter.topology import parse_topology

TOPOLOGY = """
[[slaves]]
name = "all"
server_id = 2

[[slaves]]
name = "shop"
server_id = 3
rules = ["replicate-wild-do-table=shop.%"]
"""


@pytest.fixture(scope="module")
def short_binlogs(mariadb_factory, tmp_path_factory):
    server = mariadb_factory("hour-span", binlog_format="ROW")
    statements = ["CREATE DATABASE shop", "CREATE DATABASE crm",
                  "CREATE TABLE shop.t (id INT PRIMARY KEY, c CHAR(200))",
                  "CREATE TABLE crm.t (id INT PRIMARY KEY, c CHAR(200))"]
    statements += [f"INSERT INTO {db}.t VALUES ({i}, REPEAT('x', 200))" for i in range(300) for db in ("shop", "crm")]
    server.execute(statements)
    server.flush_logs()
    root = tmp_path_factory.mktemp("short")
    for path in server.binlog_files()[:-1]:
        shutil.copy(path, root / path.name)
    return root


def _csv(path) -> list[dict]:
    with open(path, newline="") as f:
        return [{k: (int(v) if k != "slave" and k != "hour_utc" else v) for k, v in row.items()}
                for row in csv.DictReader(f)]


def test_the_by_hour_chart_spans_the_binlogs_seconds_and_is_its_csv(tmp_path, short_binlogs):
    run_experiment(short_binlogs, parse_topology(TOPOLOGY), tmp_path / "out")
    assert (tmp_path / "out" / "bandwidth_by_hour.png").stat().st_size > 0
    rows = _csv(tmp_path / "out" / "bandwidth_by_hour.csv")
    stamps = [e.timestamp for path in input_files([short_binlogs]) for e in read_events(path.read_bytes())
              if e.timestamp]
    first, last = min(stamps), max(stamps)
    assert last - first < 3600  # seconds of writes: the test's premise
    hours = sorted({r["hour_epoch"] for r in rows})
    for r in rows:
        assert r["hour_epoch"] <= r["from_epoch"] <= r["to_epoch"] <= r["hour_epoch"] + 3599
    assert min(r["from_epoch"] for r in rows) == first
    assert max(r["to_epoch"] for r in rows) == last
    drawn = hourly_chart(rows, tmp_path / "again.png", title="by hour")
    # the x axis: the binlog's first second to the end of its last, whatever hour it falls in
    assert drawn["edges"][0] == first and drawn["edges"][-1] == last + 1
    assert drawn["edges"][1:-1] == hours[1:]
    # each line's steps are the CSV's bytes, hour by hour; the reference is what a slave without
    # master-side filtering reads
    for name in ("all", "shop"):
        assert drawn["lines"][name] == [next(r["bytes_sent"] for r in rows if r["slave"] == name and r["hour_epoch"] == h)
                                        for h in hours]
    assert drawn["lines"]["without master-side filtering"] == [max(r["bytes_all"] for r in rows if r["hour_epoch"] == h)
                                                               for h in hours]
    assert 0 < sum(drawn["lines"]["shop"]) < sum(drawn["lines"]["all"])
