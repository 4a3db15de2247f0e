"""Hostile topologies for `simulate` and `experiment` (a probe's findings): a workload count out of
its range, a float or a bool where an integer is meant, a side file that is a FIFO or a device, a
bad binlog named by `master.files`. Each is one line naming the field (or the user's file) and exit
2: never a traceback, a hang, a run of minutes or a run on a silently different value."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from dumpfilter.topology import TopologyError, load_topology, parse_topology
from dumpfilter.workload import WorkloadSpec, generate

SLAVE = '[[slaves]]\nname = "a"\nserver_id = 2\n'
WORKLOAD = "[master.workload]\ntransactions = 10\n"

CASES = [
    # (text, the start of the message)
    (WORKLOAD + "rows_per_statement = 0\n" + SLAVE,
     "<topology>:3: master.workload.rows_per_statement: 0 is not an integer in 1..1000"),
    (WORKLOAD + "rows_per_statement = -5\n" + SLAVE, "<topology>:3: master.workload.rows_per_statement: -5 is not"),
    (WORKLOAD + "server_id = -1\n" + SLAVE,
     "<topology>:3: master.workload.server_id: -1 is not an integer in 1..4294967295"),
    (WORKLOAD + "server_id = 0\n" + SLAVE, "<topology>:3: master.workload.server_id: 0 is not an integer in 1.."),
    (WORKLOAD + "server_id = 4294967296\n" + SLAVE, "<topology>:3: master.workload.server_id: 4294967296 is not"),
    (WORKLOAD + "server_id = true\n" + SLAVE, "<topology>:3: master.workload.server_id: True is not an int"),
    (WORKLOAD + "schemas = 100000\n" + SLAVE,
     "<topology>:3: master.workload.schemas: 100000 is not an integer in 1..1000"),
    (WORKLOAD + "tables_per_schema = 100000\n" + SLAVE,
     "<topology>:3: master.workload.tables_per_schema: 100000 is not an integer in 1..100"),
    ("[master.workload]\ntransactions = 10000000\n" + SLAVE,
     "<topology>:2: master.workload.transactions: 10000000 is not an integer in 0..1000000"),
    ("[master.workload]\ntransactions = 10.0\n" + SLAVE, "<topology>:2: master.workload.transactions: 10.0 is not an int"),
    (WORKLOAD + "statements_per_transaction = 0\n" + SLAVE,
     "<topology>:3: master.workload.statements_per_transaction: 0 is not an integer in 1..100"),
    (WORKLOAD + "max_binlog_size = 1\n" + SLAVE,
     "<topology>:3: master.workload.max_binlog_size: 1 is not an integer in 4096..1073741824"),
    (WORKLOAD + "max_binlog_size = 8589934592\n" + SLAVE, "<topology>:3: master.workload.max_binlog_size: 8589934592"),
    (WORKLOAD + "seed = -1\n" + SLAVE, "<topology>:3: master.workload.seed: -1 is not an integer in 0.."),
    ("[master.workload]\ntransactions = 1000000\nstatements_per_transaction = 100\n" + SLAVE,
     "<topology>:2: master.workload.transactions: 1000000 transactions x 100 statements x 3 rows is 300000000 rows"),
    (WORKLOAD + 'schema_prefix = "a`b"\n' + SLAVE, "<topology>:3: master.workload.schema_prefix: 'a`b' is not a name"),
    (WORKLOAD + 'schema_prefix = ""\n' + SLAVE, "<topology>:3: master.workload.schema_prefix: '' is not a name"),
    (WORKLOAD + f'schema_prefix = "{"x" * 63}"\nschemas = 10\n' + SLAVE,
     "<topology>:3: master.workload.schema_prefix: makes schema names of up to 65 characters"),
    ("[master.mariadb]\nschemas = 0\n" + SLAVE, "<topology>:2: master.mariadb.schemas: 0 is not an integer in 1..1000"),
    ("[master.mariadb]\ntransactions = 1000000\n" + SLAVE,
     "<topology>:2: master.mariadb.transactions: 1000000 is not an integer in 0..100000"),
    (SLAVE + "lower_case_table_names = 1.0\n",
     "<topology>:4: slaves.lower_case_table_names: 1.0 is not the integer 0, 1 or 2"),
    (SLAVE + "lower_case_table_names = true\n", "<topology>:4: slaves.lower_case_table_names: True is not"),
    ('[[slaves]]\nname = "a"\nserver_id = true\n', "<topology>:3: slaves.server_id: True is not an integer"),
    ('[[slaves]]\nname = "a"\nserver_id = 2.0\n', "<topology>:3: slaves.server_id: 2.0 is not an integer"),
    (SLAVE + "[experiment]\nmaster_vs_slave = 1\n", "<topology>:5: experiment.master_vs_slave: 1 is not true or"),
]


@pytest.mark.parametrize("text, message", CASES, ids=[m.split(": ")[1] + "=" + m.split(": ")[2][:12] for _, m in CASES])
def test_each_hostile_value_is_refused_naming_the_field(text, message):
    with pytest.raises(TopologyError) as info:
        parse_topology(text)
    assert str(info.value).startswith(message), str(info.value)


def test_the_ends_of_each_range_are_accepted():
    top = parse_topology("[master.workload]\nseed = 0\nschemas = 1000\ntables_per_schema = 100\ntransactions = 0\n"
                         "rows_per_statement = 1000\nstatements_per_transaction = 100\nmax_binlog_size = 4096\n"
                         f'server_id = 4294967295\nschema_prefix = "{"x" * 60}"\n' + SLAVE)
    assert top.source is not None and top.source.options["server_id"] == 4294967295
    top = parse_topology("[master.workload]\nmax_binlog_size = 1073741824\ntransactions = 1000000\n"
                         'schema_prefix = "Db_$9"\n' + SLAVE + "lower_case_table_names = 2\n")
    assert top.slaves[0].settings.lower_case_table_names == 2
    assert parse_topology("[master.mariadb]\nschemas = 1000\ntransactions = 100000\n" + SLAVE).source is not None


def dumpfilter(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "dumpfilter", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=120, stdin=subprocess.DEVNULL)


def one_line(run: subprocess.CompletedProcess) -> str:
    assert run.returncode == 2, (run.stdout, run.stderr[-2000:])
    assert "Traceback" not in run.stderr
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1, run.stderr[-2000:]
    return lines[0]


@pytest.fixture(scope="module")
def binlogs(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("hostile-topology-binlogs")
    generate(WorkloadSpec(seed=3, schemas=2, transactions=20), root, "master-bin")
    return root


@pytest.mark.parametrize("command", ["simulate", "experiment"])
@pytest.mark.parametrize("target", ["fifo", "/dev/zero", "a-directory"])
def test_a_defaults_file_that_is_not_a_regular_file_is_refused(tmp_path, binlogs, command, target):
    """A FIFO blocked the run forever, /dev/zero read forever: no side file is opened unless regular."""
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "a-directory").mkdir()
    topology = tmp_path / "t.toml"
    topology.write_text(SLAVE + f'defaults_file = "{target}"\n')
    args = (("simulate", "--no-progress") if command == "simulate" else ("experiment", "--binlogs", str(binlogs),
                                                                          "--no-spark"))
    line = one_line(dumpfilter(*args, "--topology", str(topology), "--out", str(tmp_path / "out"), cwd=tmp_path))
    named = target if target.startswith("/") else str(tmp_path / target)
    assert line == f"dumpfilter: error: {topology}:4: slaves.defaults_file: {named} is not a file", line


def test_a_topology_path_that_is_a_fifo_is_refused(tmp_path):
    os.mkfifo(tmp_path / "t.toml")
    line = one_line(dumpfilter("simulate", "--no-progress", "--topology", str(tmp_path / "t.toml"), "--out",
                               str(tmp_path / "out"), cwd=tmp_path))
    assert line == f"dumpfilter: error: {tmp_path / 't.toml'}: cannot read topology file: {tmp_path / 't.toml'} " \
                   "is not a file", line
    with pytest.raises(TopologyError, match="is not a file"):  # the loader every command shares
        load_topology(tmp_path)


@pytest.mark.parametrize("damage", ["magic", "truncated"])
def test_a_bad_binlog_in_master_files_is_named_by_the_users_path(tmp_path, binlogs, damage):
    """simulate serves `master.files` from links in a temporary directory of its own: its errors named
    the link (/tmp/dumpfilter-simulate-.../binlog/x.bin), which the user never wrote."""
    data = (binlogs / "master-bin.000001").read_bytes()
    bad = tmp_path / "given" / "wrongmagic.bin"
    bad.parent.mkdir()
    bad.write_bytes(b"\x00\x01\x02\x03" + data[4:] if damage == "magic" else data[:-10])
    topology = tmp_path / "t.toml"
    topology.write_text(f'[master]\nfiles = ["{bad}"]\n' + SLAVE)
    line = one_line(dumpfilter("simulate", "--no-progress", "--topology", str(topology), "--out",
                               str(tmp_path / "out"), cwd=tmp_path))
    assert line.startswith(f"dumpfilter: error: {bad} at byte "), line
    assert "dumpfilter-simulate-" not in line


def test_a_workload_count_out_of_range_is_one_line_from_the_command(tmp_path):
    topology = tmp_path / "t.toml"
    topology.write_text(WORKLOAD + "schemas = 100000\n" + SLAVE)
    line = one_line(dumpfilter("simulate", "--no-progress", "--topology", str(topology), "--out",
                               str(tmp_path / "out"), cwd=tmp_path))
    assert line == f"dumpfilter: error: {topology}:3: master.workload.schemas: 100000 is not an integer in 1..1000"
    assert not (tmp_path / "out" / "report.json").exists()
