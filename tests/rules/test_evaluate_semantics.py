"""Table-driven cases for filter-semantics.md: each row cites the section or mysql-test it reproduces."""

import pytest

from dumpfilter.rules.evaluate import RuleEngine
from dumpfilter.rules.ruleset import RuleSet, Settings

MARIADB = Settings(flavor="mariadb")
LCTN1 = Settings(lower_case_table_names=1)
MARIADB_LCTN1 = Settings(flavor="mariadb", lower_case_table_names=1)

STATEMENT_CASES = [
    # (citation, rules, settings, current_db, sql, apply, deciding rule)
    ("§1.2 no rules", {}, None, "a", "INSERT INTO t VALUES (1)", True, None),
    ("§1.1a default db, not table db (Bug #43457)", {"ignore_db": ("db1",)}, None, "db1",
     "INSERT INTO db2.t1 VALUES (1)", False, "replicate-ignore-db"),
    ("§1.1a USE a; UPDATE b.t with do-db=b", {"do_db": ("b",)}, None, "a", "UPDATE b.t SET x=1", False,
     "replicate-do-db"),
    ("§1.2 do beats ignore", {"do_db": ("a",), "ignore_db": ("a",)}, None, "a", "INSERT INTO t VALUES (1)",
     True, "replicate-do-db"),
    ("§1.2 do-db=a, ignore-db=b, USE c", {"do_db": ("a",), "ignore_db": ("b",)}, None, "c",
     "INSERT INTO t VALUES (1)", False, "replicate-do-db"),
    ("§1.2 rpl_do_db_filter: db check first, then table", {"do_db": ("MYDB",), "do_table": ("mydb.t2",)}, None,
     "test", "INSERT INTO mydb.t2 VALUES (1)", False, "replicate-do-db"),
    ("§1.2 Bug #51639 lctn=0 is case-sensitive", {"do_db": ("MYDB",)}, None, "mydb", "INSERT INTO t VALUES (1)",
     False, "replicate-do-db"),
    ("§1.2 rpl_do_db_filter lctn=1 case-insensitive", {"do_db": ("MYDB",)}, LCTN1, "mydb",
     "INSERT INTO t VALUES (1)", True, "replicate-do-db"),
    ("§1.3 no default db + do-db skips even qualified", {"do_db": ("db1",)}, None, None,
     "INSERT INTO db1.t1 VALUES (1)", False, "replicate-do-db"),
    ("§1.3 no default db + ignore-db applies", {"ignore_db": ("db1",)}, None, None,
     "INSERT INTO db1.t1 VALUES (1)", True, None),
    ("§1.3 no default db: table rules still see qualified tables", {"ignore_table": ("db1.t1",)}, None, None,
     "INSERT INTO db1.t1 VALUES (1)", False, "replicate-ignore-table"),
    ("§1.4 wild-do foo%.% replicates CREATE DATABASE foobar", {"wild_do_table": ("foo%.%",)}, None, None,
     "CREATE DATABASE foobar", True, "replicate-wild-do-table"),
    ("§1.4 wild-do foo%.% skips CREATE DATABASE bar", {"wild_do_table": ("foo%.%",)}, None, None,
     "CREATE DATABASE bar", False, "replicate-wild-do-table"),
    ("§1.4 wild-ignore db1.% skips DROP DATABASE db1", {"wild_ignore_table": ("db1.%",)}, None, "x",
     "DROP DATABASE db1", False, "replicate-wild-ignore-table"),
    ("§1.4 'db1.' LIKE 'db1.t%' is false", {"wild_ignore_table": ("db1.t%",)}, None, None,
     "DROP DATABASE db1", True, None),
    ("§1.1c USE bob; CREATE DATABASE sisyfos is filtered on sisyfos", {"do_db": ("bob",)}, None, "bob",
     "CREATE DATABASE sisyfos", False, "replicate-do-db"),
    ("§1.4 BUG#46110 rpl_filter_database CREATE", {"do_db": ("dbx",), "wild_do_table": ("db%.t1",)}, None, "dbx",
     "CREATE DATABASE dbx", True, "replicate-do-db"),
    ("§1.4 BUG#46110 rpl_filter_database ALTER", {"do_db": ("dbx",), "wild_do_table": ("db%.t1",)}, None, "dbx",
     "ALTER DATABASE dbx CHARACTER SET latin1", True, "replicate-do-db"),
    ("§1.4 BUG#46110 rpl_filter_database DROP", {"do_db": ("dbx",), "wild_do_table": ("db%.t1",)}, None, "dbx",
     "DROP DATABASE dbx", True, "replicate-do-db"),
    ("§1.4 any db rule disables the wild check", {"ignore_db": ("x",), "wild_do_table": ("db1.%",)}, None, None,
     "CREATE DATABASE db2", True, None),
    ("§1.4/§8.1 MariaDB do-db dbx alone", {"do_db": ("dbx",)}, MARIADB, None, "CREATE DATABASE dbx", True,
     "replicate-do-db"),
    ("§1.4/§8.1 MariaDB do-db dbx + wild-do db%.t1", {"do_db": ("dbx",), "wild_do_table": ("db%.t1",)}, MARIADB,
     None, "CREATE DATABASE dbx", False, "replicate-wild-do-table"),
    ("§1.4/§8.1 MariaDB ignore-db x + wild-do zz.%", {"ignore_db": ("x",), "wild_do_table": ("zz.%",)}, MARIADB,
     None, "CREATE DATABASE dbx", False, "replicate-wild-do-table"),
    ("§1.4/§8.1 MariaDB do-db dbx + wild-do dbx.%", {"do_db": ("dbx",), "wild_do_table": ("dbx.%",)}, MARIADB,
     None, "CREATE DATABASE dbx", True, "replicate-wild-do-table"),
    ("§1.5 BEGIN never filtered", {"do_db": ("a",)}, None, "b", "BEGIN", True, None),
    ("§1.5 COMMIT never filtered", {"do_db": ("a",)}, None, "b", "COMMIT", True, None),
    ("§1.5 SAVEPOINT never filtered", {"do_db": ("a",)}, None, "b", "SAVEPOINT s1", True, None),
    ("§1.5 ROLLBACK TO SAVEPOINT never filtered", {"do_db": ("a",)}, None, "b", "ROLLBACK TO SAVEPOINT s1",
     True, None),
    ("§1.5 XA never filtered (8.0.3x)", {"do_db": ("a",)}, None, "b", "XA START 'x'", True, None),
    ("§2.1 no table list: CREATE PROCEDURE passes table rules", {"do_table": ("a.t",)}, None, "a",
     "CREATE PROCEDURE p() BEGIN END", True, None),
    ("§2.2 rpl_filter_tables_not_exist: t4 ignored comes first",
     {"do_table": ("test.t1",), "ignore_table": ("test.t4",)}, None, "test",
     "UPDATE t4 LEFT JOIN t1 ON t4.a = t1.a SET a = 0, d = 0", False, "replicate-ignore-table"),
    ("§2.2 rpl_filter_tables_not_exist: t1 before t4",
     {"do_table": ("test.t1",), "ignore_table": ("test.t4",)}, None, "test",
     "UPDATE t7 LEFT JOIN (t1, t4, t2) ON (t7.g = t1.a) SET a = 1, b = 2, d = 3, g = 4", True,
     "replicate-do-table"),
    ("§2.2.2 exact ignore beats wild-do", {"ignore_table": ("a.t",), "wild_do_table": ("a.%",)}, None, "a",
     "INSERT INTO t VALUES (1)", False, "replicate-ignore-table"),
    ("§2.2.2 exact do beats wild-ignore", {"do_table": ("a.t",), "wild_ignore_table": ("a.%",)}, None, "a",
     "INSERT INTO t VALUES (1)", True, "replicate-do-table"),
    ("§2.2.3 only updated tables: SELECT source ignored", {"ignore_table": ("a.src",)}, None, "a",
     "INSERT INTO dst SELECT * FROM src", True, None),
    ("§2.2.3 rpl_replicate_do: CREATE TABLE t11 SELECT FROM t1 skipped", {"do_table": ("test.t1",)}, None,
     "test", "CREATE TABLE t11 SELECT * FROM t1", False, "replicate-do-table"),
    ("§2.3 multi-UPDATE: joined-only table not tested", {"ignore_table": ("a.t2",)}, None, "a",
     "UPDATE t1 JOIN t2 ON t1.x = t2.x SET t1.y = 1", True, None),
    ("§2.3 multi-DELETE targets only", {"ignore_table": ("a.t2",)}, None, "a",
     "DELETE t1 FROM t1 JOIN t2 ON t1.x = t2.x", True, None),
    ("§2.3 multi-DELETE aliased target", {"ignore_table": ("a.t2",)}, None, "a",
     "DELETE x FROM t1 JOIN t2 AS x ON t1.x = x.x", False, "replicate-ignore-table"),
    ("§2.2.4 final step: do list exists", {"do_table": ("a.t9",)}, None, "a", "INSERT INTO t VALUES (1)",
     False, "replicate-do-table"),
    ("§2.2.4 final step: only ignore lists", {"ignore_table": ("a.t9",)}, None, "a", "INSERT INTO t VALUES (1)",
     True, None),
    ("§2.2.5/§4 rewrite: qualified name untouched at table level",
     {"rewrite_db": (("a", "b"),), "ignore_table": ("a.t1",)}, None, "a", "INSERT INTO a.t1 VALUES (1)",
     False, "replicate-ignore-table"),
    ("§2.2.5/§4 rewrite: unqualified resolves against the rewritten db",
     {"rewrite_db": (("a", "b"),), "ignore_table": ("a.t1",)}, None, "a", "INSERT INTO t1 VALUES (1)", True, None),
    ("§4 rewrite before db rules", {"rewrite_db": (("a", "b"),), "do_db": ("b",)}, None, "a",
     "INSERT INTO t VALUES (1)", True, "replicate-do-db"),
    ("§4 first rule wins", {"rewrite_db": (("a", "b"), ("a", "c")), "do_db": ("c",)}, None, "a",
     "INSERT INTO t VALUES (1)", False, "replicate-do-db"),
    ("§4 single pass, not transitive", {"rewrite_db": (("a", "b"), ("b", "c")), "do_db": ("b",)}, None, "a",
     "INSERT INTO t VALUES (1)", True, "replicate-do-db"),
    ("§4 rpl_rewrite_db_filter: lctn=1 rewrites use mydb", {"rewrite_db": (("MYDB", "rw"),), "do_db": ("rw",)},
     LCTN1, "mydb", "INSERT INTO t VALUES (1)", True, "replicate-do-db"),
    ("§8.1 MariaDB rewrite is case-sensitive even with lctn=1",
     {"rewrite_db": (("MYDB", "rw"),), "do_db": ("rw",)}, MARIADB_LCTN1, "mydb", "INSERT INTO t VALUES (1)",
     False, "replicate-do-db"),
    ("§2.4 SET exempt from table check", {"do_table": ("a.t",)}, None, "a", "SET @x = 1", True, None),
    ("§2.4 SET still db-checked", {"do_db": ("z",)}, None, "a", "SET @x = 1", False, "replicate-do-db"),
    ("§2.4 DROP TEMPORARY TABLE IF EXISTS exempt", {"ignore_table": ("a.t",)}, None, "a",
     "DROP TEMPORARY TABLE IF EXISTS t", True, None),
    ("§2.4 plain DROP TEMPORARY TABLE filtered", {"ignore_table": ("a.t",)}, None, "a", "DROP TEMPORARY TABLE t",
     False, "replicate-ignore-table"),
    ("§2.4 DROP TABLE IF EXISTS filtered", {"ignore_table": ("a.t",)}, None, "a", "DROP TABLE IF EXISTS t",
     False, "replicate-ignore-table"),
    ("§2.5 rpl_ignore_grant: wild-ignore mysql.% skips CREATE USER", {"wild_ignore_table": ("mysql.%",)}, None,
     "test", "CREATE USER u@localhost", False, "replicate-wild-ignore-table"),
    ("§2.5 rpl_ignore_grant: GRANT", {"wild_ignore_table": ("mysql.%",)}, None, "test",
     "GRANT SELECT ON *.* TO u@localhost", False, "replicate-wild-ignore-table"),
    ("§2.5 rpl_ignore_grant: SET PASSWORD", {"wild_ignore_table": ("mysql.%",)}, None, "test",
     "SET PASSWORD FOR u@localhost = 'x'", False, "replicate-wild-ignore-table"),
    ("§2.5 do list not covering mysql.* skips account statements", {"wild_do_table": ("db1.%",)}, None, "db1",
     "DROP USER u", False, "replicate-wild-do-table"),
    ("§2.5 wild-do mysql.% lets them through", {"wild_do_table": ("db1.%", "mysql.%")}, None, "db1",
     "DROP USER u", True, "replicate-wild-do-table"),
    ("§2.5 ignore rule on one ACL table skips every ACL statement", {"ignore_table": ("mysql.db",)}, None, "x",
     "RENAME USER a TO b", False, "replicate-ignore-table"),
    ("§2.5 rpl_ignore_table BUG#25482: table GRANT on its table", {"ignore_table": ("test.t1",)}, None, "test",
     "GRANT SELECT ON test.t1 TO u", False, "replicate-ignore-table"),
    ("§2.5 ACL statements are db-checked on the event db", {"ignore_db": ("nonreplicated",)}, None,
     "nonreplicated", "GRANT SELECT ON *.* TO u", False, "replicate-ignore-db"),
    ("§2.5 direct DML on mysql.* filtered like any table", {"wild_ignore_table": ("mysql.%",)}, None, "x",
     "INSERT INTO mysql.user VALUES (1)", False, "replicate-wild-ignore-table"),
    ("§2.3 CREATE TABLE ... LIKE: source not tested", {"ignore_table": ("a.old",)}, None, "a",
     "CREATE TABLE new LIKE old", True, None),
    ("§2.3 RENAME TABLE tests both names", {"ignore_table": ("a.b",)}, None, "a", "RENAME TABLE x TO b", False,
     "replicate-ignore-table"),
    ("§2.3 WL#40 RENAME swap: tmp does not count", {"do_table": ("a.t1", "a.t2"), "wild_ignore_table": ("a.tmp",)},
     None, "a", "RENAME TABLE t1 TO tmp, t2 TO t1, tmp TO t2", True, "replicate-do-table"),
    ("§2.3 CREATE VIEW is the view name", {"ignore_table": ("a.v",)}, None, "a",
     "CREATE VIEW v AS SELECT * FROM t", False, "replicate-ignore-table"),
    ("§2.3 DROP TRIGGER of unknown trigger skipped (Bug#24478)", {"ignore_table": ("a.zz",)}, None, "a",
     "DROP TRIGGER tr1", False, "replicate-*-table"),
    ("§2.3 LOAD DATA target", {"ignore_table": ("a.t",)}, None, "a",
     "LOAD DATA INFILE '/tmp/x' INTO TABLE t", False, "replicate-ignore-table"),
    ("§3 unescaped _ over-matches", {"wild_ignore_table": ("my_db.%",)}, None, "x", "INSERT INTO myxdb.t VALUES (1)",
     False, "replicate-wild-ignore-table"),
    ("§3 escaped \\_ and \\% match literally", {"wild_ignore_table": ("my\\_own\\%db.%",)}, None, "x",
     "INSERT INTO my1ownAABCdb.t VALUES (1)", True, None),
    ("§3 escaped pattern matches the literal name", {"wild_ignore_table": ("my\\_own\\%db.%",)}, None, "x",
     "INSERT INTO `my_own%db`.t VALUES (1)", False, "replicate-wild-ignore-table"),
    ("§3 lctn=0 wild is case-sensitive", {"wild_ignore_table": ("DB.%",)}, None, "x", "INSERT INTO db.t VALUES (1)",
     True, None),
    ("§3 lctn=1 wild is case-insensitive", {"wild_ignore_table": ("DB.%",)}, LCTN1, "x",
     "INSERT INTO db.t VALUES (1)", False, "replicate-wild-ignore-table"),
    ("§8.1 MariaDB table/wild rules always case-insensitive", {"ignore_table": ("DB.T",)}, MARIADB, "x",
     "INSERT INTO db.t VALUES (1)", False, "replicate-ignore-table"),
    ("§8.1 MariaDB db rules case-sensitive even with lctn=1", {"do_db": ("MyDB",)}, MARIADB_LCTN1, "MyDB",
     "INSERT INTO t VALUES (1)", False, "replicate-do-db"),
]


@pytest.mark.parametrize("citation,rules,settings,current_db,sql,apply,rule", STATEMENT_CASES,
                         ids=[case[0] for case in STATEMENT_CASES])
def test_statement_decisions(citation, rules, settings, current_db, sql, apply, rule):
    decision = RuleEngine(RuleSet(**rules), settings).decide_statement(sql, current_db)
    assert (decision.apply, decision.rule) == (apply, rule), decision.reason


ROW_CASES = [
    ("§2.6 row events use the table db, not the session db", {"do_db": ("db1",)}, None, "db1", "t1", True),
    ("§2.6 row events: db rule skips", {"ignore_db": ("db1",)}, None, "db1", "t1", False),
    ("§2.6 row: db_ok has no wild fallback", {"wild_do_table": ("db2.%",)}, None, "db1", "t1", False),
    ("§2.6 row: do-table", {"do_table": ("db1.t1",)}, None, "db1", "t1", True),
    ("§2.6 row: rewrite maps the Table_map db", {"rewrite_db": (("a", "b"),), "do_db": ("b",)}, None, "a", "t", True),
    ("BUG#37656 lctn=1 lower-cases Table_map names", {"do_table": ("db1.t1",)}, LCTN1, "DB1", "T1", True),
    ("§8.1 MariaDB lctn=0 wild ci", {"wild_do_table": ("DB1.T%",)}, MARIADB, "db1", "t1", True),
    ("binlog-do-db: the master does not write other dbs", {"binlog_do_db": ("a",)}, None, "b", "t", False),
    ("binlog-ignore-db", {"binlog_ignore_db": ("a",)}, None, "a", "t", False),
]


@pytest.mark.parametrize("citation,rules,settings,db,table,apply", ROW_CASES, ids=[c[0] for c in ROW_CASES])
def test_row_decisions(citation, rules, settings, db, table, apply):
    engine = RuleEngine(RuleSet(**rules), settings)
    assert engine.decide_table(db, table).apply is apply
    assert engine.table_kept(db, table) is apply


def test_binlog_write_filter_passes_null_db_and_checks_database_statements_on_their_name():
    engine = RuleEngine(RuleSet(binlog_do_db=("a",)))
    assert engine.decide_statement("INSERT INTO a.t VALUES (1)", None).apply  # NULL db is written
    assert not engine.decide_statement("INSERT INTO a.t VALUES (1)", "b").apply
    assert engine.decide_statement("CREATE DATABASE a", "b").apply  # §1.1c: the db being created


def test_drop_trigger_resolves_the_table_of_an_applied_create_trigger():
    engine = RuleEngine(RuleSet(ignore_table=("a.t",)))
    assert engine.decide_statement("CREATE TRIGGER tr AFTER INSERT ON u FOR EACH ROW SET @x=1", "a").apply
    decision = engine.decide_statement("DROP TRIGGER tr", "a")
    assert decision.apply and decision.rule is None
    skipped = engine.decide_statement("CREATE TRIGGER tr2 AFTER INSERT ON t FOR EACH ROW SET @x=1", "a")
    assert not skipped.apply
    assert not engine.decide_statement("DROP TRIGGER tr2", "a").apply  # never created on the replica


def test_unparsed_statement_is_kept_and_counted():
    engine = RuleEngine(RuleSet(do_table=("a.t",)))
    decision = engine.decide_statement("FROBNICATE the table", "a")
    assert decision.apply and engine.unparsed == 1
    assert engine.decide_statement("FROBNICATE", "a").apply and engine.unparsed == 2


def test_unparsed_statement_still_obeys_db_rules():
    engine = RuleEngine(RuleSet(do_db=("a",), do_table=("a.t",)))
    assert not engine.decide_statement("FROBNICATE", "b").apply
    assert engine.unparsed == 0


def test_counters_follow_rpl_filter_statistics():
    engine = RuleEngine(RuleSet(do_db=("a",), rewrite_db=(("x", "a"),), ignore_table=("a.t",)))
    engine.decide_statement("INSERT INTO t VALUES (1)", "x")  # rewrite, do_db hit, ignore_table hit
    engine.decide_statement("INSERT INTO u VALUES (1)", "b")  # do_db miss: no counter
    assert engine.counters == {"REPLICATE_REWRITE_DB": 1, "REPLICATE_DO_DB": 1, "REPLICATE_IGNORE_TABLE": 1}


def test_track_derived_tables_adds_like_select_and_rename_targets():
    rules = RuleSet(ignore_table=("a.secret",))
    plain = RuleEngine(rules)
    plain.decide_statement("CREATE TABLE copy LIKE secret", "a")
    assert plain.table_kept("a", "copy")  # MySQL does not track derived tables
    clever = RuleEngine(rules, Settings(track_derived_tables=True))
    assert clever.table_kept("a", "copy")  # cached before the CREATE: must be invalidated
    clever.decide_statement("CREATE TABLE copy LIKE secret", "a")
    assert not clever.table_kept("a", "copy")
    clever.decide_statement("RENAME TABLE secret TO moved", "a")
    decision = clever.decide_statement("INSERT INTO moved VALUES (1)", "a")
    assert (decision.apply, decision.rule) == (False, "track-derived-tables")


EFFECTIVE = Settings(semantics="effective")
EFFECTIVE_CASES = [
    ("WL#2516 step 1: no rules -> write", {}, "x", "INSERT INTO db1.t VALUES (1)", True),
    ("WL#2516 effective db, not USE db", {"effective_ignore": ("db1.%",)}, "x", "INSERT INTO db1.t VALUES (1)",
     False),
    ("WL#2516 step 2: DO beats IGNORE", {"effective_do": ("db1.t2",), "effective_ignore": ("db1.%",)}, "x",
     "INSERT INTO db1.t2 VALUES (1)", True),
    ("WL#2516 step 3: no match -> write", {"effective_ignore": ("%.table2",)}, "x", "INSERT INTO db1.t VALUES (1)",
     True),
    ("WL#2516 IGNORE '%.table2'", {"effective_ignore": ("%.table2",)}, "x", "INSERT INTO db9.table2 VALUES (1)",
     False),
    ("WL#2516 DO/IGNORE see the master's names; REWRITE renames what is kept (seed lines 86-89)",
     {"effective_rewrite": (("db1.%", "db2.%"),), "effective_ignore": ("db2.%",)}, "x",
     "INSERT INTO db1.t VALUES (1)", True),
    ("WL#2516 DATABASE statement on 'db.'", {"effective_ignore": ("db1.%",)}, None, "DROP DATABASE db1", False),
    ("WL#2516 classic do-db maps to DO db.% plus IGNORE %.%", {"do_db": ("db1",)}, "zz",
     "INSERT INTO db1.t VALUES (1)", True),
    ("WL#2516 classic do-db: other db ignored", {"do_db": ("db1",)}, "db1", "INSERT INTO db2.t VALUES (1)", False),
]


@pytest.mark.parametrize("citation,rules,current_db,sql,apply", EFFECTIVE_CASES, ids=[c[0] for c in EFFECTIVE_CASES])
def test_effective_semantics(citation, rules, current_db, sql, apply):
    assert RuleEngine(RuleSet(**rules), EFFECTIVE).decide_statement(sql, current_db).apply is apply


def test_effective_rules_need_effective_semantics():
    from dumpfilter.errors import RuleError
    with pytest.raises(RuleError, match="filter-semantics=effective"):
        RuleEngine(RuleSet(effective_do=("a.%",)))
