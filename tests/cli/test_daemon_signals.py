"""SIGTERM is SIGINT for the daemons too (issue #62 goal 5): `master serve` and `slave run`, real
processes sent real signals while a slave streams. Each still stops as it did (the master drains
its streams for --grace seconds; the slave records its stop and prints its summary), then ends as
every other command does: one line last (`dumpfilter: terminated` / `dumpfilter: interrupted`),
exit 143 for SIGTERM (128 + 15, what a shell shows) and 130 for SIGINT, no traceback."""

from __future__ import annotations

import signal
import subprocess
import sys

import pytest

from dumpfilter.slave.status import status_fields
from tests.support.master_command import serve_master
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.grpc, pytest.mark.timeout(180)]

SIGNALS = [(signal.SIGTERM, 143, "dumpfilter: terminated"), (signal.SIGINT, 130, "dumpfilter: interrupted")]
IDS = ["SIGTERM", "SIGINT"]


def _slave(address: str, relay) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "dumpfilter", "slave", "run", "--master", address,
                             "--server-id", "31", "--relay-log-dir", str(relay), "--replicate-do-db", "db1",
                             "--connect-retry", "0.2"], stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)


def _streaming(slave: subprocess.Popen, relay) -> bool:
    """The slave is registered and has recorded a position its stream brought."""
    assert slave.poll() is None, slave.communicate()
    info = relay / "relay-log.info"
    if not info.exists():
        return False
    fields = status_fields(relay)
    return fields["Slave_IO_Running"] == "Yes" and bool(fields["Master_Log_File"])


def _ended(proc: subprocess.Popen, sig: int) -> str:
    proc.send_signal(sig)
    try:
        _, err = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
        raise AssertionError(f"still running 60 s after {signal.Signals(sig).name}: {err}") from None
    return err


def _stop(*procs: subprocess.Popen) -> None:
    for proc in procs:
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.communicate()


@pytest.mark.parametrize(("sig", "code", "line"), SIGNALS, ids=IDS)
def test_master_serve_drains_then_ends_as_every_command(workload_dir, tmp_path, sig, code, line):
    """Before: both signals drained and exited 0, with no line of the convention."""
    master, address = serve_master(workload_dir, "--grace", "5")
    slave = None
    try:
        slave = _slave(address, tmp_path / "relay")
        assert wait_for(lambda: _streaming(slave, tmp_path / "relay")), "the slave never streamed"
        err = master.head + _ended(master, sig)
    finally:
        _stop(master, slave)
    assert master.returncode == code, err
    assert "Traceback" not in err, err
    lines = err.strip().splitlines()
    assert lines[-1] == line, err
    assert sum(1 for text in lines if text == line) == 1, err
    assert "dumpfilter master: shutting down, draining streams" in lines, err


@pytest.mark.parametrize(("sig", "code", "line"), SIGNALS, ids=IDS)
def test_slave_run_records_its_stop_then_ends_as_every_command(workload_dir, tmp_path, sig, code, line):
    """Before: SIGTERM ended the slave as SIGINT (exit 130, `dumpfilter: interrupted`)."""
    master, address = serve_master(workload_dir)
    relay = tmp_path / "relay"
    slave = None
    try:
        slave = _slave(address, relay)
        assert wait_for(lambda: _streaming(slave, relay)), "the slave never streamed"
        err = _ended(slave, sig)
    finally:
        _stop(slave, master)
    assert slave.returncode == code, err
    assert "Traceback" not in err, err
    lines = err.strip().splitlines()
    assert lines[-1] == line, err
    assert sum(1 for text in lines if text == line) == 1, err
    summary = [text for text in lines if text.startswith("dumpfilter slave: server_id 31 stopped at ")]
    assert len(summary) == 1, err
    fields = status_fields(relay)
    assert fields["Slave_IO_Running"] == "No" and fields["Seconds_Behind_Master"] == "NULL", fields
