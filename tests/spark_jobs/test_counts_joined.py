"""A live master's shadow pass folds each range into its candidates' running totals
(`ShadowCounts.fold`) with `joined_tables` and `joined_statements`: what `experiment`'s merges
make of the two chunks, in the same order, without changing either."""

from __future__ import annotations

import copy

from hypothesis import given, settings
from hypothesis import strategies as st

from dumpfilter.spark_jobs.tasks.counts import (ChunkCounts, SlaveCounts, joined_statements, joined_tables,
                                                merge_statements, merge_tables)

_NAMES = st.tuples(st.sampled_from(["db1", "db2", "app"]), st.text("abc", min_size=1, max_size=3))
_TABLES = st.dictionaries(_NAMES, st.integers(0, 10**9), max_size=12)
_GROUPS = st.tuples(st.sampled_from(["db1", ""]), st.sampled_from(["INSERT", "ALTER_TABLE"]),
                    st.lists(_NAMES, max_size=2).map(tuple), st.sampled_from(["", "SET @a=1"]))
_STATEMENTS = st.dictionaries(_GROUPS, st.tuples(st.integers(0, 10**6), st.text(max_size=8)).map(list), max_size=12)


def _chunk(start: int, tables: dict, statements: dict) -> ChunkCounts:
    return ChunkCounts(0, start, SlaveCounts(slave="s"), tables=tables, statements=statements)


@settings(max_examples=300, deadline=None)
@given(_TABLES, _TABLES, _STATEMENTS, _STATEMENTS, _STATEMENTS)
def test_a_fold_joins_as_experiment_merges_and_changes_neither_side(tables_a, tables_b, stmts_a, stmts_b, stmts_c):
    before, after = copy.deepcopy((tables_a, tables_b, stmts_a, stmts_b)), (tables_a, tables_b, stmts_a, stmts_b)
    both = [_chunk(4, tables_a, stmts_a), _chunk(900, tables_b, stmts_b)]
    tables = joined_tables(tables_a, tables_b)
    statements = joined_statements(stmts_a, stmts_b)
    assert list(tables.items()) == list(merge_tables(both).items())  # (the order the report lists them in)
    assert list(statements.items()) == list(merge_statements(both).items())
    assert after == before  # (a running total's dicts are shared by the candidates counted together)
    # the next fold leaves this one's total as it was (an entry it adds to is a new list)
    total = copy.deepcopy(statements)
    assert list(joined_statements(statements, stmts_c).items()) == list(
        merge_statements([_chunk(4, {}, statements), _chunk(900, {}, stmts_c)]).items())
    assert statements == total and (tables_a, tables_b, stmts_a, stmts_b) == before
