"""`experiment` shows its progress on a terminal as `simulate` does (issue #82: 25-72 s of silence
at 281 MB): the same bars (dumpfilter.progress, one home), bytes counted of the binlog's bytes, on
stderr when it is a terminal (a pseudo-terminal here), none through a pipe nor with --no-progress,
with Spark or without. The bar is left at its end on the screen, so a short run shows it too."""

from __future__ import annotations

import errno
import os
import pty
import subprocess
import sys
from pathlib import Path

import pytest

from dumpfilter.workload.generator import WorkloadSpec, generate

pytestmark = pytest.mark.timeout(300)

ROOT = Path(__file__).resolve().parents[2]
TOPOLOGY = ROOT / "dumpfilter" / "data" / "default_topology.toml"
BAR = "counting (every slave)"


@pytest.fixture(scope="module")
def binlogs(tmp_path_factory) -> Path:
    directory = tmp_path_factory.mktemp("binlogs") / "in"
    directory.mkdir()
    generate(WorkloadSpec(seed=3, transactions=4_000, max_binlog_size=400_000), directory)
    return directory


def _experiment(tmp_path: Path, binlogs: Path, *extra: str, terminal: bool) -> tuple[int, str, str]:
    """(exit status, stdout, stderr) of a real experiment, its stderr a pseudo-terminal or a pipe."""
    args = [sys.executable, "-m", "dumpfilter", "experiment", "--binlogs", str(binlogs), "--topology", str(TOPOLOGY),
            "--out", str(tmp_path / "report"), "--no-charts", *extra]
    env = {**os.environ, "COLUMNS": "120", "TERM": "xterm"}
    if not terminal:
        run = subprocess.run(args, capture_output=True, text=True, timeout=240, env=env, stdin=subprocess.DEVNULL)
        return run.returncode, run.stdout, run.stderr
    controller, terminal_end = pty.openpty()
    with open(tmp_path / "stdout", "w") as out:
        proc = subprocess.Popen(args, stdout=out, stderr=terminal_end, stdin=subprocess.DEVNULL, env=env)
    os.close(terminal_end)
    seen = bytearray()
    while True:  # read as it is written (a full terminal would block the command), to its end
        try:
            chunk = os.read(controller, 65536)
        except OSError as exc:  # EIO: every writer closed the terminal
            if exc.errno != errno.EIO:
                raise
            break
        if not chunk:
            break
        seen += chunk
    os.close(controller)
    proc.wait(timeout=240)
    return proc.returncode, (tmp_path / "stdout").read_text(), seen.decode(errors="replace")


@pytest.mark.parametrize("spark", [False, pytest.param(True, marks=pytest.mark.spark)], ids=["no-spark", "spark"])
def test_experiment_draws_its_progress_on_a_terminal(tmp_path, binlogs, spark):
    total_mb = sum(p.stat().st_size for p in binlogs.glob("*.0*")) / 1e6
    how = ["--spark-master", "local[1]"] if spark else ["--no-spark"]
    code, out, err = _experiment(tmp_path, binlogs, *how, terminal=True)
    assert code == 0, err
    assert BAR in err, err
    # its last state: every byte of the binlog counted (rich's DownloadColumn: done/total in MB)
    assert f"{total_mb:.1f}/{total_mb:.1f} MB" in err, err
    assert "wrote " in out and BAR not in out


def test_no_progress_through_a_pipe_or_when_told(tmp_path, binlogs):
    code, out, err = _experiment(tmp_path, binlogs, "--no-spark", terminal=False)
    assert code == 0, err
    assert BAR not in err and BAR not in out and err.strip() == "", err
    code, out, err = _experiment(tmp_path, binlogs, "--no-spark", "--no-progress", terminal=True)
    assert code == 0, err
    assert BAR not in err, err
