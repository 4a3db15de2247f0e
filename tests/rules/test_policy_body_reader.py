"""The master policy's bound reads a trigger's, routine's or event's body with the core
(`_core.body_reach`: the statement facts' lexer, `filter`'s reader; issue #57 goal 5): held to the
Python reading it replaces (`rules.policy_bound._full`, the whole text tokenized in Python) on
texts Hypothesis draws, on the real fixtures' statements, and on a reference of what the core must
answer piece by piece (the same tokens, pieces and `_key_alone`, in Python)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dumpfilter.rules.policy_bound as bound
from dumpfilter import _core
from dumpfilter.rules.sqltokens import LexError, tokenize
from dumpfilter.rules.statement_info import Kind
from dumpfilter.rules.statements import statement_tables

FIXTURES = Path(__file__).resolve().parents[3] / "shared" / "fixtures" / "real_binlogs"

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
def _texts(draw) -> str:
    head = draw(_HEADS)
    statements = draw(st.lists(st.builds(_statement, _STATEMENTS, _TABLES, st.lists(_VALUES, min_size=3, max_size=3),
                                         _AFTER), min_size=1, max_size=5))
    separator = draw(st.sampled_from(["; ", ";", " ;\n", ";; "]))
    body = separator.join(statements)
    text = head + (f"BEGIN {body}{separator}END" if draw(st.booleans()) else body)
    for at, fragment in draw(st.lists(st.tuples(st.integers(0, len(text)), _FRAGMENTS), max_size=2)):
        text = text[:at] + fragment + text[at:]
    return text


def _python(sql: str, default: str):
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(bound, "_core_body", lambda *args: None)
        return bound.statement_reach(sql, default)


@settings(max_examples=1500, deadline=None)
@given(_texts(), st.sampled_from(["shop", "other", ""]))
def test_the_core_read_body_has_the_reach_the_python_reading_gives(sql, default):
    """Where the core reads a body, the reach is the Python reading's, to the table and schema."""
    info = statement_tables(sql, default)
    core = bound._core_body(sql, info)
    if core is not None:
        assert core == bound._full(sql, default, info), sql
    assert bound.statement_reach(sql, default) == _python(sql, default), sql


def _reference(sql: str, info) -> tuple[set, list[tuple[int, int]]]:
    """What `_core.body_reach` must answer, from the Python lexer's tokens: the tables of the
    pieces `_key_alone` clears with nothing before the statement that reaches more (no call, no
    sequence, no qualified name but a trigger's NEW.c / OLD.c), the spans of the others (a piece
    with neither statement nor such a name left out)."""
    tokens = tokenize(sql)
    trigger = info.kind is Kind.CREATE_TRIGGER
    rows = frozenset({"NEW", "OLD"}) if trigger else frozenset()
    db = bound._body_db(info, tokens)
    tables, spans = set(), []
    for piece, end in bound._pieces(sql, tokens[bound._body_start(tokens, info):]):
        verb = next((i for i, t in enumerate(piece) if t.kind == "word" and t.value.upper() in bound._BODY_VERBS),
                    None)
        before = piece if verb is None else piece[:verb]
        plain = not any(t.kind == "punct" and t.value == "(" or t.kind == "word" and t.value.upper() in
                        ("NEXT", "PREVIOUS") or t.kind == "punct" and t.value == "." and
                        not (k and before[k - 1].kind == "word" and before[k - 1].value in rows)
                        for k, t in enumerate(before))
        if verb is None and plain:
            continue
        alone = bound._key_alone(sql, piece, verb, end, db, rows) if verb is not None and plain else None
        if alone is not None:
            tables.add(alone)
        else:
            spans.append((piece[0].start, end))
    return tables, spans


@settings(max_examples=1500, deadline=None)
@given(_texts())
def test_the_core_clears_and_declines_the_pieces_the_reference_does(sql):
    """Piece by piece: the core's tables and spans are the reference's, over the Python lexer's
    tokens, wherever the core reads the text; and it reads every plain text drawn (ASCII, no
    comment but /* */, no quote left open, no body after a `.`)."""
    info = statement_tables(sql, "shop")
    db = bound._body_db(info, None) if info.parse_ok else None
    trigger = info.kind is Kind.CREATE_TRIGGER
    event = info.target is not None and info.target[0] == "EVENT"
    form = _core.BODY_TRIGGER if trigger else _core.BODY_EVENT if event else _core.BODY_ROUTINE
    read = _core.body_reach(sql.encode("utf-8", "surrogateescape"), form)
    if db is None or read is None:
        plain = sql.isascii() and not any(f in sql for f in ("#", "--", "/*!", "*/", "\\", "``", "'", '"'))
        if plain and db is not None:
            tokens = tokenize(sql)
            start = min(bound._body_start(tokens, info), len(tokens))
            assert read is not None or (start and tokens[start - 1].value == "."), sql
        return
    try:
        expected = _reference(sql, info)
    except LexError:
        pytest.fail(f"the core read text the Python lexer refuses: {sql!r}")
    tables = {(t.db.decode() if t.db is not None else db, t.name.decode()) for t in read.tables}
    assert len({(t.db, t.name) for t in read.tables}) == len(read.tables), sql  # each once
    assert (tables, list(zip(read.starts, read.ends))) == expected, sql


def _fixture_statements() -> list[tuple[str, str]]:
    from bench.bench_readers import _statements

    if not FIXTURES.is_dir():
        pytest.skip(f"no real fixtures at {FIXTURES}")
    return [s for p in sorted(FIXTURES.rglob("*")) if p.is_file() and p.suffix not in (".md", ".json", ".index",
                                                                                          ".txt", ".gz")
            for s in _statements(p)]


def test_the_real_fixtures_reach_as_before_and_their_dml_as_trigger_bodies():
    """Every statement of the real fixtures reaches what the Python reading gives it; and their
    single-table DML, made the body of one trigger (real texts: strings with `;`, quoted names,
    functions), reaches there what the Python reading gives that trigger."""
    statements = _fixture_statements()
    dml = []
    for sql, db in statements:
        assert bound.statement_reach(sql, db) == _python(sql, db), sql[:200]
        if _core.statement_key(sql.encode("utf-8", "surrogateescape")) is not None and sql.isascii():
            dml.append(sql)
    assert len(dml) > 100
    for k in range(0, len(dml), 50):
        body = ";\n".join(dml[k:k + 50])
        sql = f"CREATE TRIGGER shop.tr AFTER INSERT ON shop.t FOR EACH ROW BEGIN {body}; END"
        info = statement_tables(sql, "shop")
        core = bound._core_body(sql, info)
        assert core is not None
        assert core == bound._full(sql, "shop", info), body[:200]


def test_a_big_trigger_is_not_tokenized_in_python(monkeypatch):
    """The bench's trigger (bench_readers.big_trigger, here of 5,000 statements): the core reads
    its body, Python's lexer reads none of it, and the reach is its tables."""
    from bench.bench_readers import big_trigger

    lexed = []
    monkeypatch.setattr(bound, "tokenize", lambda text: lexed.append(text) or tokenize(text))
    reach = bound.statement_reach(big_trigger(5000), "t")
    assert lexed == []
    assert reach == bound.Reach(frozenset({("t", "a")} | {("t", f"b{k}") for k in range(7)}))
