"""A segment the cache lets go while a stream is still before its end keeps its pages for it
(TRAIL_BYTES, issue #59 goal 1): slaves started together drift apart, and each one behind
faulted the pages of every segment in again after the cache had handed them back (bench
fanout_procs' eight do-db slaves: 120,000-148,000 faults where one slave took 33,000). Counted
by the cache (`trail_kept`, the segments `_hand_back` is given) and in /proc/self/smaps: the pages
stay while a stream is behind them, within the budget, and go behind the last one; the batches
are those of a stream alone."""

from __future__ import annotations

import pytest

from dumpfilter.master.model import ChannelSpec, Registration
from dumpfilter.master.read import segments as segments_module
from dumpfilter.master.read import windows
from dumpfilter.master.read.segments import SegmentCache
from dumpfilter.master.service import DumpService
from dumpfilter.rules.ruleset import RuleSet
from dumpfilter.workload.generator import WorkloadSpec, generate
from tests.support.smaps import needs_smaps, resident

SEGMENT, CACHE, RESIDENT = 128 << 10, 256 << 10, 128 << 10
EDGES = 2 * 4096  # a page two segments share stays with either


@pytest.fixture(scope="module")
def binlog(tmp_path_factory):
    directory = tmp_path_factory.mktemp("trail") / "binlogs"
    generate(WorkloadSpec(seed=7, schemas=3, transactions=12000, flavor="mariadb", max_binlog_size=4 << 20), directory)
    name = sorted(p.name for p in directory.glob("*.0*"))[0]
    assert (directory / name).stat().st_size > 4 * (CACHE + RESIDENT + SEGMENT)
    return directory, name


def _pass(cache: SegmentCache, name: str, reader: object) -> list[tuple[object, int]]:
    """A stream's pass over file `name` as SlaveStream makes it: its position told to the cache
    before each read and after each segment, before it is done with it."""
    seen, pos = [], (name, 4)
    while pos[0] == name:
        cache.at(reader, pos)
        seg = cache.get(pos)
        if not seg.units:
            break
        seen.append((seg.start, len(seg.units)))
        pos = seg.end
        cache.at(reader, pos)
        cache.done_with(seg)
    return seen


@needs_smaps
@pytest.mark.parametrize("trail", [1 << 30, 3 * SEGMENT])
def test_pages_stay_for_a_stream_behind_and_go_behind_the_last(binlog, monkeypatch, trail):
    directory, name = binlog
    path = directory / name
    monkeypatch.setattr(windows.Window, "MAP_MIN", 0)  # every segment of the closed file a view of its mapping
    handed: list[object] = []
    real = segments_module._hand_back

    def hand_back(seg):
        handed.append(seg.start)
        return real(seg)

    monkeypatch.setattr(segments_module, "_hand_back", hand_back)
    cache = SegmentCache(directory, segment_bytes=SEGMENT, cache_bytes=CACHE, resident_bytes=RESIDENT,
                         trail_bytes=trail, read_ahead=False)
    lagging, leading = object(), object()
    try:
        cache.at(lagging, (name, 4))  # a stream at the start, which has not read yet
        first = _pass(cache, name, leading)
        assert len(first) > 12 and cache.kept_hits == 0
        assert 0 < cache._trailing_bytes <= trail
        held = resident(path)
        if trail > (1 << 29):  # room for all: none handed back, every page the leading pass touched stays
            assert handed == [] and cache.trail_kept == len(first) - len(cache._cache) - len(cache._resident)
            assert held > CACHE + RESIDENT + 3 * SEGMENT, held
        else:  # the budget's worth stay, the newest let go (the most streams behind them); the rest are handed back
            let_go = [start for start, _ in first if start not in cache._cache and start not in cache._resident]
            assert handed and len(cache._trailing) >= 2
            assert list(cache._trailing) == let_go[-len(cache._trailing):]
            assert held <= CACHE + RESIDENT + trail + SEGMENT + len(first) * EDGES, held
        handed.clear()
        assert _pass(cache, name, lagging) == first  # the units are the same
        assert cache.kept_hits > 0
        cache.at(lagging, None)
        cache.at(leading, None)
        # Behind the last stream the trailing pages are handed back: what stays is what the cache
        # and the resident budget hold.
        assert handed, "no trailing segment was handed back behind the last stream"
        assert cache._trailing_bytes <= trail
        assert resident(path) <= CACHE + RESIDENT + SEGMENT + len(first) * EDGES
    finally:
        cache.close()


@needs_smaps
def test_without_a_stream_behind_nothing_trails(binlog, monkeypatch):
    directory, name = binlog
    monkeypatch.setattr(windows.Window, "MAP_MIN", 0)
    cache = SegmentCache(directory, segment_bytes=SEGMENT, cache_bytes=CACHE, resident_bytes=RESIDENT,
                         read_ahead=False)
    try:
        first = _pass(cache, name, object())
        assert len(first) > 12 and cache.trail_kept == 0 and not cache._trailing
        assert resident(directory / name) <= CACHE + RESIDENT + SEGMENT + len(first) * EDGES
    finally:
        cache.close()


REGS = [Registration(server_id=1, filters=(ChannelSpec(None, RuleSet(do_db=("db1",))),)),
        Registration(server_id=2, filters=(ChannelSpec(None, RuleSet(do_db=("db2",))),))]


def _batches(stream) -> list[tuple]:
    out = []
    for b in stream:
        out.append((b.events, b.position, b.transactions, b.skipped_bytes, b.caught_up, b.gtid_state))
        if b.caught_up:
            return out
    return out


def test_real_streams_tell_the_cache_where_they_are(binlog, monkeypatch):
    """Two Dump streams over the service: the one still at its first batch keeps the segments the
    other's pass lets go (their pages not handed back), sends what it sends alone, and neither
    stays known to the cache once its stream is over."""
    directory, _ = binlog
    monkeypatch.setattr(windows.Window, "MAP_MIN", 0)
    sizes = dict(segment_bytes=SEGMENT, cache_bytes=CACHE, resident_bytes=RESIDENT, batch_bytes=64 << 10)
    alone = DumpService(directory, **sizes)
    alone.register(REGS[1])
    reference = _batches(alone.stream(2))
    svc = DumpService(directory, **sizes)
    svc.segments.read_ahead = alone.segments.read_ahead = False
    for reg in REGS:
        svc.register(reg)
    behind = svc.stream(2)
    first = next(behind)
    _batches(svc.stream(1))  # the other stream's pass to the end, while this one is at its first batch
    cache = svc.segments
    assert cache.trail_kept > 0, "no segment let go kept its pages for the stream behind"
    assert len(cache._readers) == 1  # the stream that ended is gone from it
    rest = _batches(behind)
    got = [(first.events, first.position, first.transactions, first.skipped_bytes, first.caught_up,
            first.gtid_state), *rest]
    assert got == reference
    behind.close()
    assert not cache._readers
