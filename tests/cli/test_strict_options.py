"""Words and options (issue #60 goal 5): every command refuses an abbreviated long option (argparse's
prefix matching took `experiment --binlog` for `--binlogs`), and a comma inside a replicate-do-db or
replicate-ignore-db value gets one warning line: MySQL takes it as one database name, and the
repeated option is the form for several (on the command line and in a topology's rules)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from dumpfilter.rules.parse import parse_option
from dumpfilter.topology import load_topology
from dumpfilter.workload.generator import WorkloadSpec, generate

ROOT = Path(__file__).resolve().parents[2]


def dumpfilter(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "dumpfilter", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=120, stdin=subprocess.DEVNULL)


@pytest.mark.parametrize(("args", "abbreviated"), [
    (("experiment", "--binlogs", "in", "--topology", "t.toml", "--out", "r", "--no-sp"), "--no-sp"),
    (("experiment", "--binlogs", "in", "--topology", "t.toml", "--out", "r", "--binlog", "x"), "--binlog"),
    (("filter", "-o", "x.bin", "in", "--replicate-do", "db1"), "--replicate-do"),
    (("lint", "in", "--replicate-wild-do", "db1.%"), "--replicate-wild-do"),
    (("split", "in", "--out", "o", "--no-sp"), "--no-sp"),
    (("master", "status", "--master", "127.0.0.1:1", "--rpc-time", "1"), "--rpc-time"),
    (("--vers",), "--vers"),
], ids=["experiment", "experiment-binlog", "filter", "lint", "split", "master-status", "top-level"])
def test_an_abbreviated_long_option_is_refused(tmp_path, args, abbreviated):
    run = dumpfilter(*args, cwd=tmp_path)
    assert run.returncode == 2, run
    lines = run.stderr.strip().splitlines()
    assert "Traceback" not in run.stderr
    # the one usage error names the option; `--vers` never reaches the version (the command is missing)
    assert f"unrecognized arguments: {abbreviated}" in lines[-1] or abbreviated == "--vers", run.stderr


@pytest.mark.parametrize(("args", "unknown", "meant"), [
    (("experiment", "--binlog", "in"), "--binlog", "--binlogs"),
    (("experiment", "--binlogs", "in", "--topology", "t.toml", "--out", "r", "--no-sprak"), "--no-sprak", "--no-spark"),
    (("filter", "-o", "x.bin", "in", "--replicate-do-dbb", "db1"), "--replicate-do-dbb", "--replicate-do-db"),
    (("filter", "in", "--replicate_ignore_tabel=a.b"), "--replicate-ignore-tabel=a.b", "--replicate-ignore-table"),
    (("lint", "--replicate-wild-do-tabel", "db1.%"), "--replicate-wild-do-tabel", "--replicate-wild-do-table"),
    (("split", "in", "--no-spak"), "--no-spak", "--no-spark"),
    (("simulate", "--no-progres"), "--no-progres", "--no-progress"),
    (("verify", "--lsten", "127.0.0.1:0"), "--lsten", "--listen"),
    (("master", "serve", "--binlog-dirr", "x"), "--binlog-dirr", "--binlog-dir"),
    (("slave", "run", "--relay-log-dirr", "x"), "--relay-log-dirr", "--relay-log-dir"),
    (("master", "status", "--rpc-timeot", "1"), "--rpc-timeot", "--rpc-timeout"),
    (("--verson",), "--verson", "--version"),
], ids=["experiment-binlog", "experiment", "filter", "filter-mysqld-spelling", "lint", "split", "simulate", "verify",
        "master-serve", "slave-run", "master-status", "top-level"])
def test_an_unknown_option_is_told_first_with_the_nearest_one(tmp_path, args, unknown, meant):
    """Issue #82: `experiment --binlog X` said `--binlogs` was required, and no command said what
    a mistyped option was near. Now the unknown option comes first (before a missing required
    one), in one line, exit 2, with the nearest option of that command."""
    run = dumpfilter(*args, cwd=tmp_path)
    assert run.returncode == 2, run
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1, run.stderr
    assert f"error: unrecognized arguments: {unknown} (did you mean {meant}?)" in lines[0], run.stderr


def test_a_mistyped_command_and_a_far_option_get_one_line(tmp_path):
    run = dumpfilter("simulat", cwd=tmp_path)
    assert run.returncode == 2 and run.stderr.strip().endswith("(did you mean simulate?)"), run
    run = dumpfilter("master", "serv", cwd=tmp_path)
    assert run.returncode == 2 and run.stderr.strip().endswith("(did you mean serve?)"), run
    run = dumpfilter("split", "--zzzzzzzz", cwd=tmp_path)  # nothing near: no suggestion
    assert run.returncode == 2 and run.stderr.strip().splitlines() == \
        ["dumpfilter split: error: unrecognized arguments: --zzzzzzzz"], run


def test_the_whole_option_still_parses(tmp_path):
    run = dumpfilter("--version", cwd=tmp_path)
    assert run.returncode == 0 and run.stdout.startswith("dumpfilter "), run


def test_a_comma_in_a_do_db_value_is_one_warning_line(tmp_path):
    binlogs = tmp_path / "in"
    binlogs.mkdir()
    generate(WorkloadSpec(seed=1, transactions=50), binlogs)
    run = dumpfilter("lint", str(binlogs), "--replicate-do-db", "shop,crm", "--replicate-ignore-db=a,b",
                     "--replicate-do-db", "db1", cwd=tmp_path)
    assert run.returncode in (0, 1), run.stderr
    warnings = [line for line in run.stderr.splitlines() if "warning" in line]
    assert warnings == [
        "dumpfilter: warning: --replicate-do-db=shop,crm: MySQL takes 'shop,crm' as one database name (a comma "
        "does not separate names); for several databases repeat the option: --replicate-do-db=shop "
        "--replicate-do-db=crm",
        "dumpfilter: warning: --replicate-ignore-db=a,b: MySQL takes 'a,b' as one database name (a comma does not "
        "separate names); for several databases repeat the option: --replicate-ignore-db=a --replicate-ignore-db=b",
    ], run.stderr


def test_the_value_stays_one_name_as_in_mysql(capsys):
    assert parse_option("replicate-do-db", "shop,crm") == (None, "do_db", "shop,crm")
    assert "--replicate-do-db=shop,crm" in capsys.readouterr().err
    assert parse_option("replicate-do-table", "a.b") == (None, "do_table", "a.b")
    assert capsys.readouterr().err == ""


def test_a_comma_in_a_topology_rule_is_warned_too(tmp_path, capsys):
    topology = tmp_path / "t.toml"
    topology.write_text('[master.workload]\nseed = 1\n\n[[slaves]]\nname = "a"\nserver_id = 2\n'
                        'rules = ["replicate-ignore-db=logs,tmp"]\n')
    load_topology(topology)
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and "--replicate-ignore-db=logs,tmp: MySQL takes 'logs,tmp' as one database name" in err[0]
