"""bench_shadow's spread of its rounds' own ratios (`spread`): where a figure on its goal's limit
stands across rounds. Nothing here measures anything."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from bench.bench_shadow import spread, spread_line

_RATIOS = st.lists(st.floats(0.5, 2.0), min_size=1, max_size=15)


@given(_RATIOS, st.floats(0.8, 1.6))
def test_the_spread_counts_the_rounds_that_meet_the_goal_and_orders_its_quartiles(ratios, goal):
    got = spread(ratios, goal)
    assert got["of"] == len(ratios)
    assert 0 <= got["met"] <= got["of"]
    assert (got["met"] == got["of"]) == (max(ratios) <= goal)
    assert (got["met"] == 0) == (min(ratios) > goal)
    q = got["quartiles"]
    assert q == sorted(q) and len(q) == 3
    assert round(min(ratios), 2) <= q[0] and q[2] <= round(max(ratios), 2)  # (among the rounds: a few rounds are not extrapolated)
    assert f"met in {got['met']} of {got['of']} rounds" in spread_line(got)


@given(st.floats(0.5, 2.0), st.integers(1, 9))
def test_rounds_alike_spread_nowhere(ratio, n):
    got = spread([ratio] * n, 1.3)
    assert got["quartiles"] == [round(ratio, 2)] * 3
    assert got["met"] == (n if ratio <= 1.3 else 0)
