"""`simulate --verify` has one way (issue #80 goal 5): on a real MariaDB MIXED binlog (sysbench's
write shapes, cross-database statements, row-logged UUID() inserts, DDL), every slave's units kept
whole, kept in part (their kept events), and skipped whole under every skip policy (nothing in a
heartbeat stream, the placeholder unit's framing, the empty transaction), DDL among them, are
answered by the slave's rules and made by the core's send walk in relay mode, and the verdicts are
those of the relay logs the slaves received; a relay log that lacks a transaction, or a skipped
unit's form, is told unit by unit, the transaction named. Over generated relay logs of every format,
flavour and skip policy, split over many files or cut, a replicate-rewrite-db slave among them,
every slave takes that way."""

from __future__ import annotations

import shutil

import pytest
from rich.console import Console

from dumpfilter.binlogs.files import binlog_listing
from dumpfilter.codec.scanner import Scanner
from dumpfilter.codec.transactions import CONTROL
from dumpfilter.lab.simulate import run_simulation
from dumpfilter.lab.simulate.equivalence import relay_transactions, verify_slaves
from dumpfilter.lab.simulate.verify_compiled import _verify_compiled
from dumpfilter.lab.simulate.streams import EVERYTHING
from dumpfilter.rules.evaluate import RuleEngine
from dumpfilter.rules.transaction_filter import KEEP, PARTIAL, TransactionFilter
from dumpfilter.topology import parse_topology

from tests.spark_jobs.test_experiment_statement_tables import _workload

pytestmark = [pytest.mark.grpc, pytest.mark.timeout(400)]

SLAVES = """
[[slaves]]
name = "crm-db"
server_id = 2
rules = ["replicate-do-db=crm"]

[[slaves]]
name = "crm-wild"
server_id = 3
rules = ["replicate-wild-do-table=crm.%", "replicate-wild-do-table=shop.sbtest1"]

[[slaves]]
name = "no-logs"
server_id = 4
rules = ["replicate-ignore-db=logs", "replicate-ignore-table=analytics.sbtest2"]
"""


# The workload's DDL statements (CREATE DATABASE / TABLE): units the core hands to Python.
DDL = sum(1 for stmt in _workload(500) if stmt.split(None, 1)[0].upper() in ("CREATE", "ALTER", "DROP"))


@pytest.fixture(scope="module")
def simulated(mariadb_factory, tmp_path_factory):
    """A verified simulation of the three slaves under every skip policy, its work kept."""
    server = mariadb_factory("verify-compiled", binlog_format="MIXED")
    server.execute(_workload(500))
    server.flush_logs()
    root = tmp_path_factory.mktemp("mixed")
    for path in server.binlog_files()[:-1]:
        shutil.copy(path, root / path.name)
    text = (f'[master]\nbinlogs = "{root}"\n\n[experiment]\nmaster_vs_slave = true\n'
            'skip_policies = ["heartbeat", "placeholder", "empty-transaction"]\n' + SLAVES)
    topology = parse_topology(text)
    work = tmp_path_factory.mktemp("work")
    result = run_simulation(topology, None, verify=True, progress=False, keep_work=work,
                            console=Console(file=None, quiet=True))
    assert result.ok
    return topology, result


def _checks(topology, result, policies):
    full = next(s for s in result.streams if s.plan.role == EVERYTHING).plan.relay_dir
    checks = []
    for spec in topology.slaves:
        received = {s.plan.skip_policy: s.plan.relay_dir for s in result.streams
                    if s.plan.spec is spec and s.plan.skip_policy in policies}
        checks.append((spec, received, None, None))
    return full, checks


@pytest.mark.parametrize("policies", [("heartbeat",), ("placeholder",), ("empty-transaction",),
                                      ("heartbeat", "placeholder", "empty-transaction")])
def test_the_core_answers_every_unit(simulated, policies):
    topology, result = simulated
    full, checks = _checks(topology, result, policies)
    compiled = _verify_compiled(full, checks)
    assert all(found is not None for found in compiled)
    for found in compiled:
        assert found.ok and found.transactions > 500
        # Kept and skipped units alike, DDL among them, under every skip policy (a skipped unit's
        # placeholders or empty transaction made by the core): nothing goes another way.
        assert found.by_core == found.transactions and found.by_python == 0, found
        for policy in policies:
            if policy != "heartbeat":  # every unit leaves something in its relay log
                assert found.compared[policy] == found.transactions, found


@pytest.mark.parametrize("policy", ["placeholder", "empty-transaction"])
def test_a_skipped_units_form_missing_is_told_unit_by_unit(simulated, tmp_path, policy):
    """A placeholder or empty-transaction relay log without the form of one skipped unit: the
    runs differ, and the same answers compared unit by unit name the transaction."""
    topology, result = simulated
    full, checks = _checks(topology, result, (policy,))
    spec, received, _, _ = checks[0]  # crm-db: most units skipped
    cut = tmp_path / "relay"
    shutil.copytree(received[policy], cut)
    last = cut / binlog_listing(cut)[-1]
    data = last.read_bytes()
    units = [u for u in Scanner(str(last)).units(data[4:], 0, 4, at_eof=True).units if u.kind != CONTROL]
    forms = [u for u in units if u.events == 2]  # a skipped unit's GTID and XID, or its GTID and COMMIT
    gone = forms[len(forms) // 2]
    last.write_bytes(data[:4 + gone.start] + data[4 + gone.end:])
    tampered = [(spec, {policy: cut}, None, None)]
    assert _verify_compiled(full, tampered) == [None]  # in runs: a difference
    found = verify_slaves(full, tampered)[0]  # unit by unit: named
    assert not found.ok and found.total_differences == 1
    assert found.differences[0].problem.startswith("not received; slave-side filtering keeps 2 events")


def test_a_missing_transaction_is_told_unit_by_unit(simulated, tmp_path):
    topology, result = simulated
    full, checks = _checks(topology, result, ("heartbeat",))
    spec, received, _, _ = checks[1]
    cut = tmp_path / "relay"
    shutil.copytree(received["heartbeat"], cut)
    last = cut / binlog_listing(cut)[-1]
    data = last.read_bytes()
    units = [u for u in Scanner(str(last)).units(data[4:], 0, 4, at_eof=True).units if u.kind != CONTROL]
    gone = units[len(units) // 2]
    last.write_bytes(data[:4 + gone.start] + data[4 + gone.end:])
    tampered = [(spec, {"heartbeat": cut}, None, None)]
    assert _verify_compiled(full, tampered) == [None]  # in runs: a difference
    found = verify_slaves(full, tampered)[0]  # unit by unit: named
    assert not found.ok and found.total_differences == 1
    assert found.differences[0].problem.startswith("not received; slave-side filtering keeps")
    assert found.by_core == found.transactions


SPLIT_SLAVES = [{"rules": ["replicate-do-db=db2"], "policy": "heartbeat", "semantics": "mysql"},
                {"rules": ["replicate-wild-ignore-table=db3.%"], "policy": "placeholder", "semantics": "mysql"},
                {"rules": ["replicate-wild-ignore-table=db3.%", "replicate-rewrite-db=db1->dbx"],
                 "policy": "empty-transaction", "semantics": "mysql"}]


@pytest.mark.parametrize(("fmt", "flavor", "seed"), [("mixed", "mariadb", 2909), ("mixed", "mysql", 2909),
                                                     ("row", "mysql", 17), ("statement", "mariadb", 5)])
@pytest.mark.parametrize("relay_log_size", [64 << 20, 6_000])
def test_every_slave_takes_the_one_way_over_every_policy_format_and_flavor(tmp_path, monkeypatch, fmt, flavor, seed,
                                                                          relay_log_size):
    """Relay logs of every skip policy, flavour and format, in one file or split over many (a
    file ending inside a placeholder's GTID group among them): every slave, the replicate-rewrite-db
    one too (what the core makes renamed as the slave renames it), is verified in runs by the core.
    A relay log cut inside a transaction is told unit by unit, the transaction named."""
    from dumpfilter.slave.config import SlaveConfig
    from dumpfilter.lab.simulate import streams
    from tests.lab.simulate.test_simulate_verify import _toml

    monkeypatch.setattr(streams, "SlaveConfig", lambda **kw: SlaveConfig(relay_log_size=relay_log_size, **kw))
    topology = parse_topology(_toml(fmt, flavor, seed, SPLIT_SLAVES))
    result = run_simulation(topology, None, verify=True, progress=False, keep_work=tmp_path / "work",
                            console=Console(file=None, quiet=True))
    assert result.ok
    full, checks = _checks(topology, result, ("heartbeat", "placeholder", "empty-transaction"))
    compiled = _verify_compiled(full, checks)
    # The core's way, MySQL's placeholder streams too (a skipped unit's framing as the slave
    # relays it, its GTID's transaction_length rewritten: skip_forms/mysql.rs), and the rewrite.
    for found in compiled:
        assert found is not None and found.ok and found.transactions >= 250
        assert found.by_core > found.transactions / 2, found
    files = max(len(binlog_listing(path)) for _, received, _, _ in checks for path in received.values())
    assert files > 1 or relay_log_size == 64 << 20
    if files > 1:
        return
    # A received relay log cut at an event boundary inside its last transaction.
    spec, received, _, _ = checks[0]
    cut = tmp_path / "cut"
    shutil.copytree(received["heartbeat"], cut)
    last = cut / binlog_listing(cut)[-1]
    data = last.read_bytes()
    units = Scanner(str(last)).units(data[4:], 0, 4, at_eof=True).units
    body = [u for u in units if u.kind != CONTROL][-1]
    last.write_bytes(data[:4 + body.last])
    tampered = [(spec, {"heartbeat": cut}, None, None)]
    assert _verify_compiled(full, tampered) == [None]
    (found,) = verify_slaves(full, tampered)
    assert not found.ok and found.total_differences == 1, found.differences
    assert "slave-side filtering keeps" in found.differences[0].problem


@pytest.mark.parametrize(("fmt", "flavor", "seed"), [("row", "mysql", 17), ("mixed", "mariadb", 2909),
                                                     ("statement", "mysql", 5)])
def test_units_kept_in_part_are_predicted_by_the_send_walk(tmp_path, fmt, flavor, seed):
    """A unit a slave's rules keep in part (a transaction that writes an ignored schema and
    another; a MySQL statement unit among them, cut at its statements by their keys, its GTID's
    transaction_length made anew) is predicted by the send walk in relay mode under every skip
    policy, as its kept events, and so is every other unit: nothing goes another way, and the
    slaves verify."""
    from tests.lab.simulate.test_simulate_verify import _toml

    topology = parse_topology(_toml(fmt, flavor, seed, SPLIT_SLAVES[:2]))
    result = run_simulation(topology, None, verify=True, progress=False, keep_work=tmp_path / "work",
                            console=Console(file=None, quiet=True))
    assert result.ok
    full, checks = _checks(topology, result, ("heartbeat", "placeholder", "empty-transaction"))
    spec = checks[1][0]  # replicate-wild-ignore-table=db3.%
    (found,) = _verify_compiled(full, checks[1:])
    assert found is not None and found.ok
    assert found.by_core == found.transactions and found.by_python == 0, found
    # (the units kept in part are there, and the core took them)
    reference = TransactionFilter(RuleEngine(spec.rules, spec.settings), empty_transactions=KEEP)
    assert sum(reference.filter(txn).outcome == PARTIAL for txn in relay_transactions(full)) > 10
