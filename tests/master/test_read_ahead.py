"""The segment cache reads the next segment ahead (`SegmentCache.start_ahead`): its scan runs on
a thread of the core's while the stream sends the segment it has. Segments, batches and stats
are those of a cache that does not read ahead; the reads started ahead are the ones the next
gets take; a read that fails ahead fails, the same way, at the get that takes it; and the reads
waiting are bounded, stale ones dropped."""

from __future__ import annotations

from pathlib import Path

import pytest

from dumpfilter.codec import EventType, read_events
from dumpfilter.errors import BinlogError
from dumpfilter.master.read import segments
from dumpfilter.master.read.segments import SegmentCache
from dumpfilter.workload.generator import FLAVORS, FORMATS, WorkloadSpec, generate
from tests.master.test_fast_path import _files, _segments
from tests.master.test_mapped_segments import REGS, _dump


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("flavor", FLAVORS)
def test_read_ahead_gives_the_segments_and_batches_of_plain_reads(tmp_path, monkeypatch, fmt, flavor):
    generate(WorkloadSpec(seed=11, transactions=400, binlog_format=fmt, flavor=flavor, max_binlog_size=40_000,
                          cross_db_share=0.3, ddl_share=0.05), tmp_path)
    scans = []
    real_steps = segments.SegmentReader.steps
    monkeypatch.setattr(segments.SegmentReader, "steps", lambda self: scans.append(self.start) or real_steps(self))
    for segment_bytes in (3_000, 1 << 20):
        made: list[SegmentCache] = []
        scans.clear()
        ahead = _segments(tmp_path, True, segment_bytes, made)
        assert ahead == _segments(tmp_path, True, segment_bytes, read_ahead=False)
        starts = [row[1] for row in ahead if row[0] == "segment"]
        # Every segment but the first was read ahead, through file rotations too, and each was
        # read once: the get took the read started ahead.
        assert made[0].ahead_taken == len(starts) - 1
        assert scans[: len(starts)] == starts and scans[len(starts):] == starts
    made: list[SegmentCache] = []
    plain = _dump(tmp_path, REGS, True, read_ahead=False, segment_bytes=5_000, batch_bytes=4_000)
    ahead = _dump(tmp_path, REGS, True, made, segment_bytes=5_000, batch_bytes=4_000)
    assert made[0].ahead_taken > 10
    for sid in plain:
        assert ahead[sid][0] == plain[sid][0], f"server_id {sid}: batches differ"
        assert ahead[sid][1] == plain[sid][1], f"server_id {sid}: stats differ"


def _second_file(tmp_path: Path) -> tuple[int, tuple[str, int]]:
    """A segment size whose first segment ends with the first file's Rotate, and the position
    it names: the start of the second file."""
    generate(WorkloadSpec(seed=4, transactions=300, max_binlog_size=20_000), tmp_path)
    first = _files(tmp_path)[0]
    rotate = read_events((tmp_path / first).read_bytes())[-1]
    assert rotate.type_code == EventType.ROTATE
    segment_bytes = rotate.pos - 4 + 1  # the segment is full with the unit that holds the Rotate
    seg = SegmentCache(tmp_path, segment_bytes=segment_bytes, read_ahead=False).get((first, 4))
    assert seg.end == (_files(tmp_path)[1], 4) and not seg.at_end
    return segment_bytes, seg.end


def test_a_read_that_fails_ahead_fails_at_the_get_that_takes_it(tmp_path):
    """A corrupt event in the next segment (found by the scan ahead), and a bad magic number in
    the next file (found before any scan): the get reports what a plain read reports."""
    segment_bytes, at = _second_file(tmp_path)
    first, second = (tmp_path / _files(tmp_path)[0]), tmp_path / at[0]
    data = second.read_bytes()
    second.write_bytes(data[:300] + bytes([data[300] ^ 0x5A]) + data[301:])
    ahead = SegmentCache(tmp_path, segment_bytes=segment_bytes)
    ahead.get((first.name, 4))
    seg = ahead.get(at)
    assert ahead.ahead_taken == 1
    plain = SegmentCache(tmp_path, segment_bytes=segment_bytes, read_ahead=False).get(at)
    assert (str(seg.error), seg.end, len(seg.units)) == (str(plain.error), plain.end, len(plain.units))
    assert seg.error is not None and seg.error.offset == plain.error.offset

    second.write_bytes(b"\x00bin" + data[4:])
    ahead = SegmentCache(tmp_path, segment_bytes=segment_bytes)
    ahead.get((first.name, 4))
    with pytest.raises(BinlogError, match="bad magic") as raised:
        ahead.get(at)
    assert ahead.ahead_taken == 0  # failed before its scan: dropped, read again by the get
    with pytest.raises(BinlogError, match="bad magic") as plain_raised:
        SegmentCache(tmp_path, segment_bytes=segment_bytes, read_ahead=False).get(at)
    assert str(raised.value) == str(plain_raised.value)


def test_reads_ahead_are_bounded_and_stale_ones_dropped(tmp_path, monkeypatch):
    """Streams at many positions: AHEAD_MAX reads wait at most, no more start (a stream then
    reads its segment itself, the same units), a taken one frees its place, and one left waiting
    AHEAD_STALE seconds is dropped (closed, its scan joined) when the next read would start."""
    generate(WorkloadSpec(seed=6, transactions=400), tmp_path)
    plain = SegmentCache(tmp_path, segment_bytes=1_500, cache_bytes=1 << 30, read_ahead=False)
    starts, pos = [], (_files(tmp_path)[0], 4)
    while True:
        seg = plain.get(pos)
        starts.append(pos)
        if seg.at_end or not seg.units:
            break
        pos = seg.end
    most = SegmentCache.AHEAD_MAX
    assert len(starts) > 2 * most + 8

    def same(got, want) -> bool:
        return [(u.end, u.raw) for u in got.units] == [(u.end, u.raw) for u in want.units]

    cache = SegmentCache(tmp_path, segment_bytes=1_500, cache_bytes=1 << 30)
    # Streams at every other segment: each would read the one after its own ahead.
    for k in range(0, 2 * most + 4, 2):
        cache.get(starts[k])
    assert list(cache._ahead) == [starts[k + 1] for k in range(0, 2 * most, 2)]  # the first ones only
    assert same(cache.get(starts[2 * most + 1]), plain.get(starts[2 * most + 1]))  # refused: read now
    assert cache.ahead_taken == 0
    assert same(cache.get(starts[1]), plain.get(starts[1]))  # taken: its place is free
    assert cache.ahead_taken == 1 and len(cache._ahead) == most - 1
    cache.get(starts[2 * most + 4])
    assert len(cache._ahead) == most and starts[2 * most + 5] in cache._ahead
    waiting = [steps for steps, _ in cache._ahead.values()]
    monkeypatch.setattr(SegmentCache, "AHEAD_STALE", 0.0)
    cache.get(starts[2 * most + 6])
    assert list(cache._ahead) == [starts[2 * most + 7]]  # the stale ones dropped, a new one started
    assert all(steps.gi_frame is None for steps in waiting)  # closed
    assert same(cache.get(starts[3]), plain.get(starts[3]))  # a dropped one: read again
