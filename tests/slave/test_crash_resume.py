"""A slave killed anywhere resumes with nothing lost and nothing duplicated: 20 in-process crashes
at random unit counts (after partial relay writes, before the position is committed) and one real
SIGKILL of a `dumpfilter slave run` process."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dumpfilter.workload.generator import WorkloadSpec, generate
from dumpfilter.rules.ruleset import RuleSet
from tests.support import SimulatedCrash

from tests.support.dump_helpers import relay_units, run_slave
from tests.support.tcp_proxy import FaultyProxy

pytestmark = [pytest.mark.grpc, pytest.mark.timeout(150)]
RULES = RuleSet(ignore_db=("db3",), rewrite_db=(("db1", "dbx"),))


def test_twenty_random_crashes_lose_and_duplicate_nothing(workload_dir, master_factory, tmp_path):
    master, address = master_factory(workload_dir)
    reference = tmp_path / "reference"
    run_slave(address, reference, 71, rules=RULES, relay_log_size=150_000)
    want = relay_units(reference)
    total = len(want)
    rng = random.Random(2387)
    crash_points = sorted(rng.sample(range(1, total), 20))
    relay = tmp_path / "crashy"
    crashes = 0
    for point in crash_points:
        already = len(relay_units(relay)) if (relay / "relay-bin.index").exists() else 0

        def crash(units_written, limit=point - already):
            if units_written >= limit:
                raise SimulatedCrash

        try:
            run_slave(address, relay, 72, after_unit=crash, rules=RULES, relay_log_size=150_000)
        except SimulatedCrash:
            crashes += 1
        else:
            break
    assert crashes >= 15  # most crash points were reached before the slave caught up
    run_slave(address, relay, 72, rules=RULES, relay_log_size=150_000)
    assert relay_units(relay) == want


def _relayed(info: Path) -> bool:
    """relay-log.info names a position past the first file's header: the slave relayed a unit."""
    try:
        return json.loads(info.read_text())["master_pos"] > 4
    except (OSError, ValueError, KeyError):
        return False  # not written yet, or read in the middle of a write in place


def test_sigkill_of_a_slave_process(tmp_path, master_factory):
    binlog = tmp_path / "binlog"
    # 8,000 transactions (3.9 MB) through a link of 2 MB/s: the stream takes over a second, and the
    # kill comes within 0.5 s of the first position the slave committed. (Straight from the master,
    # even 80,000 transactions were relayed whole within 0.14-0.44 s, and making them took 30 s of CPU.)
    generate(WorkloadSpec(seed=3, transactions=8_000, max_binlog_size=1 << 20), binlog)
    master, address = master_factory(binlog)
    host, port = address.rsplit(":", 1)
    link = FaultyProxy((host, int(port)), rate=2_000_000)
    root = Path(__file__).resolve().parents[2]
    command = [sys.executable, "-m", "dumpfilter", "slave", "run", "--master", link.address, "--server-id", "81",
               "--relay-log-dir", str(tmp_path / "relay"), "--replicate-ignore-db", "db2", "--until-caught-up",
               "--relay-log-size", "500000"]
    try:
        proc = subprocess.Popen(command, cwd=root)
        info = tmp_path / "relay" / "relay-log.info"
        deadline = time.monotonic() + 60
        while not _relayed(info) and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(random.Random(5).uniform(0.02, 0.5))
        killed = proc.poll() is None
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    finally:
        link.close()
    assert killed, "the slave finished before it could be killed; make the binlog bigger or the link slower"
    command[command.index(link.address)] = address  # the rest straight from the master
    first_pos = json.loads(info.read_text())["master_pos"]
    reference = tmp_path / "reference"
    run_slave(address, reference, 82, rules=RuleSet(ignore_db=("db2",)), relay_log_size=500_000)
    assert 0 < first_pos and len(relay_units(tmp_path / "relay")) < len(relay_units(reference))  # mid-stream
    assert subprocess.run(command, cwd=root, timeout=120).returncode == 0
    assert relay_units(tmp_path / "relay") == relay_units(reference)
