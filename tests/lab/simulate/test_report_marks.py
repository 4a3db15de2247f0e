"""What an experimenter reads (issue #44 item 5): the slave lint says breaks is marked in report.png
and report.html, and the timeline is drawn against binlog time (the events' own timestamps, read
back here from the binlog's headers apart from the report code), its peaks marked."""

from __future__ import annotations

import re
import struct
from pathlib import Path

import pytest

from dumpfilter import charts


def test_policy_chart_marks_the_breaking_slave(tmp_path):
    bars = [{"policy": "heartbeat", "sent": 100_000, "overhead": 1_000, "own": True}]
    drawn = charts.policy_chart([{"slave": "ok", "bytes_all": 300_000, "bars": bars},
                          {"slave": "bad", "bytes_all": 300_000, "bars": bars, "breaks": "error 1146"}],
                         tmp_path / "bars.png", title="t")
    assert {d["slave"]: d["breaks"] for d in drawn} == {"ok": None, "bad": "error 1146"}
    assert (tmp_path / "bars.png").stat().st_size > 1000


def test_rates_are_bytes_per_second_of_binlog_time():
    # [position, cumulative bytes, binlog time]: 3 MB in the first 10 s, 1 MB in the next 10 s
    points = [[100, 1_000_000, 1_700_000_001], [200, 3_000_000, 1_700_000_009], [300, 4_000_000, 1_700_000_015],
              [400, 4_000_000, None]]
    rates = charts.rate_bins(points, 1_700_000_000, 10, 2)
    assert rates == [pytest.approx(0.3), pytest.approx(0.1)]
    assert charts.peak(rates) == 0 and charts.peak([0.0, 0.0]) is None


def test_the_timeline_chart_is_against_binlog_time(tmp_path):
    start = 1_700_000_000
    slow = [[k * 100, k * 1000, start + k] for k in range(1, 120)]
    burst = [[k * 100, k * 1000 + (500_000 if k >= 60 else 0), start + k] for k in range(1, 120)]
    drawn = charts.timeline_chart([{"slave": "steady", "points": slow}, {"slave": "bursty", "points": burst, "breaks": True}],
                           tmp_path / "timeline.png", title="t")
    assert drawn["start"] == start + 1 and drawn["width"] == 2
    peaks = {s["slave"]: s for s in drawn["series"]}
    assert peaks["bursty  [lint: a replica stops]"]["peak_time"] == start + 59  # the burst's bin, in binlog seconds
    assert (tmp_path / "timeline.png").stat().st_size > 1000


def test_a_binlog_without_timestamps_is_drawn_against_position(tmp_path):
    drawn = charts.timeline_chart([{"slave": "s", "points": [[100, 10, None], [200, 20, None]]}], tmp_path / "t.png",
                           title="t")
    assert drawn["start"] is None and (tmp_path / "t.png").exists()


@pytest.mark.parametrize("stamped", [True, False])
def test_every_line_the_timeline_draws_is_in_its_rows(tmp_path, stamped):
    """timeline.csv's rows (`charts.timeline_rows`) hold every line timeline.png draws, point by
    point as matplotlib holds it: MB/s per bin against binlog time, or cumulative bytes against
    position for a binlog without timestamps (issue #60, goal 3)."""
    start = 1_700_000_000
    def at(k):
        return start + k if stamped else None
    series = [{"slave": "steady", "points": [[k * 100, k * 1000, at(k)] for k in range(1, 90)]},
              {"slave": "bursty", "points": [[k * 100, k * 1000 + (9_000 if k > 40 else 0), at(k)] for k in range(1, 90)],
               "breaks": True},
              {"slave": "nothing", "points": []}]
    reference = [[k * 100, k * 2000, at(k)] for k in range(1, 90)]
    drawn = charts.timeline_chart(series, tmp_path / "t.png", title="t", reference=reference)
    rows = charts.timeline_rows(series, reference)
    assert set(rows[0]) <= set(charts.TIMELINE_FIELDS)
    assert [line["label"] for line in drawn["lines"]] == \
        [charts.REFERENCE_LABEL, "steady", "bursty" + charts.LINT_TAG]
    for line in drawn["lines"]:
        name = line["label"].removesuffix(charts.LINT_TAG)
        mine = [r for r in rows if r["series"] == name]
        assert all(r["lint_breaks"] == line["label"].endswith(charts.LINT_TAG) for r in mine)
        if stamped:
            scale = 1.0 if drawn["unit"] == "MB/s" else 1e3
            assert [r["mb_s"] * scale for r in mine] == pytest.approx(line["y"])
            assert sum(r["peak"] for r in mine) == 1
        else:
            assert [r["binlog_position"] / 1e6 for r in mine] == pytest.approx(line["x"])
            assert [r["bytes_sent_total"] / 1e6 for r in mine] == pytest.approx(line["y"])
    assert {r["series"] for r in rows} == {"without master-side filtering", "steady", "bursty"}


@pytest.mark.grpc
@pytest.mark.timeout(300)
def test_the_simulate_report_marks_the_breaking_slave_and_times_the_timeline(default_run):
    result, _, _ = default_run
    report = result.report
    breaking = [row["slave"] for row in report["slaves"] if (row.get("lint") or {}).get("first")]
    assert breaking  # the built-in topology has a slave whose rules break a replica
    html = next(p for p in result.paths if p.name == "report.html").read_text()
    for row in report["slaves"]:
        marked = f'<tr class="breaks"><td>{row["slave"]}</td>' in html
        assert marked == (row["slave"] in breaking), row["slave"]
    assert re.search(r"lint: a replica with the rules of [^<]*" + re.escape(breaking[0]) + " would stop", html)
    assert "against binlog time" in html
    assert next(p for p in result.paths if p.name == "report.png").stat().st_size > 10_000

    # Every timeline point's time is the timestamp of the event at its position, read here from the
    # header itself (after a file's last event: the time of the point before).
    source = report["source"]
    files = [Path(source["directory"]) / name for name in source["files"]]
    starts, base = [], 0
    for path in files:
        starts.append((base, path))
        base += path.stat().st_size
    for row in report["slaves"]:
        previous = None
        for position, _, when in row["timeline"]:
            offset, path = max((s for s in starts if s[0] <= position), key=lambda s: s[0])
            data = path.read_bytes()
            pos = position - offset
            expected = struct.unpack_from("<I", data, pos)[0] if pos + 19 <= len(data) else previous
            assert when == expected, (row["slave"], position)
            previous = when
        times = [t for _, _, t in row["timeline"]]
        assert max(times) - min(times) > 60  # the built-in workload's binlog spans minutes
