"""A segment's statement units read on its scan thread (issue #43): the segment reader asks the
core's scan of a segment's first part to read the statement units too (`UnitList.scan_start(...,
statements=True)`, `SegmentReader.STATEMENTS_AHEAD`), so that a segment read ahead has them ready
before a stream asks (`UnitIndex.statement_units`). What the streams get must be what the read on
the stream's thread gives: the same keys, units and answers per segment, the same batches, stats
and counters; a segment of more than one part (a file rotation inside it), or one whose format is
not the one the scan thread read under, is read anew."""

from __future__ import annotations

from pathlib import Path

import pytest

from dumpfilter.codec.scanner import Scanner
from dumpfilter.codec.scanner import UnitList
from dumpfilter.master.model import ChannelSpec, Registration
from dumpfilter.master.read import columns, segment_reader
from dumpfilter.master.read.segments import SegmentCache
from dumpfilter.rules.ruleset import RuleSet
from dumpfilter.workload.generator import FLAVORS, WorkloadSpec, generate
from tests.master.test_statement_keys_stream import _dump


def _fields(keys: list) -> list[tuple]:
    """Statement keys as their fields (the records compare by identity)."""
    return [(k.id, k.key, k.db, k.sql) for k in keys]


def _segments(directory: Path, ahead: bool, segment_bytes: int, monkeypatch) -> list[tuple]:
    """Every segment of the binlog series, read with or without the build ahead: its start, the
    statement units' keys and count, what rows_many answers under three keep patterns, and
    whether the scan thread's build was taken."""
    monkeypatch.setattr(segment_reader.SegmentReader, "STATEMENTS_AHEAD", ahead)
    cache = SegmentCache(directory, segment_bytes=segment_bytes, cache_segments=1 << 20, cache_bytes=1 << 40)
    first = sorted(p.name for p in directory.iterdir() if p.name.rsplit(".", 1)[-1].isdigit())[0]
    start, out = (first, 4), []
    while True:
        seg = cache.get(start)
        if not seg.units:
            break
        index = seg.index
        keys, units = index.statement_units()
        patterns = (lambda i: 1, lambda i: 0, lambda i: i % 2)
        answers = index.unit_list.rows_many([b""] * 3, [bytes(p(i) for i in range(len(keys))) for p in patterns])
        out.append((seg.start, _fields(keys), units, answers, index.unit_list.statements_ahead))
        if seg.at_end:
            break
        start = seg.end
    return out


@pytest.mark.parametrize("flavor", FLAVORS)
@pytest.mark.parametrize("fmt", ["mixed", "statement"])
def test_the_scan_thread_reads_the_statement_units_the_stream_would(tmp_path, monkeypatch, flavor, fmt):
    generate(WorkloadSpec(seed=5, schemas=4, tables_per_schema=2, transactions=600, binlog_format=fmt, flavor=flavor,
                          cross_db_share=0.3, ddl_share=0.05, max_binlog_size=60_000), tmp_path)
    for segment_bytes in (8_000, 1 << 20):
        inline = _segments(tmp_path, False, segment_bytes, monkeypatch)
        ahead = _segments(tmp_path, True, segment_bytes, monkeypatch)
        assert [row[:4] for row in ahead] == [row[:4] for row in inline]
        assert sum(row[2] for row in inline) > 0, "no statement unit by keys"
        assert not any(row[4] for row in inline)
        taken = [row[4] for row in ahead if row[2]]
        assert sum(taken) >= len(taken) // 2, f"{sum(taken)} of {len(taken)} segments took the build ahead"
        if segment_bytes == 1 << 20:  # each segment spans files: read anew, not from a part's build
            assert len(ahead) < 3 and not any(row[4] for row in ahead)


def test_a_list_of_two_parts_or_another_format_reads_anew(tmp_path):
    """The build ahead is the first part's, under the format the scanner held: taken when the
    formats asked for are that one (the segment reader's, `UnitIndex.formats`); a second part, or
    other formats, make `statement_units` read every part anew, as a list scanned without it."""
    generate(WorkloadSpec(seed=8, schemas=2, tables_per_schema=2, transactions=200, binlog_format="mixed",
                          flavor="mariadb"), tmp_path)
    path = next(p for p in sorted(tmp_path.iterdir()) if p.name.endswith(".000001"))
    data = path.read_bytes()
    seg = SegmentCache(tmp_path, segment_bytes=1 << 30).get((path.name, 4))
    formats = seg.index.formats()
    assert len(formats) == 1 and seg.at_end

    def built(formats, statements: bool, split: int | None = None):
        scanner, units = Scanner(), UnitList()
        off = 4
        for stop in ([split, None] if split else [None]):
            scanner.scan_start(units, data[:stop] if stop else data, off, 0, path.name, at_eof=stop is None,
                               statements=statements)
            off = scanner.scan_finish(units).stop
        read = units.statement_units(formats)
        return (_fields(read.keys), read.units), units.statements_ahead

    (keys, count), taken = built(formats, True)
    assert taken and count > 0 and (keys, count) == built(formats, False)[0]
    assert built(formats, False)[1] is False
    (post, crc, first), = formats
    later = [(post, crc, len(seg.index.unit_list) // 2)]
    got, taken = built(later, True)
    assert not taken and got == built(later, False)[0] and got[1] < count
    two = formats + [(post, crc, 0)]
    got, taken = built(two, True, len(data) // 2)
    assert not taken and got == built(two, False, len(data) // 2)[0] == (keys, count)


@pytest.mark.parametrize("flavor", FLAVORS)
def test_streams_send_the_same_with_and_without_the_build_ahead(tmp_path, monkeypatch, flavor):
    generate(WorkloadSpec(seed=13, schemas=4, tables_per_schema=2, transactions=800, binlog_format="mixed",
                          flavor=flavor, cross_db_share=0.3, max_binlog_size=1 << 30), tmp_path)
    rules = [RuleSet(do_db=("db1",)), RuleSet(ignore_db=("db2",)), RuleSet(wild_do_table=("db3.%", "db1.t1")),
             RuleSet()]
    regs = [Registration(server_id=i + 1, filters=(ChannelSpec(None, r),)) for i, r in enumerate(rules)]
    taken: list[bool] = []
    real = columns.UnitIndex.statement_units

    def statement_units(self):
        found = real(self)
        taken.append(self.unit_list.statements_ahead)
        return found

    monkeypatch.setattr(columns.UnitIndex, "statement_units", statement_units)
    runs = {}
    for ahead in (False, True):
        monkeypatch.setattr(segment_reader.SegmentReader, "STATEMENTS_AHEAD", ahead)
        taken.clear()
        out = _dump(tmp_path, regs, True, segment_bytes=30_000, batch_bytes=64 << 10)
        runs[ahead] = (out, any(taken), sum(taken), len(taken))
    (plain, plain_taken, _, _), (ahead_out, _, n_taken, n_asked) = runs[False], runs[True]
    assert not plain_taken
    assert n_asked > 3 and n_taken > n_asked // 2, f"the build ahead taken for {n_taken} of {n_asked} segments"
    for sid in plain:
        assert ahead_out[sid] == plain[sid], f"server_id {sid}"
        assert plain[sid][3].key_units > 0
