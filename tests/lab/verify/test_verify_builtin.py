"""`dumpfilter verify` against real MariaDB servers: the built-in sharp-edge verification passes under
ROW, STATEMENT and MIXED, and a deliberately non-equivalent setup fails, naming the table and rows."""

from __future__ import annotations

import json

import pytest

from dumpfilter.cli.app import main
from dumpfilter.topology import parse_topology
from dumpfilter.lab.verify import DIFFERENT, IDENTICAL, NO_REFERENCE, Verification, builtin_paths
from dumpfilter.lab.ports import free_port

pytestmark = [pytest.mark.mariadb, pytest.mark.timeout(240)]


@pytest.mark.parametrize("binlog_format", ["ROW", "STATEMENT", "MIXED"])
def test_builtin_verification_passes(binlog_format):
    topology_path, workload_path, seed_path = builtin_paths()
    topology = parse_topology(topology_path.read_text(), "builtin")
    result = Verification(topology, workload_path.read_text(), seed=seed_path.read_text(),
                          binlog_format=binlog_format).run()
    problems = {p.slave: p.differences for p in result.pairs if p.verdict == DIFFERENT}
    assert result.passed, problems
    by_name = {p.slave: p for p in result.pairs}
    assert by_name["effective"].verdict == NO_REFERENCE and not by_name["effective"].passed
    compared = [p for p in result.pairs if p.verdict == IDENTICAL]
    assert len(compared) == len(topology.slaves) - 1
    for pair in compared:
        assert pair.tables and all(t.content_equal and t.definition_equal for t in pair.tables)
    # The comparison is not vacuous: the filters really differ from one another, some replicas
    # really stopped on a trap (and dumpfilter stopped in the same transaction), most did not.
    assert len({tuple((t.table, t.reference_rows) for t in p.tables) for p in compared}) >= 6
    stopped = [p for p in compared if not p.reference.caught_up]
    assert stopped and all(p.reference.gtid and p.reference.gtid == p.dumpfilter.gtid for p in stopped)
    assert len(stopped) <= len(compared) // 2
    # lint, from the primary's binlog alone, predicted each real replica: same stop (errno, GTID) or none.
    assert all(p.lint is not None and p.reference.same_stop(p.lint) for p in compared)
    # The skipped-ALTER trap (workload 2.4) breaks statements (1136), not row events.
    skip_alter = by_name["skip-alter"].reference
    assert (skip_alter.caught_up, skip_alter.errno) == ((True, 0) if binlog_format == "ROW" else (False, 1136))
    # The master really filtered: every slave with rules got fewer bytes than it would without.
    assert all(p.master_stats.get("bytes_skipped", 0) > 0 for p in compared if p.slave != "all")


WORKLOAD = """
USE a;
INSERT INTO t1 VALUES (10, 'ten'), (11, 'eleven');
INSERT INTO t2 VALUES (20, 'twenty');
UPDATE t1 SET v = 'one, updated' WHERE id = 1;
"""
SEED = """
CREATE DATABASE a;
CREATE TABLE a.t1 (id INT PRIMARY KEY, v VARCHAR(40));
CREATE TABLE a.t2 (id INT PRIMARY KEY, v VARCHAR(40));
INSERT INTO a.t1 VALUES (1, 'one');
"""
TOPOLOGY = """
[[slaves]]
name = "skip-t2"
server_id = 31
flavor = "mariadb"
rules = ["replicate-ignore-table=a.t2"]
"""


def test_non_equivalent_setup_fails_and_names_the_rows(tmp_path, capsys, monkeypatch):
    """The master filters with ignore-table=a.t1 while the reference replica ignores a.t2: the
    dumpfilter slave made with other rules than the topology's."""
    from dumpfilter.rules.parse import StartupFilters
    from dumpfilter.slave import config

    made = config.SlaveConfig
    other = StartupFilters.from_options([("replicate-ignore-table", "a.t1")]).for_channel("")
    monkeypatch.setattr(config, "SlaveConfig", lambda **options: made(**{**options, "rules": other}))
    (tmp_path / "topology.toml").write_text(TOPOLOGY)
    (tmp_path / "workload.sql").write_text(WORKLOAD)
    (tmp_path / "seed.sql").write_text(SEED)
    out = tmp_path / "verdict.json"
    status = main(["verify", "--topology", str(tmp_path / "topology.toml"), "--workload",
                   str(tmp_path / "workload.sql"), "--seed", str(tmp_path / "seed.sql"), "--binlog-format",
                   "STATEMENT", "--json", str(out), "--quiet"])
    assert status == 1
    report = json.loads(out.read_text())
    assert report["passed"] is False
    (pair,) = report["runs"][0]["pairs"]
    assert pair["verdict"] == DIFFERENT
    text = "\n".join(pair["differences"])
    # a.t1: the replica has the workload's rows, the dumpfilter side only the seed's.
    assert "table a.t1: content differs (row count verify-skip-t2-replica=3 verify-skip-t2-dumpfilter=1)" in text
    assert "row only on verify-skip-t2-replica: (id=10, v='ten')" in text
    assert "row (id=1) differs" in text and "'one, updated' -> 'one'" in text
    # a.t2: the other way round.
    assert "row only on verify-skip-t2-dumpfilter: (id=20, v='twenty')" in text
    tables = {t["table"]: t for t in pair["tables"]}
    assert not tables["a.t1"]["content_equal"] and not tables["a.t2"]["content_equal"]
    printed = capsys.readouterr().out
    assert "DIFFERENT" in printed and "FAIL" in printed and "a.t1" in printed


def test_equivalent_setup_passes_through_the_cli(tmp_path, capsys):
    """The same small setup with the topology's rules passes (exit 0), so the test above fails for its cause.
    `--json` alone: the verdicts on stdout instead of the table (the test above has --json FILE)."""
    (tmp_path / "topology.toml").write_text(TOPOLOGY)
    (tmp_path / "workload.sql").write_text(WORKLOAD)
    (tmp_path / "seed.sql").write_text(SEED)
    status = main(["verify", "--topology", str(tmp_path / "topology.toml"), "--workload",
                   str(tmp_path / "workload.sql"), "--seed", str(tmp_path / "seed.sql"), "--json", "--quiet"])
    assert status == 0
    (pair,) = json.loads(capsys.readouterr().out)["runs"][0]["pairs"]
    assert pair["verdict"] == IDENTICAL
    assert {t["table"]: t["reference_rows"] for t in pair["tables"]} == {"a.t1": 3, "a.t2": 0}


def test_the_master_listens_where_it_is_told(tmp_path, capsys):
    """Issue #82: verify's master and its MySQL endpoint took free ports of their own (a harness on a
    shared host could not give them). `--listen` and `--mysql-listen` pin them; the progress lines
    name the ports bound, and a real replica streams from the pinned endpoint."""
    (tmp_path / "topology.toml").write_text(TOPOLOGY.replace('flavor = "mariadb"', 'flavor = "mariadb"\nkind = "mariadb"'))
    (tmp_path / "workload.sql").write_text(WORKLOAD)
    (tmp_path / "seed.sql").write_text(SEED)
    grpc_port, mysql_port = free_port(), free_port()
    status = main(["verify", "--topology", str(tmp_path / "topology.toml"), "--workload",
                   str(tmp_path / "workload.sql"), "--seed", str(tmp_path / "seed.sql"), "--json",
                   "--listen", f"127.0.0.1:{grpc_port}", "--mysql-listen", f"127.0.0.1:{mysql_port}"])
    captured = capsys.readouterr()
    assert status == 0, captured.err
    assert f"verify: dumpfilter master on 127.0.0.1:{grpc_port} (gRPC)" in captured.err.splitlines(), captured.err
    assert f"on the master's MySQL endpoint (port {mysql_port})" in captured.err, captured.err
    (pair,) = json.loads(captured.out)["runs"][0]["pairs"]
    assert pair["verdict"] == IDENTICAL
