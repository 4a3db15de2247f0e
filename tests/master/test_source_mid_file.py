"""`--source-file F --source-pos P`: the series starts inside a real MariaDB primary's file, with
the primary's offsets kept (its F opens with the FDE, a Gtid_list and IGNORABLE fillers up to P).
The series holds the primary's bytes from P at P, mariadb-binlog reads it, a real MariaDB replica
behind --mysql-listen started at (F, P) and a dumpfilter slave from the file's start end identical
to the primary; a P that is no transaction boundary, or past the file's end, is one line."""

from __future__ import annotations

import subprocess

import pytest
from hypothesis import given, settings, strategies as st

from dumpfilter.cli.app import main
from dumpfilter.lab.sandbox import diff_snapshots, find_binary, snapshot
from dumpfilter.master.serve.grpc_server import create_server
from dumpfilter.master.endpoint import MysqlEndpoint, ReplicaMap
from dumpfilter.master.upstream.binlog_mirror import BinlogMirror
from dumpfilter.master.upstream.mid_file import FILLER_MAX, MidFileError, series_head
from dumpfilter.master.upstream.source import SourceReplicator, SourceURL
from dumpfilter.codec import EventType, read_events
from dumpfilter.codec.constants import LOG_EVENT_IGNORABLE_F
from dumpfilter.codec.encode import format_description
from dumpfilter.codec.scanner import Scanner
from dumpfilter.codec.transactions import group_transactions

from tests.support.dump_helpers import run_slave
from tests.support.mysql_replicas import converge
from tests.support.source_checks import assert_positions_refused
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.mariadb, pytest.mark.timeout(300)]

SCHEMA = ["CREATE DATABASE s1", "CREATE TABLE s1.t (id INT PRIMARY KEY, v VARCHAR(200))"]


def _events(primary, name):
    conn = primary.connect()
    with conn.cursor() as cur:
        cur.execute(f"SHOW BINLOG EVENTS IN '{name}'")
        rows = cur.fetchall()
    conn.close()
    return [(row[1], row[2], row[4]) for row in rows]  # (pos, type, end_log_pos)


def _replicator(primary, local, file, pos):
    url = SourceURL.parse(f"mysql://{primary.repl_user}:{primary.repl_password}@127.0.0.1:{primary.port}")
    return SourceReplicator(url, BinlogMirror(local), start_file=file, start_pos=pos)


def test_series_starts_inside_a_primary_file(mariadb_factory, tmp_path):
    primary = mariadb_factory("primary-midfile")
    replica = mariadb_factory("replica-midfile", server_id=81, log_bin=False)
    from_start = mariadb_factory("replica-midfile-start", server_id=83, log_bin=False)
    target = mariadb_factory("target-midfile", log_bin=False)
    primary.execute(SCHEMA)
    before = [f"INSERT INTO s1.t VALUES ({i}, '{'x' * (i * 7 % 150)}')" for i in range(1, 41)]
    primary.execute(before)
    file, pos = primary.master_position()
    at_p = primary.query("SELECT BINLOG_GTID_POS(%s, %s) AS p", (file, pos))[0]["p"]
    for server in (replica, from_start, target):  # what precedes P, as a seeded replica would hold it
        server.execute(SCHEMA + before)
    primary.execute([f"INSERT INTO s1.t VALUES ({i}, 'after')" for i in range(41, 61)] + ["UPDATE s1.t SET v='u'"])

    local = tmp_path / "series"
    replicator = _replicator(primary, local, file, pos)
    replicator.start()
    master = endpoint = None
    try:
        assert replicator.wait_ready(30), replicator.last_error
        assert wait_for(lambda: replicator.mirror.safe == primary.master_position()), replicator.last_error
        ours, theirs = (local / file).read_bytes(), (primary.binlog_dir / file).read_bytes()
        assert ours[pos:] == theirs[pos:]  # the primary's bytes from P, at P
        head = list(read_events(ours[:pos], file))
        assert head[0].type_code == EventType.FORMAT_DESCRIPTION
        assert head[1].type_code == EventType.MARIADB_GTID_LIST
        assert str(head[1].gtid_set) == at_p  # the primary's GTID state at P
        fillers = head[2:]
        assert fillers and all(e.type_code == EventType.IGNORABLE and e.flags & LOG_EVENT_IGNORABLE_F
                               for e in fillers)
        assert fillers[-1].end_pos == pos
        units = list(group_transactions(list(read_events(ours, file))))
        assert [u.kind for u in units[:len(head)]] == ["control"] * len(head)  # outside any transaction

        # mariadb-binlog reads the series' file whole, and what follows P is the primary's.
        out = subprocess.run([find_binary("mariadb-binlog"), str(local / file)], capture_output=True, text=True)
        assert out.returncode == 0, out.stderr
        assert f"# at {pos}\n" in out.stdout and "Ignorable event type 28" in out.stdout

        primary.flush_logs()
        primary.execute([f"INSERT INTO s1.t VALUES ({i}, 'next')" for i in range(61, 71)])
        master, grpc_port = create_server(local, "127.0.0.1:0")
        endpoint = MysqlEndpoint(master.service, "127.0.0.1:0", replicas=ReplicaMap.load(None))
        # Real replicas: one at (F, P), one at F's start (it reads the head's fillers and skips them).
        for server, at in ((replica, pos), (from_start, 4)):
            server.execute(["STOP SLAVE", "RESET SLAVE ALL",
                            f"CHANGE MASTER TO MASTER_HOST='127.0.0.1', MASTER_PORT={endpoint.port}, MASTER_USER='repl', "
                            f"MASTER_PASSWORD='x', MASTER_LOG_FILE='{file}', MASTER_LOG_POS={at}, MASTER_USE_GTID=no, "
                            "MASTER_CONNECT_RETRY=1", "START SLAVE"])
        for server in (replica, from_start):
            assert converge(primary, server) == []
            status = server.query("SHOW SLAVE STATUS")[0]
            assert not status["Last_IO_Errno"] and status["Master_Log_File"] == primary.master_position()[0]
            # positions behind the endpoint are the primary's
            assert wait_for(lambda: server.query("SHOW SLAVE STATUS")[0]["Read_Master_Log_Pos"]
                            == primary.master_position()[1])
        # A dumpfilter slave reads the series from its file's start: the fillers are control events.
        assert wait_for(lambda: replicator.mirror.safe == primary.master_position()), replicator.last_error
        run_slave(f"127.0.0.1:{grpc_port}", tmp_path / "relay", 82, apply_url=f"mysql://root@127.0.0.1:{target.port}")
        assert diff_snapshots(snapshot(primary), snapshot(target)) == []

        # A restarted master continues the series after its last transaction, fillers and all.
        replicator.stop()
        primary.execute([f"INSERT INTO s1.t VALUES ({i}, 'later')" for i in range(71, 81)])
        replicator = SourceReplicator(replicator.url, BinlogMirror(local))
        assert replicator.mirror.resume_position() is not None
        replicator.start()
        assert wait_for(lambda: replicator.mirror.safe == primary.master_position()), replicator.last_error
        assert (local / file).read_bytes()[:pos] == ours[:pos]
        for name in [p.name for p in primary.binlog_files()]:
            # (from the next file's start, but for LOG_EVENT_BINLOG_IN_USE_F, FDE byte 21, which
            # the dump thread clears as it sends)
            start = pos if name == file else 22
            assert (local / name).read_bytes()[start:] == (primary.binlog_dir / name).read_bytes()[start:], name
    finally:
        if endpoint is not None:
            endpoint.stop()
        if master is not None:
            master.stop(grace=1.0)
        replicator.stop()


def test_a_position_that_is_no_boundary_is_one_line(mariadb_factory, tmp_path, capsys):
    primary = mariadb_factory("primary-midfile-bad")
    primary.execute(SCHEMA + ["INSERT INTO s1.t VALUES (1, 'a')", "INSERT INTO s1.t VALUES (2, 'b')"])
    file, size = primary.master_position()
    events = _events(primary, file)
    gtid_end = next(end for _, kind, end in events if kind == "Gtid" and end != events[-1][2])
    cases = {gtid_end: "inside the transaction", gtid_end + 3: "inside the event", size + 100: "past the end"}
    assert_positions_refused(lambda n, pos: _replicator(primary, tmp_path / f"series{n}", file, pos), cases)
    # `master serve`: the same, as one line and exit 2
    secret = tmp_path / "pw"
    secret.write_text(primary.repl_password)
    code = main(["master", "serve", "--binlog-dir", str(tmp_path / "cli"), "--listen", "127.0.0.1:0",
                 "--source", f"mysql://{primary.repl_user}@127.0.0.1:{primary.port}", "--source-password-file",
                 str(secret), "--source-file", file, "--source-pos", str(gtid_end)])
    err = capsys.readouterr().err
    assert code == 2 and "inside the transaction" in err and len(err.strip().splitlines()) == 1, err


@settings(max_examples=40, deadline=None)
@given(gap=st.one_of(st.integers(23, 5000), st.integers(FILLER_MAX - 30, FILLER_MAX + 30),
                     st.integers(23, 3 * FILLER_MAX + 40)))
def test_fillers_cover_any_gap_exactly(gap):
    fde = format_description("10.11.6-MariaDB-log").raw
    start = 4 + len(fde) + 19 + 4 + 16 + 4
    head = series_head(fde, {(0, 1): 7}, start + gap)
    assert len(head) == start + gap
    events = list(read_events(head, "head"))  # CRCs and log_pos checked as any binlog's
    assert all(e.size <= FILLER_MAX for e in events)
    assert [e.end_pos for e in events][-1] == start + gap
    # The Python grouper and the Rust core both take each filler as a control unit of its own.
    assert {t.kind for t in group_transactions(events)} == {"control"}
    scan = Scanner("head").units(head, 4, 0, at_eof=True)
    assert scan.error is None and [u.kind for u in scan.units] == ["control"] * len(events)


def test_a_gap_no_filler_fits_is_one_line():
    fde = format_description("10.11.6-MariaDB-log").raw
    start = 4 + len(fde) + 19 + 4 + 16 + 4
    with pytest.raises(MidFileError, match=f"--source-pos {start + 5}: too close to the file's start"):
        series_head(fde, {(0, 1): 7}, start + 5)
