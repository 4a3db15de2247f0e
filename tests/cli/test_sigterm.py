"""SIGTERM is SIGINT (issue #62 goal 5): `kill PID` on a working command ends it as Ctrl-C does, with
one line (`dumpfilter: terminated`), exit 143 (128 + SIGTERM, what a shell shows for a process the
signal ended), and nothing left behind: no --out directory the command made, no staging or work
directory, no JVM or Python worker of a Spark session. Ctrl-C to a terminal's whole process group
during a Spark stage keeps Spark's Java stack traces off the terminal. Each run is a real command in
a process of its own; the signal comes once it is working (a state it reached, never a time)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from tests.support.shared_workloads import SPLIT_WORKLOAD, shared_workload
from tests.support.waiting import wait_for

pytestmark = pytest.mark.timeout(400)

ROOT = Path(__file__).resolve().parents[2]
TOPOLOGY = ROOT / "dumpfilter" / "data" / "default_topology.toml"
TERMINATED = "dumpfilter: terminated"
# Seconds a process of the command may take to end after it (`left_running`): a left JVM stays.
EXITING_MAX = 10.0


def marked_processes(mark: str) -> list[str]:
    """Command lines of the live processes whose environment carries `mark` (the command's, its
    JVM's, the Python workers' of a Spark session: all inherit it)."""
    return [line for _, line in _marked(mark)]


def left_running(mark: str) -> list[str]:
    """`marked_processes` once those still exiting have ended: a helper the JVM's launcher runs
    (`ps -o stat= -p $$` in Spark's load-spark-env.sh) may still be dying as the command that ended
    its process group exits (seen once in CI); a JVM or worker left behind stays (EXITING_MAX)."""
    wait_for(lambda: not marked_processes(mark), EXITING_MAX)
    return marked_processes(mark)


def _marked(mark: str) -> list[tuple[int, str]]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if mark.encode() in (entry / "environ").read_bytes():
                if (entry / "stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
                    continue  # ended, not yet reaped
                line = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                found.append((int(entry.name), line))
        except OSError:  # gone meanwhile, or not ours
            continue
    return found


class Command:
    """A `dumpfilter` command in a process of its own (a new session: a process group as a shell's
    job), its TMPDIR inside the test's directory, its environment marked."""

    def __init__(self, tmp_path: Path, *args: str, env: dict[str, str] | None = None):
        self.tmp = tmp_path / "tmp"
        self.tmp.mkdir(exist_ok=True)
        self.mark = f"dumpfilter-sigterm-{uuid.uuid4().hex}"
        env = {**os.environ, "TMPDIR": str(self.tmp), "DUMPFILTER_TEST_MARK": self.mark, "COLUMNS": "100",
               **(env or {})}
        # Its output in files, not pipes: a process it leaves behind would hold a pipe open, and a
        # read to its end would never end.
        self.out = tmp_path.parent / f"{tmp_path.name}.stdout"
        self.err = tmp_path.parent / f"{tmp_path.name}.stderr"
        with self.out.open("w") as out, self.err.open("w") as err:
            self.proc = subprocess.Popen([sys.executable, "-m", "dumpfilter", *args], cwd=tmp_path, env=env,
                                         stdout=out, stderr=err, text=True,
                                         stdin=subprocess.DEVNULL, start_new_session=True)

    def marked_pids(self) -> list[int]:
        return [pid for pid, _ in _marked(self.mark)]

    def running(self) -> bool:
        assert self.proc.poll() is None, ("the command ended before the signal", self.err.read_text())
        return True

    def wait_then(self, state, sig: int, *, group: bool = False, give_up: float = 240) -> str:
        """Wait for `state()`, send `sig` (to the process group with `group`), return stderr."""
        try:
            assert wait_for(lambda: self.running() and state(), give_up), "the command never got to work"
            if group:
                os.killpg(self.proc.pid, sig)
            else:
                self.proc.send_signal(sig)
            self.proc.wait(timeout=180)
        finally:
            if self.proc.poll() is None:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        return self.err.read_text()

    def spark_workers(self) -> bool:
        """A Spark stage runs: a Python worker of the session is up."""
        return any("pyspark" in line and ("daemon" in line or "worker" in line)
                   for line in marked_processes(self.mark))


def assert_terminated(command: Command, err: str) -> None:
    assert command.proc.returncode == 143, (command.proc.returncode, err)
    assert "Traceback" not in err and "Exception in thread" not in err and "\tat " not in err, err
    assert err.strip().splitlines()[-1] == TERMINATED, err
    assert left_running(command.mark) == [], "left running after the command ended"
    assert list(command.tmp.iterdir()) == [], list(command.tmp.rglob("*"))[:10]


@pytest.fixture(scope="module")
def binlogs(tmp_path_factory) -> Path:
    return shared_workload(tmp_path_factory, SPLIT_WORKLOAD)


def staged(tmp_path: Path) -> bool:
    """split's staging directory beside --out holds a file its tasks wrote."""
    return any(any(p.rglob("*")) for p in tmp_path.iterdir() if p.name.startswith(".out."))


def test_sigterm_during_a_local_split(tmp_path, binlogs):
    command = Command(tmp_path, "split", str(binlogs), "--out", "out", "--no-spark", "--chunk-bytes", "1000000")
    err = command.wait_then(lambda: staged(tmp_path), signal.SIGTERM)
    assert_terminated(command, err)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tmp"]


@pytest.mark.spark
def test_sigterm_during_a_spark_split(tmp_path, binlogs):
    """Before: exit 143 with no message, the empty --out left, the JVM ending after the command."""
    command = Command(tmp_path, "split", str(binlogs), "--out", "out", "--spark-master", "local[1]",
                      "--chunk-bytes", "1000000")
    err = command.wait_then(lambda: staged(tmp_path), signal.SIGTERM)
    assert_terminated(command, err)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tmp"]


def _jvm_starting(command: Command) -> bool:
    """The session's JVM is starting: SparkSubmit runs (spark-submit's scripts exec'ed it), the
    gateway not yet up."""
    return any("org.apache.spark.deploy.SparkSubmit" in line for line in marked_processes(command.mark))


def _context_starting(command: Command) -> bool:
    """The JVM's gateway is up and the SparkContext starting: its spark-* directory is made."""
    return any(command.tmp.glob("spark-*"))


@pytest.mark.spark
@pytest.mark.parametrize("moment", ["jvm-starting", "context-starting"])
@pytest.mark.parametrize(("sig", "code", "line"), [(signal.SIGTERM, 143, TERMINATED),
                                                   (signal.SIGINT, 130, "dumpfilter: interrupted")],
                         ids=["SIGTERM", "SIGINT"])
def test_an_interrupt_while_the_spark_session_starts_leaves_nothing(tmp_path, binlogs, moment, sig, code, line):
    """Issue #82: before, PySpark dropped the JVM it was launching (3 of 3 runs): a SparkSubmit
    re-parented to init, listening on its gateway port, its spark-* directories kept and a Java
    stack trace printed once it found its connection file gone. The JVM's directories are put in
    the command's TMPDIR (SPARK_LOCAL_DIRS) so that the test sees them."""
    command = Command(tmp_path, "split", str(binlogs), "--out", "out", "--spark-master", "local[1]",
                      "--chunk-bytes", "1000000", env={"SPARK_LOCAL_DIRS": str(tmp_path / "tmp")})
    state = _jvm_starting if moment == "jvm-starting" else _context_starting
    try:
        err = command.wait_then(lambda: state(command), sig, give_up=240)
    finally:
        for pid in command.marked_pids():  # (the old code's orphans: not left to the next test)
            os.kill(pid, signal.SIGKILL)
    assert command.proc.returncode == code, err
    assert "Traceback" not in err and "Exception" not in err and "\tat " not in err, err
    assert err.strip().splitlines()[-1] == line, err
    assert left_running(command.mark) == [], "left running after the command ended"
    assert list(command.tmp.iterdir()) == [], list(command.tmp.rglob("*"))[:10]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tmp"]


@pytest.mark.spark
def test_sigterm_during_a_spark_experiment(tmp_path, binlogs):
    command = Command(tmp_path, "experiment", "--binlogs", str(binlogs), "--topology", str(TOPOLOGY), "--out", "report",
                      "--spark-master", "local[1]", "--chunk-bytes", "1000000")
    err = command.wait_then(command.spark_workers, signal.SIGTERM)
    assert_terminated(command, err)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tmp"]


@pytest.mark.spark
def test_ctrl_c_to_the_job_during_a_spark_stage_keeps_java_off_the_terminal(tmp_path, binlogs):
    """SIGINT to the whole process group, as a terminal sends it: the Python workers die with the
    command, and the JVM logged their lost sockets with Java stack traces (about 27 lines)."""
    command = Command(tmp_path, "experiment", "--binlogs", str(binlogs), "--topology", str(TOPOLOGY), "--out", "report",
                      "--spark-master", "local[1]", "--chunk-bytes", "1000000")
    err = command.wait_then(command.spark_workers, signal.SIGINT, group=True)
    assert command.proc.returncode == 130, err
    assert "\tat " not in err and "Exception" not in err and "Traceback" not in err, err
    assert err.strip().splitlines()[-1] == "dumpfilter: interrupted", err
    assert left_running(command.mark) == []


TOPOLOGY_TOML = """
[master.workload]
seed = 2
schemas = 4
transactions = 6000
binlog_format = "mixed"

[[slaves]]
name = "a"
server_id = 2
rules = ["replicate-wild-do-table=db1.%"]
"""


@pytest.mark.grpc
@pytest.mark.parametrize("out_existed", [False, True], ids=["out-made", "out-given"])
@pytest.mark.parametrize(("sig", "code", "line"), [(signal.SIGTERM, 143, TERMINATED),
                                                   (signal.SIGINT, 130, "dumpfilter: interrupted")],
                         ids=["SIGTERM", "SIGINT"])
def test_an_interrupted_simulate_removes_what_it_made(tmp_path, sig, code, line, out_existed):
    """Before: the work directory (611 MB in the issue) stayed in TMPDIR; then (issue #82) the empty
    --out directory (and its parents) the run had made stayed. An --out that was there before
    stays, with what it held."""
    topology = tmp_path.parent / f"{tmp_path.name}.toml"
    topology.write_text(TOPOLOGY_TOML)
    if out_existed:
        (tmp_path / "out").mkdir()
        (tmp_path / "out" / "mine.txt").write_text("the user's")
    command = Command(tmp_path, "simulate", "--topology", str(topology), "--verify", "--out", "out/simulate",
                      "--no-progress")
    err = command.wait_then(lambda: bool(list(command.tmp.glob("dumpfilter-simulate-*/relay/*/relay-log.info"))),
                            sig, give_up=120)
    assert command.proc.returncode == code, err
    assert "Traceback" not in err and err.strip().splitlines()[-1] == line, err
    assert left_running(command.mark) == []
    assert list(command.tmp.iterdir()) == [], list(command.tmp.rglob("*"))[:10]
    if out_existed:
        assert sorted(p.name for p in tmp_path.iterdir()) == ["out", "tmp"]
        assert [p.name for p in (tmp_path / "out").iterdir()] == ["mine.txt"]
    else:
        assert sorted(p.name for p in tmp_path.iterdir()) == ["tmp"]


PLUGIN_TEST = """
import time
from pathlib import Path

def test_streams(dumpfilter_binlog, dumpfilter_master, dumpfilter_slave):
    master = dumpfilter_master(dumpfilter_binlog(transactions=300, schemas=2))
    slave = dumpfilter_slave(master, ["replicate-do-db=db1"])
    slave.catch_up()
    Path({ready!r}).write_text(str(slave.relay_dir))
    while True:  # working until the signal
        time.sleep(0.05)
"""


@pytest.mark.grpc
def test_sigterm_to_pytest_tears_the_plugin_fixtures_down(tmp_path):
    """Before: pytest died by the signal with no teardown; the slave's relay directory stayed."""
    ready = tmp_path / "ready"
    (tmp_path / "test_plugin_sigterm.py").write_text(PLUGIN_TEST.format(ready=str(ready)))
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    mark = f"dumpfilter-sigterm-{uuid.uuid4().hex}"
    env = {**os.environ, "TMPDIR": str(tmp), "DUMPFILTER_TEST_MARK": mark}
    proc = subprocess.Popen([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--basetemp", str(tmp_path / "base"), "test_plugin_sigterm.py"],
                            cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        # (the file is there once opened, its text only once written: an empty read named '.')
        assert wait_for(lambda: (ready.exists() and ready.read_text()) or proc.poll() is not None, 120) \
            and proc.poll() is None, proc.communicate()
        relay = Path(ready.read_text())
        assert relay.is_dir() and relay.parent == tmp
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == -signal.SIGTERM, out  # pytest ends by the signal, once torn down
    assert not relay.exists(), out
    assert list(tmp.iterdir()) == [], list(tmp.rglob("*"))[:10]
    assert left_running(mark) == []
