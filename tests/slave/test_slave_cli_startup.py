"""`dumpfilter slave run` as a process: its parser loads no gRPC, no protobuf and no rule engine
(they cost about a fifth of a second of every start), bad options and bad rules are still one
line and exit 2 with no relay directory made, the exit status goes through the process entry
(`cli.app.run`) unchanged, and a running slave registers and asks for its stream before it loads
its rule engine."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("grpc", "google.protobuf", "dumpfilter.v1.dump_pb2", "dumpfilter.rules.evaluate", "dumpfilter.rules.schema",
         "dumpfilter.slave.node")


def dumpfilter(*args: str, importtime: bool = False) -> subprocess.CompletedProcess:
    flags = ["-X", "importtime"] if importtime else []
    return subprocess.run([sys.executable, *flags, "-m", "dumpfilter", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=60)


def imported(stderr: str) -> set[str]:
    """The modules `-X importtime` says were imported."""
    return {line.rsplit("|", 1)[1].strip() for line in stderr.splitlines() if line.startswith("import time:")}


def messages(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if not line.startswith("import time:")]


def test_help_loads_no_grpc_and_no_rule_engine():
    run = dumpfilter("slave", "run", "--help", importtime=True)
    assert run.returncode == 0, run.stderr
    assert "--relay-commit-interval" in run.stdout and "--replicate-do-db" in run.stdout
    modules = imported(run.stderr)
    # (importlib.import_module's own imports are not timed: the command module's imports are)
    assert "dumpfilter.rules.options" in modules and "dumpfilter.cli.master_client" in modules
    assert not [m for m in HEAVY if m in modules]


@pytest.mark.parametrize("args,error", [
    (("--server-id", "0"), "argument --server-id: 0 is out of range: a server_id is 1 to 4294967295"),
    (("--server-id", "x"), "argument --server-id: 'x' is not a number"),
    (("--server-id", "5", "--skip-policy", "nope"),
     "argument --skip-policy: invalid choice: 'nope' (choose from 'heartbeat', 'placeholder', 'empty-transaction')"),
])
def test_a_bad_option_is_one_line_and_exit_2_before_any_heavy_import(tmp_path, args, error):
    run = dumpfilter("slave", "run", "--master", "127.0.0.1:1", "--relay-log-dir", str(tmp_path / "r"), *args,
                     importtime=True)
    assert run.returncode == 2
    assert messages(run.stderr)[-1] == f"dumpfilter slave run: error: {error}"
    assert "Traceback" not in run.stderr
    assert not [m for m in HEAVY if m in imported(run.stderr)]
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize("args,error", [
    (("--replicate-do-table", "nodot"), "replicate-do-table: 'nodot' is not of the form db.table"),
    (("--replicate-rewrite-db", "a"), "replicate-rewrite-db: 'a' has no '->' (expected from_name->to_name)"),
    (("--change-replication-filter", "NONSENSE"), "CHANGE REPLICATION FILTER: expected CHANGE, found 'NONSENSE'"),
])
def test_a_bad_rule_is_one_line_and_exit_2(tmp_path, args, error):
    run = dumpfilter("slave", "run", "--master", "127.0.0.1:1", "--server-id", "5", "--relay-log-dir",
                     str(tmp_path / "r"), *args)
    assert run.returncode == 2
    assert run.stderr.splitlines() == [f"dumpfilter: error: {error}"]
    assert not (tmp_path / "r").exists()


def test_the_process_entry_keeps_the_exit_status(tmp_path):
    assert dumpfilter("--version").returncode == 0
    status = dumpfilter("slave", "status", "--relay-log-dir", str(tmp_path / "none"))
    assert status.returncode in (0, 2) and "Traceback" not in status.stderr
    # A master that is not there, no retry: the slave's own one-line error and exit 2, through run().
    run = dumpfilter("slave", "run", "--master", "127.0.0.1:1", "--server-id", "5", "--relay-log-dir",
                     str(tmp_path / "r"), "--until-caught-up", "--connect-retry", "0", "--rpc-timeout", "2")
    assert run.returncode == 2, run.stderr
    assert "Traceback" not in run.stderr
    assert [line for line in run.stderr.splitlines() if line.startswith("dumpfilter: error:")]


_AT_DUMP = """
import sys
from dumpfilter.slave import node as client

ENGINE = ("dumpfilter.rules.evaluate", "dumpfilter.rules.schema", "dumpfilter.rules.statements",
          "dumpfilter.rules.transaction_filter")
seen = {}
stream = client.Slave._stream

def _stream(self, stub):  # Registered; the Dump call is the next thing it makes
    seen["at_dump"] = [m for m in ENGINE if m in sys.modules]
    return stream(self, stub)

client.Slave._stream = _stream
from dumpfilter.cli.app import main

status = main(sys.argv[1:])
print(status, seen["at_dump"], [m for m in ENGINE if m not in sys.modules])
"""


@pytest.mark.grpc
def test_the_slave_registers_and_asks_for_the_stream_before_loading_its_rule_engine(workload_dir, master_factory,
                                                                                    tmp_path):
    """The master waits for Register and Dump; the slave's own check needs its rule engine only when
    the first batch comes, so those modules load while the master reads, and the run is the same."""
    from tests.support.dump_helpers import relay_units, run_slave
    from dumpfilter.rules.ruleset import RuleSet

    _, address = master_factory(workload_dir)
    run = subprocess.run([sys.executable, "-c", _AT_DUMP, "slave", "run", "--master", address, "--server-id", "71",
                          "--relay-log-dir", str(tmp_path / "relay"), "--replicate-do-db", "db3", "--until-caught-up",
                          "--lint-wait", "0"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stdout.split("\n")[0] == "0 [] []"  # none loaded before Dump, every one loaded by the end
    reference = run_slave(address, tmp_path / "reference", 72, rules=RuleSet(do_db=("db3",)))
    assert relay_units(tmp_path / "relay") == relay_units(tmp_path / "reference")
    assert reference.counters.check_disagreements == 0
