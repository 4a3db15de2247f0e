"""Retention of the series `master serve --source` keeps (issue #32 part 2), against a real MariaDB
primary rotating every ~200 KB: --expire-logs-seconds purges whole files oldest first but stops at
a file a registered slave still reads; --max-series-bytes forces it out, with one line naming the
file and the slave, which then gets OUT_OF_RANGE naming the file; a real replica starting by GTID
from before the purged files gets MariaDB's 1236; the index and the Gtid_list of the first file
left stay consistent; mariadb-binlog reads the series; a real replica that kept up ends identical."""

from __future__ import annotations

import os
import subprocess

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dumpfilter.binlogs import BinlogFile
from dumpfilter.binlogs.gtid_start import file_gtid_list
from dumpfilter.codec import EventType
from dumpfilter.errors import PositionError
from dumpfilter.lab.sandbox import find_binary
from dumpfilter.master.model import Registration
from dumpfilter.master.upstream.binlog_mirror import BinlogMirror
from dumpfilter.master.upstream.retention import RetentionLimits, SeriesRetention, choose_purge
from dumpfilter.master.service import DumpService
from dumpfilter.slave.node import Slave, SlaveConfig
from dumpfilter.workload.generator import WorkloadSpec, generate
from tests.support.dump_helpers import run_slave
from tests.support.master_command import free_port, master_status, serve_master, stop_master
from tests.support.mysql_replicas import converge, insert_rows, point_at, wait_io_error
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.mariadb, pytest.mark.timeout(300)]
CAP = 1_500_000  # --max-series-bytes: seven files of ~200 KB


def _file_of_rows(primary, first: int) -> None:
    """~210 KB of binlog (40 rows of 2.5 KB, each also in its Annotate_rows)."""
    insert_rows(primary, first, 40, 2500)


def _caught_up(local, primary) -> bool:
    file, pos = primary.master_position()
    return (local / file).exists() and (local / file).stat().st_size == pos


def _gtids(path) -> set[tuple[int, int, int]]:
    return {(e.gtid_info.domain, e.gtid_info.server_id, e.gtid_info.gno) for e in BinlogFile(path)
            if e.type_code == EventType.MARIADB_GTID}


def test_retention_purges_oldest_first_keeps_what_slaves_read_and_forces_at_the_cap(mariadb_factory, tmp_path):
    primary = mariadb_factory("primary-retention")
    follower = mariadb_factory("follower-retention", log_bin=False)  # keeps up all along
    late = mariadb_factory("late-retention", log_bin=False)          # starts by GTID after the purges
    primary.flush_logs()
    start = primary.master_position()[0]
    primary.execute(["CREATE DATABASE s1", "CREATE TABLE s1.t (id INT PRIMARY KEY, v VARCHAR(3000))"])
    local = tmp_path / "series"
    mysql_port = free_port()
    url = f"mysql://{primary.repl_user}:{primary.repl_password}@127.0.0.1:{primary.port}"
    proc, address = serve_master(local, "--source", url, "--source-file", start, "--expire-logs-seconds", "3600",
                                 "--max-series-bytes", str(CAP), "--mysql-listen", f"127.0.0.1:{mysql_port}")
    mirror = BinlogMirror(local)  # reads the index only
    try:
        point_at(follower, mysql_port, gtid=False, log_file=start)
        _file_of_rows(primary, 1)
        assert wait_for(lambda: _caught_up(local, primary), every=0.1)
        assert run_slave(address, tmp_path / "relay-a", 21).caught_up  # slave A: positioned in the first file
        for n in (2, 3):
            primary.flush_logs()
            _file_of_rows(primary, 100 * n)
        assert wait_for(lambda: _caught_up(local, primary), every=0.1)
        held = primary.master_position()[0]
        assert run_slave(address, tmp_path / "relay-b", 22).caught_up  # slave B: positioned in the third
        for n in (4, 5):
            primary.flush_logs()
            _file_of_rows(primary, 100 * n)
        primary.flush_logs()
        assert wait_for(lambda: _caught_up(local, primary), every=0.1)
        names = mirror.files()
        assert len(names) == 6 and names[2] == held and mirror.series_bytes() < CAP

        # Every file but the last is older than --expire-logs-seconds. A reads the oldest: nothing
        # goes; once A caught up, the files before B's go, and B's stays. (In one purge or two: a
        # look of retention's, every CHECK_EVERY, may find A reading the second file on a busy host.)
        for name in names[:-1]:
            os.utime(local / name, (1_000_000_000, 1_000_000_000))
        assert run_slave(address, tmp_path / "relay-a", 21).caught_up
        assert wait_for(lambda: mirror.files() == names[2:], every=0.1), (mirror.files(), names)
        # (a purge leaves the index first, then the disk, as MySQL's does: the files go just after)
        assert wait_for(lambda: not (local / names[0]).exists() and not (local / names[1]).exists(), every=0.1)
        # the first file left says what was purged: its Gtid_list covers every GTID of the purged files
        before = file_gtid_list(local / held)
        purged = _gtids(primary.binlog_dir / names[0]) | _gtids(primary.binlog_dir / names[1])
        assert purged and all(seq <= before.gtids.get((d, s), -1) for d, s, seq in purged)
        for name in mirror.files():  # the files left are the primary's, and mariadb-binlog reads them
            ours, theirs = bytearray((local / name).read_bytes()), bytearray((primary.binlog_dir / name).read_bytes())
            ours[21] &= ~1
            theirs[21] &= ~1
            assert ours == theirs, name
        decoded = subprocess.run([find_binary("mariadb-binlog"), *(str(local / n) for n in mirror.files())],
                                 capture_output=True, text=True, timeout=60)
        assert decoded.returncode == 0 and "ERROR" not in decoded.stderr, decoded.stderr

        # A GTID start that needs a purged file: the error a MariaDB server gives.
        domain, server_id, seq = min(purged, key=lambda gtid: gtid[2])
        late.execute([f"SET GLOBAL gtid_slave_pos = '{domain}-{server_id}-{seq}'"])
        point_at(late, mysql_port, gtid=True)
        status = wait_io_error(late)
        assert status["Last_IO_Errno"] == 1236
        assert "Could not find GTID state requested by slave in any binlog files" in status["Last_IO_Error"]

        # Over --max-series-bytes: B's file goes all the same, with one line naming it and B.
        for n in (6, 7, 8, 9, 10):
            _file_of_rows(primary, 100 * n)
            primary.flush_logs()
        assert wait_for(lambda: held not in mirror.files(), every=0.1)
        assert wait_for(lambda: mirror.series_bytes() <= CAP, every=0.1)
        slave = Slave(SlaveConfig(master=address, server_id=22, relay_dir=tmp_path / "relay-b", until_caught_up=True,
                                  connect_retry=0))
        with pytest.raises(PositionError, match=f"1236.*'{held}'"):  # the slave's OUT_OF_RANGE
            slave.run()
        assert slave.info.last_io_errno == 1236 and f"'{held}'" in slave.info.last_error
        assert "(forced 1)" in master_status(address)
        # the slave that kept up never noticed
        assert wait_for(lambda: _caught_up(local, primary), every=0.1)
        assert converge(primary, follower) == []
    finally:
        stderr = stop_master(proc)
    assert "Traceback" not in stderr, stderr
    forced = [line for line in stderr.splitlines() if "retention: purged" in line]
    assert len(forced) == 1 and held in forced[0] and "server_id 22" in forced[0], stderr


@pytest.mark.parametrize("readers, over, expected", [
    ({}, False, ["a", "b", "c"]),              # all expired, nobody reads: all but the last
    ({"b": [7]}, False, ["a"]),                # expiry stops at a file a slave reads
    ({"a": [7]}, False, []),
    ({"a": [7]}, True, ["a", "b"]),            # the cap forces it out, until the series fits
])
def test_plan_purge(readers, over, expected):
    names = ["a", "b", "c", "d"]
    sizes = dict.fromkeys(names, 100)
    limits = RetentionLimits(expire_seconds=None if over else 10, max_bytes=250 if over else None)
    plan = choose_purge(names, sizes, dict.fromkeys(names, 0.0), readers, limits, now=100.0)
    assert plan.names == expected
    assert plan.forced == {name: ids for name, ids in readers.items() if name in expected}


@given(st.lists(st.tuples(st.integers(1, 1000), st.booleans(), st.booleans()), min_size=1, max_size=8),
       st.one_of(st.none(), st.integers(1, 5000)), st.booleans())
def test_plan_purge_keeps_what_it_must(files, cap, expiry):
    """Whatever the sizes, ages and readers: a prefix of the series goes, never its last file; a
    file a slave reads goes only when the cap forces it; the series then fits under the cap (or
    only its last file is left); the first file kept is one that had to stay."""
    names = [f"f.{i:06d}" for i in range(len(files))]
    sizes = {n: size for n, (size, _, _) in zip(names, files)}
    mtimes = {n: 0.0 if old else 99.0 for n, (_, old, _) in zip(names, files)}
    readers = {n: [7] for n, (_, _, read) in zip(names, files) if read}
    limits = RetentionLimits(expire_seconds=10 if expiry else None, max_bytes=cap)
    plan = choose_purge(names, sizes, mtimes, readers, limits, now=100.0)
    assert plan.names == names[:len(plan.names)] and len(plan.names) < len(names)
    assert set(plan.forced) == {n for n in plan.names if n in readers}
    kept = names[len(plan.names):]
    total = sum(sizes[n] for n in kept)
    if plan.forced:
        assert cap is not None
    if cap is not None:
        assert total <= cap or len(kept) == 1
    if len(kept) > 1:
        first = kept[0]
        expired = expiry and mtimes[first] < 90.0
        assert (cap is None or total <= cap) and (not expired or first in readers)


def test_a_running_stream_whose_file_is_forced_out_ends_with_1236_naming_it(tmp_path):
    """A slave streaming from the oldest file when --max-series-bytes forces it out: its stream
    ends with OUT_OF_RANGE / 1236 naming the file, not later, not silently past the loss."""
    directory = tmp_path / "series"
    generate(WorkloadSpec(seed=5, schemas=2, transactions=200, flavor="mariadb", max_binlog_size=20_000), directory)
    mirror = BinlogMirror(directory)
    names = mirror.files()
    assert len(names) >= 3
    service = DumpService(directory, batch_bytes=1)  # a batch per unit: the stream stays in the first file
    service.register(Registration(server_id=9))
    stream = service.stream(9, start=(names[0], 4))
    next(stream)
    assert service.slaves[9].position[0] == names[0]
    first = (directory / names[0]).stat().st_size
    retention = SeriesRetention(mirror, service, RetentionLimits(max_bytes=mirror.series_bytes() - first))
    assert retention.apply() == [names[0]] and retention.forced == 1
    assert mirror.files() == names[1:] and not (directory / names[0]).exists()
    with pytest.raises(PositionError, match=f"'{names[0]}' was purged .* server_id 9"):
        for _ in range(5):  # the batch under way, then the error
            next(stream)


def test_a_reconnecting_slave_keeps_its_file_between_its_register_and_its_dump(tmp_path):
    """A slave's second Register (a reconnect) came with no position, so expiry purged the file it
    read before its Dump asked for it (bench soak: 1236, "named by the index but does not
    exist"). Its last position now holds the file until its new stream reads on."""
    directory = tmp_path / "series"
    generate(WorkloadSpec(seed=5, schemas=2, transactions=200, flavor="mariadb", max_binlog_size=20_000), directory)
    mirror = BinlogMirror(directory)
    names = mirror.files()
    service = DumpService(directory, batch_bytes=1)
    service.register(Registration(server_id=9))
    stream = service.stream(9, start=(names[0], 4))
    next(stream)
    stream.close()
    service.register(Registration(server_id=9))    # the reconnect: Register, then (later) Dump
    retention = SeriesRetention(mirror, service, RetentionLimits(expire_seconds=1), clock=lambda: 2e9)
    assert names[0] not in retention.apply()
    assert (directory / names[0]).exists()
    resumed = service.stream(9, start=service.slaves[9].position)
    assert next(resumed) is not None
