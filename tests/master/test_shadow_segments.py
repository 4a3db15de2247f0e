"""Shadow candidates counted from the master's own segments (issue #80 goal 4: 64 candidates at most
1.3x the master CPU of 8 streams): where the streams read a segment (in the cache, or kept by its
scan), the shadow pass counts its UnitList instead of scanning the binlog again; where none is
there it reads the segment through the cache, and the streams then find it. Either way each
candidate's counts are those the pass's own scan (`experiment`'s count_chunk) gives over the same
bytes: the totals, by hour, by table and by statement."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dumpfilter.master.read.segments import SegmentCache
from dumpfilter.master.read.windows import Window
from dumpfilter.master.shadow.board import ShadowBoard
from dumpfilter.spark_jobs.tasks.shadow_counts import ShadowCounts
from dumpfilter.topology import parse_topology
from dumpfilter.workload import WorkloadSpec, generate
from tests.support.count_spy import CountSpy

CANDIDATES = [("do-db2", ["replicate-do-db=db2"], "heartbeat"),
              ("ign-db3", ["replicate-ignore-db=db3"], "placeholder"),
              ("t1", ["replicate-wild-do-table=%.t1"], "empty-transaction"),
              ("db1-t2", ["replicate-do-table=db1.t2"], "heartbeat"),
              ("ign-t1", ["replicate-wild-ignore-table=db2.t1"], "placeholder"),
              ("all", [], "heartbeat")]


class _NoLint:
    def request(self, *args: object, **kwargs: object) -> None:
        pass

    def forget(self, *args: object) -> None:
        pass


def _topology():
    return parse_topology("".join(
        f'[[slaves]]\nname = "{n}"\nserver_id = {10 + k}\nskip_policy = "{p}"\n'
        f'rules = [{", ".join(json.dumps(r) for r in rules)}]\n' for k, (n, rules, p) in enumerate(CANDIDATES)))


@pytest.fixture(scope="module", params=["row", "mixed"])
def binlog(request, tmp_path_factory) -> Path:
    """One binlog file of about 400 KB (DDL, cross-database statements), read in segments of 16 KB."""
    root = tmp_path_factory.mktemp(f"shadow-seg-{request.param}")
    generate(WorkloadSpec(seed=5, schemas=3, tables_per_schema=2, transactions=1500, binlog_format=request.param,
                          ddl_share=0.03), root, "master-bin")
    assert len([p for p in root.iterdir() if p.name[-1].isdigit()]) == 1
    return root


def _counted(binlog: Path, cache: SegmentCache | None) -> tuple[ShadowBoard, dict[str, tuple]]:
    """The counts of the pass over `cache`'s segments; without one, of the pass's own scan of every range."""
    board = ShadowBoard(binlog, ShadowCounts(), _NoLint(), None, cache or SegmentCache(binlog))  # type: ignore[arg-type]
    if cache is None:
        board._from_segment = lambda *args: None  # type: ignore[method-assign]
    board.add(_topology(), None, from_start=True)
    assert board.count() >= 1
    totals = {}
    for c in board.candidates.values():
        assert not c.broken and c.total is not None, c.broken
        t = c.total
        totals[c.spec.name] = (t.counts.as_row(), t.by_hour, t.tables, t.statements, c.counted_to)
    assert board.count() == 0  # everything counted: nothing more
    return board, totals


def _stream(cache: SegmentCache) -> int:
    """A stream's reads from the first file to the end: the segments it was handed."""
    pos, segments = (cache.first_file(), 4), 0
    while True:
        seg = cache.get(pos)
        if not len(seg.units):
            return segments
        segments += 1
        cache.done_with(seg)
        if seg.at_end:
            return segments
        pos = seg.end


def test_the_pass_counts_the_streams_segments_without_scanning_again(binlog):
    _, scanned = _counted(binlog, None)
    cache = SegmentCache(binlog, segment_bytes=16 << 10)
    segments = _stream(cache)
    assert segments > 10
    reads = cache.reads
    board, counted = _counted(binlog, cache)
    assert cache.reads == reads  # every segment the stream's, none read again
    assert board.passes > 0 and counted == scanned
    # The segments the cache keeps hold no skip forms once counted (`forget_forms`): the next
    # segment's count reuses their memory, and the index budget is the unit lists'.
    from dumpfilter._core import held_bytes

    pos, lists = (cache.first_file(), 4), 0
    while len((seg := cache.get(pos)).units):
        assert seg.index is not None
        held = held_bytes(seg.index.unit_list)
        seg.index.unit_list.forget_forms()
        assert held_bytes(seg.index.unit_list) == held
        lists += 1
        cache.done_with(seg)
        if seg.at_end:
            break
        pos = seg.end
    assert lists == segments


def test_where_no_stream_read_the_pass_reads_through_the_cache_for_the_streams(binlog):
    _, scanned = _counted(binlog, None)
    cache = SegmentCache(binlog, segment_bytes=16 << 10)
    _, counted = _counted(binlog, cache)
    assert counted == scanned
    reads = cache.reads
    assert reads > 10
    assert _stream(cache) == reads and cache.reads == reads  # the stream is handed the pass's segments


def test_the_pass_waits_for_a_stream_behind_it_then_reads_on_alone(binlog, monkeypatch):
    from dumpfilter.master.shadow import board as board_module

    _, scanned = _counted(binlog, None)
    cache = SegmentCache(binlog, segment_bytes=16 << 10)
    stream = object()
    cache.at(stream, (cache.first_file(), 4))  # a stream about to read the first segment
    board = ShadowBoard(binlog, ShadowCounts(), _NoLint(), None, cache)  # type: ignore[arg-type]
    board.add(_topology(), None, from_start=True)
    monkeypatch.setattr(board_module, "DEFER_MAX", 3600.0)
    assert board.count() == 0 and cache.reads == 0  # left to the stream
    assert all(c.total is None for c in board.candidates.values())
    assert _stream(cache) == cache.reads
    reads = cache.reads
    assert board.count() >= 1 and cache.reads == reads  # the stream's segments counted

    # A stream stalled behind the pass: past DEFER_MAX the pass reads on alone.
    late = ShadowBoard(binlog, ShadowCounts(), _NoLint(), None,
                       SegmentCache(binlog, segment_bytes=16 << 10))  # type: ignore[arg-type]
    late.segments.at(stream, (cache.first_file(), 4))
    late.add(_topology(), None, from_start=True)
    monkeypatch.setattr(board_module, "DEFER_MAX", 0.0)
    assert late.count() >= 1
    assert {c.spec.name: (c.total.counts.as_row(), c.total.by_hour, c.total.tables, c.total.statements, c.counted_to)
            for c in late.candidates.values()} == scanned
    counted = {c.spec.name: (c.total.counts.as_row(), c.total.by_hour, c.total.tables, c.total.statements,
                             c.counted_to) for c in board.candidates.values()}
    assert counted == scanned


def test_every_candidate_is_counted_in_one_walk_per_segment(binlog, monkeypatch):
    """The pass counts every candidate over a segment in one call of the core's count walk
    (`UnitList.count_many`), not one walk per candidate: only a segment holding a unit Python
    decides (the file's Format_description, a DDL kept in part) is walked candidate by candidate.
    The counts stay those of the pass's own scan (`experiment`'s count_chunk)."""
    from dumpfilter.spark_jobs.tasks import bandwidth

    _, scanned = _counted(binlog, None)
    calls: list[tuple[str, int]] = []
    segments = []
    real = bandwidth._count_units

    def spied(counters, units, *args):
        segments.append(len(units))
        return real(counters, CountSpy(units, calls), *args)

    monkeypatch.setattr(bandwidth, "_count_units", spied)
    cache = SegmentCache(binlog, segment_bytes=16 << 10)
    _stream(cache)
    _, counted = _counted(binlog, cache)
    assert counted == scanned
    many = [jobs for call, jobs in calls if call == "count_many"]
    alone = sum(1 for call, _ in calls if call == "count")
    assert len(segments) > 10 and all(0 < jobs <= len(CANDIDATES) for jobs in many), (many, len(segments))
    assert len(many) >= len(segments) // 2, (len(many), len(segments))
    assert alone <= 8 * len(CANDIDATES) * (len(segments) - len(many)), (alone, len(segments))


def test_the_segments_the_streams_let_go_keep_their_pages_until_the_pass_has_counted_them(tmp_path, monkeypatch):
    """The pass stands in the cache's readers (SegmentCache.at) at its candidate furthest behind:
    a segment the streams let go before it keeps its pages (TRAIL_BYTES) until the pass has
    counted it, then they are handed back. (Handed back first, the count faulted every page in
    again: 8,700 faults a pass over 587 MB, a third of the pass thread's CPU in system time.)"""
    from dumpfilter.master.read import segments as segments_module
    from dumpfilter.master.shadow import board as board_module

    handed: list[tuple[str, int]] = []
    hand_back = segments_module._hand_back
    monkeypatch.setattr(segments_module, "_hand_back", lambda seg: handed.append(seg.start) or hand_back(seg))
    monkeypatch.setattr(board_module, "DEFER_MAX", 3600.0)
    monkeypatch.setattr(Window, "MAP_MIN", 0)
    binlog = tmp_path  # closed files (rotated), whose segments are mapped and kept by their scan
    generate(WorkloadSpec(seed=5, schemas=3, tables_per_schema=2, transactions=1500, max_binlog_size=100_000),
             binlog, "master-bin")
    cache = SegmentCache(binlog, segment_bytes=16 << 10, cache_bytes=32 << 10, resident_bytes=0)
    stream = object()
    cache.at(stream, (cache.first_file(), 4))
    board = ShadowBoard(binlog, ShadowCounts(), _NoLint(), None, cache)  # type: ignore[arg-type]
    board.add(_topology(), None, from_start=True)
    assert board.count() == 0  # left to the stream
    pos, segments = (cache.first_file(), 4), 0
    while pos is not None:  # the stream, past each segment as it is done with it
        seg = cache.get(pos)
        segments += len(seg.units) > 0
        pos = None if seg.at_end or not len(seg.units) else seg.end
        cache.at(stream, pos)
        cache.done_with(seg)
    assert segments > 10 and handed == []
    assert board.count() >= 1
    assert len(set(handed)) > segments // 2  # the pass done with them, they go (the mapped ones)
