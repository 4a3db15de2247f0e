"""A slave whose master is down, unreachable or TLS-mismatched tells each failed attempt with its
cause and backoff, and --connect-timeout / --retry-count end it with exit 2; final errors are
not retried; a master that comes up during the retries is reached."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from dumpfilter.errors import DumpFilterError
from dumpfilter.slave.node import Slave
from dumpfilter.slave.config import SlaveConfig
from dumpfilter.lab.ports import free_port

pytestmark = [pytest.mark.grpc, pytest.mark.timeout(120)]
PROJECT_ROOT = Path(__file__).resolve().parents[2]


def _slave(tmp_path, address, **options) -> tuple[Slave, list[str]]:
    told: list[str] = []
    config = SlaveConfig(master=address, server_id=7, relay_dir=tmp_path / "relay", until_caught_up=True,
                         report=told.append, **options)
    return Slave(config), told


def test_slave_with_master_down_tells_each_attempt_and_gives_up_after_retry_count(tmp_path):
    address = f"127.0.0.1:{free_port()}"
    slave, told = _slave(tmp_path, address, connect_retry=0.05, retry_count=3)
    with pytest.raises(DumpFilterError, match=r"not reached after 4 failed attempts \(--retry-count 3\).*UNAVAILABLE"):
        slave.run()
    assert len(told) == 3
    for n, line in enumerate(told, 1):
        assert line.startswith(f"attempt {n} to reach master {address} failed (UNAVAILABLE:")
        assert line.endswith(f"retrying in {0.05 * 2 ** (n - 1):.1f}s")


def test_slave_with_master_down_exits_2_after_connect_timeout(tmp_path):
    address = f"127.0.0.1:{free_port()}"
    run = subprocess.run([sys.executable, "-m", "dumpfilter", "slave", "run", "--master", address, "--server-id", "7",
                          "--relay-log-dir", str(tmp_path / "relay"), "--until-caught-up", "--connect-retry", "0.2",
                          "--connect-timeout", "2"], capture_output=True, text=True, timeout=60, cwd=PROJECT_ROOT)
    assert run.returncode == 2, run.stderr
    lines = run.stderr.strip().splitlines()
    assert lines[-1].startswith("dumpfilter: error: master: UNAVAILABLE:") and "--connect-timeout 2s" in lines[-1]
    attempts = [line for line in lines if line.startswith("dumpfilter slave: attempt ")]
    assert len(attempts) >= 2 and all("retrying in" in line and "Connection refused" in line for line in attempts)
    # It gave up: the backoff doubles from 0.2 s and the last attempt is made at the 2 s deadline,
    # so at most 4 retries fit (a loaded machine makes fewer, never more); a slave that kept
    # retrying would be stopped by the subprocess's 60 s give-up instead of exiting 2.
    assert len(attempts) <= 5, attempts
    assert "Traceback" not in run.stderr


def test_slave_with_tls_to_a_plaintext_master_tells_the_cause(tmp_path, workload_dir, master_factory):
    from tests.support.tls_helpers import make_pki

    pki = make_pki(tmp_path / "pki")
    if pki is None:
        pytest.skip("the openssl command is needed to make test certificates")
    _, address = master_factory(workload_dir)  # plaintext
    slave, told = _slave(tmp_path, address, tls_ca=pki / "ca.crt", connect_retry=0.05, retry_count=1)
    with pytest.raises(DumpFilterError, match="UNAVAILABLE"):
        slave.run()
    assert len(told) == 1 and "UNAVAILABLE" in told[0] and ("ssl" in told[0].lower() or "handshake" in told[0].lower()
                                                              or "tls" in told[0].lower()), told


def test_final_errors_are_not_retried(tmp_path, workload_dir, master_factory):
    policy = tmp_path / "policy.toml"
    policy.write_text('[slave.ana]\npassword = "pw"\nallow = ["db1.%"]\n')
    _, address = master_factory(workload_dir, policy=policy)
    slave, told = _slave(tmp_path, address, user="ana", password="wrong", connect_retry=0.05, retry_count=5)
    with pytest.raises(DumpFilterError, match="UNAUTHENTICATED"):
        slave.run()
    assert told == []


def test_slave_reaches_a_master_that_comes_up_while_it_retries(tmp_path, workload_dir):
    from dumpfilter.master.serve.grpc_server import create_server

    port = free_port()
    slave, told = _slave(tmp_path, f"127.0.0.1:{port}", connect_retry=0.2, connect_timeout=30)
    masters = []

    def late_master():
        time.sleep(1.0)
        masters.append(create_server(workload_dir, f"127.0.0.1:{port}")[0])

    thread = threading.Thread(target=late_master)
    thread.start()
    try:
        assert slave.run() == 0
    finally:
        thread.join()
        for master in masters:
            master.stop(grace=0.5)
    assert told and slave.caught_up and slave.counters.events_relayed > 0


def test_tcp_proxy_that_drops_resets_and_stalls_mid_batch_loses_and_duplicates_nothing(
        tmp_path, workload_dir, master_factory):
    """Between slave and master, a proxy cuts the link (FIN, then RST) or holds it (longer than
    --net-timeout) every 300 KB, mid-batch: the slave reconnects each time, telling why, and its
    relay log ends identical to the one of a slave on a clean link."""
    from tests.support.dump_helpers import relay_units, run_slave
    from dumpfilter.rules.ruleset import RuleSet
    from tests.support.tcp_proxy import FaultyProxy

    rules = RuleSet(ignore_db=("db3",), rewrite_db=(("db1", "dbx"),))
    _, address = master_factory(workload_dir, batch_bytes=256 << 10)
    run_slave(address, tmp_path / "clean", 81, rules=rules, relay_log_size=150_000)
    host, port = address.rsplit(":", 1)
    proxy = FaultyProxy((host, int(port)), every=300_000, stall=3.0)  # batches of 256 KiB: cut mid-batch
    try:
        slave, told = _slave(tmp_path, proxy.address, rules=rules, relay_log_size=150_000, connect_retry=0.05,
                             connect_timeout=60, net_timeout=1.0, heartbeat_period=0.2, rpc_timeout=2.0)
        assert slave.run() == 0
    finally:
        proxy.close()
    assert all(n >= 1 for n in proxy.injected.values()), (proxy.injected, told)
    assert len(told) >= sum(proxy.injected.values()) - 1
    assert any("--net-timeout" in line for line in told), told
    assert relay_units(tmp_path / "relay") == relay_units(tmp_path / "clean")


def test_relay_log_that_cannot_grow_is_a_clear_error_and_resumes_once_space_is_freed(
        tmp_path, workload_dir, master_factory):
    """RLIMIT_FSIZE on the slave process stands in for a full disk (it needs no root and no
    mount): the slave ends with one line and exit 2, its relay log holds only committed batches,
    and a run without the limit resumes to a relay log identical to a clean slave's."""
    import resource

    from tests.support.dump_helpers import relay_units, run_slave
    from dumpfilter.binlogs import TailingReader

    _, address = master_factory(workload_dir, batch_bytes=256 << 10)  # several batches fit the limit
    run_slave(address, tmp_path / "clean", 91, relay_log_size=4 << 20)
    relay = tmp_path / "relay"
    limit = 400_000

    def small_files():
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    argv = [sys.executable, "-m", "dumpfilter", "slave", "run", "--master", address, "--server-id", "91",
            "--relay-log-dir", str(relay), "--until-caught-up", "--relay-log-size", str(4 << 20)]
    run = subprocess.run(argv, capture_output=True, text=True, timeout=60, cwd=PROJECT_ROOT, preexec_fn=small_files)
    assert run.returncode == 2, run.stderr
    lines = run.stderr.strip().splitlines()  # the run's summary line, then the error
    assert "Traceback" not in run.stderr and lines[-1].startswith(
        f"dumpfilter: error: relay log in {relay}: cannot write: File too large"), run.stderr
    info = json.loads((relay / "relay-log.info").read_text())
    # What is on disk up to the committed point reads back whole; the run without the limit
    # cuts the rest away and resumes.
    committed = [e for _, e in TailingReader(relay, start_pos=4)
                 if e.end_pos <= info["relay_pos"]] if info.get("relay_file") else []
    assert committed
    again = subprocess.run(argv, capture_output=True, text=True, timeout=60, cwd=PROJECT_ROOT)
    assert again.returncode == 0, again.stderr
    assert relay_units(relay) == relay_units(tmp_path / "clean")


@pytest.mark.grpc
def test_dump_batches_are_read_on_the_slaves_own_thread(workload_dir, master_factory, tmp_path):
    """The slave's channel reads Dump's batches on the thread that asks for them (grpc's
    SingleThreadedUnaryStream): no channel thread of grpc's takes each batch and wakes the reader,
    a hand-over on the path of every live batch (issue #30)."""
    import threading

    from tests.support.dump_helpers import run_slave

    _, address = master_factory(workload_dir)
    seen: set = set()

    def look(_n: int) -> None:
        seen.update(getattr(getattr(t, "_target", None), "__module__", None) for t in threading.enumerate())

    slave = run_slave(address, tmp_path / "relay", 77, after_unit=look)
    assert slave.units_written > 0 and seen  # looked while it read
    assert "grpc._cython.cygrpc" not in seen  # the channel's spin thread
