"""The core's bulk read of a segment's GTID-and-one-statement units (`UnitIndex.lone_queries`,
`_core.UnitList.lone_queries`) against the per-unit Python read it replaces (`Unit.lone_text`): the
same units, the same default database and SQL text, on every real fixture binlog, on generated
binlogs of both flavors, on hypothesis binlogs (undecodable bytes included) and whatever the
segment size; the core's `plain` classification of those texts against `plain_statement`, and
their classes (`LoneClasses`, numbered across segments) against `statement_class`."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dumpfilter import _core
from dumpfilter.codec import EventType
from dumpfilter.codec import encode as enc
from dumpfilter.master.read.segments import SegmentCache
from dumpfilter.rules.statements import plain_statement
from dumpfilter.spark_jobs.tasks.lone_units import LoneUnits
from dumpfilter.workload.generator import FLAVORS, WorkloadSpec, generate
from tests.codec.test_properties import binlogs, written


def _parts_with_fde(index) -> set[int]:
    """Units of parts whose format changes inside them: left to `Unit.lone_text` by design."""
    parts = index._parts
    out: set[int] = set()
    for p, part in enumerate(parts):
        if part.fmts is not None:
            stop = parts[p + 1].first if p + 1 < len(parts) else part.first + len(part.fmts)
            out.update(range(part.first, stop))
    return out


def _listed(index) -> list[tuple[int, str, bool | None, str | None]]:
    """`UnitIndex.lone_queries` unit by unit: (k, db, plain, SQL), SQL None for a plain one.
    Each plain group is one database's, in ascending unit order, and no unit is listed twice."""
    found = index.lone_queries()
    out = [(q.unit, q.db, q.plain, q.sql) for q in found.others]
    assert all(p is not True for _, _, p, _ in out)
    assert len({g.db for g in found.plain}) == len(found.plain)
    for g in found.plain:
        ks = memoryview(g.units).cast("I").tolist()
        assert ks == sorted(set(ks)) and ks
        out += [(k, g.db, True, None) for k in ks]
    assert len({k for k, *_ in out}) == len(out)
    return out


def check_directory(directory: Path, name: str, segment_bytes: int) -> int:
    """Walks every segment of `directory` from `name`: each unit the core lists is one that
    `Unit.lone_text` answers, with the same texts, and every unit it answers is listed (but
    for those in a part whose format changes). Returns the units listed."""
    cache = SegmentCache(directory, segment_bytes=segment_bytes)
    pos, listed = (name, 4), 0
    classes = _core.LoneClasses([kind.value for kind in DECLINED])  # (numbered across the segments)
    while True:
        seg = cache.get(pos)
        if not seg.units:
            return listed
        got = {}
        listed_here = _listed(seg.index)
        for k, db, plain, sql in listed_here:
            text = seg.units[k].lone_text()
            # A plain statement's text is left out: only its database keys the answer.
            assert (sql is None) == (plain is True), (pos, k, plain)
            assert plain is None or plain == plain_statement(text[1]), (pos, k, text)
            got[k] = (db, text[1] if sql is None else sql)
        assert len(got) == len(listed_here)
        # Asked for every unit (`experiment`'s classes): the same units, each with its text, and
        # its GTID event's and its own sizes, as the per-unit read finds them.
        every = seg.index.unit_list.lone_queries(seg.index.formats(), every=True, classes=classes).others
        assert [(q.unit, q.db, q.sql) for q in every] == [(k, *got[k]) for k in sorted(got)]
        _check_classes(every, classes)
        _check_answered(seg.index, every, classes)
        for q in every:
            unit = seg.units[q.unit]
            sizes = [e.size for e in unit.txn.events]  # (a GTID and the Query, or the Query alone)
            assert (q.gtid_size, q.size) == (sizes[0] if len(sizes) == 2 else 0, sum(sizes)), (pos, q.unit)
            assert q.plain is True or (q.plain, q.sql) == next((p, s) for k, _, p, s in listed_here if k == q.unit)
        left_out = _parts_with_fde(seg.index)
        for k in range(len(seg.units)):
            unit = seg.units[k]
            want = None if unit.is_fast else unit.lone_text()
            if k in got:
                assert got[k] == want, (pos, k)
            else:
                assert want is None or k in left_out, (pos, k, want)
        listed += len(got)
        if seg.at_end or seg.error is not None:
            return listed
        pos = seg.end


DECLINED = LoneUnits.DECLINED  # (the kinds a count's classes leave to Python's whole parse)


def _check_classes(queries: list[_core.LoneQuery], classes: _core.LoneClasses) -> None:
    """Each query's number (`LoneQuery.class_id`) is its class's, what `statement_class` reads of its
    text under its default database, its kind not one declined; or its text's, where
    `statement_class` declines the text or its kind is declined (no class: `classes.get` None).
    Texts of one class (the same kind and tables) share its number, a text and default database
    theirs, and no two share one otherwise."""
    seen: dict[tuple[str, ...] | tuple[str, tuple[str, ...], tuple[str, ...], str], int] = {}
    for q in queries:
        read = _core.statement_class(q.sql.encode("utf-8", "surrogateescape"), q.db)
        assert q.class_id >= 0, (q.unit, q.sql)  # (numbers within their bounds: a few per segment)
        got = classes.get(q.class_id)
        if got is None:
            assert read is None or read.kind in {kind.value for kind in DECLINED}, (q.unit, q.sql)
            key: tuple[str, ...] | tuple[str, tuple[str, ...], tuple[str, ...], str] = ("text", q.db, q.sql)
        else:
            assert read is not None and read.kind not in {kind.value for kind in DECLINED}, (q.unit, q.sql)
            assert (got.kind, got.dbs, got.names) == (read.kind, read.dbs, read.names), (q.unit, q.sql)
            key = (read.kind, tuple(read.dbs), tuple(read.names), q.db)
        assert seen.setdefault(key, q.class_id) == q.class_id, (q.unit, q.sql)
    assert len(set(seen.values())) == len(seen)


def _check_answered(index, every: list[_core.LoneQuery], classes: _core.LoneClasses) -> None:
    """The segment read again with every number answered (`resolved`, each number's key, code and
    replay made up from it): a unit with a GTID of an answered number, whose plainness the core
    tells, gets its code and key written (`class_of`, `key_of`) and no LoneQuery, and is listed in
    `replays` where its number replays (its text beside it in `texts` where its number defers); every
    other unit is a LoneQuery as before, and a number left unanswered keeps its units there."""
    units = index.unit_list
    numbers = sorted({q.class_id for q in every if q.class_id >= 0})
    skip = set(numbers[1::5])  # (some left unanswered)
    flags = [_core.LONE_RESOLVED, _core.LONE_RESOLVED | _core.LONE_REPLAY, _core.LONE_RESOLVED | _core.LONE_DEFER]
    resolved = bytearray(12 * (max(numbers, default=0) + 1))
    for n in numbers:
        if n not in skip:
            resolved[12 * n:12 * n + 12] = b"".join(
                v.to_bytes(4, "little") for v in (1000 + n, 2000 + n, flags[n % 3]))
    class_of, key_of = bytearray(b"\xff" * (4 * len(units))), bytearray(b"\xff" * (4 * len(units)))
    got = units.lone_queries(index.formats(), every=True, classes=classes, resolved=bytes(resolved),
                             class_of=class_of, key_of=key_of)
    fast = [q for q in every if q.class_id >= 0 and q.class_id not in skip and q.gtid_size and q.plain is not None]
    assert [q.unit for q in got.others] == [q.unit for q in every if q not in fast]
    codes, keys = memoryview(class_of).cast("I"), memoryview(key_of).cast("I")
    answered = {q.unit for q in fast}
    for k in range(len(units)):
        n = next((q.class_id for q in fast if q.unit == k), None)
        assert (codes[k], keys[k]) == ((0xFFFFFFFF, 0xFFFFFFFF) if k not in answered else (2000 + n, 1000 + n)), k
    replayed = [q for q in fast if q.class_id % 3]
    assert memoryview(got.replays).cast("I").tolist() == [v for q in replayed for v in (q.unit, q.class_id)]
    assert got.texts == [q.sql if q.class_id % 3 == 2 else None for q in replayed]
    with pytest.raises(ValueError, match="class_of and key_of"):
        units.lone_queries(index.formats(), every=True, classes=classes, resolved=bytes(resolved),
                           class_of=bytearray(), key_of=key_of)


@pytest.mark.fixtures
def test_every_real_fixture_binlog(shared_fixtures, tmp_path):
    files = sorted(p for p in shared_fixtures.rglob("*") if p.is_file() and p.name != "MANIFEST.md")
    assert len(files) == 15
    listed = 0
    for i, path in enumerate(files):
        directory = tmp_path / f"f{i}"
        directory.mkdir()
        data = gzip.open(path).read() if path.suffix == ".gz" else path.read_bytes()
        (directory / "a.000001").write_bytes(data)
        for segment_bytes in (1 << 20, 2000):
            listed += check_directory(directory, "a.000001", segment_bytes)
    assert listed > 20  # real DDL with GTIDs (MySQL 5.6+, MariaDB) was read


@pytest.mark.parametrize("flavor", FLAVORS)
def test_generated_binlogs(tmp_path, flavor):
    paths = generate(WorkloadSpec(seed=11, transactions=600, flavor=flavor, ddl_share=0.2), tmp_path)
    listed = sum(check_directory(tmp_path, paths[0].name, size) for size in (1 << 20, 5000))
    assert listed > 100


def _one_binlog(tmp_path: Path, data: bytes) -> Path:
    directory = tmp_path / "d"
    directory.mkdir(exist_ok=True)
    for old in directory.iterdir():
        old.unlink()
    (directory / "bin.000001").write_bytes(data)
    return directory


def test_undecodable_text_reads_as_surrogates(tmp_path):
    """Latin-1 bytes in a DDL's SQL and database name: both reads keep them as surrogates
    (surrogateescape), so the text round-trips to the binlog's bytes."""
    fde = enc.format_description("10.11.6-MariaDB-log", checksum=True)
    fmt = fde.fmt
    sql, db = "CREATE TABLE caf\udce9 (a INT)", "d\udce9"
    txn = [enc.build_event(EventType.MARIADB_GTID, enc.mariadb_gtid_body(5, standalone=True), fmt=fmt),
           enc.build_event(EventType.QUERY, enc.query_body(sql, db), fmt=fmt)]
    directory = _one_binlog(tmp_path, written(fde, [txn]))
    seg = SegmentCache(directory).get(("bin.000001", 4))
    # Non-ASCII text: the core leaves `plain` to Python, and hands the text over.
    assert [(db_, plain, sql_) for _, db_, plain, sql_ in _listed(seg.index)] == [(db, None, sql)]
    assert check_directory(directory, "bin.000001", 1 << 20) == 1


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.function_scoped_fixture])
@given(binlogs(), st.sampled_from([1 << 20, 300]))
def test_hypothesis_binlogs(tmp_path, spec, segment_bytes):
    fde, txns = spec
    directory = _one_binlog(tmp_path, written(fde, txns))
    listed = check_directory(directory, "bin.000001", segment_bytes)
    ddl = sum(1 for t in txns if len(t) == 2 and t[1].type_code == EventType.QUERY)
    assert listed == ddl
