"""`experiment` counts on the compiled walk (issue #40, goals 1 and 3): one scan of a chunk for every
slave, each slave's answers from its keep bytes (`UnitList.rows_many`) walked by the core as the
master's `UnitList.send` walks them (`UnitList.count_many`), and only the units the core leaves (control
events, statements, rare shapes) through TransactionFilter. The counts equal the Python
stream's: what `simulate`'s real master sent each slave over loopback gRPC (tests/support/simulated.py),
on every real fixture binlog and on generated workloads of each format and flavor, for random rules,
skip policies and chunk cuts. No copy of the send model is kept to compare with (issue #57)."""

from __future__ import annotations

from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dumpfilter.codec import group_transactions, read_events
from dumpfilter.codec.scanner import Scanner
from dumpfilter.spark_jobs.tasks import bandwidth
from dumpfilter.spark_jobs.tasks.counts import merge_counts
from dumpfilter.spark_jobs.tasks.chunks import input_files, plan_chunks
from dumpfilter.topology import parse_topology
from dumpfilter.workload import WorkloadSpec, generate
from tests.support.simulated import assert_same, experiment_rows, simulated

POLICIES = ("heartbeat", "placeholder", "empty-transaction")
RULES = ["replicate-do-db=db1", "replicate-do-db=db2", "replicate-ignore-db=db3", "replicate-do-table=db1.t1",
         "replicate-ignore-table=db2.t2", "replicate-wild-do-table=db%.t1", "replicate-wild-ignore-table=db1.%",
         "replicate-do-db=test", "replicate-wild-do-table=sbtest%.%", "replicate-ignore-db=mysql",
         "replicate-do-db=sakila", "replicate-wild-ignore-table=%.sbtest1"]


def _slaves_text(slaves: list[tuple[list[str], str]], semantics: str = "mysql") -> str:
    text = ""
    for k, (rules, policy) in enumerate(slaves):
        rule_text = ", ".join(f'"{r}"' for r in rules)
        text += (f'[[slaves]]\nname = "s{k}"\nserver_id = {k + 2}\nrules = [{rule_text}]\nskip_policy = "{policy}"\n'
                 f'filter_semantics = "{semantics}"\n')
    return text


def _topology(slaves: list[tuple[list[str], str]], semantics: str = "mysql"):
    return parse_topology(_slaves_text(slaves, semantics))


def _counts(module, paths, topology, chunk_bytes):
    chunks = plan_chunks(input_files(paths), chunk_bytes)
    parts = [p for chunk in chunks for p in module.count_chunk(chunk, topology.slaves)]
    return [t.as_row() for t in merge_counts(parts, [s.name for s in topology.slaves])]


def _streamed(directory: Path, slaves: list[tuple[list[str], str]], semantics: str = "mysql") -> dict[str, dict]:
    """What a real master streamed each of `slaves` over gRPC from `directory` (simulate)."""
    text = f'[master]\nbinlogs = "{directory}"\n[experiment]\nmaster_vs_slave = false\nskip_policies = []\n'
    return simulated(parse_topology(text + _slaves_text(slaves, semantics)))


@pytest.fixture(scope="module")
def generated(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("compiled-experiment")
    out = {}
    for k, (fmt, flavor) in enumerate([("row", "mariadb"), ("row", "mysql"), ("mixed", "mariadb"),
                                       ("statement", "mysql")]):
        spec = WorkloadSpec(seed=40 + k, schemas=3, tables_per_schema=2, transactions=400, binlog_format=fmt,
                            flavor=flavor, max_binlog_size=50_000)
        generate(spec, root / f"{fmt}-{flavor}", "master-bin")
        out[f"{fmt}-{flavor}"] = root / f"{fmt}-{flavor}"
    return out


slave_sets = st.lists(st.tuples(st.lists(st.sampled_from(RULES), max_size=3, unique=True), st.sampled_from(POLICIES)),
                      min_size=1, max_size=5)


@pytest.mark.fixtures
def test_real_binlogs_count_as_their_streams(shared_fixtures, tmp_path):
    import gzip

    paths = sorted(p for p in shared_fixtures.rglob("*") if p.is_file() and not p.name.endswith(".md"))
    assert len(paths) >= 15
    slaves = [([], "heartbeat"), (["replicate-do-db=test"], "placeholder"),
              (["replicate-wild-do-table=sbtest%.%", "replicate-do-db=db1"], "heartbeat"),
              (["replicate-ignore-db=mysql"], "empty-transaction"),
              (["replicate-wild-ignore-table=%.sbtest1"], "heartbeat")]
    topology = _topology(slaves)
    compared = 0
    for i, path in enumerate(paths):
        data = gzip.open(path).read() if path.suffix == ".gz" else path.read_bytes()
        if not list(group_transactions(read_events(data)))[-1].complete:
            continue  # ends inside a transaction: a live master waits for the rest
        directory = tmp_path / f"f{i}"
        directory.mkdir()
        (directory / "a.000001").write_bytes(data)  # sorts before any file a fixture's Rotate names
        streams = _streamed(directory, slaves)
        for chunk_bytes in (None, 20_000):
            assert_same(streams, experiment_rows([directory], topology.slaves, chunk_bytes))
        compared += 1
    assert compared >= 14


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(slaves=slave_sets, workload=st.sampled_from(["row-mariadb", "row-mysql", "mixed-mariadb", "statement-mysql"]),
       chunk_bytes=st.sampled_from([None, 7_000, 30_000]))
def test_random_slaves_count_as_their_streams(generated, slaves, workload, chunk_bytes):
    src = generated[workload]
    assert_same(_streamed(src, slaves), experiment_rows([src], _topology(slaves).slaves, chunk_bytes))


def test_one_scan_for_every_slave_and_python_only_for_what_the_core_leaves(generated, monkeypatch):
    """Work bound: the chunk is scanned the same number of times for 1 slave and for 16, and the
    per-unit Python path sees, per slave, only the units that are not fast (control events and
    DDL here: a ROW workload's transactions are fast)."""
    src = generated["row-mariadb"]
    scans, per_unit = [], []
    real_scan, real_unit = Scanner.scan_finish, bandwidth._SlaveCounter.unit  # chunk_buffers' scans end there
    monkeypatch.setattr(Scanner, "scan_finish", lambda self, *a, **k: scans.append(1) or real_scan(self, *a, **k))
    monkeypatch.setattr(bandwidth._SlaveCounter, "unit", lambda self, txn, k: per_unit.append(1) or real_unit(self, txn, k))
    units = slow = 0  # the units the core does not decide from tables: control events and DDL here
    for path in input_files([src]):
        data = path.read_bytes()
        records = Scanner(str(path)).units(data, 4, 0, at_eof=True).units
        units += len(records)
        slow += sum(not records.is_fast(i) for i in range(len(records)))
        assert len(records) == len(list(group_transactions(read_events(data))))
    assert slow < units / 10
    seen = []
    for n in (1, 16):
        scans.clear()
        per_unit.clear()
        topology = _topology([([RULES[k % 7]], "heartbeat") for k in range(n)])
        _counts(bandwidth, [src], topology, None)
        seen.append(len(scans))
        assert len(per_unit) <= n * slow, (len(per_unit), n, slow)
    assert seen[0] == seen[1] > 0


@pytest.mark.parametrize("semantics", ["mysql", "effective"])
def test_units_left_to_python_are_decided_once_per_rule_group(generated, monkeypatch, semantics):
    """Issue #80: `experiment` with a rule set under three skip policies decided each unit the
    core leaves to Python (DDL, a lone statement, a unit kept in part) once per slave: its cost
    followed slaves x DDL. The slaves of one rule group share its answer per unit, and a unit it
    keeps or skips whole goes back to the compiled walk: as many decisions for 3 slaves of a rule
    set as for 1, and the per-slave Python path sees no such unit; the counts stay the streams'.
    Under WL#2516's effective semantics too (session 54: its groups' units went slave by slave)."""
    from dumpfilter.rules.transaction_filter import TransactionFilter

    src = generated["mixed-mariadb"]
    decided, per_slave = [], []
    real_filter, real_unit = TransactionFilter.filter, bandwidth._SlaveCounter.unit
    monkeypatch.setattr(TransactionFilter, "filter", lambda self, txn: decided.append(1) or real_filter(self, txn))
    monkeypatch.setattr(bandwidth._SlaveCounter, "unit",
                        lambda self, txn, k: per_slave.append(txn.kind) or real_unit(self, txn, k))
    rule_sets = [["replicate-do-db=db1"], ["replicate-ignore-db=db2"], ["replicate-wild-do-table=db3.%"]]
    seen = []
    for policies in (POLICIES[:1], POLICIES):
        decided.clear()
        per_slave.clear()
        slaves = [(rules, policy) for rules in rule_sets for policy in policies]
        with ThreadPoolExecutor(1) as pool:  # (a thread of its own: its rule groups start empty, bandwidth._rule_group)
            rows = pool.submit(experiment_rows, [src], _topology(slaves, semantics).slaves, None).result()
        seen.append((len(decided), sum(kind != "control" for kind in per_slave)))
        assert_same(_streamed(src, slaves, semantics), rows)
    (one, one_python), (three, three_python) = seen
    assert one == three > 0, seen
    assert three_python <= one_python * 3 and three_python < three, seen


def test_statement_units_are_walked_by_their_keys(generated, monkeypatch):
    """MIXED and STATEMENT binlogs (issue #43 for experiment): the DML statement units the core
    keys (`UnitList.statement_units`) are walked by the core for every slave whose decisions are
    the key's alone; the per-unit path sees only the rest (control events, DDL). A MySQL unit kept
    in part still goes the per-unit way (its GTID's transaction_length is rewritten there): there
    the slaves' rules are database rules, which keep a statement unit whole or not at all."""
    dml = ("INSERT", "UPDATE", "DELETE", "REPLACE")
    for workload, rules in (("mixed-mariadb", RULES[:6]), ("statement-mysql", RULES[:3])):
        src = generated[workload]
        units = others = 0
        for path in input_files([src]):
            for unit in group_transactions(read_events(path.read_bytes())):
                units += 1
                texts = [e.sql.strip().upper() for e in unit.events if e.type_name == "QUERY"]
                texts = [t for t in texts if t not in ("BEGIN", "COMMIT")]
                others += unit.kind == "control" or any(not t.startswith(dml) for t in texts)
        assert others < units / 3, (workload, others, units)
        per_unit = []
        real_unit = bandwidth._SlaveCounter.unit
        monkeypatch.setattr(bandwidth._SlaveCounter, "unit", lambda self, txn, k: per_unit.append(1) or real_unit(self, txn, k))
        n = len(rules)
        topology = _topology([([rule], "heartbeat") for rule in rules])
        _counts(bandwidth, [src], topology, None)
        assert len(per_unit) <= n * others, (workload, len(per_unit), units, others)
        monkeypatch.undo()


@pytest.mark.parametrize("workload", ["row-mariadb", "mixed-mariadb", "statement-mysql"])
def test_buffers_scanned_ahead_count_as_their_streams(generated, workload, monkeypatch):
    """chunk_buffers scans the next buffer on the core's thread while the slaves count the one
    before: with buffers of a few units (units cut across buffers, the scanner's names growing
    between them) the counts stay the streams'."""
    from dumpfilter.spark_jobs.tasks import chunks as chunk_module

    monkeypatch.setattr(chunk_module, "READ_BYTES", 2_000)
    slaves = [([RULES[k]], POLICIES[k % 3]) for k in range(7)]
    src = generated[workload]
    assert_same(_streamed(src, slaves), _counts(bandwidth, [src], _topology(slaves), None))


def test_a_caller_that_stops_early_gets_the_scanner_back(generated, monkeypatch):
    """Stopping after the first buffer (an error in the caller) waits for the scan under way: the
    scanner answers again at once, and reads on where that scan ended."""
    from dumpfilter.spark_jobs.tasks import chunks as chunk_module

    monkeypatch.setattr(chunk_module, "READ_BYTES", 2_000)
    chunk = plan_chunks(input_files([generated["row-mariadb"]]), None)[0]
    scanner = Scanner(chunk.path)
    buffers = chunk_module.chunk_buffers(chunk, scanner)
    _fmt, buf, base, _units, n, _crc = next(buffers)
    assert n > 0
    buffers.close()  # the second buffer's scan was under way
    assert scanner.checksum_len in (0, 4)
    again = scanner.units(Path(chunk.path).read_bytes(), 4, 0, at_eof=True)
    assert again.error is None and again.stop > 0


@pytest.mark.parametrize("workload", ["row-mariadb", "mixed-mariadb"])
def test_slaves_whose_answers_agree_are_counted_alike(generated, workload):
    """Rule sets that differ only in tables the binlog does not name answer every unit alike: each
    is counted as its base rule set is, and the counts stay the streams'."""
    base = [(["replicate-do-db=db1"], "heartbeat"), (["replicate-ignore-db=db2"], "placeholder")]
    variants = [([*rules, f"replicate-ignore-table=db9.not_there_{k}"], policy)
                for k in range(6) for rules, policy in base]
    src = [generated[workload]]
    streamed = _streamed(src[0], base + variants)
    alone = _counts(bandwidth, src, _topology(base), None)
    together = _counts(bandwidth, src, _topology(base + variants), None)
    assert_same(streamed, together)
    for k, row in enumerate(together[2:]):  # each variant is counted as its base rule set is
        assert {**row, "slave": ""} == {**alone[k % 2], "slave": ""}


@pytest.mark.parametrize("chunk_bytes", [None, 9_000])
def test_statements_read_on_the_scan_thread_cut_as_their_streams(generated, chunk_bytes, monkeypatch):
    """Slaves with table rules keep units of several tables in part: the statements of such units
    are read on the scan's thread (`unit_statements`), while their bytes are in the caches, and
    cut there as the master's stream cuts them. Slaves with database rules alone do not ask for them."""
    from dumpfilter.spark_jobs.tasks import chunks as chunk_module

    monkeypatch.setattr(chunk_module, "READ_BYTES", 4_000)
    cutting_slaves = [(["replicate-ignore-table=db1.t1"], "heartbeat"),
                      (["replicate-wild-do-table=db2.t2", "replicate-do-table=db1.t2"], "placeholder"),
                      (["replicate-do-db=db3"], "heartbeat")]
    nothing_cut_slaves = [(["replicate-ignore-table=db1.not_there"], "heartbeat")]
    # the real streams first, before the spies (simulate counts by table with the same walk)
    streamed = {id(s): _streamed(generated["row-mariadb"], s) for s in (cutting_slaves, nothing_cut_slaves)}
    lists = []
    real = bandwidth.chunk_buffers

    def recorded(*args, **kwargs):
        for item in real(*args, **kwargs):
            lists.append(item[3])
            yield item

    monkeypatch.setattr(bandwidth, "chunk_buffers", recorded)
    by_python = []
    real_unit = bandwidth._SlaveCounter.unit
    monkeypatch.setattr(bandwidth._SlaveCounter, "unit", lambda self, txn, k: by_python.append(txn) or real_unit(self, txn, k))
    src = [generated["row-mariadb"]]
    cutting = _topology(cutting_slaves)
    rows = _counts(bandwidth, src, cutting, chunk_bytes)
    assert_same(streamed[id(cutting_slaves)], rows)
    assert rows[0]["transactions_partial"] > 0, "the workload holds no unit kept in part"
    assert sum(units.unit_statements_ahead for units in lists) > 0
    # The units cut from the statements read ahead are cut by the core, not left to Python: as
    # many go to Python as when each unit's statements are read where it is cut.
    ahead = len(by_python)
    by_python.clear()
    monkeypatch.setattr(bandwidth, "chunk_buffers", lambda *a, **kw: recorded(*a, **{**kw, "unit_statements": False}))
    assert _counts(bandwidth, src, cutting, chunk_bytes) == rows
    assert len(by_python) == ahead
    lists.clear()
    monkeypatch.setattr(bandwidth, "chunk_buffers", recorded)
    assert _counts(bandwidth, src, _topology([(["replicate-do-db=db1"], "heartbeat")]), chunk_bytes)
    assert lists and sum(units.unit_statements_ahead for units in lists) == 0
    # Table rules that cut nothing (tables the binlog does not hold): read ahead only until a
    # counted buffer shows it (the first two scans of a chunk start before any of its buffers is
    # counted).
    lists.clear()
    nothing_cut = _topology(nothing_cut_slaves)
    assert_same(streamed[id(nothing_cut_slaves)], _counts(bandwidth, src, nothing_cut, chunk_bytes))
    chunks = len(plan_chunks(input_files(src), chunk_bytes))
    assert sum(1 for units in lists if units.unit_statements_ahead) <= 2 * chunks < len(lists)


def test_many_slaves_scan_half_buffers_and_count_as_their_streams(generated, monkeypatch):
    """Past MANY_SLAVES distinct slaves a chunk is scanned in buffers of half the size (each
    slave's walk then finds the buffer's units in the caches); the counts stay the streams'."""
    from dumpfilter.spark_jobs.tasks import chunks as chunk_module

    monkeypatch.setattr(chunk_module, "READ_BYTES", 8_000)
    buffers: list[int] = []
    real = bandwidth.chunk_buffers

    def recorded(*args, **kwargs):
        for item in real(*args, **kwargs):
            buffers.append(len(item[1]))
            yield item

    monkeypatch.setattr(bandwidth, "chunk_buffers", recorded)
    src = [generated["row-mariadb"]]
    tables = [f"db{d}.t{t}" for d in (1, 2, 3) for t in (0, 1)]
    few_slaves = [([f"replicate-ignore-table={t}"], "heartbeat") for t in tables]
    many_slaves = ([([f"replicate-ignore-table={t}", f"replicate-ignore-table={u}"], "heartbeat")
                    for t in tables for u in tables if t <= u] + [(["replicate-do-db=db1"], "heartbeat")] * 2)
    few, many = _topology(few_slaves), _topology(many_slaves)
    assert len(few.slaves) <= bandwidth.MANY_SLAVES < len({repr(s.rules) for s in many.slaves})
    for topology, slaves in ((few, few_slaves), (many, many_slaves)):
        buffers.clear()
        assert_same(_streamed(src[0], slaves), _counts(bandwidth, src, topology, None))
        if topology is few:
            few_buffers = list(buffers)
    many_buffers = buffers
    # Most buffers are whole (the others end a chunk, or hold a unit longer than the size).
    assert Counter(few_buffers).most_common(1)[0][0] == 8_000
    assert Counter(many_buffers).most_common(1)[0][0] == 4_000
    assert len(many_buffers) > 1.5 * len(few_buffers)


def test_lone_statements_of_database_rules_are_decided_once_per_database(tmp_path, monkeypatch):
    """Issue #80: a DDL-heavy binlog's lone statements (a GTID and one DDL) went through each rule
    set's TransactionFilter one by one: 8 do-db rule sets x 13,637 DDL units. Rules that read
    databases only answer a plain lone statement by its default database (rpl_filter.cc's db_ok),
    so each rule set decides one per default database, whatever the number of DDL units; the
    counts stay the streams' (a real master's, over gRPC)."""
    from dumpfilter.rules.statements import plain_statement
    from dumpfilter.rules.transaction_filter import TransactionFilter

    src = tmp_path / "ddl"
    generate(WorkloadSpec(seed=7, schemas=3, tables_per_schema=2, transactions=600, binlog_format="mixed",
                          ddl_share=0.3, max_binlog_size=200_000), src, "master-bin")
    lone = []
    real_filter = TransactionFilter.filter
    monkeypatch.setattr(TransactionFilter, "filter",
                        lambda self, txn: (lone.append(txn) if len(txn.events) == 2 else None) or real_filter(self, txn))
    rule_sets = [["replicate-do-db=db1"], ["replicate-ignore-db=db2"], ["replicate-do-db=db3", "replicate-do-db=db1"]]
    slaves = [(rules, policy) for rules in rule_sets for policy in POLICIES]
    rows = experiment_rows([src], _topology(slaves).slaves, None)
    ddl_units = sum(1 for path in input_files([src]) for txn in group_transactions(read_events(path.read_bytes()))
                    if len(txn.events) == 2 and txn.events[1].is_query)
    assert ddl_units > 100
    # (CREATE DATABASE is decided by the database it names: one by one)
    plain = [t for t in lone if plain_statement(t.events[1].query.sql)]
    assert len(plain) <= len(rule_sets) * 3, [(t.events[1].query.db, t.events[1].query.sql[:40]) for t in plain]
    assert len(lone) - len(plain) < ddl_units / 10
    assert_same(_streamed(src, slaves), rows)


def test_lone_statements_of_table_rules_are_decided_once_per_parse(tmp_path, monkeypatch):
    """Issue #80: with table rules, a lone statement's answer is what rpl_filter.cc reads of it: its
    kind, the databases and tables it names, its default database. A DDL-heavy binlog's DDL went
    through each rule set's TransactionFilter one by one (64 shadow candidates over 13,637 DDL: 10 s
    of CPU); each rule set now decides one per such key, and the counts stay the streams'."""
    from dumpfilter.rules.transaction_filter import TransactionFilter, lone_statement

    src = tmp_path / "ddl"
    generate(WorkloadSpec(seed=9, schemas=1, tables_per_schema=2, transactions=3000, binlog_format="mixed",
                          ddl_share=0.9), src, "master-bin")
    decided = []
    real_filter = TransactionFilter.filter
    monkeypatch.setattr(TransactionFilter, "filter", lambda self, txn: (
        decided.append((id(self), lone_statement(txn.events).sql)) if lone_statement(txn.events) else None)
        or real_filter(self, txn))
    rule_sets = [["replicate-wild-do-table=db1.scratch%"], ["replicate-do-table=db1.scratch_1"],
                 ["replicate-do-db=db1", "replicate-ignore-table=db1.scratch_2"]]
    slaves = [(rules, policy) for rules in rule_sets for policy in ("heartbeat", "placeholder")]
    rows = experiment_rows([src], _topology(slaves).slaves, None)
    texts = [(q.db, q.sql) for path in input_files([src]) for txn in group_transactions(read_events(path.read_bytes()))
             if (q := lone_statement(txn.events)) is not None]
    assert len(texts) > 2000 and len(set(texts)) < len(texts) * 0.7
    by_group = {}
    for group, _ in decided:
        by_group[group] = by_group.get(group, 0) + 1
    assert len(by_group) == len(rule_sets)
    assert all(n <= len(set(texts)) for n in by_group.values()), (by_group, len(set(texts)), len(texts))
    assert_same(_streamed(src, slaves), rows)
