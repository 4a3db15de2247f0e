"""The master's statement units by key (issue #43): on MIXED and STATEMENT binlogs (generated, and
written by real servers) each slave's stream answers the statement units from its keep byte per
statement key, in the core, and sends byte-identical batches with equal stats and P_S counters to
the reference path (TransactionFilter per unit per slave); the units the keys decide never reach
Python per slave (`StatementPathCounts.python_units`)."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dumpfilter.codec import group_transactions, read_events
from dumpfilter.master.model import ChannelSpec, Registration
from dumpfilter.master.service import DumpService
from dumpfilter.rules.ruleset import RuleSet
from dumpfilter.skip_policy import NAMES as SKIP_POLICIES
from dumpfilter.workload.generator import FLAVORS, WorkloadSpec, generate
from tests.master.test_fast_path import SCHEMAS, _rules
from tests.oracles.master import reference_service


def _dump(directory: Path, regs: list[Registration], fast: bool, **kwargs) -> dict:
    svc = DumpService(directory, **kwargs) if fast else reference_service(directory, **kwargs)
    for reg in regs:
        svc.register(reg)
    out = {}
    for reg in regs:
        batches = []
        for b in svc.stream(reg.server_id):
            batches.append((b.events, b.position, b.transactions, b.skipped_bytes, b.caught_up, b.heartbeat,
                            b.gtid_state, b.filter_changed_at))
            if b.caught_up:
                break
        slave = svc.slaves[reg.server_id]
        rows, _ = svc.list_filters(reg.server_id)
        out[reg.server_id] = (batches, slave.stats, [(r["FILTER_NAME"], r["COUNTER"]) for r in rows],
                              slave.statement_path)
    return out


def _same(directory: Path, regs: list[Registration], **kwargs) -> dict:
    """The fast dump against the reference one, slave by slave: the fast one's statement counts."""
    slow = _dump(directory, regs, False, **kwargs)
    fast = _dump(directory, regs, True, **kwargs)
    assert slow
    for sid in slow:
        assert fast[sid][0] == slow[sid][0], f"server_id {sid}: batches differ"
        assert fast[sid][1] == slow[sid][1], f"server_id {sid}: stats differ"
        assert fast[sid][2] == slow[sid][2], f"server_id {sid}: P_S counters differ"
    return {sid: fast[sid][3] for sid in fast}


RULES = [RuleSet(), RuleSet(do_db=("db1", "db2")), RuleSet(ignore_db=("db3",)),
         RuleSet(wild_ignore_table=("db1.t1",)), RuleSet(do_table=("db2.t2", "db1.t1"))]


@pytest.mark.parametrize("fmt", ["statement", "mixed"])
@pytest.mark.parametrize("flavor", FLAVORS)
def test_statement_units_are_answered_by_key_in_the_core(tmp_path, fmt, flavor):
    """Every slave's statement units are decided from its key answers: none goes through
    TransactionFilter under the heartbeat policy (a MySQL unit kept in part is cut by the core,
    its GTID's transaction_length made anew), and the bytes are the reference path's."""
    generate(WorkloadSpec(seed=3, schemas=4, tables_per_schema=2, transactions=300, binlog_format=fmt,
                          flavor=flavor, cross_db_share=0.3, insert_select_share=0.25), tmp_path)
    regs = [Registration(server_id=i + 1, filters=(ChannelSpec(None, rules),)) for i, rules in enumerate(RULES)]
    counts = _same(tmp_path, regs, segment_bytes=20_000)
    for sid, c in counts.items():
        assert c.key_units > 0, f"server_id {sid}: no unit answered by key"
        assert c.keys_decided > 0
        assert c.python_units == 0, f"server_id {sid}: {c.python_units} units decided in Python"
    # Each key is decided once per slave, not once per unit.
    assert all(c.keys_decided < c.key_units for c in counts.values())


def test_policy_restricted_and_other_skip_policies_keep_the_reference_answers(tmp_path):
    """Skip policies other than the heartbeat send what the reference path sends (units the core
    does not send go on to Python), and so does a slave whose rules track derived tables."""
    generate(WorkloadSpec(seed=9, schemas=4, tables_per_schema=2, transactions=200, binlog_format="statement",
                          flavor="mariadb", cross_db_share=0.3), tmp_path)
    regs = [Registration(server_id=i + 1, skip_policy=policy,
                         filters=(ChannelSpec(None, RuleSet(do_db=("db1",))),))
            for i, policy in enumerate(SKIP_POLICIES)]
    counts = _same(tmp_path, regs, segment_bytes=20_000)
    assert any(c.key_units for c in counts.values())


@st.composite
def _scenarios(draw):
    spec = WorkloadSpec(seed=draw(st.integers(0, 10_000)), schemas=len(SCHEMAS), tables_per_schema=2,
                        transactions=draw(st.integers(50, 300)),
                        binlog_format=draw(st.sampled_from(["statement", "mixed"])),
                        flavor=draw(st.sampled_from(FLAVORS)), cross_db_share=draw(st.sampled_from([0.0, 0.3, 0.8])),
                        ddl_share=draw(st.sampled_from([0.0, 0.05])),
                        max_binlog_size=draw(st.sampled_from([20_000, 1 << 30])),
                        insert_select_share=draw(st.sampled_from([0.0, 0.3])))
    regs = [Registration(server_id=sid, skip_policy=draw(st.sampled_from(SKIP_POLICIES)),
                         filters=(ChannelSpec(None, _rules(draw)),))
            for sid in range(1, draw(st.integers(1, 4)) + 1)]
    sizes = {"segment_bytes": draw(st.sampled_from([1_500, 20_000, 1 << 20])),
             "batch_bytes": draw(st.sampled_from([1, 3_000, 256 << 10]))}
    return spec, regs, sizes


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(_scenarios())
def test_statement_key_path_equals_reference_on_generated_rule_sets(tmp_path_factory, scenario):
    spec, regs, sizes = scenario
    directory = tmp_path_factory.mktemp("binlog")
    generate(spec, directory)
    counts = _same(directory, regs, **sizes)
    assert any(c.key_units for c in counts.values())


FIXTURE_RULES = [RuleSet(), RuleSet(do_db=("sbtest-repl",)), RuleSet(ignore_db=("sbtest-repl",)),
                 RuleSet(wild_do_table=("sbtest-repl.sbtest1",)), RuleSet(wild_ignore_table=("sbtest-repl.sbtest2%",)),
                 RuleSet(do_db=("test",)), RuleSet(wild_ignore_table=("test.t1%",), ignore_db=("mysql",))]


@pytest.mark.fixtures
def test_statement_key_path_on_real_statement_binlogs(shared_fixtures, tmp_path):
    """Real MariaDB 11.8 STATEMENT binlogs (sysbench's transactions, log_pos 0 inside groups) and
    MySQL's mixed ones (USER_VAR, RAND, INTVAR before their Queries, LOAD DATA) stream the same by
    key as through the reference path, slave by slave; on MariaDB's every unit goes by key."""
    files = [p for p in sorted(shared_fixtures.rglob("*")) if p.is_file() and p.name != "MANIFEST.md"]
    by_key: dict[str, int] = {}
    for i, path in enumerate(files):
        data = gzip.open(path).read() if path.suffix == ".gz" else path.read_bytes()
        if not list(group_transactions(read_events(data)))[-1].complete:
            continue  # ends inside a transaction (test_fast_path covers it)
        directory = tmp_path / f"f{i}"
        directory.mkdir()
        (directory / "a.000001").write_bytes(data)
        regs = [Registration(server_id=k + 1, filters=(ChannelSpec(None, rules),))
                for k, rules in enumerate(FIXTURE_RULES)]
        try:
            counts = _same(directory, regs)
        except AssertionError as exc:
            raise AssertionError(f"{path.name}: {exc}") from None
        by_key[path.name] = sum(c.key_units for c in counts.values())
        if path.name.startswith("mariadb-repl-bin"):
            assert all(c.python_units == 0 for c in counts.values()), path.name
    assert all(by_key[f"mariadb-repl-bin.00000{n}"] > 0 for n in (5, 6, 7))


@pytest.mark.fixtures
@pytest.mark.parametrize("source, db", [("osheroff-mysql-binlog-connector-java/mysql-bin.sakila.gz", "sakila"),
                                        ("blackbeam-rust_mysql_common/ver_trunk_row_v2.001", "test")])
def test_statements_without_a_gtid_are_answered_once_for_every_slave(shared_fixtures, tmp_path, monkeypatch, source,
                                                                      db):
    """A statement alone without a GTID (MySQL 5.5, 5.6 with its GTIDs off) is answered by the
    statement flag words, once for every slave, as a GTID and one statement is: none goes through
    a slave's TransactionFilter, and the batches, stats and P_S counters are the reference path's."""
    from tests.support.filtering import per_unit_units, statement_without_gtid

    (tmp_path / "a.000001").write_bytes(gzip.open(shared_fixtures / source).read() if source.endswith(".gz")
                                        else (shared_fixtures / source).read_bytes())
    regs = [Registration(server_id=k + 1, filters=(ChannelSpec(None, rules),))
            for k, rules in enumerate([RuleSet(do_db=(db,)), RuleSet(ignore_db=(db,)), RuleSet()])]
    slow = _dump(tmp_path, regs, False)
    alone = per_unit_units(monkeypatch, statement_without_gtid)
    fast = _dump(tmp_path, regs, True)
    assert alone == [], f"{len(alone)} statements without a GTID went through a slave's TransactionFilter"
    for sid in slow:
        assert fast[sid][:3] == slow[sid][:3], f"server_id {sid}"
    assert any(b[3] for b in fast[2][0]), "the ignore-db slave skipped nothing"


def test_the_streams_share_one_numbering_and_parse_each_shape_once(tmp_path):
    """A master's streams share one key numbering (DumpService.key_shapes, goal 1 of #80): a
    segment's keys are numbered once for all of them and each shape's first statement is parsed
    once for every slave, while each slave still decides every key it meets by its own rules."""
    generate(WorkloadSpec(seed=3, schemas=4, tables_per_schema=2, transactions=300, binlog_format="mixed",
                          cross_db_share=0.3), tmp_path)
    svc = DumpService(tmp_path, segment_bytes=20_000)
    regs = [Registration(server_id=i + 1, filters=(ChannelSpec(None, rules),)) for i, rules in enumerate(RULES)]
    for reg in regs:
        svc.register(reg)
    for reg in regs:
        for b in svc.stream(reg.server_id):
            if b.caught_up:
                break
    shapes = svc.key_shapes
    decided = [svc.slaves[reg.server_id].statement_path.keys_decided for reg in regs]
    assert all(d > 0 for d in decided), decided
    assert 0 < len(shapes.parses) <= len(shapes), (len(shapes.parses), len(shapes))
    assert sum(decided) > len(shapes)  # decided per slave, numbered and parsed once
