"""Issue #43: statement-logged binlogs through the compiled assembly, and `--out DIR` on the same
path as `-o FILE`.

* The assembly decides statement units (a GTID, Queries with their context events, an XID or
  COMMIT) from per-key answers: the bytes written, the statistics and every rule-hit counter are
  those of the reference path (each unit through TransactionFilter, every statement decided on
  its own), into one file and into a series at any size limit, MariaDB and MySQL, with empty
  transactions kept or dropped.
* Work is bounded: at most 1% of a statement workload's statements are decided in Python.
* A series sink is written by the assembly (the Python per-unit writes are counted)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from dumpfilter.binlogs.filtering import filter_files
from dumpfilter.binlogs.sinks import FileSink, SeriesSink
from dumpfilter.rules.decider import Decider
from dumpfilter.rules.evaluate import RuleEngine
from dumpfilter.rules.ruleset import RuleSet, Settings
from dumpfilter.rules.transaction_filter import TransactionFilter
from dumpfilter.workload import WorkloadSpec, generate

RULES = [
    {"do_db": ["db1"]},
    {"ignore_db": ["db2"]},
    {"do_table": ["db1.t1", "db2.t2"]},
    {"ignore_table": ["db1.t2"], "wild_ignore_table": ["db3.%"]},
    {"wild_do_table": ["db%.t1"], "rewrite_db": [["db1", "db2"]]},
]


class PerStatement(Decider):
    """The reference: the engine's answers, every statement decided on its own (no keys)."""

    def __init__(self, engine: RuleEngine):
        self.engine = engine
        self.asked = 0

    def decide_table(self, db, table):
        return self.engine.decide_table(db, table)

    def table_kept(self, db, table):
        return self.engine.table_kept(db, table)

    def decide_statement(self, sql, current_db):
        self.asked += 1
        return self.engine.decide_statement(sql, current_db)

    def invalidate(self):
        self.engine.invalidate()

    @property
    def unparsed(self):
        return self.engine.unparsed


class Counting(RuleEngine):
    """The engine as `filter` uses it, counting the statements decided in Python."""

    asked = 0
    keyed = 0  # of them, the keys' decisions (rules.keep_table)

    def decide_statement(self, sql, current_db, at=None, parses=None):
        self.asked += 1
        return super().decide_statement(sql, current_db, at, parses)

    def decide_statement_key(self, sql, current_db, parses=None):
        self.keyed += 1
        return super().decide_statement_key(sql, current_db, parses)


def _rules(rules: dict) -> RuleSet:
    rules = dict(rules)
    if "rewrite_db" in rules:
        rules["rewrite_db"] = [tuple(pair) for pair in rules["rewrite_db"]]
    return RuleSet(**rules)


@pytest.fixture(scope="module")
def binlogs(tmp_path_factory) -> dict:
    made = {}
    for flavor in ("mariadb", "mysql"):
        for fmt in ("statement", "mixed"):
            # Several input files: each file's scanner numbers its statement keys afresh.
            spec = WorkloadSpec(seed=4343, schemas=4, tables_per_schema=3, transactions=700, binlog_format=fmt,
                                flavor=flavor, ddl_share=0.05, cross_db_share=0.3, statements_per_transaction=3,
                                max_binlog_size=60_000, insert_select_share=0.25)
            made[flavor, fmt] = generate(spec, tmp_path_factory.mktemp(f"{flavor}-{fmt}"), "b")
    return made


def _digest(directory: Path) -> str:
    h = hashlib.sha256()
    for path in sorted(directory.iterdir()):
        h.update(path.name.encode() + b"\0" + path.read_bytes())
    return h.hexdigest()


def _run(paths: list[Path], decider, out: Path, max_size: int | None, empty: str):
    tfilter = TransactionFilter(decider, empty_transactions=empty)
    out.mkdir()
    sink = FileSink(out / "o.bin") if max_size is None else SeriesSink(out, "o", max_size=max_size)
    stats = filter_files(paths, tfilter, sink).as_dict()
    return _digest(out), {k: v for k, v in stats.items() if k not in ("statements_by_key", "statement_keys")}


@pytest.mark.parametrize("flavor,fmt", [("mariadb", "statement"), ("mariadb", "mixed"), ("mysql", "statement"),
                                        ("mysql", "mixed")])
@pytest.mark.parametrize("rules", RULES, ids=lambda r: "+".join(r))
def test_the_same_bytes_and_counters_as_the_reference_path(binlogs, tmp_path, flavor, fmt, rules):
    path = binlogs[flavor, fmt]
    assert len(path) > 3
    settings = Settings(flavor=flavor)
    for max_size, empty in ((None, "keep"), (None, "drop"), (1, "keep"), (9000, "drop"), (20000, "keep")):
        engine = RuleEngine(_rules(rules), settings)
        reference = RuleEngine(_rules(rules), settings)
        tag = f"{max_size}-{empty}"
        got = _run(path, engine, tmp_path / f"keys-{tag}", max_size, empty)
        want = _run(path, PerStatement(reference), tmp_path / f"ref-{tag}", max_size, empty)
        assert got == want, tag
        assert (dict(engine.counters), engine.assumed, engine.unparsed) == \
            (dict(reference.counters), reference.assumed, reference.unparsed), tag


@pytest.mark.parametrize("rules", [{"do_db": ["db1"]}, {"do_table": ["db1.t1", "db2.t2"]}], ids=str)
def test_at_most_one_statement_in_a_hundred_is_decided_in_python(tmp_path, rules):
    """A sysbench-like statement workload (MariaDB, single-table DML, cross-database ones too, the
    schema's DDL at its start): each key is decided once, and what the core cannot read (here the
    DDL) goes to Python. On the code before issue #43 every statement was decided in Python."""
    spec = WorkloadSpec(seed=4344, schemas=4, tables_per_schema=3, transactions=1500, binlog_format="statement",
                        flavor="mariadb", ddl_share=0.0, cross_db_share=0.3, statements_per_transaction=3,
                        insert_select_share=0.25)
    path = generate(spec, tmp_path / "in", "b")[0]
    engine = Counting(_rules(rules), Settings(flavor="mariadb"))
    stats = filter_files([path], TransactionFilter(engine), FileSink(tmp_path / "o.bin"))
    by_python = engine.asked - engine.keyed  # decided on their own: the Python parser's
    statements = stats.statements_by_key + by_python
    assert statements >= 4500
    assert by_python <= 0.01 * statements, (by_python, statements)
    # A key stands for (kind, default database, table): a few dozen here, each decided once; rules
    # on databases alone ask once per default database (four schemas, or none).
    assert stats.statement_keys <= 3 * 4 * 4 * 12
    assert engine.keyed <= (5 if "do_db" in rules else stats.statement_keys)


def test_a_series_is_written_by_the_assembly(tmp_path, monkeypatch):
    """`filter --out DIR`: the units go into the series' files from the compiled assembly; only
    the unit that opens each file (and control events) goes through the sink's Python writes. On
    the code before issue #43 every unit did."""
    spec = WorkloadSpec(seed=9, schemas=4, tables_per_schema=2, transactions=3000, binlog_format="row",
                        flavor="mariadb", ddl_share=0.0)
    path = generate(spec, tmp_path / "in", "b")[0]
    calls = []
    for name in ("write", "write_raw"):
        original = getattr(SeriesSink, name)
        monkeypatch.setattr(SeriesSink, name, lambda self, *a, _o=original, _n=name: (calls.append(_n), _o(self, *a))[1])
    engine = RuleEngine(RuleSet(do_db=("db1",)), Settings(flavor="mariadb"))
    out = tmp_path / "out"
    stats = filter_files([path], TransactionFilter(engine), SeriesSink(out, "o", max_size=50_000))
    files = len(list(out.glob("o.0*")))
    assert files > 3 and stats.transactions_in >= 3000
    units = [c for c in calls if c != "write"]
    assert len(units) <= files, (len(units), files)
