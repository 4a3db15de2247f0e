"""`experiment` equals `simulate`'s real gRPC streams on real binlogs over 500 MB (issue #57, done
when): the ROW and MIXED binlogs a MariaDB sandbox server writes for `make bench`
(bench.mixed_binlog), every skip policy, a master policy that bounds one identity, and a slave whose
rules keep nothing, so one skipped stretch runs across every batch and segment edge of the file.
Each binlog is over 500 MB, so this runs in `make bench` (DUMPFILTER_LARGE=1), not in CI: generating
the binlogs takes half an hour on two cores, streaming them 36 times a few minutes."""

from __future__ import annotations

import json
import os

import pytest

from tests.support.simulated import assert_same, experiment_rows, simulated

pytestmark = [pytest.mark.grpc, pytest.mark.mariadb, pytest.mark.timeout(3600),
              pytest.mark.skipif(os.environ.get("DUMPFILTER_LARGE") != "1",
                                 reason="binlogs over 500 MB: run by `make bench` (DUMPFILTER_LARGE=1)")]

POLICIES = ("heartbeat", "placeholder", "empty-transaction")
POLICY_FILE = '[slave.sales]\nallow = ["sbtest3.%"]\n\n[default]\nallow = ["%.%"]\n'
# (name, user, rules): a do-db slave, one that keeps nothing (the binlog is one
# skipped stretch), and an identity the master bounds to one schema, with rules of its own.
SLAVES = [
    ("do-db", "", ["replicate-do-db=sbtest1"]),
    ("nothing", "", ["replicate-do-db=absent"]),
    ("sales", "sales", ["replicate-wild-ignore-table=sbtest3.sbtest2"]),
]


def _topology(tmp_path, binlogs):
    (tmp_path / "policy.toml").write_text(POLICY_FILE)
    parts = [f'[master]\nbinlogs = "{binlogs}"\npolicy = "policy.toml"\n',
             "[experiment]\nmaster_vs_slave = false\nskip_policies = []\n"]
    server_id = 10
    for name, user, rules in SLAVES:
        for policy in POLICIES:
            server_id += 1
            parts.append(f'[[slaves]]\nname = "{name}/{policy}"\nserver_id = {server_id}\nuser = "{user}"\n'
                         f'skip_policy = "{policy}"\nrules = {json.dumps(rules)}\n')
    path = tmp_path / "topology.toml"
    path.write_text("\n".join(parts))
    return path


@pytest.mark.parametrize("fmt", ["ROW", "MIXED"])
def test_experiment_is_simulate_over_500_mb(tmp_path, fmt):
    from bench.mixed_binlog import mixed_binlog
    from dumpfilter.topology import load_topology, slave_gates

    binlog = mixed_binlog(500, fmt=fmt)
    assert binlog.stat().st_size > 500e6
    topology = load_topology(_topology(tmp_path, binlog.parent))
    streams = simulated(topology)
    gates = slave_gates(topology)
    # a chunk per file, as `--no-spark` counts, and 64 MB chunks, as Spark's tasks count
    for chunk_bytes in (None, 64 << 20):
        assert_same(streams, experiment_rows([binlog.parent], topology.slaves, chunk_bytes, gates))
    # the slave that keeps nothing got one skipped stretch over the whole file: what it was sent
    # is all framing, however many batches the master cut the stretch into
    assert streams["nothing/heartbeat"]["transactions_kept"] == 0
