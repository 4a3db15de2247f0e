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


def test_a_work_directory_that_fails_to_go_is_tried_again_then_named(tmp_path, monkeypatch, caplog):
    """A removal that fails once (a file created in a directory while it was emptied) is tried
    again; one that keeps failing is one warning naming the directory, never an exception over the
    run's own outcome."""
    import errno
    import shutil

    from dumpfilter.lab.simulate import orchestration

    real = shutil.rmtree
    failures = {"left": 1}

    def rmtree(path, *args, **kwargs):
        if failures["left"]:
            failures["left"] -= 1
            raise OSError(errno.ENOTEMPTY, os.strerror(errno.ENOTEMPTY), str(path))
        return real(path, *args, **kwargs)

    monkeypatch.setattr(orchestration.shutil, "rmtree", rmtree)
    work = tmp_path / "work"
    (work / "relay").mkdir(parents=True)
    (work / "relay" / "relay-log.info").write_text("x")
    orchestration._remove_work(work)
    assert not work.exists() and failures["left"] == 0

    failures["left"] = 99
    work.mkdir()
    with caplog.at_level("WARNING", logger="dumpfilter.lab.simulate"):
        orchestration._remove_work(work)
    assert work.exists()
    assert [r.getMessage() for r in caplog.records] == [
        f"the work directory {work} could not be removed: [Errno {errno.ENOTEMPTY}] "
        f"{os.strerror(errno.ENOTEMPTY)}: '{work}'"]
