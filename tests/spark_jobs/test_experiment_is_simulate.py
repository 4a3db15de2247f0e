"""`dumpfilter experiment` counts what the master sends (issue #46, goals 2 and 3): per slave and
skip policy, its events and bytes sent equal what a real master streamed over gRPC to a slave of the
same rules and identity (`simulate`), under a master policy that bounds some identities. Before,
experiment ignored `master.policy` (a `db1.%` identity with no rules was counted as sent
everything) and forwarded the Heartbeats written in a binlog, which the master's stream reads and
never sends."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dumpfilter.cli.app import main as dumpfilter_main
from dumpfilter.codec import EventType
from dumpfilter.codec.encode import build_event
from dumpfilter.sent import SentCounts
from dumpfilter.spark_jobs.bandwidth_experiment import count_parts_local, count_parts_spark
from dumpfilter.spark_jobs.tasks.counts import merge_counts
from dumpfilter.spark_jobs.tasks.chunks import input_files, plan_chunks
from dumpfilter.topology import TopologyError, load_topology, parse_topology, slave_gates
from dumpfilter.workload import WorkloadSpec, generate

from tests.support.file_ends import series_with_every_end
from tests.support.simulated import assert_same, experiment_rows, simulated

pytestmark = [pytest.mark.grpc, pytest.mark.timeout(300)]

POLICIES = ("heartbeat", "placeholder", "empty-transaction")
POLICY_FILE = """
[slave.sales]
allow = ["db1.%"]

[slave.ops]
allow = ["%.%"]

[default]
allow = ["%.%"]
"""
# (name, user, rules): a bounded identity with no rules of its own, the same with rules the bound
# then refuses entirely or in part, an identity allowed every table, and the [default] one.
SLAVES = [
    ("sales", "sales", []),
    ("sales-do2", "sales", ["replicate-do-db=db2"]),
    ("sales-t1", "sales", ["replicate-wild-do-table=db1.t1", "replicate-wild-do-table=db3.%"]),
    ("ops", "ops", []),
    ("ops-ign2", "ops", ["replicate-wild-ignore-table=db2.%"]),
    ("anyone-do3", "", ["replicate-do-db=db3"]),
]


def _topology_text(binlogs, slaves=SLAVES, policies=POLICIES) -> str:
    parts = [f'[master]\nbinlogs = "{binlogs}"\npolicy = "policy.toml"\n',
             "[experiment]\nmaster_vs_slave = false\nskip_policies = []\n"]
    server_id = 10
    for name, user, rules in slaves:
        for policy in policies:
            server_id += 1
            parts.append(f'[[slaves]]\nname = "{name}/{policy}"\nserver_id = {server_id}\nuser = "{user}"\n'
                         f'skip_policy = "{policy}"\nrules = {json.dumps(rules)}\n')
    return "\n".join(parts)


def _write(tmp_path, binlogs, slaves=SLAVES, policies=POLICIES):
    (tmp_path / "policy.toml").write_text(POLICY_FILE)
    path = tmp_path / "topology.toml"
    path.write_text(_topology_text(binlogs, slaves, policies))
    return path


@pytest.fixture(scope="module")
def binlogs(tmp_path_factory):
    """A ROW binlog (MariaDB), a MIXED one and a ROW one (MySQL), several files each, each with a Heartbeat
    written into a file (a relay log or a binlog copied from one holds them)."""
    root = tmp_path_factory.mktemp("experiment-vs-simulate")
    out = {}
    for name, spec in {"row": WorkloadSpec(seed=46, schemas=3, tables_per_schema=2, transactions=260,
                                           binlog_format="row", flavor="mariadb", max_binlog_size=30_000),
                       "mixed": WorkloadSpec(seed=47, schemas=3, tables_per_schema=2, transactions=260,
                                             binlog_format="mixed", flavor="mysql", max_binlog_size=30_000,
                                             insert_select_share=0.25),
                       # MySQL 8.0 GTIDs with transaction_length, DDL among ROW units: every skipped
                       # unit's placeholders or empty transaction counted by the core's forms.
                       "mysql-row": WorkloadSpec(seed=48, schemas=3, tables_per_schema=2, transactions=260,
                                                 binlog_format="row", flavor="mysql", max_binlog_size=30_000,
                                                 ddl_share=0.05)}.items():
        generate(spec, root / name, "master-bin")
        _append_heartbeat(sorted((root / name).glob("master-bin.0*"))[-1])
        out[name] = root / name
    # Files ending with a Rotate, a Stop, or nothing (a crash): the stream enters each file that no
    # Rotate named with an artificial one (issue #61), and experiment counts it.
    series_with_every_end(out["row"], root / "ends")
    out["ends"] = root / "ends"
    return out


def _append_heartbeat(path) -> None:
    """A Heartbeat event at the end of a binlog file (after its last transaction)."""
    from dumpfilter.codec import read_events

    events = read_events(path.read_bytes())
    end = path.stat().st_size
    name = path.name.encode()
    hb = build_event(EventType.HEARTBEAT, name, fmt=events[0].fmt, server_id=1, timestamp=0,
                     log_pos=end + 19 + len(name) + events[0].fmt.checksum_len)
    with open(path, "ab") as f:
        f.write(hb.raw)


@pytest.mark.parametrize("workload", ["row", "mixed", "mysql-row", "ends"])
def test_experiment_counts_what_simulate_streams(tmp_path, binlogs, workload):
    """`dumpfilter experiment --no-spark` on the topology simulate runs: per slave and skip policy,
    the same events and bytes sent, heartbeats and placeholders as the slave received, and the
    master's own counts of what it read, skipped and sent in place of what it skipped."""
    path = _write(tmp_path, binlogs[workload])
    streams = simulated(load_topology(path))
    out = tmp_path / "experiment.json"
    assert dumpfilter_main(["experiment", "--binlogs", str(binlogs[workload]), "--topology", str(path), "--no-spark",
                            "--out", str(tmp_path / "out"), "--json", str(out), "--chunk-bytes", "9000"]) == 0
    rows = json.loads(out.read_text())["slaves"]
    assert_same(streams, rows)
    by_name = {r["slave"]: r for r in rows}
    # the policy bounds: a db1.% identity with no rules is sent less than one allowed everything
    assert by_name["sales/heartbeat"]["bytes_sent"] < by_name["ops/heartbeat"]["bytes_sent"]
    assert by_name["sales-do2/placeholder"]["transactions_kept"] == 0


@pytest.mark.spark
def test_spark_experiment_counts_what_simulate_streams(tmp_path, spark, binlogs):
    """The Spark job's counts (files cut into many chunks) are the master's too."""
    path = _write(tmp_path, binlogs["mixed"], SLAVES[:4])
    topology = load_topology(path)
    streams = simulated(topology)
    totals = merge_counts(count_parts_spark(spark, plan_chunks(input_files([binlogs["mixed"]]), 6000), topology.slaves,
                                            slave_gates(topology)), [s.name for s in topology.slaves])
    assert_same(streams, [{**t.as_row()} for t in totals])


rule_sets = st.lists(st.sampled_from([
    "replicate-do-db=db1", "replicate-do-db=db2", "replicate-ignore-db=db3", "replicate-do-table=db1.t1",
    "replicate-ignore-table=db2.t2", "replicate-wild-do-table=db%.t1", "replicate-wild-ignore-table=db1.%",
    "replicate-wild-do-table=db3.%"]), max_size=3, unique=True)


@settings(max_examples=4, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(rules=rule_sets, user=st.sampled_from(["sales", "ops", ""]), workload=st.sampled_from(["row", "mixed"]))
def test_random_rules_count_the_same(tmp_path, binlogs, rules, user, workload):
    slaves = [("random", user, rules)]
    path = _write(tmp_path, binlogs[workload], slaves)
    topology = load_topology(path)
    streams = simulated(topology)
    totals = merge_counts(count_parts_local(plan_chunks(input_files([binlogs[workload]]), None), topology.slaves,
                                            slave_gates(topology)), [s.name for s in topology.slaves])
    assert_same(streams, [t.as_row() for t in totals])


def test_one_counter_type_for_the_master_and_experiment():
    from dumpfilter.master.model import SlaveStats
    from dumpfilter.spark_jobs.tasks.counts import SlaveCounts

    assert issubclass(SlaveStats, SentCounts) and issubclass(SlaveCounts, SentCounts)
    a, b = SlaveCounts(slave="a", events_sent=2, kept_events=1), SlaveCounts(slave="a", events_sent=3, kept_events=2)
    a.add(b)
    assert (a.slave, a.events_sent, a.kept_events) == ("a", 5, 3)


def test_a_slave_the_policy_refuses_is_an_error(tmp_path):
    (tmp_path / "policy.toml").write_text('[slave.sales]\nallow = ["db1.%"]\nserver_ids = [7]\n')
    path = tmp_path / "topology.toml"
    path.write_text('[master]\npolicy = "policy.toml"\n[[slaves]]\nname = "x"\nserver_id = 8\nuser = "sales"\n')
    with pytest.raises(TopologyError, match="slave 'x'.*may not register server_id 8"):
        slave_gates(load_topology(path))
    path.write_text('[master]\npolicy = "policy.toml"\n[[slaves]]\nname = "x"\nserver_id = 7\nuser = "nobody"\n')
    with pytest.raises(TopologyError, match="no \\[default\\]"):
        slave_gates(load_topology(path))
    assert slave_gates(parse_topology('[[slaves]]\nname = "x"\nserver_id = 7\n')) == [None]


@pytest.mark.parametrize("policy", POLICIES)
def test_skipped_stretches_across_batch_edges_count_the_same(tmp_path, binlogs, monkeypatch, policy):
    """Segments of 1.5 KB and batches of 2 KB: skipped stretches cross batch edges, as a stretch
    longer than BATCH_SEGMENTS segments does on a large binlog. A stretch costs one heartbeat
    wherever the master cuts its batches (issue #57: on a 514 MB binlog experiment counted 8 to 10
    heartbeats fewer than the real streams carried, one per batch edge inside a stretch)."""
    from dumpfilter.master.read.segments import SegmentCache
    from dumpfilter.master.service import DumpService

    monkeypatch.setattr(DumpService, "reply_bytes", lambda self: 2_000)
    real_init = SegmentCache.__init__
    monkeypatch.setattr(SegmentCache, "__init__", lambda self, directory, **kw: real_init(
        self, directory, **{**kw, "segment_bytes": 1_500}))
    slaves = [("do1", "ops", ["replicate-do-db=db1"]), ("t1", "ops", ["replicate-do-table=db2.t1"])]
    path = _write(tmp_path, binlogs["row"], slaves, (policy,))
    topology = load_topology(path)
    streams = simulated(topology)
    assert_same(streams, experiment_rows([binlogs["row"]], topology.slaves, None, slave_gates(topology)))
    assert_same(streams, experiment_rows([binlogs["row"]], topology.slaves, 9_000, slave_gates(topology)))


@pytest.mark.parametrize("workload", ["row", "mixed", "mysql-row"])
def test_a_bounded_identity_is_counted_by_compiled_runs(tmp_path, binlogs, monkeypatch, workload):
    """A slave under a restricting master policy is counted by the core's runs, as the master sends
    it: only the units whose Annotate_rows texts the core cannot show reach a kept table go one at
    a time (`UnitList.annotations_unshown`), and its statement units go by key, each key's answer
    the rules' AND the gate's (`gated_key`), as the master's stream; before, every unit of such a
    slave went one at a time. (So do the control units and, for any slave, units kept in part: a
    fifth of the ROW workload's, whose transactions span databases.) Its counts are the real
    stream's."""
    from dumpfilter.codec import group_transactions, read_events
    from dumpfilter.topology import slave_gates
    from dumpfilter.spark_jobs.tasks import bandwidth

    slaves = [s for s in SLAVES if s[1] == "sales"]
    # (the MIXED workload is MySQL's: its units skipped under the placeholder or empty-transaction
    # policy are counted in their forms by the core too, skip_forms/mysql.rs; before, each went one
    # at a time for every slave)
    topology = load_topology(_write(tmp_path, binlogs[workload], slaves, POLICIES))
    units = sum(len(list(group_transactions(read_events(p.read_bytes()))))
                for p in sorted(binlogs[workload].glob("master-bin.0*")))
    per_unit = []
    real_unit = bandwidth._SlaveCounter.unit
    monkeypatch.setattr(bandwidth._SlaveCounter, "unit", lambda self, txn, k: per_unit.append(1) or real_unit(self, txn, k))
    rows = experiment_rows([binlogs[workload]], topology.slaves, None, slave_gates(topology))
    assert len(per_unit) < len(topology.slaves) * units / 3, (len(per_unit), units)
    monkeypatch.undo()
    assert_same(simulated(topology), rows)
