"""WL#2516 effective semantics done whole: objects without tables, the binlog side, REWRITE order, the
channel footgun and `explain --batch` parity. Every row cites the seed line (shared/seeds/000_*.txt,
"seed N"), a bug number or a section of research/filter-semantics.md."""

import json

import pytest
from hypothesis import given
from hypothesis import settings as hyp_settings
from hypothesis import strategies as st

from dumpfilter.errors import RuleError
from dumpfilter.cli.app import main
from dumpfilter.rules.evaluate import RuleEngine
from dumpfilter.rules.parse import apply_changes, parse_filter_statement
from dumpfilter.rules.ruleset import RuleSet, Settings

EFFECTIVE = Settings(semantics="effective")
SEED_EXAMPLE = "CHANGE MASTER 'foo' TO DO='db1.%', IGNORE='%.table2', REWRITE=db1.%->db2.%"
SEED_BINLOG = "CHANGE BINLOG 'bar' TO DO='db1.%', IGNORE='%_backup.table2'"


def _rules(*statements, channel="foo", **types) -> RuleSet:
    return apply_changes(RuleSet(**types), statements, channel, lambda name: f"add --channel {name}")


# (citation, rules, current_db, sql, apply, tables written (None: not checked))
CASES = [
    # --- REWRITE vs DO/IGNORE: the seed's own example (seed 86-89) under NEW SEMANTICS (seed 107-119)
    # REWRITE renames a statement's default database only (as replicate-rewrite-db; see
    # docs/effective-semantics.md): names written in the statement stay the master's.
    ("seed 86-89/111: DO db1.% writes db1.table2 before IGNORE %.table2; its text is not rewritten",
     _rules(SEED_EXAMPLE), "x", "INSERT INTO db1.table2 VALUES (1)", True, ("db1.table2",)),
    ("seed 86-89/116: IGNORE %.table2 skips db3.table2", _rules(SEED_EXAMPLE), "x",
     "INSERT INTO db3.table2 VALUES (1)", False, None),
    ("seed 86-89/119: no match writes db3.t unchanged", _rules(SEED_EXAMPLE), "x", "INSERT INTO db3.t VALUES (1)",
     True, ("db3.t",)),
    ("seed 86-89: db1.t is written, the qualified name kept", _rules(SEED_EXAMPLE), "x", "UPDATE db1.t SET a=1",
     True, ("db1.t",)),
    ("seed 86-89: DO matches master names, so db2.table2 is not kept by DO db1.%", _rules(SEED_EXAMPLE), "db1",
     "INSERT INTO db2.table2 VALUES (1)", False, None),
    # --- effective, not current database (seed 7-9, 123-126)
    ("seed 7-9: USE db1; INSERT INTO db2.t is decided on db2", RuleSet(effective_ignore=("db1.%",)), "db1",
     "INSERT INTO db2.t VALUES (1)", True, ("db2.t",)),
    ("seed 7-9: WITH ... UPDATE is parsed (CTE read-only), effective db1", RuleSet(effective_ignore=("db1.%",)),
     "db2", "WITH c AS (SELECT id FROM db2.s) UPDATE db1.t JOIN c ON t.id = c.id SET t.x = 1", False, None),
    # --- statements with no table to change: the object's database (issue #14 part 2)
    ("seed 103 + §2.1: CREATE PROCEDURE db1.p is in db1 whatever USE says", RuleSet(effective_ignore=("db1.%",)),
     "db2", "CREATE DEFINER=`root`@`localhost` PROCEDURE db1.p() BEGIN END", False, None),
    ("seed 103: unqualified routine lives in the default database", RuleSet(effective_ignore=("db1.%",)), "db1",
     "CREATE FUNCTION f() RETURNS INT RETURN 1", False, None),
    ("seed 103: DROP FUNCTION db2.f is in db2 although USE db1", RuleSet(effective_ignore=("db1.%",)), "db1",
     "DROP FUNCTION IF EXISTS db2.f", True, None),
    ("seed 103: CALL db1.p() is decided on the procedure's db", RuleSet(effective_ignore=("db1.%",)), "db2",
     "CALL db1.p(1)", False, None),
    ("seed 103: CREATE EVENT db1.e is in db1", RuleSet(effective_ignore=("db1.%",)), "db2",
     "CREATE EVENT db1.e ON SCHEDULE EVERY 1 DAY DO DELETE FROM db1.t", False, None),
    ("seed 103 + §2.5: CREATE USER changes the mysql grant tables", RuleSet(effective_ignore=("mysql.%",)), "db1",
     "CREATE USER 'u'@'%'", False, None),
    ("seed 111 + §2.5: DO mysql.% writes GRANT although USE db1 is ignored",
     RuleSet(effective_do=("mysql.%",), effective_ignore=("db1.%",)), "db1", "GRANT SELECT ON db1.* TO u", True,
     None),
    ("seed 103 + §2.5: GRANT ON db1.t changes mysql, not db1.t", RuleSet(effective_ignore=("db1.%",)), "db1",
     "GRANT SELECT ON db1.t TO u", True, None),
    ("seed 103 + §2.5: SET PASSWORD changes mysql", RuleSet(effective_ignore=("mysql.user",)), None,
     "SET PASSWORD FOR u = PASSWORD('x')", False, None),
    ("seed 103: a UDF (CREATE FUNCTION ... SONAME) lives in mysql.func", RuleSet(effective_ignore=("mysql.func",)),
     "db1", "CREATE FUNCTION f RETURNS STRING SONAME 'udf.so'", False, None),
    ("seed 103: INSTALL PLUGIN changes mysql.plugin", RuleSet(effective_ignore=("mysql.%",)), "db1",
     "INSTALL PLUGIN x SONAME 'x.so'", False, None),
    ("seed 103: DO 1 changes no database: outside the rules, written", RuleSet(effective_ignore=("%.%",)), "db1",
     "DO 1", True, None),
    ("seed 103: CREATE DATABASE is its own database", RuleSet(effective_ignore=("db1.%",)), "x",
     "CREATE DATABASE db1", False, None),
    ("seed 103 + Bug#24478: DROP TRIGGER of an unknown trigger: its schema", RuleSet(effective_ignore=("db1.%",)),
     "db2", "DROP TRIGGER db1.tr", False, None),
    # --- the binlog side: CHANGE BINLOG (seed 96-98) and binlog-*-db under effective semantics (seed 11-14)
    ("seed 98: CHANGE BINLOG IGNORE %_backup.table2", _rules(SEED_BINLOG), "db1",
     "INSERT INTO x_backup.table2 VALUES (1)", False, None),
    ("seed 98/111: CHANGE BINLOG DO db1.% writes", _rules(SEED_BINLOG), "x_backup",
     "INSERT INTO db1.table2 VALUES (1)", True, None),
    ("seed 11-14/146-166: binlog-do-db on the effective db: USE db2; INSERT INTO db1.t written",
     RuleSet(binlog_do_db=("db1",)), "db2", "INSERT INTO db1.t VALUES (1)", True, None),
    ("seed 11-14: binlog-do-db on the effective db: USE db1; INSERT INTO db2.t not written",
     RuleSet(binlog_do_db=("db1",)), "db1", "INSERT INTO db2.t VALUES (1)", False, None),
    ("seed 11-14: binlog-ignore-db on the effective db", RuleSet(binlog_ignore_db=("db1",)), "db2",
     "INSERT INTO db1.t VALUES (1)", False, None),
    ("seed 11-14: binlog filter first: replicate DO cannot bring back what the binlog does not write",
     RuleSet(binlog_ignore_db=("db1",), effective_do=("db1.%",)), "x", "INSERT INTO db1.t VALUES (1)", False, None),
    ("seed 11-14: CHANGE BINLOG IGNORE on a routine's database", _rules(SEED_BINLOG), "x",
     "CREATE PROCEDURE db9_backup.p() BEGIN END", True, None),
]


@pytest.mark.parametrize("citation,rules,current_db,sql,apply,tables", CASES, ids=[c[0] for c in CASES])
def test_effective_statements(citation, rules, current_db, sql, apply, tables):
    decision = RuleEngine(rules, EFFECTIVE).decide_statement(sql, current_db)
    assert decision.apply is apply, decision.reason
    assert decision.reason.startswith(("effective object: ", "SET ", "BEGIN")) or "outside WL#2516" in decision.reason
    if tables is not None:
        assert decision.tables == tables


def test_explain_says_which_case_applied():
    engine = RuleEngine(RuleSet(effective_ignore=("db1.%",)), EFFECTIVE)
    assert "the database of PROCEDURE 'p' ('db1')" in engine.decide_statement("CALL db1.p()", "db2").reason
    assert "effective database is `mysql`" in engine.decide_statement("DROP USER u", "db1").reason
    assert "changes no database or table" in engine.decide_statement("DO 1", "db1").reason
    assert "no default database" in engine.decide_statement("CALL p()", None).reason


def test_unparsed_statement_never_falls_back_to_the_use_database():
    """Issue #14: a statement that does not parse must not be decided on USE db1 (which IGNORE db1.% skips)."""
    engine = RuleEngine(RuleSet(effective_ignore=("db1.%",)), EFFECTIVE)
    decision = engine.decide_statement("FROBNICATE db1.t", "db1")
    assert decision.apply and engine.unparsed == 1
    assert decision.assumption and "could not be parsed" in decision.reason
    assert decision.to_json()["assumption"] == decision.assumption


@pytest.mark.parametrize("citation,rules,db,table,apply", [
    ("seed 98: row events of x_backup.table2 are not written", _rules(SEED_BINLOG), "x_backup", "table2", False),
    ("seed 11-14: binlog-do-db for rows", RuleSet(binlog_do_db=("db1",)), "db2", "t", False),
    ("seed 86-89: rows of db1.t2 kept before REWRITE", _rules(SEED_EXAMPLE), "db1", "table2", True),
    ("seed 86-89: rows of db5.table2 ignored", _rules(SEED_EXAMPLE), "db5", "table2", False),
], ids=lambda v: v if isinstance(v, str) and v.startswith("seed") else None)
def test_effective_rows(citation, rules, db, table, apply):
    engine = RuleEngine(rules, EFFECTIVE)
    assert engine.decide_table(db, table).apply is apply
    assert engine.table_kept(db, table) is apply


def test_effective_rename_after_decision_follows_the_seed_example():
    engine = RuleEngine(_rules(SEED_EXAMPLE), EFFECTIVE)
    assert engine.effective_rename("db1", "t") == ("db2", "t", True)
    assert engine.effective_rename("db3", "t") == ("db3", "t", False)


def test_change_binlog_parses_and_rejects_rewrite():
    change = parse_filter_statement(SEED_BINLOG)
    assert dict(change.changes) == {"binlog_effective_do": ("db1.%",), "binlog_effective_ignore": ("%_backup.table2",)}
    assert change.channel is None and change.binlog == "bar"
    with pytest.raises(RuleError, match="unknown key 'REWRITE'"):
        parse_filter_statement("CHANGE BINLOG 'bar' TO REWRITE='a.%->b.%'")
    with pytest.raises(RuleError, match="db_pattern.table_pattern"):
        parse_filter_statement("CHANGE BINLOG TO DO='db1'")


def test_binlog_effective_rules_need_effective_semantics():
    with pytest.raises(RuleError, match="filter-semantics=effective"):
        RuleEngine(RuleSet(binlog_effective_do=("a.%",)))


# --- the channel footgun (issue #14: CHANGE MASTER 'foo' is silently ignored without --channel foo)

def test_change_master_naming_an_unselected_connection_is_an_error(capsys):
    assert main(["explain", "--filter-semantics", "effective", "--change-replication-filter", SEED_EXAMPLE,
                 "--sql", "INSERT INTO db3.table2 VALUES (1)"]) == 2
    assert "names connection 'foo'" in capsys.readouterr().err and "add --channel foo"
    assert main(["explain", "--filter-semantics", "effective", "--channel", "foo", "--change-replication-filter",
                 SEED_EXAMPLE, "--sql", "INSERT INTO db3.table2 VALUES (1)"]) == 0
    assert capsys.readouterr().out.startswith("skip: ")


def test_for_channel_naming_an_unselected_channel_is_an_error(capsys):
    """MySQL: CHANGE REPLICATION FILTER ... FOR CHANNEL of a channel that does not exist is ER_SLAVE_CONFIGURATION."""
    assert main(["explain", "--change-replication-filter",
                 "CHANGE REPLICATION FILTER REPLICATE_DO_DB=(a) FOR CHANNEL 'ch2'", "--sql", "BEGIN"]) == 2
    assert "add --channel ch2" in capsys.readouterr().err


def test_topology_slave_with_an_unselected_connection_is_an_error(tmp_path):
    from dumpfilter.topology import load_topology
    path = tmp_path / "t.toml"
    path.write_text('[[slaves]]\nname = "s1"\nserver_id = 2\nfilter_semantics = "effective"\n'
                    f'change_replication_filter = "{SEED_EXAMPLE}"\n')
    with pytest.raises(Exception, match='set channel = "foo" for this slave'):
        load_topology(path)


# --- explain --batch carries everything single mode does

SINGLE_MODE = [
    # (single-mode argv, the same request as a batch line)
    (["--filter-semantics", "effective", "--channel", "foo", "--change-replication-filter", SEED_EXAMPLE,
      "--sql", "INSERT INTO db1.table2 VALUES (1)", "--current-db", "x"],
     {"filter_semantics": "effective", "channel": "foo", "change_replication_filter": [SEED_EXAMPLE],
      "sql": "INSERT INTO db1.table2 VALUES (1)", "current_db": "x"}),
    (["--filter-semantics", "effective", "--change-replication-filter", SEED_BINLOG, "--binlog-format", "ROW",
      "--table", "x_backup.table2"],
     {"filter_semantics": "effective", "change_replication_filter": [SEED_BINLOG], "binlog_format": "ROW",
      "table": "x_backup.table2"}),
    (["--replicate-do-db=MYDB", "--lower-case-table-names", "1", "--current-db", "mydb", "--sql",
      "INSERT INTO t VALUES (1)"],
     {"filters": {"replicate_do_db": ["MYDB"]}, "lower_case_table_names": 1, "current_db": "mydb",
      "sql": "INSERT INTO t VALUES (1)"}),
    (["--flavor", "mariadb", "--replicate-do-db=dbx", "--replicate-wild-do-table=db%.t1", "--sql",
      "CREATE DATABASE dbx"],
     {"flavor": "mariadb", "filters": {"replicate_do_db": ["dbx"], "replicate_wild_do_table": ["db%.t1"]},
      "sql": "CREATE DATABASE dbx"}),
    (["--replicate-wild-do-table=ch:db1.%", "--channel", "ch", "--binlog-format", "ROW", "--table", "db1.t1"],
     {"filters": {"replicate_wild_do_table": ["ch:db1.%"]}, "channel": "ch", "binlog_format": "ROW",
      "table": "db1.t1"}),
    (["--binlog-do-db=db1", "--filter-semantics", "effective", "--current-db", "db2", "--sql",
      "INSERT INTO db1.t VALUES (1)"],
     {"filters": {"binlog_do_db": ["db1"]}, "filter_semantics": "effective", "current_db": "db2",
      "sql": "INSERT INTO db1.t VALUES (1)"}),
]


@pytest.mark.parametrize("argv,line", SINGLE_MODE, ids=[str(i) for i in range(len(SINGLE_MODE))])
def test_batch_round_trips_single_mode(argv, line, tmp_path, capsys):
    assert main(["explain", "--json", *argv]) == 0
    single = json.loads(capsys.readouterr().out)
    batch = tmp_path / "in.jsonl"
    batch.write_text(json.dumps(line) + "\n")
    assert main(["explain", "--batch", str(batch)]) == 0
    assert json.loads(capsys.readouterr().out) == single


def test_batch_lines_without_rules_take_the_command_line_rules(tmp_path, capsys):
    batch = tmp_path / "in.jsonl"
    batch.write_text(json.dumps({"sql": "INSERT INTO t VALUES (1)", "current_db": "b"}) + "\n"
                     + json.dumps({"sql": "INSERT INTO t VALUES (1)", "current_db": "b", "filters": {}}) + "\n"
                     + json.dumps({"sql": "INSERT INTO t VALUES (1)", "current_db": "a"}) + "\n")
    assert main(["explain", "--replicate-do-db=a", "--batch", str(batch)]) == 0
    assert [json.loads(x)["decision"] for x in capsys.readouterr().out.splitlines()] == ["skip", "apply", "apply"]


def test_batch_settings_default_to_the_command_line(tmp_path, capsys):
    batch = tmp_path / "in.jsonl"
    batch.write_text(json.dumps({"sql": "INSERT INTO t VALUES (1)", "current_db": "mydb"}) + "\n"
                     + json.dumps({"sql": "INSERT INTO t VALUES (1)", "current_db": "mydb",
                                   "lower_case_table_names": 0}) + "\n")
    assert main(["explain", "--replicate-do-db=MYDB", "--lower-case-table-names", "1", "--batch", str(batch)]) == 0
    assert [json.loads(x)["decision"] for x in capsys.readouterr().out.splitlines()] == ["apply", "skip"]


@pytest.mark.parametrize("line,message", [
    ({"sql": "BEGIN", "semantics": "effective"}, "in.jsonl:1: unknown key 'semantics'"),
    ({"sql": "BEGIN", "filters": {"replicate_do_db": "db1"}},
     "in.jsonl:1: key 'filters.replicate_do_db': expected a list of strings, got a string"),
    ({"sql": "BEGIN", "filters": {"replicate_do_dbs": ["db1"]}}, "in.jsonl:1: unknown filter key 'replicate_do_dbs'"),
    ({"sql": "BEGIN", "change_replication_filter": SEED_EXAMPLE},
     "in.jsonl:1: key 'change_replication_filter': expected a list of strings, got a string"),
    ({"sql": "BEGIN", "lower_case_table_names": "1"}, "in.jsonl:1: key 'lower_case_table_names'"),
    ({"sql": "BEGIN", "change_replication_filter": [SEED_EXAMPLE], "filter_semantics": "effective"},
     "in.jsonl:1: CHANGE MASTER 'foo'"),
    ({"table": "nodot"}, "in.jsonl:1: key 'table'"),
    ({"sql": "BEGIN", "table": "a.b"}, "in.jsonl:1: needs exactly one of 'sql' or 'table'"),
])
def test_batch_errors_name_the_line_and_the_key(line, message, tmp_path, capsys):
    batch = tmp_path / "in.jsonl"
    batch.write_text(json.dumps(line) + "\n")
    assert main(["explain", "--batch", str(batch)]) == 2
    assert message in capsys.readouterr().err


def test_batch_round_trips_file_options_and_track_derived_tables(tmp_path, capsys):
    """defaults_file, schema and track_derived_tables, the single-mode options that name files or switch modes."""
    cnf = tmp_path / "my.cnf"
    cnf.write_text("[mysqld]\nreplicate-do-table=d.k\n")
    schema = tmp_path / "schema.sql"
    schema.write_text("CREATE TABLE d.f (id INT, x INT); CREATE TABLE d.g (id INT, y INT);\n"
                      "CREATE TABLE d.k (n INT); CREATE TRIGGER d.tf AFTER UPDATE ON d.f FOR EACH ROW "
                      "INSERT INTO d.k VALUES (1);\n")
    sql = "UPDATE d.f JOIN d.g ON d.f.id = d.g.id SET x = 1"
    argv = ["--defaults-file", str(cnf), "--schema", str(schema), "--flavor", "mariadb", "--sql", sql]
    assert main(["explain", "--json", *argv]) == 0
    single = json.loads(capsys.readouterr().out)
    assert single["decision"] == "apply"  # the trigger writes the do-table d.k
    batch = tmp_path / "in.jsonl"
    batch.write_text(json.dumps({"defaults_file": str(cnf), "schema": str(schema), "flavor": "mariadb",
                                 "sql": sql}) + "\n")
    assert main(["explain", "--batch", str(batch)]) == 0
    assert json.loads(capsys.readouterr().out) == single
    # track_derived_tables keeps engine state across the lines that share it
    batch.write_text("\n".join(json.dumps({"filters": {"replicate_ignore_table": ["a.secret"]}, "current_db": "a",
                                           "track_derived_tables": True, **event})
                               for event in ({"sql": "CREATE TABLE copy LIKE secret"},
                                             {"sql": "INSERT INTO copy VALUES (1)"})) + "\n")
    assert main(["explain", "--batch", str(batch)]) == 0
    assert [json.loads(x)["decision"] for x in capsys.readouterr().out.splitlines()] == ["apply", "skip"]


def test_every_rule_type_travels_over_the_wire():
    """A slave's CHANGE BINLOG / binlog-*-db rules reach the master instead of being dropped by the contract."""
    from dumpfilter.wire import rules_from_proto, rules_to_proto
    from dumpfilter.rules.ruleset import ALL_TYPES, PAIR_TYPES

    rules = RuleSet(**{t: ((("a.%", "b.%") if t == "effective_rewrite" else ("a", "b")),) if t in PAIR_TYPES
                       else ("a.t%",) for t in ALL_TYPES})
    assert rules_from_proto(rules_to_proto(rules)) == rules


_DBS = ("db1", "db2", "db1_backup")
_QUALIFIED = st.one_of(
    st.builds("INSERT INTO {}.t VALUES (1)".format, st.sampled_from(_DBS)),
    st.builds("UPDATE {}.table2 SET a = 1".format, st.sampled_from(_DBS)),
    st.builds("CREATE PROCEDURE {}.p() BEGIN END".format, st.sampled_from(_DBS)),
    st.builds("CALL {}.p()".format, st.sampled_from(_DBS)),
    st.builds("DROP EVENT IF EXISTS {}.e".format, st.sampled_from(_DBS)),
    st.builds("CREATE DATABASE {}".format, st.sampled_from(_DBS)),
    st.just("GRANT SELECT ON db1.* TO u"),
    st.just("CREATE USER u"),
    st.just("DO 1"),
)


@given(statement=_QUALIFIED,
       use=st.lists(st.one_of(st.none(), st.sampled_from(_DBS + ("mysql",))), min_size=2, max_size=4),
       rules=st.sampled_from([SEED_EXAMPLE, SEED_BINLOG, "CHANGE MASTER 'foo' TO IGNORE='mysql.%'",
                              "CHANGE MASTER 'foo' TO DO='db2.%', IGNORE='%.%'"]))
@hyp_settings(max_examples=200, deadline=None)
def test_effective_decisions_never_depend_on_the_use_database(statement, use, rules):
    """Seed 7-9: the effective database, not the current one. A statement that names its objects gets the
    same decision under every USE (and none)."""
    engine_rules = _rules(rules)
    verdicts = {(d := RuleEngine(engine_rules, EFFECTIVE).decide_statement(statement, db)).apply: d.reason
                for db in use}
    assert len(verdicts) == 1, verdicts
