"""A tier of binlog servers on a live primary (issue #31 item 5): a real MariaDB primary -> dumpfilter
A (`--source` the primary) -> dumpfilter B (`--source` A's --mysql-listen) -> a real MariaDB replica
with rules from B's --replicas and a `slave run` with its own rules, both ending as references that
replicate the primary directly and filter for themselves; B's series is A's byte for byte, and A's
the primary's (but for the in-use flag a server's dump thread clears)."""

from __future__ import annotations

import pytest

from dumpfilter.lab.sandbox import diff_snapshots, make_replica, snapshot, wait_caught_up
from dumpfilter.rules.ruleset import RuleSet, Settings
from tests.support.dump_helpers import run_slave
from tests.support.master_command import free_port, serve_master, stop_master
from tests.support.mysql_replicas import converge, point_at
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.mariadb, pytest.mark.timeout(300)]

REPLICA_RULES = ["replicate-ignore-db=s2"]          # the real replica behind B (server_id 81)
SLAVE_RULES = ["replicate-wild-ignore-table=s3.%"]  # the `slave run` behind B (server_id 82)


def _write(primary, first: int, count: int) -> None:
    conn = primary.connect()
    with conn.cursor() as cur:
        for i in range(first, first + count):
            cur.execute(f"INSERT INTO s{1 + i % 3}.t VALUES ({i}, {i})")
    conn.close()


def test_primary_to_a_to_b_to_a_real_replica_and_a_slave(mariadb_factory, tmp_path):
    primary = mariadb_factory("primary-tier")
    reference_81 = mariadb_factory("reference-81", log_bin=False, options=["--" + r for r in REPLICA_RULES])
    reference_82 = mariadb_factory("reference-82", log_bin=False, options=["--" + r for r in SLAVE_RULES])
    real = mariadb_factory("real-81", server_id=81, log_bin=False)
    target = mariadb_factory("target-82", log_bin=False)
    primary.execute([f"CREATE DATABASE s{i}" for i in (1, 2, 3)])
    for i in (1, 2, 3):
        primary.execute(["CREATE TABLE t (id INT PRIMARY KEY, v INT)"], db=f"s{i}")
    for reference in (reference_81, reference_82):
        make_replica(primary, reference)
    topology = tmp_path / "replicas.toml"
    topology.write_text(f'[[slaves]]\nname = "r81"\nserver_id = 81\nflavor = "mariadb"\nrules = {REPLICA_RULES!r}\n'
                        .replace("'", '"'))
    a_dir, b_dir = tmp_path / "a", tmp_path / "b"
    a_port, b_port = free_port(), free_port()
    a, _a_address = serve_master(a_dir, "--source", f"mysql://{primary.repl_user}:{primary.repl_password}@127.0.0.1:"
                                 f"{primary.port}", "--mysql-listen", f"127.0.0.1:{a_port}")
    procs = [a]
    try:
        b, b_address = serve_master(b_dir, "--source", f"mysql://tier:x@127.0.0.1:{a_port}",
                                    "--mysql-listen", f"127.0.0.1:{b_port}", "--replicas", str(topology))
        procs.append(b)
        point_at(real, b_port, gtid=True)
        _write(primary, 1, 60)
        primary.flush_logs()  # the Rotate goes down the tier: a new file in A and in B
        _write(primary, 61, 60)

        def holds_all(local) -> bool:
            file, pos = primary.master_position()
            return (local / file).is_file() and (local / file).stat().st_size == pos
        assert wait_for(lambda: holds_all(a_dir) and holds_all(b_dir), every=0.1)
        names = [p.name for p in primary.binlog_files()]
        assert len(names) >= 2
        for name in names:
            ours, theirs = (b_dir / name).read_bytes(), (a_dir / name).read_bytes()
            assert ours == theirs, name  # the second series is the first, byte for byte
            primary_bytes = bytearray((primary.binlog_dir / name).read_bytes())
            primary_bytes[21] &= ~1  # LOG_EVENT_BINLOG_IN_USE_F, which the primary's dump thread clears
            copy = bytearray(theirs)
            copy[21] &= ~1
            assert copy == primary_bytes, name
        for reference in (reference_81, reference_82):
            assert wait_caught_up(primary, reference, timeout=60).caught_up
        assert converge(reference_81, real) == []
        assert diff_snapshots(snapshot(reference_81), snapshot(primary)) != []  # the rules did hold something back
        run_slave(b_address, tmp_path / "relay82", 82, rules=RuleSet(wild_ignore_table=("s3.%",)),
                  settings=Settings(flavor="mariadb"), apply_url=f"mysql://root@127.0.0.1:{target.port}")
        assert diff_snapshots(snapshot(reference_82), snapshot(target)) == []
        assert diff_snapshots(snapshot(reference_82), snapshot(primary)) != []
    finally:
        errors = [stop_master(proc) for proc in reversed(procs)]
    for stderr in errors:
        assert "Traceback" not in stderr, stderr
