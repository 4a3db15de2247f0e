"""`simulate` with slaves of kind = "mariadb": besides its gRPC streams, each such slave gets a real
MariaDB replica on the master's MySQL endpoint; the report says how it ended. A replica that lint
says no break for catches up, having been sent exactly the bytes the slave's own gRPC stream got
(same rules, same policy, same binlog); one lint says breaks stops with the error lint predicted."""

from __future__ import annotations

import dataclasses

import pytest

from dumpfilter.lab.simulate.simulate import load_default_topology, run_simulation
from dumpfilter.topology import MasterSource, SlaveSpec

pytestmark = [pytest.mark.mariadb, pytest.mark.timeout(600)]


def test_real_replicas_in_a_simulation(tmp_path):
    topology = load_default_topology()
    # the default slaves (whose rules break a real replica on this workload, as lint says) and one
    # with no rules, which must catch up
    slaves = tuple(dataclasses.replace(s, kind="mariadb") for s in topology.slaves) + (
        SlaveSpec("everything-real", 99, kind="mariadb"),)
    topology = dataclasses.replace(topology, slaves=slaves, source=MasterSource("mariadb", options={"transactions": 200}))
    result = run_simulation(topology, tmp_path / "out", verify=True, mariadb=True, progress=False)
    assert result.ok, [v.differences for v in result.verifications]
    rows = result.report["slaves"]
    assert len(rows) == len(slaves)
    caught_up = 0
    for row in rows:
        outcome = row["real_replica"]
        assert outcome is not None, row["slave"]
        if row["lint"]["breaks"] == 0:
            assert outcome["caught_up"], (row["slave"], outcome)
            assert outcome["tables"] > 0 and outcome["rows"] > 0
            assert outcome["bytes_sent"] == row["master_bytes_sent"]  # the same filtered stream as over gRPC
            caught_up += 1
        else:
            assert not outcome["caught_up"] and outcome["errno"] == row["lint"]["first"]["errno"], (row, outcome)
    assert caught_up >= 1
