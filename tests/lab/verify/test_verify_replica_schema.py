"""#27.4 through `dumpfilter verify`: a slave whose topology names a `replica_schema` (a database it
created itself) gets it on its servers instead of the seed, and lint predicts from it. Under
replicate-wild-do-table=d.t%, the skipped CREATE DATABASE d breaks the slave that starts as the
master did (1049, its real reference replica and dumpfilter target alike, as lint says) and not
the one that had d already (caught up, as lint says)."""

from __future__ import annotations

import pytest

from dumpfilter.lab.verify import IDENTICAL, Verification
from dumpfilter.topology import parse_topology

pytestmark = [pytest.mark.mariadb, pytest.mark.timeout(240)]

TOPOLOGY = """
[[slaves]]
name = "own-database"
server_id = 41
flavor = "mariadb"
rules = ["replicate-wild-do-table=d.t%"]
replica_schema = "replica.sql"

[[slaves]]
name = "empty"
server_id = 42
flavor = "mariadb"
rules = ["replicate-wild-do-table=d.t%"]
"""
WORKLOAD = """
CREATE DATABASE d;
USE d;
CREATE TABLE t1 (id INT PRIMARY KEY);
INSERT INTO t1 VALUES (1), (2);
"""


def test_verify_a_slave_that_pre_created_its_database(tmp_path):
    (tmp_path / "replica.sql").write_text("CREATE DATABASE d;\n")
    topology = parse_topology(TOPOLOGY, str(tmp_path / "topology.toml"))
    result = Verification(topology, WORKLOAD, binlog_format="STATEMENT").run()
    pairs = {p.slave: p for p in result.pairs}
    own, empty = pairs["own-database"], pairs["empty"]
    assert result.passed, {p.slave: p.differences for p in result.pairs}
    assert own.verdict == empty.verdict == IDENTICAL
    assert own.reference.caught_up and own.dumpfilter.caught_up and own.lint.caught_up
    assert {t.table: t.reference_rows for t in own.tables} == {"d.t1": 2}
    assert (empty.reference.errno, empty.dumpfilter.errno, empty.lint.errno) == (1049, 1049, 1049)
    assert empty.reference.same_stop(empty.lint)
