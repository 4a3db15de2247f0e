"""The compiled statement keys (issue #43, core/src/stmt.rs) against the Python parser: wherever
`_core.statement_key` reads a (kind, table) it is the kind and the one updated table that
`rules.statements.statement_tables` gives, on every statement of the rule vectors, of generated workloads
and of hypothesis-built text, string literals holding UTF-8 text, comment openers, SELECT words,
quotes and backslashes included (issue #57: a literal is a value, the key reads past it); and it reads enough of a sysbench-like workload (at most 1% left to
Python) and every literal-holding statement whose literals end alike under every sql_mode. The
key of each statement a real MariaDB runs names a table the server wrote (its Annotate_rows text
and the Table_maps after it): a reference that is no reader of ours."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from dumpfilter import _core
from dumpfilter.codec import BinlogReader, EventType
from dumpfilter.errors import DumpFilterError
from tests.support.binlog_apply import apply_binlog
from dumpfilter.rules.statement_info import Kind
from dumpfilter.rules.statements import statement_tables
from dumpfilter.workload import WorkloadSpec, generate

KINDS = {_core.KIND_INSERT: Kind.INSERT, _core.KIND_REPLACE: Kind.REPLACE, _core.KIND_UPDATE: Kind.UPDATE,
         _core.KIND_DELETE: Kind.DELETE, _core.KIND_INSERT_SELECT: Kind.INSERT, _core.KIND_REPLACE_SELECT: Kind.REPLACE}


def _text(raw: bytes) -> str:
    return raw.decode("utf-8", "surrogateescape")


def key_of(sql: bytes, *, escaped: bool = False) -> tuple[int, bytes | None, bytes] | None:
    """The core's key of `sql` (`_core.statement_key`) as (kind, qualifier, table); None: declined."""
    key = _core.statement_key(sql, escaped=escaped)
    return None if key is None else (key.kind, key.db, key.table)


def check(sql: str, db: str | None, *, escaped: bool = False) -> bool:
    """Asserts the core's key of `sql` agrees with both Python parsers; True when it gave one."""
    key = key_of(sql.encode("utf-8", "surrogateescape"), escaped=escaped)
    if key is None:
        return False
    kind, qualifier, table = key
    want = ((_text(qualifier) if qualifier is not None else (db or "")), _text(table))
    info = statement_tables(sql, db)
    assert info.parse_ok, sql
    assert info.kind is KINDS[kind], (sql, info.kind, kind)
    assert info.updated == (want,), (sql, info.updated, want)
    assert not info.exempt_from_table_rules, sql
    return True


def _vectors() -> list[tuple[str | None, str]]:
    path = Path(__file__).resolve().parents[1] / "rules" / "test_evaluate_semantics.py"
    spec = importlib.util.spec_from_file_location("_semantics_vectors", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return [(case[3], case[4]) for case in module.STATEMENT_CASES]


SHAPES = [
    ("db", "UPDATE sbtest1 SET k=k+1 WHERE id=5023"),
    ("db", "UPDATE sbtest1 SET c='1-2' WHERE id=7"),
    ("db", "DELETE FROM sbtest1 WHERE id=881"),
    ("db", "INSERT INTO sbtest1 (id, k, c, pad) VALUES (881, 460, 'a', 'b')"),
    ("db", "insert ignore into `we``ird`.`t 1` values (1)"),
    ("db", "REPLACE LOW_PRIORITY INTO d . t SET a=1"),
    ("db", "INSERT t VALUE(1)"),
    ("", "DELETE QUICK IGNORE FROM t;\n"),
    ("db", "DELETE FROM t ORDER BY a LIMIT 1"),
    ("db", "UPDATE LOW_PRIORITY IGNORE x.y SET a=1"),
    ("db", "INSERT IGNORE (a) VALUES (1)"),       # IGNORE read as the table by the regex: left to Python
    ("db", "INSERT INTO tSET x=1"),               # the regex backtracks into `t`: left to Python
    ("db", "INSERT INTO `t`VALUES(1)"),
    ("db", "UPDATE `t`SET a=1"),
    ("db", "INSERT INTO values (1)"),
    ("db", "UPDATE t1, t2 SET t1.a=1"),
    ("db", "UPDATE t1 JOIN t2 ON t1.a=t2.a SET t1.b=1"),
    ("db", "DELETE t1 FROM t1 JOIN t2"),
    ("db", "INSERT INTO t SELECT * FROM u"),
    ("db", "INSERT INTO a.t (x) SELECT x FROM b.u JOIN c.v ON u.id = v.id"),
    ("db", "REPLACE INTO t SELECT * FROM u"),
    ("db", "INSERT INTO t VALUES ((SELECT max(a) FROM u))"),
    ("db", "INSERT INTO t SET a=(SELECT 1)"),
    ("db", "INSERT INTO t (SELECT 1)"),
    ("db", "INSERT INTO t SELECT * FROM u -- c"),
    ("db", "INSERT INTO t SELECT * FROM u RETURNING a"),
    ("db", "INSERT INTO t WITH w AS (SELECT 1) SELECT * FROM w"),
    ("db", "INSERT SELECT * FROM u"),
    ("db", "UPDATE t SET a=(SELECT 1)"),
    ("db", "DELETE FROM t WHERE a IN (SELECT b FROM u)"),
    ("db", "INSERT INTO t VALUES (1) /* x */"),
    ("db", "DELETE FROM t RETURNING a"),
    ("db", "INSERT INTO t VALUES ('é')"),
    ("db", "\x1cINSERT\x0bINTO\x1ft\x0c(a) VALUES (1)"),
    ("db", "INSERT INTO a. (x)"),
    ("db", "INSERT INTO $x$ (a) VALUES (1)"),
    ("db", "UPDATE set SET a=1"),
    ("db", "DELETE FROM `` WHERE 1"),
    ("db", "UPDATE FROM.t SET a=1"),              # a reserved word: the fast form and the full parser differ
    ("db", "UPDATE FROM SET a=1"),
    ("db", "UPDATE `FROM` SET a=1"),
]


def test_sysbench_shapes_are_keyed():
    keyed = [sql for db, sql in SHAPES[:10] if check(sql, db)]
    assert keyed == [sql for _, sql in SHAPES[:10]]


def test_insert_select_is_keyed_by_its_target():
    """An INSERT's SELECT (a source query, a subquery) leaves the target the one updated table: keyed,
    apart from the plain INSERT's key; comments, RETURNING and a CTE before the SELECT are not."""
    keyed = {sql: key_of(sql.encode()) for db, sql in SHAPES if check(sql, db)}
    assert keyed["INSERT INTO a.t (x) SELECT x FROM b.u JOIN c.v ON u.id = v.id"] == (_core.KIND_INSERT_SELECT, b"a", b"t")
    assert keyed["REPLACE INTO t SELECT * FROM u"] == (_core.KIND_REPLACE_SELECT, None, b"t")
    for sql in ("INSERT INTO t VALUES ((SELECT max(a) FROM u))", "INSERT INTO t SET a=(SELECT 1)", "INSERT INTO t (SELECT 1)"):
        assert keyed[sql][0] == _core.KIND_INSERT_SELECT
    for sql in ("INSERT INTO t SELECT * FROM u -- c", "INSERT INTO t SELECT * FROM u RETURNING a",
                "INSERT INTO t WITH w AS (SELECT 1) SELECT * FROM w", "UPDATE t SET a=(SELECT 1)",
                "DELETE FROM t WHERE a IN (SELECT b FROM u)"):
        assert sql not in keyed


@pytest.mark.parametrize("db,sql", SHAPES)
def test_hand_picked_shapes_agree(db, sql):
    check(sql, db)


def test_rule_vectors_agree():
    vectors = _vectors()
    assert len(vectors) > 50
    keyed = sum(check(sql, db) for db, sql in vectors)
    assert keyed > 10  # the vectors' plain DML is read


def _queries(path: Path):
    with open(path, "rb") as f:
        try:
            for event in BinlogReader(f):
                if event.is_query and event.sql is not None:
                    yield event.db, event.sql
        except DumpFilterError:
            return


def _annotated(path: Path):
    """(text, the (db, table) of the Table_maps after it) of each Annotate_rows / Rows_query text of
    a ROW binlog: the statement a real server ran and the tables it wrote."""
    text, maps = None, []
    with open(path, "rb") as f:
        for event in BinlogReader(f):
            annotation = event.type_code in (EventType.ANNOTATE_ROWS, EventType.ROWS_QUERY)
            if annotation or event.type_code == EventType.XID or event.is_query:  # a text's maps end here
                if text is not None:
                    yield text, maps
                text, maps = (event.sql if annotation else None), []
            elif event.type_code == EventType.TABLE_MAP and text is not None:
                maps.append(event.table_map[1:])
    if text is not None:
        yield text, maps


@pytest.mark.mariadb
def test_the_key_is_the_table_a_real_server_writes(mariadb_factory, tmp_path):
    """A generated statement workload (cross-database writes, INSERT ... SELECT) run on a real
    MariaDB that logs rows: each statement's Annotate_rows text is followed by the Table_maps of the
    tables it wrote, and where the core keys the text, its key names one of them (the database,
    where the text qualifies it)."""
    spec = WorkloadSpec(seed=43, schemas=4, tables_per_schema=3, transactions=400, binlog_format="statement",
                        flavor="mariadb", ddl_share=0.02, cross_db_share=0.3, insert_select_share=0.25)
    server = mariadb_factory("keys-row", binlog_format="ROW")
    ok, error = apply_binlog(server, generate(spec, tmp_path, "b"))
    assert ok, error
    server.flush_logs()
    keyed = 0
    for path in server.binlog_files():
        for text, maps in _annotated(path):
            key = key_of(text.encode("utf-8", "surrogateescape"))
            if key is None:
                continue
            keyed += 1
            _kind, qualifier, table = key
            assert any(t == _text(table) and (qualifier is None or d == _text(qualifier)) for d, t in maps), (text, maps)
    assert keyed > 300


@pytest.mark.parametrize("flavor", ["mariadb", "mysql"])
def test_workload_statements_are_keyed(tmp_path, flavor):
    """At most 1% of a generated statement workload's DML is left to the Python parser."""
    spec = WorkloadSpec(seed=43, schemas=4, tables_per_schema=3, transactions=1500, binlog_format="statement",
                        flavor=flavor, ddl_share=0.02, cross_db_share=0.3, insert_select_share=0.25)
    path = generate(spec, tmp_path, "b")[0]
    dml = keyed = 0
    for db, sql in _queries(path):
        if sql.split(None, 1)[0].upper() in ("INSERT", "REPLACE", "UPDATE", "DELETE"):
            dml += 1
            keyed += check(sql, db)
    assert dml > 1000
    assert keyed >= 0.99 * dml, (keyed, dml)


# -- generated statements: the DML grammar the regexes read, with its edges -----------------------
_spaces = st.sampled_from([" ", "  ", "\t", "\n", "\x0b", "\x1c", " \r\n "])
_maybe_spaces = st.one_of(st.just(""), _spaces)
_case = st.sampled_from([str.upper, str.lower, str.title])
_word = st.sampled_from(["t", "sbtest1", "T_2", "x$y", "$", "9a", "INTO", "VALUES", "VALUE", "SET", "SELECT",
                         "IGNORE", "FROM", "WHERE", "LOW_PRIORITY", "QUICK", "DELAYED", "é", "tSET", "values1"])
_quoted = st.text(st.sampled_from("ab`. $é"), min_size=0, max_size=5).map(lambda s: "`" + s.replace("`", "``") + "`")
_name = st.one_of(_word, _quoted, st.from_regex(r"[A-Za-z0-9_$]{1,6}", fullmatch=True))


@st.composite
def _statements(draw):
    verb = draw(st.sampled_from(["INSERT", "REPLACE", "UPDATE", "DELETE"]))
    parts = [draw(_maybe_spaces), draw(_case)(verb)]
    modifiers = {"UPDATE": ["LOW_PRIORITY", "IGNORE"], "DELETE": ["LOW_PRIORITY", "QUICK", "IGNORE"]}.get(
        verb, ["LOW_PRIORITY", "DELAYED", "HIGH_PRIORITY", "IGNORE"])
    for modifier in draw(st.lists(st.sampled_from(modifiers), max_size=2)):
        parts += [draw(_spaces), draw(_case)(modifier)]
    if verb == "DELETE" or draw(st.booleans()):
        parts += [draw(_spaces), draw(_case)("FROM" if verb == "DELETE" else "INTO")]
    parts += [draw(_spaces), draw(_name)]
    if draw(st.booleans()):
        parts += [draw(_maybe_spaces), ".", draw(_maybe_spaces), draw(_name)]
    parts.append(draw(_maybe_spaces))
    parts.append(draw(st.sampled_from(["(a) VALUES (1)", "VALUES (1)", "VALUE(1)", "SET a=1", "WHERE id=1",
                                       "ORDER BY a", "LIMIT 1", ";", "; ", "", "WHERE a=(SELECT 1)", "# c",
                                       "-- c", "/* c */", "RETURNING a", "JOIN u SET a=1", ", u SET a=1",
                                       "SETx", "VALUESx", "WHERE$", "USING t, u", "SELECT * FROM u",
                                       "SELECT a FROM u JOIN v", "(a) SELECT 1", "SELECTx", "(SELECT 1)",
                                       "VALUES ((SELECT 1))", "SELECT 1 RETURNING a", "WITH w AS (SELECT 1) SELECT 1"])))
    parts.append(draw(st.sampled_from(["", " WHERE k='#'", " WHERE k='--'", "\n"])))
    return "".join(parts)


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_statements(), st.sampled_from(["db", "", "d`b"]))
def test_generated_statements_agree(sql, db):
    check(sql, db)


@settings(max_examples=500, deadline=None)
@given(st.text(max_size=60), st.sampled_from(["db", ""]))
def test_any_text_agrees(sql, db):
    check(sql, db)


@pytest.mark.parametrize("sql", ["UPDATE 0 SET a=1", "UPDATE db.12 SET a=1", "INSERT INTO 1e5 VALUES (1)",
                                 "DELETE FROM 0x1f WHERE a=1", "REPLACE 0b1 VALUES (1)"])
def test_a_number_where_a_name_goes_is_declined(sql):
    """MySQL's lexer reads `0`, `1e5`, `0x1f` as numbers, never as a table (a name may begin with a
    digit but not be all digits): the core's key names no table for them,
    so the parser decides (a Hypothesis example: the core keyed `UPDATE 0 SET a=1` as table `0`)."""
    assert key_of(sql.encode()) is None


def test_a_name_that_begins_with_a_digit_is_still_keyed():
    assert check("UPDATE 9a SET a=1", "db")


# -- string literals: a value's text is no cue (issue #57) -------------------------------------------
_pieces = st.sampled_from(["a", " ", "é", "日本", "😀", "ça va", "#", "--", "-- ", "/*", "*/", "select", "SELECT * FROM u",
                           "returning", ";", "`", "'", '"', "\\n", "\\'", '\\"', "\\\\", "\\", ",", ")", "(",
                           "secret.s1", "\n"])
_prefix = st.sampled_from(["", "", "_utf8mb4", "N", "_binary ", "X"])


@st.composite
def _literal(draw, balanced: bool = False, escaped: bool = False):
    """A string literal: its text from `_pieces`, its own quote doubled, or (unless `balanced`) as
    drawn, which may end it early or leave it open; without backslashes when `balanced`, with
    only whole escapes (`\\'`, `\\\\`, `\\n`...) when `escaped`."""
    quote = draw(st.sampled_from(["'", '"']))
    text = "".join(draw(st.lists(_pieces.filter(lambda p: p != "\\") if escaped else _pieces, max_size=6)))
    if balanced and not escaped:
        text = text.replace("\\", "")
    if balanced or draw(st.booleans()):
        text = text.replace(quote, quote * 2)
    return draw(_prefix) + quote + text + quote


_plain_name = st.sampled_from(["t", "sbtest1", "`t`", "db.t", "`d b`.`x y`", "`it's`", '`a"b`', "users"])
_tails = st.sampled_from(["", "", " LIMIT 1", " -- c", " # c", " /* c */", " RETURNING a", " AND e IN (SELECT 1)",
                          " AND f='open", " AND né=1", " AND `g", "\n"])


@st.composite
def _literal_statements(draw, balanced: bool = False, escaped: bool = False):
    """Single-table DML whose values are drawn literals; unless `balanced`, with names and a tail
    outside them that may hold what sends a text to the parser."""
    lit = lambda: draw(_literal(balanced, escaped))  # noqa: E731
    name = draw(_plain_name) if balanced else draw(st.one_of(_plain_name, _name, st.just("`x#y`")))
    form = draw(st.integers(0, 4))
    if form == 0:
        rows = ", ".join(f"({lit()}, {lit()})" for _ in range(draw(st.integers(1, 2))))
        sql = f"INSERT INTO {name} (a, b) VALUES {rows}"
        if draw(st.booleans()):
            sql += f" ON DUPLICATE KEY UPDATE a={lit()}"
    elif form == 1:
        sql = f"REPLACE {name} SET a={lit()}, b={lit()}"
    elif form == 2:
        sql = f"UPDATE {name} SET a={lit()} WHERE c={lit()} AND d LIKE {lit()}"
    elif form == 3:
        sql = f"DELETE FROM {name} WHERE a={lit()} OR b={lit()}"
    else:
        sql = f"INSERT INTO {name} SELECT {lit()}, a FROM u WHERE b={lit()}"
    sql = sql if balanced else sql + draw(_tails)
    # No empty quoted name (``) outside the literals, which a literal closed early may leave: the
    # Python parser (sqlglot) reads no text with one. MariaDB 10.11 accepts one only as an alias
    # (`test_an_empty_quoted_alias_is_keyed`); between two values it is a syntax error (1064: a
    # Hypothesis find, `UPDATE a=""``"" AND ...`, which the core keyed and no server logs).
    assume(not any(t.kind == "quoted_ident" and not t.value for t in _core.sql_tokens(sql).tokens))
    return sql


def check_either_mode(sql: str, db: str) -> bool:
    """`check`, or where the core's lexer (backslash escapes: the default sql_mode) leaves a
    literal open, and the server could have logged the text only under NO_BACKSLASH_ESCAPES, the
    parser's reading of it there (each backslash doubled: itself), which must give the same key. A
    text that neither reading closes is one no server logs (a syntax error): not held to anything."""
    if _core.sql_tokens(sql).error is None:
        return check(sql, db)
    plain = sql.replace("\\", "\\\\")
    key = key_of(sql.encode("utf-8", "surrogateescape"))
    if key is None or _core.sql_tokens(plain).error is not None:
        return False
    assert key_of(plain.encode("utf-8", "surrogateescape")) == key, sql
    return check(plain, db)


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_literal_statements(), st.sampled_from(["db", ""]))
def test_statements_with_literals_agree(sql, db):
    """Whatever the literals hold and whatever stands outside them, a key the core reads is the
    Python parser's."""
    check_either_mode(sql, db)


def test_an_empty_quoted_alias_is_keyed():
    """MariaDB 10.11 runs and logs `INSERT INTO u SELECT '' ``, 1 FROM u` (an empty alias; `` as a
    table is 1103, as a column 1054): the core keys it as the server applies it, to `u`, a text the
    Python parser does not read (so the property tests above draw no empty quoted name)."""
    assert key_of(b"INSERT INTO u SELECT '' ``, 1 FROM u WHERE b=1") == (_core.KIND_INSERT_SELECT, None, b"u")


def test_a_literal_closed_only_without_escapes():
    """No cue anywhere: the key reads the table before any literal, as it did before issue #57 (a
    server logs this text only under NO_BACKSLASH_ESCAPES, where it updates `t`, the key's table)."""
    sql = "REPLACE t SET a='', b='\\'"
    assert check_either_mode(sql, "db")


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_literal_statements(balanced=True), st.sampled_from(["db", ""]))
def test_literal_values_are_keyed(sql, db):
    """Closed literals without backslashes, nothing outside them the key declines: every such
    statement is keyed (before issue #57 a non-ASCII byte or cue inside a literal sent it to Python)."""
    assert check(sql, db), sql


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(_literal_statements(), _literal_statements(balanced=True, escaped=True)), st.sampled_from(["db", ""]))
def test_a_key_read_as_the_query_says_is_the_parsers(sql, db):
    """Where the Query's status variables say backslash escapes (MySQL's default sql_mode) and a
    client character set whose backslash byte is always one (utf8mb4, latin1...), the walk reads
    each literal that one way (`'O\\'Brien'`, `'café\\'s'`): a key it reads then is the Python
    parser's, whose lexer reads escapes too, and a text that reading leaves open is declined."""
    key = key_of(sql.encode("utf-8", "surrogateescape"), escaped=True)
    either = key_of(sql.encode("utf-8", "surrogateescape"))
    if either is not None:  # held to the parser by the tests above
        assert key == either, sql  # reading one way keys every text both readings key, alike
    elif key is not None:
        assert _core.sql_tokens(sql).error is None, sql
        assert check(sql, db, escaped=True)


@pytest.mark.parametrize("sql", [
    "UPDATE t SET a='O\\'Brien -- x'", "INSERT INTO t VALUES ('café\\'s', 'é')", "UPDATE t SET a='é\\'' WHERE id=1",
])
def test_apostrophes_are_keyed_when_the_query_says_escapes(sql):
    assert key_of(sql.encode()) is None
    assert check(sql, "db", escaped=True)


@pytest.mark.parametrize("sql", [
    "INSERT INTO users (name) VALUES ('José')", "UPDATE t SET note='ça va' WHERE id=3",
    "UPDATE t SET note='a -- b # c /* d */' WHERE id=3", "DELETE FROM t WHERE body=\"please select one\"",
    "INSERT INTO t VALUES (_utf8mb4'日本', N'x', X'41', 'it''s', 'line\\nbreak', '{\\\"k\\\": 1}')",
    "INSERT INTO t (a) VALUES ('select * from u where a=1 -- ')",
])
def test_values_in_literals_are_keyed(sql):
    assert check(sql, "db")


@pytest.mark.parametrize("sql", [
    "UPDATE t SET a='O\\'Brien -- x'",      # \' ends the literal under NO_BACKSLASH_ESCAPES only
    "UPDATE t SET a='x\\' WHERE b='#'",     # where does the literal end? the sql_mode says
    "UPDATE t SET a='é\\\\' WHERE b='#'",   # a backslash after a byte that may lead a gbk/sjis character
    "UPDATE t SET a='#",                    # unclosed
    "UPDATE t SET a='x' -- c", "UPDATE té SET a='#'", "UPDATE `x#` SET a='é'",
    "UPDATE t SET a='x' WHERE b IN (SELECT 1)", "DELETE FROM t WHERE a='é' RETURNING a",
])
def test_what_literals_do_not_settle_is_declined(sql):
    assert key_of(sql.encode()) is None


def test_a_query_inside_a_literal_reads_no_table():
    """`'select * from u where a=1 -- '` is a value: MySQL reads no table there; the key (and so
    `statement_tables`) reads none."""
    sql = "INSERT INTO t (a) VALUES ('select * from u where a=1 -- ')"
    assert statement_tables(sql, "db").read == ()
    assert key_of(sql.encode()) == (_core.KIND_INSERT, None, b"t")
