"""Silent divergence (issue #60 goal 1) against real replicas: a MariaDB primary in STATEMENT or
MIXED format runs cross-database writes (`USE logs; UPDATE crm.t ...`, `USE crm; UPDATE logs.t ...`)
among ordinary ones; a real replica with `replicate-do-db=crm` replicates them. The rows of the kept
table crm.t that differ between that replica and the primary are exactly the writes lint names as
lost, and the rows of logs.t the replica changed are exactly the writes lint names as applied to a
table the rules do not keep. A `replicate-wild-do-table=crm.%` replica, which lint says does not
diverge, equals the primary on crm. `experiment --candidates` ranks the diverging candidate after
the one that does not, whatever it saves.

Both tables are seeded outside replication (sql_log_bin=0 on the primary, the same rows on the
replica, as a dump would), so lint takes them to exist on both sides."""

from __future__ import annotations

import json
import random
import re

import pytest

from dumpfilter.binlogs.lint import new_linter
from dumpfilter.binlogs.lint_scan import lint_scan
from dumpfilter.cli.app import main
from dumpfilter.lab.sandbox import make_replica, wait_caught_up
from dumpfilter.rules.ruleset import RuleSet, Settings
from dumpfilter.rules.schema import SchemaModel
from dumpfilter.spark_jobs.bandwidth_experiment import run_experiment
from dumpfilter.topology import parse_topology
from tests.oracles.lint import reference_feed

pytestmark = pytest.mark.mariadb

ROWS = 60
SEED = ["CREATE DATABASE crm", "CREATE DATABASE logs",
        "CREATE TABLE crm.t (id INT PRIMARY KEY, v INT NOT NULL)",
        "CREATE TABLE logs.t (id INT PRIMARY KEY, v INT NOT NULL)",
        f"INSERT INTO crm.t SELECT seq, 0 FROM crm.seq_1_to_{ROWS}",
        f"INSERT INTO logs.t SELECT seq, 0 FROM logs.seq_1_to_{ROWS}"]
_FILTER_VARS = ("replicate_do_db", "replicate_wild_do_table")
_ID = re.compile(r"WHERE id = (\d+)|VALUES \((\d+),")


def workload(seed: int) -> list[str]:
    """Statements of the shapes real applications write, each cross-database write on a row of its
    own (so each lost or misapplied write is one row): ordinary writes under their own database,
    cross-database UPDATEs both ways, a cross-database INSERT, a transaction mixing them, and an
    UPDATE ... LIMIT (unsafe: rows under MIXED, a statement under STATEMENT)."""
    rng = random.Random(seed)
    ids = list(range(1, ROWS + 1))
    rng.shuffle(ids)
    out: list[str] = []
    for n in range(1, 41):
        shape = rng.randrange(7)
        if shape == 0:
            out += ["USE logs", f"UPDATE crm.t SET v = v + {n} WHERE id = {ids.pop()}"]
        elif shape == 1:
            out += ["USE crm", f"UPDATE logs.t SET v = v + {n} WHERE id = {ids.pop()}"]
        elif shape == 2:
            out += ["USE crm", f"UPDATE t SET v = v + {n} WHERE id = {rng.randint(1, ROWS)}"]
        elif shape == 3:
            out += ["USE logs", f"UPDATE t SET v = v + {n} WHERE id = {rng.randint(1, ROWS)}"]
        elif shape == 4:
            out += ["USE logs", f"INSERT INTO crm.t VALUES ({1000 + n}, {n})"]
        elif shape == 5:
            out += ["BEGIN", "USE logs", f"UPDATE crm.t SET v = v + {n} WHERE id = {ids.pop()}", "USE crm",
                    f"INSERT INTO t VALUES ({2000 + n}, {n})", "COMMIT"]
        else:
            out += ["USE logs", f"UPDATE crm.t SET v = v + {n} WHERE id = {ids.pop()} LIMIT 1"]
    return out


def user_databases(server) -> list[str]:
    rows = server.query("SELECT SCHEMA_NAME AS s FROM information_schema.SCHEMATA")
    return [r["s"] for r in rows if r["s"] not in ("mysql", "information_schema", "performance_schema", "sys")]


def rows_of(server, table: str) -> dict[int, int]:
    return {r["id"]: r["v"] for r in server.query(f"SELECT id, v FROM {table}")}


def written_ids(statements) -> set[int]:
    return {int(a or b) for s in statements for a, b in _ID.findall(s)}


@pytest.fixture(scope="module")
def servers(mariadb_factory):
    return mariadb_factory("div-primary"), mariadb_factory("div-replica", log_bin=False)


def _replicate(primary, replica, option: str, value: str) -> None:
    replica.execute(["STOP SLAVE", "RESET SLAVE ALL"])
    replica.execute([f"DROP DATABASE `{n}`" for n in user_databases(replica)] + SEED)
    replica.execute([f"SET GLOBAL {name} = '{value if name == option else ''}'" for name in _FILTER_VARS])
    make_replica(primary, replica)
    status = wait_caught_up(primary, replica, timeout=60)
    assert status.caught_up, status.describe()


@pytest.mark.parametrize("fmt", ["STATEMENT", "MIXED"])
def test_the_writes_lint_names_are_the_rows_that_differ(servers, capsys, tmp_path, fmt):
    primary, replica = servers
    primary.execute(["SET SESSION sql_log_bin = 0", *[f"DROP DATABASE `{n}`" for n in user_databases(primary)],
                     *SEED])
    primary.reset_master()
    primary.execute([f"SET SESSION binlog_format = '{fmt}'", *workload(60)])
    primary.flush_logs()
    binlogs = [str(p) for p in primary.binlog_files()]
    settings = Settings(flavor="mariadb")

    # Every write lint names (the Python API keeps them all; the CLI the first few of each rule).
    linter = new_linter(RuleSet(do_db=("crm",)), settings)
    linter.breaks.divergence.keep = 10_000
    breaks = lint_scan(binlogs, [linter])[0]
    assert breaks == [], breaks
    groups = {g.kind: g for g in breaks.divergence.groups.values()}
    assert set(groups) <= {"lost", "applied"} and all(g.rule == "replicate-do-db" for g in groups.values())
    lost = groups["lost"].writes if "lost" in groups else []
    applied = groups["applied"].writes if "applied" in groups else []
    assert len(lost) == groups["lost"].count and len(applied) == groups["applied"].count
    assert all(w.db == "logs" and w.tables == ("crm.t",) for w in lost)
    assert all(w.db == "crm" and w.tables == ("logs.t",) for w in applied)

    capsys.readouterr()
    code = main(["lint", *binlogs, "--replicate-do-db=crm", "--json"])
    report = json.loads(capsys.readouterr().out)
    assert code == 0 and report["breaks"] == []
    assert report["divergence"]["writes"] == len(lost) + len(applied) > 0
    by_kind = {r["kind"]: r for r in report["divergence"]["rules"]}
    assert by_kind["lost"]["writes"] == len(lost) and "--replicate-wild-do-table=crm.%" in by_kind["lost"]["fix"]
    assert "'logs' for crm" in by_kind["lost"]["cause"] and len(by_kind["lost"]["first"]) == min(5, len(lost))
    first = by_kind["lost"]["first"][0]
    assert (first["file"], first["pos"]) == (lost[0].file, lost[0].pos)
    capsys.readouterr()
    main(["lint", *binlogs, "--replicate-do-db=crm"])
    text = capsys.readouterr().out
    assert f"{len(lost) + len(applied)} write(s) silently diverge" in text and f"{lost[0].file}:{lost[0].pos}" in text

    # The real replica with replicate-do-db=crm.
    _replicate(primary, replica, "replicate_do_db", "crm")
    on_primary, on_replica = rows_of(primary, "crm.t"), rows_of(replica, "crm.t")
    differ = {i for i in on_primary.keys() | on_replica.keys() if on_primary.get(i) != on_replica.get(i)}
    assert differ == written_ids(w.statement for w in lost)
    assert len(differ) == len(lost)  # each lost write on a row of its own
    changed = {i for i, v in rows_of(replica, "logs.t").items() if v != 0}
    assert changed == written_ids(w.statement for w in applied) and len(changed) == len(applied)

    # The wild-do-table form: lint sees no divergence, and the replica equals the primary on crm.
    capsys.readouterr()
    main(["lint", *binlogs, "--replicate-wild-do-table=crm.%", "--json"])
    report = json.loads(capsys.readouterr().out)
    assert report["breaks"] == [] and report["divergence"]["writes"] == 0
    _replicate(primary, replica, "replicate_wild_do_table", "crm.%")
    assert rows_of(replica, "crm.t") == rows_of(primary, "crm.t")
    assert set(rows_of(replica, "logs.t").values()) == {0}

    # experiment --candidates: the diverging candidate after the one that does not, whatever it saves.
    candidates = parse_topology('[[slaves]]\nname = "do-db"\nserver_id = 10\nrules = ["replicate-do-db=crm"]\n'
                                '[[slaves]]\nname = "wild"\nserver_id = 11\nrules = ["replicate-wild-do-table=crm.%"]\n')
    ranking: list[dict] = []
    inputs = tmp_path / "in"
    inputs.mkdir()
    for path in primary.binlog_files():
        (inputs / path.name).write_bytes(path.read_bytes())
    run_experiment(inputs, parse_topology('[[slaves]]\nname = "all"\nserver_id = 2\nrules = []\n'),
                   tmp_path / "out", candidates=candidates, ranking=ranking, charts=False)
    row = {r["candidate"]: r for r in ranking}
    assert row["do-db"]["bytes_saved"] > row["wild"]["bytes_saved"]  # by bytes alone do-db would come first
    assert [r["candidate"] for r in ranking] == ["wild", "do-db"]
    assert row["do-db"]["diverges"] == len(lost) + len(applied) and row["wild"]["diverges"] == 0
    assert f"diverges: {len(lost) + len(applied)} writes" in row["do-db"]["lint"]


# ---------------------------------------------------------------------------------------------------
# #81 goal 2: multi-table UPDATE and DELETE kept or skipped whole, every written table counted, table
# rules that skip a whole statement, and replicate-rewrite-db under STATEMENT and MIXED (the default
# database only) against ROW (the table's database). The truth is each replica table's rows: a table
# the rules keep against the primary's (under rewrite-db, the rewritten database's copy), any other
# against the seed; each differing row names the statement that wrote it.

TABLES = ("shop.t1", "crm.t1", "logs.t1", "arch.t3", "crm.t3")
SPREAD = 20


def _seed(extra_dbs: tuple[str, ...] = ()) -> list[str]:
    dbs = sorted({t.split(".")[0] for t in TABLES})
    out = [f"CREATE DATABASE {db}" for db in (*dbs, *extra_dbs)]
    for db in (*dbs, *extra_dbs):
        for table in sorted({t.split(".")[1] for t in TABLES if t.split(".")[0] == (db if db in dbs else "crm")}):
            out += [f"CREATE TABLE {db}.{table} (id INT PRIMARY KEY, v INT NOT NULL)",
                    f"INSERT INTO {db}.{table} SELECT seq, 0 FROM {db}.seq_1_to_{SPREAD}"]
    return out


def _multi(shape: str, n: int, k: int) -> tuple[list[str], list[tuple[str, int]]]:
    """One statement of `shape` ('USE db; text' with {n} the statement's number and {k} its row):
    (the statements to run, the (table, id) rows it writes on the primary)."""
    use, _, text = shape.partition("; ")
    sql = text.format(n=n, k=k)
    written = [(table, int(key)) for table, key in re.findall(r"#(\w+\.\w+)@(\d+)", sql)]
    return [use, re.sub(r"\s*/\*#[^*]*\*/", "", sql)], written


_TRIGGERS = ["USE crm", "CREATE TRIGGER tr AFTER UPDATE ON t1 FOR EACH ROW UPDATE arch.t3 SET v = NEW.v WHERE id = NEW.id",
             "USE logs", "CREATE TRIGGER tr AFTER UPDATE ON t1 FOR EACH ROW UPDATE crm.t3 SET v = NEW.v WHERE id = NEW.id"]
# (id, RuleSet, the replica's variables, the primary tables the rules keep, rewrite map, statement shapes).
# Each shape names the rows it writes in a trailing comment (#table@id), dropped before it runs.
DIVERGENCE_CASES = [
    ("multi-table-do-db", RuleSet(do_db=("crm",)), {"replicate_do_db": "crm"}, {"crm.t1", "crm.t3"}, {}, [
        "USE shop; UPDATE logs.t1 a JOIN crm.t1 b ON a.id = b.id SET a.v = {n}, b.v = {n} WHERE a.id = {k}"
        " /*#logs.t1@{k} #crm.t1@{k}*/",
        "USE shop; DELETE a, b FROM arch.t3 a JOIN crm.t3 b ON a.id = b.id WHERE a.id = {k} /*#arch.t3@{k} #crm.t3@{k}*/",
        "USE crm; UPDATE crm.t1 a JOIN logs.t1 b ON a.id = b.id SET a.v = {n}, b.v = {n} WHERE a.id = {k}"
        " /*#crm.t1@{k} #logs.t1@{k}*/",
        "USE crm; UPDATE crm.t1 a JOIN logs.t1 b ON a.id = b.id SET a.v = {n} WHERE a.id = {k} /*#crm.t1@{k}*/",
        "USE crm; UPDATE t1 SET v = {n} WHERE id = {k} /*#crm.t1@{k}*/"]),
    ("multi-table-ignore-table", RuleSet(ignore_table=("logs.t1",)), {"replicate_ignore_table": "logs.t1"},
     set(TABLES) - {"logs.t1"}, {}, [
        "USE crm; UPDATE logs.t1 a JOIN shop.t1 b ON a.id = b.id SET a.v = {n}, b.v = {n} WHERE a.id = {k}"
        " /*#logs.t1@{k} #shop.t1@{k}*/",
        "USE crm; UPDATE shop.t1 a JOIN logs.t1 b ON a.id = b.id SET a.v = {n}, b.v = {n} WHERE a.id = {k}"
        " /*#shop.t1@{k} #logs.t1@{k}*/",
        "USE shop; DELETE a, b FROM logs.t1 a JOIN arch.t3 b ON a.id = b.id WHERE a.id = {k} /*#logs.t1@{k} #arch.t3@{k}*/",
        "USE crm; UPDATE shop.t1 SET v = {n} WHERE id = {k} /*#shop.t1@{k}*/"]),
    ("multi-table-wild-do", RuleSet(wild_do_table=("crm.%",)), {"replicate_wild_do_table": "crm.%"},
     {"crm.t1", "crm.t3"}, {}, [
        "USE crm; UPDATE crm.t1 a JOIN logs.t1 b ON a.id = b.id SET a.v = {n}, b.v = {n} WHERE a.id = {k}"
        " /*#crm.t1@{k} #logs.t1@{k}*/",
        "USE shop; UPDATE logs.t1 a JOIN crm.t1 b ON a.id = b.id SET a.v = {n}, b.v = {n} WHERE a.id = {k}"
        " /*#logs.t1@{k} #crm.t1@{k}*/",
        "USE shop; UPDATE crm.t3 SET v = {n} WHERE id = {k} /*#crm.t3@{k}*/"]),
    ("rewrite-db", RuleSet(rewrite_db=(("crm", "crm_rw"),)), {"replicate_rewrite_db": "crm->crm_rw"},
     set(TABLES), {"crm": "crm_rw"}, [
        "USE crm; UPDATE crm.t3 SET v = {n} WHERE id = {k} /*#crm.t3@{k}*/",
        "USE crm; UPDATE t3 SET v = {n} WHERE id = {k} /*#crm.t3@{k}*/",
        "USE shop; UPDATE crm.t1 SET v = {n} WHERE id = {k} /*#crm.t1@{k}*/",
        "USE crm; INSERT INTO crm.t3 VALUES ({k} + 100, {n}) /*#crm.t3@{k}*/",
        "USE shop; UPDATE shop.t1 SET v = {n} WHERE id = {k} /*#shop.t1@{k}*/"]),
    # Triggers both ways (created in the binlog: the replica has crm's, not logs'): a kept UPDATE fires
    # crm.t1's trigger, which writes arch.t3, a table do-db=crm does not keep; a skipped one loses
    # what logs.t1's trigger wrote into crm.t3.
    ("triggers", RuleSet(do_db=("crm",)), {"replicate_do_db": "crm"}, {"crm.t1", "crm.t3"}, {}, [
        "USE crm; UPDATE t1 SET v = {n} WHERE id = {k} /*#crm.t1@{k} #arch.t3@{k}*/",
        "USE logs; UPDATE t1 SET v = {n} WHERE id = {k} /*#logs.t1@{k} #crm.t3@{k}*/"],
     _TRIGGERS),
    # The same triggers made outside replication on both servers (a dump's), known to lint from --schema.
    ("triggers-from-schema", RuleSet(do_db=("crm",)), {"replicate_do_db": "crm"}, {"crm.t1", "crm.t3"}, {}, [
        "USE crm; UPDATE t1 SET v = {n} WHERE id = {k} /*#crm.t1@{k} #arch.t3@{k}*/",
        "USE logs; UPDATE t1 SET v = {n} WHERE id = {k} /*#logs.t1@{k} #crm.t3@{k}*/"], None),
]
_REPLICA_VARS = ("replicate_do_db", "replicate_ignore_table", "replicate_wild_do_table", "replicate_rewrite_db")
DIVERGENCE_ROWS = [(case, fmt) for case in DIVERGENCE_CASES for fmt in ("STATEMENT", "MIXED", "ROW")]


def _divergence_workload(shapes: list[str]) -> tuple[list[str], dict[str, int], dict[tuple[str, int], int]]:
    """Each shape three times, on rows of their own: (the statements, statement text -> its number,
    (table, id) -> the number of the statement that wrote it)."""
    out, numbers, writer = [], {}, {}
    n = 0
    for _round in range(3):
        for shape in shapes:
            n += 1
            k = n  # one row per statement: ids 1..SPREAD
            run, written = _multi(shape, n, k)
            out += run
            numbers[run[1]] = n
            for table, key in written:
                writer[(table, key + 100 if "VALUES" in run[1] else key)] = n
    return out, numbers, writer


def _image(table: str, rewrite: dict[str, str]) -> str:
    db, _, name = table.partition(".")
    return f"{rewrite.get(db, db)}.{name}"


@pytest.mark.parametrize(("case", "fmt"), DIVERGENCE_ROWS, ids=[f"{c[0]}-{f}" for c, f in DIVERGENCE_ROWS])
def test_each_divergent_write_is_a_row_the_replica_gets_wrong(servers, case, fmt):
    case_id, rules, variables, kept, rewrite, shapes, *setup = case
    primary, replica = servers
    statements, numbers, writer = _divergence_workload(shapes)
    in_binlog = setup[0] if setup and setup[0] is not None else []
    in_seed = _TRIGGERS if setup and setup[0] is None else []  # made outside replication, given as --schema
    statements = [*in_binlog, *statements]
    assert len(numbers) * 1 <= SPREAD
    primary.execute(["SET SESSION sql_log_bin = 0", *[f"DROP DATABASE `{n}`" for n in user_databases(primary)],
                     *_seed(), *in_seed])
    primary.reset_master()
    primary.execute([f"SET SESSION binlog_format = '{fmt}'", *statements])
    primary.flush_logs()
    binlogs = [str(p) for p in primary.binlog_files()]

    # Lint: the compiled scan and every unit through the Linter give the same writes.
    settings = Settings(flavor="mariadb")
    schema = SchemaModel.from_sql(";\n".join([*_seed(), *in_seed]) + ";\n") if in_seed else None
    linter = new_linter(rules, settings, schema)
    linter.breaks.divergence.keep = 10_000
    breaks = lint_scan(binlogs, [linter])[0]
    reference = new_linter(rules, settings, schema)
    reference.breaks.divergence.keep = 10_000
    reference_feed(binlogs, reference)
    assert breaks == [] and list(reference.breaks) == []

    def said(divergence) -> set[tuple[int, str]]:
        out = set()
        for group in divergence.groups.values():
            assert group.count == len(group.writes)
            for w in group.writes:
                n = numbers[w.statement]
                out |= {(n, _image(t, rewrite) if group.kind != "applied" else t) for t in w.tables}
                out |= {(n, t) for t in getattr(w, "landed", ())}  # (no such field before #81)
        return out

    lint_says = said(breaks.divergence)
    assert lint_says == said(reference.breaks.divergence)

    # The real replica with the same rules.
    replica.execute(["STOP SLAVE", "RESET SLAVE ALL"])
    replica.execute([f"DROP DATABASE `{n}`" for n in user_databases(replica)] + _seed(tuple(rewrite.values())) + in_seed)
    replica.execute([f"SET GLOBAL {name} = '{variables.get(name, '')}'" for name in _REPLICA_VARS])
    make_replica(primary, replica)
    status = wait_caught_up(primary, replica, timeout=60)
    assert status.caught_up, status.describe()
    seed = dict.fromkeys(range(1, SPREAD + 1), 0)
    truth = set()
    images = {_image(t, rewrite): t for t in kept}
    for table in sorted({*TABLES, *images}):
        source = images.get(table)
        expected = rows_of(primary, source) if source else seed
        got = rows_of(replica, table)
        for i in expected.keys() | got.keys():
            if expected.get(i) != got.get(i):
                truth.add((writer[(source or table, i)], table))
    replica.execute(["STOP SLAVE", *[f"SET GLOBAL {name} = ''" for name in _REPLICA_VARS]])
    assert lint_says == truth, (sorted(lint_says - truth), sorted(truth - lint_says))
    if fmt == "STATEMENT":
        assert truth  # every case diverges under STATEMENT
    if fmt == "ROW":
        assert truth == set()  # row events are judged, and land, table by table
