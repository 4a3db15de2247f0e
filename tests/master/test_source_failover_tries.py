"""`master serve --source-failover-tries N` (issue #44 item 5): how many failed tries in a row give
the current --source up for the next candidate. Counted first on the replicator alone (its tries
refused, no wait between them), then with real MariaDB servers: a killed primary is tried exactly
N times before the master moves to the promoted standby."""

from __future__ import annotations

import threading

import pytest

from dumpfilter.master.upstream import source as source_module
from dumpfilter.master.upstream.binlog_mirror import BinlogMirror
from dumpfilter.master.upstream.source import FAILOVER_AFTER, SourceReplicator, SourceURL


def _tries_before_failover(tmp_path, monkeypatch, **options) -> int:
    """How many tries of the first candidate failed when the replicator first asked the others."""
    monkeypatch.setattr(source_module, "BACKOFF", (0.0,))
    urls = [SourceURL.parse("mysql://repl@127.0.0.1:1"), SourceURL.parse("mysql://repl@127.0.0.1:2")]
    replicator = SourceReplicator(urls, BinlogMirror(tmp_path / "series"), **options)
    tries: list[str] = []
    asked: list[int] = []
    done = threading.Event()

    def refused(url, gtid):
        tries.append(str(url))
        raise OSError("connection refused")

    def failover():
        asked.append(len(tries))
        replicator.stop_event.set()
        done.set()

    monkeypatch.setattr(replicator, "_open", refused)
    monkeypatch.setattr(replicator, "_failover", failover)
    replicator.start()
    assert done.wait(30)
    replicator.stop()
    assert set(tries) == {str(urls[0])}  # only the current source was tried before the others were asked
    return asked[0]


def test_the_default_gives_a_source_up_after_three_tries(tmp_path, monkeypatch):
    assert FAILOVER_AFTER == 3
    assert _tries_before_failover(tmp_path, monkeypatch) == 3


@pytest.mark.parametrize("tries", [1, 7])
def test_the_option_sets_how_many_tries_give_a_source_up(tmp_path, monkeypatch, tries):
    assert _tries_before_failover(tmp_path, monkeypatch, failover_after=tries) == tries


def test_fewer_than_one_try_is_refused(tmp_path, capsys):
    from dumpfilter.cli.app import main

    assert main(["master", "serve", "--binlog-dir", str(tmp_path), "--source", "mysql://repl@127.0.0.1:1",
                 "--source-failover-tries", "0"]) == 2
    assert "--source-failover-tries 0: must be 1 or more" in capsys.readouterr().err


def test_the_option_needs_source(tmp_path, capsys):
    from dumpfilter.cli.app import main

    assert main(["master", "serve", "--binlog-dir", str(tmp_path), "--source-failover-tries", "5"]) == 2
    assert "--source-failover-tries" in capsys.readouterr().err


@pytest.mark.mariadb
@pytest.mark.timeout(300)
def test_a_killed_primary_is_tried_n_times_before_the_standby(mariadb_factory, tmp_path):
    from dumpfilter.lab.sandbox import make_replica, wait_caught_up
    from tests.support.master_command import master_status, serve_master, stop_master
    from tests.support.mysql_replicas import insert_rows
    from tests.support.waiting import wait_for

    durable = ["--innodb-flush-log-at-trx-commit=1", "--sync-binlog=1", "--log-slave-updates"]
    primary = mariadb_factory("p-tries", options=durable)
    standby = mariadb_factory("s-tries", options=durable)
    primary.execute(["CREATE DATABASE s1", "CREATE TABLE s1.t (id INT PRIMARY KEY, v VARCHAR(3000))"])
    make_replica(primary, standby)
    urls = [f"mysql://{s.repl_user}:{s.repl_password}@127.0.0.1:{s.port}" for s in (primary, standby)]
    tries = 5
    proc, address = serve_master(tmp_path / "series", "--source", urls[0], "--source", urls[1],
                                 "--source-failover-tries", str(tries))
    try:
        insert_rows(primary, 1, 20, 100)
        assert wait_caught_up(primary, standby, timeout=60).caught_up
        end = primary.master_position()
        assert wait_for(lambda: (tmp_path / "series" / end[0]).exists()
                        and (tmp_path / "series" / end[0]).stat().st_size == end[1], every=0.1)
        primary._proc.kill()  # SIGKILL: every later try is refused at once
        primary._proc.wait(10)
        standby.execute(["STOP SLAVE", "RESET SLAVE ALL"])  # promoted
        insert_rows(standby, 1000, 5, 100)
        assert wait_for(lambda: "switches 1" in master_status(address), every=0.2), master_status(address)
    finally:
        stderr = stop_master(proc)
    lines = stderr.splitlines()
    switch = next(i for i, line in enumerate(lines) if "source: now " in line)
    lost = [line for line in lines[:switch] if f"source {primary.repl_user}@127.0.0.1:{primary.port}" in line and "reconnecting" in line]
    # The dump that broke when the primary died had made progress, so it starts the count afresh:
    # then exactly `tries` reconnections fail before the standby is asked.
    assert len(lost) == 1 + tries, "\n".join(lost)
