"""The soak's machinery (bench/bench_soak.py, issue #32 part 4) on a bounded amount of work: a
MariaDB primary rotating every ~100 KB under a few hundred transactions, `master serve --source`
with retention, two `slave run` processes started apart and a real replica on --mysql-listen. Its
identity verdicts must hold: each relay log is the offline filter's answer over the same binlog
range, the replica's tables are the primary's kept tables, and the series stayed under its cap.
Nothing here asserts a time or an RSS figure."""

from __future__ import annotations

import pytest

import statistics

from bench.bench_soak import FLAT_MIN_MB, FLAT_SHARE, Soak, compare_relay, rss_by_minute, rss_verdict, run

pytestmark = [pytest.mark.mariadb, pytest.mark.timeout(600)]


def test_soak_machinery_keeps_every_slave_and_the_replica_identical():
    soak = Soak(seconds=8, slaves=2, rate=15, dbs=2, sample=1, binlog_mb=0.1, expire=2, cap_mb=8)
    result = run(soak)
    assert result["transactions"] > 0 and result["primary_binlog_files"] > 2
    assert [s["difference"] for s in result["per_slave"]] == [None, None]
    assert all(s["transactions"] > 0 for s in result["per_slave"])
    assert result["replica_differences"] == []
    assert result["series_mb_max"] * 1e6 <= soak.cap
    assert result["verdicts"]["slaves_identical"] and result["verdicts"]["replica_identical"]


def test_compare_relay_names_the_first_difference():
    def unit(pos: int) -> tuple[bytes, ...]:
        return (bytes(13) + pos.to_bytes(4, "little") + bytes(2),)

    by_file = [("b.1", unit(100)), ("b.1", unit(200)), ("b.2", unit(300))]
    order = {"b.1": 0, "b.2": 1}
    assert compare_relay([unit(100), unit(200), unit(300)], by_file, order, "b.1") == ("b.1", None)
    assert compare_relay([unit(300)], by_file, order, "b.1") == ("b.2", None)  # began after a purge
    assert compare_relay([unit(100), unit(300)], by_file, order, "b.1")[1] == \
        "transaction 1: the relay log has b.2:300 where the filter gives b.1:200"
    assert compare_relay([unit(100)], by_file, order, "b.1")[1] == "2 transactions missing, from b.1:200"
    assert compare_relay([unit(100), unit(200), unit(300), unit(999)], by_file, order, "b.1")[1] == \
        "1 transactions past the filter's answer, from (not in the binlog):999"


def test_rss_verdict_takes_the_trend_not_the_bursts():
    """The rss verdict (Theil-Sen over the second half): a flat RSS with a burst now and then (a
    segment read, a batch) is flat, whatever samples the bursts land on; a steady rise of 3 MB/min
    (15 MB over a five-minute half of about 220 MB: over its bound of 11 MB) is growing. The least-squares line is reported beside it."""
    flat = [(t, 200.0 + (30.0 if t % 55 == 0 else 0.0) + (0.5 if t % 10 == 0 else 0.0)) for t in range(0, 600, 5)]
    flat[-1] = (flat[-1][0], 260.0)  # a burst on the last sample: it tilts a least-squares line
    verdict = rss_verdict(flat)
    assert verdict["flat"] and abs(verdict["slope_mb_per_min"]) < 0.5
    assert verdict["least_squares_mb_per_min"] > verdict["slope_mb_per_min"]
    growing = [(t, 200.0 + 3.0 * t / 60 + (25.0 if t % 45 == 0 else 0.0)) for t in range(0, 600, 5)]
    verdict = rss_verdict(growing)
    assert not verdict["flat"] and 2.9 <= verdict["slope_mb_per_min"] <= 3.1
    assert verdict["bound_mb"] == round(max(FLAT_MIN_MB, FLAT_SHARE * statistics.median(r for _, r in growing[60:])), 1)
    assert [m["minute"] for m in rss_by_minute(growing)] == list(range(10))
    assert rss_by_minute(growing)[3]["min"] == 209.25  # t=185: the burst at t=180 is its max
