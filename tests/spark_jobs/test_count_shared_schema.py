"""Issue #80 goal 4: the rule groups of a count share one schema model, replayed once a unit after
every group decided it (count_walks.answer_all), and answer lone DDL by what its decision reads
(lone_units.LoneUnits.klass, rule_groups.RuleGroup._by_reads). A multi-table UPDATE's updated table follows
the DDL before it: each candidate counted among many is counted as it is alone."""

from __future__ import annotations

from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import pytest

from dumpfilter.codec.transactions import CONTROL
from dumpfilter.rules.evaluate import RuleEngine
from dumpfilter.rules.transaction_filter import KEEP, KEPT, TransactionFilter
from dumpfilter.spark_jobs.tasks.bandwidth import count_chunk
from dumpfilter.spark_jobs.tasks.chunks import Chunk
from dumpfilter.topology import parse_topology
from dumpfilter.workload.generator import FLAVORS, WorkloadSpec, generate
from tests.oracles.chunk_units import read_units
from tests.rules.test_lint_cases import Build

UPDATE = "UPDATE t1 LEFT JOIN t4 ON t1.a = t4.c SET d = {n}"  # BUG#37051: d's table is the one updated
RULES = {"t1": ["replicate-do-table=db.t1"], "t4": ["replicate-do-table=db.t4"],
         "not-t1": ["replicate-ignore-table=db.t1"], "wild": ["replicate-wild-do-table=db.t%"],
         "db": ["replicate-do-db=db"], "other": ["replicate-do-db=other"]}


def _binlog(path):
    """d moves from t4 to t1 between two UPDATEs, in one buffer; scratch DDL of one key class, each
    ALTER naming a column of its own."""
    build = Build("mariadb").q("CREATE DATABASE db")
    build.q("CREATE TABLE t1 (a int, b int)", db="db").q("CREATE TABLE t4 (c int, d int)", db="db")
    build.q("INSERT INTO t1 VALUES (1, 2)", db="db").q(UPDATE.format(n=0), db="db")
    build.q("ALTER TABLE t4 DROP COLUMN d", db="db").q("ALTER TABLE t1 ADD COLUMN d int", db="db")
    build.q(UPDATE.format(n=1), db="db")
    for n in range(6):
        build.q(f"ALTER TABLE t{1 + 3 * (n % 2)} ADD COLUMN e{n} int", db="db")
    build.q(UPDATE.format(n=2), db="db")
    return build.write(path)


def _topology(names):
    slaves = []
    for k, (name, policy) in enumerate(names):
        rules = ", ".join(f'"{rule}"' for rule in RULES[name])
        slaves.append(f'[[slaves]]\nname = "{name}-{policy}"\nserver_id = {10 + k}\nskip_policy = "{policy}"\n'
                      f'rules = [{rules}]\n')
    return parse_topology("\n".join(slaves))


def _count(path, names):
    """Every slave of `names` counted in one count, in a thread of its own (a thread's rule
    engines and schema model are its own: bandwidth._rule_group)."""
    chunk = Chunk(0, str(path), 0)
    with ThreadPoolExecutor(1) as pool:
        got = pool.submit(count_chunk, chunk, _topology(names).slaves).result()
    return {c.counts.slave: (c.counts.bytes_sent, c.counts.events_sent, c.counts.kept_bytes) for c in got}


def test_each_candidate_counted_among_many_as_alone(tmp_path):
    path = _binlog(tmp_path / "m-bin.000001")
    names = [(name, policy) for name in RULES for policy in ("heartbeat", "empty-transaction")]
    together = _count(path, names)
    alone = {}
    for name, policy in names:
        alone.update(_count(path, [(name, policy)]))
    assert together == alone
    # The UPDATEs go where d is: the first to t4's slave, the later two to t1's.
    assert len(together) == len(names) and together["t1-heartbeat"] != together["t4-heartbeat"]


def test_the_updates_go_where_the_schema_before_them_puts_d(tmp_path):
    """Each slave is sent as itself what a rule engine of its own, replaying the DDL in stream order
    (the filter's way), keeps: the first UPDATE to t4's slave, the later ones to t1's."""
    path = _binlog(tmp_path / "m-bin.000001")
    names = [(name, "heartbeat") for name in RULES]
    got = _count(path, names)
    kept = {}
    for name, _ in names:
        want, results = _kept_alone(path, name)
        kept[name] = [txn.events[1].sql for txn, r in results if r.outcome == KEPT and "JOIN" in (txn.events[1].sql or "")]
        assert got[f"{name}-heartbeat"][2] == want, name
    assert kept["t4"] == [UPDATE.format(n=0)] and kept["t1"] == [UPDATE.format(n=1), UPDATE.format(n=2)]


def _kept_alone(path, name):
    """The bytes a rule engine of its own keeps of each unit (the filter's way, one unit at a time),
    and each unit's answer."""
    spec = _topology([(name, "heartbeat")]).slaves[0]
    tfilter = TransactionFilter(RuleEngine(spec.rules, spec.settings), empty_transactions=KEEP)
    results = [(txn, tfilter.filter(txn)) for txn in read_units(Chunk(0, str(path), 0))]
    return sum(e.size for txn, r in results for e in (txn.events if txn.kind == CONTROL else r.events)
               if txn.kind == CONTROL or r.outcome == KEPT), results


def test_a_tables_ddl_and_statements_of_every_kind_are_one_decision(tmp_path, monkeypatch):
    """rpl_filter.cc reads no statement's kind but a database statement's, a transaction's, an
    account statement's and the trigger DDL's and multi-table UPDATE's (`RuleEngine.KINDS_READ`):
    a table's CREATE, ALTER, CREATE INDEX, DROP and a lone INSERT are one class per rule group,
    decided once (`RuleGroup._by_reads`), a CREATE DATABASE one of its own, and each slave keeps
    what it keeps deciding each unit alone."""
    from dumpfilter.spark_jobs.tasks.rule_groups import RuleGroup

    build = Build("mariadb").q("CREATE DATABASE db")
    for n in range(3):
        for table in ("s", "t1"):
            build.q(f"CREATE TABLE IF NOT EXISTS {table} (a int)", db="db").q(f"INSERT INTO {table} VALUES ({n})", db="db")
            build.q(f"ALTER TABLE {table} ADD COLUMN c{n} int", db="db").q(f"CREATE INDEX i{n} ON {table} (a)", db="db")
            build.q(f"DROP TABLE IF EXISTS {table}", db="db")
        build.q(f"CREATE DATABASE other{n}", db="db")
    path = build.write(tmp_path / "m-bin.000001")
    decided: list[tuple[int, int]] = []
    real = RuleGroup._by_reads
    monkeypatch.setattr(RuleGroup, "_by_reads",
                        lambda self, d, k, txn: decided.append((id(self), d)) or real(self, d, k, txn))
    names = [(name, "heartbeat") for name in ("t1", "not-t1", "wild", "other")]
    got = _count(path, names)
    assert sorted(set(decided)) == sorted(decided)
    # (per group: each table's statements, CREATE DATABASE db and each CREATE DATABASE otherN, whose
    # db_ok reads its name; not the 12 kinds and tables)
    per_group = Counter(group for group, _ in decided)
    assert len(per_group) == 4 and max(per_group.values()) == 2 + 1 + 3
    for name, _ in names:
        assert got[f"{name}-heartbeat"][2] == _kept_alone(path, name)[0], name


def test_a_class_is_decided_once_across_counts(tmp_path, monkeypatch):
    """A thread's rule groups are kept from one count to the next (`bandwidth._rule_group`: a live
    master's pass counts a segment at a time when it keeps up with its streams): counted again,
    the lone DDL's classes are not decided again, and the counts are the same."""
    from dumpfilter.spark_jobs.tasks.rule_groups import RuleGroup

    path = _binlog(tmp_path / "m-bin.000001")
    decided: list[int] = []
    real = RuleGroup._by_reads
    monkeypatch.setattr(RuleGroup, "_by_reads", lambda self, c, k, txn: decided.append(c) or real(self, c, k, txn))
    names = [(name, "heartbeat") for name in RULES]
    chunk, slaves = Chunk(0, str(path), 0), _topology(names).slaves
    with ThreadPoolExecutor(1) as pool:
        first = pool.submit(count_chunk, chunk, slaves).result()
        assert decided
        decided.clear()
        again = pool.submit(count_chunk, chunk, slaves).result()
    assert not decided and [c.counts for c in again] == [c.counts for c in first]


def test_a_tables_verdicts_are_read_once_per_rule_group_for_its_classes(tmp_path, monkeypatch):
    """A scratch table's DDL is one class per kind (CREATE, ALTER, CREATE INDEX, DROP): a rule group
    reads the table's verdicts (`RuleEngine.table_reads`) once for all of them, not once per
    class, and every slave is counted as it is alone."""
    build = Build("mariadb").q("CREATE DATABASE db")
    for n in range(3):
        for table in ("s", "t1"):
            build.q(f"CREATE TABLE IF NOT EXISTS {table} (a int)", db="db")
            build.q(f"ALTER TABLE {table} ADD COLUMN c{n} int", db="db").q(f"CREATE INDEX i{n} ON {table} (a)", db="db")
            build.q(f"DROP TABLE IF EXISTS {table}", db="db")
    path = build.write(tmp_path / "m-bin.000001")
    read: list[tuple[int, tuple[tuple[str, str], ...]]] = []
    real = RuleEngine.table_reads
    monkeypatch.setattr(RuleEngine, "table_reads",
                        lambda self, updated: read.append((id(self), tuple(updated))) or real(self, updated))
    names = [(name, "heartbeat") for name in ("t1", "not-t1", "wild")]
    together = _count(path, names)
    assert sorted(set(read)) == sorted(read)  # (each group, each set of tables: once)
    assert {tables for _, tables in read} == {(), (("db", "s"),), (("db", "t1"),)} and len(read) == 9  # (CREATE DATABASE: ())
    for name in names:
        assert _count(path, [name]) == {k: v for k, v in together.items() if k == f"{name[0]}-heartbeat"}


@pytest.mark.parametrize("flavor", FLAVORS)
@pytest.mark.parametrize("rules", [("t1", "wild", "db"), ("db", "other")])
def test_lone_ddl_bytes_by_table_from_its_class(tmp_path, monkeypatch, flavor, rules):
    """A GTID and one DDL of a class that updates tables puts its bytes by table from the core's
    sizes and the class (`LoneUnits.tally`, summed by class and added once a chunk), not decoded:
    the same tables, envelopes and statements, in the same order, as the unit read one event at a
    time (`_unit_tables`), on a thread's first chunk and on a later one. So too
    under rules on databases alone, whose answers read no class (8 such candidates' count of the
    DDL-heavy binlog: 0.55 s decoding each DDL unit, 0.34 s by classes)."""
    from dumpfilter.spark_jobs.tasks.lone_units import LoneUnits

    paths = generate(WorkloadSpec(seed=80, transactions=800, flavor=flavor, ddl_share=0.25,
                                  binlog_format="mixed"), tmp_path)
    names = [(name, "heartbeat") for name in rules]
    chunk, slaves = Chunk(0, str(paths[0]), 0), _topology(names).slaves
    real, tallied = LoneUnits.tally, []

    def spy(self, left, tables, statements, other):
        passed: list[int] = []
        real(self, left, tables, statements, lambda k: passed.append(k) or other(k))
        tallied.append(len(left) - len(passed))  # (the units of `left` it tallied)

    def counted(times=1):
        with ThreadPoolExecutor(1) as pool:  # (a thread of its own: its rule groups are new)
            for _ in range(times):  # (a thread's chunks after the first: its classes' sums start at 0)
                got = pool.submit(count_chunk, chunk, slaves).result()
        return [(list(c.tables.items()), list(c.statements.items()), c.counts) for c in got]

    monkeypatch.setattr(LoneUnits, "tally", spy)
    fast = counted()
    assert sum(tallied) > 50  # the DDL took the class's way
    assert counted(times=2) == fast
    monkeypatch.setattr(LoneUnits, "tally", lambda self, left, tables, statements, other: [other(k) for k in left])
    assert counted() == fast


def test_a_lone_text_met_again_is_not_parsed_again(tmp_path, monkeypatch):
    """A DDL workload repeats its scratch tables' CREATE and DROP: the core numbers each such text
    (`LoneUnits.core_classes`), and Python parses it once; its ALTERs, each a text of its own, are
    one class the core reads, met once. A number answered, its later units are answered by the
    core: a thread's next chunk hands Python no unit. And the counts are those of parsing each
    unit, with the core's numbers or without them (past their bounds), by the texts Python
    remembers (`LoneUnits.texts`)."""
    from dumpfilter.spark_jobs.tasks import lone_units

    build = Build("mariadb").q("CREATE DATABASE db")
    for n in range(5):
        build.q("CREATE TABLE IF NOT EXISTS s (a int)", db="db").q(f"ALTER TABLE s ADD COLUMN c{n} int", db="db")
        build.q("DROP TABLE IF EXISTS s", db="db")
    path = build.write(tmp_path / "m-bin.000001")
    parsed: list[str] = []
    real = lone_units.core_class  # (every text's first reader)
    monkeypatch.setattr(lone_units, "core_class", lambda sql, db, skip: parsed.append(sql) or real(sql, db, skip))
    classes: list[int] = []
    by_class = lone_units.LoneUnits._core_class
    monkeypatch.setattr(lone_units.LoneUnits, "_core_class",
                        lambda self, db, core: classes.append(core) or by_class(self, db, core))
    handed: list[int] = []  # the LoneQuery records each buffer hands Python
    read = lone_units.LoneUnits._read

    def counted_read(self):
        found = self.read
        if found is not None:
            self.read = lambda: (got := found()) and handed.append(len(got.others)) or got
        read(self)

    monkeypatch.setattr(lone_units.LoneUnits, "_read", counted_read)
    names = [(name, "heartbeat") for name in ("t1", "wild", "db")]
    chunk, slaves = Chunk(0, str(path)), _topology(names).slaves
    with ThreadPoolExecutor(1) as pool:  # (one thread: its LoneUnits held from one chunk to the next)
        first = pool.submit(count_chunk, chunk, slaves).result()
        assert sorted(parsed) == sorted(set(parsed)) and len(parsed) == 3  # CREATE DATABASE, CREATE, DROP
        assert len(classes) == 1  # the five ALTERs' one class
        assert sum(handed) == 16  # (every unit met first in the chunk's one buffer)
        handed.clear()
        again = pool.submit(count_chunk, chunk, slaves).result()
        assert sum(handed) == 0 and len(parsed) == 3 and len(classes) == 1
    assert [(c.counts, c.tables, c.statements) for c in again] == [(c.counts, c.tables, c.statements) for c in first]
    once = _count(path, names)
    # No number read by the core (its bounds passed): each text parsed, remembered by text.
    buffer = lone_units.LoneUnits.buffer

    def by_text(self, units, formats, txn):
        buffer(self, units, formats, txn)
        self.read = lambda: units.lone_queries(formats, every=True)

    monkeypatch.setattr(lone_units.LoneUnits, "buffer", by_text)
    parsed.clear()
    assert _count(path, names) == once and len(parsed) == 8  # (CREATE DATABASE, CREATE, DROP, each ALTER)
    monkeypatch.setattr(lone_units, "_TEXTS_CHARS", 100)  # three texts at a time: some parsed again
    parsed.clear()
    assert _count(path, names) == once and 8 < len(parsed) < 16
    monkeypatch.setattr(lone_units, "_TEXT_MAX", -1)  # nothing remembered: each unit parsed
    parsed.clear()
    assert _count(path, names) == once and len(parsed) == 16


@pytest.mark.parametrize("read_bytes", [128, 256])
def test_ddl_of_a_buffer_no_group_leaves_moves_the_next_buffers_updates(tmp_path, monkeypatch, read_bytes):
    """Buffers of a few units each: a buffer of DDL alone leaves no unit to any rule group, and
    `answer_all` replays it into the shared schema model on its own, in stream order. The later
    buffers' multi-table UPDATEs are still decided under the schema it leaves, and each slave keeps
    what a rule engine of its own keeps deciding unit by unit."""
    from dumpfilter.spark_jobs.tasks import chunks

    monkeypatch.setattr(chunks, "READ_BYTES", read_bytes)
    path = _binlog(tmp_path / "m-bin.000001")
    names = [(name, "heartbeat") for name in RULES]
    got = _count(path, names)
    for name, _ in names:
        assert got[f"{name}-heartbeat"][2] == _kept_alone(path, name)[0], name


def test_lone_statements_of_several_tables_share_their_gtid_as_one_unit_at_a_time(tmp_path):
    """A lone statement's bytes by table are summed by class over a chunk (`LoneUnits.tally`): a
    DROP TABLE of five tables gives each its share of the GTID event and the first what the
    division leaves, as the bytes of each unit put alone (`_unit_tables`) do."""
    from dumpfilter.spark_jobs.tasks.statement_tables import _unit_tables

    build = Build("mariadb").q("CREATE DATABASE db")
    for _ in range(4):
        for table in "abcde":
            build.q(f"CREATE TABLE IF NOT EXISTS {table} (x int)", db="db")
        build.q("DROP TABLE IF EXISTS a, b, c, d, e", db="db")
    path = build.write(tmp_path / "m-bin.000001")
    chunk = Chunk(0, str(path), 0)
    with ThreadPoolExecutor(1) as pool:
        got = pool.submit(count_chunk, chunk, _topology([("db", "heartbeat")]).slaves).result()[0]
    tables: dict = {}
    statements: dict = {}
    for txn in read_units(chunk):
        _unit_tables(txn, tables, statements)
    enveloped = {key: size for key, size in tables.items() if key[0] == "(envelope)"}
    assert {key: size for key, size in got.tables.items() if key[0] == "(envelope)"} == enveloped
    assert got.statements == statements
    drops = [size for key, size in enveloped.items() if key[2][1] == "DROP_TABLE"]
    assert len(drops) == 5 and drops[0] > drops[1] == drops[4]  # (42-byte GTIDs: 8 each, 2 left to the first)
