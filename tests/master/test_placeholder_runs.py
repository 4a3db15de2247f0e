"""Placeholder runs on the gRPC wire (DumpRequest.placeholder_runs): a slave that asks for them is
sent each run of placeholders as one placeholder that counts them, and ends with the same relay
log, the same positions batch by batch and the same counts as a slave sent every placeholder;
only its wire bytes differ. The master's Stats stay what a replica is sent. (Stretches, which hold
no placeholders at all, are tests/master/test_skip_stretches.py's.)"""

from __future__ import annotations

import grpc
import pytest

from dumpfilter.master.model import ChannelSpec, Registration
from dumpfilter.rules.ruleset import RuleSet
from dumpfilter.skip_policy import is_placeholder
from dumpfilter.v1 import dump_pb2, dump_pb2_grpc
from dumpfilter.workload.generator import WorkloadSpec, generate

from tests.support.dump_helpers import relay_units, run_slave, split_events

pytestmark = [pytest.mark.grpc, pytest.mark.timeout(180)]

# Row units, statement units (MIXED: each framed by BEGIN and COMMIT/XID), and MySQL's (whose
# GTID's transaction_length counts the placeholders a replica is sent), with DDL among them.
WORKLOADS = {
    "mariadb-row": dict(seed=7, transactions=900, max_binlog_size=120_000),
    "mariadb-mixed": dict(seed=8, transactions=900, binlog_format="mixed", ddl_share=0.05, max_binlog_size=120_000),
    "mysql-row": dict(seed=9, transactions=900, flavor="mysql", ddl_share=0.05, max_binlog_size=120_000),
}
RULES = [RuleSet(do_db=("db1",)), RuleSet(ignore_table=("db2.t1",), wild_ignore_table=("db3.%",))]

COUNTS = ("events_received", "bytes_received", "placeholders", "heartbeats", "events_relayed", "bytes_relayed")


@pytest.fixture(scope="module", params=sorted(WORKLOADS))
def binlogs(request, tmp_path_factory):
    directory = tmp_path_factory.mktemp(request.param)
    generate(WorkloadSpec(**WORKLOADS[request.param]), directory)
    return directory


@pytest.mark.parametrize("rules", RULES, ids=["do-db", "ignore-tables"])
def test_a_slave_sent_runs_ends_as_one_sent_every_placeholder(binlogs, master_factory, tmp_path, rules):
    master, address = master_factory(binlogs)
    slaves = {}
    for server_id, runs in ((21, False), (22, True)):
        slaves[runs] = run_slave(address, tmp_path / str(runs), server_id, rules=rules, skip_policy="placeholder",
                                 placeholder_runs=runs, skip_stretches=False, relay_log_size=200_000)
    each, runs = slaves[False].counters, slaves[True].counters
    assert relay_units(tmp_path / "True") == relay_units(tmp_path / "False")
    assert {c: getattr(runs, c) for c in COUNTS} == {c: getattr(each, c) for c in COUNTS}
    assert each.placeholders > 0 and each.wire_bytes == each.bytes_received
    assert runs.wire_bytes < each.wire_bytes  # (every workload has skipped units of several events)
    stats = master.service.slaves
    assert stats[22].stats.bytes_sent == stats[21].stats.bytes_sent == each.bytes_received
    assert stats[22].stats.placeholders == stats[21].stats.placeholders == each.placeholders


def _batches(address: str, server_id: int, runs: bool) -> list[tuple[tuple[str, int], int, int, int]]:
    """Each batch of a placeholder stream from the start: its position, and its events, bytes and
    placeholders as a replica is sent them (each run counted as its placeholders)."""
    with grpc.insecure_channel(address) as channel:
        stub = dump_pb2_grpc.DumpFilterStub(channel)
        out, fmt = [], None
        request = dump_pb2.DumpRequest(server_id=server_id, heartbeat_period=0.2, placeholder_runs=runs)
        request.position.file, request.position.pos = "", 4
        for batch in stub.Dump(request, timeout=60):
            events, fmt = split_events(batch.events, fmt)
            holes = [e for e in events if is_placeholder(e)]
            stood = [e.rand_seeds[0] - 1 for e in holes if e.rand_seeds[1] == 0]  # runs: (length, 0)
            size = holes[0].size if holes else 0
            out.append(((batch.position.file, batch.position.pos), len(events) + sum(stood),
                        len(batch.events) + sum(stood) * size, len(holes) + sum(stood)))
            if batch.caught_up:
                return out
    raise AssertionError("the stream ended before it caught up")


def test_runs_cut_batches_where_every_placeholder_would(binlogs, master_factory):
    """The walk counts a run as its placeholders when it fills a batch: the same cuts, so the
    positions a slave records (and `experiment`'s counting walk) do not depend on the wire."""
    master, address = master_factory(binlogs, batch_bytes=4096)
    for server_id in (31, 32):
        master.service.register(Registration(server_id, skip_policy="placeholder",
                                             filters=(ChannelSpec(None, RuleSet(do_db=("db1",))),)))
    each, runs = _batches(address, 31, False), _batches(address, 32, True)
    assert len(each) > 3
    assert runs == each
