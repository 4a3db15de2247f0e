"""`make demo` can be given its master's address (issue #82: the demo's master took a free port of
its own, 127.0.0.1:45099, where a harness on a shared host needs to know it): `LISTEN=HOST:PORT`
becomes simulate's `--listen`, `DEMO_ARGS` any other simulate option. The command make would run
(`make -n`) is run for real, and the master binds the port given."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
from dumpfilter.lab.ports import free_port

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.grpc, pytest.mark.timeout(300),
              pytest.mark.skipif(shutil.which("make") is None, reason="no make")]

TOPOLOGY = """
[master.workload]
seed = 2
schemas = 2
transactions = 300

[[slaves]]
name = "a"
server_id = 2
rules = ["replicate-do-db=db1"]
"""


def _demo_command(*variables: str) -> list[str]:
    """The dumpfilter command line `make demo` runs with these variables (its last line under -n)."""
    dry = subprocess.run(["make", "-n", "-C", str(ROOT), "--no-print-directory", "demo", *variables],
                         capture_output=True, text=True, timeout=60)
    assert dry.returncode == 0, dry.stderr
    line = dry.stdout.strip().splitlines()[-1]
    assert "dumpfilter simulate --verify" in line, dry.stdout
    return shlex.split(line)


def test_make_demo_listens_where_it_is_told(tmp_path):
    (tmp_path / "t.toml").write_text(TOPOLOGY)
    port = free_port()
    command = _demo_command(f"LISTEN=127.0.0.1:{port}", f"DEMO_ARGS=--topology {tmp_path / 't.toml'} "
                                                        f"--out {tmp_path / 'out'} --no-progress")
    assert command[-7:] == ["--listen", f"127.0.0.1:{port}", "--topology", str(tmp_path / "t.toml"),
                            "--out", str(tmp_path / "out"), "--no-progress"], command
    command[0] = str(ROOT / command[0]) if not os.path.isabs(command[0]) else command[0]
    run = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=240,
                         stdin=subprocess.DEVNULL)
    assert run.returncode == 0, run.stderr
    assert f"dumpfilter simulate: master on 127.0.0.1:{port}; " in run.stderr + run.stdout, run.stderr
    assert (tmp_path / "out" / "report.json").exists()


def test_make_demo_without_variables_is_the_plain_demo():
    assert _demo_command()[-2:] == ["simulate", "--verify"]
