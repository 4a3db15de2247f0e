"""Three dumpfilter slaves with different rules stream the binlog a real MariaDB writes (the master
tails its live datadir); each slave's relay log, applied to a fresh MariaDB with --apply, matches a
real MariaDB replica started with the same --replicate-* options."""

from __future__ import annotations

import random

import pytest

from dumpfilter.rules.ruleset import RuleSet
from dumpfilter.lab.sandbox import diff_snapshots, make_replica, snapshot, wait_caught_up

from tests.support.dump_helpers import run_slave

pytestmark = [pytest.mark.grpc, pytest.mark.mariadb, pytest.mark.timeout(180)]

SCHEMAS = ("s1", "s2", "s3", "s3r")
CASES = [
    (["--replicate-do-db=s1"], RuleSet(do_db=("s1",))),
    (["--replicate-ignore-db=s2", "--replicate-wild-ignore-table=s3.t_ign%"],
     RuleSet(ignore_db=("s2",), wild_ignore_table=("s3.t_ign%",))),
    (["--replicate-do-table=s1.t1", "--replicate-wild-do-table=s3r.%", "--replicate-rewrite-db=s3->s3r"],
     RuleSet(do_table=("s1.t1",), wild_do_table=("s3r.%",), rewrite_db=(("s3", "s3r"),))),
]


def workload(primary) -> None:
    rng = random.Random(2387)
    for s in ("s1", "s2", "s3"):
        for t in ("t1", "t2", "t_ign1"):
            primary.execute(f"CREATE TABLE {t} (id INT PRIMARY KEY, v INT)", db=s)
    conn = primary.connect()
    with conn.cursor() as cur:
        for i in range(300):
            s, t = rng.choice(("s1", "s2", "s3")), rng.choice(("t1", "t2", "t_ign1"))
            cur.execute(f"USE {rng.choice(('s1', 's2', 's3'))}")
            cur.execute("BEGIN")
            cur.execute(f"INSERT INTO {s}.{t} VALUES ({i}, {rng.randrange(1000)})")
            if i % 3 == 0:  # transactions touching two schemas: ROW splits them per table
                s2, t2 = rng.choice(("s1", "s2", "s3")), rng.choice(("t1", "t2"))
                cur.execute(f"INSERT INTO {s2}.{t2} VALUES ({10_000 + i}, {i})")
            if i % 7 == 0:
                cur.execute(f"UPDATE {s}.{t} SET v = v + 1 WHERE id < {i}")
            if i % 11 == 0:
                cur.execute(f"DELETE FROM {s}.{t} WHERE id = {i - 5}")
            cur.execute("COMMIT")
    conn.close()


def test_three_slaves_match_real_replicas(mariadb_factory, master_factory, tmp_path):
    primary = mariadb_factory("primary")
    primary.execute(["SET sql_log_bin=0"] + [f"CREATE DATABASE {s}" for s in SCHEMAS])
    replicas, targets = [], []
    for n, (options, _rules) in enumerate(CASES):
        replica = mariadb_factory(f"replica{n}", options=options)
        target = mariadb_factory(f"target{n}")
        for server in (replica, target):
            # The schemas exist everywhere beforehand: a CREATE DATABASE run without a default
            # database is skipped by replicate-do-db (and the DDL after it would then fail).
            server.execute(["SET sql_log_bin=0"] + [f"CREATE DATABASE {s}" for s in SCHEMAS])
        make_replica(primary, replica)
        replicas.append(replica)
        targets.append(target)
    master, address = master_factory(primary.binlog_dir)
    workload(primary)
    for n, (_options, rules) in enumerate(CASES):
        status = wait_caught_up(primary, replicas[n], timeout=60)
        assert status.caught_up, status.describe()
        slave = run_slave(address, tmp_path / f"relay{n}", 200 + n, rules=rules,
                          apply_url=f"mysql://root@127.0.0.1:{targets[n].port}")
        assert slave.counters.check_disagreements == 0
        expected = snapshot(replicas[n])
        assert sum(t.row_count for t in expected.tables.values()) > 0
        differences = diff_snapshots(expected, snapshot(targets[n]))
        assert differences == [], "\n".join(differences)
    stats = {s.server_id: s.stats for s in master.service.slaves.values()}
    assert all(st.bytes_skipped > 0 for st in stats.values())
