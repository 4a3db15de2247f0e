"""What an operator and an experimenter read (issue #44 item 5): the words say what they mean."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from dumpfilter.cli.app import build_parser
from dumpfilter.cli.master_client import channel_name
from dumpfilter.errors import DumpFilterError
from dumpfilter.topology import parse_topology
from dumpfilter.workload.generator import WorkloadSpec, generate

ROOT = Path(__file__).resolve().parents[2]


def test_the_filter_summary_reads_as_english(tmp_path):
    binlogs = tmp_path / "in"
    binlogs.mkdir()
    generate(WorkloadSpec(seed=4, transactions=300, max_binlog_size=10_000_000, binlog_format="mixed"), binlogs)
    run = subprocess.run([sys.executable, "-m", "dumpfilter", "filter", str(binlogs), "-o", str(tmp_path / "out.bin"),
                          "--replicate-do-db=db1", "--summary", "plain"], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    text = run.stderr
    assert "skipped 1" not in text and "% less" not in text, text   # "skipped 150040 emptied", "skipped 77.1% less"
    assert "% smaller" in text and " emptied" not in text  # one name for the outcome: the master's (issue #60)
    assert " skipped (" in text and " written as empty transactions" in text


def test_the_default_channel_is_named_not_quoted():
    assert channel_name("") == "(default)" and channel_name("m1") == "m1"


def test_simulate_help_names_every_file_it_writes():
    help_text = " ".join(build_parser(["simulate"])._subparsers._group_actions[0].choices["simulate"]
                         .format_help().split())
    for name in ("report.json", "report.csv", "report.png", "timeline.png", "report.html"):
        assert name in help_text


def test_a_bad_binlog_directory_in_a_topology_names_its_line(tmp_path):
    from dumpfilter.lab.simulate.source import prepare_source

    topology = parse_topology('[master]\n# the source\nbinlogs = "nowhere"\n\n[[slaves]]\nname = "a"\n'
                              'server_id = 2\nrules = ["replicate-do-db=db1"]\n', str(tmp_path / "t.toml"))
    with pytest.raises(DumpFilterError) as info:
        prepare_source(topology.source, tmp_path / "work")
    assert str(info.value).startswith(f"{tmp_path / 't.toml'}:3: master.binlogs:")


def test_the_verify_line_says_what_its_counts_are():
    from io import StringIO

    from rich.console import Console

    from dumpfilter.lab.simulate.equivalence import SlaveVerification
    from dumpfilter.lab.simulate.orchestration import print_verification

    out = StringIO()
    print_verification([SlaveVerification("s", 7030, {"heartbeat": 2402, "placeholder": 7030})],
                       Console(file=out, width=400))
    line = out.getvalue().strip()
    assert "matched per policy" not in line
    assert "7030 transactions; received" in line and "heartbeat 2402" in line


def test_the_retention_warning_is_grammatical():
    source = (ROOT / "master" / "upstream" / "retention.py").read_text()
    assert "gets error 1236" not in source.replace('"it gets"', "")
