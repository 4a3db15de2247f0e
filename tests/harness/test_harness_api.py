"""dumpfilter.harness used as a harness author would (public names only): masters on chosen and
free ports, slaves from each rule syntax, in the foreground and the background, what they
received, lint, explain, simulate with a pinned port."""

from __future__ import annotations

import socket

import pytest

from dumpfilter.harness import (
    SKIP_POLICIES,
    DumpFilterError,
    Master,
    Rules,
    Slave,
    explain,
    explain_binlog,
    generate_binlog,
    lint,
    simulate,
)
from dumpfilter.lab.ports import free_port

pytestmark = pytest.mark.grpc


@pytest.fixture(scope="module")
def binlog(tmp_path_factory):
    directory = tmp_path_factory.mktemp("harness-binlog")
    generate_binlog(directory, transactions=200, schemas=3)
    return directory


def listen_on(port: int) -> socket.socket:
    """A listening socket on `port`, as a server binds it (SO_REUSEADDR: connections the stopped
    master closed may linger in TIME_WAIT on the port; a listener may not)."""
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", port))
    s.listen()
    return s


def test_a_master_on_a_chosen_port_reports_it_and_frees_it(binlog):
    port = free_port()
    with Master(binlog, listen=f"127.0.0.1:{port}") as master:
        assert (master.port, master.address) == (port, f"127.0.0.1:{port}")
        with pytest.raises(DumpFilterError, match="cannot listen"):
            Master(binlog, listen=f"127.0.0.1:{port}").start()
    assert not master.running
    listen_on(port).close()  # stopped: a server can listen there again


def test_the_three_rule_syntaxes_make_the_same_rules():
    by_option = Rules(["replicate-do-db=db1", "replicate-wild-ignore-table=db1.tmp%"])
    by_mycnf = Rules.from_mycnf("[mysqld]\nport = 3307\nreplicate_do_db = db1\n"
                                "replicate-wild-ignore-table = db1.tmp%\n")
    by_change = Rules.from_change("CHANGE REPLICATION FILTER REPLICATE_DO_DB = (db1), "
                                  "REPLICATE_WILD_IGNORE_TABLE = ('db1.tmp%')")
    assert by_option.lines == by_mycnf.lines == by_change.lines == \
        ["replicate-do-db=db1", "replicate-wild-ignore-table=db1.tmp%"]
    with pytest.raises(DumpFilterError, match="not of the form"):
        Rules(["replicate-do-db"])
    with pytest.raises(DumpFilterError):
        Rules.from_change("CHANGE REPLICATION FILTER REPLICATE_DO_TABEL = (db1.t)")


def test_a_slave_catches_up_and_says_what_it_received(binlog):
    with Master(binlog) as master, Slave(master, Rules.from_mycnf("[mysqld]\nreplicate-do-db=db1\n"),
                                         skip_policy=SKIP_POLICIES[1]) as only_db1, \
            master.slave() as everything:
        kept = only_db1.catch_up(timeout=120)
        full = everything.catch_up(timeout=120)
        end = master.binlog_end()
        assert (only_db1.position.file, only_db1.position.pos) == (end.file, end.pos)
        assert only_db1.position.gtid  # a MariaDB binlog: the GTID state there
        assert 0 < kept.relayed_bytes < full.relayed_bytes
        assert kept.transactions_skipped > 0 and full.transactions_skipped == 0
        assert kept.placeholders > 0 and kept.rule_hits
        txns = list(only_db1.relay_log.transactions())
        tables = {f"{e.db}.{e.table}" for t in txns for e in t.events if e.table}
        assert tables and all(name.startswith("db1.") for name in tables)
        assert only_db1.relay_log.paths and sum(1 for _ in only_db1.relay_log.events()) >= len(txns)
        relay = only_db1.relay_dir
    assert not relay.exists()  # the temporary relay directory went with the slave


def test_a_background_slave_follows_and_stops(binlog, tmp_path):
    with Master(binlog) as master:
        slave = Slave(master, ["replicate-ignore-db=db2"], relay_dir=tmp_path / "relay", heartbeat_period=0.2)
        slave.start()
        try:
            received = slave.wait_caught_up(timeout=120)
            assert slave.running and received.bytes > 0
        finally:
            slave.stop()
        assert not slave.running and slave.error is None
        assert slave.position.pos == master.binlog_end().pos
    assert (tmp_path / "relay").is_dir()  # a relay directory of the caller's stays


def test_a_slave_of_no_master_fails_with_a_dumpfilter_error(tmp_path):
    slave = Slave(f"127.0.0.1:{free_port()}", connect_timeout=0.5, relay_dir=tmp_path / "r")
    with pytest.raises(DumpFilterError):
        slave.catch_up(timeout=60)


def test_lint_and_explain(binlog):
    assert lint(binlog, ["replicate-do-db=db1"]).ok
    decision = explain(["replicate-do-db=db1"], sql="UPDATE db1.t1 SET v = 1", current_db="db2")
    assert not decision.apply and decision.rule == "replicate-do-db"
    assert explain(["replicate-do-db=db1"], table="db1.t1").apply
    outcomes = {t.outcome for t in explain_binlog(binlog, ["replicate-do-db=db1"])}
    assert {"kept", "control", "skipped"} <= outcomes and "emptied" not in outcomes
    first = next(t for t in explain_binlog(binlog, ["replicate-do-db=db1"]) if t.decisions)
    assert first.decisions[0].subject.startswith(("statement: ", "table: "))


def test_explain_binlog_names_the_decisions_inside_a_compressed_payload(shared_fixtures):
    """MySQL 8's Transaction_payload (zstd): its Table_map is decided, and named, at the payload's
    position (its events have none of their own), whatever the outcome."""
    path = shared_fixtures / "osheroff-mysql-binlog-connector-java" / "mysql-bin.compressed"
    for rules, apply, outcome in ((["replicate-ignore-db=zzz"], True, "kept"), (["replicate-do-db=zzz"], False, "skipped")):
        (txn,) = [t for t in explain_binlog(path, rules) if t.outcome != "control"]
        assert txn.outcome == outcome
        assert [(d.subject.split(": ")[0], d.decision.apply) for d in txn.decisions] == [("table", apply)]
        assert txn.decisions[0].pos > txn.pos


def test_lint_names_where_a_replica_stops(tmp_path):
    # STATEMENT format: do-db tests the default database, so cross-database statements break
    generate_binlog(tmp_path, transactions=300, schemas=3, binlog_format="statement", seed=3)
    result = lint(tmp_path, ["replicate-do-db=db1"])
    assert not result.ok and result.first is result.breaks[0]
    assert result.first.errno and result.first.file.startswith("master-bin.")


TOPOLOGY = """
[master.workload]
transactions = 200
schemas = 2
[experiment]
skip_policies = ["heartbeat"]
[[slaves]]
name = "only-db1"
server_id = 2
rules = ["replicate-do-db=db1"]
"""


def test_simulate_on_a_pinned_port(tmp_path):
    port = free_port()
    result = simulate(TOPOLOGY, listen=f"127.0.0.1:{port}", verify=True, out=tmp_path / "out")
    assert result.ok and result.slave("only-db1").verified
    row = result.slave("only-db1")
    assert 0 < row.bytes_sent < row.bytes_all and row.lint_breaks == 0
    assert any(p.name == "report.json" for p in result.paths)
    with listen_on(port):  # the port is really the one asked for: taken, the run says so
        with pytest.raises(DumpFilterError, match=f"cannot listen on 127.0.0.1:{port}"):
            simulate(TOPOLOGY, listen=f"127.0.0.1:{port}")


def test_a_master_with_a_policy_file(binlog, tmp_path):
    policy = tmp_path / "policy.toml"
    policy.write_text('[slave.analytics]\npassword = "s3cret"\nserver_ids = [21]\nallow = ["db1.%"]\n')
    with Master(binlog, policy=policy) as master:
        with Slave(master, user="analytics", password="s3cret", server_id=21) as allowed:
            allowed.catch_up(timeout=120)
            tables = {e.db for t in allowed.relay_log.transactions() for e in t.events if e.table}
            assert tables == {"db1"}  # no rules, but the policy lets only db1 leave the master
        with Slave(master, user="analytics", password="wrong", server_id=21, connect_timeout=5) as refused:
            with pytest.raises(DumpFilterError):
                refused.catch_up(timeout=60)
