"""`master serve --source` when the local series cannot grow (issue #32 part 3), against a real
MariaDB primary: RLIMIT_FSIZE on the master process stands in for a full disk and is lifted from
the test (prlimit on the master's pid) as space would return. The master says so once, shows it in
`master status` and the metrics, serves what it holds meanwhile, and resumes by itself after its
last whole transaction: a real replica and a `slave run` behind it end identical to the primary."""

from __future__ import annotations

import resource
import subprocess
import urllib.request

import pytest

from dumpfilter.binlogs import TailingReader
from dumpfilter.codec import group_transactions
from dumpfilter.lab.sandbox import diff_snapshots, find_binary, snapshot
from dumpfilter.rules.ruleset import Settings
from tests.support.dump_helpers import run_slave
from tests.support.master_command import free_port, master_status, serve_master, stop_master
from tests.support.mysql_replicas import converge, insert_rows, point_at, wait_applied
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.mariadb, pytest.mark.timeout(300)]
LIMIT = 200_000  # bytes the master may write in one file until the test lifts the limit


def _metric(url: str, name: str) -> float:
    with urllib.request.urlopen(url, timeout=30) as reply:
        for line in reply.read().decode().splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
    raise AssertionError(f"{name} not in {url}")


def _ends_whole(local, name: str) -> bool:
    """The file ends where a transaction ends: no torn event, no partial transaction."""
    ends = [txn.events[-1].end_pos for txn in group_transactions(e for _, e in TailingReader(local))]
    return bool(ends) and (local / name).stat().st_size == ends[-1]


def test_a_full_series_stalls_serves_and_resumes_by_itself(mariadb_factory, tmp_path):
    primary = mariadb_factory("primary-full")
    replica = mariadb_factory("replica-full", log_bin=False)
    target = mariadb_factory("target-full", log_bin=False)
    primary.flush_logs()
    start = primary.master_position()[0]
    primary.execute(["CREATE DATABASE s1", "CREATE TABLE s1.t (id INT PRIMARY KEY, v VARCHAR(3000))"])
    local = tmp_path / "series"
    mysql_port = free_port()

    def small_files():  # a soft limit the test may lift later (the hard one stays unlimited)
        resource.setrlimit(resource.RLIMIT_FSIZE, (LIMIT, resource.RLIM_INFINITY))

    url = f"mysql://{primary.repl_user}:{primary.repl_password}@127.0.0.1:{primary.port}"
    proc, address = serve_master(local, "--source", url, "--source-file", start, "--metrics-port", "0",
                                 "--mysql-listen", f"127.0.0.1:{mysql_port}", preexec_fn=small_files)
    seen: list[str] = []
    for line in proc.stderr:  # printed right after "serving"
        seen.append(line)
        if "metrics on" in line:
            break
    metrics = seen[-1].split("metrics on ", 1)[1].strip()
    try:
        point_at(replica, mysql_port, gtid=False, log_file=start)
        insert_rows(primary, 1, 150, 2500)  # ~400 KB of binlog: twice what the local file may hold
        for line in proc.stderr:  # bounded: the master prints this line once, or the test times out
            seen.append(line)
            if "cannot write" in line:
                break
        assert "File too large" in seen[-1] and "until it can grow" in seen[-1], seen
        size = (local / start).stat().st_size
        assert 4 < size <= LIMIT and _ends_whole(local, start)
        # stalled: said in `master status` and the metrics; taking nothing more from the primary
        assert "source " in master_status(address) and "FULL" in master_status(address)
        assert _metric(metrics, "dumpfilter_source_series_full") == 1.0
        assert _metric(metrics, "dumpfilter_source_series_full_stalls_total") == 1.0
        assert _metric(metrics, "dumpfilter_source_switches_total") == 0.0  # one --source: never switches
        assert _metric(metrics, "dumpfilter_source_changed_time_seconds") > 0
        insert_rows(primary, 1000, 40, 2500)  # written on the primary during the stall
        # served what the series holds meanwhile: the slave reads to its end, the replica applies it
        stalled = run_slave(address, tmp_path / "relay-stalled", 9)
        assert stalled.caught_up and (stalled.info.master_file, stalled.info.master_pos) == (start, size)
        assert wait_applied(replica)["Read_Master_Log_Pos"] == size
        assert (local / start).stat().st_size == size  # the retries did not write past the limit

        resource.prlimit(proc.pid, resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))  # space returns
        assert wait_for(lambda: (local / primary.master_position()[0]).exists() and
                        (local / primary.master_position()[0]).stat().st_size == primary.master_position()[1],
                        every=0.2), "the series did not catch up with the primary"
        insert_rows(primary, 2000, 5, 10)  # and it keeps following
        assert wait_for(lambda: (local / primary.master_position()[0]).stat().st_size == primary.master_position()[1],
                        every=0.2)
        assert "FULL" not in master_status(address) and _metric(metrics, "dumpfilter_source_series_full") == 0.0
        assert _metric(metrics, "dumpfilter_source_series_full_stalls_total") == 1.0
        # the series is the primary's binlog byte for byte (but the in-use flag): nothing lost or twice
        names = [p.name for p in primary.binlog_files()]
        for name in names[names.index(start):]:
            ours, theirs = bytearray((local / name).read_bytes()), bytearray((primary.binlog_dir / name).read_bytes())
            ours[21] &= ~1
            theirs[21] &= ~1
            assert ours == theirs, name
        decoded = subprocess.run([find_binary("mariadb-binlog"), str(local / start)], capture_output=True, text=True,
                                 timeout=60)
        assert decoded.returncode == 0 and "ERROR" not in decoded.stderr, decoded.stderr
        # the slaves behind it end identical to the primary
        assert converge(primary, replica) == []
        run_slave(address, tmp_path / "relay", 10, settings=Settings(flavor="mariadb"),
                  apply_url=f"mysql://root@127.0.0.1:{target.port}")
        assert diff_snapshots(snapshot(primary), snapshot(target)) == []
    finally:
        stderr = "".join(seen) + stop_master(proc)
    assert "Traceback" not in stderr, stderr
    assert stderr.count("cannot write") == 1 and stderr.count("grows again") == 1, stderr
