"""`simulate --verify`'s reference (slave-side filtering of the full stream) decides single-table DML
statements once per statement key where the rules' decisions are a function of it, as the master
does (issue #60, goal 4: two thirds of --verify's time was the reference parsing each statement
again): on a real MariaDB MIXED binlog of sysbench's write shapes and cross-database statements,
the keyed reference keeps exactly what the statement-by-statement one keeps, for database and
table rules, and parses each key once."""

from __future__ import annotations

import pytest

from dumpfilter.codec import group_transactions, read_events
from dumpfilter.lab.simulate.equivalence import _ByKey
from dumpfilter.rules.evaluate import RuleEngine
from dumpfilter.rules.ruleset import RuleSet, Settings
from dumpfilter.rules.transaction_filter import KEEP, TransactionFilter
from tests.spark_jobs.test_experiment_statement_tables import _workload

RULES = [RuleSet(do_db=("crm",)), RuleSet(ignore_db=("logs",)), RuleSet(wild_do_table=("crm.%",)),
         RuleSet(do_table=("shop.sbtest1",)), RuleSet(do_db=("crm", "shop"), ignore_table=("shop.sbtest2",))]


@pytest.fixture(scope="module")
def transactions(mariadb_factory):
    server = mariadb_factory("verify-by-key", binlog_format="MIXED")
    server.execute(_workload(300))
    server.flush_logs()
    return [txn for path in server.binlog_files()[:-1] for txn in group_transactions(read_events(path.read_bytes()))]


@pytest.mark.parametrize("rules", RULES, ids=repr)
def test_the_keyed_reference_keeps_what_the_plain_one_keeps(transactions, rules):
    settings = Settings(flavor="mariadb")
    plain = TransactionFilter(RuleEngine(rules, settings), empty_transactions=KEEP)
    keyed_decider = _ByKey(RuleEngine(rules, settings))
    keyed = TransactionFilter(keyed_decider, empty_transactions=KEEP)
    statements = 0
    for txn in transactions:
        want, got = plain.filter(txn), keyed.filter(txn)
        assert (got.outcome, [e.raw for e in got.events]) == (want.outcome, [e.raw for e in want.events])
        statements += sum(1 for e in txn.events if e.is_query)
    assert keyed_decider.by_key and 0 < len(keyed_decider.known) < statements / 20
