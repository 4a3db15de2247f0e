"""The built-in topology `make demo` runs: its filters hold, but for one deliberate break that the
output explains (issue #28: it used to be mostly broken replicas beside "verify ok", unexplained),
and README's sample output is that of a real run."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest
from rich.console import Console

from dumpfilter.lab.simulate.report import lint_cell, print_report, transactions_text

pytestmark = [pytest.mark.grpc, pytest.mark.timeout(300)]

README = Path(__file__).resolve().parents[3] / "README.md"


def test_one_deliberate_break_explained(default_run):
    result, _, _ = default_run
    rows = result.report["slaves"]
    breaking = [row["slave"] for row in rows if row["lint"]["first"]]
    assert breaking == ["reporting"]  # the replicate-do-db trap, on purpose; the others hold
    assert result.ok
    for width in (80, 200):
        buffer = io.StringIO()
        print_report(result.report, Console(file=buffer, width=width, no_color=True))
        text = re.sub(r"\s+", " ", buffer.getvalue())
        first = rows[0]["lint"]["first"]
        assert (f"lint reporting: a replica with these rules stops at {first['file']}:{first['pos']} "
                f"(GTID {first['gtid']}) with error {first['errno']}") in text
        assert "replicate-do-db: default database" in text  # the cause, in the rule's words
        assert "a slave whose rules break a replica breaks it alike either way" in text  # why verify says ok


def test_readme_sample_is_a_real_run(default_run):
    """README's demo sample: every slave's deterministic figures (events, transactions, lint's
    prediction) as this run prints them; wall times and rates differ from run to run."""
    result, _, _ = default_run
    readme = README.read_text()
    sample = readme[readme.index("## The main job"):readme.index("## Proving it against real replicas")]
    block = sample[sample.index("```text"):]
    block = block[:block.index("```", 7)]
    for row in result.report["slaves"]:
        assert f"{row['slave']} ({row['skip_policy']})" in block, row["slave"]
        assert (f"{row['bytes_sent'] / 1e6:.2f} of {row['bytes_all'] / 1e6:.2f} MB ({row['events_sent']} of "
                f"{row['events_all']} events)") in block, row["slave"]
        assert transactions_text(row) in block
        assert f"lint   {'replica would stop: ' if row['lint']['first'] else ''}{lint_cell(row)}" in block
    assert "summary: 4 slave(s); verify: 4 ok; lint: a replica would stop for reporting" in block
