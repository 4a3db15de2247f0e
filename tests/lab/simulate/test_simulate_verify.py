"""--verify: passes on the built-in topology and on generated ones (random rule sets, formats and
flavours), and fails, naming the transactions, when a rule is deliberately broken."""

from __future__ import annotations

import dataclasses
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dumpfilter.codec import EventType
from dumpfilter.binlogs import TailingReader
from dumpfilter.codec import group_transactions
from dumpfilter.cli.app import main as dumpfilter_main
from dumpfilter.topology import parse_topology
from dumpfilter.rules.statements import statement_tables
from dumpfilter.lab.simulate import run_simulation
from dumpfilter.lab.simulate.equivalence import verify_slaves

pytestmark = [pytest.mark.grpc, pytest.mark.timeout(300)]


def test_default_topology_verifies(default_run):
    result, _, _ = default_run
    assert len(result.verifications) == 4
    for check in result.verifications:
        assert check.ok, check.differences
        assert check.transactions > 0
        # every policy stream of the slave was compared, and every transaction was matched
        # (placeholder / empty-transaction streams carry every GTID)
        assert check.compared["placeholder"] == check.transactions
        assert check.compared["empty-transaction"] == check.transactions
        assert 0 < check.compared["heartbeat"] <= check.transactions
    assert all(row["verified"] is True for row in result.report["slaves"])


# -- generated topologies --------------------------------------------------------------------

DBS = ["db1", "db2", "db3", "db4"]
_db = st.sampled_from(DBS)
_table = st.sampled_from(["t1", "t2", "t3"])
_rule = st.one_of(
    _db.map(lambda d: f"replicate-do-db={d}"),
    _db.map(lambda d: f"replicate-ignore-db={d}"),
    st.tuples(_db, _table).map(lambda p: f"replicate-do-table={p[0]}.{p[1]}"),
    st.tuples(_db, _table).map(lambda p: f"replicate-ignore-table={p[0]}.{p[1]}"),
    st.sampled_from(["db%.t1", "db_.t2", "db3.%", "%.t3"]).map(lambda p: f"replicate-wild-do-table={p}"),
    st.sampled_from(["db%.t1", "db_.t2", "db4.%", "%.t3"]).map(lambda p: f"replicate-wild-ignore-table={p}"),
    st.tuples(_db, st.sampled_from(["dbx", "dby"])).map(lambda p: f"replicate-rewrite-db={p[0]}->{p[1]}"),
)
_slave = st.fixed_dictionaries({
    "rules": st.lists(_rule, min_size=0, max_size=3),
    "policy": st.sampled_from(["heartbeat", "placeholder", "empty-transaction"]),
    "semantics": st.sampled_from(["mysql", "effective"]),
})


def _toml(fmt: str, flavor: str, seed: int, slaves: list[dict]) -> str:
    lines = ["[master.workload]", f"seed = {seed}", "schemas = 4", "tables_per_schema = 3", "transactions = 250",
             f'binlog_format = "{fmt}"', f'flavor = "{flavor}"', "cross_db_share = 0.3", "ddl_share = 0.05",
             "max_binlog_size = 20000", ""]
    for i, slave in enumerate(slaves):
        rules = ", ".join(json.dumps(r) for r in slave["rules"])
        lines += ["[[slaves]]", f'name = "s{i}"', f"server_id = {10 + i}", f"rules = [{rules}]",
                  f'skip_policy = "{slave["policy"]}"', f'filter_semantics = "{slave["semantics"]}"',
                  f'flavor = "{flavor}"', ""]
    return "\n".join(lines)


@settings(max_examples=4, deadline=None, suppress_health_check=list(HealthCheck))
@given(fmt=st.sampled_from(["row", "statement", "mixed"]), flavor=st.sampled_from(["mariadb", "mysql"]),
       seed=st.integers(1, 10_000), slaves=st.lists(_slave, min_size=1, max_size=2))
def test_generated_topologies_verify(tmp_path_factory, fmt, flavor, seed, slaves):
    topology = parse_topology(_toml(fmt, flavor, seed, slaves))
    result = run_simulation(topology, None, verify=True, progress=False)
    for check in result.verifications:
        assert check.ok, (fmt, flavor, check.differences)
        assert check.transactions >= 250


# -- a deliberately broken rule ----------------------------------------------------------------

CROSS_DB = """
[master.workload]
seed = 5
schemas = 3
tables_per_schema = 2
transactions = 300
binlog_format = "statement"
cross_db_share = 0.5
flavor = "mariadb"

[[slaves]]
name = "eff"
server_id = 7
rules = ["replicate-do-db=db1"]
filter_semantics = "effective"
flavor = "mariadb"
skip_policy = "heartbeat"

[experiment]
skip_policies = []
"""


def _cross_db_gtids(binlog_dir) -> set[str]:
    """GTIDs of transactions with a statement that changes a table outside its default database."""
    out = set()
    for txn in group_transactions(e for _, e in TailingReader(binlog_dir)):
        for event in txn.events:
            if event.type_code == EventType.QUERY and event.db:
                info = statement_tables(event.sql, event.db)
                if any(db != event.db for db, _ in info.updated):
                    out.add(txn.gtid)
    return out


def test_effective_slave_verified_against_mysql_semantics_fails(tmp_path):
    """replicate-do-db under effective semantics keeps `USE db2; UPDATE db1.t1` and drops
    `USE db1; UPDATE db2.t1`; rpl_filter.cc (mysql) does the opposite. Verifying the effective slave
    against mysql semantics must fail, on cross-database transactions only."""
    topology = parse_topology(CROSS_DB)
    result = run_simulation(topology, None, verify=True, progress=False, keep_work=tmp_path / "work")
    assert result.ok  # verified against its own semantics, it passes
    spec = topology.slaves[0]
    wrong = dataclasses.replace(spec, settings=dataclasses.replace(spec.settings, semantics="mysql"))
    full = next(s for s in result.streams if s.plan.role == "everything").plan.relay_dir
    mine = {s.plan.skip_policy: s.plan.relay_dir for s in result.streams if s.plan.spec is spec}
    check = verify_slaves(full, [(wrong, mine, None, None)])[0]
    assert not check.ok
    cross = _cross_db_gtids(tmp_path / "work" / "binlog")
    assert cross
    assert check.total_differences <= len(cross)
    for difference in check.differences:
        assert difference.transaction in cross, difference


def test_cli_verify_fails_when_the_master_filters_with_the_wrong_semantics(tmp_path, monkeypatch, capsys):
    """Break the master: it evaluates every rule set with mysql semantics, whatever the slave
    registered. The slave's own check and --verify must catch it; the command exits 1."""
    from dumpfilter.master import service
    from dumpfilter.rules.evaluate import RuleEngine

    def broken_engine(self, rules, settings, keep=True):
        return RuleEngine(rules, dataclasses.replace(settings, semantics="mysql"))

    monkeypatch.setattr(service.DumpService, "_engine", broken_engine)
    topology = tmp_path / "cross.toml"
    topology.write_text(CROSS_DB)
    status = dumpfilter_main(["simulate", "--topology", str(topology), "--verify", "--out", str(tmp_path / "out"),
                              "--no-progress"])
    assert status == 1
    out = capsys.readouterr().out
    assert "verify eff:" in out and "difference" in out
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["slaves"][0]["verified"] is False
    assert report["verify"][0]["total_differences"] > 0
    assert all(d["transaction"].startswith("0-1-") or d["transaction"] == "-"
               for d in report["verify"][0]["differences"])


@pytest.mark.parametrize("flavor", ["mariadb", "mysql"])
def test_placeholder_for_a_files_last_ddl_ends_its_group(flavor):
    """Found by the property above (seed 2909, MIXED): under the placeholder policy a skipped DDL
    is its GTID plus one placeholder; when it is the last unit of a file the batch ends there, and
    the slave must close the group at the placeholder instead of failing with 'the master's batch
    ended inside a transaction'."""
    slaves = [{"rules": ["replicate-do-db=db2"], "policy": "heartbeat", "semantics": "mysql"}]
    result = run_simulation(parse_topology(_toml("mixed", flavor, 2909, slaves)), None, verify=True, progress=False)
    (check,) = result.verifications
    assert check.ok, check.differences
    assert check.compared["placeholder"] == check.transactions
