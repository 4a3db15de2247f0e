"""Every long-running command ends cleanly at SIGTERM and SIGINT (issue #82, the sweep): with its
one last line (`dumpfilter: terminated`, exit 143; `dumpfilter: interrupted`, exit 130), no
traceback, and nothing left behind: no process (the command's environment is marked, and every
child inherits the mark), no directory in its TMPDIR, no MariaDB datadir. `split`, `experiment`
(Spark) and `simulate` are in test_sigterm.py, `master serve` and `slave run` in
test_daemon_signals.py; here `filter` and `verify`, each caught in the middle of its work by a
state it reached (never after a time): `filter` blocked writing its output to a full pipe,
`verify` once its MariaDB servers run the workload."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from dumpfilter.workload.generator import WorkloadSpec, generate
from tests.cli.test_sigterm import Command, left_running, marked_processes
from tests.support.waiting import wait_for

pytestmark = pytest.mark.timeout(400)

SIGNALS = [(signal.SIGTERM, 143, "dumpfilter: terminated"), (signal.SIGINT, 130, "dumpfilter: interrupted")]
IDS = ["SIGTERM", "SIGINT"]


def _ended_cleanly(command: Command, err: str, code: int, line: str) -> None:
    assert command.proc.returncode == code, err
    assert "Traceback" not in err, err
    assert err.strip().splitlines()[-1] == line, err
    assert left_running(command.mark) == [], "left running after the command ended"
    assert list(command.tmp.iterdir()) == [], list(command.tmp.rglob("*"))[:10]


@pytest.fixture(scope="module")
def binlog(tmp_path_factory) -> Path:
    directory = tmp_path_factory.mktemp("binlogs")
    generate(WorkloadSpec(seed=4, transactions=8_000, max_binlog_size=1 << 30), directory)
    return next(directory.glob("*.000001"))


def _blocked_writing(pid: int) -> bool:
    """The process sleeps in a write to a full pipe."""
    try:
        return Path(f"/proc/{pid}/wchan").read_text().strip().endswith("pipe_write")  # (anon_pipe_write: 6.x)
    except OSError:
        return False


@pytest.mark.parametrize(("sig", "code", "line"), SIGNALS, ids=IDS)
def test_filter_interrupted_while_it_writes(tmp_path, binlog, sig, code, line):
    """`filter -o -` into a pipe nobody reads yet: the command is mid-output, blocked, when the
    signal comes."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    command = Command.__new__(Command)  # (its checks, with a process of our own: stdout a pipe)
    command.tmp, command.err = tmp, tmp_path.parent / f"{tmp_path.name}.stderr"
    command.mark = f"dumpfilter-sweep-{os.getpid()}-{tmp_path.name}"
    env = {**os.environ, "TMPDIR": str(tmp), "DUMPFILTER_TEST_MARK": command.mark}
    with command.err.open("w") as err:
        command.proc = subprocess.Popen([sys.executable, "-m", "dumpfilter", "filter", str(binlog), "-o", "-",
                                         "--replicate-ignore-db", "db9"], cwd=tmp_path, env=env,
                                        stdout=subprocess.PIPE, stderr=err, stdin=subprocess.DEVNULL,
                                        start_new_session=True)
    try:
        assert wait_for(lambda: _blocked_writing(command.proc.pid) or command.proc.poll() is not None, 120)
        assert command.proc.poll() is None, command.err.read_text()
        command.proc.send_signal(sig)
        command.proc.stdout.read()  # what it wrote before the signal; then its end
        command.proc.wait(timeout=120)
    finally:
        if command.proc.poll() is None:
            os.killpg(command.proc.pid, signal.SIGKILL)
            command.proc.wait()
        command.proc.stdout.close()
    _ended_cleanly(command, command.err.read_text(), code, line)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tmp"]


def _datadirs(mark: str) -> list[Path]:
    """The datadirs of the marked MariaDB servers (their --datadir)."""
    found = []
    for text in marked_processes(mark):
        for arg in text.split():
            if arg.startswith("--datadir="):
                found.append(Path(arg.partition("=")[2]))
    return found


@pytest.mark.mariadb
@pytest.mark.parametrize(("sig", "code", "line"), SIGNALS, ids=IDS)
def test_verify_interrupted_while_its_servers_run(tmp_path, sig, code, line):
    if shutil.which("mariadbd", path="/usr/sbin:/usr/local/sbin:" + os.environ.get("PATH", "")) is None:
        pytest.skip("no mariadbd")
    command = Command(tmp_path, "verify", "--builtin", "--binlog-format", "ROW",
                      env={"PATH": "/usr/sbin:" + os.environ.get("PATH", "")})
    datadirs: list[Path] = []

    def running_the_workload() -> bool:
        datadirs[:] = _datadirs(command.mark) or datadirs
        return "verify: running the workload" in command.err.read_text()

    err = command.wait_then(running_the_workload, sig, give_up=240)
    _ended_cleanly(command, err, code, line)
    assert datadirs, "no MariaDB server seen"
    assert [d for d in datadirs if d.exists()] == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tmp"]
