"""Issue #40 goal 6: lint over the compiled core's one-pass scan (binlogs/lint_scan.py) feeds the
Linter only the units that may change its state or break, and finds the breaks, byte for byte,
that the Linter finds fed every unit (tests/oracles/lint.py): on every real fixture binlog, on the
lint case vectors, and on generated workloads under many rule sets. Several rule sets
(`experiment --candidates`) are linted over one scan, each needed unit decoded once."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dumpfilter.binlogs import scan_index
from dumpfilter.codec.transactions import CONTROL
from dumpfilter.binlogs.lint import lint_files, lint_many, new_linter, units
from dumpfilter.binlogs.lint_scan import LintScanStats, lint_scan
from dumpfilter.errors import DumpFilterError
from dumpfilter.rules.lint import Linter
from dumpfilter.rules.evaluate import RuleEngine
from dumpfilter.rules.parse import StartupFilters
from dumpfilter.rules.ruleset import RuleSet, Settings
from dumpfilter.rules.schema import SchemaModel
from dumpfilter.workload.generator import FLAVORS, WorkloadSpec, generate
from tests.master.test_fast_path import SCHEMAS, _rules
from tests.core.test_scanner_differential import fixture_files
from tests.oracles.lint import reference_feed, reference_lint
from tests.rules.test_lint_cases import CASES, SEEDED, _build
from tests.support.following_lint import follow_revealed, follow_revealed_together

# Rule sets met in the fixtures (sakila, test, mysql, ...) and generic ones, under both semantics.
FIXTURE_RULES = [
    (RuleSet(), Settings()),
    (RuleSet(do_db=("sakila",)), Settings()),
    (RuleSet(do_db=("test",)), Settings(flavor="mariadb")),
    (RuleSet(ignore_db=("test", "sakila")), Settings()),
    (RuleSet(ignore_table=("sakila.actor", "test.t1")), Settings()),
    (RuleSet(wild_do_table=("sakila.f%", "test.%")), Settings()),
    (RuleSet(wild_ignore_table=("%.t%",)), Settings(flavor="mariadb")),
    (RuleSet(rewrite_db=(("sakila", "s2"), ("test", "t2")), do_db=("s2", "t2")), Settings()),
    (RuleSet(do_db=("sakila", "test")), Settings(semantics="effective")),
    (RuleSet(do_table=("sakila.film",)), Settings(track_derived_tables=True)),
]


def _outcome(run):
    try:
        return run()
    except DumpFilterError as exc:
        return (type(exc).__name__, str(exc))


@pytest.mark.fixtures
def test_every_real_fixture_binlog_lints_as_the_linter_fed_every_unit(shared_fixtures):
    files = fixture_files(shared_fixtures)
    assert len(files) == 15
    breaks = 0
    for path in files:
        for rules, rule_settings in FIXTURE_RULES:
            want = _outcome(lambda: reference_lint([path], rules, rule_settings))
            got = _outcome(lambda: lint_files([path], rules, rule_settings))
            assert got == want, (path.name, rules, rule_settings)
            breaks += len(want) if isinstance(want, list) else 0
    assert breaks  # the fixtures hold breaks for some of these rule sets: the comparison bites


@pytest.mark.fixtures
def test_fixture_candidates_in_one_scan(shared_fixtures):
    """All of FIXTURE_RULES as candidates over each fixture: one scan per file, each rule set's
    breaks those of its Linter fed every unit."""
    for path in fixture_files(shared_fixtures):
        if path.suffix == ".gz" or "checksum" in path.name:
            continue
        stats = LintScanStats()
        try:
            got = lint_many([path], FIXTURE_RULES, stats=stats)
        except DumpFilterError:
            continue  # a fixture no lint reads (compared above, error for error)
        assert stats.scans == 1
        for (rules, rule_settings), found in zip(FIXTURE_RULES, got):
            assert found == reference_lint([path], rules, rule_settings), (path.name, rules)


def _case_linter(options, flavor="mariadb", schema: SchemaModel | None = None) -> Linter:
    pairs = [tuple(o.split("=", 1)) for o in options]
    engine = RuleEngine(StartupFilters.from_options(pairs).for_channel(""), Settings(flavor=flavor),
                        schema=schema.copy() if schema is not None else None)
    return Linter(engine, schema, flavor=flavor, schema_complete=schema is not None)


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
@pytest.mark.parametrize("seeded", [False, True])
def test_lint_case_vectors(tmp_path, case, seeded):
    """Each lint case (tests/rules/test_lint_cases.py), with and without a starting schema: the
    same breaks through the scan as through the Linter fed every unit."""
    _, options, statements, _, _ = case
    path = _build([s for s in statements if s[0] != "USE"]).write(tmp_path / "bin.000001")
    schema = SchemaModel.from_sql(SEEDED) if seeded else None
    want = reference_feed([path], _case_linter(options, schema=schema))
    assert lint_scan([path], [_case_linter(options, schema=schema)])[0] == want


# Keyed DML whose answer the Linter reads off state the keys do not show: a temporary table of the
# session (the replica lacks it: 1146, or it has a base table of that name: written there), an
# INSERT's column list or count against the replica's columns.
SESSION_CASES = [
    ("temporary-shadow", ["replicate-do-db=a"],
     [("CREATE TABLE a.tmp (id INT)", "a"), ("CREATE TEMPORARY TABLE a.tmp (id INT)", "b"),
      ("INSERT INTO tmp VALUES (1)", "a"), ("UPDATE tmp SET id = 2", "a")]),
    ("temporary-missing", ["replicate-do-db=a"],
     [("CREATE TEMPORARY TABLE a.tmp (id INT)", "b"), ("INSERT INTO tmp VALUES (1)", "a"),
      ("DELETE FROM tmp WHERE id = 1", "a")]),
    ("insert-list-after-skipped-alter", ["replicate-do-db=a"],
     [("CREATE TABLE a.t (id INT, v INT)", "a"), ("ALTER TABLE a.t ADD COLUMN w INT", "b"),
      ("UPDATE t SET v = 1", "a"), ("INSERT INTO t (id, w) VALUES (1, 2)", "a"), ("INSERT INTO t VALUES (1, 2, 3)", "a"),
      ("REPLACE INTO t (id, v) VALUES (1, 2)", "a")]),
    ("rewrite-then-qualified-dml", ["replicate-rewrite-db=a->ra", "replicate-do-db=ra"],
     [("CREATE DATABASE ra", ""), ("CREATE TABLE t (id INT)", "a"), ("INSERT INTO t VALUES (1)", "a"),
      ("UPDATE a.t SET id = 2", "a"), ("DELETE FROM ra.t", "a")]),
]


@pytest.mark.parametrize("case", SESSION_CASES, ids=[c[0] for c in SESSION_CASES])
def test_keyed_statements_that_break(tmp_path, case):
    _, options, statements = case
    path = _build(statements).write(tmp_path / "bin.000001")
    want = reference_feed([path], _case_linter(options))
    # (temporary-shadow: the replica opens the base table a.tmp, as a real MariaDB replica does: it diverges)
    assert want or want.divergence.writes, "each of these cases breaks or silently diverges"
    got = lint_scan([path], [_case_linter(options)])[0]
    assert got == want and got.divergence.to_json() == want.divergence.to_json()


def _more_rules(draw) -> tuple[RuleSet, Settings]:
    kind = draw(st.sampled_from(["drawn", "rewrite", "effective", "ignore_table", "derived", "wild_tables"]))
    dbs = tuple(draw(st.lists(st.sampled_from(SCHEMAS), min_size=1, max_size=3, unique=True)))
    if kind == "wild_tables":
        # 'db.' LIKE 'db.t1' is false: CREATE DATABASE skipped, its tables' rows kept: breaks after DDL.
        return RuleSet(wild_do_table=tuple(f"{db}.t{draw(st.sampled_from(['1', '0%']))}" for db in dbs)), \
            Settings(flavor=draw(st.sampled_from(["mysql", "mariadb"])))
    if kind == "rewrite":
        return RuleSet(rewrite_db=((dbs[0], "re"),), do_db=("re", *dbs[1:])), Settings()
    if kind == "effective":
        return _rules(draw), Settings(semantics="effective")
    if kind == "ignore_table":
        return RuleSet(ignore_table=tuple(f"{db}.t{draw(st.sampled_from(['1', '2']))}" for db in dbs)), Settings()
    if kind == "derived":
        return _rules(draw), Settings(track_derived_tables=True)
    return _rules(draw), Settings(flavor=draw(st.sampled_from(["mysql", "mariadb"])))


@st.composite
def _workloads(draw):
    spec = WorkloadSpec(seed=draw(st.integers(0, 10_000)), schemas=len(SCHEMAS), tables_per_schema=2,
                        transactions=draw(st.integers(30, 250)),
                        binlog_format=draw(st.sampled_from(["row", "statement", "mixed"])),
                        flavor=draw(st.sampled_from(FLAVORS)), cross_db_share=draw(st.sampled_from([0.0, 0.3, 0.8])),
                        ddl_share=draw(st.sampled_from([0.0, 0.05, 0.2])),
                        max_binlog_size=draw(st.sampled_from([20_000, 1 << 30])),
                        insert_select_share=draw(st.sampled_from([0.0, 0.3])))
    rule_sets = [_more_rules(draw) for _ in range(draw(st.integers(1, 4)))]
    # A starting schema (complete: what it lacks is absent) and a replica's own, sometimes.
    schema = draw(st.sampled_from([None, "CREATE DATABASE db1; CREATE TABLE db1.t1 (id INT PRIMARY KEY, v INT);",
                                   "CREATE DATABASE db2; CREATE TABLE db2.t0 (id INT PRIMARY KEY, v INT, w INT);"]))
    replica = draw(st.sampled_from([None, "CREATE DATABASE db3; CREATE TABLE db3.t1 (id INT PRIMARY KEY);"]))
    return spec, rule_sets, schema, replica


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(_workloads())
def test_generated_workloads_lint_as_the_linter_fed_every_unit(tmp_path_factory, workload):
    spec, rule_sets, schema_sql, replica_sql = workload
    paths = generate(spec, tmp_path_factory.mktemp("binlog"))
    schema = SchemaModel.from_sql(schema_sql) if schema_sql else None
    replica = SchemaModel.from_sql(replica_sql) if replica_sql else None
    stats = LintScanStats()
    got = lint_many(paths, rule_sets, schema, replica_schema=replica, stats=stats)
    assert stats.scans == len(paths)
    for (rules, rule_settings), found in zip(rule_sets, got):
        want = reference_lint(paths, rules, rule_settings, schema, replica_schema=replica)
        assert found == want, (rules, rule_settings)
        assert lint_files(paths, rules, rule_settings, schema, replica_schema=replica) == found


def _row_workload(tmp_path: Path) -> list[Path]:
    spec = WorkloadSpec(seed=7, schemas=4, tables_per_schema=3, transactions=2_000, binlog_format="row",
                        flavor="mariadb", ddl_share=0.0, cross_db_share=0.3)
    return generate(spec, tmp_path)


def test_a_row_binlog_is_mostly_not_fed(tmp_path):
    """ROW units whose tables are all present on the replica (every rule set here keeps or skips
    them without a break) are never decoded: what is fed is the DDL and control units."""
    paths = _row_workload(tmp_path)
    rule_sets = [(RuleSet(), Settings(flavor="mariadb")), (RuleSet(do_db=("db1",)), Settings(flavor="mariadb")),
                 (RuleSet(ignore_table=("db2.t1",)), Settings(flavor="mariadb"))]
    stats = LintScanStats()
    got = lint_many(paths, rule_sets, stats=stats)
    assert stats.units > 2_000
    assert stats.fed is not None and max(stats.fed) < 100, stats  # the DDL (4 databases, 12 tables) and control
    for (rules, rule_settings), found in zip(rule_sets, got):
        assert found == reference_lint(paths, rules, rule_settings)


@pytest.mark.parametrize("fmt", ["row", "mixed", "statement"])
def test_the_safe_bits_follow_the_ddl(tmp_path, fmt):
    """A skipped CREATE DATABASE makes every later unit of its tables break: the safe bits asked at
    the buffer's start (the database assumed there) are asked again after each DDL unit."""
    paths = generate(WorkloadSpec(seed=3, schemas=4, tables_per_schema=2, transactions=200, binlog_format=fmt),
                     tmp_path)
    rules, rule_settings = RuleSet(wild_do_table=("db1.t1",)), Settings(flavor="mariadb")
    want = reference_lint(paths, rules, rule_settings)
    assert len(want) > 10
    assert lint_files(paths, rules, rule_settings) == want


def test_a_break_on_every_row_unit_feeds_them_all(tmp_path):
    """The other side: a replica that lacks a kept table (its database's CREATE skipped: 'db1.'
    LIKE 'db1.t1' is false) is fed each unit naming it, and breaks on each, as the Linter fed
    every unit does."""
    spec = WorkloadSpec(seed=3, schemas=2, tables_per_schema=2, transactions=300, binlog_format="row",
                        flavor="mariadb", cross_db_share=0.0)
    paths = generate(spec, tmp_path)
    rules, rule_settings = RuleSet(wild_do_table=("db1.t1",)), Settings(flavor="mariadb")
    stats = LintScanStats()
    found = lint_many(paths, [(rules, rule_settings)], stats=stats)[0]
    assert found == reference_lint(paths, rules, rule_settings)
    assert len(found) > 100 and stats.fed is not None and stats.fed[0] >= len(found)


def test_candidates_share_one_scan_and_one_decode(tmp_path):
    """Eight rule sets over one scan: each file read once, each unit decoded at most once, and a
    unit every candidate needs fed to each of them."""
    spec = WorkloadSpec(seed=11, schemas=4, tables_per_schema=2, transactions=400, binlog_format="mixed",
                        flavor="mariadb", ddl_share=0.05, cross_db_share=0.3, max_binlog_size=40_000,
                        insert_select_share=0.25)
    paths = generate(spec, tmp_path)
    assert len(paths) > 1
    rule_sets = [(RuleSet(do_db=(db,)), Settings(flavor="mariadb")) for db in SCHEMAS] + \
                [(RuleSet(ignore_db=(db,)), Settings(flavor="mariadb")) for db in SCHEMAS]
    stats = LintScanStats()
    got = lint_many(paths, rule_sets, stats=stats)
    assert stats.scans == len(paths)
    assert stats.fed is not None and len(stats.fed) == 8
    assert max(stats.fed) <= stats.decoded <= stats.units
    assert stats.decoded < sum(stats.fed)  # shared units were decoded once for several candidates
    for (rules, rule_settings), found in zip(rule_sets, got):
        assert found == reference_lint(paths, rules, rule_settings)


def test_candidate_rows_lint_every_candidate(tmp_path):
    """experiment's ranking: each candidate's verdict is the first break lint_files finds."""
    from dumpfilter.spark_jobs.bandwidth_experiment import candidate_rows
    from dumpfilter.spark_jobs.tasks.counts import SlaveCounts
    from dumpfilter.topology import parse_topology

    spec = WorkloadSpec(seed=5, schemas=4, tables_per_schema=2, transactions=200, binlog_format="statement",
                        flavor="mariadb", ddl_share=0.0, cross_db_share=0.5, insert_select_share=0.25)
    paths = generate(spec, tmp_path)
    text = "".join(f'[[slaves]]\nname = "c{i}"\nserver_id = {10 + i}\nrules = ["replicate-do-db=db{i}"]\n\n'
                   for i in range(1, 5))
    candidates = parse_topology(text).slaves
    rows = candidate_rows(candidates, [SlaveCounts(slave=c.name) for c in candidates], paths, 1024)
    by_name = {row["candidate"]: row["lint"] for row in rows}
    stopped = 0
    for spec_ in candidates:
        breaks = reference_lint(paths, spec_.rules, spec_.settings)
        want = "no break" if not breaks else f"a replica stops: {str(breaks[0]).splitlines()[0]}"
        assert by_name[spec_.name].split("; diverges: ")[0] == want  # (the writes it diverges on: issue #60)
        stopped += bool(breaks)
    assert stopped  # cross-database statements under do-db: some candidate stops


def test_gzip_input_reads_as_the_reader_reads_it(tmp_path):
    paths = _row_workload(tmp_path)
    packed = tmp_path / "gz"
    packed.mkdir()
    gz = []
    for path in paths:
        target = packed / (path.name + ".gz")
        target.write_bytes(gzip.compress(path.read_bytes()))
        gz.append(target)
    rules, rule_settings = RuleSet(ignore_db=("db1",)), Settings(flavor="mariadb")
    assert lint_files(gz, rules, rule_settings) == reference_lint(gz, rules, rule_settings)


def test_new_linter_is_the_one_setup():
    # lint_many builds its linters as lint_files does (the same engine, flavor, schema handling).
    linter = new_linter(RuleSet(), Settings(flavor="mariadb"))
    assert linter.idempotent_ddl and not linter.schema_complete


@pytest.mark.parametrize("fmt", ["row", "mixed"])
def test_malformed_input_fails_as_the_reader_fails(tmp_path, fmt):
    """A CRC mismatch, a file cut inside an event, a bad magic: the same error, the same words."""
    data = generate(WorkloadSpec(seed=1, transactions=200, binlog_format=fmt, flavor="mariadb"), tmp_path / "src")[0] \
        .read_bytes()
    cases = {"flip": data[:5000] + bytes([data[5000] ^ 0x40]) + data[5001:], "cut": data[:-7], "cut-more": data[:-40],
             "magic": b"xxxx" + data[4:], "short": data[:2]}
    rules, rule_settings = RuleSet(), Settings(flavor="mariadb")
    for name, raw in cases.items():
        path = tmp_path / f"{name}.000001"
        path.write_bytes(raw)
        want = _outcome(lambda: reference_lint([path], rules, rule_settings))
        assert isinstance(want, tuple), name
        assert _outcome(lambda: lint_files([path], rules, rule_settings)) == want
        # Without the CRC checks the flipped bit is read as it is, by both.
        want = _outcome(lambda: reference_lint([path], rules, rule_settings, verify_checksums=False))
        assert _outcome(lambda: lint_files([path], rules, rule_settings, verify_checksums=False)) == want, name


def test_inserts_with_column_lists_are_looked_at_not_fed(tmp_path):
    """Keyed INSERTs into tables whose columns the replica's model knows: their column lists are
    read off the texts (each list parsed once) and the units are not fed, unless a list names a
    column the replica lacks (its ALTER skipped), which breaks as the Linter fed every unit says."""
    statements = [("CREATE TABLE a.t (id INT, v INT)", "a"), ("CREATE TABLE a.u (id INT, v INT)", "a")]
    statements += [(f"INSERT INTO t (id, v) VALUES ({i}, {i})", "a") for i in range(200)]
    statements += [(f"INSERT INTO u VALUES ({i}, {i})", "a") for i in range(100)]
    statements += [("ALTER TABLE a.t ADD COLUMN w INT", "b"), ("INSERT INTO t (id, v) VALUES (1, 1)", "a"),
                   ("INSERT INTO t (`id`, w) VALUES (1, 1)", "a"), ("INSERT INTO t (id, w) VALUES (2, 2)", "a"),
                   ("INSERT INTO t VALUES (3, 3, 3)", "a"), ("INSERT INTO u (id) VALUES (4)", "a")]
    path = _build(statements).write(tmp_path / "bin.000001")
    options = ["replicate-do-db=a"]
    want = reference_feed([path], _case_linter(options))
    assert [b.errno for b in want] == [1054, 1054, 1136]
    stats = LintScanStats()
    assert lint_scan([path], [_case_linter(options)], stats=stats)[0] == want
    assert stats.bulk is not None and stats.bulk[0] >= 250  # their heads read once per buffer
    assert stats.fed is not None and stats.fed[0] < 60, stats  # the DDL and the units just after it


def test_lone_dml_statements_are_fed_only_when_they_may_break(tmp_path):
    """A GTID and one single-table DML Query (a MyISAM table's statement, a standalone group) is
    not a keyed unit: it is read off its text, fed only when it may break, and changes no state."""
    build = _build([("CREATE TABLE a.t (id INT, v INT)", "a"), ("CREATE TABLE a.n (id INT)", "b")])
    for i in range(300):
        build.q(f"INSERT INTO t (id, v) VALUES ({i}, {i})", "a", ddl=True)
        build.q(f"UPDATE t SET v = {i} WHERE id = {i}", "a", ddl=True)
    build.q("ALTER TABLE a.t ADD COLUMN w INT", "b")
    build.q("INSERT INTO t (id, w) VALUES (1, 1)", "a", ddl=True)
    build.q("DELETE FROM n WHERE id = 1", "a", ddl=True)
    build.q("INSERT INTO t VALUES (1, 1, 1)", "a", ddl=True)
    path = build.write(tmp_path / "bin.000001")
    options = ["replicate-do-db=a"]
    want = reference_feed([path], _case_linter(options))
    assert [b.errno for b in want] == [1054, 1146, 1136]
    stats = LintScanStats()
    assert lint_scan([path], [_case_linter(options)], stats=stats)[0] == want
    assert stats.fed is not None and stats.fed[0] < 20, stats


def test_a_ddl_dense_binlog_asks_the_safe_bits_once_per_window(tmp_path):
    """Three units in ten DDL: the units after each are fed as they come, and the safe bits are
    asked again only once a window of units (at least 16) is past, not after every DDL unit."""
    paths = generate(WorkloadSpec(seed=4, schemas=4, tables_per_schema=4, transactions=3_000, binlog_format="mixed",
                                  flavor="mariadb", ddl_share=0.3), tmp_path)
    rule_sets = [(RuleSet(do_db=("db1",)), Settings(flavor="mariadb")), (RuleSet(), Settings(flavor="mariadb"))]
    stats = LintScanStats()
    got = lint_many(paths, rule_sets, stats=stats)
    assert stats.refreshes is not None
    assert max(stats.refreshes) <= stats.units // 16 + 2 * stats.scans
    for (rules, rule_settings), found in zip(rule_sets, got):
        assert found == reference_lint(paths, rules, rule_settings)


def test_a_table_made_every_few_units_costs_its_own_units_only(tmp_path):
    """bench.common's workload makes and drops a scratch table every few units (CREATE TABLE IF NOT
    EXISTS scratch_N). After such a unit only that table's safe bits are asked again
    (`Linter.touched`): the units fed are the DDL units, not every unit after each (lint fed nearly
    every unit of the bench's 530 MB binlog, at 55 MB/s)."""
    paths = generate(WorkloadSpec(seed=5, schemas=8, tables_per_schema=4, transactions=4_000, binlog_format="row",
                                  flavor="mariadb", ddl_share=0.05), tmp_path)
    rule_sets = [(RuleSet(do_db=("db1",)), Settings(flavor="mariadb")), (RuleSet(), Settings(flavor="mariadb"))]
    ddl = sum(1 for _, txn in units(paths)  # the DDL and control units
              if txn.kind == CONTROL or any(e.is_query and (e.sql or "").upper() not in ("BEGIN", "COMMIT") for e in txn.events))
    assert ddl > 100
    stats = LintScanStats()
    got = lint_many(paths, rule_sets, stats=stats)
    # Besides the DDL, only the window after the databases made at the start (a database's change
    # asks every bit again, a window later): 266 of 4,042 units here, where 3,000 were fed before.
    assert max(stats.fed) <= ddl + 64, stats
    for (rules, rule_settings), found in zip(rule_sets, got):
        assert found == reference_lint(paths, rules, rule_settings)


# DDL whose changes the scan follows table by table (`_Lint.invalidate`) or as a whole (`forget`):
# every kind `Linter._touch` tells apart, over two databases and two tables, with rows and keyed DML.
def _churn_statement(draw):
    db = draw(st.sampled_from(["a", "b"]))
    t, u = draw(st.permutations(["t", "u"]))
    return draw(st.sampled_from([
        (f"CREATE TABLE {t} (id INT, v INT)", db), (f"CREATE TABLE IF NOT EXISTS {db}.{t} (id INT, v INT)", ""),
        (f"DROP TABLE {db}.{t}", ""), (f"DROP TABLE IF EXISTS {t}", db), (f"TRUNCATE {db}.{t}", ""),
        (f"ALTER TABLE {db}.{t} ADD COLUMN w INT", ""), (f"ALTER TABLE {db}.{t} RENAME TO {db}.{u}", ""),
        (f"RENAME TABLE {db}.{t} TO {db}.{u}", ""), (f"CREATE DATABASE IF NOT EXISTS {db}", ""), (f"DROP DATABASE {db}", ""),
        (f"CREATE TRIGGER tr_{t} BEFORE INSERT ON {db}.{t} FOR EACH ROW SET @z = 1", ""),
        (f"DROP TRIGGER {db}.tr_{t}", ""), (f"CREATE TEMPORARY TABLE {t} (id INT)", db),
        (f"DROP TEMPORARY TABLE IF EXISTS {t}", db), (f"CREATE VIEW {db}.{u} AS SELECT * FROM {db}.{t}", ""),
        (f"INSERT INTO {t} VALUES (1, 2)", db), (f"INSERT INTO {t} (id, w) VALUES (1, 2)", db),
        (f"UPDATE {t} SET v = 1", db), (f"DELETE FROM {db}.{t}", ""), ("ROWS", db, t, 2), ("ROWS", db, t, 3),
    ]))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.data(), st.sampled_from([[], ["replicate-do-db=a"], ["replicate-ignore-table=a.t"],
                                   ["replicate-wild-do-table=a.%"], ["replicate-ignore-db=b"],
                                   ["replicate-rewrite-db=a->b", "replicate-do-db=b"]]),
       st.sampled_from(["mysql", "mariadb"]), st.booleans())
def test_ddl_churn_lints_as_the_linter_fed_every_unit(tmp_path_factory, data, options, flavor, seeded):
    """Whatever DDL comes between the rows and keyed statements, the safe bits asked again table by
    table find the breaks the Linter fed every unit finds."""
    statements = [_churn_statement(data.draw) for _ in range(data.draw(st.integers(5, 40)))]
    path = _build(statements, flavor).write(tmp_path_factory.mktemp("churn") / "bin.000001")
    schema = SchemaModel.from_sql("CREATE DATABASE a; CREATE TABLE a.t (id INT, v INT);") if seeded else None
    want = reference_feed([path], _case_linter(options, flavor, schema=schema))
    assert lint_scan([path], [_case_linter(options, flavor, schema=schema)])[0] == want


def test_past_its_first_break_a_candidate_is_fed_only_what_may_diverge(tmp_path):
    """experiment's verdicts need each candidate's first break, and its divergence over the whole
    binlog (#81: a candidate that stops showed 0 where lint counted its writes): past its first
    break a candidate is fed only the units that change its state or may diverge, and its
    divergence is what feeding every unit gives, for fewer units fed."""
    spec = WorkloadSpec(seed=3, schemas=4, tables_per_schema=2, transactions=600, binlog_format="mixed",
                        flavor="mariadb", max_binlog_size=20_000, cross_db_share=0.4)
    paths = generate(spec, tmp_path)
    breaking = [(RuleSet(wild_do_table=(f"db{i}.t1",)), Settings(flavor="mariadb")) for i in (1, 2)]
    rule_sets = [*breaking, (RuleSet(do_db=("db1",)), Settings(flavor="mariadb")), (RuleSet(), Settings(flavor="mariadb"))]
    every = [reference_lint(paths, rules, rule_settings) for rules, rule_settings in rule_sets]
    assert all(len(found) > 1 for found in every[:3]) and not every[3]
    assert any(want.divergence.writes for want in every[:3])
    stats, whole = LintScanStats(), LintScanStats()
    first = lint_many(paths, rule_sets, stats=stats, first_break=True)
    lint_many(paths, rule_sets, stats=whole)
    for found, want in zip(first, every):
        assert found[:1] == want[:1] and bool(found) == bool(want)
        assert [(g.rule, g.kind, g.count, [(w.file, w.pos) for w in g.writes]) for g in found.divergence.groups.values()] \
            == [(g.rule, g.kind, g.count, [(w.file, w.pos) for w in g.writes]) for g in want.divergence.groups.values()]
    assert stats.scans == len(paths)
    assert all(quiet <= fed for quiet, fed in zip(stats.fed, whole.fed)) and sum(stats.fed) < sum(whole.fed)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("chunk", [512, 1 << 20])
def test_a_look_at_a_new_file_of_its_magic_alone_is_caught_up(tmp_path, chunk):
    """A server's new binlog file shows its 4-byte magic before its Format_description: the lint
    worker's look over it reads those bytes and is caught up (before: the read was reported short
    of the size it was given, and the worker looked again at once, without end, while the file
    stayed so)."""
    from dumpfilter.binlogs.lint import FollowingLint, look_together

    [path, *_] = generate(WorkloadSpec(seed=5, transactions=50), tmp_path)
    following = FollowingLint(new_linter(RuleSet(), Settings()), chunk_size=chunk)
    [look] = look_together([following], [(path, 4)], 1 << 30, keep=10**6)
    assert (look.caught_up, look.read, look.breaks) == (True, 4, [])
    [look] = look_together([following], [(path, path.stat().st_size)], 1 << 30, keep=10**6)
    assert look.caught_up and look.position == (path.name, path.stat().st_size)


def _follow(paths: list[Path], linter: Linter, reveals: list[int], budget: int, chunk: int) -> tuple[list, tuple]:
    """`follow_revealed`: (its breaks, the follower's position)."""
    found, following, _read = follow_revealed(paths, linter, reveals, budget, chunk)
    return found, following.position

@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(_workloads(), st.lists(st.floats(0, 1), max_size=12), st.sampled_from([1, 3000, 20_000, 1 << 30]),
       st.sampled_from([512, 4096, 1 << 20]))
def test_following_lint_resumes_as_the_linter_fed_every_unit(tmp_path_factory, workload, cuts, budget, chunk):
    """The master's lint at Register (FollowingLint: looks of a budget over a binlog that grows,
    each resumed where the last whole unit ended, with its format) reads the compiled scan too,
    and finds the breaks the Linter fed every unit finds, whatever the looks' cuts."""
    spec, rule_sets, schema_sql, replica_sql = workload
    paths = generate(spec, tmp_path_factory.mktemp("binlog"))
    schema = SchemaModel.from_sql(schema_sql) if schema_sql else None
    replica = SchemaModel.from_sql(replica_sql) if replica_sql else None
    total = sum(p.stat().st_size for p in paths)
    rules, rule_settings = rule_sets[0]
    want = reference_lint(paths, rules, rule_settings, schema, replica_schema=replica)
    got, position = _follow(paths, new_linter(rules, rule_settings, schema, replica), [int(c * total) for c in cuts],
                            budget, chunk)
    assert got == want, (rules, rule_settings)
    assert position == (paths[-1].name, paths[-1].stat().st_size)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(_workloads(), st.lists(st.floats(0, 1), max_size=8), st.sampled_from([1, 3000, 1 << 30]),
       st.sampled_from([512, 1 << 20]))
def test_looks_read_together_find_what_each_finds_alone(tmp_path_factory, workload, cuts, budget, chunk):
    """The master's lint worker reads the binlog once for every rule set at the same place
    (`look_together`: slaves that register together, and the looks after the binlog grew): each
    rule set's breaks and position are those of its Linter fed every unit, as a look of its own
    finds them, and the shared looks read the bytes one rule set's looks read."""
    spec, rule_sets, schema_sql, replica_sql = workload
    rule_sets = [*rule_sets, (RuleSet(), Settings(flavor=spec.flavor))]  # and a slave that keeps everything
    paths = generate(spec, tmp_path_factory.mktemp("binlog"))
    schema = SchemaModel.from_sql(schema_sql) if schema_sql else None
    replica = SchemaModel.from_sql(replica_sql) if replica_sql else None
    total = sum(p.stat().st_size for p in paths)
    reveals = [int(c * total) for c in cuts]
    linters = [new_linter(rules, rule_settings, schema, replica) for rules, rule_settings in rule_sets]
    got, followings, read = follow_revealed_together(paths, linters, reveals, budget, chunk)
    _alone, _following, read_alone = follow_revealed(paths, new_linter(*rule_sets[0], schema, replica), reveals,
                                                     budget, chunk)
    assert read == read_alone
    for (rules, rule_settings), found, following in zip(rule_sets, got, followings):
        assert found == reference_lint(paths, rules, rule_settings, schema, replica_schema=replica), rules
        assert following.position == (paths[-1].name, paths[-1].stat().st_size)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(_workloads(), st.lists(st.floats(0, 1), max_size=4), st.sampled_from([3000, 1 << 30]),
       st.sampled_from([4096, 1 << 20]), st.booleans())
def test_rule_sets_linted_from_kept_scans_find_what_a_read_finds(tmp_path_factory, monkeypatch, workload, cuts,
                                                                  budget, chunk, cut_last):
    """The master's lint worker keeps the compiled scan of each whole closed file (ScanIndex): a
    rule set linted later is fed out of the file's mapping from the kept unit lists, never reading
    or scanning the file again, and finds what the Linter fed every unit finds, whatever the
    budget and the reveals; a file whose end is cut inside a unit is followed as before."""
    monkeypatch.setattr(scan_index, "MIN_FILE_BYTES", 0)  # generated files are small
    spec, rule_sets, schema_sql, replica_sql = workload
    paths = generate(spec, tmp_path_factory.mktemp("binlog"))
    whole = paths
    if cut_last:  # a last file that ends inside a unit (a server's crash): followed up to its last whole unit
        whole = generate(spec, tmp_path_factory.mktemp("whole"))  # the same bytes, uncut, for the reference
        with open(paths[-1], "r+b") as f:
            f.truncate(paths[-1].stat().st_size - 7)
    schema = SchemaModel.from_sql(schema_sql) if schema_sql else None
    replica = SchemaModel.from_sql(replica_sql) if replica_sql else None
    total = sum(p.stat().st_size for p in paths)
    reveals = [int(c * total) for c in cuts]
    index = scan_index.ScanIndex()
    for rules, rule_settings in rule_sets:
        [got], [following], _ = follow_revealed_together(paths, [new_linter(rules, rule_settings, schema, replica)],
                                                         reveals, budget, chunk, index)
        want = reference_lint(whole, rules, rule_settings, schema, replica_schema=replica)
        end = following.position
        want = [b for b in want if (b.file, b.pos) < end or b.file != end[0]]  # none in the cut unit
        assert got == want, rules
        [alone], [single], _ = follow_revealed_together(paths, [new_linter(rules, rule_settings, schema, replica)],
                                                        reveals, budget, chunk)
        assert alone == got and single.position == following.position
    # The reveals are the same for every rule set: a file the first read whole from its start, the
    # others read from its kept scan (one read whole as the snapshot's last file and as one left
    # behind is kept twice: what its end holds is read differently).
    if index.scans:
        assert index.hits >= len(rule_sets) - 1


def test_a_kept_scan_is_let_go_with_its_file(tmp_path, monkeypatch):
    """A kept scan maps its file: a purged or replaced file's scan is let go at the next look, so
    that no deleted binlog stays mapped (its disk space held), and the new file is scanned anew."""
    import os

    from dumpfilter.binlogs.lint import FollowingLint, look_together

    monkeypatch.setattr(scan_index, "MIN_FILE_BYTES", 0)
    paths = generate(WorkloadSpec(seed=6, transactions=400, flavor="mariadb", max_binlog_size=40_000), tmp_path)
    assert len(paths) >= 3
    rules, rule_settings = RuleSet(do_db=("db1",)), Settings(flavor="mariadb")
    index = scan_index.ScanIndex()

    def lint_all() -> list:
        following = FollowingLint(new_linter(rules, rule_settings), index=index)
        look = look_together([following], [(p, p.stat().st_size) for p in paths if p.exists()], 1 << 30, 10**6)[0]
        assert look.caught_up
        return look.breaks

    def mapped_deleted() -> list[str]:
        return [line for line in Path("/proc/self/maps").read_text().splitlines()
                if str(tmp_path) in line and "(deleted)" in line]

    lint_all()
    assert index.scans == len(paths) and len(index.kept) == len(paths)
    lint_all()
    assert index.hits == len(paths)  # the second rule set read nothing
    os.unlink(paths[0])  # purged
    replaced = paths[1].read_bytes()
    paths[1].unlink()
    paths[1].write_bytes(replaced)  # the same bytes under a new inode
    lint_all()
    assert len(index.kept) == len(paths) - 1 and index.scans == len(paths) + 1
    import gc

    gc.collect()
    assert not mapped_deleted()


def test_the_master_lints_a_rule_set_registered_later_from_its_kept_scans(tmp_path, master_factory):
    """Issue #42: a slave registering with rules of its own, after another's were linted, costs
    the lint worker no pass over the binlog's closed files: they are fed from the kept scans."""
    import grpc

    from tests.master.test_register_lint import _lint, _register, _stub

    paths = generate(WorkloadSpec(seed=8, transactions=5000, flavor="mariadb", max_binlog_size=1_200_000), tmp_path)
    sizes = [p.stat().st_size for p in paths]
    assert any(size >= scan_index.MIN_FILE_BYTES for size in sizes)
    master, address = master_factory(tmp_path)
    lint = master.service.lint
    with grpc.insecure_channel(address) as channel:
        _register(_stub(channel), 5, "db1.%")
        assert _lint(_stub(channel), 5, wait=120)[0] == "done"
        first = lint.bytes_scanned
        _register(_stub(channel), 6, "db2.%")
        assert _lint(_stub(channel), 6, wait=120)[0] == "done"
    total = sum(sizes)
    assert first == total and lint.bytes_read == 2 * total
    small = sum(size for size in sizes if size < scan_index.MIN_FILE_BYTES)  # read again: no mapping pays for them
    assert lint.bytes_scanned == total + small, "the second rule set read or scanned a closed file again"


def test_looks_together_must_start_at_one_place(tmp_path):
    """Followers at different places cannot share a read: refused, not read wrong."""
    from dumpfilter.binlogs.lint import FollowingLint, look_together

    paths = generate(WorkloadSpec(seed=4, transactions=50, flavor="mariadb"), tmp_path)
    rules, rule_settings = RuleSet(wild_do_table=("db1.t%",)), Settings(flavor="mariadb")
    files = [(p, p.stat().st_size) for p in paths]
    ahead, behind = (FollowingLint(new_linter(rules, rule_settings)) for _ in range(2))
    look_together([ahead], files, 1 << 30)
    with pytest.raises(ValueError, match="same place"):
        look_together([ahead, behind], files, 1 << 30)


@pytest.mark.fixtures
def test_following_lint_over_the_real_fixture_binlogs(shared_fixtures):
    """The same over every real fixture binlog, revealed in eleven steps, in looks of 4 KiB."""
    breaks = 0
    for path in fixture_files(shared_fixtures):
        for rules, rule_settings in FIXTURE_RULES:
            want = _outcome(lambda: reference_lint([path], rules, rule_settings))
            size = path.stat().st_size
            got = _outcome(lambda: _follow([path], new_linter(rules, rule_settings),
                                           [size * k // 11 for k in range(1, 11)], 4096, 4096))
            if isinstance(want, tuple):  # a malformed file: both fail (the follower where it reads it)
                assert isinstance(got, tuple) and got[0] == want[0], (path.name, rules)
                continue
            found, position = got
            if position == (path.name, size):
                assert found == want, (path.name, rules, rule_settings)
            else:  # a live file's last unit the scan does not see ended yet (Aurora's padding, then
                # an unterminated group): followed as the master streams it, once the file is left behind
                assert found == want[:len(found)] and position[1] < size, (path.name, rules, position)
            breaks += len(found)
    assert breaks


def test_a_following_look_holds_only_the_breaks_it_keeps(tmp_path):
    """A look over a binlog where many units break (a wild-do-table rule that skips the CREATE
    DATABASE: every kept row breaks) holds `keep` of them, the rest counted and let go after each
    buffer: `found` is still every break, the breaks handed back the first ones."""
    from dumpfilter.binlogs.lint import FollowingLint, look_together

    paths = generate(WorkloadSpec(seed=3, transactions=600, schemas=3, flavor="mariadb"), tmp_path)
    rules, rule_settings = RuleSet(wild_do_table=("db1.t%",)), Settings(flavor="mariadb")
    want = reference_lint(paths, rules, rule_settings)
    assert len(want) > 50
    following = FollowingLint(new_linter(rules, rule_settings), chunk_size=4096)
    look = look_together([following], [(p, p.stat().st_size) for p in paths], 1 << 30, 5)[0]
    assert look.caught_up and look.found == len(want) and look.breaks == want[:5]
    assert following.linter.breaks.dropped > 0 and not following.linter.breaks
