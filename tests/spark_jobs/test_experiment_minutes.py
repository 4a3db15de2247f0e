"""A short run is charted by minutes, and the chart's caption fits (issue #82): by hours, a run
within one hour was one flat step per slave in bandwidth_by_hour.png, and the caption under its
axis ran past the figure's right edge. A binlog spanning less than MINUTES_BELOW is counted minute
by minute as well (bandwidth_by_minute beside bandwidth_by_hour, the same bytes), and the chart
draws its minutes; the caption's box, as matplotlib's renderer lays it out, lies inside the
figure."""

from __future__ import annotations

import csv
from collections import defaultdict
from pathlib import Path

import pytest

from dumpfilter.charts import hourly_figure
from dumpfilter.spark_jobs.bandwidth_experiment import MINUTES_BELOW, run_experiment
from dumpfilter.topology import parse_topology
from dumpfilter.workload.generator import WorkloadSpec, generate

TOPOLOGY = parse_topology("""
[[slaves]]
name = "db1"
server_id = 2
rules = ["replicate-do-db=db1"]

[[slaves]]
name = "not-db2"
server_id = 3
rules = ["replicate-ignore-db=db2"]
""", "t.toml")


def _binlog(tmp_path_factory, transactions: int) -> Path:
    directory = tmp_path_factory.mktemp("binlogs")
    generate(WorkloadSpec(seed=7, transactions=transactions, max_binlog_size=300_000), directory)
    return directory


def _rows(path: Path) -> list[dict[str, int | str]]:
    with path.open() as f:
        return [{k: (int(v) if k != "slave" and not k.endswith("_utc") else v) for k, v in row.items()}
                for row in csv.DictReader(f)]


@pytest.fixture(scope="module")
def short_run(tmp_path_factory) -> Path:
    """About half an hour of binlog time (the generator's clock moves 0-1 s per transaction)."""
    return _binlog(tmp_path_factory, 4_000)


def test_a_run_within_an_hour_is_counted_and_drawn_by_minutes(short_run, tmp_path):
    rows, _ = run_experiment(short_run, TOPOLOGY, tmp_path, charts=False)
    minutes = _rows(tmp_path / "bandwidth_by_minute.csv")
    hours = _rows(tmp_path / "bandwidth_by_hour.csv")
    span = max(int(r["to_epoch"]) for r in minutes) - min(int(r["from_epoch"]) for r in minutes)
    assert 0 < span < MINUTES_BELOW
    assert all(int(r["minute_epoch"]) % 60 == 0 for r in minutes)
    # the same bytes, minute by minute as hour by hour, as in all
    for slave in ("db1", "not-db2"):
        by_minute = defaultdict(lambda: [0, 0])
        for r in minutes:
            if r["slave"] == slave:
                by_minute[int(r["minute_epoch"]) // 3600 * 3600][0] += int(r["bytes_all"])
                by_minute[int(r["minute_epoch"]) // 3600 * 3600][1] += int(r["bytes_sent"])
        assert dict(by_minute) == {int(r["hour_epoch"]): [int(r["bytes_all"]), int(r["bytes_sent"])]
                                   for r in hours if r["slave"] == slave}
        assert sum(s for _, s in by_minute.values()) == next(r["bytes_sent"] for r in rows if r["slave"] == slave)
    # drawn by minutes: a step per minute of the run, and they differ (by hours: one flat step)
    fig, drawn = hourly_figure(minutes, title="t", bucket=60)
    assert len(drawn["hours"]) == len({r["minute_epoch"] for r in minutes}) > span // 60 - 2
    assert len(set(drawn["lines"]["db1"])) > 10
    assert "minute" in fig.axes[0].get_xlabel()


def test_a_long_run_has_no_minutes(tmp_path_factory, tmp_path):
    rows, paths = run_experiment(_binlog(tmp_path_factory, 20_000), TOPOLOGY, tmp_path, charts=False)
    hours = _rows(tmp_path / "bandwidth_by_hour.csv")
    assert len({r["hour_epoch"] for r in hours}) > 2
    assert not (tmp_path / "bandwidth_by_minute.csv").exists()


@pytest.mark.parametrize("bucket", [3600, 60], ids=["by-hour", "by-minute"])
@pytest.mark.parametrize("seconds", [59 * 60 + 58, 5 * 3600 + 59 * 60 + 58, 9], ids=["59-min", "6-h", "9-s"])
def test_the_caption_lies_inside_the_figure(bucket, seconds):
    start = 1_699_999_999 + (3600 if bucket == 60 else 0)  # an odd second: the longest spellings
    edges = list(range(start - start % bucket, start + seconds + 1, bucket))
    rows = [{"slave": name, f"{'hour' if bucket == 3600 else 'minute'}_epoch": edge, "bytes_all": 2_000_000 + i,
             "bytes_sent": 1_000_000 + i * j, "from_epoch": max(edge, start),
             "to_epoch": min(edge + bucket - 1, start + seconds)}
            for j, name in enumerate(["a-long-slave-name", "b"]) for i, edge in enumerate(edges)]
    fig, _ = hourly_figure(rows, title="MB sent per hour of binlog time, per slave", bucket=bucket)
    fig.canvas.draw()  # laid out as savefig lays it out
    renderer = fig.canvas.get_renderer()
    figure = fig.bbox
    for text in (fig.axes[0].xaxis.label, fig.axes[0].yaxis.label, fig.axes[0].title):
        box = text.get_window_extent(renderer)
        assert figure.x0 <= box.x0 and box.x1 <= figure.x1 and figure.y0 <= box.y0 and box.y1 <= figure.y1, \
            (text.get_text(), box, figure)
