"""The master policy's bound on trigger, routine and event bodies Hypothesis draws (rules.policy_bound:
the core reads a body's statements where its lexer reads the text, the general path the rest):
hostile text is answered, never raised; a body statement that names a table reaches it."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dumpfilter.rules.policy_bound import statement_reach

_HEADS = st.sampled_from([
    "CREATE TRIGGER shop.tr AFTER INSERT ON shop.t FOR EACH ROW ",
    "CREATE TRIGGER tr BEFORE UPDATE ON t FOR EACH ROW ",
    "CREATE DEFINER=`u`@`%` TRIGGER `shop`.`tr` BEFORE DELETE ON `t` FOR EACH ROW FOLLOWS other ",
    "create trigger if not exists tr after insert on shop.t for each row precedes `o` ",
    "CREATE TRIGGER tr AFTER INSERT ON t FOR EACH ROW FOLLOWS . ",
    "CREATE PROCEDURE shop.p(IN a INT, OUT b VARCHAR(10)) ",
    "CREATE DEFINER=CURRENT_USER PROCEDURE p() ",
    "CREATE FUNCTION f(a INT) RETURNS INT DETERMINISTIC ",
    "CREATE EVENT shop.e ON SCHEDULE EVERY 1 DAY DO ",
    "ALTER EVENT e ON SCHEDULE AT NOW() + INTERVAL 1 HOUR DO ",
    "CREATE OR REPLACE PACKAGE BODY pk ",
])
_STATEMENTS = st.sampled_from([
    "INSERT INTO {t} (a, b) VALUES ({v}, {v})", "UPDATE {t} SET a = {v} WHERE id = {v}",
    "DELETE FROM {t} WHERE id = {v}", "REPLACE INTO {t} SET a = {v}", "SELECT {v} INTO @x", "SET @y = {v}",
    "IF {v} > 0 THEN UPDATE {t} SET a = {v}", "UPDATE {t} SET a = {v} END IF", "ELSE DELETE FROM {t} WHERE a = {v}",
    "UPDATE {t} SET a = 1 ELSE UPDATE u SET b = {v}", "INSERT INTO {t} VALUES ({v}) ON DUPLICATE KEY UPDATE a = {v}",
    "INSERT INTO {t} SELECT {v} FROM s", "CALL p({v})", "DECLARE x INT DEFAULT {v}", "END IF", "END", "BEGIN",
    "WHILE {v} DO UPDATE {t} SET a = {v}", "RETURN {v}", "SET NEW.a = {v}", "UPDATE LOW_PRIORITY {t} SET a = {v}",
    "IF NEW.a > OLD.a THEN INSERT INTO {t} VALUES ({v})", "IF NEXT VALUE FOR s THEN DELETE FROM {t}",
    "IF `NEW`.a THEN DELETE FROM {t}", "x: LOOP UPDATE {t} SET a = {v}", "IF f(1) THEN UPDATE {t} SET a = {v}",
])
_TABLES = st.sampled_from(["t", "`t`", "`t t`", "shop.t", "`shop`.`t`", "secret.u", "`a``b`", "NEW", "new.t",
                           "OLD.t", "t2"])
_VALUES = st.sampled_from(["NEW.id", "OLD.a", "NEW . id", "NEW .id", "new.`c`", "1", "1.5", ".5", "'NEW.x'",
                           "secret.u.c", "NEW.f(1)", "f(NEW.id)", "(SELECT pw FROM secret.u)", "NEXTVAL(s)",
                           "CONCAT(NEW.a, 'x')", "`NEW`.id", "OLDER.x", "NEW.NEW.c", '"q"."r"', '"s"', "'a;b'",
                           "'it''s'", "'a\\'b'", "@a", "@@session.x", "x'ab'", "NOW()", "a->'$.x'", "'caf\u00e9'"])
# Fragments set anywhere in a text: what the two lexers may read otherwise, or not at all.
_FRAGMENTS = st.sampled_from(["#c\n", "-- c\n", "--x", "/* c; */", "/*!50100 UPDATE x.y SET a = 1 */", "*/", "'",
                              '"', "`", "\u00e9", "\x1c", "\x00", ";", ".", "(", ")", "NEW", "OLD", " END ", "\\",
                              "UPDATE", "secret.", ";;", " DO ", "`x`.", "NEXT VALUE FOR s"])


# A word after a statement: one that means another statement there (so the piece is not cleared),
# or not.
_AFTER = st.sampled_from(["", "", "", " REPEAT", " UNTIL 1", " ELSEIF 1", " WITH", " DO", " LOOP", " WHILE 1",
                          " BEGIN", " CALL p", " RETURN 1", " THEN", " SELECT 1", " REPLACE", " INSERT", " DELETE",
                          " UPDATE", " KEY UPDATE", " ELSE", " END", " end if", " ITERATE x", " LEAVE x"])


def _statement(form: str, table: str, values: list[str], after: str) -> str:
    text = form.replace("{t}", table)
    for value in values:
        text = text.replace("{v}", value, 1)
    return text + after


@st.composite
def _texts(draw, fragments: bool = True) -> str:
    head = draw(_HEADS)
    statements = draw(st.lists(st.builds(_statement, _STATEMENTS, _TABLES, st.lists(_VALUES, min_size=3, max_size=3),
                                         _AFTER), min_size=1, max_size=5))
    separator = draw(st.sampled_from(["; ", ";", " ;\n", ";; "]))
    body = separator.join(statements)
    text = head + (f"BEGIN {body}{separator}END" if draw(st.booleans()) else body)
    for at, fragment in draw(st.lists(st.tuples(st.integers(0, len(text)), _FRAGMENTS), max_size=2 if fragments else 0)):
        text = text[:at] + fragment + text[at:]
    return text


@settings(max_examples=1500, deadline=None)
@given(_texts(), st.sampled_from(["shop", "other", ""]))
def test_a_drawn_body_is_answered_never_raised(sql, default):
    statement_reach(sql, default)


@settings(max_examples=1500, deadline=None)
@given(_texts(fragments=False), st.sampled_from(["shop", "other", ""]))
def test_a_body_statement_naming_a_table_reaches_it(sql, default):
    """Whether the core clears the statement or the general path reads it, a body that writes or
    reads `secret.u` is refused to an identity not allowed it: unanalysed, or reaching it."""
    if "secret.u" not in sql.replace("`", ""):
        return
    reach = statement_reach(sql, default)
    assert reach is None or ("secret", "u") in reach.tables or "secret" in reach.schemas, (sql, reach)


@pytest.mark.mariadb
def test_a_trigger_writing_a_database_named_new_reaches_it(mariadb_factory):
    """`INSERT INTO NEW.t` in a trigger's body writes the table t of a database named NEW (a real
    MariaDB says so), not the trigger's row: the bound reaches NEW.t, where the core's reading of
    NEW.c as a row's column took it for t in the trigger's database."""
    server = mariadb_factory("trigger-new-db")
    server.execute(["CREATE DATABASE shop", "CREATE DATABASE NEW", "CREATE TABLE NEW.t (a INT)",
                    "CREATE TABLE shop.t (a INT)"])
    trigger = "CREATE TRIGGER shop.tr AFTER INSERT ON shop.t FOR EACH ROW INSERT INTO NEW.t (a) VALUES (NEW.a)"
    server.execute([trigger, "INSERT INTO shop.t VALUES (7)"], db="shop")
    assert server.query("SELECT a FROM NEW.t") == [{"a": 7}] and server.query("SELECT a FROM shop.t") == [{"a": 7}]
    reach = statement_reach(trigger, "shop")
    assert reach is not None and ("NEW", "t") in reach.tables
