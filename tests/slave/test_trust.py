"""Issue #27 item 3: one schema for master and slave. The master's decisions that read its schema
model reach the slave (DumpBatch.schema_decided), which keeps them without a --schema of its own;
any other event the slave's own rules drop is a disagreement: an error naming the statement and its
master position, or under --on-disagreement warn a counted warning (slave status, metrics). Real
gRPC master, real slave client, binlogs built event by event."""

from __future__ import annotations

from pathlib import Path

import pytest

from dumpfilter.binlogs import TailingReader
from dumpfilter.binlogs.files import write_index
from dumpfilter.rules.ruleset import RuleSet, Settings
from dumpfilter.rules.schema import SchemaModel
from dumpfilter.slave.node import Slave
from dumpfilter.slave.config import SlaveConfig
from dumpfilter.slave.metrics import registry_for
from dumpfilter.slave.status import status_fields
from dumpfilter.slave.trust import DisagreementError
from tests.rules.test_lint_cases import Build
from tests.support.filtering import events_of
from tests.oracles.slave import reference_receive

MARIADB = Settings(flavor="mariadb")
TABLES = ["CREATE TABLE t1 (a int)", "CREATE TABLE t2 (b int)", "CREATE TABLE audit (x int)"]
TRIGGER = "CREATE TRIGGER tr AFTER UPDATE ON t1 FOR EACH ROW INSERT INTO audit VALUES (NEW.a)"
# Updates t1 only; the trigger writes db.audit, which MariaDB counts (it checks after opening the
# tables): kept by replicate-do-table=db.audit, on a replica that knows the trigger.
U_TXN = "UPDATE t1 JOIN t2 ON t1.a = t2.b SET t1.a = 6"
U_LONE = "UPDATE t1 JOIN t2 ON t1.a = t2.b SET t1.a = 7"
AUDIT_ONLY = RuleSet(do_table=("db.audit",))


def _write(build: Build, directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = build.write(directory / "master-bin.000001")
    write_index(directory / "master-bin.index", [path.name])
    return path


def _updates(build: Build) -> Build:
    for i in range(3):
        build.q(f"INSERT INTO audit VALUES ({i})", db="db")
    build.q(U_TXN, db="db")  # GTID, the statement, COMMIT
    return build.q(U_LONE, db="db", ddl=True)  # GTID (standalone) and the statement: a lone unit


def _schema_case(directory: Path) -> tuple[Path, SchemaModel]:
    """The UPDATEs' binlog, and the master's --schema that holds the tables and the trigger."""
    schema = SchemaModel.from_sql("CREATE DATABASE db; USE db; " + "; ".join(TABLES) + ";\nDELIMITER ;;\n"
                                  + TRIGGER + ";;\nDELIMITER ;\n")
    return _write(_updates(Build("mariadb").q("CREATE DATABASE db")), directory), schema


def _relayed(relay_dir: Path) -> list[str]:
    return [e.sql for _, e in TailingReader(relay_dir) if e.is_query]


def _slave(address: str, relay: Path, rules: RuleSet, *, fast: bool = True, register_rules: RuleSet | None = None,
           **options) -> Slave:
    slave = _Registering(SlaveConfig(master=address, server_id=21, relay_dir=relay, rules=rules, settings=MARIADB,
                                     until_caught_up=True, connect_retry=0, **options), register_rules)
    if not fast:
        reference_receive(slave)
    return slave


class _Registering(Slave):
    """A slave whose master filters with other rules than its own check (`register_rules`): what a
    wrong master, or rules that differ between the two ends, look like from the slave."""

    def __init__(self, config, register_rules):
        super().__init__(config)
        self.register_rules = register_rules

    def register(self, stub):
        if self.register_rules is None:
            return super().register(stub)
        own, self.config.rules = self.config.rules, self.register_rules
        try:
            return super().register(stub)
        finally:
            self.config.rules = own


@pytest.mark.parametrize("fast", [True, False], ids=["bulk", "reference"])
def test_the_slave_keeps_what_the_master_decided_with_its_schema(tmp_path, master_factory, fast):
    """The issue's case: the trigger is in the master's --schema only. The slave, without a --schema,
    takes both UPDATEs for updates of t1 alone, which its rules skip; it keeps them all the same."""
    _, schema = _schema_case(tmp_path / "binlogs")
    master, address = master_factory(tmp_path / "binlogs", schema=schema)
    slave = _slave(address, tmp_path / "relay", AUDIT_ONLY, fast=fast)
    assert slave.run() == 0
    relayed = _relayed(tmp_path / "relay")
    assert U_TXN in relayed and U_LONE in relayed
    assert slave.counters.master_schema_kept == 2  # its own rules, without the trigger, drop both
    assert slave.counters.check_disagreements == 0
    fields = status_fields(tmp_path / "relay")
    assert (fields["Kept_By_Master_Schema"], fields["Check_Disagreements"]) == (2, 0)
    # the master counted them among the decisions that read its model (a pseudo rule hit, as
    # ASSUMED_DECISIONS): Stats and its metrics show it
    assert master.service.slaves[21].stats.rule_hits["SCHEMA_DECISIONS"] == 2  # once each, not per path


@pytest.mark.parametrize("fast", [True, False], ids=["bulk", "reference"])
def test_a_slave_that_never_saw_the_ddl_keeps_the_masters_drop_trigger(tmp_path, master_factory, fast):
    """Trigger knowledge from the binlog's own DDL, before the slave's start (a GTID start; a restarted
    slave's rule engine starts from nothing too): the master knows that this replica has trigger tr
    on db.t1 and keeps its DROP TRIGGER; the slave's rules, not knowing tr, judge it by its
    database and skip it."""
    build = Build("mariadb").q("CREATE DATABASE db").q("CREATE TABLE t1 (a int)", db="db").q(TRIGGER, db="db")
    start = f"0-1-{build.seq}"
    build.q("INSERT INTO t1 VALUES (1)", db="db").q("DROP TRIGGER tr", db="db")
    _write(build, tmp_path / "binlogs")
    _, address = master_factory(tmp_path / "binlogs")
    slave = _slave(address, tmp_path / "relay", RuleSet(do_table=("db.t1",)), fast=fast, start_gtid=start)
    assert slave.run() == 0
    relayed = _relayed(tmp_path / "relay")
    assert "DROP TRIGGER tr" in relayed and TRIGGER not in relayed
    assert (slave.counters.master_schema_kept, slave.counters.check_disagreements) == (1, 0)


def test_without_the_masters_marks_the_same_stream_is_a_disagreement(tmp_path, master_factory, monkeypatch):
    """The marks are what the slave honours: a master that does not send them (an older one) gets
    the error, naming the first UPDATE and its position, and nothing of that batch is committed."""
    from dumpfilter.master.stream import slave_stream as stream_module

    path, schema = _schema_case(tmp_path / "binlogs")
    monkeypatch.setattr(stream_module.SlaveStream, "_batch", _unmarked(stream_module.SlaveStream._batch))
    _, address = master_factory(tmp_path / "binlogs", schema=schema)
    slave = _slave(address, tmp_path / "relay", AUDIT_ONLY)
    with pytest.raises(DisagreementError) as caught:
        slave.run()
    at = next(e.pos for e in events_of(path.read_bytes()) if e.is_query and e.sql == U_TXN)
    message = str(caught.value)
    assert f"`{U_TXN}` (default database 'db') at master-bin.000001:{at} (GTID 0-1-" in message
    assert "--on-disagreement warn" in message
    assert slave.info.master_pos < at  # the batch that holds it was not committed
    fields = status_fields(tmp_path / "relay")
    assert fields["Last_IO_Errno"] == 1593 and U_TXN in fields["Last_IO_Error"]


def _unmarked(batch):
    def without_marks(self, caught_up, **kwargs):
        out = batch(self, caught_up, **kwargs)
        out.schema_decided = []
        return out
    return without_marks


def _db2_binlog(directory: Path) -> tuple[Path, list[str]]:
    """db1 and db2 statements, lone (DDL) and in transactions, and rows of both."""
    build = Build("mariadb").q("CREATE DATABASE db1").q("CREATE DATABASE db2")
    build.q("CREATE TABLE t (a int)", db="db1").q("CREATE TABLE t (a int)", db="db2")
    build.q("INSERT INTO t VALUES (1)", db="db1").q("INSERT INTO t VALUES (2)", db="db2")
    build.rows("db1", "t", 1).rows("db2", "t", 1)
    path = _write(build, directory)
    return path, ["CREATE DATABASE db2", "CREATE TABLE t (a int)", "INSERT INTO t VALUES (2)", "rows of db2.t"]


@pytest.mark.parametrize("fast", [True, False], ids=["bulk", "reference"])
def test_a_disagreement_stops_the_slave_with_the_statement_and_its_position(tmp_path, master_factory, fast):
    path, _ = _db2_binlog(tmp_path / "binlogs")
    _, address = master_factory(tmp_path / "binlogs")
    slave = _slave(address, tmp_path / "relay", RuleSet(do_db=("db1",)), fast=fast,
                   register_rules=RuleSet(do_db=("db1", "db2")))
    with pytest.raises(DisagreementError) as caught:
        slave.run()
    at = next(e.pos for e in events_of(path.read_bytes()) if e.is_query and e.sql == "CREATE DATABASE db2")
    assert f"the master sent `CREATE DATABASE db2` at master-bin.000001:{at} (GTID 0-1-2)" in str(caught.value)


@pytest.mark.parametrize("fast", [True, False], ids=["bulk", "reference"])
def test_under_warn_each_disagreement_is_relayed_counted_and_shown(tmp_path, master_factory, fast, capsys):
    path, _ = _db2_binlog(tmp_path / "binlogs")
    _, address = master_factory(tmp_path / "binlogs")
    slave = _slave(address, tmp_path / "relay", RuleSet(do_db=("db1",)), fast=fast,
                   register_rules=RuleSet(do_db=("db1", "db2")), on_disagreement="warn")
    assert slave.run() == 0
    # CREATE DATABASE db2, CREATE TABLE and INSERT in db2, the Table_map of db2.t: what the master sent
    relayed = _relayed(tmp_path / "relay")
    assert "CREATE DATABASE db2" in relayed and relayed.count("CREATE TABLE t (a int)") == 2
    assert slave.counters.check_disagreements == 4
    fields = status_fields(tmp_path / "relay")
    assert fields["Check_Disagreements"] == 4
    assert fields["Last_Check_Disagreement"].startswith("the master sent the rows of db2.t (its Table_map) at "
                                                        "master-bin.000001:")
    metrics = registry_for(slave)
    assert metrics.get_sample_value("dumpfilter_slave_check_disagreements_total", {"server_id": "21"}) == 4
    err = capsys.readouterr().err
    assert err.count("warning: the master sent") == 4
    insert = next(e.pos for e in events_of(path.read_bytes()) if e.is_query and e.sql == "INSERT INTO t VALUES (2)")
    assert f"`INSERT INTO t VALUES (2)` (default database 'db2') at master-bin.000001:{insert} " in err


def test_a_faithful_master_gives_no_disagreement(tmp_path, master_factory):
    _db2_binlog(tmp_path / "binlogs")
    _, address = master_factory(tmp_path / "binlogs")
    slave = _slave(address, tmp_path / "relay", RuleSet(do_db=("db1",)))
    assert slave.run() == 0
    assert (slave.counters.check_disagreements, slave.counters.master_schema_kept) == (0, 0)
    assert "CREATE DATABASE db2" not in _relayed(tmp_path / "relay")


@pytest.mark.parametrize("fast", [True, False], ids=["bulk", "reference"])
def test_database_rules_alone_check_without_replaying_ddl_into_a_schema_model(tmp_path, master_factory, fast):
    """Database rules alone (with rewrite-db too) answer by names, never by the schema model: the
    check replays none of the DDL it reads, and keeps all the master sends. A table rule's check
    reads the model, which the same stream then builds."""
    _db2_binlog(tmp_path / "binlogs")
    _, address = master_factory(tmp_path / "binlogs")
    rules = RuleSet(rewrite_db=(("db1", "copy1"),), do_db=("copy1",))
    slave = _slave(address, tmp_path / "relay", rules, fast=fast)
    assert slave.run() == 0
    assert (slave.counters.check_disagreements, slave.counters.rewritten > 0) == (0, True)
    assert slave.engine.schema.tables == {} and not slave.engine.schema.databases
    tables = _slave(address, tmp_path / "relay-tables", RuleSet(do_table=("db1.t",)), fast=fast)
    assert tables.run() == 0
    assert tables.counters.check_disagreements == 0 and ("db1", "t") in tables.engine.schema.tables


def test_slave_run_cli_serves_its_metrics(tmp_path, master_factory, capsys):
    """`slave run --metrics-port 0` prints where its metrics are; they show the check's counters."""
    import re
    import urllib.request

    from dumpfilter.cli.app import main

    path, schema = _schema_case(tmp_path / "binlogs")
    _, address = master_factory(tmp_path / "binlogs", schema=schema)
    code = main(["slave", "run", "--master", address, "--server-id", "22", "--relay-log-dir", str(tmp_path / "r"),
                 "--until-caught-up", "--lint-wait", "0", "--flavor", "mariadb", "--replicate-do-table", "db.audit",
                 "--metrics-port", "0"])
    assert code == 0
    err = capsys.readouterr().err
    port = int(re.search(r"metrics on 127\.0\.0\.1:(\d+)/metrics", err).group(1))
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    assert 'dumpfilter_slave_master_schema_kept_total{server_id="22"} 2.0' in text
    assert 'dumpfilter_slave_check_disagreements_total{server_id="22"} 0.0' in text


def test_after_a_live_change_filter_the_check_is_off_and_says_so(tmp_path, capsys):
    """A CHANGE REPLICATION FILTER on the master (DumpBatch.filter_changed_at) leaves the slave's copy
    of the rules stale: what the master's new rules send is relayed, with one note, never an error.
    The same batch without that field is a disagreement."""
    from dumpfilter.v1 import dump_pb2

    data = _db2_binlog(tmp_path / "binlogs")[0].read_bytes()
    position = dump_pb2.Position(file="master-bin.000001", pos=len(data))

    def receive(relay, **fields):
        slave = Slave(SlaveConfig(master="127.0.0.1:1", server_id=9, relay_dir=relay, rules=RuleSet(do_db=("db1",)),
                                  settings=MARIADB))
        slave._batch(dump_pb2.DumpBatch(events=data[4:], position=position, **fields))
        return slave

    with pytest.raises(DisagreementError, match="`CREATE DATABASE db2` at master-bin.000001:"):
        receive(tmp_path / "r1")
    slave = receive(tmp_path / "r2", filter_changed_at=dump_pb2.Position(file="master-bin.000001", pos=4))
    assert slave.counters.check_disagreements == 0
    slave.relay.close()
    assert "CREATE DATABASE db2" in _relayed(tmp_path / "r2")
    assert capsys.readouterr().err.count("is off for the rest of this run") == 1


def test_a_statement_inside_a_compressed_payload_is_marked_by_its_payload():
    """MySQL transaction compression: the statement's events carry no position of their own, so the
    master marks the Transaction_payload (its log_pos) and the slave judges the statement there."""
    import zstandard

    from dumpfilter.codec import EventType, TransactionGrouper
    from dumpfilter.codec import encode as enc
    from dumpfilter.codec.packing import encode_lenenc
    from dumpfilter.master.decide.flags import schema_marks
    from dumpfilter.rules.evaluate import RuleEngine
    from dumpfilter.slave.trust import MasterTrust

    fde = enc.format_description("8.0.36")
    fmt = fde.fmt
    plain_fmt = fmt.without_checksums()
    inner = [enc.build_event(EventType.QUERY, enc.query_body(sql, "db"), fmt=plain_fmt, log_pos=0)
             for sql in ("BEGIN", U_TXN, "COMMIT")]
    plain = b"".join(e.raw for e in inner)
    data = zstandard.ZstdCompressor().compress(plain)

    def field(kind, value):
        v = encode_lenenc(value)
        return bytes((kind,)) + encode_lenenc(len(v)) + v

    gtid = enc.build_event(EventType.GTID, enc.mysql_gtid_body("6ba0ff1e-4d0b-11ef-9f4b-0242ac110002", 1), fmt=fmt,
                           log_pos=1000)
    body = field(1, len(data)) + field(2, 0) + field(3, len(plain)) + b"\0" + data
    payload = enc.build_event(EventType.TRANSACTION_PAYLOAD, body, fmt=fmt)
    payload = payload.with_header(log_pos=1000 + payload.size)
    assert schema_marks("bin.000001", [gtid, payload], frozenset({(U_TXN, "db")})) == [("bin.000001", payload.log_pos)]
    assert schema_marks("bin.000001", [gtid, payload], frozenset({("other", "db")})) == []

    # The slave side: the events as a stream gives them (position = log_pos - size).
    from dumpfilter.codec.scanner import unit_events

    raw = gtid.raw + payload.raw
    events, _ = unit_events(raw, 0, fmt, stream_positions=True)
    grouper = TransactionGrouper()
    (unit,) = [u for e in events for u in grouper.push(e)] + list(grouper.flush())
    assert [e.type_code for e in unit.events] == [EventType.GTID, EventType.TRANSACTION_PAYLOAD]
    counters = type("C", (), {"master_schema_kept": 0, "check_disagreements": 0})()
    for marked, kept in ((True, 1), (False, 0)):
        trust = MasterTrust(RuleEngine(AUDIT_ONLY, MARIADB), "error", counters, print, print)
        trust.file = "bin.000001"
        trust.marks = {("bin.000001", payload.log_pos)} if marked else set()
        if marked:
            trust.unit(unit)
            assert counters.master_schema_kept == kept
        else:
            with pytest.raises(DisagreementError, match=f"bin.000001:{payload.log_pos - payload.size}"):
                trust.unit(unit)


def test_a_disagreement_after_placeholder_units_names_its_own_position(tmp_path, master_factory):
    """Under the placeholder policy a relay run also copies the placeholder units of skipped
    transactions (their framing): the lone statement the slave's check drops after them is found
    again by its own position, not a placeholder unit's."""
    build = Build("mariadb").q("CREATE DATABASE db1")
    build.rows("db3", "t", 1).rows("db3", "t", 2)  # skipped by the master: placeholder units
    build.q("CREATE DATABASE db2")                 # kept by the master, dropped by the slave's check
    path = _write(build, tmp_path / "binlogs")
    _, address = master_factory(tmp_path / "binlogs")
    slave = _slave(address, tmp_path / "relay", RuleSet(do_db=("db1",)), register_rules=RuleSet(do_db=("db1", "db2")),
                   skip_policy="placeholder")
    with pytest.raises(DisagreementError) as caught:
        slave.run()
    at = next(e.pos for e in events_of(path.read_bytes()) if e.is_query and e.sql == "CREATE DATABASE db2")
    assert f"the master sent `CREATE DATABASE db2` at master-bin.000001:{at} " in str(caught.value)
