"""Issue #58 goal 3: `master serve --replicas` maps a real replica by its `user` when its entry has no
`server_id`, as docs/operating.md says ("its server_id, or, failing that, its user"). Such an entry
was refused (`slaves.server_id: missing`). A real MariaDB replica connecting as that user gets the
entry's rules; a replica connecting as another user gets none; an entry named by a user that
another entry names too is refused in one line (it could never be told apart)."""

from __future__ import annotations

import pytest

from dumpfilter.cli.app import main
from dumpfilter.lab.sandbox import make_replica, wait_caught_up
from dumpfilter.master.endpoint import MysqlEndpoint, ReplicaMap
from dumpfilter.master.serve.grpc_server import create_server
from dumpfilter.topology import TopologyError, parse_topology

from tests.support.mysql_replicas import point_at, wait_applied

pytestmark = [pytest.mark.mariadb, pytest.mark.timeout(180)]

BY_USER = ('[[slaves]]\nname = "reporting"\nuser = "repl_reporting"\nflavor = "mariadb"\n'
           'rules = ["replicate-ignore-db=s2"]\n'
           '[[slaves]]\nname = "archive"\nserver_id = 52\nflavor = "mariadb"\nrules = ["replicate-do-db=s2"]\n')


def test_an_entry_without_server_id_is_read_by_user():
    replicas = parse_topology(BY_USER, "replicas.toml", by_user=True)
    assert [(s.name, s.server_id, s.user) for s in replicas.slaves] == [
        ("reporting", 0, "repl_reporting"), ("archive", 52, "")]
    with pytest.raises(TopologyError, match=r"slaves\.server_id: missing for slave 'reporting'"):
        parse_topology(BY_USER, "t.toml")  # experiment and simulate still need server_ids


def test_a_user_named_twice_cannot_name_a_replica_alone(tmp_path, capsys):
    twice = BY_USER + '[[slaves]]\nname = "other"\nserver_id = 53\nuser = "repl_reporting"\n'
    with pytest.raises(TopologyError, match=r"slaves\.user 'repl_reporting' is also slave #3's"):
        parse_topology(twice, "replicas.toml", by_user=True)
    (tmp_path / "replicas.toml").write_text(twice)
    (tmp_path / "bin").mkdir()
    code = main(["master", "serve", "--binlog-dir", str(tmp_path / "bin"), "--listen", "127.0.0.1:0",
                 "--mysql-listen", "127.0.0.1:0", "--replicas", str(tmp_path / "replicas.toml")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "repl_reporting" in err[0], err


def test_a_real_replica_gets_the_rules_of_its_user(mariadb_factory, tmp_path):
    primary = mariadb_factory("primary-by-user")
    by_user = mariadb_factory("real-by-user", server_id=51, log_bin=False)
    unnamed = mariadb_factory("real-unnamed", server_id=54, log_bin=False)
    reference = mariadb_factory("reference-by-user", log_bin=False, options=["--replicate-ignore-db=s2"])
    primary.execute(["CREATE DATABASE s1", "CREATE DATABASE s2"])
    for db in ("s1", "s2"):  # under USE: ignore-db judges DDL by the default database
        primary.execute(["CREATE TABLE t (id INT PRIMARY KEY)", "INSERT INTO t VALUES (1)"], db=db)
    make_replica(primary, reference)
    (tmp_path / "replicas.toml").write_text(BY_USER)
    master, _port = create_server(primary.binlog_dir, "127.0.0.1:0")
    endpoint = MysqlEndpoint(master.service, "127.0.0.1:0", replicas=ReplicaMap.load(tmp_path / "replicas.toml"))
    try:
        point_at(by_user, endpoint.port, gtid=True, user="repl_reporting")
        point_at(unnamed, endpoint.port, gtid=True, user="repl_other")
        wait_applied(by_user, service=master.service, server_id=51)
        wait_applied(unnamed, service=master.service, server_id=54)
        assert wait_caught_up(primary, reference, timeout=30).caught_up
        # The user's entry: s2 ignored, as the reference replica filtering itself does.
        assert by_user.query("SHOW DATABASES LIKE 's2'") == reference.query("SHOW DATABASES LIKE 's2'") == []
        assert by_user.query("SELECT id FROM s1.t") == [{"id": 1}]
        rows, _global = master.service.list_filters(51)
        assert {(r["FILTER_NAME"], r["FILTER_RULE"]) for r in rows} >= {("REPLICATE_IGNORE_DB", "s2")}
        # A user named nowhere: no rules, everything.
        assert unnamed.query("SELECT id FROM s2.t") == [{"id": 1}]
    finally:
        endpoint.stop()
        master.stop(grace=1.0)
