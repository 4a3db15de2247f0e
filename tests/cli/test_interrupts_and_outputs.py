"""Clean interrupts and whole outputs (issue #44 item 3): `split` writes beside its place and renames
on success, so an interrupted or failed split leaves nothing; `split` and `experiment` refuse a
missing input or a file that is only the binlog magic with one line and exit 2, before any
directory is made; Ctrl-C during a Spark job ends with `dumpfilter: interrupted`, no py4j
tracebacks."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from dumpfilter.cli import app
from dumpfilter.spark_jobs import session
from dumpfilter.workload.generator import WorkloadSpec, generate
from tests.support.shared_workloads import SPLIT_WORKLOAD, shared_workload

ROOT = Path(__file__).resolve().parents[2]
TOPOLOGY = ROOT / "dumpfilter" / "data" / "default_topology.toml"


def dumpfilter(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "dumpfilter", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=300, stdin=subprocess.DEVNULL)


@pytest.fixture
def magic_only(tmp_path) -> Path:
    path = tmp_path / "magic-bin.000001"
    path.write_bytes(b"\xfebin")
    return path


@pytest.mark.parametrize("command", [
    ("experiment", "--binlogs", "{missing}", "--topology", str(TOPOLOGY), "--no-spark", "--out", "report"),
    ("experiment", "--binlogs", "{magic}", "--topology", str(TOPOLOGY), "--no-spark", "--out", "report"),
    ("split", "{missing}", "--out", "report", "--no-spark"),
    ("split", "{magic}", "--out", "report", "--no-spark"),
], ids=["experiment-missing", "experiment-magic-only", "split-missing", "split-magic-only"])
def test_a_bad_input_is_one_line_and_leaves_no_directory(tmp_path, magic_only, command):
    run = dumpfilter(*(a.format(missing=tmp_path / "nonexistent", magic=magic_only) for a in command), cwd=tmp_path)
    assert run.returncode == 2, run.stderr
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("dumpfilter: error:"), run.stderr
    assert "nonexistent" in lines[0] or magic_only.name in lines[0]
    assert sorted(p.name for p in tmp_path.iterdir()) == [magic_only.name]


def test_an_interrupted_split_leaves_nothing(tmp_path, monkeypatch):
    """The split is written in a temporary directory beside --out: interrupted after it wrote
    part of its outputs, nothing is left (before, binlogs and index files cut at a clean
    transaction were left in --out, which `binlog inspect` took for whole ones)."""
    binlogs = tmp_path / "in"
    binlogs.mkdir()
    generate(WorkloadSpec(seed=2, transactions=200, max_binlog_size=60_000), binlogs)
    from dumpfilter.cli.commands import split as split_command

    real = split_command.split_local

    def interrupted(inputs, out, config, **kwargs):
        real(inputs, out, config, **kwargs)  # every output written, as far as a real interrupt would get
        assert any(Path(out).iterdir())
        raise KeyboardInterrupt

    monkeypatch.setattr(split_command, "split_local", interrupted)
    monkeypatch.chdir(tmp_path)
    assert app.main(["split", str(binlogs), "--out", "out", "--no-spark"]) == 130
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in"]
    # An empty --out given by the user stays, empty; a whole split is renamed into it.
    (tmp_path / "out").mkdir()
    assert app.main(["split", str(binlogs), "--out", "out", "--no-spark"]) == 130
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in", "out"] and not any((tmp_path / "out").iterdir())
    monkeypatch.setattr(split_command, "split_local", real)
    assert app.main(["split", str(binlogs), "--out", "out", "--no-spark"]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in", "out"]
    assert any(p.name.endswith(".index") for p in (tmp_path / "out").iterdir())


def test_py4j_noise_of_an_interrupt_is_dropped_and_nothing_else(monkeypatch):
    monkeypatch.setattr(session, "_ENDING", threading.Event())  # (a session running: nothing ending)

    def record(exc: BaseException | None, path: str = "/x/py4j/java_gateway.py") -> logging.LogRecord:
        info = (type(exc), exc, None) if exc is not None else None
        return logging.LogRecord("root", logging.ERROR, path, 1, "Exception while sending command.", (), info)

    reentrant = RuntimeError("reentrant call inside <_io.BufferedReader name=3>")
    wrapped = ValueError("Error while sending or receiving")
    wrapped.__context__ = reentrant
    assert not session._interrupt_noise(record(KeyboardInterrupt()))
    assert not session._interrupt_noise(record(wrapped))
    assert session._interrupt_noise(record(ValueError("a real py4j failure")))
    assert session._interrupt_noise(record(KeyboardInterrupt(), path="/x/dumpfilter/other.py"))
    assert session._interrupt_noise(record(None))
    # Once the session ends (an interrupt came, or it is stopped), a call another thread is inside
    # fails on the closed socket: that too is the ending's noise (a CI run printed it after a Ctrl-C).
    closed = ValueError("Error while sending or receiving")
    closed.__context__ = ValueError("readline of closed file")
    assert session._interrupt_noise(record(closed))
    session._ENDING.set()
    assert not session._interrupt_noise(record(closed))
    assert session._interrupt_noise(record(closed, path="/x/dumpfilter/other.py"))


def test_py4j_noise_on_its_own_loggers_is_dropped_too(monkeypatch):
    """py4j's clientserver logs on its own logger ("py4j.clientserver"), whose records the root
    logger's filter never sees (a CI run printed its two tracebacks after a Ctrl-C): a session
    puts the filter on each of py4j's loggers (`drop_interrupt_noise`)."""
    import py4j.clientserver  # noqa: F401 - its logger, as a session has it

    monkeypatch.setattr(session, "_ENDING", threading.Event())  # (a session running: nothing ending)

    broken = BrokenPipeError(32, "Broken pipe")
    broken.__context__ = KeyboardInterrupt()
    record = logging.getLogger("py4j.clientserver").makeRecord(
        "py4j.clientserver", logging.ERROR, "/x/py4j/clientserver.py", 504,
        "Exception occurred while shutting down connection", (), (BrokenPipeError, broken, None))
    logger = logging.getLogger("py4j.clientserver")
    for name in session.PY4J_LOGGERS:
        mine = [f for f in logging.getLogger(name).filters if f is not session._interrupt_noise]
        monkeypatch.setattr(logging.getLogger(name), "filters", mine)  # as before any session
    assert logger.filter(record)  # before: nothing on this logger drops it
    session.drop_interrupt_noise()  # what get_session does
    session.drop_interrupt_noise()  # (once each)
    assert logger.filters.count(session._interrupt_noise) == 1
    assert not logger.filter(record)
    other = logger.makeRecord("py4j.clientserver", logging.ERROR, "/x/py4j/clientserver.py", 504, "a real failure",
                              (), (ValueError, ValueError("x"), None))
    assert logger.filter(other)


@pytest.mark.spark
def test_ctrl_c_during_a_spark_split_is_one_line(tmp_path, tmp_path_factory):
    """Before: four py4j tracebacks (about 50 lines) before `dumpfilter: interrupted`."""
    binlogs = shared_workload(tmp_path_factory, SPLIT_WORKLOAD)
    process = subprocess.Popen([sys.executable, "-m", "dumpfilter", "split", str(binlogs), "--out", "out",
                                "--spark-master", "local[1]", "--chunk-bytes", "1000000"],
                               cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               stdin=subprocess.DEVNULL)
    try:
        # Interrupted once its tasks write (a segment file in the staging directory beside --out).
        deadline = time.monotonic() + 240
        while process.poll() is None and time.monotonic() < deadline:
            staging = [p for p in tmp_path.iterdir() if p.name.startswith(".out.")]
            if staging and any(staging[0].rglob("*")):
                break
            time.sleep(0.05)
        assert process.poll() is None, "the split ended before it could be interrupted"
        process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            os.kill(process.pid, signal.SIGKILL)
    assert process.returncode == 130, stderr
    assert "Traceback" not in stderr and "py4j" not in stderr, stderr
    assert stderr.strip().splitlines()[-1] == "dumpfilter: interrupted"
    assert list(tmp_path.iterdir()) == []


def test_sigterm_whose_cleanup_raises_still_ends_as_terminated(tmp_path, monkeypatch):
    """A call SIGTERM cut short can fail the cleanup's next call on the same connection (a Spark
    session's py4j: `Answer from Java side is empty`), and that error replaces `Terminated` on its
    way up. Before, the command ended with its traceback and exit 1."""
    binlogs = tmp_path / "in"
    binlogs.mkdir()
    generate(WorkloadSpec(seed=2, transactions=50, max_binlog_size=60_000), binlogs)
    from dumpfilter.cli.commands import split as split_command

    def cut_short(inputs, out, config, **kwargs):
        try:
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)  # the handler raises here, in the main thread
        finally:
            raise ConnectionError("Answer from Java side is empty")

    monkeypatch.setattr(split_command, "split_local", cut_short)
    monkeypatch.chdir(tmp_path)
    # As a command's process starts: SIGTERM's default. (An earlier test's MariaDB sandbox chains a
    # handler of its own into this process, lab/sandbox/server.py, which ends it at SIGTERM.)
    saved = signal.signal(signal.SIGTERM, signal.SIG_DFL)
    try:
        assert app.main(["split", str(binlogs), "--out", "out", "--no-spark"]) == 143
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
        assert sorted(p.name for p in tmp_path.iterdir()) == ["in"]
        # The next command in the same process is not taken for a terminated one.
        monkeypatch.setattr(split_command, "split_local", lambda *a, **k: (_ for _ in ()).throw(ConnectionError("x")))
        with pytest.raises(ConnectionError):
            app.main(["split", str(binlogs), "--out", "out", "--no-spark"])
    finally:
        signal.signal(signal.SIGTERM, saved)


def test_ctrl_c_whose_cleanup_raises_still_ends_as_interrupted(tmp_path, monkeypatch):
    """Ctrl-C reaches the JVM too: it can be gone before the KeyboardInterrupt leaves PySpark's
    `collect`, whose cleanup then raises `Py4JNetworkError: Answer from Java side is empty` in its
    place. Before, the command ended with that traceback and exit 1 (CI on c1eb8ca)."""
    binlogs = tmp_path / "in"
    binlogs.mkdir()
    generate(WorkloadSpec(seed=2, transactions=50, max_binlog_size=60_000), binlogs)
    from dumpfilter.cli.commands import split as split_command

    def cut_short(inputs, out, config, **kwargs):
        try:
            raise KeyboardInterrupt
        finally:
            raise ConnectionError("Answer from Java side is empty")

    monkeypatch.setattr(split_command, "split_local", cut_short)
    monkeypatch.chdir(tmp_path)
    assert app.main(["split", str(binlogs), "--out", "out", "--no-spark"]) == 130
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in"]
    # An error with no interrupt behind it is still the error it is.
    monkeypatch.setattr(split_command, "split_local", lambda *a, **k: (_ for _ in ()).throw(ConnectionError("x")))
    with pytest.raises(ConnectionError):
        app.main(["split", str(binlogs), "--out", "out", "--no-spark"])
