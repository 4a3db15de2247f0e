"""`master serve --source` against a real MariaDB primary, at the edges of issue #27: a local series
that cannot grow (RLIMIT_FSIZE standing in for a full disk) ends at its last whole transaction,
which real readers read to the end; and the primary's password never shows in the process's
command line."""

from __future__ import annotations

import os
import resource
import subprocess
import sys

import pytest

from dumpfilter.binlogs import TailingReader
from dumpfilter.codec import group_transactions
from dumpfilter.lab.sandbox import find_binary
from tests.support.dump_helpers import relay_units, run_slave
from tests.support.master_command import serve_master, stop_master
from tests.support.mysql_replicas import insert_rows
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.mariadb, pytest.mark.timeout(240)]


@pytest.fixture(scope="module")
def primary(mariadb_factory):
    server = mariadb_factory("primary-limits")
    server.execute(["CREATE DATABASE s1", "CREATE TABLE s1.t (id INT PRIMARY KEY, v VARCHAR(3000))"])
    return server


def test_a_series_that_cannot_grow_ends_at_its_last_whole_transaction(primary, tmp_path):
    """Issue #27 item 9: the file size limit cuts a write in the middle of an event. The series is
    cut back to the end of its last whole transaction, the master stops taking from the primary
    with one line (it retries while the limit stands: #32, test_source_disk_full), and serves what
    is there: a dumpfilter slave and mariadb-binlog read the
    series to its end, which is the primary's binlog byte for byte up to there."""
    limit = 200_000
    primary.flush_logs()
    start = primary.master_position()[0]
    local = tmp_path / "series"

    def small_files():
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    url = f"mysql://{primary.repl_user}:{primary.repl_password}@127.0.0.1:{primary.port}"
    proc, address = serve_master(local, "--source", url, "--source-file", start, preexec_fn=small_files)
    try:
        insert_rows(primary, 1, 150, 2500)  # ~400 KB of binlog: twice what the local file may hold
        seen = []
        for line in proc.stderr:  # bounded: the master prints this line once, or the test times out
            seen.append(line)
            if "cannot write" in line:
                break
        line = seen[-1]
        assert f"{start}" in line and "File too large" in line and "whole transaction" in line, seen
        ends = [e.end_pos for txn in group_transactions(e for _, e in TailingReader(local))
                for e in txn.events[-1:]]
        size = (local / start).stat().st_size
        ours_before = (local / start).read_bytes()[:size]
        assert 4 < size <= limit and size == ends[-1]  # no torn event, no partial transaction
        ours, theirs = bytearray((local / start).read_bytes()), bytearray((primary.binlog_dir / start).read_bytes())
        ours[21] &= ~1
        theirs[21] &= ~1
        assert ours == theirs[:size]
        insert_rows(primary, 1000, 5, 10)  # small enough to fit: the series no longer takes them
        slave = run_slave(address, tmp_path / "relay", 5)
        assert slave.caught_up and (slave.info.master_file, slave.info.master_pos) == (start, size)
        assert relay_units(tmp_path / "relay")
        decoded = subprocess.run([find_binary("mariadb-binlog"), str(local / start)], capture_output=True, text=True,
                                 timeout=60)
        assert decoded.returncode == 0 and "ERROR" not in decoded.stderr, decoded.stderr
        # The retries while the limit stands (every 0.2 to 5 s) may append the next transaction's
        # first events before the one that does not fit, and cut them back: what they leave is
        # the series up to `size` as it was and whole events after it, never a torn one (a write
        # past the limit is refused whole, not cut by the kernel at the limit).
        now = (local / start).read_bytes()
        assert now[:size] == ours_before and len(now) <= limit
        at = size
        while at + 19 <= len(now):
            at += int.from_bytes(now[at + 9 : at + 13], "little")
        assert at == len(now), f"a torn event at {at} of {len(now)}"
    finally:
        stderr = "".join(seen) + stop_master(proc)
    assert "Traceback" not in stderr and stderr.count("cannot write") == 1, stderr


def _cmdline(pid: int) -> bytes:
    with open(f"/proc/{pid}/cmdline", "rb") as f:
        return f.read()


@pytest.mark.parametrize("how", ["file", "environment", "url"])
def test_the_source_password_never_shows_in_the_process_list(how, primary, tmp_path):
    """Issue #27 item 10: the primary's password from a file, from DUMPFILTER_SOURCE_PASSWORD, or
    inline in --source (then scrubbed, with a warning): the master replicates and serves, and
    /proc/PID/cmdline (what ps prints) never holds the password."""
    password = primary.repl_password
    env = {k: v for k, v in os.environ.items() if k != "DUMPFILTER_SOURCE_PASSWORD"}
    extra = []
    url = f"mysql://{primary.repl_user}@127.0.0.1:{primary.port}"
    if how == "file":
        secret = tmp_path / "pw"
        secret.write_text(password + "\n")
        extra = ["--source-password-file", str(secret)]
    elif how == "environment":
        env["DUMPFILTER_SOURCE_PASSWORD"] = password
    else:
        url = f"mysql://{primary.repl_user}:{password}@127.0.0.1:{primary.port}"
    local = tmp_path / "series"
    proc, address = serve_master(local, "--source", url, "--source-file", primary.master_position()[0], *extra, env=env)
    try:
        assert password.encode() not in _cmdline(proc.pid)
        assert b"--source" in _cmdline(proc.pid)  # the rest of the command line is left as it was
        insert_rows(primary, 2000 + 100 * len(how), 3, 10)
        assert wait_for(lambda: (local / primary.master_position()[0]).stat().st_size >= primary.master_position()[1],
                        every=0.1), "the series does not follow the primary"
        assert run_slave(address, tmp_path / "relay", 6).caught_up
    finally:
        stderr = stop_master(proc)
    assert password not in stderr and "Traceback" not in stderr
    assert ("prefer --source-password-file" in stderr) == (how == "url")


def test_a_source_password_file_that_cannot_be_read_is_one_line(tmp_path):
    run = subprocess.run([sys.executable, "-m", "dumpfilter", "master", "serve", "--binlog-dir", str(tmp_path / "s"),
                          "--source", "mysql://repl@127.0.0.1:1", "--source-password-file", str(tmp_path / "none")],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 2 and "Traceback" not in run.stderr
    assert run.stderr.strip().splitlines() == [
        f"dumpfilter: error: --source-password-file {tmp_path / 'none'}: No such file or directory"]
