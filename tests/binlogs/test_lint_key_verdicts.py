"""Lint answers the statement units by keys from their keys' verdicts (binlogs/lint_keyed.py,
`Linter.key_verdict`), where it fed each one to the Linter: the report, byte for byte (every break
with its positions, GTID and statement, and the divergence report's counts and first writes), is
the one the Linter gives fed every unit (tests/oracles/lint.py). Held on generated MIXED and
STATEMENT binlogs (several statements a transaction, cross-database statements, INSERT ... SELECT,
DDL between them), on hand-made units whose keys' verdicts change mid-stream (a table made, dropped,
altered or shadowed by a temporary one between them), and on the real fixture binlogs; and the
units were answered, not fed, where the keys allow it (the comparison bites)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dumpfilter.binlogs.lint import lint_files, lint_many
from dumpfilter.binlogs.lint_scan import LintScanStats, lint_scan
from dumpfilter.codec.constants import EventType
from dumpfilter.codec import encode as enc
from dumpfilter.errors import DumpFilterError
from dumpfilter.rules.lint_divergence import Breaks
from dumpfilter.rules.ruleset import RuleSet, Settings
from dumpfilter.rules.schema import SchemaModel
from dumpfilter.workload.generator import FLAVORS, WorkloadSpec, generate
from tests.binlogs.test_lint_scan import FIXTURE_RULES, _case_linter, _more_rules
from tests.core.test_scanner_differential import fixture_files
from tests.oracles.lint import reference_feed, reference_lint
from tests.rules.test_lint_cases import Build


def _report(breaks: list) -> tuple[list[dict[str, object]], dict[str, object] | None, list[str]]:
    """What `dumpfilter lint` prints of a result, as data: each break, and the divergence report."""
    divergence = breaks.divergence if isinstance(breaks, Breaks) else None
    return ([b.to_json() for b in breaks], divergence.to_json() if divergence is not None else None,
            divergence.lines() if divergence is not None else [])


def _outcome(run):
    try:
        return _report(run())
    except DumpFilterError as exc:
        return (type(exc).__name__, str(exc))


def _unit(build: Build, statements: list[tuple[str, str]], thread: int = 1) -> None:
    """One transaction of several statements: a GTID, (BEGIN,) each (sql, db), COMMIT."""
    unit = [build._gtid(False)]
    if build.flavor == "mysql":
        unit.append(build.ev(EventType.QUERY, enc.query_body("BEGIN", statements[0][1], thread_id=thread)))
    for sql, db in statements:
        unit.append(build.ev(EventType.QUERY, enc.query_body(sql, db, thread_id=thread)))
    unit.append(build.ev(EventType.QUERY, enc.query_body("COMMIT", statements[-1][1], thread_id=thread)))
    build.units.append(unit)


def _churn(flavor: str = "mariadb", lone: bool = False) -> Build:
    """Units of four keyed statements, the replica's state changed between them by DDL: a table
    the replica lacks (its CREATE skipped), then made, then dropped on the primary only; a skipped
    ALTER before INSERTs with and without column lists; a temporary table shadowing the key's table;
    cross-database writes (a divergence: skipped though their table is kept, or applied outside).
    `lone`: each statement its own unit instead (a GTID and the Query, no BEGIN nor COMMIT: an
    autocommit statement on a non-transactional table), answered by its shape's verdict."""
    build = Build(flavor)

    def unit(statements: list[tuple[str, str]]) -> None:
        if not lone:
            _unit(build, statements)
            return
        for sql, db in statements:
            build.q(sql, db, ddl=True)

    def work(n: int, db: str = "a") -> None:
        for i in range(n):
            unit([(f"UPDATE t SET v = v + 1 WHERE id = {i}", db), (f"UPDATE u SET v = {i} WHERE id = 1", db),
                  (f"DELETE FROM t WHERE id = {i + 100}", db), (f"INSERT INTO t VALUES ({i + 100}, {i})", db)])

    for sql, db in [("CREATE DATABASE a", ""), ("CREATE DATABASE b", ""), ("CREATE TABLE t (id INT, v INT)", "a"),
                    ("CREATE TABLE a.u (id INT, v INT)", "b")]:
        build.q(sql, db)
    work(6)                                               # u is missing under do-db=a: each unit breaks at it
    build.q("CREATE TABLE IF NOT EXISTS u (id INT, v INT)", "a")
    work(6)                                               # now made: nothing breaks
    build.q("DROP TABLE a.u", "b")
    work(3)
    build.q("CREATE TABLE a.u (id INT, v INT)", "a")
    build.q("ALTER TABLE a.t ADD COLUMN w INT", "b")       # skipped under do-db=a: INSERTs into t checked
    work(3)
    unit([("INSERT INTO t (id, w) VALUES (1, 1)", "a"), ("UPDATE u SET v = 2", "a")])
    build.q("CREATE TEMPORARY TABLE t (id INT)", "a")     # shadows a.t for thread 1
    work(3)
    build.q("DROP TEMPORARY TABLE t", "a")
    for i in range(6):                                    # cross-database writes: a divergence either way
        unit([(f"UPDATE a.u SET v = {i}", "b"), (f"UPDATE b.x SET v = {i}", "a"), (f"DELETE FROM u WHERE id = {i}", "a")])
    build.q("CREATE TABLE b.x (id INT, v INT)", "b")
    work(3, db="b")
    return build


CHURN_RULES = [[], ["replicate-do-db=a"], ["replicate-ignore-db=b"], ["replicate-wild-do-table=a.%"],
               ["replicate-ignore-table=a.u"], ["replicate-rewrite-db=a->r", "replicate-do-db=r"],
               ["replicate-do-table=a.t"], ["replicate-wild-ignore-table=%.t"]]


@pytest.mark.parametrize("lone", [False, True], ids=["units", "lone"])
@pytest.mark.parametrize("flavor", ["mariadb", "mysql"])
@pytest.mark.parametrize("options", CHURN_RULES, ids=["-".join(o) or "none" for o in CHURN_RULES])
def test_verdicts_follow_the_ddl_between_keyed_units(tmp_path, flavor, options, lone):
    path = _churn(flavor, lone).write(tmp_path / "bin.000001")
    want = reference_feed([path], _case_linter(options, flavor))
    stats = LintScanStats()
    got = lint_scan([path], [_case_linter(options, flavor)], stats=stats)[0]
    assert _report(got) == _report(want)
    if options == ["replicate-do-db=a"]:
        # The breaks and divergence of this rule set come from units answered by their keys.
        assert len(want) >= 6 and want.divergence.writes >= 6, _report(want)
        assert stats.answered is not None and stats.answered[0] >= 12, stats


def _sessions_and_databases(flavor: str) -> Build:
    """Keyed units between which the verdicts change by more than a table: a temporary table whose
    CREATE the replica skips (its session's statements then write the base table of that name, as a
    real MariaDB replica does: no 1146), dropped again; a database
    dropped (absent from a complete starting schema afterwards); INSERT ... SELECT, whose key's
    first statement reads no table where a later one reads a table the replica lacks; and lone
    statements (a GTID and the Query) whose shape is alike under two default databases."""
    build = Build(flavor)

    def work(n: int, thread: int = 1) -> None:
        for i in range(n):
            _unit(build, [(f"UPDATE t SET v = {i} WHERE id = {i}", "a"), (f"DELETE FROM t WHERE id = {i + 50}", "a")],
                  thread)

    for sql, db in [("CREATE DATABASE IF NOT EXISTS a", ""), ("CREATE TABLE IF NOT EXISTS a.t (id INT, v INT)", "a"),
                    ("CREATE TABLE a.u (id INT, v INT)", "b")]:
        build.q(sql, db)
    work(3)
    for target in ("t", "s"):  # (s: a table seeded outside replication, its columns unknown)
        _unit(build, [(f"INSERT INTO {target} SELECT 1, 2", "a"), ("UPDATE t SET v = 3", "a")])
        _unit(build, [(f"INSERT INTO {target} SELECT id, v FROM u", "a"), ("UPDATE t SET v = 4", "a")])
    build.q("CREATE TEMPORARY TABLE a.t (id INT, v INT)", "b")  # thread 1's: skipped under do-db=a
    work(3)
    work(2, thread=2)                                          # another session: the base table
    build.q("DROP TEMPORARY TABLE a.t", "b")
    work(3)
    for i in range(3):  # lone statements (no BEGIN nor COMMIT) of one shape under two default databases
        for db in ("a", "b"):
            build.q(f"UPDATE s SET v = {i}", db, ddl=True)
        build.q(f"INSERT INTO s SELECT id, v FROM {('t', 'u', 'a.t')[i]}", "a", ddl=True)
    build.q("DROP DATABASE a", "a")
    work(3)
    return build


SESSION_RULES = [[], ["replicate-do-db=a"], ["replicate-ignore-db=b"], ["replicate-wild-do-table=a.t"]]


@pytest.mark.parametrize("seeded", [False, True])
@pytest.mark.parametrize("flavor", ["mariadb", "mysql"])
@pytest.mark.parametrize("options", SESSION_RULES, ids=["-".join(o) or "none" for o in SESSION_RULES])
def test_verdicts_follow_sessions_and_databases(tmp_path, options, flavor, seeded):
    path = _sessions_and_databases(flavor).write(tmp_path / "bin.000001")
    schema = SchemaModel.from_sql("CREATE DATABASE a; CREATE DATABASE b; CREATE TABLE a.t (id INT, v INT);") \
        if seeded else None
    want = reference_feed([path], _case_linter(options, flavor, schema=schema))
    stats = LintScanStats()
    got = lint_scan([path], [_case_linter(options, flavor, schema=schema)], stats=stats)[0]
    assert _report(got) == _report(want)
    assert stats.answered is not None and stats.answered[0] >= 6, stats
    if options == ["replicate-do-db=a"]:
        assert [b.errno for b in want].count(1146) >= 3, _report(want)  # the INSERT ... SELECTs from a.u
        assert want.divergence.writes >= 6, _report(want)  # the session's units, on the shadowed base table


def test_a_mixed_binlog_that_breaks_at_every_kept_unit_is_answered_by_key(tmp_path):
    """A replica that lacks every kept table ('db1.' LIKE 'db1.t1' is false: the CREATE DATABASE is
    skipped): each unit of the kept table breaks, each statement unit answered from its keys'
    verdicts, not fed (the row units are)."""
    spec = WorkloadSpec(seed=3, schemas=2, tables_per_schema=2, transactions=600, binlog_format="mixed",
                        flavor="mariadb", cross_db_share=0.3, statements_per_transaction=4, max_binlog_size=60_000)
    paths = generate(spec, tmp_path)
    rule_sets = [(RuleSet(wild_do_table=("db1.t1",)), Settings(flavor="mariadb")),
                 (RuleSet(do_db=("db1",)), Settings(flavor="mariadb")),
                 (RuleSet(ignore_db=("db2",)), Settings(flavor="mariadb"))]
    stats = LintScanStats()
    got = lint_many(paths, rule_sets, stats=stats)
    for (rules, rule_settings), found in zip(rule_sets, got):
        assert _report(found) == _report(reference_lint(paths, rules, rule_settings))
    assert len(got[0]) > 50, _report(got[0])
    assert got[1].divergence.writes > 20, _report(got[1])  # cross-database writes under do-db
    assert stats.answered is not None and stats.fed is not None
    # Of 626 units, 275 are answered by their keys; what is fed is the DDL and the row units.
    statement_breaks = [b for b in got[0] if not b.statement.startswith("rows of")]
    assert len(statement_breaks) > 200 and stats.answered[0] >= len(statement_breaks) - 1, stats


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.integers(0, 10_000), st.sampled_from(["statement", "mixed"]), st.sampled_from(FLAVORS),
       st.sampled_from([0.0, 0.3, 0.8]), st.sampled_from([0.0, 0.05, 0.2]), st.sampled_from([0.0, 0.3]),
       st.integers(1, 5), st.data())
def test_generated_statement_binlogs_report_as_the_linter_fed_every_unit(
        tmp_path_factory, seed, fmt, flavor, cross, ddl, insert_select, per_transaction, data):
    spec = WorkloadSpec(seed=seed, schemas=4, tables_per_schema=2, transactions=data.draw(st.integers(30, 250)),
                        binlog_format=fmt, flavor=flavor, cross_db_share=cross, ddl_share=ddl,
                        insert_select_share=insert_select, statements_per_transaction=per_transaction,
                        max_binlog_size=data.draw(st.sampled_from([20_000, 1 << 30])))
    paths = generate(spec, tmp_path_factory.mktemp("binlog"))
    rule_sets = [_more_rules(data.draw) for _ in range(data.draw(st.integers(1, 3)))]
    got = lint_many(paths, rule_sets)
    for (rules, rule_settings), found in zip(rule_sets, got):
        assert _report(found) == _report(reference_lint(paths, rules, rule_settings)), (rules, rule_settings)


@pytest.mark.fixtures
def test_every_real_fixture_binlog_reports_as_the_linter_fed_every_unit(shared_fixtures):
    """Breaks and the divergence report, over every real fixture and rule set."""
    for path in fixture_files(shared_fixtures):
        for rules, rule_settings in FIXTURE_RULES:
            want = _outcome(lambda: reference_lint([path], rules, rule_settings))
            assert _outcome(lambda: lint_files([path], rules, rule_settings)) == want, (path.name, rules)


def _column_checks(flavor: str) -> Build:
    """Keyed units whose INSERTs have column lists to check (the replica's columns known, a skipped
    ALTER gave the primary's table one more): most pass on their heads alone, some name the column
    the replica lacks (1054) at one place or another in their unit, some are quoted or into another
    table whose columns differ (looked at one by one)."""
    build = Build(flavor)
    for sql, db in [("CREATE DATABASE a", ""), ("CREATE DATABASE b", ""), ("CREATE TABLE t (id INT, v INT)", "a"),
                    ("CREATE TABLE u (id INT, v INT, w INT)", "a"), ("ALTER TABLE a.t ADD COLUMN w INT", "b")]:
        build.q(sql, db)
    for i in range(40):
        statements = [(f"UPDATE t SET v = {i} WHERE id = {i}", "a"), (f"INSERT INTO t (id, v) VALUES ({i}, 1)", "a")]
        if i % 5 == 0:
            statements.append((f"INSERT INTO `t` (id, v) VALUES ({i + 100}, 2)", "a"))
        elif i % 4 == 0:
            statements.append((f"INSERT INTO u (id, w) VALUES ({i}, 3)", "a"))
        if i % 7 == 3:
            statements.insert(i % 3, (f"INSERT INTO t (id, w) VALUES ({i + 200}, 4)", "a"))
        _unit(build, statements)
    return build


@pytest.mark.parametrize("flavor", ["mariadb", "mysql"])
@pytest.mark.parametrize("options", [[], ["replicate-do-db=a"], ["replicate-ignore-db=b"]], ids=["none", "do-a", "ignore-b"])
def test_insert_heads_checked_only_in_the_units_that_need_them(tmp_path, flavor, options):
    """The INSERT heads read off the checked units' Queries (`Heads.failing`): a unit with a head that
    fails is looked at alone, the others cleared in bulk; the report is the Linter's fed every unit."""
    path = _column_checks(flavor).write(tmp_path / "bin.000001")
    want = reference_feed([path], _case_linter(options, flavor))
    stats = LintScanStats()
    got = lint_scan([path], [_case_linter(options, flavor)], stats=stats)[0]
    assert _report(got) == _report(want)
    if options:
        assert [b.errno for b in want] == [1054] * 6, _report(want)
        assert stats.bulk is not None and stats.bulk[0] >= 20, stats
