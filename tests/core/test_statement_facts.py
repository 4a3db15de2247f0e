"""The one statement reader (issues #43, #80: core/src/facts, `rules.statement_facts.core_info`):
its answer is whole on every statement of the rule vectors, of `verify`'s built-in workloads, of
the real fixture binlogs and of hypothesis-built DDL, multi-table UPDATE and DELETE and triggers
(the cached answer is the same; the column names it reads are the schema model's sqlglot reading,
`_create_columns`); the texts a
second Python parser read before (comments, text outside ASCII, views, subqueries) answer as
written out here; and sqlglot reads part of at most 1% of `verify`'s workloads."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dumpfilter.rules.schema import create_columns as _create_columns
from dumpfilter.rules.schema import SchemaModel
from bench.bench_filter import parser_reads
from dumpfilter.rules.statement_facts import core_info
from dumpfilter.rules.statement_info import Kind
from dumpfilter.rules.statements import statement_tables
from tests.core.test_statement_keys import _queries, _vectors


def check(sql: str, db: str | None) -> bool:
    """Asserts the reader's answer of `sql` is whole; True when it reads the text."""
    info = core_info(sql, db or "")
    if info is None:
        assert not statement_tables(sql, db).parse_ok, sql
        return False
    assert statement_tables(sql, db) == info
    if info.columns is not None:  # where sqlglot reads the list too, the same names
        assert _create_columns(sql, db or "", SchemaModel().columns) in (None, info.columns), sql
    return True


SHAPES = [
    ("a", "UPDATE a.t1 JOIN b.t_x ON a.t1.id = b.t_x.id SET a.t1.v = CONCAT(a.t1.v, ' +', b.t_x.v) WHERE a.t1.id = 3"),
    ("a", "UPDATE b.t_x, a.t2 SET b.t_x.v = 'multi', a.t2.v = 'multi' WHERE b.t_x.id = a.t2.id"),
    ("c", "UPDATE c.t_right JOIN (a.t_left JOIN b.t_mid ON a.t_left.id = b.t_mid.id) ON c.t_right.id = a.t_left.id "
          "SET mv = 'U3' WHERE c.t_right.id = 3"),
    ("a", "UPDATE a.t_left LEFT JOIN c.t_right ON a.t_left.id = c.t_right.id SET rv = 'U1' WHERE a.t_left.id = 1"),
    ("db", "UPDATE t1 AS x JOIN t2 y USING (id) SET x.a = y.a"),
    ("db", "UPDATE t AS x SET x.a = 1"),
    ("db", "UPDATE t1 NATURAL JOIN t2 SET t1.a = 2 WHERE t1.b = 1"),
    ("db", "UPDATE t AS x SET x.a = 1 ORDER BY x.a LIMIT 3"),
    ("db", "UPDATE t1 STRAIGHT_JOIN t2 ON LEFT(t1.a, 1) = t2.b SET t2.c = 1"),
    ("c", "DELETE c.t_2, b.t2 FROM c.t_2 JOIN b.t2 ON c.t_2.id = b.t2.id WHERE c.t_2.id = 4"),
    ("c", "DELETE a.t1 FROM a.t1 JOIN c.tx1 ON a.t1.id = c.tx1.id WHERE c.tx1.id = 5"),
    ("db", "DELETE x FROM a.t1 AS x JOIN c.tx1 JOIN d.q ON a.t1.id = c.tx1.id WHERE c.tx1.id = 5"),
    ("db", "DELETE FROM x USING a.t1 AS x JOIN c.tx1 ON a.t1.id = c.tx1.id WHERE c.tx1.id = 5"),
    ("db", "DELETE FROM t AS x WHERE x.a = 1"),
    ("db", "CREATE TABLE t_sel SELECT id, v FROM a.t1 WHERE id <= 4"),
    ("db", "CREATE TABLE c.t_sel2 SELECT id, t.v AS w, 1 AS one FROM b.t2 t WHERE id <= 3"),
    ("db", "CREATE TABLE t_like LIKE c.t_1"),
    ("db", "CREATE TABLE t2 (LIKE t1)"),
    ("db", "CREATE TABLE IF NOT EXISTS `we``ird` (id INT PRIMARY KEY, `V` VARCHAR(64) DEFAULT 'a,b', KEY k (v), "
           "CONSTRAINT c CHECK (id > 0), UNIQUE KEY (v)) ENGINE=InnoDB COMMENT 'x -- y'"),
    ("db", "CREATE TEMPORARY TABLE t_scratch (id INT PRIMARY KEY, v VARCHAR(64))"),
    ("db", "CREATE OR REPLACE TABLE d.t (a INT)"),
    ("db", "CREATE TABLE t (a INT) SELECT b FROM u"),
    ("a", "CREATE TRIGGER t1_audit AFTER INSERT ON t1 FOR EACH ROW\nBEGIN\n  INSERT INTO t_audit (id, what) "
          "VALUES (NEW.id, CONCAT('insert: ', NEW.v));\nEND"),
    ("b", "CREATE DEFINER=`root`@`localhost` TRIGGER b.t_x_upd AFTER UPDATE ON t_x FOR EACH ROW BEGIN "
          "IF NEW.v <> OLD.v THEN REPLACE INTO a.t_audit VALUES (NEW.id); END IF; UPDATE t9 SET k = 1; END"),
    ("b", "CREATE TRIGGER tr BEFORE DELETE ON t FOR EACH ROW CALL p()"),
    ("b", "CREATE TRIGGER tr BEFORE INSERT ON t FOR EACH ROW SET NEW.v = 1"),
    ("b", "CREATE TRIGGER tr BEFORE INSERT ON t FOR EACH ROW FOLLOWS other SET NEW.v = 1"),
    ("b", "CREATE TRIGGER tr AFTER INSERT ON t FOR EACH ROW INSERT INTO u SELECT * FROM v"),
    ("db", "DROP TRIGGER a.t1_audit"),
    ("db", "DROP TRIGGER IF EXISTS tr"),
    ("db", "RENAME TABLE t_1 TO t_swap, t_2 TO t_1, t_swap TO t_2"),
    ("db", "RENAME TABLE a.t TO b.t"),
    ("db", "DROP DATABASE d_x"), ("db", "DROP SCHEMA IF EXISTS d_x"), ("db", "CREATE DATABASE IF NOT EXISTS e_1"),
    ("db", "DROP TEMPORARY TABLE IF EXISTS t_scratch"), ("db", "DROP TABLE a, b.c, `d`"),
    ("db", "ALTER TABLE f.t_alter ADD COLUMN w INT NOT NULL DEFAULT 0"), ("db", "ALTER ONLINE TABLE t ADD x INT"),
    ("db", "TRUNCATE TABLE t"), ("db", "TRUNCATE d.t"),
    ("db", "CREATE UNIQUE INDEX i ON d.t (a)"), ("db", "DROP INDEX i ON t"),
    # MySQL logs every DROP TABLE with this comment; schemas carry COMMENTs in their own language
    ("db", "DROP TABLE IF EXISTS `boxercrab` /* generated by server */"),
    ("db", "CREATE TABLE t (a INT) /* c */"), ("db", "CREATE /* c */ DATABASE/**/d"),
    ("db", "CREATE TABLE IF NOT EXISTS `jobs` (`ID` bigint auto_increment COMMENT '物理表导入任务id', "
           "`JOB_ID` varchar(128) NOT NULL COMMENT 'task 与  shard 的关系表', PRIMARY KEY (`ID`)) ENGINE=InnoDB "
           "DEFAULT CHARSET=utf8 COMMENT 'task 与  shard 的关系表'"),
    ("db", "ALTER TABLE t COMMENT = 'é', ADD x INT"), ("db", "RENAME TABLE a /* x */ TO b"),
    ("db", "LOAD DATA INFILE 'big_file.dat' INTO TABLE `t3` FIELDS TERMINATED BY '\\t' ENCLOSED BY '' (`a`)"),
    ("db", "LOAD DATA LOCAL INFILE '/tmp/é.csv' REPLACE INTO TABLE d.t IGNORE 1 LINES"),
    # accounts, routines, views' names (WL#2516 reads the database of what they change)
    ("db", "CREATE USER 'u'@'%' IDENTIFIED BY 'p'"), ("db", "DROP USER IF EXISTS u"), ("db", "RENAME USER a TO b"),
    ("db", "ALTER USER 'u'@'localhost' PASSWORD EXPIRE"), ("db", "GRANT SELECT, INSERT ON d.t TO 'u'@'%'"),
    ("db", "GRANT ALL ON t TO u"), ("db", "GRANT SELECT ON d.* TO u"), ("db", "REVOKE SELECT (a) ON TABLE d.t FROM u"),
    ("db", "GRANT EXECUTE ON PROCEDURE d.p TO u"), ("db", "GRANT r1 TO u"),
    ("db", "CREATE DEFINER=`root`@`%` PROCEDURE d.p(IN x INT) BEGIN INSERT INTO t VALUES (x); END"),
    ("db", "CREATE FUNCTION f RETURNS STRING SONAME 'udf.so'"), ("db", "CREATE AGGREGATE FUNCTION g RETURNS INT SONAME 'g.so'"),
    ("db", "DROP EVENT IF EXISTS d.e"), ("db", "CREATE SERVER s FOREIGN DATA WRAPPER mysql OPTIONS (HOST 'h')"),
    ("db", "DROP TABLESPACE ts"), ("db", "CALL d.p(1, 'é')"), ("db", "CALL p"),
    ("db", "DROP VIEW IF EXISTS v1, d.v2"), ("db", "ALTER VIEW d.v AS SELECT 1"),
    ("db", "ALTER DATABASE d CHARACTER SET utf8mb4"), ("db", "ALTER DATABASE CHARACTER SET utf8mb4"),
]
# What a second (Python) parser read before issue #80, each with the (kind, updated, read) the
# one reader gives: comments (a versioned one's code is code), text outside ASCII, views, and
# what sqlglot reads of a subquery, a `t.*` delete target or a join the server refuses.
READ_AS = [
    ("DROP TABLE t -- c", "DROP_TABLE", [("db", "t")], []),
    ("CREATE TABLE é (a INT)", "CREATE_TABLE", [("db", "é")], []),
    ("CREATE TABLE `é` (a INT)", "CREATE_TABLE", [("db", "é")], []),
    ("CREATE VIEW v AS SELECT 1", "CREATE_VIEW", [("db", "v")], []),
    ("CREATE OR REPLACE VIEW d.v AS SELECT a FROM t JOIN e.u USING (id)", "CREATE_VIEW", [("d", "v")],
     [("db", "t"), ("e", "u")]),
    ("/*!40000 DROP TABLE t */", "DROP_TABLE", [("db", "t")], []),
    ("/*!40000 ALTER TABLE `t` DISABLE KEYS */", "ALTER_TABLE", [("db", "t")], []),
    ("DROP TABLE t /* é */", "DROP_TABLE", [("db", "t")], []),
    ("# c\nTRUNCATE d.t", "TRUNCATE", [("d", "t")], []),
    ("UPDATE t1 JOIN t2 ON t1.a = t2.a SET t1.b = 1 /* c */", "UPDATE_MULTI", [("db", "t1")], [("db", "t2")]),
    ("DELETE t1 FROM t1 JOIN t2 ON t1.v = 'é' WHERE t1.a = 1", "DELETE_MULTI", [("db", "t1")], [("db", "t2")]),
    ("CREATE TABLE s SELECT a FROM t /* from u */", "CREATE_TABLE", [("db", "s")], [("db", "t")]),
    ("CREATE TRIGGER tr AFTER INSERT ON t FOR EACH ROW INSERT INTO u VALUES ('é')", "CREATE_TRIGGER",
     [("db", "t")], []),
    ("DELETE t1.* FROM t1, t2 WHERE t1.a = t2.a", "DELETE_MULTI", [("db", "t1")], []),
    ("UPDATE t1 JOIN t2 ON t1.a = t2.a SET t1.b = (SELECT 1)", "UPDATE_MULTI", [("db", "t1")], [("db", "t2")]),
    ("UPDATE t1 NATURAL JOIN t2 SET t1.a = 2 ORDER BY t1.a LIMIT 3", "UPDATE_MULTI", [("db", "t1")],
     [("db", "t2")]),  # (refused by the server)
    ("UPDATE LOW_PRIORITY t SET a = (SELECT MAX(b) FROM e.u)", "UPDATE", [("db", "t")], [("e", "u")]),
    ("DELETE FROM shop.t WHERE c IN (SELECT pw FROM secret.u)", "DELETE", [("shop", "t")], [("secret", "u")]),
    ("CREATE TABLE s SELECT * FROM a.t1", "CREATE_TABLE", [("db", "s")], [("a", "t1")]),
    ("CREATE TABLE s SELECT a + 1 FROM a.t1", "CREATE_TABLE", [("db", "s")], [("a", "t1")]),
    ("INSERT INTO t SELECT * FROM db3.u", "INSERT", [("db", "t")], [("db3", "u")]),
    ("REPLACE LOW_PRIORITY INTO d.t (a) SELECT a FROM u WHERE b IN (SELECT b FROM e.v)", "REPLACE", [("d", "t")],
     [("db", "u"), ("e", "v")]),
    ("WITH c AS (SELECT id FROM db2.s) UPDATE db1.t JOIN c ON t.id = c.id SET t.x = 1", "UPDATE_MULTI",
     [("db1", "t")], [("db2", "s")]),
    ("WITH c AS (SELECT pw FROM secret.u) INSERT INTO shop.t SELECT * FROM c", "INSERT", [("shop", "t")],
     [("secret", "u")]),
    ("ANALYZE NO_WRITE_TO_BINLOG TABLE t, d.u", "TABLE_MAINTENANCE", [("db", "t"), ("d", "u")], []),
    ("START TRANSACTION", "OTHER", [], []), ("XA COMMIT 'x'", "TRANSACTION", [], []),
    ("SET @a = 1", "SET", [], []), ("SET PASSWORD FOR u = 'p'", "ACCOUNT", [], []),
    ("INSTALL PLUGIN x SONAME 'x.so'", "OTHER", [], []), ("LOCK TABLES t WRITE", "OTHER", [], []),
]
# Neither read: an unclosed name or comment; a WHERE word in a string, where the references are
# cut; a reserved word as a name (the server refuses it: no binlog holds one).
NOT_READ = [
    ("db", "CREATE TABLE `t (a INT)"), ("db", "CREATE TABLE t (a INT) /* c"),
    ("db", "DELETE t1 FROM t1 JOIN t2 ON t1.v = 'where' WHERE t1.a = 1"), ("db", "TRUNCATE TABLE key"),
    ("db", "this is not sql"), ("db", "WITH c AS (SELECT 1) UPDATE c SET a = 1"),
    ("db", "UPDATE t1 JOIN t2 ON t1.a = t2.a SET t9.b = 1"),  # names no reference
]


@pytest.mark.parametrize("db,sql", SHAPES)
def test_hand_picked_shapes_are_read_and_agree(db, sql):
    assert check(sql, db)


@pytest.mark.parametrize("sql,kind,updated,read", READ_AS)
def test_what_a_second_parser_read_is_read_by_the_one_reader(sql, kind, updated, read):
    assert check(sql, "db")
    info = statement_tables(sql, "db")
    assert (info.kind.value, info.updated, info.read) == (kind, tuple(updated), tuple(read))


@pytest.mark.parametrize("db,sql", NOT_READ)
def test_what_no_server_logs_is_not_parsed(db, sql):
    assert not check(sql, db)


def test_create_select_is_read_where_the_core_names_its_columns():
    assert core_info("CREATE TABLE s SELECT * FROM a.t1", "db").columns is None
    assert core_info("CREATE TABLE s SELECT a + 1 FROM a.t1", "db").columns is None
    assert core_info("CREATE TABLE s SELECT a, b.c AS d FROM a.t1", "db").columns == ("a", "d")
    assert core_info("CREATE TABLE s (x INT) SELECT a FROM a.t1", "db").columns is None  # the model's to join


def test_rule_vectors_agree():
    vectors = _vectors()
    assert sum(check(sql, db) for db, sql in vectors) > 20


def test_real_fixture_binlogs_agree(shared_fixtures):
    seen = read = 0
    for path in sorted(p for p in shared_fixtures.rglob("*") if p.is_file() and p.suffix not in (".md", ".json",
                                                                                                  ".index", ".txt")):
        for db, sql in _queries(path):
            seen += 1
            read += check(sql, db)
    assert seen > 100 and read > 0


def _verify_statements():
    from dumpfilter.lab.verify import builtin_paths
    from dumpfilter.lab.verify.against_replicas import split_statements

    _topology, workload, seed = builtin_paths()
    out = {}
    for name, path in (("sharp_edges", workload), ("seed", seed)):
        texts = [st.sql for st in split_statements(path.read_text())]
        out[name] = [t for t in texts if t.split() and t.split()[0].upper() not in ("USE", "BEGIN", "COMMIT", "SET")]
    return out


@pytest.mark.parametrize("name", ["sharp_edges", "seed"])
def test_verify_workloads_go_to_python_for_at_most_one_statement_in_a_hundred(name):
    texts = _verify_statements()[name]
    assert len(texts) > 30
    for sql in texts:
        check(sql, "a")
    python = [sql for sql in texts if parser_reads(sql, "a")]
    assert len(python) <= len(texts) // 100, python


# -- generated statements ----------------------------------------------------------------------------
_ws = st.sampled_from([" ", "  ", "\n", "\t", " \r\n "])
_case = st.sampled_from([str.upper, str.lower, str.title])
_bare = st.sampled_from(["t", "t1", "T_2", "x$y", "a", "b", "db", "key", "where", "order", "set", "on", "left",
                         "join", "using", "values", "select", "from", "as", "end", "new", "é"])
_quoted = st.text(st.sampled_from("ab`. $;,()'"), min_size=1, max_size=5).map(lambda s: "`" + s.replace("`", "``") + "`")
_plain = st.sampled_from(["t", "t1", "T_2", "x$y", "a", "b", "db", "end", "new", "9a"])
_ident = st.one_of(_plain, _plain, _plain, _bare, _quoted)  # mostly names the core reads


@st.composite
def _qname(draw):
    name = draw(_ident)
    if draw(st.booleans()):
        return name
    return draw(_ident) + draw(st.sampled_from([".", " . ", ". "])) + name


@st.composite
def _sql(draw):
    """Text from words and pieces, keywords in any case, with the grammar's edges."""
    w = draw(_case)
    parts: list[str] = []

    def say(*pieces):
        for piece in pieces:
            parts.append(piece)
            parts.append(draw(_ws))

    def kw(text):
        say(w(text))

    def condition():
        say(draw(st.sampled_from(["a.x = b.x", "x = 1", "LEFT(a.x, 1) = 'where'", "(a.x, b.y) = (1, 2)",
                                  "a.x = 'ORDER BY'", "x IN (1, 2)", "x = `limit`", "a$where = 1", "x = 'é'",
                                  "x = 1 /* from */"])))

    def refs(depth=0):
        n = draw(st.integers(1, 3))
        for i in range(n):
            if i:
                say(draw(st.sampled_from([",", "JOIN", "LEFT JOIN", "INNER JOIN", "CROSS JOIN", "STRAIGHT_JOIN",
                                          "NATURAL JOIN", "LEFT OUTER JOIN", "RIGHT JOIN", "JOIN"])))
            if depth < 2 and draw(st.integers(0, 5)) == 0:
                say("(")
                refs(depth + 1)
                say(")")
            else:
                say(draw(_qname()))
                alias = draw(st.sampled_from(["", "", "AS x", "y", "AS `z`", "AS", "PARTITION (p)", "USE INDEX (i)"]))
                if alias:
                    say(alias)
            if i and parts[-4:-2] != [","] and draw(st.booleans()):
                if draw(st.booleans()):
                    kw("ON")
                    condition()
                else:
                    say("USING (id)")

    def tail():
        clause = draw(st.sampled_from(["", "WHERE", "ORDER BY", "LIMIT", "GROUP BY", "WHERE"]))
        if clause == "WHERE":
            kw("WHERE")
            condition()
        elif clause:
            kw(clause)
            say(draw(st.sampled_from(["3", "a.x"])) if clause == "LIMIT" else "a.x")

    def assignments():
        for i in range(draw(st.integers(1, 3))):
            if i:
                say(",")
            target = draw(st.sampled_from(["v", "x.v", "a.t.v", "`t`.v", "t1.v", "y.v", "z.v"]))
            say(target, "=", draw(st.sampled_from(["1", "'x, y'", "CONCAT(v, ',')", "(SELECT 1)", "v + 1",
                                                   "'a = b'"])))

    shape = draw(st.sampled_from(["update", "delete_from", "delete_using", "create", "create_select",
                                  "create_like", "trigger", "drop", "alter", "rename", "database", "index",
                                  "truncate", "load", "object"]))
    if shape == "update":
        kw("UPDATE")
        for modifier in draw(st.lists(st.sampled_from(["LOW_PRIORITY", "IGNORE"]), max_size=2)):
            kw(modifier)
        refs()
        kw("SET")
        assignments()
        tail()
    elif shape in ("delete_from", "delete_using"):
        kw("DELETE")
        targets = draw(st.lists(st.sampled_from(["t", "t1", "x", "a.t", "t.*", "y", "d.t1", "`t`"]), min_size=1,
                                max_size=3))
        if shape == "delete_from":
            say(", ".join(targets))
            kw("FROM")
        else:
            kw("FROM")
            say(", ".join(targets))
            kw("USING")
        refs()
        tail()
    elif shape in ("create", "create_select", "create_like"):
        kw("CREATE")
        for modifier in draw(st.lists(st.sampled_from(["TEMPORARY", "OR REPLACE"]), max_size=1)):
            kw(modifier)
        kw("TABLE")
        if draw(st.booleans()):
            kw("IF NOT EXISTS")
        say(draw(_qname()))
        if shape == "create_like":
            say(draw(st.sampled_from(["LIKE", "(LIKE", "like"])), draw(_qname()))
        elif shape == "create" or draw(st.booleans()):
            items = draw(st.lists(st.sampled_from(["id INT PRIMARY KEY", "`V` VARCHAR(64) DEFAULT 'a,b'", "v INT",
                                                   "KEY k (v)", "PRIMARY KEY (id, v)", "CONSTRAINT c CHECK (id > 0)",
                                                   "UNIQUE KEY (v)", "w DECIMAL(10, 2) NOT NULL", "key INT",
                                                   "`a``b` TEXT", "INDEX (w)", "x", "FOREIGN KEY (a) REFERENCES u (b)",
                                                   "period INT", "system INT", "c ENUM('a', 'b')"]),
                                  min_size=1, max_size=4))
            say("(", ", ".join(items), ")")
            say(draw(st.sampled_from(["", "ENGINE=InnoDB", "COMMENT 'select -- x'", "DEFAULT CHARSET=utf8mb4",
                                      "COMMENT '物理表 from'", "/* generated by server */", "/* c"])))
        if shape == "create_select":
            kw("SELECT")
            say(", ".join(draw(st.lists(st.sampled_from(["id", "v", "t.v", "a.t.v", "v AS w", "1 AS one", "*",
                                                          "t.*", "v + 1", "DISTINCT v", "`q`", "NULL", "v w"]),
                                        min_size=1, max_size=3))))
            if draw(st.integers(0, 4)):
                kw("FROM")
                refs()
                tail()
    elif shape == "trigger":
        kw("CREATE")
        if draw(st.booleans()):
            say("DEFINER=" + draw(st.sampled_from(["`root`@`localhost`", "CURRENT_USER", "CURRENT_USER()",
                                                   "root@localhost"])))
        kw("TRIGGER")
        if draw(st.booleans()):
            kw("IF NOT EXISTS")
        say(draw(_qname()))
        kw(draw(st.sampled_from(["BEFORE", "AFTER"])))
        kw(draw(st.sampled_from(["INSERT", "UPDATE", "DELETE"])))
        kw("ON")
        say(draw(_qname()))
        kw("FOR EACH ROW")
        if draw(st.integers(0, 5)) == 0:
            say(draw(st.sampled_from(["FOLLOWS tr0", "PRECEDES tr0"])))
        bodies = ["INSERT INTO {} VALUES (NEW.id)", "REPLACE INTO {} SET a = NEW.a", "UPDATE {} SET k = k + 1",
                  "DELETE FROM {} WHERE id = OLD.id", "SET NEW.v = 1", "CALL p()", "INSERT INTO {} SELECT 1",
                  "UPDATE {} JOIN u ON u.a = 1 SET k = 1", "SET @x = INSERT('abc', 1, 1, 'z')",
                  "IF NEW.a THEN DELETE FROM {}; END IF"]
        statements = [draw(st.sampled_from(bodies)).format(draw(_qname())) for _ in range(draw(st.integers(1, 3)))]
        if len(statements) == 1 and draw(st.booleans()):
            say(statements[0])
        else:
            say("BEGIN", "; ".join(statements) + draw(st.sampled_from([";", ""])), "END")
    elif shape == "drop":
        kw("DROP")
        if draw(st.booleans()):
            kw("TEMPORARY")
        kw(draw(st.sampled_from(["TABLE", "TABLES", "TRIGGER", "DATABASE", "SCHEMA", "VIEW", "SEQUENCE"])))
        if draw(st.booleans()):
            kw("IF EXISTS")
        say(", ".join(draw(st.lists(_qname(), min_size=1, max_size=3))))
        say(draw(st.sampled_from(["", ";", "CASCADE", "-- x", "/* generated by server */", "/*!50000 x */"])))
    elif shape == "alter":
        kw("ALTER")
        if draw(st.booleans()):
            kw(draw(st.sampled_from(["ONLINE", "IGNORE"])))
        kw(draw(st.sampled_from(["TABLE", "TABLE IF EXISTS", "DATABASE", "VIEW"])))
        say(draw(_qname()), draw(st.sampled_from(["ADD COLUMN w INT", "RENAME TO u9", "DROP v", "ENGINE=InnoDB"])))
    elif shape == "rename":
        kw("RENAME")
        kw(draw(st.sampled_from(["TABLE", "TABLES", "USER"])))
        pairs = [f"{draw(_qname())} {w('TO')} {draw(_qname())}" for _ in range(draw(st.integers(1, 3)))]
        say(", ".join(pairs))
    elif shape == "database":
        kw(draw(st.sampled_from(["CREATE", "DROP"])))
        kw(draw(st.sampled_from(["DATABASE", "SCHEMA"])))
        if draw(st.booleans()):
            kw(draw(st.sampled_from(["IF EXISTS", "IF NOT EXISTS"])))
        say(draw(_ident), draw(st.sampled_from(["", "CHARACTER SET utf8mb4"])))
    elif shape == "index":
        kw(draw(st.sampled_from(["CREATE", "CREATE UNIQUE", "DROP"])))
        kw("INDEX")
        say(draw(_ident))
        kw("ON")
        say(draw(_qname()), "(a)")
    elif shape == "object":
        name = draw(_qname())
        say(draw(st.sampled_from([
            f"CREATE {draw(st.sampled_from(['', 'DEFINER=`root`@`%` ', 'DEFINER=CURRENT_USER() ']))}"
            f"{draw(st.sampled_from(['PROCEDURE', 'FUNCTION', 'EVENT', 'PACKAGE BODY']))} "
            f"{draw(st.sampled_from(['', 'IF NOT EXISTS ']))}{name}() BEGIN INSERT INTO x VALUES (1); END",
            f"CREATE {draw(st.sampled_from(['', 'AGGREGATE ']))}FUNCTION {name} RETURNS STRING SONAME 'x.so'",
            f"{draw(st.sampled_from(['DROP', 'ALTER']))} {draw(st.sampled_from(['PROCEDURE', 'FUNCTION', 'EVENT', 'USER', 'ROLE', 'SERVER', 'TABLESPACE', 'RESOURCE GROUP', 'LOGFILE GROUP']))} "
            f"{draw(st.sampled_from(['', 'IF EXISTS ']))}{name}",
            f"CREATE USER {name} IDENTIFIED BY 'p'", f"RENAME {draw(st.sampled_from(['USER', 'ROLE']))} {name} TO u2",
            f"{draw(st.sampled_from(['GRANT', 'REVOKE']))} {draw(st.sampled_from(['ALL', 'SELECT, INSERT', 'SELECT (a)', 'r1']))}"
            f" {draw(st.sampled_from(['ON *.*', 'ON d.*', 'ON ' + name, 'ON TABLE ' + name, 'ON PROCEDURE ' + name, '']))}"
            f" {draw(st.sampled_from(['TO', 'FROM']))} 'u'@'%'",
            f"CALL {name}{draw(st.sampled_from(['', '()', '(1, x)']))}",
            f"DROP VIEW {draw(st.sampled_from(['', 'IF EXISTS ']))}{name}{draw(st.sampled_from(['', ', v2']))}",
            f"ALTER VIEW {name} AS SELECT 1",
            f"ALTER {draw(st.sampled_from(['DATABASE', 'SCHEMA']))} {draw(st.sampled_from(['', name + ' ']))}"
            f"{draw(st.sampled_from(['CHARACTER SET utf8mb4', 'DEFAULT COLLATE x', 'READ ONLY 1', 'UPGRADE DATA DIRECTORY NAME']))}",
        ])))
    elif shape == "load":
        kw("LOAD DATA")
        say(draw(st.sampled_from(["", "LOCAL", "LOW_PRIORITY"])), "INFILE", draw(st.sampled_from(["'f'", "'é'"])))
        say(draw(st.sampled_from(["", "REPLACE", "IGNORE"])), draw(st.sampled_from(["INTO TABLE", "INTO", "TABLE"])))
        say(draw(_qname()), draw(st.sampled_from(["", "FIELDS TERMINATED BY ','", "(a, b)", "IGNORE 1 LINES"])))
    else:
        kw("TRUNCATE")
        if draw(st.booleans()):
            kw("TABLE")
        say(draw(_qname()))
    return draw(st.sampled_from(["", " ", "\n"])) + "".join(parts[:-1]) + draw(st.sampled_from(["", ";", " ;"]))


@settings(max_examples=3000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_sql(), st.sampled_from(["db", "", "d`b", "a"]))
def test_generated_statements_are_answered_whole(sql, db):
    check(sql, db)


@settings(max_examples=500, deadline=None)
@given(st.text(st.sampled_from("CREATEDROPUPDATLJOINS ,.()`'=;*abt\n"), max_size=60), st.sampled_from(["db", ""]))
def test_any_text_is_answered_whole(sql, db):
    check(sql, db)


# -- hostile text: work stays linear in the statement's length ---------------------------------------
def _trigger(n: int, sep: str) -> str:
    body = sep.join(f"INSERT INTO t{i} VALUES (1)" for i in range(n))
    return f"CREATE TRIGGER tr AFTER INSERT ON t FOR EACH ROW BEGIN {body} END"


@pytest.mark.parametrize("n,sep,followed", [(8, " ", True), (9, " ", False), (20, "; ", True), (4000, " ", False)])
@pytest.mark.parametrize("comment", ["", "# c\n"])
def test_a_body_statement_holding_more_writes_than_one_statement_can_is_not_followed(n, sep, followed, comment):
    """A trigger's writes are cut at MAX_WRITES_PER_STATEMENT write words before one `;` (each would
    be read from its word to the `;`: quadratic in a hostile body), a comment in it or not."""
    from dumpfilter.rules.schema import SchemaModel

    model = SchemaModel()
    model.observe(_trigger(n, sep).replace(" BEGIN ", f" BEGIN {comment}"), "db")
    (trigger,) = model.triggers.values()
    assert (trigger.writes is not None) is followed
    if followed:
        assert trigger.writes == tuple((("db", f"t{i}"), "INSERT") for i in range(n))


def test_a_join_of_thousands_is_read_in_linear_work():
    """A multi-table UPDATE and DELETE of 20 000 references (the server refuses past 61, so no
    binlog holds one): answered from the facts, the targets resolved with sets, not by pairs."""
    refs = ", ".join(f"d.t{i}" for i in range(20_000))
    update = core_info(f"UPDATE {refs} SET " + ", ".join(f"t{i}.v = 1" for i in range(0, 20_000, 2)), "d")
    assert update.kind is Kind.UPDATE_MULTI and len(update.joined) == 20_000 and len(update.updated) == 10_000
    delete = core_info(f"DELETE {', '.join(f'd.t{i}' for i in range(0, 20_000, 2))} FROM {refs} WHERE t0.a = 1", "d")
    assert delete.kind is Kind.DELETE_MULTI and len(delete.updated) == 10_000


@pytest.mark.parametrize("sql", [
    # Found by Hypothesis: a SELECT inside a comment is no CREATE ... SELECT (Python read every
    # SELECT word of the text, the core only its tokens); MySQL's comments do not nest.
    "CREATE TABLE t.t ( id INT PRIMARY KEY ) /* c SELECT ... /* from */ , t.t",
    # A LIKE past the column list: neither reads the columns.
    "CREATE TABLE t.t (id INT) LIKE u , x",
])
def test_a_word_in_a_comment_or_past_the_list_is_read_alike(sql):
    assert check(sql, "db")
