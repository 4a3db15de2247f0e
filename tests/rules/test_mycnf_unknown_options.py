"""A misspelled replicate-* option in a my.cnf stops every command with exit 2 naming it, as mysqld
refuses to start on an unknown variable; `loose-` makes it a warning; --defaults-extra-file is read."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from dumpfilter.errors import RuleError
from dumpfilter.rules.mycnf import startup_filters_from_file
from dumpfilter.topology import TopologyError, load_topology
from dumpfilter.workload.generator import WorkloadSpec, generate

ROOT = Path(__file__).resolve().parents[2]
TYPO = "[mysqld]\ndatadir = /var/lib/mysql\ninnodb_buffer_pool_size = 1G\nreplicate-do-tabel = db1.t1\n"


def _run(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "dumpfilter", *argv], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)


def _names_the_typo(proc: subprocess.CompletedProcess, cnf: Path) -> None:
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    assert "Traceback" not in proc.stderr
    assert f"{cnf}:4" in proc.stderr and "unknown variable 'replicate-do-tabel=db1.t1'" in proc.stderr, proc.stderr


@pytest.fixture
def typo_cnf(tmp_path) -> Path:
    cnf = tmp_path / "my.cnf"
    cnf.write_text(TYPO)
    return cnf


def test_filter_exits_2_naming_the_option(typo_cnf, tmp_path):
    generate(WorkloadSpec(seed=5, transactions=20), tmp_path / "binlogs")
    proc = _run("filter", str(tmp_path / "binlogs"), "-o", str(tmp_path / "out"), "--defaults-file", str(typo_cnf))
    _names_the_typo(proc, typo_cnf)


def test_slave_run_exits_2_naming_the_option(typo_cnf, tmp_path):
    proc = _run("slave", "run", "--master", "127.0.0.1:1", "--server-id", "2", "--relay-log-dir",
                str(tmp_path / "relay"), "--defaults-file", str(typo_cnf), "--retry-count", "1")
    _names_the_typo(proc, typo_cnf)


def test_master_serve_exits_2_naming_the_option(typo_cnf, tmp_path):
    topology = tmp_path / "t.toml"
    topology.write_text('[[slaves]]\nname = "a"\nserver_id = 2\ndefaults_file = "my.cnf"\n')
    binlogs = tmp_path / "binlogs"
    binlogs.mkdir()
    proc = _run("master", "serve", "--binlog-dir", str(binlogs), "--listen", "127.0.0.1:0",
                "--mysql-listen", "127.0.0.1:0", "--replicas", str(topology))
    _names_the_typo(proc, typo_cnf)


def test_simulate_topology_names_the_option(typo_cnf, tmp_path):
    topology = tmp_path / "t.toml"
    topology.write_text('[[slaves]]\nname = "a"\nserver_id = 2\ndefaults_file = "my.cnf"\n')
    with pytest.raises(TopologyError, match=r"unknown variable 'replicate-do-tabel=db1\.t1'"):
        load_topology(topology)
    proc = _run("simulate", "--topology", str(topology), "--out", str(tmp_path / "out"), "--no-progress")
    _names_the_typo(proc, typo_cnf)


def test_loose_prefix_is_a_warning(tmp_path, capsys):
    cnf = tmp_path / "my.cnf"
    cnf.write_text("[mysqld]\nloose-replicate-do-tabel = db1.t1\nloose_replicate_do_db = db2\n")
    startup = startup_filters_from_file(cnf)
    assert startup.global_rules.do_db == ("db2",)
    assert "loose-replicate-do-tabel=db1.t1" in capsys.readouterr().err


@pytest.mark.parametrize("line", ["replicate_do_tabel=db1.t1", "REPLICATE-IGNORE-DBS=db1"])
def test_underscores_and_case_do_not_hide_a_typo(tmp_path, line):
    cnf = tmp_path / "my.cnf"
    cnf.write_text(f"[mysqld]\n{line}\n")
    with pytest.raises(RuleError, match=r"my\.cnf:2: unknown variable"):
        startup_filters_from_file(cnf)


def test_an_abbreviation_is_refused_naming_the_full_option(tmp_path):
    cnf = tmp_path / "my.cnf"
    cnf.write_text("[mysqld]\nreplicate-do-d = db1\n")
    with pytest.raises(RuleError, match=r"my\.cnf:2: 'replicate-do-d' abbreviates replicate-do-db"):
        startup_filters_from_file(cnf)


def test_other_replicate_options_and_other_groups_are_not_ours(tmp_path):
    cnf = tmp_path / "my.cnf"
    cnf.write_text("[client]\nreplicate-whatever = 1\n[mysqld]\nreplicate-same-server-id = 0\n"
                   "replicate_annotate_row_events = 1\nreplicate-do-db = db1\n")
    assert startup_filters_from_file(cnf).global_rules.do_db == ("db1",)


def test_defaults_extra_file_is_read_after_the_defaults_file(tmp_path):
    main, extra = tmp_path / "my.cnf", tmp_path / "extra.cnf"
    main.write_text("[mysqld]\nreplicate-do-db = db1\n")
    extra.write_text("[mysqld]\nreplicate-do-db = db2\n")
    proc = _run("explain", "--defaults-file", str(main), "--defaults-extra-file", str(extra),
                "--sql", "INSERT INTO t VALUES (1)", "--current-db", "db2")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("apply"), proc.stdout
    extra.write_text(TYPO)
    _names_the_typo(_run("explain", "--defaults-extra-file", str(extra), "--sql", "SELECT 1"), extra)
