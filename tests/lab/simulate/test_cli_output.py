"""What `dumpfilter simulate` prints, as a user sees it: a real process with its output redirected,
laid out for the width COLUMNS gives (one block per slave at 80 columns, one table at 200), nothing
cut; lint's prediction once per slave with its explanation, never the master's warnings per
stream; log lines on stderr only; the master's total throughput and each stream's labelled share;
report.html with the lint column."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.grpc, pytest.mark.timeout(300)]

ROOT = Path(__file__).resolve().parents[3]

# "breaks": the replicate-do-db trap under MIXED (lint predicts a break); "holds": table rules.
TOPOLOGY = """
[master.workload]
seed = 3
schemas = 3
transactions = 300
binlog_format = "mixed"

[[slaves]]
name = "breaks"
server_id = 2
rules = ["replicate-do-db=db1"]

[[slaves]]
name = "holds"
server_id = 3
rules = ["replicate-wild-ignore-table=db%.t1"]
skip_policy = "placeholder"

[experiment]
skip_policies = ["heartbeat", "empty-transaction"]
"""


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """{columns: (stdout, stderr, report.json, report.html)} of one run per width, output redirected."""
    base = tmp_path_factory.mktemp("simulate-cli")
    topology = base / "t.toml"
    topology.write_text(TOPOLOGY)
    out = {}
    for columns in (80, 200):
        report_dir = base / f"out{columns}"
        proc = subprocess.run([sys.executable, "-m", "dumpfilter", "simulate", "--topology", str(topology), "--verify",
                               "--out", str(report_dir)], cwd=ROOT, capture_output=True, text=True, timeout=240,
                              env={**os.environ, "COLUMNS": str(columns)})
        assert proc.returncode == 0, proc.stderr
        out[columns] = (proc.stdout, proc.stderr, json.loads((report_dir / "report.json").read_text()),
                        (report_dir / "report.html").read_text())
    return out


@pytest.mark.parametrize("columns", [80, 200])
def test_laid_out_for_columns_nothing_cut(runs, columns):
    stdout, _, report, _ = runs[columns]
    lines = stdout.splitlines()
    assert max(len(line) for line in lines) <= columns
    assert "…" not in stdout  # no cell cut short
    for row in report["slaves"]:
        assert f"{row['transactions_kept']}" in stdout and row["slave"] in stdout
    header = [i for i, line in enumerate(lines) if "lint: replica" in line]
    if columns == 200:  # one table: every column's header side by side, one line per slave
        assert header and "verify" in lines[header[0] + 1] and "share" in lines[header[0]]
        assert max(len(line) for line in lines) > 120
        assert [line.split()[0] for line in lines if line.split()[:1] in (["breaks"], ["holds"])][:2] == \
            ["breaks", "holds"]
    else:  # one block per slave: every figure on a line of its own
        assert not header
        assert sum(1 for line in lines if line.strip().startswith("verify ok")) == 2


def test_lint_once_per_slave_and_explained(runs):
    for stdout, stderr, report, _ in runs.values():
        breaks = report["slaves"][0]["lint"]["first"]
        assert breaks is not None and report["slaves"][1]["lint"]["first"] is None
        cell = f"{breaks['errno']} at {breaks['file']}:{breaks['pos']}"
        assert stdout.count(cell) == 1, stdout  # the table's (or the block's) cell, once
        explanation = [line for line in stdout.splitlines() if line.startswith("lint breaks:")]
        assert explanation and f"stops at {breaks['file']}:{breaks['pos']}" in explanation[0]
        assert "master warns" not in stdout + stderr and "lint:" not in stderr
        # stderr holds log lines only (progress bars are off when stderr is not a terminal)
        assert all(line.startswith("dumpfilter simulate: ") for line in stderr.splitlines()), stderr
        diverges = report["slaves"][0]["lint"]["diverges"]  # the do-db trap also skips writes silently
        summary = ("summary: 2 slave(s); verify: 2 ok; lint: a replica would stop for breaks"
                   + (f"; silent divergence for breaks ({diverges} writes)" if diverges else ""))
        assert summary in " ".join(stdout.split())  # (wrapped at the terminal's width)


def test_master_total_throughput_and_stream_share(runs):
    stdout, _, report, _ = runs[200]
    master = report["master"]
    assert master["streams"] == 6 and master["binlog_bytes_served"] == 6 * report["slaves"][0]["bytes_all"]
    assert master["mb_s"] > 0
    line = next(line for line in stdout.splitlines() if line.startswith("master: "))
    assert f"{master['mb_s']:.1f} MB/s in total" in line and "share MB/s" in line
    assert "MB/s" not in " ".join(report["slaves"][0])  # no per-row "MB/s" field posing as a rate of its own
    assert all(0 < row["stream_mb_s"] for row in report["slaves"])


def test_html_has_the_lint_column(runs):
    _, _, report, html = runs[200]
    assert "<th>lint: replica would stop</th>" in html
    first = report["slaves"][0]["lint"]["first"]
    assert f"{first['errno']} at {first['file']}:{first['pos']}" in html
    assert "no break" in html and "stops at" in html and "summary: 2 slave(s)" in html
