"""rules/policy_bound.py: what a statement's text reaches, for the master policy's bound (issue #27
6.3). Each form of the class the issue names, the default database's share, Annotate_rows texts
(whose default database only their Table_maps tell), and hostile text (None, never an exception)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dumpfilter.rules.policy_bound as bound
from dumpfilter.rules.policy_bound import Reach, annotation_reach, shape, statement_reach


def _dbs(reach: Reach) -> set[str]:
    return {db for db, _ in reach.tables} | set(reach.schemas)


# (statement, default database, databases its reach must include)
REACHES = [
    # Account statements write mysql.*, whatever the default database (rules judge them by it).
    ("CREATE USER 'x'@'%' IDENTIFIED BY 'pw'", "shop", {"mysql"}),
    ("GRANT ALL ON shop.* TO 'x'@'%' IDENTIFIED BY 'pw'", "shop", {"mysql"}),
    ("ALTER USER 'x'@'%' IDENTIFIED BY 'pw'", "shop", {"mysql"}),
    ("SET PASSWORD FOR 'x'@'%' = '*34CE382EF358203FE85196C0F3D1B3316575E13A'", "shop", {"mysql"}),
    ("RENAME USER a TO b", "shop", {"mysql"}),
    ("DROP USER a", "shop", {"mysql"}),
    ("CREATE ROLE r", "shop", {"mysql"}),
    ("GRANT r TO a", "shop", {"mysql"}),
    ("REVOKE ALL ON *.* FROM a", "shop", {"mysql"}),
    ("CREATE SERVER s FOREIGN DATA WRAPPER mysql OPTIONS (USER 'u', PASSWORD 'p')", "shop", {"mysql"}),
    ("INSTALL PLUGIN x SONAME 'x.so'", "shop", {"mysql"}),
    # Subqueries, ODKU, CTEs, SET STATEMENT, CREATE ... SELECT, views.
    ("INSERT INTO shop.t VALUES ((SELECT pw FROM secret.u LIMIT 1))", "shop", {"secret"}),
    ("INSERT INTO shop.t VALUES (1) ON DUPLICATE KEY UPDATE c = (SELECT pw FROM secret.u LIMIT 1)", "shop",
     {"secret"}),
    ("INSERT INTO shop.t SELECT pw FROM u", "secret", {"secret"}),
    ("WITH c AS (SELECT pw FROM secret.u) INSERT INTO shop.t SELECT * FROM c", "shop", {"secret"}),
    ("SET STATEMENT max_statement_time=10 FOR INSERT INTO secret.t VALUES ('pw')", "shop", {"secret"}),
    ("CREATE TABLE shop.t2 AS SELECT pw FROM secret.u", "shop", {"secret"}),
    ("CREATE VIEW shop.v AS SELECT pw FROM u", "secret", {"secret"}),
    ("UPDATE shop.t AS x JOIN secret.u AS y ON x.id = y.id SET x.c = y.pw", "shop", {"secret"}),
    ("DELETE FROM shop.t WHERE c IN (SELECT pw FROM secret.u)", "shop", {"secret"}),
    ("INSERT INTO shop.t TABLE secret.u", "shop", {"secret"}),
    # Qualified names outside table positions: stored functions, sequences, three-part columns.
    ("INSERT INTO shop.t VALUES (secret.f('pw'))", "shop", {"secret"}),
    ("INSERT INTO shop.t VALUES (NEXTVAL(secret.s))", "shop", {"secret"}),
    ("INSERT INTO shop.t VALUES (NEXT VALUE FOR s)", "secret", {"secret"}),
    ("INSERT INTO shop.t SELECT secret.u.c FROM shop.u", "shop", {"secret"}),
    ("DO secret.f('pw')", "shop", {"secret"}),
    ("CALL secret.p('pw')", "shop", {"secret"}),
    # DDL naming other tables.
    ("ALTER TABLE shop.t ADD FOREIGN KEY (a) REFERENCES secret.p (id)", "shop", {"secret"}),
    ("CREATE TABLE shop.t (a INT, FOREIGN KEY (a) REFERENCES p (id))", "secret", {"secret"}),
    ("ALTER TABLE shop.t RENAME TO t2", "secret", {"secret"}),
    ("RENAME TABLE shop.t TO secret.t", "shop", {"secret"}),
    # Bodies: their bare names are the trigger's / routine's schema's.
    ("CREATE TRIGGER shop.tr AFTER INSERT ON shop.t FOR EACH ROW INSERT INTO secret.log VALUES (NEW.id)", "shop",
     {"secret"}),
    ("CREATE TRIGGER shop.tr AFTER INSERT ON shop.t FOR EACH ROW BEGIN IF NEW.a > 0 THEN "
     "INSERT INTO secret.log VALUES (NEW.a); END IF; END", "shop", {"secret"}),
    ("CREATE PROCEDURE shop.p() INSERT INTO secret.log VALUES ('pw')", "shop", {"secret"}),
    ("CREATE EVENT shop.e ON SCHEDULE EVERY 1 HOUR DO INSERT INTO secret.log VALUES ('pw')", "shop", {"secret"}),
    ("CREATE FUNCTION shop.f() RETURNS INT RETURN (SELECT COUNT(*) FROM secret.u)", "shop", {"secret"}),
    ("CREATE PROCEDURE shop.p() INSERT INTO log VALUES (1)", "secret", {"shop"}),
]


@pytest.mark.parametrize("sql, default, reached", REACHES, ids=[s[:50] for s, _, _ in REACHES])
def test_the_reach_holds_every_object_the_text_names(sql, default, reached):
    reach = statement_reach(sql, default)
    assert reach is not None and reached <= _dbs(reach), reach


# Statements within shop alone: their reach is shop's (or the default database's, here shop).
WITHIN_SHOP = [
    ("INSERT INTO t VALUES (1, 'a', NOW())", "shop"),
    ("INSERT INTO shop.t VALUES (1, 'a', NOW(), UUID_SHORT())", "other"),
    ("INSERT INTO t (a, b) VALUES (1, 2) ON DUPLICATE KEY UPDATE b = VALUES(b)", "shop"),
    ("INSERT INTO t (a) VALUES (1) AS new ON DUPLICATE KEY UPDATE a = new.a", "shop"),
    ("REPLACE LOW_PRIORITY INTO shop.t SELECT * FROM shop.u", "other"),
    ("UPDATE shop.t AS x SET x.c = 1 WHERE x.id = 3", "other"),
    ("UPDATE IGNORE t SET c = 1 ORDER BY id LIMIT 3", "shop"),
    ("DELETE QUICK IGNORE FROM t WHERE id = 1", "shop"),
    ("WITH c AS (SELECT id FROM u) UPDATE t JOIN c ON t.id = c.id SET t.a = 1", "shop"),
    ("CREATE TABLE t (id INT PRIMARY KEY, a VARCHAR(10), KEY ka (a)) ENGINE=InnoDB", "shop"),
    ("CREATE OR REPLACE ALGORITHM=MERGE DEFINER=`root`@`localhost` SQL SECURITY DEFINER VIEW v AS SELECT a FROM t",
     "shop"),
    ("CREATE DEFINER=`root`@`localhost` TRIGGER tr AFTER INSERT ON t FOR EACH ROW BEGIN "
     "INSERT INTO log (id, x) VALUES (NEW.id, NEW.a); UPDATE cnt SET n = n + 1; END", "shop"),
    ("CREATE PROCEDURE p(IN x INT) BEGIN DECLARE y INT DEFAULT 0; SELECT COUNT(*) INTO y FROM t; "
     "INSERT INTO log VALUES (x, y); END", "shop"),
    ("LOAD DATA INFILE '/tmp/x' INTO TABLE t FIELDS TERMINATED BY ',' IGNORE 1 LINES (a, @b) SET c = UPPER(@b)",
     "shop"),
    ("INSERT INTO t VALUES (@a, @@session.sql_mode, 1.5, x'ab', _utf8'x' COLLATE utf8_bin, '$.a.b')", "shop"),
    ("SET STATEMENT max_statement_time=10 FOR INSERT INTO t VALUES (1)", "shop"),
    ("CALL shop.p(1)", "other"),
]


@pytest.mark.parametrize("sql, default", WITHIN_SHOP, ids=[s[:50] for s, _ in WITHIN_SHOP])
def test_statements_within_one_schema_reach_only_it(sql, default):
    reach = statement_reach(sql, default)
    assert reach is not None and _dbs(reach) <= {"shop"}, reach
    assert not reach.default_schema or default == "shop", reach


def test_a_call_that_may_be_a_stored_function_reaches_the_default_database():
    assert statement_reach("INSERT INTO shop.t VALUES (f(1))", "other").default_schema
    assert not statement_reach("INSERT INTO shop.t VALUES (CONCAT(NOW(), UUID_SHORT()))", "other").default_schema


def test_a_statement_without_objects_needs_its_default_database():
    reach = statement_reach("SET @a = 1", "other")
    assert reach == Reach(default_schema=True)


@pytest.mark.parametrize("sql", [
    "INSERT INTO shop.t VALUES (1); INSERT INTO secret.t VALUES (2)",   # two statements in one event
    "XA COMMIT 'x'; INSERT INTO secret.t VALUES (1)",
    "CHANGE MASTER TO MASTER_PASSWORD='pw'",                            # not a statement a binlog carries
    "LOAD DATA INFILE '/tmp/x' INTO TABLE shop.t (a) SET b = (SELECT pw FROM secret.u LIMIT 1)",  # sqlglot cannot
    "INSERT INTO t VALUES ('unbalanced)",
    "INSERT INTO shop.t VALUES " + "(SELECT " * 400 + "1" + ")" * 400,  # deeper than sqlglot goes
    "", ";;", "SET STATEMENT x = 1 FOR", "\x00\xff",
])
def test_text_that_cannot_be_analysed_has_no_reach(sql):
    assert statement_reach(sql, "shop") is None


def test_an_annotations_default_database_is_told_by_its_table_maps():
    # The multi-table UPDATE of the issue: rows of shop.a and secret.b, literal values of both.
    sql = "UPDATE a JOIN secret.b ON a.id = b.id SET a.x = 'new', b.pw = 'pw'"
    assert _dbs(annotation_reach(sql, [("shop", "a"), ("secret", "b")])) == {"shop", "secret"}
    sql = "UPDATE a JOIN b ON a.id = b.id SET a.x = 1, b.y = 'pw'"
    assert _dbs(annotation_reach(sql, [("shop", "a"), ("shop", "b")])) == {"shop"}
    assert annotation_reach(sql, [("shop", "a"), ("secret", "b")]) is None  # which default database?
    assert _dbs(annotation_reach("UPDATE shop.a JOIN secret.b ON a.id = b.id SET b.y = 1", [("shop", "a")])) \
        >= {"secret"}
    # Read-only bare names follow the written one's database.
    assert _dbs(annotation_reach("INSERT INTO t SELECT * FROM u", [("shop", "t")])) == {"shop"}
    # Not told: no bare name written, or Table_maps in two databases for it.
    assert annotation_reach("INSERT INTO shop.t SELECT * FROM u", [("shop", "t")]) is None
    assert annotation_reach("INSERT INTO t VALUES (1)", [("shop", "t"), ("secret", "t")]) is None
    # A call that may be a stored function's: the told database whole.
    assert annotation_reach("INSERT INTO t VALUES (f(1))", [("shop", "t")]).schemas == {"shop"}


def test_a_statement_nested_deeper_than_sqlglot_goes_is_not_analysed_and_raises_nothing():
    """sqlglot raises RecursionError on deep nesting: the classifier reads no tables from it (and
    used to raise it through the master's stream), the bound does not analyse it."""
    from dumpfilter.rules.statements import statement_tables

    sql = "INSERT INTO shop.t VALUES " + "(SELECT " * 400 + "1" + ")" * 400
    assert statement_tables(sql, "shop").updated == (("shop", "t"),)
    assert statement_reach(sql, "shop") is None


def _reach(tables: set[tuple[str, str]], schemas: frozenset[str] = frozenset(), default: bool = False) -> Reach:
    return Reach(frozenset(tables), schemas, default)


_T, _TRIGGER = {("shop", "t")}, "CREATE TRIGGER shop.tr AFTER INSERT ON shop.t FOR EACH ROW BEGIN "
# (text, default database, its reach). Single-table DML whose text reaches its table alone is
# read by the core (the master walk's own check); the rest, and what the core's lexer does not
# read (a comment, a name outside ASCII), by the general path: each reaches what it names.
EXACT = [
    ("INSERT INTO t (a, b) VALUES (1, 'x') ON DUPLICATE KEY UPDATE b = VALUES(b)", "shop", _reach(_T)),
    ("UPDATE `shop`.`t` SET a = CONCAT(a, 'x') WHERE id = 3", "other", _reach(_T)),
    ("DELETE FROM t WHERE a = DATE_FORMAT(NOW(), '%Y')", "shop", _reach(_T)),  # a built-in the core lists not
    ('REPLACE INTO t SET a = "q"', "shop", _reach(_T)),                         # a string or, in ANSI_QUOTES, a name
    ("UPDATE t SET a = 'x\\' WHERE b = 1", "shop", _reach(_T)),
    ("UPDATE t SET a = 1 # secret.x\n", "shop", _reach(_T)),
    ("INSERT INTO caf\u00e9 VALUES (1)", "shop", _reach({("shop", "caf\u00e9")})),
    ("UPDATE t SET a = f(1)", "shop", _reach(_T, default=True)),
    ("UPDATE t SET a = secret.f(1)", "shop", _reach(_T | {("secret", "f")})),
    ("UPDATE t SET a = NEXTVAL(s)", "shop", _reach(_T | {("shop", "s")})),
    ("INSERT INTO t VALUES ((SELECT pw FROM secret.s))", "shop", _reach(_T | {("secret", "s")})),
    ("INSERT INTO t TABLE s", "shop", _reach(_T | {("shop", "s")})),
    # Bodies: the statements the core clears, the pieces it declines (a call, a query), and the
    # same bodies where its lexer declines the whole text: the same reach.
    (_TRIGGER + "UPDATE a SET c = NEW.c WHERE id = OLD.id; IF NEW.x > 0 THEN DELETE FROM x.b WHERE id = 1; "
     "INSERT INTO c VALUES (f(1)); END IF; END", "other",
     _reach(_T | {("shop", "a"), ("x", "b"), ("shop", "c")}, frozenset({"shop"}))),
    (_TRIGGER + "UPDATE a SET c = NEW.c WHERE id = OLD.id; DELETE FROM x.b WHERE id = 1; END", "other",
     _reach(_T | {("shop", "a"), ("x", "b")})),
    (_TRIGGER + "UPDATE a SET c = NEW.c WHERE id = OLD.id; # note\n DELETE FROM x.b WHERE id = 1; END", "other",
     _reach(_T | {("shop", "a"), ("x", "b")})),
    (_TRIGGER + "UPDATE a SET c = 'caf\u00e9' WHERE id = OLD.id; DELETE FROM x.b WHERE id = 1; END", "other",
     _reach(_T | {("shop", "a"), ("x", "b")})),
    (_TRIGGER + "UPDATE caf\u00e9 SET c = NEW.c; DELETE FROM x.b WHERE id = 1; END", "other",
     _reach(_T | {("shop", "caf\u00e9"), ("x", "b")})),
    ("CREATE PROCEDURE shop.p(IN a INT) BEGIN UPDATE t SET c = a; CALL q(); END", "other",
     _reach(_T, frozenset({"shop"}))),
    ("CREATE EVENT shop.e ON SCHEDULE EVERY 1 DAY DO UPDATE t SET a = (SELECT pw FROM secret.u)", "other",
     _reach(_T | {("secret", "u")}, frozenset({"shop"}))),
    # sql_mode=ORACLE: a routine without a parameter list, its first parenthesis in the body.
    ("CREATE PROCEDURE shop.p AS BEGIN UPDATE secret.u SET a = (1); END", "other",
     _reach({("secret", "u")}, frozenset({"shop"}))),
    ("CREATE PACKAGE BODY shop.pk AS FUNCTION f RETURN INT AS BEGIN RETURN (SELECT pw FROM secret.u); END; END",
     "other", _reach({("secret", "u")}, frozenset({"shop"}))),
]


@pytest.mark.parametrize("sql, default, reach", EXACT, ids=[s[-60:] for s, _, _ in EXACT])
def test_each_form_reaches_what_it_names(sql, default, reach):
    assert statement_reach(sql, default) == reach


_PIECES = st.sampled_from(["INSERT", " ", "t4", "`t4`", "`a b`", "`1 2`", "`x'y`", "'s1'", "'a\\'b'", "'it''s'",
                           '"d1"', "12", "1.5", "6.5e3", "0x1F", "1abc", "(", ")", ",", ".", "#c\n", "-- c\n",
                           "/* 3 */", "/*!50100 9 */", "@@s.x", "x'0A'", "\\"])


@settings(max_examples=500, deadline=None)
@given(st.lists(_PIECES, max_size=12))
def test_the_plain_shape_is_the_general_one(pieces):
    """`shape`'s two plain substitutions answer as its general form, where they are used."""
    from dumpfilter.rules.policy_bound import _SHAPE, _shape_part

    sql = "".join(pieces)
    assert shape(sql) == _SHAPE.sub(_shape_part, sql), sql


def test_a_long_trigger_body_of_plain_statements_is_not_read_by_sqlglot(monkeypatch):
    """The master's policy check of a CREATE TRIGGER whose 2,000 body statements each write one
    table by NEW's values (a 2 MB trigger of 50,000 took the bound minutes, one sqlglot parse per
    statement): the core clears every piece, sqlglot reads none, and the reach is the body's tables."""
    parsed = []
    parse = bound._parse
    monkeypatch.setattr(bound, "_parse", lambda text: parsed.append(text) or parse(text))
    body = "; ".join(f"UPDATE b{i % 5} SET c = NEW.c + {i} WHERE id = OLD.id" for i in range(2000))
    sql = f"CREATE TRIGGER shop.tr AFTER UPDATE ON shop.t FOR EACH ROW BEGIN {body}; END"
    reach = statement_reach(sql, "other")
    assert parsed == []
    assert reach == Reach(frozenset({("shop", "t")} | {("shop", f"b{k}") for k in range(5)}))


def test_a_big_trigger_is_not_tokenized_in_python(monkeypatch):
    """The bench's trigger (bench_readers.big_trigger, here of 5,000 statements): the core reads
    its body, no token of it comes to Python, and the reach is its tables."""
    from bench.bench_readers import big_trigger
    real = bound._core.sql_tokens
    lexed = []
    monkeypatch.setattr(bound._core, "sql_tokens", lambda text, **kw: lexed.append(text) or real(text, **kw))
    reach = statement_reach(big_trigger(5000), "t")
    assert lexed == []
    assert reach == Reach(frozenset({("t", "a")} | {("t", f"b{k}") for k in range(7)}))
