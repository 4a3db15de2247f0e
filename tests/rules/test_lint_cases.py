"""`dumpfilter lint` case by case, on binlogs built with dumpfilter.codec.encode (no server needed): one row
per breakage class and per case that looks dangerous but does not break, each citing the server
behaviour it models. tests/rules/test_lint_real_replica.py proves the same classes against a real replica."""

from __future__ import annotations

import io
import json

import pytest

from dumpfilter.codec import BinlogWriter, EventType, group_transactions
from dumpfilter.codec import encode as enc
from dumpfilter.codec.constants import STMT_END_F
from dumpfilter.cli.app import main
from dumpfilter.rules.evaluate import RuleEngine
from dumpfilter.rules.ruleset import Settings
from dumpfilter.rules.lint import Linter
from dumpfilter.rules.parse import StartupFilters
from dumpfilter.rules.schema import SchemaModel
from tests.oracles.lint import feed_all


class Build:
    """A binlog of standalone statements (DDL) and transactions (DML), MariaDB or MySQL flavour."""

    def __init__(self, flavor: str = "mariadb"):
        self.flavor = flavor
        version = "10.11.6-MariaDB-log" if flavor == "mariadb" else "8.0.36"
        self.fde = enc.format_description(version, timestamp=1_700_000_000)
        self.fmt = self.fde.fmt
        self.seq = 0
        self.units: list[list] = []

    def ev(self, type_code, body, flags=0):
        return enc.build_event(type_code, body, fmt=self.fmt, timestamp=1_700_000_000, flags=flags)

    def _gtid(self, standalone: bool):
        self.seq += 1
        if self.flavor == "mariadb":
            return self.ev(EventType.MARIADB_GTID, enc.mariadb_gtid_body(self.seq, standalone=standalone))
        return self.ev(EventType.GTID, enc.mysql_gtid_body("6ba0ff1e-4d0b-11ef-9f4b-0242ac110002", self.seq))

    def q(self, sql: str, db: str = "", thread: int = 1, *, ddl: bool | None = None) -> Build:
        ddl = sql.split()[0].upper() in ("CREATE", "ALTER", "DROP", "RENAME") if ddl is None else ddl
        if ddl and "TEMPORARY" not in sql.upper():
            self.units.append([self._gtid(True), self.ev(EventType.QUERY, enc.query_body(sql, db, thread_id=thread))])
        else:
            unit = [self._gtid(False)]
            if self.flavor == "mysql":
                unit.append(self.ev(EventType.QUERY, enc.query_body("BEGIN", db, thread_id=thread)))
            unit += [self.ev(EventType.QUERY, enc.query_body(sql, db, thread_id=thread)),
                     self.ev(EventType.QUERY, enc.query_body("COMMIT", db, thread_id=thread))]
            self.units.append(unit)
        return self

    def rows(self, db: str, table: str, ncols: int) -> Build:
        unit = [self._gtid(False)]
        if self.flavor == "mysql":
            unit.append(self.ev(EventType.QUERY, enc.query_body("BEGIN", "")))
        unit.append(self.ev(EventType.TABLE_MAP, enc.table_map_body(7, db, table, b"\x03" * ncols)))
        image = b"\x00" + b"\x01\x00\x00\x00" * ncols
        unit.append(self.ev(EventType.WRITE_ROWS_V1 if self.flavor == "mariadb" else EventType.WRITE_ROWS,
                            enc.rows_body(7, image, ncols=ncols, v2=self.flavor != "mariadb", flags=STMT_END_F)))
        unit.append(self.ev(EventType.XID, enc.xid_body(self.seq)))
        self.units.append(unit)
        return self

    def bytes(self) -> bytes:
        out = io.BytesIO()
        writer = BinlogWriter(out, self.fde)
        for unit in self.units:
            writer.write_transaction(unit)
        return out.getvalue()

    def write(self, path):
        path.write_bytes(self.bytes())
        return path


def lint(build: Build, options, *, schema: SchemaModel | None = None, flavor=None):
    from dumpfilter.codec import BinlogReader

    flavor = flavor or build.flavor
    options = [tuple(o.split("=", 1)) for o in options]
    engine = RuleEngine(StartupFilters.from_options(options).for_channel(""), Settings(flavor=flavor),
                        schema=(schema or SchemaModel()).copy())
    linter = Linter(engine, schema, flavor=flavor, schema_complete=schema is not None)
    units = group_transactions(BinlogReader(io.BytesIO(build.bytes()), "bin.000001"))
    breaks = feed_all(linter, (("bin.000001", txn) for txn in units))
    _same_through_the_scan(build, breaks, lambda: Linter(
        RuleEngine(StartupFilters.from_options(options).for_channel(""), Settings(flavor=flavor),
                   schema=(schema or SchemaModel()).copy()), schema, flavor=flavor, schema_complete=schema is not None))
    return breaks, build


def _same_through_the_scan(build: Build, breaks, make_linter) -> None:
    """The breaks `lint_files` finds (the compiled scan, binlogs/lint_scan.py) are these."""
    import tempfile
    from pathlib import Path

    from dumpfilter.binlogs.lint_scan import lint_scan

    with tempfile.TemporaryDirectory() as tmp:
        path = build.write(Path(tmp) / "bin.000001")
        assert lint_scan([path], [make_linter()])[0] == breaks


SEEDED = "CREATE DATABASE a; CREATE DATABASE b; CREATE TABLE a.t (id INT PRIMARY KEY, v INT);"

# (id, rules, statements: (sql, default db) or ("ROWS", db, table, ncols), expected [(errno, cause index)],
#  the server behaviour modelled). A cause index is the statement (0-based) whose skip caused the break.
CASES = [
    ("alter-skipped-statement", ["replicate-do-db=a"],
     [("CREATE TABLE a.t (id INT PRIMARY KEY, v INT)", "a"), ("ALTER TABLE a.t ADD COLUMN w INT", "b"),
      ("INSERT INTO t VALUES (1, 2, 3)", "a")], [(1136, 1)],
     "do-db judges by the default database (db_ok): the ALTER under USE b is skipped; the INSERT carries one "
     "value per primary column (3) for a 2-column replica table: ER_WRONG_VALUE_COUNT_ON_ROW"),
    ("alter-skipped-column-list", ["replicate-do-db=a"],
     [("CREATE TABLE a.t (id INT PRIMARY KEY, v INT)", "a"), ("ALTER TABLE a.t ADD COLUMN w INT", "b"),
      ("INSERT INTO t (id, w) VALUES (1, 3)", "a")], [(1054, 1)],
     "a column list naming a column the replica's table lacks: ER_BAD_FIELD_ERROR"),
    ("alter-skipped-row", ["replicate-do-db=a"],
     [("CREATE TABLE a.t (id INT PRIMARY KEY, v INT)", "a"), ("ALTER TABLE a.t ADD COLUMN w INT", "b"),
      ("ROWS", "a", "t", 3)], [],
     "looks dangerous, does not break: row events carry their own column count (table_def::compatible_with)"),
    ("alter-skipped-insert-with-matching-list", ["replicate-do-db=a"],
     [("CREATE TABLE a.t (id INT PRIMARY KEY, v INT)", "a"), ("ALTER TABLE a.t ADD COLUMN w INT", "b"),
      ("INSERT INTO t (id, v) VALUES (1, 2)", "a")], [],
     "looks dangerous, does not break: the column list names only columns the replica has"),
    ("temporary-skipped", ["replicate-ignore-table=a.tmp"],
     [("CREATE TABLE a.t (id INT PRIMARY KEY, v INT)", "a"), ("CREATE TEMPORARY TABLE tmp (id INT, v INT)", "a"),
      ("INSERT INTO t SELECT * FROM tmp", "a")], [(1146, 1)],
     "the replica keeps temporary tables per master thread id; the skipped CREATE TEMPORARY leaves none: "
     "ER_NO_SUCH_TABLE"),
    ("create-database-skipped", ["replicate-wild-do-table=d.t%"],
     [("CREATE DATABASE d", ""), ("CREATE TABLE t1 (id INT)", "d")], [(1049, 0)],
     "CREATE DATABASE is judged by db_ok_with_wild_table ('d.' LIKE 'd.t%' is false): skipped; the kept "
     "CREATE TABLE then meets ER_BAD_DB_ERROR"),
    ("create-database-skipped-then-rows", ["replicate-wild-do-table=d.t%"],
     [("CREATE DATABASE d", ""), ("CREATE TABLE t1 (id INT)", "d"), ("ROWS", "d", "t1", 1)], [(1049, 0), (1146, 0)],
     "after the first stop, the table that CREATE could not make is missing for the rows too (same cause)"),
    ("create-database-kept", ["replicate-wild-do-table=d.%"],
     [("CREATE DATABASE d", ""), ("CREATE TABLE t1 (id INT)", "d"), ("ROWS", "d", "t1", 1)], [],
     "a wild pattern whose table part is % matches 'd.': the database is created"),
    ("cross-database-create", ["replicate-do-db=a"],
     [("CREATE TABLE a.n (id INT)", "b"), ("INSERT INTO n VALUES (1)", "a")], [(1146, 0)],
     "do-db judges CREATE TABLE a.n by its default database b: skipped; the INSERT under USE a is kept"),
    ("cross-database-create-row", ["replicate-do-db=a"],
     [("CREATE TABLE a.n (id INT)", "b"), ("ROWS", "a", "n", 1)], [(1146, 0)],
     "ROW does not save it: the Table_map of a.n is kept (its db is a) and the table is missing"),
    ("cross-database-dml-skipped", ["replicate-do-db=a"],
     [("CREATE TABLE n (id INT)", "a"), ("INSERT INTO a.n VALUES (1)", "b"), ("INSERT INTO n SELECT * FROM n", "a")],
     [], "looks dangerous, does not break: the cross-database INSERT is skipped, no object is missing"),
    ("idempotent-create-mariadb", ["replicate-do-db=a"],
     [("CREATE TABLE a.t (id INT)", "a"), ("DROP TABLE a.t", "b"), ("CREATE TABLE t (id INT)", "a")], [],
     "MariaDB slave_ddl_exec_mode=IDEMPOTENT (default): CREATE TABLE runs as CREATE OR REPLACE"),
    ("drop-missing-mariadb", ["replicate-do-db=a"],
     [("CREATE TABLE a.t (id INT)", "b"), ("DROP TABLE t", "a")], [],
     "MariaDB slave_ddl_exec_mode=IDEMPOTENT: DROP TABLE runs as DROP TABLE IF EXISTS"),
    ("drop-database-missing", ["replicate-wild-do-table=d.t%"],
     [("CREATE DATABASE d", ""), ("USE d", ""), ("DROP DATABASE d", "d")], [],
     "DROP DATABASE is filtered like CREATE DATABASE: both skipped, nothing breaks"),
    ("rewrite-db", ["replicate-rewrite-db=a->ra", "replicate-do-db=ra"],
     [("CREATE DATABASE ra", ""), ("CREATE TABLE t (id INT)", "a"), ("INSERT INTO t VALUES (1)", "a"),
      ("ROWS", "a", "t", 1)], [],
     "rewrite-db renames the default database before do-db: CREATE TABLE t under USE a makes ra.t"),
    ("rewrite-db-qualified", ["replicate-rewrite-db=a->ra", "replicate-do-db=ra"],
     [("CREATE DATABASE ra", ""), ("CREATE TABLE t (id INT)", "a"), ("INSERT INTO a.t VALUES (1)", "a")],
     [(1146, 1)],
     "rewrite-db does not touch qualified names in the statement text: a.t is opened, and a does not exist"),
]


def _build(statements, flavor="mariadb") -> Build:
    build = Build(flavor)
    for item in statements:
        if item[0] == "ROWS":
            build.rows(*item[1:])
        elif item[0] == "USE":
            continue
        else:
            build.q(item[0], item[1])
    return build


@pytest.mark.parametrize(("case_id", "rules", "statements", "expected", "behaviour"), CASES,
                         ids=[c[0] for c in CASES])
def test_breakage_classes(case_id, rules, statements, expected, behaviour):
    statements = [s for s in statements if s[0] != "USE"]
    breaks, build = lint(_build(statements), rules)
    got = []
    for item in breaks:
        cause_index = None
        if item.cause is not None and item.cause.file is not None:
            starts = [unit[0].pos for unit in _positions(build)]
            cause_index = next(i for i, start in enumerate(starts)
                               if start <= item.cause.pos < (starts[i + 1] if i + 1 < len(starts) else 1 << 62))
        got.append((item.errno, cause_index))
    assert got == expected, (behaviour, [str(b) for b in breaks])
    for item in breaks:
        assert item.file == "bin.000001" and item.gtid and item.gtid.startswith("0-1-")


def _positions(build: Build):
    from dumpfilter.codec import BinlogReader

    return [txn.events for txn in group_transactions(BinlogReader(io.BytesIO(build.bytes())))
            if txn.kind != "control"]


def test_break_position_is_the_transaction_start():
    build = _build([("CREATE TABLE a.n (id INT)", "b"), ("INSERT INTO n VALUES (1)", "a")])
    breaks, _ = lint(build, ["replicate-do-db=a"])
    units = _positions(build)
    assert [b.pos for b in breaks] == [units[1][0].pos]  # the GTID event, not the INSERT itself
    assert breaks[0].event_pos == units[1][1].pos > breaks[0].pos
    assert breaks[0].cause.pos == units[0][0].pos or breaks[0].cause.pos == units[0][1].pos
    assert breaks[0].cause.rule == "replicate-do-db"


def test_mysql_is_not_idempotent():
    """MySQL has no slave_ddl_exec_mode: the kept CREATE of a table a skipped DROP left there: 1050."""
    statements = [("CREATE TABLE a.t (id INT)", "a"), ("DROP TABLE a.t", "b"), ("CREATE TABLE t (id INT)", "a")]
    breaks, _ = lint(_build(statements, "mysql"), ["replicate-do-db=a"])
    assert [b.errno for b in breaks] == [1050]
    breaks, _ = lint(_build([("CREATE TABLE a.t (id INT)", "b"), ("DROP TABLE t", "a")], "mysql"),
                     ["replicate-do-db=a"])
    assert [b.errno for b in breaks] == [1051]


@pytest.mark.parametrize(("flavor", "unknown_view"), [("mariadb", 4092), ("mysql", 1051)])
def test_views_are_tables_to_the_replica(flavor, unknown_view):
    """A view the replica never created breaks what names it (tests/rules/test_lint_real_replica.py
    shows each on a real MariaDB replica); DROP VIEW is never idempotent, and its error is the flavor's."""
    seeded = SchemaModel.from_sql(SEEDED)
    skipped_create = [("CREATE VIEW a.v AS SELECT id FROM a.t", "b")]
    cases = [
        (skipped_create + [("INSERT INTO v VALUES (1)", "a")], [1146]),
        (skipped_create + [("DROP VIEW v", "a")], [unknown_view]),
        (skipped_create + [("DROP VIEW IF EXISTS v", "a")], []),
        (skipped_create + [("ALTER VIEW v AS SELECT v FROM t", "a")], [1146]),
        ([("CREATE VIEW v AS SELECT id FROM t", "a"), ("DROP VIEW a.v", "b"), ("CREATE VIEW v AS SELECT v FROM t", "a")],
         [1050]),
        ([("CREATE VIEW v AS SELECT id FROM t", "a"), ("DROP VIEW a.v", "b"),
          ("CREATE OR REPLACE VIEW v AS SELECT v FROM t", "a")], []),
        ([("CREATE TABLE a.n (id INT)", "b"), ("CREATE VIEW w AS SELECT id FROM n", "a")], [1146]),
        ([("CREATE VIEW v AS SELECT id, v FROM t", "a"), ("INSERT INTO v VALUES (1, 2)", "a"), ("DROP VIEW v", "a")], []),
    ]
    for statements, errnos in cases:
        for schema in (None, seeded):  # with --schema, the view the replica created is known to it
            breaks, _ = lint(_build(statements, flavor), ["replicate-do-db=a"], schema=schema)
            assert [b.errno for b in breaks] == errnos, (statements, schema is not None, [str(b) for b in breaks])


def test_schema_is_the_replica_start():
    """--schema: the replica was seeded from it; a table it lacks is absent, not assumed."""
    schema = SchemaModel.from_sql(SEEDED)
    breaks, _ = lint(_build([("INSERT INTO t VALUES (1, 2)", "a")]), [], schema=schema)
    assert breaks == []
    breaks, _ = lint(_build([("INSERT INTO u VALUES (1, 2)", "a")]), [], schema=schema)
    assert [(b.errno, b.cause.file, b.cause.rule) for b in breaks] == [(1146, None, "--schema")]
    # Without --schema the table is taken to have been seeded on both sides.
    breaks, _ = lint(_build([("INSERT INTO u VALUES (1, 2)", "a")]), [])
    assert breaks == []


def test_no_rules_never_break():
    statements = [s for case in CASES for s in case[2] if s[0] != "USE"]
    breaks, _ = lint(_build(statements), [])
    assert breaks == []


def test_cli_json_and_exit_codes(tmp_path, capsys):
    path = _build([("CREATE DATABASE d", ""), ("CREATE TABLE t1 (id INT)", "d")]).write(tmp_path / "bin.000001")
    assert main(["lint", str(path), "--replicate-wild-do-table=d.t%", "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert [(b["file"], b["errno"], b["message"], b["gtid"]) for b in report["breaks"]] == [
        ("bin.000001", 1049, "Unknown database 'd'", "0-1-2")]
    assert set(report["breaks"][0]["cause"]) >= {"file", "pos", "rule"}
    assert report["breaks"][0]["cause"]["rule"] == "replicate-wild-do-table"
    assert main(["lint", str(path), "--replicate-wild-do-table=d.%", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"breaks": [], "divergence": {"writes": 0, "rules": []},
                                                   "warnings": []}
    assert main(["lint", str(path), "--replicate-wild-do-table=d.t%"]) == 1
    text = capsys.readouterr().out
    assert "error 1049: Unknown database 'd'" in text and "cause: bin.000001:" in text


@pytest.mark.parametrize("argv", [
    ["lint", "/nonexistent/bin.000001"],
    ["lint", "{bad}", "--replicate-do-table=nodot"],
])
def test_cli_bad_input_is_one_line_exit_2(tmp_path, capsys, argv):
    argv = [a.replace("{bad}", str(tmp_path / "bad.bin")) for a in argv]
    (tmp_path / "bad.bin").write_bytes(b"\xfebin" + b"\x00" * 10)
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("dumpfilter: error:"), err


def test_truncated_binlog_is_bad_input(tmp_path, capsys):
    data = _build([("CREATE DATABASE d", ""), ("CREATE TABLE t1 (id INT)", "d")]).bytes()
    path = tmp_path / "bin.000001"
    path.write_bytes(data[:-7])
    assert main(["lint", str(path), "--replicate-wild-do-table=d.t%"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "bin.000001" in err[0], err


def test_skipped_alter_on_a_table_seeded_before_the_binlog():
    """Neither column list is known (no --schema, no CREATE in the binlog): the INSERT's own value count
    and the columns the skipped ALTER added still show the replica's table is one column short."""
    statements = [("ALTER TABLE a.t ADD COLUMN w INT", "b"), ("INSERT INTO t VALUES (1, 2, 3)", "a")]
    breaks, _ = lint(_build(statements), ["replicate-do-db=a"])
    assert [b.errno for b in breaks] == [1136]
    breaks, _ = lint(_build([("ALTER TABLE a.t ADD INDEX (v)", "b"), ("INSERT INTO t VALUES (1, 2)", "a")]),
                     ["replicate-do-db=a"])
    assert breaks == []
    # With the replica's starting schema, the column lists decide.
    breaks, _ = lint(_build(statements), ["replicate-do-db=a"], schema=SchemaModel.from_sql(SEEDED))
    assert [b.errno for b in breaks] == [1136]


@pytest.mark.parametrize("rules", [[], ["replicate-ignore-table=c.t_1"], ["replicate-do-db=a"]])
def test_rename_swap_needs_no_third_table(rules):
    """RENAME TABLE t_1 TO t_swap, t_2 TO t_1, t_swap TO t_2 runs its pairs in order: t_swap exists
    between them. Skipped (ignore-table), the replica keeps both names: later statements still find them
    (found by `verify --builtin`, which the real replicas pass)."""
    schema = SchemaModel.from_sql("CREATE DATABASE c; CREATE TABLE c.t_1 (id INT, v INT); "
                                  "CREATE TABLE c.t_2 (id INT, v INT);")
    statements = [("RENAME TABLE t_1 TO t_swap, t_2 TO t_1, t_swap TO t_2", "c"),
                  ("INSERT INTO t_1 VALUES (1, 1)", "c"), ("INSERT INTO c.t_2 VALUES (2, 2)", "a")]
    breaks, _ = lint(_build(statements), rules, schema=schema)
    assert breaks == []


def test_readme_report_on_a_real_mariadb_binlog(capsys):
    """The README's report: a binlog MariaDB 10.11 wrote under STATEMENT (tests/rules/lint_data)."""
    from pathlib import Path

    data = Path(__file__).parent / "lint_data"
    argv = ["lint", str(data / "mariadb-bin.000001"), "--replicate-do-db=a", "--schema", str(data / "seed.sql")]
    assert main([*argv, "--json"]) == 1
    breaks = json.loads(capsys.readouterr().out)["breaks"]
    assert [(b["pos"], b["gtid"], b["errno"], b["cause"]["pos"]) for b in breaks] == [
        (477, "0-1-2", 1136, 372), (796, "0-1-4", 1146, 686), (1335, "0-1-7", 1146, 999)]
    assert main(["lint", str(data / "mariadb-bin.000001"), "--replicate-do-db=a", "--replicate-do-db=b"]) == 0
    assert capsys.readouterr().out.strip() == "no break predicted"


def test_statements_after_a_break_in_the_same_transaction_still_change_the_primary():
    """The replica stops at the first failing statement and rolls the transaction back; the primary ran
    all of it. A later kept statement needing what the rest of that transaction created breaks too,
    for the first cause."""
    build = Build()
    build.q("CREATE TABLE a.n (id INT)", "b")
    unit = [build._gtid(False)] + [build.ev(EventType.QUERY, enc.query_body(sql, "a")) for sql in (
        "INSERT INTO n VALUES (1)", "CREATE TEMPORARY TABLE tmp (id INT)", "COMMIT")]
    build.units.append(unit)
    build.q("INSERT INTO a.t SELECT * FROM tmp", "a")
    breaks, _ = lint(build, ["replicate-do-db=a"])
    assert [b.errno for b in breaks] == [1146, 1146]
    assert breaks[0].cause == breaks[1].cause and breaks[1].message == "Table 'a.tmp' doesn't exist"
