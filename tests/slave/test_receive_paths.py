"""The slave's bulk receive (the compiled relay run, lone MariaDB statements written from their
bytes) against its reference path (every unit's Events through TransactionGrouper and the
slave's own TransactionFilter: tests/oracles/slave.py): the same relay log bytes, relay-log.info
positions and counters, and the same schema model in the slave's rule engine afterwards. The
batches are whole binlogs, unfiltered, with Heartbeats between units as a master sends them, so
the slave's own rules disagree with much of what comes (DDL of other databases, tables it
ignores): what a faithful master never sends is where the two paths could part."""

from __future__ import annotations

import gzip
import random
from pathlib import Path

import pytest

from dumpfilter import _core
from dumpfilter.codec.constants import EventType
from dumpfilter.codec.scanner import Scanner
from dumpfilter.rules.ruleset import RuleSet
from dumpfilter.slave.node import Slave
from dumpfilter.slave.config import SlaveConfig
from dumpfilter.slave.info_file import read_info
from dumpfilter.v1 import dump_pb2
from dumpfilter.workload.generator import WorkloadSpec, generate
from tests.oracles.slave import reference_receive

RULES = [RuleSet(), RuleSet(do_db=("db1",)), RuleSet(ignore_db=("db2",)), RuleSet(wild_ignore_table=("db3.t1%",)),
         RuleSet(do_db=("db1", "db3"), rewrite_db=(("db1", "x1"),))]


def batches(data: bytes, name: str, rng: random.Random) -> list:
    """DumpBatches of a binlog file: its whole units from the FDE on, cut at unit boundaries into
    batches of 1 to 40 units, Heartbeats (for the position they stand at) before a third of them."""
    scanner = Scanner("<test>")
    scan = scanner.units(data, 4, 0, at_eof=True)
    crc = scanner.checksum_len == 4
    units = [rec for rec in scan.units if rec.complete]
    out, parts, count = [], [], rng.randint(1, 40)
    for n, rec in enumerate(units):
        if n and rng.random() < 0.33:
            parts.append(_core.heartbeat(name, rec.start, 1, crc))
        parts.append(data[rec.start : rec.end])
        count -= 1
        if count == 0 or n == len(units) - 1:
            out.append(dump_pb2.DumpBatch(events=b"".join(parts), position=dump_pb2.Position(file=name, pos=rec.end)))
            parts, count = [], rng.randint(1, 40)
    return out


def receive(relay: Path, rules: RuleSet, fast: bool, stream: list) -> dict:
    slave = Slave(SlaveConfig(master="127.0.0.1:1", server_id=9, relay_dir=relay, rules=rules,
                              relay_log_size=400_000, on_disagreement="warn"))
    if not fast:
        reference_receive(slave)
    for batch in stream:
        slave._batch(batch)
    slave.relay.close()
    files = {p.name: p.read_bytes() for p in sorted(relay.iterdir()) if p.name.startswith("relay-bin")}
    info = read_info(relay)
    info.pop("committed_at")  # when it was committed: the paths' texts differ by it alone
    schema = slave.engine.schema
    model = (sorted(schema.databases), sorted(schema.tables.items()) if schema is not None else None) \
        if schema is not None else None
    return {"files": files, "info": info, "counters": dict(slave.counters.__dict__), "units": slave.units_written,
            "schema": model}


def assert_same(tmp_path: Path, data: bytes, name: str, seed: int) -> None:
    stream = batches(data, name, random.Random(seed))
    assert stream
    for n, rules in enumerate(RULES):
        fast = receive(tmp_path / f"fast{seed}-{n}", rules, True, stream)
        slow = receive(tmp_path / f"slow{seed}-{n}", rules, False, stream)
        assert fast == slow, (name, rules)


@pytest.mark.parametrize("flavor", ["mariadb", "mysql"])
@pytest.mark.parametrize("fmt", ["row", "mixed", "statement"])
def test_generated_binlogs(tmp_path, flavor, fmt):
    paths = generate(WorkloadSpec(seed=11, transactions=1500, binlog_format=fmt, flavor=flavor, ddl_share=0.08,
                                  max_binlog_size=150_000), tmp_path / "binlog")
    for seed, path in enumerate(paths[:3]):
        assert_same(tmp_path, path.read_bytes(), path.name, seed)


@pytest.mark.fixtures
def test_real_fixture_binlogs(tmp_path, shared_fixtures):
    checked = 0
    for seed, path in enumerate(sorted(p for p in shared_fixtures.rglob("*") if p.is_file() and p.name != "MANIFEST.md")):
        data = gzip.open(path).read() if path.suffix == ".gz" else path.read_bytes()
        scanner = Scanner("<test>")
        if scanner.units(data, 4, 0, at_eof=True).error is not None:
            continue  # a malformed fixture: the slave stops on it either way (tests/master covers the error)
        assert_same(tmp_path, data, path.name, seed)
        checked += 1
    assert checked >= 5


@pytest.mark.parametrize("fmt", ["mixed", "statement"])
def test_statement_units_are_relayed_by_key(tmp_path, fmt):
    """A statement-logged stream the slave's rules keep is written by the compiled statement run
    (issue #43): its statements answered per key (each key decided once), none through the
    slave's TransactionFilter, and the relay log is the reference path's."""
    from dumpfilter.rules.transaction_filter import TransactionFilter

    paths = generate(WorkloadSpec(seed=5, transactions=400, binlog_format=fmt, flavor="mariadb", ddl_share=0.0,
                                  max_binlog_size=1 << 30), tmp_path / "binlog")
    stream = batches(paths[0].read_bytes(), paths[0].name, random.Random(1))
    relay = tmp_path / "fast"
    slave = Slave(SlaveConfig(master="127.0.0.1:1", server_id=9, relay_dir=relay, rules=RuleSet(),
                              relay_log_size=400_000, on_disagreement="warn"))
    calls = []
    original = TransactionFilter.filter
    try:
        TransactionFilter.filter = lambda self, txn: calls.append(txn) or original(self, txn)
        for batch in stream:
            slave._batch(batch)
    finally:
        TransactionFilter.filter = original
    slave.relay.close()
    keeps = slave._keep_table
    assert keeps.keys_enabled
    assert keeps.statements > 200 and keeps.keys_decided < keeps.statements
    assert not [t for t in calls if any(e.is_query and e.sql.startswith(("INSERT", "UPDATE", "DELETE"))
                                        for e in t.events)], "a statement unit went through TransactionFilter"
    assert receive(tmp_path / "fast2", RuleSet(), True, stream) == receive(tmp_path / "slow", RuleSet(), False, stream)


def test_placeholder_units_are_relayed_by_the_run(workload_dir, master_factory, tmp_path, monkeypatch):
    """The placeholder policy's unit for a skipped one (its GTID, RAND placeholders, its XID) is
    written as its framing by the compiled relay run, not event by event in Python (issue #57:
    a placeholder stream's slave spent 47 s on a 1 GB binlog the master sent in 2 s); the relay
    log is what the per-event way writes (test_dump_stream's expected units)."""
    from tests.master.test_dump_stream import expected_units
    from tests.support.dump_helpers import relay_units, run_slave

    by_python = []
    real = Slave._event
    monkeypatch.setattr(Slave, "_event", lambda self, event, grouper: by_python.append(event) or real(
        self, event, grouper))
    _, address = master_factory(workload_dir)
    rules = RuleSet(do_db=("db1",))
    slave = run_slave(address, tmp_path / "relay", 31, rules=rules, skip_policy="placeholder")
    # None goes the per-event way. Before, every placeholder did; until the scanner kept a fast
    # unit's shape through placeholders (core scan::F_HOLES), so did every row unit kept in part,
    # its kept rows read event by event; until the run wrote a skipped DDL's empty transaction (a
    # GTID and one placeholder: no XID frames it), so did each of those (the DDL-heavy binlog's
    # placeholder stream ran at 0.30x the heartbeat stream's).
    assert slave.counters.placeholders > 1000
    assert [e for e in by_python if e.type_code == 13] == []
    assert not [e for e in by_python if e.is_rows or e.type_code == EventType.TABLE_MAP]
    assert relay_units(tmp_path / "relay") == expected_units(workload_dir, rules, "placeholder")


def test_mysql_placeholder_units_are_relayed_by_the_run(master_factory, tmp_path, monkeypatch):
    """A MySQL unit the placeholder policy sent for a skipped one (its GTID, BEGIN, RAND
    placeholders and XID; a skipped DDL's GTID and one placeholder) is relayed by the compiled
    relay run: without its placeholders, its GTID's transaction_length counting what is left, a
    lone GTID as an empty transaction. Before, each went event by event through
    `Slave._without_placeholders`: a 202 MB MySQL ROW binlog's placeholder stream took 30.6 s
    against the heartbeat stream's 0.46 s. So is a unit kept in part (rows of a kept table and
    placeholders), whose every table the slave's rules keep: 0.11x of the heartbeat stream's speed
    on the 500 MB MySQL bench binlog while Python read each. The relay log is what the master's
    stream must leave (test_dump_stream's expected units), each transaction_length its
    transaction's size."""
    from dumpfilter.binlogs import TailingReader
    from dumpfilter.codec import group_transactions
    from tests.master.test_dump_stream import expected_units
    from tests.support.dump_helpers import relay_units, run_slave

    binlog = tmp_path / "binlog"
    generate(WorkloadSpec(seed=9, transactions=800, flavor="mysql", binlog_format="row", ddl_share=0.1,
                          max_binlog_size=80_000), binlog)
    by_python = []
    real = Slave._without_placeholders
    monkeypatch.setattr(Slave, "_without_placeholders", lambda self, unit, events: by_python.append(unit) or real(
        self, unit, events))
    _, address = master_factory(binlog)
    rules = RuleSet(do_db=("db1",))
    slave = run_slave(address, tmp_path / "relay", 33, rules=rules, skip_policy="placeholder")
    assert slave.counters.placeholders > 1000
    # Left to Python: none. A unit kept in part (a kept table's rows, placeholders for a dropped
    # table's) keeps the fast shape through its placeholders (core scan::F_HOLES) and is relayed
    # by the run once the slave's rules keep each of its tables.
    assert by_python == [], [[e.type_code for e in u.events] for u in by_python[:3]]
    assert relay_units(tmp_path / "relay") == expected_units(binlog, rules, "placeholder")
    units = [u for u in group_transactions(e for _, e in TailingReader(tmp_path / "relay"))
             if u.gtid_event is not None]
    assert units and all(u.gtid_event.gtid_info.transaction_length == u.size for u in units)


@pytest.mark.parametrize("policy", ["heartbeat", "empty-transaction"])
def test_mysql_empty_transactions_and_ddl_are_relayed_by_the_run(master_factory, tmp_path, monkeypatch, policy):
    """A MySQL stream's empty transactions (GTID, BEGIN, COMMIT or XID: the empty-transaction
    policy's form of a skipped unit) and its DDL (a GTID and one Query) go to the relay log by the
    compiled relay run, as MariaDB's do: no transaction through the slave's per-unit `step`
    (before: each, 26,215 units a pass of the 500 MB MySQL bench binlog, 1.8 s against the
    heartbeat stream's 0.6 s). The relay log is what the master's stream must leave."""
    from dumpfilter.slave import receive as receive_module
    from tests.master.test_dump_stream import expected_units
    from tests.support.dump_helpers import relay_units, run_slave

    binlog = tmp_path / "binlog"
    generate(WorkloadSpec(seed=10, transactions=800, flavor="mysql", binlog_format="row", ddl_share=0.1,
                          cross_db_share=0.2, max_binlog_size=80_000), binlog)
    stepped = []
    real = receive_module.BatchWalk.step

    def step(self, at):
        rec = self.scan.units[at]
        if rec.kind != "control":  # (an FDE, a Rotate, Previous_GTIDs: the slave's own to read)
            stepped.append(self.blob[rec.start:rec.end])
        return real(self, at)

    monkeypatch.setattr(receive_module.BatchWalk, "step", step)
    _, address = master_factory(binlog)
    rules = RuleSet(do_db=("db1",))
    run_slave(address, tmp_path / "relay", 34, rules=rules, skip_policy=policy)
    assert stepped == []
    assert relay_units(tmp_path / "relay") == expected_units(binlog, rules, policy)


@pytest.mark.parametrize("policy", ["placeholder", "empty-transaction"])
def test_statement_streams_of_every_skip_policy_are_relayed_by_the_run(master_factory, tmp_path, monkeypatch,
                                                                      policy):
    """Under the placeholder and the empty-transaction policies, a MIXED stream's kept statement
    units go to the relay log by the compiled relay run, by their keys, as under heartbeat: none
    of their statements through the slave's per-event way (issue #57: the placeholder stream's
    slave took every kept statement unit event by event, 14 s of CPU on a 500 MB MIXED binlog the
    master sent in 0.9 s). A unit kept in part (placeholders between its statements) is left to
    the per-event way, and the relay log is what a master's stream under the policy must leave
    (test_dump_stream's expected units)."""
    from dumpfilter.rules.transaction_filter import framing_statement
    from tests.master.test_dump_stream import expected_units
    from tests.support.dump_helpers import relay_units, run_slave

    binlog = tmp_path / "binlog"
    generate(WorkloadSpec(seed=7, transactions=1500, binlog_format="mixed", flavor="mariadb",
                          max_binlog_size=200_000), binlog)
    by_python = []
    real = Slave._event
    monkeypatch.setattr(Slave, "_event", lambda self, event, grouper: by_python.append(event) or real(
        self, event, grouper))
    _, address = master_factory(binlog)
    rules = RuleSet(do_db=("db1",))
    slave = run_slave(address, tmp_path / "relay", 32, rules=rules, skip_policy=policy)
    statements = [e for e in by_python if e.is_query and not framing_statement(e.sql or "")
                  and e.sql.startswith(("INSERT", "UPDATE", "DELETE"))]
    keeps = slave._keep_table
    assert keeps.keys_enabled and keeps.statements > 100
    assert len(statements) < keeps.statements // 10, (len(statements), keeps.statements)
    assert relay_units(tmp_path / "relay") == expected_units(binlog, rules, policy)


def test_a_stream_batch_is_scanned_without_a_checker_thread(tmp_path):
    """A batch (about 1 MiB) is the size from which the scanner checks CRC runs on a thread of its
    own; the slave's scanner starts none (one per batch cost its process 10-20% of its CPU under
    every skip policy: bench_skip_policies' MIXED streams, slave CPU 1.71 s against 1.50 s for the
    three policies, four runs each)."""
    slave = Slave(SlaveConfig(master="127.0.0.1:1", server_id=9, relay_dir=tmp_path / "relay", rules=RuleSet()))
    assert slave._scanner.core.pipeline_min is None
    assert Scanner("<x>").core.pipeline_min is not None  # what a file's scan keeps


@pytest.mark.parametrize("fmt", ["row", "mixed"])
def test_a_rewrite_db_slave_relays_by_the_compiled_run(tmp_path, fmt):
    """Issue #80: a replicate-rewrite-db slave sent every event through Python to rename it (a
    `simulate` slave's stream took ten times the others'). The compiled relay run renames the
    databases itself (core rename_db): Python renames a unit only where it names a database the
    run has not met, and the relay log is the reference path's, renamed events and all."""
    paths = generate(WorkloadSpec(seed=7, transactions=1200, binlog_format=fmt, flavor="mariadb", ddl_share=0.0,
                                  max_binlog_size=1 << 30), tmp_path / "binlog")
    data = paths[0].read_bytes()
    stream = batches(data, paths[0].name, random.Random(3))
    rules = RuleSet(rewrite_db=(("db1", "x1"), ("db2", "x2")))
    by_python = []
    real = Slave._unit
    try:
        Slave._unit = lambda self, unit: by_python.append(unit.kind) or real(self, unit)  # type: ignore[method-assign]
        fast = receive(tmp_path / "fast", rules, True, stream)
    finally:
        Slave._unit = real  # type: ignore[method-assign]
    assert fast == receive(tmp_path / "slow", rules, False, stream)
    units = fast["units"]
    assert fast["counters"]["rewritten"] > units / 4, fast["counters"]
    assert sum(kind != "control" for kind in by_python) < units / 20, (len(by_python), units)
