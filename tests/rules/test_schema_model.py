"""The schema model and the decisions that need it (issue #14 part 1). Every engine row cites its source:
a bug number, a research section, or "observed": MariaDB 10.11 replicas in this project's experiment
(ignore-table d.f,d.g / ignore-table d.k / do-table d.k / ignore-table d.t4, STATEMENT format), which
`dumpfilter verify --builtin` (sections 1.12-1.15 of its workload) repeats on every run."""

import json
import subprocess

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from dumpfilter import _core
from dumpfilter.cli.app import main
from dumpfilter.rules.evaluate import RuleEngine
from dumpfilter.rules.ruleset import RuleSet, Settings
from dumpfilter.rules.schema import SchemaModel
from dumpfilter.rules.statement_info import Kind
from dumpfilter.rules.statements import statement_tables
from dumpfilter.rules.trigger_knowledge import TriggerKnowledge

MARIADB = Settings(flavor="mariadb")
MYSQL = Settings(flavor="mysql")

SEED = """
CREATE TABLE d.t1 (a INT PRIMARY KEY, b INT);
CREATE TABLE d.t4 (a INT PRIMARY KEY, d INT);
CREATE TABLE d.t7 (a INT PRIMARY KEY, g INT);
CREATE TABLE d.f (id INT PRIMARY KEY, x INT);
CREATE TABLE d.g (id INT PRIMARY KEY, y INT);
CREATE TABLE d.k (n INT AUTO_INCREMENT PRIMARY KEY, what VARCHAR(20));
DELIMITER //
CREATE TRIGGER d.tf AFTER UPDATE ON d.f FOR EACH ROW BEGIN INSERT INTO d.k (what) VALUES ('u'); END//
CREATE TRIGGER d.tfd AFTER DELETE ON d.f FOR EACH ROW INSERT INTO d.k (what) VALUES ('d')//
DELIMITER ;
"""

A = "UPDATE d.t1 LEFT JOIN d.t4 ON d.t1.a = d.t4.a SET d = 10"
A2 = "UPDATE d.t1 LEFT JOIN d.t4 ON d.t1.a = d.t4.a SET b = 10"
B = "UPDATE d.f JOIN d.g ON d.f.id = d.g.id SET d.f.x = 20"
B2 = "UPDATE d.f SET x = 30 WHERE id = 1"
C = "DELETE d.f FROM d.f JOIN d.g ON d.f.id = d.g.id WHERE d.f.id = 2"
NESTED = "UPDATE d.t7 LEFT JOIN (d.t1, d.t4) ON d.t7.a = d.t1.a SET g = 1, d = 2"

CASES = [
    # (citation, rules, settings, sql, apply)
    ("BUG#37051 observed: SET d is t4's column; ignore-table t4 skips", {"ignore_table": ("d.t4",)}, MARIADB, A, False),
    ("BUG#37051 observed: SET b is t1's column; ignore-table t4 applies", {"ignore_table": ("d.t4",)}, MARIADB, A2,
     True),
    ("BUG#37051 rpl_filter_tables_not_exist: nested joins, t7 and t4 updated, t1 joined only",
     {"ignore_table": ("d.t1",)}, MARIADB, NESTED, True),
    ("BUG#37051: nested joins, first updated table t7 decides", {"do_table": ("d.t7",), "ignore_table": ("d.t4",)},
     MARIADB, NESTED, True),
    ("observed: MariaDB multi-UPDATE counts the table its trigger writes (do-table k)", {"do_table": ("d.k",)},
     MARIADB, B, True),
    ("observed: the reverse, a trigger writing ignored k skips the multi-UPDATE", {"ignore_table": ("d.k",)},
     MARIADB, B, False),
    ("observed: first decisive table wins before any trigger table (ignore f, g)", {"ignore_table": ("d.f", "d.g")},
     MARIADB, B, False),
    ("observed: single-table UPDATE is checked before opening: triggers do not count", {"do_table": ("d.k",)},
     MARIADB, B2, False),
    ("observed: multi-table DELETE is checked before opening: triggers do not count", {"do_table": ("d.k",)},
     MARIADB, C, False),
    ("observed: multi-table DELETE, read-only g never counts", {"ignore_table": ("d.g",)}, MARIADB, C, True),
    ("[src] MySQL 8 sql_parse.cc: table_map_for_update checked before open, triggers do not count",
     {"do_table": ("d.k",)}, MYSQL, B, False),
    ("BUG#37051 MySQL 8: SET columns placed the same way", {"ignore_table": ("d.t4",)}, MYSQL, A2, True),
]


@pytest.mark.parametrize("citation,rules,settings,sql,apply", CASES, ids=[c[0] for c in CASES])
def test_schema_aware_decisions(citation, rules, settings, sql, apply):
    engine = RuleEngine(RuleSet(**rules), settings, schema=SchemaModel.from_sql(SEED))
    decision = engine.decide_statement(sql, "d")
    assert decision.apply is apply, decision.reason
    assert decision.assumption is None and engine.assumed == 0


def test_without_the_model_the_engine_gives_todays_answer_and_says_what_it_assumed():
    engine = RuleEngine(RuleSet(ignore_table=("d.t4",)), MARIADB)
    decision = engine.decide_statement(A2, "d")
    assert not decision.apply  # every joined table taken as updated: t4 is ignored
    assert "SET column 'b' not placed" in decision.assumption and "d.t1, d.t4 unknown" in decision.assumption
    assert engine.assumed == 1
    assert "[assumed: " in str(decision) and decision.to_json()["assumption"] == decision.assumption


def test_an_unknown_table_without_the_column_elsewhere_must_hold_it():
    """The master ran the statement, so the column is in exactly one table: if the known tables lack it, the
    only unknown table has it."""
    model = SchemaModel.from_sql("CREATE TABLE d.t1 (a INT, b INT);")
    engine = RuleEngine(RuleSet(ignore_table=("d.t1",)), MYSQL, schema=model)
    decision = engine.decide_statement(A, "d")  # SET d: not t1's, so t4's
    assert decision.apply and decision.tables == ("d.t4",)
    assert decision.assumption is None


def test_binlog_ddl_fills_the_model_in_order():
    engine = RuleEngine(RuleSet(ignore_table=("d.t4",)), MYSQL)
    for ddl in ("CREATE TABLE t1 (a INT PRIMARY KEY, b INT)", "CREATE TABLE t4 (a INT PRIMARY KEY, c INT)"):
        engine.decide_statement(ddl, "d")
    assert engine.decide_statement(A2, "d").apply
    engine.decide_statement("ALTER TABLE t1 DROP COLUMN b", "d")
    engine.decide_statement("ALTER TABLE t4 ADD COLUMN b INT", "d")
    assert not engine.decide_statement(A2, "d").apply  # b moved to t4
    engine.decide_statement("RENAME TABLE t4 TO t5", "d")
    engine.decide_statement("CREATE TABLE t4 LIKE t1", "d")
    decision = engine.decide_statement(A2, "d")
    assert decision.assumption is not None  # neither t1 nor the new t4 has b: not placed
    engine.decide_statement("DROP DATABASE d", None)
    assert engine.schema.tables == {}


def test_a_trigger_created_mid_binlog_counts_only_where_it_was_applied():
    seed = SchemaModel.from_sql(SEED.split("DELIMITER")[0])  # tables, no triggers
    create = "CREATE TRIGGER tr AFTER UPDATE ON g FOR EACH ROW INSERT INTO d.k (what) VALUES ('g')"
    update = "UPDATE d.g JOIN d.f ON d.g.id = d.f.id SET y = 1"
    kept = RuleEngine(RuleSet(do_table=("d.k", "d.g")), MARIADB, schema=seed.copy())
    assert kept.decide_statement(create, "d").apply
    skipped = RuleEngine(RuleSet(do_table=("d.k",)), MARIADB, schema=seed.copy())
    assert not skipped.decide_statement(create, "d").apply  # its table g is not in the do list
    assert not skipped.decide_statement(update, "d").apply  # no trigger on this replica: g alone decides
    assert ("d", "tr") in skipped.schema.triggers  # the master's model still has it
    also = RuleEngine(RuleSet(do_table=("d.k",), ignore_table=("d.zz",)), MARIADB, schema=seed.copy())
    also.triggers = TriggerKnowledge()
    also.schema.observe(create, "d")  # a trigger the replica has (from its own --schema dump)
    assert also.decide_statement(update, "d").apply
    also.decide_statement("DROP TRIGGER d.tr", "d")
    assert not also.decide_statement(update, "d").apply


def test_effective_semantics_decide_on_the_placed_table():
    engine = RuleEngine(RuleSet(effective_ignore=("d.t4",)), Settings(semantics="effective"),
                        schema=SchemaModel.from_sql(SEED))
    assert engine.decide_statement(A2, "x").apply  # only d.t1 is changed
    assert not engine.decide_statement(A, "x").apply


def test_lower_case_table_names_finds_the_model_tables():
    engine = RuleEngine(RuleSet(ignore_table=("d.t4",)), Settings(lower_case_table_names=1),
                        schema=SchemaModel.from_sql(SEED))
    assert engine.decide_statement(A2.replace("d.t1", "D.T1").replace("d.t4", "D.T4"), "d").apply


def test_trigger_bodies_nested_statements_and_calls():
    model = SchemaModel.from_sql("""
CREATE TABLE s.t (id INT, v INT);
DELIMITER ;;
CREATE TRIGGER s.a BEFORE UPDATE ON s.t FOR EACH ROW BEGIN
  IF NEW.v > 1 THEN INSERT INTO log1 (x) VALUES (1); ELSE REPLACE INTO o.log2 VALUES (2); END IF;
  INSERT INTO o.log3 VALUES (1) ON DUPLICATE KEY UPDATE x = 1;
END;;
CREATE TRIGGER s.b AFTER DELETE ON s.t FOR EACH ROW CALL s.p();;
DELIMITER ;
""")
    assert model.triggers[("s", "a")].writes == ((("s", "log1"), "INSERT"), (("o", "log2"), "INSERT"),
                                                 (("o", "log2"), "DELETE"), (("o", "log3"), "INSERT"))
    assert model.triggers[("s", "b")].writes is None  # a CALL: the body is not followed


def split_script(text):
    return [statement.sql for statement in _core.split_script(text).statements]


def test_split_script_follows_delimiters_quotes_and_comments():
    text = "SELECT ';' ; -- a ; comment\nDELIMITER $$\nCREATE x BEGIN a; b; END$$\nDELIMITER ;\n/* ; */ DO 1;"
    assert split_script(text) == ["SELECT ';'", "CREATE x BEGIN a; b; END", "DO 1"]  # a comment left out, as the client does


@pytest.mark.mariadb
def test_a_versioned_comment_ends_where_the_server_reads_its_end(mariadb_factory):
    """`*/` inside a string ends no versioned comment: a real MariaDB 10.11 makes a dump's
    `/*!50001 CREATE VIEW ... '*/' AS b ... */` a view of columns a and b, and the model opens the
    comment as the core's lexer reads it (the Python stripper ended it at the string's `*/`, and
    the view's columns were unknown)."""
    view = "/*!50001 CREATE VIEW d.v AS SELECT a, '*/' AS b FROM d.t */"
    server = mariadb_factory("versioned-view")
    server.execute(["CREATE DATABASE d", "CREATE TABLE d.t (a INT)", view])
    rows = server.query("SELECT column_name AS c FROM information_schema.columns WHERE table_schema = 'd' "
                        "AND table_name = 'v' ORDER BY ordinal_position")
    model = SchemaModel.from_sql(f"CREATE DATABASE d;\nCREATE TABLE d.t (a INT);\n{view};\n", strict=True)
    assert model.columns("d", "v") == tuple(row["c"] for row in rows) == ("a", "b")


def test_explain_with_schema_file(tmp_path, capsys):
    schema = tmp_path / "schema.sql"
    schema.write_text(SEED)
    argv = ["explain", "--flavor", "mariadb", "--replicate-do-table=d.k", "--current-db", "d", "--json", "--sql", B]
    assert main(argv) == 0
    without = json.loads(capsys.readouterr().out)
    assert without["decision"] == "skip" and "not in the schema model" in without["assumption"]
    assert main(argv + ["--schema", str(schema)]) == 0
    with_model = json.loads(capsys.readouterr().out)
    assert with_model["decision"] == "apply" and "assumption" not in with_model
    assert with_model["tables"] == ["d.f", "d.k"]


def test_explain_schema_errors_name_the_file(tmp_path, capsys):
    assert main(["explain", "--schema", str(tmp_path / "missing.sql"), "--sql", "BEGIN"]) == 2
    assert "--schema" in capsys.readouterr().err
    assert main(["explain", "--schema", "mysql://root@127.0.0.1:1", "--sql", "BEGIN"]) == 2
    assert "cannot connect" in capsys.readouterr().err


@pytest.mark.mariadb
def test_real_dump_and_information_schema_give_the_same_model(mariadb_factory, tmp_path, capsys):
    """A real `mariadb-dump --no-data` file (version comments, DELIMITER ;;, triggers, a function, a
    view) and information_schema of the same server give the same model; `dumpfilter filter --schema` then counts no assumption where
    the plain run counts one, and keeps the multi-table UPDATE a trigger makes a do-table write."""
    server = mariadb_factory("schema-src", binlog_format="STATEMENT")
    server.execute(["CREATE DATABASE d", *split_script(SEED), "SET GLOBAL log_bin_trust_function_creators = 1",
                    "CREATE FUNCTION d.fx() RETURNS INT MODIFIES SQL DATA BEGIN INSERT INTO d.k (what) VALUES ('fx'); "
                    "RETURN 1; END", "CREATE VIEW d.vf AS SELECT id, x FROM d.f"])
    dump = subprocess.run(["mariadb-dump", "--no-data", "--triggers", "--routines", "--databases", "d", "-h", "127.0.0.1",
                           "-P", str(server.port), "-u", "root"], check=True, capture_output=True, text=True).stdout
    (tmp_path / "dump.sql").write_text(dump)
    from_dump = SchemaModel.load(tmp_path / "dump.sql")
    from_server = SchemaModel.from_server(f"mysql://root@127.0.0.1:{server.port}")
    assert from_dump.tables == from_server.tables and from_dump.tables[("d", "t4")] == ("a", "d")
    assert from_dump.triggers == from_server.triggers
    assert from_dump.triggers[("d", "tf")].writes == ((("d", "k"), "INSERT"),)
    assert from_dump.functions == from_server.functions == {("d", "fx"): ((("d", "k"), "INSERT"),)}
    assert from_dump.base_tables(("d", "vf")) == from_server.base_tables(("d", "vf")) == (("d", "f"),)
    server.execute("RESET MASTER")  # the binlog starts after the DDL: only --schema knows the tables
    server.execute(["INSERT INTO t1 VALUES (1, 1)", "INSERT INTO f VALUES (1, 1)", "INSERT INTO g VALUES (1, 1)",
                    B, A2], db="d")
    server.flush_logs()
    binlog = str(server.binlog_files()[0])
    base = ["filter", binlog, "--replicate-do-table=d.k", "--json"]
    assert main(base + ["-o", str(tmp_path / "plain.bin")]) == 0
    plain = json.loads(capsys.readouterr().out)
    assert main(base + ["-o", str(tmp_path / "schema.bin"), "--schema", str(tmp_path / "dump.sql")]) == 0
    modelled = json.loads(capsys.readouterr().out)
    assert plain["assumed_decisions"] >= 1 and modelled["assumed_decisions"] == 0
    assert modelled["kept"] > plain["kept"]  # the UPDATE of f, kept because its trigger writes d.k
    # The master: the same decisions, counted in the slave's stats.
    assert _master_stats(server.binlog_dir, None).assumed_decisions >= 1
    with_schema = _master_stats(server.binlog_dir, SchemaModel.load(tmp_path / "dump.sql"))
    assert with_schema.assumed_decisions == 0 and with_schema.transactions_kept >= 1


def _master_stats(binlog_dir, schema):
    from dumpfilter.master.model import ChannelSpec, Registration
    from dumpfilter.master.service import DumpService

    service = DumpService(binlog_dir, schema=schema)
    service.register(Registration(server_id=7, filters=(ChannelSpec(None, RuleSet(do_table=("d.k",))),),
                                  settings=MARIADB))
    for batch in service.stream(7):
        if batch.caught_up:
            break
    return service.slaves[7].stats


_TABLES = ("t1", "t2", "t3")
_COLUMNS = ("a", "b", "c", "d")
_DDL = st.one_of(
    st.builds(lambda t, cols: f"CREATE TABLE {t} ({', '.join(c + ' INT' for c in cols)})",
              st.sampled_from(_TABLES), st.lists(st.sampled_from(_COLUMNS), min_size=1, max_size=3, unique=True)),
    st.builds(lambda t, c: f"ALTER TABLE {t} ADD COLUMN {c} INT", st.sampled_from(_TABLES), st.sampled_from(_COLUMNS)),
    st.builds(lambda t, c: f"ALTER TABLE {t} DROP COLUMN {c}", st.sampled_from(_TABLES), st.sampled_from(_COLUMNS)),
    st.builds(lambda t, c, n: f"ALTER TABLE {t} CHANGE {c} {n} INT", st.sampled_from(_TABLES),
              st.sampled_from(_COLUMNS), st.sampled_from(_COLUMNS)),
    st.builds(lambda a, b: f"RENAME TABLE {a} TO {b}", st.sampled_from(_TABLES), st.sampled_from(_TABLES)),
    st.builds(lambda a, b: f"CREATE TABLE {a} LIKE {b}", st.sampled_from(_TABLES), st.sampled_from(_TABLES)),
    st.builds(lambda t: f"DROP TABLE IF EXISTS {t}", st.sampled_from(_TABLES)),
)


@given(st.lists(_DDL, max_size=12), st.integers(min_value=0, max_value=12))
@settings(max_examples=60, deadline=None)
def test_reading_mid_replay_changes_nothing_and_copies_are_independent(ddl, cut):
    """Reading the column lists after every statement gives what reading them at the end gives, and a
    copy taken mid-stream is not changed by what the original replays afterwards."""
    lazy, eager = SchemaModel(), SchemaModel()
    snapshot = None
    for index, statement in enumerate(ddl):
        if index == cut:
            snapshot, frozen = lazy.copy(), eager.copy().tables
        lazy.observe(statement, "d")
        eager.observe(statement, "d")
        eager.tables  # resolve everything now
    assert lazy.tables == eager.tables
    if snapshot is not None:
        assert snapshot.tables == frozen


@pytest.mark.parametrize("alter", ["/*!40000 ALTER TABLE `t` DISABLE KEYS */", "ALTER TABLE d.t ENABLE KEYS",
                                   "alter table `d`.`t` convert to character set utf8mb4 collate utf8mb4_bin"])
def test_key_and_charset_changes_keep_the_columns(alter):
    """mysqldump's DISABLE KEYS (logged when a dump is restored on the primary) and CONVERT TO
    CHARACTER SET rename no column: the table's columns stay known."""
    model = SchemaModel.from_sql(f"CREATE DATABASE d; USE d; CREATE TABLE t (a int, b int); {alter}; "
                                 "ALTER TABLE t ADD COLUMN c int;")
    assert model.columns("d", "t") == ("a", "b", "c")


def test_a_key_change_beside_a_column_change_is_read_whole():
    model = SchemaModel.from_sql("CREATE DATABASE d; USE d; CREATE TABLE t (a int, b int); "
                                 "ALTER TABLE t DISABLE KEYS, DROP COLUMN b;")
    assert model.columns("d", "t") in (None, ("a",))  # never the columns before the DROP


def _trigger(table, name):
    return (f"CREATE TRIGGER {name} AFTER INSERT ON {table} FOR EACH ROW INSERT INTO d.log VALUES (1);")


def test_drop_table_takes_its_triggers_with_it_wherever_they_came_from():
    """DROP TABLE drops the table's triggers: one created before the first DROP, one after it, one
    that moved with a RENAME, and one of a copied model; the other tables keep theirs."""
    model = SchemaModel.from_sql("CREATE DATABASE d; USE d; CREATE TABLE a (x int); CREATE TABLE b (x int); "
                                 "CREATE TABLE c (x int); CREATE TABLE e (x int); " + _trigger("a", "ta"))
    model.observe("DROP TABLE IF EXISTS d.zz", "d")  # (the first DROP: what the model knows of triggers is read)
    model.observe(_trigger("b", "tb"), "d")
    model.observe("RENAME TABLE c TO c2", "d")
    model.observe(_trigger("c2", "tc"), "d")
    model.observe("RENAME TABLE c2 TO c3", "d")
    model.observe(_trigger("e", "te"), "d")
    for table in ("a", "b", "c3"):
        model.observe(f"DROP TABLE {table}", "d")
    assert set(model.triggers) == {("d", "te")}
    copied = model.copy()
    copied.observe("DROP TABLE e", "d")
    assert copied.triggers == {} and set(model.triggers) == {("d", "te")}


class _CountingDict(dict):
    looks = 0

    def items(self):
        type(self).looks += 1
        return super().items()


def test_a_dump_that_drops_each_table_first_does_not_look_at_every_trigger_each_time():
    """mysqldump writes DROP TABLE IF EXISTS before each CREATE TABLE: a DROP of a table no trigger
    is on must not walk the model's triggers (tables x triggers on a large dump)."""
    model = SchemaModel.from_sql("CREATE DATABASE d; USE d; CREATE TABLE a (x int); " + _trigger("a", "ta"))
    model.triggers = _CountingDict(model.triggers)
    for n in range(50):
        model.observe(f"DROP TABLE IF EXISTS d.t{n}", "d")
        model.observe(f"CREATE TABLE d.t{n} (x int)", "d")
    assert _CountingDict.looks == 0
    model.observe("DROP TABLE d.a", "d")
    assert model.triggers == {}


def test_views_and_sequences_are_modelled_as_the_server_lists_them():
    """information_schema lists a view's columns (its column list, else its SELECT's names; a
    `SELECT *` expanded when the view is made) and a MariaDB sequence's fixed columns."""
    model = SchemaModel.from_sql("CREATE DATABASE d; USE d; CREATE TABLE t (a INT, b INT);"
                                 "CREATE VIEW v AS SELECT a, b AS c FROM t; CREATE VIEW w (x, y) AS SELECT 1, 2;"
                                 "CREATE VIEW s AS SELECT * FROM t; CREATE SEQUENCE q START WITH 5;", strict=True)
    sequence = ("next_not_cached_value", "minimum_value", "maximum_value", "start_value", "increment", "cache_size",
                "cycle_option", "cycle_count")
    for sql in ("ALTER TABLE t ADD COLUMN z INT", "ALTER SEQUENCE q RESTART 9",
                "DROP TABLE IF EXISTS v",   # a view is not a table: the server refuses, so nothing was logged
                "ALTER VIEW w AS SELECT 3 AS m WITH LOCAL CHECK OPTION", "CREATE OR REPLACE VIEW v AS SELECT b FROM t", "RENAME TABLE s TO s2"):
        model.observe(sql, "d")
    assert model.tables == {("d", "t"): ("a", "b", "z"), ("d", "v"): ("b",), ("d", "w"): ("m",),
                            ("d", "s2"): ("a", "b"), ("d", "q"): sequence}
    assert model.views == {("d", "v"), ("d", "w"), ("d", "s2")} and model.is_view("D", "V")  # (names fold as lower_case_table_names)
    copy = model.copy()
    model.observe("DROP VIEW IF EXISTS v, d.w", "d")
    assert set(model.tables) == {("d", "t"), ("d", "s2"), ("d", "q")} and model.views == {("d", "s2")}
    assert copy.views == {("d", "v"), ("d", "w"), ("d", "s2")}
    model.observe("DROP DATABASE d", None)
    assert model.tables == {} and model.views == set()


@pytest.mark.mariadb
def test_every_kind_of_real_dump_is_taken_as_a_schema(mariadb_factory, tmp_path):
    """A --schema file is refused at its first statement no dump holds: every dump a real
    mariadb-dump writes is still taken (routines, events, a view, a sequence's SETVAL, rows,
    --master-data's CHANGE MASTER, --compact, --skip-opt, every database), with the tables and
    triggers information_schema gives."""
    server = mariadb_factory("schema-dumps")
    server.execute(["CREATE DATABASE d", *split_script(SEED), "CREATE VIEW d.v AS SELECT a FROM d.t1",
                    "CREATE SEQUENCE d.s", "INSERT INTO d.t1 VALUES (1, 2), (3, 4)",
                    "CREATE PROCEDURE d.p() BEGIN SELECT 1; END",
                    "CREATE EVENT d.e ON SCHEDULE EVERY 1 DAY DO DELETE FROM d.k"])
    from_server = SchemaModel.from_server(f"mysql://root@127.0.0.1:{server.port}")
    base = ["mariadb-dump", "-h", "127.0.0.1", "-P", str(server.port), "-u", "root"]
    variants = {"no-data": ["--no-data", "--routines", "--events", "--triggers", "--databases", "d"],
                "rows": ["--routines", "--events", "--databases", "d"],
                "master-data": ["--no-data", "--master-data=1", "--gtid", "--databases", "d"],
                "compact": ["--no-data", "--compact", "--databases", "d"],
                "skip-opt": ["--skip-opt", "--databases", "d"],
                "all": ["--no-data", "--all-databases"]}
    for name, options in variants.items():
        dump = subprocess.run(base + options, check=True, capture_output=True, text=True).stdout
        (tmp_path / f"{name}.sql").write_text(dump)
        model = SchemaModel.load(tmp_path / f"{name}.sql")
        # the base tables, the view v and the sequence s, with their columns, as information_schema has them
        mine = {key: cols for key, cols in model.tables.items() if key[0] == "d"}
        assert mine == {key: cols for key, cols in from_server.tables.items() if key[0] == "d"}, name
        assert len(mine) == 8 and mine[("d", "v")] == ("a",), name
        assert {key for key in model.views if key[0] == "d"} == from_server.views == {("d", "v")}, name
        assert model.triggers == from_server.triggers, name


@pytest.mark.mariadb
@pytest.mark.parametrize("rule", ["d.t1", "d.v", "d.t4", "d.w"])
def test_a_multi_table_update_through_a_view_is_decided_as_a_real_replica_decides(mariadb_factory, rule):
    """A MariaDB replica with replicate-ignore-table=RULE, statement-based: whether it applies a
    multi-table UPDATE that joins a view (SET through the view, or a table beside it) is what the
    engine answers with the schema a dump of the primary gives, views included. The filter sees the
    view's name, not its table's: ignoring d.t1 keeps an UPDATE through d.v."""
    from dumpfilter.lab.sandbox import make_replica, wait_caught_up

    primary, replica = mariadb_factory("view-primary"), mariadb_factory("view-replica", log_bin=False)
    schema = ["CREATE DATABASE d", "CREATE TABLE d.t1 (a INT PRIMARY KEY, b INT)",
              "CREATE TABLE d.t4 (a INT PRIMARY KEY, d INT, f INT, g INT)",
              "CREATE VIEW d.v AS SELECT a, b FROM d.t1", "CREATE VIEW d.w (k, e, h) AS SELECT a, f, g FROM d.t4"]
    rows = ["INSERT INTO d.t1 VALUES (1, 0)", "INSERT INTO d.t4 VALUES (1, 0, 0, 0)"]
    updates = {"b": "UPDATE d.v JOIN d.t4 ON d.v.a = d.t4.a SET b = b + 1",
               "d": "UPDATE d.v JOIN d.t4 ON d.v.a = d.t4.a SET d = d + 1",
               "e": "UPDATE d.t1 JOIN d.w ON d.t1.a = d.w.k SET e = e + 1",
               "h": "UPDATE d.v JOIN d.w ON d.v.a = d.w.k SET h = h + 1"}  # a model without views cannot place h
    for server in (primary, replica):
        server.execute(["SET SESSION sql_log_bin = 0", *schema, *rows])
    dump = subprocess.run(["mariadb-dump", "-h", "127.0.0.1", "-P", str(primary.port), "-u", "root", "--no-data",
                           "--databases", "d"], check=True, capture_output=True, text=True).stdout
    engine = RuleEngine(RuleSet(ignore_table=(rule,)), MARIADB, schema=SchemaModel.from_sql(dump))
    predicted = {column: engine.decide_statement(sql, "d") for column, sql in updates.items()}
    replica.execute(f"SET GLOBAL replicate_ignore_table = '{rule}'")
    primary.reset_master()
    primary.execute(["SET SESSION binlog_format = 'STATEMENT'", *updates.values()])
    make_replica(primary, replica)
    assert wait_caught_up(primary, replica, timeout=30).caught_up
    got = replica.query("SELECT t1.b, t4.d, t4.f AS e, t4.g AS h FROM d.t1 JOIN d.t4 USING (a)")[0]
    applied = {column: got[column] == 1 for column in updates}
    assert {c: d.apply for c, d in predicted.items()} == applied, (rule, predicted)
    assert not any("not placed" in (d.assumption or "") for d in predicted.values()), predicted


def test_functions_and_view_bases_are_modelled_from_their_ddl():
    """What lint's divergence reads (issue #81 goal 2): a stored function's body writes (from after its
    RETURNS type: a parameter named `update` is no write), replaced, dropped, and gone with its
    database; a view's base tables through a view over a view, renamed with the view. A real
    replica's rows agree (tests/rules/test_lint_generated_workload.py: function, view)."""
    model = SchemaModel.from_sql("""
        CREATE DATABASE d; CREATE DATABASE e;
        CREATE TABLE d.t (id INT); CREATE TABLE e.log (id INT);
        USE d;
        DELIMITER //
        CREATE DEFINER=`root`@`localhost` FUNCTION f(`update` INT) RETURNS int(11) MODIFIES SQL DATA
        BEGIN INSERT INTO e.log VALUES (`update`); UPDATE t SET id = 1; RETURN 1; END//
        CREATE FUNCTION e.g() RETURNS INT RETURN 1//
        DELIMITER ;
        CREATE VIEW v AS SELECT id FROM t;
        CREATE VIEW e.w AS SELECT id FROM d.v;
        RENAME TABLE e.w TO e.w2;
    """)
    assert model.functions == {("d", "f"): ((("e", "log"), "INSERT"), (("d", "t"), "UPDATE")), ("e", "g"): ()}
    assert model.base_tables(("e", "w2")) == (("d", "t"),) and model.base_tables(("d", "t")) == (("d", "t"),)
    model.observe("DROP FUNCTION IF EXISTS d.f", "e")
    model.observe("CREATE OR REPLACE FUNCTION e.g() RETURNS INT BEGIN DELETE FROM log; RETURN 1; END", "d")
    assert model.functions == {("e", "g"): ((("e", "log"), "DELETE"),)}
    copy = model.copy()
    model.observe("DROP DATABASE e", "")
    assert model.functions == {} and copy.functions == {("e", "g"): ((("e", "log"), "DELETE"),)}
    assert model.base_tables(("e", "w2")) == (("e", "w2"),) and copy.base_tables(("e", "w2")) == (("d", "t"),)


def _model_from_binlogs(server) -> SchemaModel:
    """The schema model a real server's binlogs build, statement by statement."""
    from tests.core.test_statement_keys import _queries

    model = SchemaModel()
    for path in server.binlog_files():
        for db, sql in _queries(path):
            model.observe(sql, db)
    return model


@pytest.mark.mariadb
def test_a_trigger_and_a_function_are_read_past_their_comments_as_the_server_keeps_them(mariadb_factory):
    """The binlog's CREATE TRIGGER and CREATE FUNCTION (comments kept as written) give the model the
    trigger information_schema lists: its timing and event are its tokens', not a comment's; a body
    statement the statement key does not read (a multi-table UPDATE) is read as a statement of its own."""
    from dumpfilter.rules.schema import Trigger

    server = mariadb_factory("trigger-comments", binlog_format="STATEMENT")
    server.execute(["CREATE DATABASE d", "SET GLOBAL log_bin_trust_function_creators = 1"])
    server.execute(["CREATE TABLE t (id INT)", "CREATE TABLE a (i INT, v INT)", "CREATE TABLE b (i INT)",
                    "CREATE TABLE log (n INT)",
                    "CREATE TRIGGER tr /* BEFORE INSERT ON log */ AFTER DELETE ON t FOR EACH ROW BEGIN "
                    "UPDATE a JOIN b ON a.i = b.i SET a.v = OLD.id; /* CALL p() */ INSERT INTO log VALUES (1); END",
                    "CREATE FUNCTION fx() /* RETURNS x CALL p() */ RETURNS DECIMAL(10, 2) MODIFIES SQL DATA BEGIN "
                    "DELETE FROM log WHERE n = 1; RETURN 1; END"], db="d")
    server.flush_logs()
    model = _model_from_binlogs(server)
    from_server = SchemaModel.from_server(f"mysql://root@127.0.0.1:{server.port}")
    assert model.triggers == from_server.triggers == {
        ("d", "tr"): Trigger("d", "tr", ("d", "t"), "AFTER", "DELETE", ((("d", "a"), "UPDATE"), (("d", "log"), "INSERT")))}
    assert model.functions == from_server.functions == {("d", "fx"): ((("d", "log"), "DELETE"),)}


@pytest.mark.mariadb
def test_alter_table_changes_the_columns_as_the_server_does(mariadb_factory):
    """ALTER TABLE's column changes, read by the core's facts from the binlog's texts, give the
    columns information_schema lists: a parenthesised ADD, ALTER ONLINE, a partition added, keys
    dropped and disabled, a COMMENT that says RENAME TO (no rename), RENAME TO with ADD COLUMN."""
    server = mariadb_factory("alter-columns", binlog_format="STATEMENT")
    server.execute("CREATE DATABASE d")
    server.execute(["CREATE TABLE t (a INT, b INT, c INT, KEY i (a))", "ALTER TABLE t ADD (x INT, y INT)",
                    "ALTER ONLINE TABLE t ADD COLUMN z INT COMMENT 'RENAME TO zz', DROP COLUMN b",
                    "ALTER TABLE t CHANGE c c2 INT, RENAME COLUMN x TO x2, DROP INDEX i, DISABLE KEYS",
                    "CREATE TABLE p (id INT, v INT) PARTITION BY RANGE (id) (PARTITION p0 VALUES LESS THAN (10))",
                    "ALTER TABLE p ADD PARTITION (PARTITION p1 VALUES LESS THAN (20))",
                    "ALTER TABLE p CONVERT TO CHARACTER SET utf8mb4",
                    "CREATE TABLE s (a INT)", "ALTER TABLE s RENAME TO s2, ADD COLUMN b INT"], db="d")
    server.flush_logs()
    model = _model_from_binlogs(server)
    from_server = SchemaModel.from_server(f"mysql://root@127.0.0.1:{server.port}")
    assert model.tables == {key: cols for key, cols in from_server.tables.items() if key[0] == "d"}
    assert model.tables[("d", "t")] == ("a", "c2", "x2", "y", "z") and model.tables[("d", "s2")] == ("a", "b")


_REPLAYED = st.one_of(
    _DDL,
    st.builds(lambda t, c: f"CREATE TABLE IF NOT EXISTS {t} ({c} INT)", st.sampled_from(_TABLES),
              st.sampled_from(_COLUMNS)),
    st.builds(lambda t: f"CREATE VIEW v AS SELECT * FROM {t}", st.sampled_from(_TABLES)),
    st.just("DROP TABLE IF EXISTS v"),
    st.just("DROP VIEW IF EXISTS v"),
    st.builds(lambda t: f"CREATE TRIGGER tr AFTER INSERT ON {t} FOR EACH ROW INSERT INTO t3 VALUES (1)",
              st.sampled_from(_TABLES)),
    st.just("CREATE DATABASE e"),
    st.builds(lambda t: f"CREATE TABLE e.{t} (a INT)", st.sampled_from(_TABLES)),
    st.builds(lambda t: f"CREATE TEMPORARY TABLE {t} (z INT)", st.sampled_from(_TABLES)),
    st.builds(lambda t: f"DROP TABLE {t}, e.{t}", st.sampled_from(_TABLES)),
)


def _replayed(sql: str) -> tuple[str, str, object]:
    """A statement as `experiment`'s count replays it (spark_jobs.tasks.lone_units): an ALTER TABLE
    that renames nothing by its table, anything else by its parse."""
    info = statement_tables(sql, "d")
    if info.kind is Kind.ALTER_TABLE and info.parse_ok and info.updated and not info.renames:
        return sql, "d", info.updated[0]
    return sql, "d", info


@given(st.lists(_REPLAYED, max_size=16), st.lists(st.integers(min_value=0, max_value=16), max_size=4))
@example(["CREATE TABLE t1 (a INT)", "ALTER TABLE t1 ADD COLUMN b INT", "DROP TABLE t1, e.t1"], [])
@example(["CREATE TABLE t1 (a INT)", "CREATE TABLE IF NOT EXISTS t1 (b INT)", "ALTER TABLE t1 ADD COLUMN c INT"], [2])
@example(["CREATE TABLE t1 (a INT)", "CREATE VIEW v AS SELECT * FROM t1", "CREATE TABLE IF NOT EXISTS v (b INT)",
          "DROP TABLE IF EXISTS v"], [3])
@example(["CREATE TABLE t2 (a INT)", "CREATE TRIGGER tr AFTER INSERT ON t2 FOR EACH ROW INSERT INTO t3 VALUES (1)",
          "CREATE TABLE t2 (b INT)", "DROP TABLE IF EXISTS t2"], [])
@settings(max_examples=120, deadline=None)
def test_replay_leaves_what_observing_each_statement_leaves(ddl, cuts):
    """`SchemaModel.replay` (a segment's lone DDL in one loop, a CREATE TABLE of its own columns
    deferred with its table's ALTERs) leaves the model `observe` and `defer` leave one statement
    at a time, read between batches cut anywhere or only at the end: tables, columns, databases,
    views and triggers."""
    one, batched = SchemaModel(), SchemaModel()
    for sql, db, how in map(_replayed, ddl):
        if isinstance(how, tuple):
            one.defer(sql, db, how)
        else:
            one.observe(sql, db, how)
    edges = sorted({0, len(ddl), *(min(c, len(ddl)) for c in cuts)})
    for a, b in zip(edges, edges[1:]):
        batched.replay([_replayed(sql) for sql in ddl[a:b]])
        if b in cuts:
            batched.tables  # (read mid-stream: what was deferred replayed)
    assert batched.tables == one.tables
    assert (batched.databases, batched.views, batched.triggers) == (one.databases, one.views, one.triggers)
    assert batched.key() == one.key()
