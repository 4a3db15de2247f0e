"""`UnitList.lone_queries(classes=...)` (issue #80 goal 4): each lone statement numbered by its class in
the core's one pass over a buffer (in a `_core.KeyIndex`, across buffers), so that a count meets a
DDL-heavy binlog's classes, not each ALTER's own text. One number is one class exactly as the one
reader of a statement's class, `rules.statement_facts.core_class`, reads it (its kind and updated
tables), with its default database; what `core_class` declines is not numbered. Held to
`core_class` on lone statements of many shapes, names and default databases, over several buffers."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from dumpfilter import _core
from dumpfilter.codec.constants import EventType
from dumpfilter.codec.scanner import Scanner, UnitList
from dumpfilter.rules.statement_facts import core_class, core_class_skip
from dumpfilter.rules.statement_info import Kind
from tests.rules.test_core_class import SHAPES
from tests.rules.test_lint_cases import Build

NAMES = st.sampled_from(["t", "d.t", "`x y`", "d2.u", "`é`.`ü`", "s"])
SKIPS = st.sampled_from([frozenset(), frozenset({Kind.CREATE_TABLE, Kind.DROP_TABLE}), frozenset({Kind.ALTER_TABLE})])


def _classes(buffers: list[bytes], build: Build, skip: frozenset[Kind]) -> list[tuple[str, str, int | None]]:
    """Each lone unit's (default database, text, class number or None) over `buffers`."""
    fmt, index = build.fmt, _core.KeyIndex()
    formats = [(fmt.post_header_len(EventType.QUERY), fmt.checksum_len, 0)]
    out = []
    for data in buffers:
        units = UnitList()
        Scanner("<test>").scan_into(units, data, 4, 0, "bin.000001", at_eof=True)
        for q in units.lone_queries(formats, every=True, classes=index, skip=core_class_skip(skip)).others:
            assert q.gtid_size
            out.append((q.db, q.sql, q.klass))
    assert len(index) == len({k for _, _, k in out if k is not None})
    return out


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([s for s in SHAPES if s != "BEGIN"]), NAMES, NAMES, st.sampled_from(["d", "", "e"])), min_size=1,
                max_size=12), SKIPS, st.integers(1, 3))
def test_each_lone_statement_is_classed_as_core_class_reads_it(statements, skip, buffers):
    build = Build("mariadb")
    for shape, t, u, db in statements:
        build.q(shape.format(t=t, u=u), db=db, ddl=True)  # (each a lone unit: a GTID and one statement)
    data = build.bytes()
    got = _classes([data] * buffers, build, skip)
    assert len(got) == len(statements) * buffers
    classes: dict[int, object] = {}
    for db, sql, number in got:
        read = core_class(sql, db, skip)
        assert (number is None) == (read is None), sql
        if number is not None:  # (numbered in the order first met; one number, one class and database)
            assert classes.setdefault(number, (db, read)) == (db, read) and number < len(classes), sql
    assert len(set(classes.values())) == len(classes)
