"""Live tailing is event-driven (issue #30): with the master's safety-net poll set to an hour, no
heartbeats, no reconnect for an hour (slave_net_timeout) and `slave run`'s commit interval at an
hour, rows committed on a real MariaDB primary
still reach every waiting stream: real replicas behind the MySQL endpoint apply them, and
`slave run` processes record them in relay-log.info (durable). Nothing but the binlog
directory's change (inotify) can have woken the streams, and nothing but the caught-up batch
can have started the slaves' commits."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

from dumpfilter.binlogs import watch as watch_module
from dumpfilter.master.serve.grpc_server import create_server
from dumpfilter.master.endpoint import MysqlEndpoint, ReplicaMap
from dumpfilter.master.upstream.binlog_mirror import BinlogMirror
from dumpfilter.master.upstream.source import SourceReplicator, SourceURL
from dumpfilter.slave.relay_log import RelayInfo

from tests.support.mysql_replicas import point_at, wait_applied
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.mariadb, pytest.mark.timeout(300)]

ROOT = Path(__file__).resolve().parents[2]
HOUR = 3600
GIVE_UP = 50  # ends a wait that would never end (a stream nothing wakes): below every timer above
REPLICAS = {41: "wake-replica-41", 42: "wake-replica-42"}
SLAVES = {51: ("--relay-commit-interval", str(HOUR)), 52: ("--relay-commit-interval", str(HOUR)), 53: ()}


def _slave(address: str, relay: Path, server_id: int, extra: tuple[str, ...], log: Path) -> subprocess.Popen:
    with open(log, "ab") as err:
        return subprocess.Popen([sys.executable, "-m", "dumpfilter", "slave", "run", "--master", address,
                                 "--server-id", str(server_id), "--relay-log-dir", str(relay),
                                 "--heartbeat-period", str(HOUR), "--net-timeout", str(HOUR), *extra], cwd=ROOT, stdout=subprocess.DEVNULL,
                                stderr=err)


def _idle_for_an_hour(replica) -> None:
    """A replica that hears nothing reconnects after slave_net_timeout (60 s by default), and the
    new dump would read what the old one missed: an hour here, so only a wake can deliver."""
    replica.execute("SET GLOBAL slave_net_timeout = 3600")


def _recorded(relay: Path) -> tuple[str, int] | None:
    info = RelayInfo.load(relay)
    return (info.master_file, info.master_pos) if info is not None else None


def _rows_reach_everyone(primary, replicas: dict, relays: list[Path]) -> None:
    """Three rows, one at a time: each is applied by every replica and recorded by every slave
    (the position the primary's binlog ends at after it: a --source series keeps its offsets)."""
    for row in (1, 2, 3):
        primary.execute(f"INSERT INTO a.t VALUES ({row})")
        end = primary.master_position()
        for sid, replica in replicas.items():
            assert wait_for(lambda: replica.query("SELECT COUNT(*) AS n FROM a.t")[0]["n"] == row, give_up=GIVE_UP), \
                f"replica {sid} did not get row {row}"
        for relay in relays:
            assert wait_for(lambda: _recorded(relay) == end, give_up=GIVE_UP), \
                f"{relay.name} did not record {end}: {_recorded(relay)}"


def _stop(slaves: dict[int, subprocess.Popen]) -> None:
    for proc in slaves.values():
        proc.send_signal(signal.SIGTERM)
    for proc in slaves.values():
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()


def test_a_commit_on_a_live_primary_wakes_every_waiting_stream(mariadb_factory, tmp_path):
    primary = mariadb_factory("wake-primary", server_id=40)
    primary.execute(["CREATE DATABASE a", "CREATE TABLE a.t (id INT PRIMARY KEY)"])
    replicas = {sid: mariadb_factory(name, server_id=sid, log_bin=False) for sid, name in REPLICAS.items()}
    master, port = create_server(primary.binlog_dir, "127.0.0.1:0", safety_poll=HOUR)
    endpoint = MysqlEndpoint(master.service, "127.0.0.1:0", replicas=ReplicaMap.load(None))
    slaves: dict[int, subprocess.Popen] = {}
    try:
        for replica in replicas.values():
            _idle_for_an_hour(replica)
            point_at(replica, endpoint.port, gtid=True, heartbeat=0)  # 0: no heartbeats from the master
        for sid, extra in SLAVES.items():
            slaves[sid] = _slave(f"127.0.0.1:{port}", tmp_path / f"relay-{sid}", sid, extra, tmp_path / f"{sid}.log")
        end = primary.master_position()
        for sid, replica in replicas.items():
            wait_applied(replica, service=master.service, server_id=sid)
        for sid in SLAVES:
            assert wait_for(lambda: _recorded(tmp_path / f"relay-{sid}") == end, give_up=60), \
                (sid, _recorded(tmp_path / f"relay-{sid}"), (tmp_path / f"{sid}.log").read_text())
        assert master.service.watch.event_driven
        streams = [s for s in master.service.slaves.values() if s.stream is not None]
        assert len(streams) == len(REPLICAS) + len(SLAVES)  # every one of them waits at the binlog's end
        _rows_reach_everyone(primary, replicas, [tmp_path / f"relay-{sid}" for sid in SLAVES])
    finally:
        _stop(slaves)
        for replica in replicas.values():
            replica.execute("STOP SLAVE")
        endpoint.stop()
        master.stop(grace=1.0)


def test_with_source_the_event_written_wakes_the_streams(mariadb_factory, tmp_path, monkeypatch):
    """`master serve --source`: the mirror wakes the streams after each transaction it writes.
    inotify is kept out of it here (as where it is unavailable), and the safety net is an hour."""
    monkeypatch.setattr(watch_module, "_inotify", lambda: None)
    primary = mariadb_factory("wake-source", server_id=60)
    primary.execute(["CREATE DATABASE a", "CREATE TABLE a.t (id INT PRIMARY KEY)"])
    replica = mariadb_factory("wake-source-replica", server_id=61, log_bin=False)
    local = tmp_path / "series"
    url = SourceURL.parse(f"mysql://{primary.repl_user}:{primary.repl_password}@127.0.0.1:{primary.port}")
    replicator = SourceReplicator(url, BinlogMirror(local))
    replicator.start()
    slaves: dict[int, subprocess.Popen] = {}
    master = endpoint = None
    try:
        assert replicator.wait_ready(30), replicator.last_error
        master, port = create_server(local, "127.0.0.1:0", safety_poll=HOUR)
        replicator.mirror.on_unit = master.service.watch.changed  # as `master serve --source` wires it
        endpoint = MysqlEndpoint(master.service, "127.0.0.1:0", replicas=ReplicaMap.load(None))
        _idle_for_an_hour(replica)
        point_at(replica, endpoint.port, gtid=True, heartbeat=0)
        slaves[62] = _slave(f"127.0.0.1:{port}", tmp_path / "relay-62", 62, ("--relay-commit-interval", str(HOUR)),
                            tmp_path / "62.log")
        end = primary.master_position()
        assert wait_for(lambda: replicator.mirror.safe == end, give_up=60)
        wait_applied(replica, service=master.service, server_id=61)
        assert wait_for(lambda: _recorded(tmp_path / "relay-62") == end, give_up=60), (tmp_path / "62.log").read_text()
        assert not master.service.watch.event_driven  # only the mirror can wake the streams
        _rows_reach_everyone(primary, {61: replica}, [tmp_path / "relay-62"])
    finally:
        _stop(slaves)
        replica.execute("STOP SLAVE")
        if endpoint is not None:
            endpoint.stop()
        if master is not None:
            master.stop(grace=1.0)
        replicator.stop()
