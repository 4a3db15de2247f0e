"""Hypothesis over generated workloads and random rule sets: filtering a filtered stream changes
nothing (idempotence), the fast path writes what the reference path writes, and for ROW
workloads the rows kept are exactly the rows whose Table_map decision is apply."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dumpfilter.codec import EventType
from dumpfilter.workload import WorkloadSpec, generate
from tests.support.filtering import assert_positions, assert_transaction_lengths, content_units, events_of, run

DBS = ["db1", "db2", "db3", "db4"]
TABLES = [f"{db}.t{i}" for db in DBS for i in (1, 2, 3)]
WILD = ["db_.t1", "db%.t_", "db1.%", "%.t2", "db\\_%.%", "d%3.%", "%.%1", "db4.t%", "db2._2"]
RULE = st.one_of(
    st.tuples(st.sampled_from(["replicate-do-db", "replicate-ignore-db"]), st.sampled_from(DBS)),
    st.tuples(st.sampled_from(["replicate-do-table", "replicate-ignore-table"]), st.sampled_from(TABLES)),
    st.tuples(st.sampled_from(["replicate-wild-do-table", "replicate-wild-ignore-table"]), st.sampled_from(WILD)),
)
RULES = st.lists(RULE, max_size=4)

_CACHE: dict[tuple, bytes] = {}


def workload(seed: int, fmt: str, flavor: str) -> bytes:
    key = (seed, fmt, flavor)
    if key not in _CACHE:
        spec = WorkloadSpec(seed=seed, schemas=4, tables_per_schema=3, transactions=80, binlog_format=fmt,
                            flavor=flavor, ddl_share=0.1, cross_db_share=0.3, statements_per_transaction=3)
        with tempfile.TemporaryDirectory() as tmp:
            [path] = generate(spec, tmp, "w-bin")
            _CACHE[key] = Path(path).read_bytes()
    return _CACHE[key]


WORKLOADS = st.tuples(st.integers(1, 6), st.sampled_from(["row", "statement", "mixed"]),
                      st.sampled_from(["mariadb", "mysql"]))
SETTINGS = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(WORKLOADS, RULES, st.sampled_from(["keep", "drop"]))
def test_filtering_twice_changes_nothing(wl, options, empty):
    data = workload(*wl)
    flavor = wl[2]
    once, stats, _ = run(data, options, flavor=flavor, empty=empty)
    twice, again, _ = run(once, options, flavor=flavor, empty=empty)
    assert twice == once
    assert again.partial == again.emptied == again.skipped == 0
    reference, ref_stats, _ = run(data, options, flavor=flavor, empty=empty, fast=False)
    assert once == reference and stats.as_dict() == ref_stats.as_dict()
    assert_positions(once)
    assert_transaction_lengths(once)
    if empty == "keep":  # every GTID survives, so a replica's GTID position still advances
        assert [u.gtid for u in content_units(once)] == [u.gtid for u in content_units(data)]


def row_images(data: bytes) -> list[tuple[str, str, bytes]]:
    """(db, table, rows body without the flags) of every rows event, in order."""
    maps, out = {}, []
    for e in events_of(data):
        if e.type_code == EventType.TABLE_MAP:
            maps[e.table_id] = e.table_map[1:]
        elif e.is_rows:
            body = e.body
            out.append((*maps[e.table_id], body[:6] + body[8:]))
    return out


@SETTINGS
@given(st.integers(1, 6), st.sampled_from(["mariadb", "mysql"]), RULES)
def test_row_rows_kept_are_the_rows_whose_table_applies(seed, flavor, options):
    data = workload(seed, "row", flavor)
    out, _, eng = run(data, options, flavor=flavor)
    expected = [r for r in row_images(data) if eng.decide_table(r[0], r[1]).apply]
    assert row_images(out) == expected
    # and the Table_maps written are exactly those of kept tables
    kept_maps = [e.table_map[1:] for e in events_of(out) if e.type_code == EventType.TABLE_MAP]
    assert all(eng.decide_table(db, t).apply for db, t in kept_maps)


LIKE_CHARS = st.sampled_from(list("ab_%.\\1"))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(LIKE_CHARS, min_size=1, max_size=6), min_size=1, max_size=12),
       st.text(st.sampled_from(list("ab._1%\\")), max_size=7))
def test_like_index_finds_the_first_matching_pattern(patterns, key):
    """The prefix index behind wild rules returns what a scan of every pattern in order returns."""
    from dumpfilter.rules.wildcards import LikeIndex, compile_like

    compiled = [(compile_like(p), p) for p in patterns]
    expected = next((p for regex, p in compiled if regex.fullmatch(key)), None)
    assert LikeIndex(compiled, patterns).first_match(key) == expected
