"""Ctrl-C in `dumpfilter simulate`: a real SIGINT to a real process while its streams run. It stops
cleanly: "interrupted" on stderr, exit 130, no traceback (from any thread), and its temporary work
directory is gone."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.waiting import wait_for

pytestmark = [pytest.mark.grpc, pytest.mark.timeout(180)]

ROOT = Path(__file__).resolve().parents[3]

TOPOLOGY = """
[master.workload]
seed = 2
schemas = 4
transactions = 6000
binlog_format = "mixed"

[[slaves]]
name = "a"
server_id = 2
rules = ["replicate-wild-do-table=db1.%"]

[[slaves]]
name = "b"
server_id = 3
rules = ["replicate-wild-ignore-table=db2.%"]
"""


def test_ctrl_c_stops_cleanly(tmp_path):
    topology = tmp_path / "t.toml"
    topology.write_text(TOPOLOGY)
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = {**os.environ, "TMPDIR": str(tmp), "COLUMNS": "100"}
    proc = subprocess.Popen([sys.executable, "-m", "dumpfilter", "simulate", "--topology", str(topology), "--verify",
                             "--out", str(tmp_path / "out"), "--no-progress"], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    # The streams are running once the first slave's relay log exists in the work directory.
    def streaming() -> bool:
        assert proc.poll() is None, proc.communicate()
        return bool(list(tmp.glob("dumpfilter-simulate-*/relay/*/relay-log.info")))

    assert wait_for(streaming, 120), "the streams never started"
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, (proc.returncode, err)
    assert "Traceback" not in err and "Exception in thread" not in err, err
    assert err.strip().splitlines()[-1] == "dumpfilter: interrupted", err
    assert list(tmp.iterdir()) == [], list(tmp.rglob("*"))[:10]  # nothing left behind
    assert not (tmp_path / "out" / "report.json").exists()
