"""The schema model's deferred ALTER TABLEs (`SchemaModel.defer`, issue #80 goal 4): an ALTER that
renames nothing is replayed only when the model is next read or changed another way, and dropped
unread with its table. Every read gives what replaying each statement in order gives."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from dumpfilter.rules import schema
from dumpfilter.rules.schema import SchemaModel
from dumpfilter.rules.statements import statement_tables

TABLES = ("t", "u", "T")
STATEMENTS = st.one_of(
    st.builds(lambda t, n: f"CREATE TABLE IF NOT EXISTS {t} (a int, c{n} int)", st.sampled_from(TABLES), st.integers(0, 3)),
    st.builds(lambda t, n: f"ALTER TABLE {t} ADD COLUMN c{n} int", st.sampled_from(TABLES), st.integers(0, 3)),
    st.builds(lambda t, n: f"ALTER TABLE {t} DROP COLUMN c{n}", st.sampled_from(TABLES), st.integers(0, 3)),
    st.builds(lambda t, u: f"ALTER TABLE {t} RENAME TO {u}", st.sampled_from(TABLES), st.sampled_from(TABLES)),
    st.builds(lambda t, u: f"RENAME TABLE {t} TO {u}", st.sampled_from(TABLES), st.sampled_from(TABLES)),
    st.builds(lambda t, u: f"CREATE TABLE {t} LIKE {u}", st.sampled_from(TABLES), st.sampled_from(TABLES)),
    st.builds(lambda t: f"DROP TABLE IF EXISTS {t}", st.sampled_from(TABLES)),
    st.builds(lambda t: f"CREATE VIEW v_{t} AS SELECT * FROM {t}", st.sampled_from(TABLES)),
    st.just("DROP DATABASE d"), st.just("READ"))


def _replayed(model: SchemaModel, sql: str, deferring: bool) -> None:
    """`sql` replayed into `model` as the count does: an ALTER that renames nothing deferred."""
    info = statement_tables(sql, "d")
    if deferring and info.kind == "ALTER_TABLE" and not info.renames:
        model.defer(sql, "d", info.updated[0])
    else:
        model.observe(sql, "d")


@settings(max_examples=300, deadline=None)
@given(st.lists(STATEMENTS, max_size=24), st.integers(0, 200))
def test_a_deferred_model_reads_as_one_replayed_in_order(statements, bound):
    eager, lazy = SchemaModel(), SchemaModel()
    for sql in statements:
        if sql == "READ":  # a read in between settles what it reads
            assert [lazy.columns("d", t) for t in TABLES] == [eager.columns("d", t) for t in TABLES]
            continue
        _replayed(eager, sql, deferring=False)
        _replayed(lazy, sql, deferring=True)
    assert lazy.key() == eager.key() and lazy.views == eager.views


def test_an_alter_of_a_table_dropped_before_any_read_is_never_parsed(monkeypatch):
    parsed: list[str] = []
    real = schema.statement_tables
    monkeypatch.setattr(schema, "statement_tables", lambda sql, db: parsed.append(sql) or real(sql, db))
    model = SchemaModel()
    model.observe("CREATE TABLE s (a int)", "d", statement_tables("CREATE TABLE s (a int)", "d"))
    model.observe("CREATE TABLE t (a int)", "d", statement_tables("CREATE TABLE t (a int)", "d"))
    for n in range(3):
        model.defer(f"ALTER TABLE s ADD COLUMN c{n} int", "d", ("d", "s"))
        model.defer(f"ALTER TABLE t ADD COLUMN c{n} int", "d", ("d", "t"))
    model.observe("DROP TABLE s", "d", statement_tables("DROP TABLE s", "d"))
    assert parsed == []
    assert model.columns("d", "t") == ("a", "c0", "c1", "c2") and model.columns("d", "s") is None
    assert parsed == [f"ALTER TABLE t ADD COLUMN c{n} int" for n in range(3)]  # t's, once read


def test_deferred_text_past_its_bound_is_replayed(monkeypatch):
    """Memory stays bounded: past DEFERRED_CHARS of text, the deferred ALTERs are replayed."""
    monkeypatch.setattr(schema, "DEFERRED_CHARS", 100)
    model = SchemaModel()
    model.observe("CREATE TABLE t (a int)", "d")
    for n in range(10):
        model.defer(f"ALTER TABLE t ADD COLUMN c{n} int", "d", ("d", "t"))
        assert model._deferred_chars <= 100
    assert not model._deferred or sum(len(s) for s, _, _ in model._deferred[("d", "t")]) == model._deferred_chars
    assert model.columns("d", "t") == ("a", *(f"c{n}" for n in range(10)))
    # A segment's replay (`SchemaModel.replay`) defers a CREATE TABLE of its own columns too, in the
    # same bound: each table created, none lost.
    for n in range(10):
        sql = f"CREATE TABLE u{n} (a int, b{n} int)"
        model.replay([(sql, "d", statement_tables(sql, "d"))])
        assert model._deferred_chars <= 100
    assert all(model.columns("d", f"u{n}") == ("a", f"b{n}") for n in range(10))
