"""Issue #60 goal 4: lint at the speed of simulate's streams. On a real MariaDB MIXED binlog of
sysbench's write shapes (tests/spark_jobs' workload: tables created qualified with no default
database, four DML statements a transaction), the INSERTs' column lists of the keyed units are
read off each buffer's texts once, not unit by unit. The predictions are the real
replica's: it stops at the first break predicted, with its errno, or it catches up when none is."""

from __future__ import annotations

import shutil

import pytest

from dumpfilter.binlogs.lint import lint_many
from dumpfilter.binlogs.lint_scan import LintScanStats
from dumpfilter.lab.sandbox import make_replica, wait_caught_up
from dumpfilter.rules.ruleset import RuleSet, Settings
from tests.rules.test_lint_real_replica import set_filters, user_databases
from tests.spark_jobs.test_experiment_statement_tables import _workload

pytestmark = [pytest.mark.mariadb, pytest.mark.timeout(300)]

TRANSACTIONS = 400
MARIADB = Settings(flavor="mariadb")
# (replicate-* options for the real replica, the rule set lint is given)
RULES = [
    (["--replicate-do-db=crm"], RuleSet(do_db=("crm",))),
    (["--replicate-wild-ignore-table=%.sbtest1"], RuleSet(wild_ignore_table=("%.sbtest1",))),
    (["--replicate-wild-do-table=shop.%", "--replicate-wild-do-table=crm.sbtest2"],
     RuleSet(wild_do_table=("shop.%", "crm.sbtest2"))),
]


@pytest.fixture(scope="module")
def mixed(mariadb_factory, tmp_path_factory):
    primary = mariadb_factory("lint-keyed-primary", binlog_format="MIXED")
    replica = mariadb_factory("lint-keyed-replica", log_bin=False)
    primary.execute(_workload(TRANSACTIONS))
    primary.flush_logs()
    root = tmp_path_factory.mktemp("mixed")
    paths = []
    for path in primary.binlog_files()[:-1]:
        paths.append(root / path.name)
        shutil.copy(path, paths[-1])
    stats = LintScanStats()
    found = lint_many(paths, [(rules, MARIADB) for _, rules in RULES], stats=stats)
    return primary, replica, found, stats


def test_keyed_units_are_not_fed_one_at_a_time(mixed):
    _, _, found, stats = mixed
    assert stats.fed is not None and stats.bulk is not None
    do_db = found[0]
    # Every crm transaction (a quarter) breaks at its first UPDATE (a replica that skipped the CREATE).
    assert len(do_db) >= TRANSACTIONS // 4 and {b.errno for b in do_db} == {1146}, do_db[:3]
    assert all(b.statement.startswith("UPDATE sbtest") for b in do_db)
    # Fed: the DDL, the control units, the units the DDL left behind, and the cross-database
    # `USE logs; UPDATE crm.sbtestN` (one transaction in ten: skipped though crm is kept, a divergence).
    # The INSERTs with column lists into kept tables: read off their buffer, none fed.
    assert stats.bulk[1] + stats.bulk[2] >= TRANSACTIONS // 2, stats


@pytest.mark.parametrize("which", range(len(RULES)))
def test_the_predictions_are_the_real_replicas(mixed, which):
    primary, replica, found, _ = mixed
    options, _ = RULES[which]
    breaks = found[which]
    replica.execute(["STOP SLAVE", "RESET SLAVE ALL"])
    replica.execute([f"DROP DATABASE `{n}`" for n in user_databases(replica)])
    set_filters(replica, options)
    make_replica(primary, replica)
    status = wait_caught_up(primary, replica, timeout=60)
    if not breaks:
        assert status.caught_up, status.describe()
        return
    assert status.stopped_with_error, status.describe()
    first = breaks[0]
    assert (first.errno, first.file, first.pos) == (
        status.last_sql_errno, status.relay_master_log_file, status.exec_master_log_pos), status.describe()
