"""Issue #27 item 4: the replica's starting schema is not the master's. `--replica-schema` (a dump
file or a server URL; in a topology `replica_schema`; in Register `replica_schema`) starts lint's
replica side, the master's `--schema` its primary side and the rule engine. One model for
`lint`, `verify`, `simulate`'s lint column and lint at Register (binlogs.lint.new_linter). The
real replica that pre-created its database: tests/rules/test_lint_real_replica.py."""

from __future__ import annotations

import io
import json
import time

import grpc
import pytest

from dumpfilter.binlogs.lint import new_linter
from dumpfilter.cli.app import main
from dumpfilter.codec import BinlogReader, group_transactions
from dumpfilter.errors import InvalidArgumentError
from dumpfilter.rules.parse import StartupFilters
from dumpfilter.rules.ruleset import Settings
from dumpfilter.rules.schema import SchemaModel, load_schema
from dumpfilter.topology import TopologyError, parse_topology
from dumpfilter.v1 import dump_pb2, dump_pb2_grpc
from dumpfilter.wire import schema_from_proto, schema_to_proto
from tests.oracles.lint import feed_all
from tests.rules.test_lint_cases import Build, _same_through_the_scan

WILD = ["replicate-wild-do-table=d.t%"]  # skips CREATE DATABASE d ('d.' matches no pattern), keeps d.t1


def _shop() -> Build:
    return Build("mariadb").q("CREATE DATABASE d").q("CREATE TABLE t1 (id INT)", db="d") \
        .q("INSERT INTO t1 VALUES (1)", db="d")


def lint(build: Build, options, *, schema=None, replica=None, flavor="mariadb"):
    rules = StartupFilters.from_options([tuple(o.split("=", 1)) for o in options]).for_channel("")
    linter = new_linter(rules, Settings(flavor=flavor), schema, replica)
    units = group_transactions(BinlogReader(io.BytesIO(build.bytes()), "bin.000001"))
    breaks = feed_all(linter, (("bin.000001", t) for t in units))
    _same_through_the_scan(build, breaks, lambda: new_linter(rules, Settings(flavor=flavor), schema, replica))
    return [(b.errno, b.cause.rule if b.cause else None) for b in breaks]


def test_a_replica_that_has_the_database_applies_what_creates_tables_in_it():
    assert lint(_shop(), WILD)[0] == (1049, "replicate-wild-do-table")
    assert lint(_shop(), WILD, replica=SchemaModel.from_sql("CREATE DATABASE d;")) == []
    # The master's schema alone (it had no database d) predicts the break as before.
    assert lint(_shop(), WILD, schema=SchemaModel.from_sql("CREATE DATABASE other;"))[0][0] == 1049
    # A replica schema read from a server holds its tables too: a table in d says d is there.
    replica = SchemaModel.from_tables(set(), {("d", "old"): ("id",)}, "a server")
    assert lint(_shop(), WILD, replica=replica) == []


def test_a_kept_create_of_what_the_replica_already_has_breaks_it():
    """The primary ran CREATE DATABASE d, so it had none; a replica that made d itself stops (1007,
    both flavors). A kept CREATE TABLE of a table it made: 1050 on MySQL, none on MariaDB
    (slave_ddl_exec_mode=IDEMPOTENT)."""
    replica = SchemaModel.from_sql("CREATE DATABASE d;")
    assert lint(_shop(), ["replicate-wild-do-table=d.%"], replica=replica)[0] == (1007, "--replica-schema")
    assert lint(_shop(), ["replicate-wild-do-table=d.%"]) == []
    has_t1 = SchemaModel.from_sql("CREATE DATABASE d; CREATE TABLE d.t1 (id INT);")
    build = Build("mysql").q("CREATE TABLE t1 (id INT)", db="d")
    master = SchemaModel.from_sql("CREATE DATABASE d;")
    assert lint(build, [], schema=master, replica=has_t1, flavor="mysql") == [(1050, "--replica-schema")]
    assert lint(build, [], schema=master, replica=has_t1, flavor="mariadb") == []
    assert lint(build, [], schema=master, flavor="mysql") == []


def test_what_the_replica_lacks_is_absent_and_says_which_schema():
    master = SchemaModel.from_sql("CREATE DATABASE a; CREATE TABLE a.t (id INT, v INT);")
    build = Build("mariadb").q("INSERT INTO t VALUES (1, 2)", db="a")
    assert lint(build, [], schema=master) == []
    replica = SchemaModel.from_sql("CREATE DATABASE a;")
    assert lint(build, [], schema=master, replica=replica) == [(1146, "--replica-schema")]


def test_lint_cli_takes_the_replica_schema_file(tmp_path, capsys):
    path = _shop().write(tmp_path / "bin.000001")
    (tmp_path / "replica.sql").write_text("CREATE DATABASE d;\n")
    assert main(["lint", str(path), "--replicate-wild-do-table=d.t%"]) == 1
    capsys.readouterr()
    assert main(["lint", str(path), "--replicate-wild-do-table=d.t%", "--replica-schema",
                 str(tmp_path / "replica.sql")]) == 0
    assert capsys.readouterr().out.strip() == "no break predicted"
    assert main(["lint", str(path), "--replica-schema", str(tmp_path / "missing.sql")]) == 2
    assert "--replica-schema" in capsys.readouterr().err


def test_the_schema_travels_in_register_and_a_bad_one_is_refused_by_field():
    model = SchemaModel.from_sql("CREATE DATABASE d; CREATE DATABASE e; CREATE TABLE d.t (A int, b int);")
    back = schema_from_proto(schema_to_proto(model))
    assert back.databases == {"d", "e"} and back.tables == {("d", "t"): ("a", "b")}
    for bad, field in ((dump_pb2.ReplicaSchema(databases=["x" * 65]), "replica_schema.databases[0]"),
                       (dump_pb2.ReplicaSchema(tables=[dump_pb2.SchemaTable(db="d", name="")]),
                        "replica_schema.tables[0].name"),
                       (dump_pb2.ReplicaSchema(tables=[dump_pb2.SchemaTable(db="d", name="t", columns=["a\0"])]),
                        "replica_schema.tables[0].columns[0]")):
        with pytest.raises(InvalidArgumentError, match=field.replace("[", r"\[").replace("]", r"\]")):
            schema_from_proto(bad)


def _stats_lint(stub, server_id):
    deadline = time.monotonic() + 60
    while True:
        mine = stub.Stats(dump_pb2.StatsRequest(server_id=server_id), timeout=10).slaves[0]
        if mine.lint_state != "pending" or time.monotonic() > deadline:
            return mine.lint_state, list(mine.lint_warnings)
        time.sleep(0.05)


@pytest.mark.grpc
def test_lint_at_register_uses_the_slaves_own_schema(tmp_path, master_factory):
    binlogs = tmp_path / "binlogs"
    binlogs.mkdir()
    _shop().write(binlogs / "master-bin.000001")
    (binlogs / "master-bin.index").write_text("./master-bin.000001\n")
    _, address = master_factory(binlogs)
    rule = dump_pb2.FilterRule(type=dump_pb2.REPLICATE_WILD_DO_TABLE, value="d.t%")
    filters = [dump_pb2.ChannelFilters(rules=dump_pb2.RuleList(rules=[rule]))]
    with grpc.insecure_channel(address) as channel:
        stub = dump_pb2_grpc.DumpFilterStub(channel)
        stub.Register(dump_pb2.RegisterRequest(server_id=5, filters=filters, flavor="mariadb"), timeout=30)
        state, warnings = _stats_lint(stub, 5)
        assert state == "done" and "error 1049" in warnings[0]
        own = schema_to_proto(SchemaModel.from_sql("CREATE DATABASE d;"))
        stub.Register(dump_pb2.RegisterRequest(server_id=6, filters=filters, flavor="mariadb", replica_schema=own),
                      timeout=30)
        assert _stats_lint(stub, 6) == ("done", [])  # its own job: the key holds the replica's schema
        bad = dump_pb2.ReplicaSchema(databases=[""])
        with pytest.raises(grpc.RpcError) as caught:
            stub.Register(dump_pb2.RegisterRequest(server_id=7, filters=filters, replica_schema=bad), timeout=30)
        assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "replica_schema.databases[0]" in caught.value.details()


def test_topology_replica_schema_key(tmp_path):
    (tmp_path / "replica.sql").write_text("CREATE DATABASE d;\n")
    text = '[[slaves]]\nname = "r"\nserver_id = 2\nreplica_schema = "replica.sql"\n'
    (tmp_path / "t.toml").write_text(text)
    spec = parse_topology(text, str(tmp_path / "t.toml")).slaves[0]
    assert spec.replica_schema == str(tmp_path / "replica.sql")
    assert load_schema(spec.replica_schema, "replica_schema").databases == {"d"}
    url = parse_topology(text.replace('"replica.sql"', '"mysql://root@127.0.0.1:1/"')).slaves[0]
    assert url.replica_schema == "mysql://root@127.0.0.1:1/"
    with pytest.raises(TopologyError, match=r"t.toml:4: slaves.replica_schema: .*missing.sql is not a file"):
        parse_topology(text.replace("replica.sql", "missing.sql"), str(tmp_path / "t.toml"))
    with pytest.raises(TopologyError, match=r"slaves.replica_schema: must be the path"):
        parse_topology(text.replace('"replica.sql"', "3"), str(tmp_path / "t.toml"))


def test_lint_json_names_the_replica_schema_as_the_cause(tmp_path, capsys):
    path = Build("mariadb").q("INSERT INTO t VALUES (1)", db="a").write(tmp_path / "bin.000001")
    (tmp_path / "replica.sql").write_text("CREATE DATABASE a;\n")
    assert main(["lint", str(path), "--replica-schema", str(tmp_path / "replica.sql"), "--json"]) == 1
    (found,) = json.loads(capsys.readouterr().out)["breaks"]
    assert found["errno"] == 1146 and found["cause"]["rule"] == "--replica-schema"
    assert found["cause"]["reason"] == "table 'a.t' is not in the replica's starting schema"


def test_a_break_inside_a_compressed_transaction_is_at_its_transaction_payload(shared_fixtures):
    """MySQL 8's Transaction_payload (binlog_transaction_compression) holds a Table_map whose table the
    replica lacks: the break's event position is the payload event's own (236, what `mysqlbinlog
    --start-position` and SHOW BINLOG EVENTS name), not the Table_map's offset inside the
    decompressed buffer (76), which no tool can start at."""
    path = shared_fixtures / "osheroff-mysql-binlog-connector-java" / "mysql-bin.compressed"
    rules = StartupFilters.from_options([]).for_channel("")
    linter = new_linter(rules, Settings(flavor="mysql"), None, SchemaModel.from_sql("CREATE DATABASE demo;"))
    units = group_transactions(BinlogReader(io.BytesIO(path.read_bytes()), "mysql-bin.compressed"))
    breaks = feed_all(linter, (("mysql-bin.compressed", t) for t in units))
    assert [(b.errno, b.pos, b.event_pos) for b in breaks] == [(1146, 157, 236)]
