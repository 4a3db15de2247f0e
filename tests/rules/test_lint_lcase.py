"""Issue #58 goal 5: `lint` under lower_case_table_names=1 holds the replica's side in the names the
replica uses: a MariaDB replica with lower_case_table_names=1 lower-cases every database and table
name it is sent (set_thd_db, Table_map_log_event::do_apply_event, the parser's names: MariaDB's
rpl_row_lcase_tblnames / rpl_stm_lcase_tblnames, BUG#37656), whatever case the master (=0) wrote.

The oracle is a real replica started with --lower-case-table-names=1 and the test's options.
Without the fold, lint with that replica's own schema (--replica-schema) predicted 1049
`Unknown database 'bug_37656'` and 1146 on `T2` where the replica applies everything."""

from __future__ import annotations

import json

import pytest

from dumpfilter.cli.app import main
from dumpfilter.lab.sandbox import make_replica, wait_caught_up

pytestmark = pytest.mark.mariadb

# mysql-test/suite/rpl/t/rpl_row_lcase_tblnames.test and rpl_stm_lcase_tblnames.test (-slave.opt).
BUG_37656 = ["--replicate-do-db=bug_37656", "--replicate-ignore-table=buG_37656.T1",
             "--replicate-do-table=bUg_37656.T2", "--replicate-do-table=bUg_37656.T3"]
CASES = {
    "bug-37656": (BUG_37656, [
        "CREATE DATABASE BUG_37656", "use BUG_37656", "CREATE TABLE T1 (a int)", "CREATE TABLE T2 (b int)",
        "CREATE TABLE T3 (txt TEXT)", "INSERT INTO T1 VALUES (1)", "INSERT INTO T2 VALUES (1)", "use test",
        "INSERT INTO BUG_37656.T1 VALUES (2)", "INSERT INTO BUG_37656.T2 VALUES (2)",
        "INSERT INTO BUG_37656.T3 VALUES ('words')"], None),
    # The fold hides no break: a CREATE TABLE under another default database is skipped by do-db,
    # and the kept INSERT into it stops the replica on the folded name.
    "skipped-create": (["--replicate-do-db=bug_37656"], [
        "CREATE DATABASE BUG_37656", "use BUG_37656", "CREATE TABLE T1 (a int)", "use test",
        "CREATE TABLE BUG_37656.T5 (a int)", "use BUG_37656", "INSERT INTO T1 VALUES (1)",
        "INSERT INTO T5 VALUES (1)"], 1146),
}
ROWS = [(case, fmt) for case in CASES for fmt in ("ROW", "STATEMENT", "MIXED")]


def _user_databases(server) -> list[str]:
    rows = server.query("SELECT SCHEMA_NAME AS s FROM information_schema.SCHEMATA")
    return [r["s"] for r in rows if r["s"] not in ("mysql", "information_schema", "performance_schema", "sys", "test")]


@pytest.fixture(scope="module")
def servers(mariadb_factory):
    primary = mariadb_factory("lcase-primary")
    primary.execute("CREATE DATABASE IF NOT EXISTS test")
    replicas = {case: mariadb_factory(f"lcase-replica-{case}", log_bin=False,
                                      options=["--lower-case-table-names=1", *options])
                for case, (options, _, _) in CASES.items()}
    return primary, replicas


@pytest.mark.parametrize(("case", "fmt"), ROWS, ids=[f"{c}-{f}" for c, f in ROWS])
def test_lint_folds_names_as_the_replica_does(servers, capsys, case, fmt):
    primary, replicas = servers
    replica = replicas[case]
    options, workload, errno = CASES[case]
    replica.execute(["STOP SLAVE", "RESET SLAVE ALL", "CREATE DATABASE IF NOT EXISTS test",
                     *[f"DROP DATABASE `{n}`" for n in _user_databases(replica)]])
    primary.execute(["SET SESSION sql_log_bin = 0", *[f"DROP DATABASE `{n}`" for n in _user_databases(primary)]])
    primary.reset_master()
    primary.execute([f"SET SESSION binlog_format = '{fmt}'", *workload])
    primary.flush_logs()
    binlogs = [str(p) for p in primary.binlog_files()]

    reports = []
    for extra in ([], ["--replica-schema", f"mysql://root@127.0.0.1:{replica.port}/"]):
        capsys.readouterr()
        code = main(["lint", *binlogs, *options, "--lower-case-table-names=1", "--flavor=mariadb", *extra, "--json"])
        reports.append((code, json.loads(capsys.readouterr().out)["breaks"]))

    make_replica(primary, replica)
    status = wait_caught_up(primary, replica, timeout=30)
    assert (None if status.caught_up else status.last_sql_errno) == errno, status.describe()
    for code, breaks in reports:
        if status.caught_up:
            assert code == 0 and breaks == [], f"lint predicted {breaks} but the replica caught up"
        else:
            assert code == 1 and breaks, status.describe()
            first = breaks[0]
            assert (first["errno"], first["file"], first["pos"]) == (
                status.last_sql_errno, status.relay_master_log_file, status.exec_master_log_pos), \
                (first, status.describe())
