"""`verify` with slaves of kind = "mariadb": three sides per slave, a real replica filtering for
itself (the reference), dumpfilter's own slave, and a real MariaDB replica on the master's MySQL
endpoint (CHANGE MASTER TO, GTID) fed the stream the master filtered with the slave's rules. On
the sharp-edge workload, traps included, all three end alike: same data, or the same stop (error
and GTID)."""

from __future__ import annotations

import dataclasses

import pytest

from dumpfilter.topology import parse_topology
from dumpfilter.lab.verify import IDENTICAL, Verification, builtin_paths

pytestmark = [pytest.mark.mariadb, pytest.mark.timeout(300)]

SLAVES = ("all", "do-db", "ignore-table", "db-and-wild", "skip-alter")


@pytest.mark.parametrize("binlog_format", ["ROW", "STATEMENT"])
def test_real_replicas_on_the_endpoint_match_their_references(binlog_format):
    topology_path, workload_path, seed_path = builtin_paths()
    topology = parse_topology(topology_path.read_text(), "builtin")
    slaves = tuple(dataclasses.replace(s, kind="mariadb") for s in topology.slaves if s.name in SLAVES)
    topology = dataclasses.replace(topology, slaves=slaves)
    result = Verification(topology, workload_path.read_text(), seed=seed_path.read_text(),
                          binlog_format=binlog_format, timeout=90).run()
    problems = {p.slave: p.differences for p in result.pairs if p.verdict != IDENTICAL}
    assert result.passed, problems
    assert len(result.pairs) == len(SLAVES)
    for pair in result.pairs:
        assert any("real MariaDB replica" in note for note in pair.notes)
        assert pair.real_replica is not None and pair.reference.same_stop(pair.real_replica)
        assert pair.tables and all(t.content_equal and t.definition_equal for t in pair.tables)
    stopped = [p for p in result.pairs if not p.reference.caught_up]
    # The traps stop some real replicas; the endpoint-fed replica stops in the same transaction.
    assert stopped and all(p.reference.gtid and p.reference.gtid == p.dumpfilter.gtid == p.real_replica.gtid
                           and p.reference.errno == p.dumpfilter.errno == p.real_replica.errno for p in stopped)
    assert all(p.master_stats.get("bytes_skipped", 0) > 0 for p in result.pairs if p.slave != "all")
