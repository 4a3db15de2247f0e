"""replicate-rewrite-db reaches a real replica behind --mysql-listen (issue #41, item 1): a
filter-free MariaDB replica whose registered rules rewrite gets the events renamed as its own SQL
thread would apply them, and ends with the data and the positions of a replica that rewrites for
itself, connected to the primary. The shapes are those of MariaDB's suite/rpl rewrite tests
(rpl_rewrt_db, rpl_filter_tables_dynamic's rewrite part, BUG#37656): the statement's default
database renamed, qualified names in the statement left alone, a Table_map's database renamed, a
name that grows, one that shrinks, and `lower_case_table_names=1` folding before the rewrite."""

from __future__ import annotations

import pytest

from dumpfilter.lab.sandbox import diff_snapshots, make_replica, replica_status, snapshot, wait_caught_up
from dumpfilter.lab.verify.against_replicas import _run_script
from dumpfilter.lab.verify.against_replicas import split_statements
from dumpfilter.master.serve.grpc_server import create_server
from dumpfilter.master.endpoint import MysqlEndpoint, ReplicaMap

from tests.support.mysql_replicas import point_at, wait_applied

pytestmark = [pytest.mark.mariadb, pytest.mark.timeout(300)]

RULES = ["replicate-rewrite-db=mysqltest_from->mysqltest_to",          # shorter
         "replicate-rewrite-db=primary_db1->replica_db1",              # as long
         "replicate-rewrite-db=s1->a_database_with_a_much_longer_name"]  # longer: the replica's count
SEED_PRIMARY = "CREATE DATABASE mysqltest_from; CREATE DATABASE primary_db1; CREATE DATABASE s1; CREATE DATABASE other;"
SEED_REPLICA = ("CREATE DATABASE mysqltest_to; CREATE DATABASE replica_db1; "
                "CREATE DATABASE a_database_with_a_much_longer_name; CREATE DATABASE other;")
WORKLOAD = """
USE mysqltest_from;
CREATE TABLE a (i INT PRIMARY KEY, v VARCHAR(20));
INSERT INTO a VALUES (1, 'one'), (2, 'two');
UPDATE a SET v = 'zwei' WHERE i = 2;
CREATE TABLE other.q (i INT PRIMARY KEY);
INSERT INTO other.q VALUES (7);
USE primary_db1;
CREATE TABLE my_table (id INT PRIMARY KEY, payload VARCHAR(40));
INSERT INTO my_table VALUES (1, 'first'), (2, 'second');
BEGIN;
INSERT INTO my_table VALUES (3, 'third');
DELETE FROM my_table WHERE id = 1;
COMMIT;
USE s1;
CREATE TABLE t (id INT PRIMARY KEY, n INT);
INSERT INTO t VALUES (1, 1), (2, 2), (3, 3);
UPDATE t SET n = n * 10;
DELETE FROM t WHERE id = 3;
USE other;
INSERT INTO other.q VALUES (8);
USE s1;
INSERT INTO t VALUES (9, 9);
"""
# server_id -> (skip policy, GTID start?)
REPLICAS = {61: ("heartbeat", False), 62: ("heartbeat", True), 63: ("placeholder", False)}
POSITIONS = ("Master_Log_File", "Read_Master_Log_Pos", "Relay_Master_Log_File", "Exec_Master_Log_Pos")


def _topology(tmp_path, rules, *, lctn: int = 0) -> str:
    quoted = ", ".join(f'"{r}"' for r in rules)
    lines = []
    for sid, (policy, _gtid) in REPLICAS.items():
        lines += ["[[slaves]]", f'name = "real-{sid}"', f"server_id = {sid}", 'flavor = "mariadb"',
                  f'skip_policy = "{policy}"', f"lower_case_table_names = {lctn}", f"rules = [{quoted}]", ""]
    path = tmp_path / "replicas.toml"
    path.write_text("\n".join(lines))
    return str(path)


def _run(mariadb_factory, tmp_path, *, binlog_format: str, rules, seed_primary: str, seed_replica: str,
         workload: str, lctn: int = 0):
    options = [f"--lower-case-table-names={lctn}"] if lctn else []
    primary = mariadb_factory(f"rw-primary-{binlog_format}", binlog_format=binlog_format)
    truth = mariadb_factory(f"rw-truth-{binlog_format}", log_bin=False, options=["--" + r for r in rules] + options)
    replicas = {sid: mariadb_factory(f"rw-real-{sid}-{binlog_format}", server_id=sid, log_bin=False, options=options)
                for sid in REPLICAS}
    _run_script(primary, split_statements(seed_primary), log_bin=False, what="seed")
    for server in (truth, *replicas.values()):
        _run_script(server, split_statements(seed_replica), log_bin=False, what="seed")
    make_replica(primary, truth)
    master, _port = create_server(primary.binlog_dir, "127.0.0.1:0")
    endpoint = MysqlEndpoint(master.service, "127.0.0.1:0", replicas=ReplicaMap.load(_topology(tmp_path, rules,
                                                                                                  lctn=lctn)))
    try:
        first_file = primary.binlog_files()[0].name
        for sid, replica in replicas.items():
            point_at(replica, endpoint.port, gtid=REPLICAS[sid][1], log_file=first_file)
        _run_script(primary, split_statements(workload), log_bin=True, what="workload")
        status = wait_caught_up(primary, truth, timeout=90)
        assert status.caught_up, status.describe()
        expected = snapshot(truth)
        assert sum(t.row_count for t in expected.tables.values()) > 0
        truth_at = {k: replica_status(truth)[k] for k in POSITIONS}
        for sid, replica in replicas.items():
            state = wait_applied(replica, service=master.service, server_id=sid, timeout=90)
            differences = diff_snapshots(expected, snapshot(replica))
            assert differences == [], f"server_id {sid} {REPLICAS[sid]}:\n" + "\n".join(differences)
            assert {k: state[k] for k in POSITIONS} == truth_at, f"server_id {sid} {REPLICAS[sid]}"
        return expected
    finally:
        endpoint.stop()
        master.stop(grace=1.0)


@pytest.mark.parametrize("binlog_format", ["STATEMENT", "ROW"])
def test_a_real_replica_gets_the_rewrite_its_registered_rules_say(mariadb_factory, tmp_path, binlog_format):
    expected = _run(mariadb_factory, tmp_path, binlog_format=binlog_format, rules=RULES, seed_primary=SEED_PRIMARY,
                    seed_replica=SEED_REPLICA, workload=WORKLOAD)
    assert {("mysqltest_to", "a"), ("replica_db1", "my_table"), ("a_database_with_a_much_longer_name", "t"),
            ("other", "q")} <= set(expected.tables)


def test_lower_case_table_names_folds_before_the_rewrite(mariadb_factory, tmp_path):
    """BUG#37656 (rpl_rewrite_db_filter-like): the primary writes `USE B37656`; a replica with
    lower_case_table_names=1 folds it to b37656, then its rule b37656->bug37656 renames it."""
    expected = _run(mariadb_factory, tmp_path, binlog_format="STATEMENT",
                    rules=["replicate-rewrite-db=b37656->bug37656"],
                    seed_primary="CREATE DATABASE B37656;", seed_replica="CREATE DATABASE bug37656;",
                    workload="USE B37656; CREATE TABLE T1 (a INT); INSERT INTO T1 VALUES (1), (2);", lctn=1)
    assert ("bug37656", "t1") in expected.tables


def test_load_data_lands_where_the_rewrite_says(mariadb_factory, tmp_path):
    """rpl_loaddata-like under STATEMENT: MariaDB logs LOAD DATA as Begin_load_query (the file's
    bytes) and Execute_load_query (the statement, with its default database). The replica behind
    the endpoint gets the Execute_load_query's database renamed and loads the rows where a replica
    with the rule itself loads them."""
    rows = tmp_path / "rows.txt"
    rows.write_text("1\tone\n2\ttwo\n3\tthree\n")
    rows.chmod(0o644)
    tmp_path.chmod(0o755)
    expected = _run(mariadb_factory, tmp_path, binlog_format="STATEMENT",
                    rules=["replicate-rewrite-db=mysqltest_from->mysqltest_to"],
                    seed_primary="CREATE DATABASE mysqltest_from;", seed_replica="CREATE DATABASE mysqltest_to;",
                    workload="USE mysqltest_from; CREATE TABLE a (i INT PRIMARY KEY, v VARCHAR(20)); "
                             f"LOAD DATA INFILE '{rows}' INTO TABLE a;")
    assert expected.tables[("mysqltest_to", "a")].row_count == 3
