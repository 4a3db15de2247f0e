"""Issue #14: the position-versioned schema model (SchemaTimeline) and the per-position trigger
knowledge (TriggerKnowledge) answer, for any position asked in any order, exactly what a model
replayed in order up to that position answers; each statement of the feed is read once."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dumpfilter.rules import schema_timeline
from dumpfilter.rules.evaluate import RuleEngine
from dumpfilter.rules.ruleset import RuleSet, Settings
from dumpfilter.rules.schema import SchemaModel
from dumpfilter.rules.schema_timeline import SchemaTimeline
from dumpfilter.rules.trigger_knowledge import TriggerKnowledge

TABLES = ("t1", "t2", "t3")
STATEMENT = st.one_of(
    st.builds(lambda t, cols: f"CREATE TABLE {t} ({', '.join(f'{c} int' for c in cols)})",
              st.sampled_from(TABLES), st.lists(st.sampled_from("abcdef"), min_size=1, max_size=4, unique=True)),
    st.builds(lambda t, c: f"ALTER TABLE {t} ADD COLUMN {c} int", st.sampled_from(TABLES), st.sampled_from("ghij")),
    st.builds(lambda t, c: f"ALTER TABLE {t} DROP COLUMN {c}", st.sampled_from(TABLES), st.sampled_from("abcdefghij")),
    st.builds(lambda t: f"DROP TABLE IF EXISTS {t}", st.sampled_from(TABLES)),
    st.builds(lambda a, b: f"RENAME TABLE {a} TO {b}", st.sampled_from(TABLES), st.sampled_from(TABLES)),
    st.builds(lambda n, t, w: f"CREATE TRIGGER tr{n} AFTER UPDATE ON {t} FOR EACH ROW INSERT INTO {w} VALUES (1)",
              st.integers(1, 2), st.sampled_from(TABLES), st.sampled_from(TABLES)),
    st.builds(lambda n: f"DROP TRIGGER IF EXISTS tr{n}", st.integers(1, 2)),
    st.builds(lambda t: f"INSERT INTO {t} VALUES (1)", st.sampled_from(TABLES)),
    st.just("CREATE DATABASE d2"), st.just("DROP DATABASE d2"),
)


class ListFeed:
    """A binlog's Query statements at keys 10, 20, ...; counts what it hands out."""

    def __init__(self, statements: list[str]):
        self.items = [(10 * (i + 1), sql, "d") for i, sql in enumerate(statements)]
        self.read = 0

    def __call__(self, resume, until):
        i = resume or 0
        while i < len(self.items) and self.items[i][0] < until:
            key, sql, db = self.items[i]
            i += 1
            self.read += 1
            yield key, sql, db, i
        yield None, None, None, i


def _state(model: SchemaModel):
    return model.tables, dict(model.triggers), set(model.databases)


def _replayed(statements: list[str], before: int, start: SchemaModel) -> SchemaModel:
    model = start.copy()
    for i, sql in enumerate(statements):
        if 10 * (i + 1) < before:
            model.observe(sql, "d")
    return model


@settings(max_examples=150, deadline=None)
@given(st.lists(STATEMENT, max_size=30), st.lists(st.integers(0, 320), min_size=1, max_size=12),
       st.booleans())
def test_model_at_equals_the_in_order_replay_for_positions_in_any_order(statements, asked, small_checkpoints):
    start = SchemaModel.from_sql("CREATE TABLE t1 (a int, z int);", "seed")
    feed = ListFeed(statements)
    timeline = SchemaTimeline(start, feed)
    if small_checkpoints:  # exercise checkpoints and their thinning
        timeline._spacing = 1
    for position in asked:
        assert _state(timeline.model_at(position)) == _state(_replayed(statements, position, start)), position
    assert feed.read <= len(statements)  # each statement handed out once, however often it is asked
    assert _state(start) == _state(SchemaModel.from_sql("CREATE TABLE t1 (a int, z int);", "seed"))


def test_checkpoints_stay_bounded(monkeypatch):
    monkeypatch.setattr(schema_timeline, "_CHECKPOINT_EVERY", 2)
    monkeypatch.setattr(schema_timeline, "_MAX_CHECKPOINTS", 4)
    statements = [f"CREATE TABLE t{i} (c{i} int)" for i in range(200)]
    timeline = SchemaTimeline(None, ListFeed(statements))
    timeline.model_at(10_000)
    assert len(timeline._checkpoints) <= 4 + 1
    assert timeline.model_at(555).columns("d", "t54") == ("c54",)
    assert timeline.model_at(555).columns("d", "t55") is None and not timeline.model_at(555).knows("d", "t55")


def test_a_model_handed_out_does_not_change_when_the_log_grows():
    timeline = SchemaTimeline(None, ListFeed(["CREATE TABLE t1 (a int)", "ALTER TABLE t1 ADD COLUMN b int"]))
    early = timeline.model_at(15)
    assert timeline.model_at(100).columns("d", "t1") == ("a", "b")
    assert early.columns("d", "t1") == ("a",)


def test_trigger_knowledge_answers_by_position_and_ignores_replays():
    knowledge = TriggerKnowledge()
    key = ("d", "tr")
    knowledge.created(key, ("d", "t1"), applied=True, at=10)
    knowledge.dropped(key, at=30)
    knowledge.created(key, ("d", "t2"), applied=False, at=50)
    knowledge.created(key, ("d", "t9"), applied=True, at=10)  # the statement at 10 decided again: ignored
    assert [knowledge.table(key, at) for at in (5, 10, 11, 30, 31, 60)] == [None, None, ("d", "t1"), ("d", "t1"), None, None]
    assert [knowledge.absent(key, at) for at in (11, 50, 51)] == [False, False, True]
    absent, known = knowledge.snapshot()
    assert TriggerKnowledge.restore(absent, known).absent(key) and key in absent and not known


@pytest.mark.parametrize("order", ["ahead first", "behind first"])
def test_an_engine_on_a_timeline_folds_trigger_knowledge_by_position(order):
    # Bug#24478 per position: the trigger exists on the replica only after the CREATE it applied.
    statements = ["CREATE TABLE t1 (a int)", "CREATE TABLE t2 (b int)", "CREATE TABLE audit (x int)",
                  "UPDATE t1 JOIN t2 ON t1.a = t2.b SET t1.a = 1",
                  "CREATE TRIGGER tr AFTER UPDATE ON t1 FOR EACH ROW INSERT INTO audit VALUES (1)",
                  "UPDATE t1 JOIN t2 ON t1.a = t2.b SET t1.a = 2",
                  "DROP TRIGGER tr",
                  "UPDATE t1 JOIN t2 ON t1.a = t2.b SET t1.a = 3"]
    feed = ListFeed(statements)
    engine = RuleEngine(RuleSet(ignore_table=("d.audit",)), Settings(flavor="mariadb"),
                        schema=SchemaTimeline(None, feed))
    updates = {40: True, 60: False, 80: True}  # position -> applied
    keys = sorted(updates, reverse=order == "behind first")
    for key in keys:
        assert engine.decide_statement(statements[key // 10 - 1], "d", at=key).apply is updates[key], key
    assert feed.read <= len(statements)
