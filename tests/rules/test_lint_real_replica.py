"""`dumpfilter lint` against the oracle: a real MariaDB replica with the same `replicate-*` rules.

Each row of CASES is one observed breakage class (or a case that looks dangerous and does not break),
with the server behaviour it models. The primary runs the workload under the row's binlog format; lint
reads the primary's binlog files; the replica (seeded outside replication, as a dump would) replicates
them. Lint's first predicted break must be where the replica stopped: same errno, same
Relay_Master_Log_File and Exec_Master_Log_Pos; no predicted break must mean the replica caught up.

One primary and one replica serve every row: the replica's filters are dynamic in MariaDB
(SET GLOBAL replicate_* with the SQL thread stopped), the primary is RESET between rows."""

from __future__ import annotations

import json

import pytest

from dumpfilter.cli.app import main
from dumpfilter.lab.sandbox import make_replica, wait_caught_up

pytestmark = pytest.mark.mariadb

SEED = ["CREATE DATABASE a", "CREATE DATABASE b", "CREATE TABLE a.t (id INT PRIMARY KEY, v INT)",
        "CREATE TABLE b.t (id INT PRIMARY KEY, v INT)", "INSERT INTO a.t VALUES (1, 1)"]

# (id, formats, replica rules, workload, expected errno or None, the server behaviour modelled)
CASES = [
    ("skipped-alter", ("STATEMENT", "MIXED"), ["--replicate-do-db=a"],
     ["USE b", "ALTER TABLE a.t ADD COLUMN w INT", "USE a", "INSERT INTO t VALUES (2, 2, 2)"], 1136,
     "do-db judges the ALTER by its default database b (rpl_filter.cc db_ok): skipped; the kept INSERT "
     "carries 3 values for a 2-column replica table: ER_WRONG_VALUE_COUNT_ON_ROW"),
    ("skipped-alter-row", ("ROW",), ["--replicate-do-db=a"],
     ["USE b", "ALTER TABLE a.t ADD COLUMN w INT", "USE a", "INSERT INTO t VALUES (2, 2, 2)"], None,
     "looks dangerous, does not break: row events carry their own column count and the replica drops "
     "the extra master column (rpl_utility.cc table_def::compatible_with)"),
    ("skipped-create-temporary", ("STATEMENT", "MIXED"), ["--replicate-ignore-table=a.tmp"],
     ["USE a", "CREATE TEMPORARY TABLE tmp (id INT PRIMARY KEY, v INT)", "INSERT INTO tmp VALUES (5, 5)",
      "INSERT INTO t SELECT * FROM tmp"], 1146,
     "ignore-table skips CREATE TEMPORARY TABLE a.tmp (tables_ok); INSERT ... SELECT updates a.t only and is "
     "kept, then cannot open tmp: ER_NO_SUCH_TABLE"),
    ("skipped-create-temporary-row", ("ROW",), ["--replicate-ignore-table=a.tmp"],
     ["USE a", "CREATE TEMPORARY TABLE tmp (id INT PRIMARY KEY, v INT)", "INSERT INTO tmp VALUES (5, 5)",
      "INSERT INTO t SELECT * FROM tmp"], None,
     "looks dangerous, does not break: under ROW temporary tables are not logged and the INSERT arrives "
     "as rows of a.t"),
    ("skipped-create-database", ("STATEMENT", "ROW", "MIXED"), ["--replicate-wild-do-table=d.t%"],
     ["CREATE DATABASE d", "USE d", "CREATE TABLE t1 (id INT PRIMARY KEY)"], 1049,
     "CREATE DATABASE is judged by db_ok_with_wild_table: 'd.' does not match 'd.t%', skipped; CREATE TABLE "
     "d.t1 matches and is kept: ER_BAD_DB_ERROR"),
    ("create-database-kept", ("STATEMENT", "ROW", "MIXED"), ["--replicate-wild-do-table=d.%"],
     ["CREATE DATABASE d", "USE d", "CREATE TABLE t1 (id INT PRIMARY KEY)", "INSERT INTO t1 VALUES (1)"], None,
     "a wild rule whose table part is % matches 'd.': CREATE DATABASE is kept, nothing breaks"),
    ("cross-database-do-db", ("STATEMENT", "ROW", "MIXED"), ["--replicate-do-db=a"],
     ["USE b", "CREATE TABLE a.n (id INT PRIMARY KEY)", "USE a", "INSERT INTO n VALUES (1)"], 1146,
     "do-db judges CREATE TABLE a.n by its default database b: skipped; the INSERT (a statement, or rows of "
     "a.n) is kept and finds no table: ER_NO_SUCH_TABLE"),
    ("cross-database-default-db", ("STATEMENT", "MIXED"), ["--replicate-do-db=a"],
     ["USE a", "CREATE TABLE n (id INT PRIMARY KEY)", "USE b", "INSERT INTO a.n VALUES (1)", "USE a",
      "INSERT INTO n SELECT id + 10 FROM n"], None,
     "looks dangerous, does not break: the cross-database INSERT under USE b is skipped, not applied"),
    ("idempotent-create", ("STATEMENT", "ROW", "MIXED"), ["--replicate-do-db=a"],
     ["USE b", "DROP TABLE a.t", "USE a", "CREATE TABLE t (id INT PRIMARY KEY)", "INSERT INTO t VALUES (9)"], None,
     "looks dangerous, does not break on MariaDB: the skipped DROP leaves a.t on the replica, and "
     "slave_ddl_exec_mode=IDEMPOTENT (the default) runs the kept CREATE TABLE as CREATE OR REPLACE"),
    ("kept-view", ("STATEMENT", "ROW", "MIXED"), ["--replicate-do-db=a"],
     ["USE a", "CREATE VIEW v AS SELECT id, v FROM t", "INSERT INTO v VALUES (3, 3)", "UPDATE v SET v = 4"], None,
     "a view the replica created is a table to the statements after it: nothing breaks"),
    ("skipped-create-view", ("STATEMENT", "MIXED"), ["--replicate-do-db=a"],
     ["USE b", "CREATE VIEW a.v AS SELECT id, v FROM a.t", "USE a", "INSERT INTO v VALUES (3, 3)"], 1146,
     "do-db judges CREATE VIEW a.v by its default database b: skipped; the INSERT through the view is kept "
     "and finds no such table: ER_NO_SUCH_TABLE"),
    ("skipped-create-view-row", ("ROW",), ["--replicate-do-db=a"],
     ["USE b", "CREATE VIEW a.v AS SELECT id, v FROM a.t", "USE a", "INSERT INTO v VALUES (3, 3)"], None,
     "looks dangerous, does not break: under ROW the INSERT through the view arrives as rows of a.t"),
    ("view-on-skipped-table", ("STATEMENT", "ROW", "MIXED"), ["--replicate-do-db=a"],
     ["USE b", "CREATE TABLE a.n (id INT PRIMARY KEY)", "USE a", "CREATE VIEW w AS SELECT id FROM n"], 1146,
     "the CREATE TABLE under USE b is skipped; the kept CREATE VIEW reads a table the replica lacks"),
    ("skipped-drop-view", ("STATEMENT", "ROW", "MIXED"), ["--replicate-do-db=a"],
     ["USE a", "CREATE VIEW v AS SELECT id FROM t", "USE b", "DROP VIEW a.v", "USE a",
      "CREATE VIEW v AS SELECT v FROM t"], 1050,
     "the skipped DROP VIEW leaves a.v on the replica; slave_ddl_exec_mode=IDEMPOTENT does not reach views, "
     "so the kept CREATE VIEW finds it: ER_TABLE_EXISTS_ERROR"),
    ("skipped-drop-view-or-replace", ("STATEMENT", "ROW", "MIXED"), ["--replicate-do-db=a"],
     ["USE a", "CREATE VIEW v AS SELECT id FROM t", "USE b", "DROP VIEW a.v", "USE a",
      "CREATE OR REPLACE VIEW v AS SELECT v FROM t"], None,
     "looks dangerous, does not break: CREATE OR REPLACE takes the view the skipped DROP left"),
    ("drop-view-never-created", ("STATEMENT", "ROW", "MIXED"), ["--replicate-do-db=a"],
     ["USE b", "CREATE VIEW a.v AS SELECT id FROM a.t", "USE a", "DROP VIEW v"], 4092,
     "the CREATE VIEW under USE b is skipped; IDEMPOTENT does not make DROP VIEW an IF EXISTS: "
     "ER_UNKNOWN_VIEW (MySQL's is 1051, ER_BAD_TABLE_ERROR)"),
    ("alter-view-never-created", ("STATEMENT", "ROW", "MIXED"), ["--replicate-do-db=a"],
     ["USE b", "CREATE VIEW a.v AS SELECT id FROM a.t", "USE a", "ALTER VIEW v AS SELECT v FROM t"], 1146,
     "ALTER VIEW needs the view the skipped CREATE VIEW never made: ER_NO_SUCH_TABLE"),
    # Routines, events and triggers the replica is given under a database it never got (#81 goal 1).
    ("routine-in-skipped-database", ("STATEMENT", "ROW", "MIXED"), ["--replicate-wild-do-table=a.%"],
     ["CREATE DATABASE c", "USE c", "CREATE PROCEDURE p() SELECT 1"], 1049,
     "'c.' matches no wild-do pattern: CREATE DATABASE c is skipped; CREATE PROCEDURE has no table list, so "
     "table rules keep it (all_tables_not_ok), and its unqualified name lives in the default database c: "
     "ER_BAD_DB_ERROR"),
    ("function-in-ignored-database", ("STATEMENT", "ROW", "MIXED"), ["--replicate-wild-ignore-table=c.%"],
     ["CREATE DATABASE c", "USE c", "CREATE FUNCTION f() RETURNS INT DETERMINISTIC RETURN 1"], 1049,
     "wild-ignore c.% skips CREATE DATABASE c ('c.' matches); the CREATE FUNCTION under USE c is kept: "
     "ER_BAD_DB_ERROR"),
    ("event-in-skipped-database", ("STATEMENT", "ROW", "MIXED"), ["--replicate-wild-do-table=a.%"],
     ["CREATE DATABASE c", "USE c", "CREATE EVENT e ON SCHEDULE EVERY 1 DAY DO SELECT 1"], 1049,
     "CREATE EVENT in a database the replica never got: ER_BAD_DB_ERROR"),
    ("alter-event-in-skipped-database", ("STATEMENT", "ROW", "MIXED"), ["--replicate-wild-do-table=a.%"],
     ["CREATE DATABASE c", "SET sql_log_bin = 0", "CREATE EVENT c.e ON SCHEDULE EVERY 1 DAY DO SELECT 1",
      "SET sql_log_bin = 1", "USE c", "ALTER EVENT e COMMENT 'x'"], 1049,
     "ALTER EVENT in a database the replica never got: ER_BAD_DB_ERROR"),
    ("drop-procedure-in-skipped-database", ("STATEMENT", "ROW", "MIXED"), ["--replicate-wild-do-table=a.%"],
     ["CREATE DATABASE c", "SET sql_log_bin = 0", "CREATE PROCEDURE c.p() SELECT 1", "SET sql_log_bin = 1",
      "USE c", "DROP PROCEDURE p"], 1305,
     "DROP PROCEDURE of a routine in a database the replica never got: ER_SP_DOES_NOT_EXIST"),
    ("drop-event-in-skipped-database", ("STATEMENT", "ROW", "MIXED"), ["--replicate-wild-do-table=a.%"],
     ["CREATE DATABASE c", "SET sql_log_bin = 0", "CREATE EVENT c.e ON SCHEDULE EVERY 1 DAY DO SELECT 1",
      "SET sql_log_bin = 1", "USE c", "DROP EVENT e"], 1539,
     "DROP EVENT of an event in a database the replica never got: ER_EVENT_DOES_NOT_EXIST"),
    ("drop-procedure-if-exists-in-skipped-database", ("STATEMENT", "ROW", "MIXED"), ["--replicate-wild-do-table=a.%"],
     ["CREATE DATABASE c", "SET sql_log_bin = 0", "CREATE PROCEDURE c.p() SELECT 1", "SET sql_log_bin = 1",
      "USE c", "DROP PROCEDURE IF EXISTS p"], None,
     "looks dangerous, does not break: DROP ... IF EXISTS of a routine the replica lacks is a note"),
    ("qualified-routine-under-skipped-database", ("STATEMENT", "ROW", "MIXED"), ["--replicate-wild-do-table=a.%"],
     ["CREATE DATABASE c", "USE c", "CREATE PROCEDURE a.p() INSERT INTO a.t VALUES (7, 7)", "CALL a.p()"], None,
     "looks dangerous, does not break: the applier does not open the default database; a routine named "
     "into a database the replica has is created there"),
    ("trigger-on-skipped-table", ("STATEMENT", "ROW", "MIXED"), ["--replicate-do-db=a"],
     ["USE b", "CREATE TABLE a.n (id INT PRIMARY KEY)", "USE a",
      "CREATE TRIGGER tr BEFORE INSERT ON n FOR EACH ROW SET NEW.id = NEW.id"], 1146,
     "the CREATE TABLE under USE b is skipped; the kept CREATE TRIGGER opens a table the replica lacks"),
]
ROWS = [(case_id, fmt, rules, workload, errno) for case_id, formats, rules, workload, errno, _ in CASES
        for fmt in formats]

_FILTER_VARS = ("replicate_do_db", "replicate_ignore_db", "replicate_do_table", "replicate_ignore_table",
                "replicate_wild_do_table", "replicate_wild_ignore_table")


def user_databases(server) -> list[str]:
    rows = server.query("SELECT SCHEMA_NAME AS s FROM information_schema.SCHEMATA")
    return [r["s"] for r in rows if r["s"] not in ("mysql", "information_schema", "performance_schema", "sys")]


def set_filters(replica, options: list[str]) -> None:
    values = {name: [] for name in _FILTER_VARS}
    for option in options:
        name, _, value = option.removeprefix("--").partition("=")
        values[name.replace("-", "_")].append(value)
    replica.execute([f"SET GLOBAL {name} = '{','.join(vals)}'" for name, vals in values.items()])


@pytest.fixture(scope="module")
def servers(mariadb_factory):
    return mariadb_factory("lint-primary"), mariadb_factory("lint-replica", log_bin=False)


@pytest.mark.parametrize(("case_id", "fmt", "rules", "workload", "errno"), ROWS,
                         ids=[f"{r[0]}-{r[1]}" for r in ROWS])
def test_lint_agrees_with_real_replica(servers, capsys, tmp_path, case_id, fmt, rules, workload, errno):
    primary, replica = servers
    replica.execute(["STOP SLAVE", "RESET SLAVE ALL"])
    replica.execute([f"DROP DATABASE `{n}`" for n in user_databases(replica)] + SEED)
    set_filters(replica, rules)
    primary.execute(["SET SESSION sql_log_bin = 0", *[f"DROP DATABASE `{n}`" for n in user_databases(primary)],
                     *SEED])
    primary.reset_master()
    primary.execute([f"SET SESSION binlog_format = '{fmt}'", *workload])
    primary.flush_logs()

    # Twice: without a schema (the seed is taken to exist on both sides), and with the seed as the
    # replica's starting schema (--schema; then what it lacks is absent). Both must match the replica.
    schema = tmp_path / "seed.sql"
    schema.write_text(";\n".join(SEED) + ";\n")
    reports = []
    for extra in ([], ["--schema", str(schema)]):
        capsys.readouterr()
        code = main(["lint", *map(str, primary.binlog_files()), *rules, *extra, "--json"])
        reports.append((code, json.loads(capsys.readouterr().out)))
    assert reports[0] == reports[1], reports
    code, report = reports[0]
    breaks = report["breaks"]

    make_replica(primary, replica)
    status = wait_caught_up(primary, replica, timeout=30)
    if status.caught_up:
        assert code == 0 and breaks == [], f"lint predicted {breaks} but the replica caught up"
    else:
        assert status.stopped_with_error, status.describe()
        assert code == 1 and breaks, f"the replica stopped ({status.describe()}) but lint predicted no break"
        first = breaks[0]
        assert (first["errno"], first["file"], first["pos"]) == (
            status.last_sql_errno, status.relay_master_log_file, status.exec_master_log_pos), \
            (first, status.describe())
    # The expectation of the table: the oracle itself behaves as the row says.
    assert (None if status.caught_up else status.last_sql_errno) == errno, status.describe()
    if errno is not None:
        assert breaks[0]["cause"] and breaks[0]["cause"]["file"], breaks[0]


def _replicate(primary, replica):
    make_replica(primary, replica)
    return wait_caught_up(primary, replica, timeout=30)


def test_a_replica_that_pre_created_its_database_is_linted_from_its_own_schema(servers, capsys):
    """#27.4: the replica's starting schema is not the master's. Under replicate-wild-do-table=d.t%,
    CREATE DATABASE d is skipped ('d.' matches no pattern) and CREATE TABLE d.t1 is kept. A replica
    that created d itself applies the binlog; lint says so when given that replica's schema
    (--replica-schema, read from the running replica's information_schema), and without it predicts
    the 1049 that a replica started empty really stops with, at the same position."""
    primary, replica = servers
    rules = ["--replicate-wild-do-table=d.t%"]
    primary.execute(["SET SESSION sql_log_bin = 0", *[f"DROP DATABASE `{n}`" for n in user_databases(primary)]])
    primary.reset_master()
    primary.execute(["CREATE DATABASE d", "USE d", "CREATE TABLE t1 (id INT PRIMARY KEY)",
                     "INSERT INTO t1 VALUES (1)", "CREATE TABLE t2 (id INT PRIMARY KEY)", "INSERT INTO t2 VALUES (2)"])
    primary.flush_logs()
    binlogs = [str(p) for p in primary.binlog_files()]

    def lint(*extra):
        capsys.readouterr()
        code = main(["lint", *binlogs, *rules, *extra, "--json"])
        return code, json.loads(capsys.readouterr().out)["breaks"]

    for pre_created in (True, False):
        replica.execute(["STOP SLAVE", "RESET SLAVE ALL"])
        replica.execute([f"DROP DATABASE `{n}`" for n in user_databases(replica)]
                        + (["CREATE DATABASE d"] if pre_created else []))
        set_filters(replica, rules)
        own = lint("--replica-schema", f"mysql://root@127.0.0.1:{replica.port}/")  # before it replicates
        master_only = lint()
        status = _replicate(primary, replica)
        # Without --replica-schema, lint starts the replica as the master was: no database d.
        code, breaks = master_only
        assert code == 1 and (breaks[0]["errno"], breaks[0]["cause"]["rule"]) == (1049, "replicate-wild-do-table")
        code, breaks = own
        if pre_created:
            assert status.caught_up, status.describe()
            assert replica.query("SELECT id FROM d.t1") == [{"id": 1}]
            assert code == 0 and breaks == [], breaks
        else:
            assert status.stopped_with_error and status.last_sql_errno == 1049, status.describe()
            for _code, found in (own, master_only):
                assert (found[0]["errno"], found[0]["file"], found[0]["pos"]) == (
                    status.last_sql_errno, status.relay_master_log_file, status.exec_master_log_pos)
