"""Statement keys under WL#2516 effective semantics (`--filter-semantics effective`): a keyed
statement's decision (single-table INSERT, REPLACE, UPDATE, DELETE, INSERT ... SELECT) is a
function of its key there too: its effective object is the one table it changes (qualified by the
key's default database), DO/IGNORE and the binlog side's match that, REWRITE renames the key's
default database, and neither the trigger knowledge nor the schema model is read. So an effective
slave's statement units go by key in the master's stream, in the slave's relay run and in
`filter`, and what they write and count is what the same engine writes deciding each statement on
its own (keys disabled: `RuleEngine.keys_statements` off), on a real MariaDB MIXED binlog with a
trigger writing another database, cross-database statements, a DROP TRIGGER and a multi-table
UPDATE (whose decisions read the trigger knowledge and the schema model: never keyed), on the
shared real fixtures, and on generated binlogs against the master's reference path."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pytest

from dumpfilter.binlogs import TailingReader
from dumpfilter.cli.app import main
from dumpfilter.master.model import ChannelSpec, Registration
from dumpfilter.master.service import DumpService
from dumpfilter.rules.evaluate import RuleEngine
from dumpfilter.rules.ruleset import RuleSet, Settings
from dumpfilter.rules.transaction_filter import framing_statement
from dumpfilter.slave.node import Slave
from dumpfilter.workload.generator import FLAVORS, WorkloadSpec, generate
from tests.master.test_policy_gate_walk import PASSWORD, SYSBENCH, USER, _batches, _binlog_dir, _policy
from tests.master.test_statement_keys_stream import _same
from tests.oracles.master import reference_service
from tests.support.dump_helpers import relay_units, run_slave

EFFECTIVE = Settings(semantics="effective")


def _keys_off(monkeypatch) -> None:
    """The per-statement way: the same engines, every statement decided on its own."""
    monkeypatch.setattr(RuleEngine, "keys_statements", property(lambda self: False))
    monkeypatch.setattr(RuleEngine, "keys_statements_if_pure", property(lambda self: False))


# --------------------------------------------------------------------------- generated, reference path
GENERATED_RULES = [
    RuleSet(do_db=("db1",)),                                          # DO db1.%, IGNORE %.% (cross-db decides)
    RuleSet(effective_do=("db2.t1", "db3.%"), effective_ignore=("%.%",)),
    RuleSet(ignore_db=("db3",), wild_ignore_table=("db1.t2%",)),
    RuleSet(effective_do=("db1.%",), effective_ignore=("%.%",), effective_rewrite=(("db1.%", "x1.%"),)),
    RuleSet(binlog_effective_ignore=("db2.%",)),
]


@pytest.mark.parametrize("flavor", FLAVORS)
def test_effective_streams_answer_statement_units_by_key(tmp_path, flavor):
    """Effective-semantics slaves on a MIXED binlog with cross-database and INSERT ... SELECT
    statements: the master's streams send the reference path's batches, stats and P_S counters
    (every unit through TransactionFilter), with the statement units answered by key (before:
    none, every one decided per statement in Python)."""
    generate(WorkloadSpec(seed=4, schemas=4, tables_per_schema=2, transactions=300, binlog_format="mixed",
                          flavor=flavor, cross_db_share=0.3, insert_select_share=0.25), tmp_path)
    regs = [Registration(server_id=i + 1, filters=(ChannelSpec(None, rules),), settings=EFFECTIVE)
            for i, rules in enumerate(GENERATED_RULES)]
    counts = _same(tmp_path, regs, segment_bytes=20_000)
    for sid, c in counts.items():
        assert c.key_units > 0, f"server_id {sid}: no unit answered by key"
        assert c.keys_decided < c.key_units
        if flavor == "mariadb":
            assert c.python_units * 10 < c.key_units, (sid, c)


# --------------------------------------------------------------------------- a real MariaDB's MIXED binlog
def _workload(rounds: int) -> list[tuple[str, list[str]]]:
    """(default database, statements) per session: sysbench-like single-table DML on sbtest1,
    a trigger on sbtest1.t writing audit.log (another database), cross-database statements both
    ways, INSERT ... SELECT, a multi-table UPDATE, a DROP and a CREATE TRIGGER halfway."""
    setup = ("", ["CREATE DATABASE sbtest1", "CREATE DATABASE other", "CREATE DATABASE audit",
                  "CREATE TABLE sbtest1.t (id INT PRIMARY KEY, k INT) ENGINE=InnoDB",
                  "CREATE TABLE sbtest1.t2 (id INT PRIMARY KEY, k INT) ENGINE=InnoDB",
                  "CREATE TABLE other.u (id INT PRIMARY KEY, k INT) ENGINE=InnoDB",
                  "CREATE TABLE audit.log (id INT, k INT) ENGINE=InnoDB",
                  "CREATE TRIGGER sbtest1.t_ai AFTER INSERT ON sbtest1.t FOR EACH ROW "
                  "INSERT INTO audit.log VALUES (NEW.id, NEW.k)"])
    sessions = [setup]
    for i in range(rounds):
        sessions.append(("sbtest1", ["BEGIN", f"INSERT INTO t VALUES ({i}, {i})",
                                     f"UPDATE t2 SET k = k + 1 WHERE id = {i % 7}",
                                     f"REPLACE INTO t2 VALUES ({i % 7}, {i})", "COMMIT"]))
        sessions.append(("other", [f"INSERT INTO sbtest1.t2 VALUES ({1000 + i}, {i})",  # cross-db: sbtest1's
                                   f"INSERT INTO u VALUES ({i}, {i})"]))
        sessions.append(("sbtest1", [f"UPDATE other.u SET k = k + 1 WHERE id = {i}",     # cross-db: other's
                                     f"DELETE FROM t2 WHERE id = {1000 + i}"]))
        sessions.append(("audit", [f"DELETE FROM log WHERE id = {i - 5}",
                                   f"INSERT INTO other.u SELECT id + 5000, k FROM sbtest1.t WHERE id = {i}"]))
        if i == rounds // 2:
            sessions.append(("sbtest1", ["DROP TRIGGER t_ai",
                                         "UPDATE t JOIN other.u USING (id) SET t.k = other.u.k",
                                         "CREATE TRIGGER t_ai AFTER INSERT ON t FOR EACH ROW "
                                         "INSERT INTO other.u VALUES (NEW.id + 9000, NEW.k)"]))
    return sessions


@pytest.fixture(scope="module")
def mixed_binlog(mariadb_factory, tmp_path_factory) -> Path:
    """A binlog directory a real MariaDB wrote in MIXED format for `_workload`."""
    server = mariadb_factory("effkeys-mixed", binlog_format="MIXED")
    for db, statements in _workload(150):
        server.execute(statements, db=db or None)
    server.flush_logs()
    directory = tmp_path_factory.mktemp("effective-mixed")
    for path in server.binlog_files():
        shutil.copyfile(path, directory / path.name)
    server.stop()
    return directory


EFFECTIVE_RULES = [
    ["--replicate-do-db", "sbtest1"],
    ["--change-replication-filter", "CHANGE MASTER TO DO='sbtest1.t%', IGNORE='%.%'"],  # WL#2516's form
    ["--change-replication-filter", "CHANGE REPLICATION FILTER REPLICATE_IGNORE_DB = (audit)"],
    ["--replicate-wild-do-table", "sbtest1.t%", "--replicate-wild-do-table", "audit.%"],
]
SLAVE_RULES = [RuleSet(do_db=("sbtest1",)), RuleSet(ignore_db=("audit",)),
               RuleSet(wild_do_table=("sbtest1.t%", "audit.%"))]


def _p_s(master, sid: int) -> list[tuple]:
    """The master's replication_applier_filters rows for `sid` (not when each became active)."""
    return [(r["FILTER_NAME"], r["FILTER_RULE"], r["COUNTER"]) for r in master.service.list_filters(sid)[0]]


def _stream(address: str, relay: Path, sid: int, rules: RuleSet, monkeypatch) -> tuple:
    by_python = []
    real = Slave._event
    monkeypatch.setattr(Slave, "_event", lambda self, event, grouper: by_python.append(event) or real(
        self, event, grouper))
    slave = run_slave(address, relay, sid, rules=rules, settings=EFFECTIVE)
    monkeypatch.setattr(Slave, "_event", real)
    statements = [e for e in by_python if e.is_query and not framing_statement(e.sql or "")
                  and e.sql.split(None, 1)[0].upper() in ("INSERT", "UPDATE", "DELETE", "REPLACE")]
    return slave, statements


@pytest.mark.mariadb
@pytest.mark.parametrize("n", range(len(SLAVE_RULES)))
def test_effective_slave_over_grpc_by_key_writes_the_per_statement_relay_log(mixed_binlog, master_factory,
                                                                             tmp_path, monkeypatch, n):
    """A real gRPC master and an effective-semantics slave on a real MariaDB MIXED binlog: the
    master's stream answers its statement units by key and the slave's relay run writes them by
    key (fewer than a tenth of the keyed statements through the per-event way, before: all of
    them), and the relay log, the slave's counters, the master's P_S counters and the stream's
    stats are those of the same engines deciding each statement on its own."""
    rules = SLAVE_RULES[n]
    master, address = master_factory(mixed_binlog)
    slave, per_event = _stream(address, tmp_path / "keys", 41, rules, monkeypatch)
    assert master.service.slaves[41].stats.rule_hits, "WL#2516 DO/IGNORE hits counted in the stream's stats"
    keyed = master.service.slaves[41].statement_path
    assert keyed is not None and keyed.key_units > 0
    assert keyed.python_units * 10 < keyed.key_units, keyed
    keeps = slave._keep_table
    assert keeps.keys_enabled and keeps.statements > 100
    assert len(per_event) * 10 < keeps.statements, (len(per_event), keeps.statements)
    by_key = (relay_units(tmp_path / "keys"), dict(slave.counters.__dict__), _p_s(master, 41),
              master.service.slaves[41].stats)

    _keys_off(monkeypatch)
    master2, address2 = master_factory(mixed_binlog)
    slave2, _ = _stream(address2, tmp_path / "each", 41, rules, monkeypatch)
    assert master2.service.slaves[41].statement_path.key_units == 0
    each = (relay_units(tmp_path / "each"), dict(slave2.counters.__dict__), _p_s(master2, 41),
            master2.service.slaves[41].stats)
    assert by_key[0] == each[0], "relay logs differ"
    assert by_key[1] == each[1], "slave counters differ"
    assert by_key[2] == each[2], "P_S counters differ"
    assert by_key[3] == each[3], "stream stats differ"
    assert (slave.engine.counters, slave.engine.assumed) == (slave2.engine.counters, slave2.engine.assumed)
    if n == 0:
        # The cross-database statements went by their effective object, not the USE database.
        texts = [e.sql for _, e in TailingReader(tmp_path / "keys") if e.is_query]
        assert any(t.startswith("INSERT INTO sbtest1.t2") for t in texts)
        assert not any(t.startswith("UPDATE other.u") for t in texts)


# --------------------------------------------------------------------------- `filter`
def _filter(inputs: list[Path], out: Path, options: list[str], capsys, monkeypatch) -> tuple:
    """`filter --filter-semantics effective OPTIONS`: (output bytes, --json summary, each rule
    engine's rule hits, assumed and unparsed counts, statements decided in Python)."""
    engines: list[RuleEngine] = []
    asked = []
    init, decide = RuleEngine.__init__, RuleEngine.decide_statement
    with monkeypatch.context() as m:
        m.setattr(RuleEngine, "__init__", lambda self, *a, **k: engines.append(self) or init(self, *a, **k))
        m.setattr(RuleEngine, "decide_statement", lambda self, *a, **k: asked.append(1) or decide(self, *a, **k))
        assert main(["filter", *map(str, inputs), "-o", str(out), "--filter-semantics", "effective", *options,
                     "--json", "--summary", "none"]) == 0
    summary = json.loads(capsys.readouterr().out)
    for name in ("seconds", "output_files"):
        summary.pop(name)
    counts = [(dict(e.counters), e.assumed, e.unparsed) for e in engines]
    return out.read_bytes(), summary, counts, len(asked)


def _same_filter(inputs: list[Path], tmp_path: Path, options: list[str], capsys, monkeypatch) -> tuple[int, int]:
    """The output, summary and rule-hit counts by key and per statement; (statements decided in
    Python by key, per statement)."""
    by_key = _filter(inputs, tmp_path / "keys.bin", options, capsys, monkeypatch)
    with monkeypatch.context() as m:
        _keys_off(m)
        each = _filter(inputs, tmp_path / "each.bin", options, capsys, monkeypatch)
    assert by_key[0] == each[0], f"{options}: outputs differ"
    assert by_key[1] == each[1], f"{options}: summaries differ"
    assert by_key[2] == each[2], f"{options}: rule hits differ"
    return by_key[3], each[3]


@pytest.mark.mariadb
@pytest.mark.parametrize("options", EFFECTIVE_RULES)
def test_filter_effective_by_key_writes_the_per_statement_output(mixed_binlog, tmp_path, capsys, monkeypatch,
                                                                  options):
    """`filter` on the real MariaDB MIXED binlog (a trigger on a kept table writing another
    database, cross-database statements, DROP/CREATE TRIGGER, a multi-table UPDATE)."""
    first = min(p for p in mixed_binlog.iterdir() if p.name[-6:].isdigit())  # the workload's file
    keyed, each = _same_filter([first], tmp_path, options, capsys, monkeypatch)
    assert each > 1000 and keyed * 10 < each, (keyed, each)


FIXTURE_OPTIONS = [["--replicate-do-db", "sbtest-repl"], ["--replicate-wild-ignore-table", "sbtest-repl.sbtest1%"],
                   ["--replicate-do-db", "test"],
                   ["--change-replication-filter", "CHANGE MASTER TO DO='sbtest-repl.sbtest2', IGNORE='%.%'"],
                   ["--change-replication-filter", "CHANGE MASTER TO REWRITE=sbtest-repl.%->copy.%", "--no-rewrite-db"]]


@pytest.mark.fixtures
@pytest.mark.parametrize("options", FIXTURE_OPTIONS)
def test_filter_effective_on_real_statement_fixtures(shared_fixtures, tmp_path, capsys, monkeypatch, options):
    """The shared real binlogs MariaDB 11.8 wrote in STATEMENT format (sysbench on
    `sbtest-repl`) and MySQL 5.6's mixed one: the same output by key as per statement, and the
    MariaDB ones' statements answered by key."""
    for name in ("mariadb-repl-bin.000005", "mariadb-repl-bin.000007", "ver_trunk_row_v2.001"):
        path = next(shared_fixtures.rglob(name))
        data = gzip.open(path).read() if path.suffix == ".gz" else path.read_bytes()
        work = tmp_path / name
        work.mkdir()
        (work / name).write_bytes(data)
        keyed, each = _same_filter([work / name], work, options, capsys, monkeypatch)
        if name.startswith("mariadb-repl-bin"):
            assert each > 200 and keyed * 10 < each, (name, keyed, each)


@pytest.mark.fixtures
@pytest.mark.parametrize("allow", [("%.%",), ("sbtest-repl.sbtest1",)])
@pytest.mark.parametrize("rules", [RuleSet(do_db=("sbtest-repl",)),
                                   RuleSet(effective_do=("sbtest-repl.sbtest2",), effective_ignore=("%.%",))])
def test_effective_gated_keys_send_and_count_as_the_reference_path(shared_fixtures, tmp_path, allow, rules):
    """An effective slave under a master policy gate (its key answers ANDed with the gate's, as a
    standard slave's): the batches, stats and P_S counters of the reference path on the real
    sysbench STATEMENT fixtures, with the statement units answered by key."""
    directory = _binlog_dir(shared_fixtures, tmp_path, SYSBENCH)
    policy = _policy(*allow)
    reg = Registration(server_id=5, user=USER, password=PASSWORD, filters=(ChannelSpec(None, rules),),
                       settings=EFFECTIVE)
    svc = DumpService(directory, policy=policy)
    assert _batches(svc, reg) == _batches(reference_service(directory, policy=policy), reg)
    counts = svc.slaves[reg.server_id].statement_path
    assert counts.key_units > 0 and counts.python_units * 10 < counts.key_units, counts
