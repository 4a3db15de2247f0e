"""Segments the cache lets go stay known by their scan (`SegmentCache._keep`, issue #30): streams
far apart over a binlog larger than the cache scan each segment once, not once per stream; what
they are sent is what a cache that keeps nothing sends; the kept scans are bounded; a purged
file's kept segments are not served."""

from __future__ import annotations

import os
import time
from collections import Counter

import pytest

from dumpfilter.errors import PositionError
from dumpfilter.master.read import columns as columns_module
from dumpfilter.master.read import segments as segments_module
from dumpfilter.master.model import ChannelSpec, Registration
from dumpfilter.rules.ruleset import RuleSet
from dumpfilter.workload.generator import FLAVORS, FORMATS, WorkloadSpec, generate
from tests.master.test_fast_path import _files
from tests.master.test_mapped_segments import _dump, mapping  # noqa: F401 - the fixture

SEGMENT_BYTES = 4_000
CACHE_BYTES = 4 * SEGMENT_BYTES
# Six slaves, each keeping one schema or everything, streamed one after another: each starts when
# the one before has reached the end, far more than the cache behind it.
REGS = [Registration(server_id=1)] + [
    Registration(server_id=1 + n, filters=(ChannelSpec(None, RuleSet(do_db=(f"db{n}",))),)) for n in range(1, 6)]


def _binlog(tmp_path, fmt: str = "row", flavor: str = "mariadb"):
    generate(WorkloadSpec(seed=30, transactions=600, binlog_format=fmt, flavor=flavor, max_binlog_size=60_000,
                          cross_db_share=0.2, ddl_share=0.03), tmp_path)
    assert sum((tmp_path / name).stat().st_size for name in _files(tmp_path)) > 8 * CACHE_BYTES


def _streamed(tmp_path, regs, **kwargs):
    made = []
    out = _dump(tmp_path, regs, True, made, segment_bytes=SEGMENT_BYTES, cache_bytes=CACHE_BYTES, **kwargs)
    return out, made[0]


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("flavor", FLAVORS)
def test_streams_far_apart_scan_each_segment_once(tmp_path, mapping, fmt, flavor):  # noqa: F811
    _binlog(tmp_path, fmt, flavor)
    _, one = _streamed(tmp_path, REGS[:1])
    segments = one.reads  # one stream's pass: every segment scanned once
    assert segments > 8
    kept, cache = _streamed(tmp_path, REGS)
    assert cache.reads == segments, "a segment was scanned again"
    assert cache.kept_hits >= (len(REGS) - 1) * (segments - 4)  # all but the cache's last four
    # A cache that keeps nothing scans every segment again for each stream (what this test catches).
    nothing, none_kept = _streamed(tmp_path, REGS, index_bytes=0)
    assert none_kept.reads >= len(REGS) * (segments - 4)
    for sid in nothing:
        assert kept[sid][0] == nothing[sid][0], f"server_id {sid}: batches differ"
        assert kept[sid][1] == nothing[sid][1], f"server_id {sid}: stats differ"


def test_the_kept_scans_are_bounded(tmp_path, mapping, monkeypatch):  # noqa: F811
    _binlog(tmp_path)
    _, one = _streamed(tmp_path, REGS[:1])
    budget = 3 * max(cost for _, cost, _ in one._kept.values())
    seen = []
    real_keep = segments_module.SegmentCache._keep

    def keep(self, seg):
        real_keep(self, seg)
        seen.append((self._kept_bytes, len(self._kept)))
        # the files the kept segments map, counted as they come and go (a purge check reads them)
        assert self._kept_files == Counter(name for _, _, files in self._kept.values() for name in files)

    monkeypatch.setattr(segments_module.SegmentCache, "_keep", keep)
    _, cache = _streamed(tmp_path, REGS[:3], index_bytes=budget)
    assert seen and all(size <= budget for size, _ in seen) and max(size for size, _ in seen) > budget // 2
    assert cache.reads > one.reads  # what it could not keep it scanned again
    monkeypatch.setattr(segments_module, "INDEX_SEGMENTS", 2)
    seen.clear()
    _streamed(tmp_path, REGS[:2])
    assert seen and all(count <= 2 for _, count in seen)


def test_a_purged_files_kept_segments_are_not_served(tmp_path, mapping):  # noqa: F811
    _binlog(tmp_path)
    _, cache = _streamed(tmp_path, REGS[:1])
    first = _files(tmp_path)[0]
    held = [start for start, (_, _, files) in cache._kept.items() if first in files]
    assert held
    (tmp_path / first).unlink()
    with pytest.raises(PositionError):
        cache.get(held[0])  # its kept scan is not served: read again, the file is gone (1236)
    assert held[0] not in cache._kept
    cache.forget([_files(tmp_path)[0]])
    assert not any(_files(tmp_path)[0] in files for _, _, files in cache._kept.values())
    assert _files(tmp_path)[0] not in cache._kept_files
    purged = _files(tmp_path)[0]  # its places (held, resident) given up with it
    assert not any(start[0] == purged for start in [*cache._held, *cache._resident, *cache._placed_files])
    assert cache._held_bytes == sum(cache._held.values()) and cache._resident_bytes == sum(cache._resident.values())
    assert cache._kept_files == Counter(name for _, _, files in cache._kept.values() for name in files)


def test_kept_pages_stay_resident_within_their_budget(tmp_path, mapping, monkeypatch):  # noqa: F811
    """Kept segments keep their pages up to `resident_bytes` (the cache's own count of them), the
    first kept staying; every kept segment beyond it has its pages handed back."""
    _binlog(tmp_path)
    _, one = _streamed(tmp_path, REGS[:1], resident_bytes=0)
    budget = 3 * max(seg.size for seg, _, _ in one._kept.values())
    seen, handed = [], []
    real_keep, real_done, real_hand_back = (segments_module.SegmentCache._keep, segments_module.SegmentCache.done_with,
                                            segments_module._hand_back)

    def check(cache):
        assert cache._resident_bytes == sum(cache._resident.values())
        assert set(cache._resident) <= set(cache._kept) | set(cache._cache)  # a place stays while taken back
        seen.append(cache._resident_bytes)

    def keep(self, seg):
        real_keep(self, seg)
        check(self)

    def done_with(self, seg):
        real_done(self, seg)
        check(self)

    def hand_back(seg):
        handed.append(seg.start)
        return real_hand_back(seg)

    monkeypatch.setattr(segments_module.SegmentCache, "_keep", keep)
    monkeypatch.setattr(segments_module.SegmentCache, "done_with", done_with)
    monkeypatch.setattr(segments_module, "_hand_back", hand_back)
    _, cache = _streamed(tmp_path, REGS, resident_bytes=budget)
    assert seen and all(size <= budget for size in seen) and max(seen) > budget // 2
    assert cache.kept_hits > 0
    assert set(cache._kept) - set(cache._resident) <= set(handed), "a kept segment beyond the budget kept its pages"
    # A budget of nothing hands every kept segment's pages back; none stays counted.
    seen.clear()
    handed.clear()
    _, none = _streamed(tmp_path, REGS, resident_bytes=0)
    assert not none._resident and set(seen) == {0} and set(none._kept) <= set(handed)


def test_the_page_budget_changes_no_batch(tmp_path, mapping):  # noqa: F811
    _binlog(tmp_path, "mixed")
    outs = [_streamed(tmp_path, REGS, resident_bytes=budget)[0] for budget in (0, 2 * SEGMENT_BYTES, 1 << 30)]
    for sid in outs[0]:
        for out in outs[1:]:
            assert out[sid][0] == outs[0][sid][0], f"server_id {sid}: batches differ"
            assert out[sid][1] == outs[0][sid][1], f"server_id {sid}: stats differ"


def test_a_settled_directory_is_one_stat_a_visit_and_a_removal_is_still_seen(tmp_path, mapping, monkeypatch):  # noqa: F811
    """While the binlog directory has not changed since the kept segments' files were last seen
    (its stat settled, see `_files_may_be_gone`), keeping and taking back segments looks up no
    file; a file removed by hand changes the directory, and its kept segments are not served."""
    _binlog(tmp_path)
    old = time.time() - 60
    os.utime(tmp_path, (old, old))  # settled: written a minute ago
    looked: list[str] = []
    real_lexists = os.path.lexists
    monkeypatch.setattr(segments_module.os.path, "lexists", lambda p: looked.append(p) or real_lexists(p))
    _, cache = _streamed(tmp_path, REGS[:3])
    assert cache.kept_hits > 0 and cache._checked_dir is not None
    settled = len(looked)
    looked.clear()
    with monkeypatch.context() as m:  # as before: every kept segment's files looked up at each keep
        m.setattr(segments_module.SegmentCache, "_files_may_be_gone", lambda self, check=True: True)
        _, unsettled = _streamed(tmp_path, REGS[:3])
    assert unsettled.kept_hits == cache.kept_hits
    assert settled + 2 * cache.kept_hits <= len(looked), "files looked up at every visit of a settled directory"
    held = [start for start, (_, _, files) in cache._kept.items() if _files(tmp_path)[0] in files]
    assert held
    (tmp_path / _files(tmp_path)[0]).unlink()  # by hand: the directory's mtime moves
    with pytest.raises(PositionError):
        cache.get(held[0])
    assert held[0] not in cache._kept


def test_a_segments_lone_statements_are_read_once_when_few(tmp_path, mapping, monkeypatch):  # noqa: F811
    """`UnitIndex.lone_queries` is kept with its segment (every registration asks again for every
    segment its stream reaches); one whose texts are many is read each time instead."""
    _binlog(tmp_path)
    _, cache = _streamed(tmp_path, REGS[:2])
    indexes = [seg.index for seg, _, _ in cache._kept.values()] + [seg.index for seg in cache._cache.values()]
    with_lone = [ix for ix in indexes if any(g.units for g in ix.lone_queries().plain) or ix.lone_queries().others]
    assert with_lone
    assert all(ix.lone_queries() is ix.lone_queries() for ix in with_lone)
    monkeypatch.setattr(columns_module, "LONE_KEPT_BYTES", 0)
    fresh = [seg.index for seg, _, _ in _streamed(tmp_path, REGS[:1])[1]._kept.values()]
    fresh = [ix for ix in fresh if ix.lone_queries().others]
    assert fresh and all(ix.lone_queries() is not ix.lone_queries() for ix in fresh)
    assert all(repr(ix.lone_queries()) == repr(ix.lone_queries()) for ix in fresh)


def test_passes_over_more_than_the_kept_budget_are_served_the_held_segments(tmp_path, mapping):  # noqa: F811
    """Slaves reading the binlog one after another, with unit lists worth twice the kept budget: the
    first kept are held (HELD_SHARE), so every later pass is served them instead of scanning
    them again. Letting the oldest kept go first (FIFO) let go of exactly what the next pass
    reached first: no pass was served a kept segment, and every one scanned the binlog again."""
    _binlog(tmp_path)
    _, one = _streamed(tmp_path, REGS[:1])
    costs = [cost for _, cost, _ in one._kept.values()]
    budget = sum(costs) // 2
    out, cache = _streamed(tmp_path, REGS[:4], index_bytes=budget)
    can_hold = int(len(costs) * segments_module.HELD_SHARE / 2) - 1  # segments' costs differ a little
    assert cache.kept_hits >= 3 * can_hold, "the passes after the first were not served the held segments"
    assert cache.reads <= 4 * one.reads - 3 * can_hold
    assert len(cache._held) >= can_hold and cache._held_bytes <= budget
    for start in cache._held:  # a held place belongs to a segment kept or back in the cache
        assert start in cache._kept or start in cache._cache
    full, _ = _streamed(tmp_path, REGS[:4])
    for sid in out:  # what is kept changes what is scanned again, never what is sent
        assert out[sid][0] == full[sid][0] and out[sid][1] == full[sid][1], f"server_id {sid} differs"


def test_the_budget_keeps_a_small_transaction_binlogs_unit_lists(tmp_path, mapping):  # noqa: F811
    """A binlog of small transactions (two one-row statements here, about 390 bytes a unit; the bench
    matrix's real MariaDB one: 587 MB in 1.68 million units, 349 bytes each) is many units per byte:
    600 MB of them fit INDEX_BYTES, so streams far apart over it scan each segment once (with 96 MB,
    every stream scanned 40% of its segments again)."""
    generate(WorkloadSpec(seed=80, transactions=6000, rows_per_statement=1, statements_per_transaction=2,
                          ddl_share=0.0, cross_db_share=0.0), tmp_path)
    made: list = []
    _dump(tmp_path, REGS, True, made, segment_bytes=128 << 10, cache_bytes=128 << 10)  # segments of many units
    kept = [(seg.size, len(seg.units), cost) for seg, cost, _ in made[0]._kept.values()]
    size, units, cost = (sum(column) for column in zip(*kept))
    assert len(kept) > 8 and units > size / 400
    assert 600e6 * cost / size <= segments_module.INDEX_BYTES


def test_a_kept_segment_counts_its_statement_units(tmp_path, mapping):  # noqa: F811
    """A MIXED segment's statement units, read once for every stream, are about twice its unit
    records: the kept budget counts them (counted at 100 bytes a unit, a MIXED binlog's kept lists
    held 2.5 times the budget)."""
    _binlog(tmp_path, "mixed")
    _, cache = _streamed(tmp_path, REGS)
    with_statements = [(seg, cost) for seg, cost, _ in cache._kept.values() if seg.index.statement_units()[1]]
    assert with_statements
    for seg, cost in with_statements:
        rows = sum(map(len, seg.index._rows.values()))
        assert cost == seg.index.held_bytes() > len(seg.units) * 40 + rows  # a ListedUnit record and its bounds
