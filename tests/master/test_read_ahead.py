"""The segment cache's read-ahead: handing out a segment reads the next one on a background
thread, one at a time, never past the end of what is written; a stream that reaches it gets the
same segment it would have read itself, and a read-ahead that fails leaves the error to the
stream that reaches the bad bytes."""

from __future__ import annotations

import time

import pytest

from dumpfilter.errors import DumpFilterError
from dumpfilter.master.segments import SegmentCache
from dumpfilter.workload.generator import WorkloadSpec, generate


def _wait(predicate, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.01)
    return predicate()


def _segments(cache: SegmentCache, name: str) -> list:
    out, pos = [], (name, 4)
    while True:
        seg = cache.get(pos)
        if not seg.units:
            return out
        out.append(seg)
        if seg.at_end or seg.error is not None:
            return out
        pos = seg.end


@pytest.fixture
def binlog(tmp_path):
    paths = generate(WorkloadSpec(seed=5, transactions=1500, ddl_share=0.05), tmp_path)
    return tmp_path, paths[0].name


def test_next_segment_read_in_background(binlog):
    directory, name = binlog
    cache = SegmentCache(directory, segment_bytes=20_000, read_ahead=True)
    first = cache.get((name, 4))
    assert not first.at_end
    # Nobody asked for the second segment: the read-ahead thread reads it, and only it.
    assert _wait(lambda: cache.reads == 2)
    time.sleep(0.1)
    assert cache.reads == 2  # one ahead, not a chain
    second = cache.get(first.end)
    assert cache.hits == 1 and second.start == first.end


def test_same_segments_with_and_without(binlog):
    directory, name = binlog
    plain = _segments(SegmentCache(directory, segment_bytes=30_000), name)
    ahead = _segments(SegmentCache(directory, segment_bytes=30_000, read_ahead=True), name)
    assert len(plain) > 5
    assert [(s.start, s.end, s.at_end, len(s.units)) for s in ahead] == \
        [(s.start, s.end, s.at_end, len(s.units)) for s in plain]
    assert [(u.end, u.size) for s in ahead for u in s.units] == [(u.end, u.size) for s in plain for u in s.units]


def test_no_read_ahead_past_the_end(binlog):
    directory, name = binlog
    cache = SegmentCache(directory, segment_bytes=1 << 30, read_ahead=True)
    seg = cache.get((name, 4))
    assert seg.at_end
    time.sleep(0.1)
    assert cache.reads == 1


def _outcome(cache: SegmentCache, pos):
    try:
        seg = cache.get(pos)
    except DumpFilterError as exc:
        return "raised", type(exc).__name__, str(exc)
    return "segment", len(seg.units), seg.end, str(seg.error) if seg.error is not None else None


@pytest.mark.parametrize("where", ["first event", "middle"])
def test_a_bad_next_segment_reads_the_same_ahead_or_not(binlog, where):
    """A corrupt event in the segment read ahead: the stream that reaches it gets what it would
    have got reading it itself, the units before the bad event with the error, or (when the bad
    event comes first) the error raised in its own thread; the read-ahead swallowed it."""
    directory, name = binlog
    path = directory / name
    data = bytearray(path.read_bytes())
    clean = SegmentCache(directory, segment_bytes=20_000)
    first = clean.get((name, 4))
    second = clean.get(first.end)
    at = second.start[1] + 30 if where == "first event" else (second.start[1] + second.end[1]) // 2
    data[at] ^= 0x40
    path.write_bytes(bytes(data))
    want = _outcome(SegmentCache(directory, segment_bytes=20_000), first.end)
    assert want[0] == ("raised" if where == "first event" else "segment")
    assert want[-1] is not None  # the bad event is found either way
    cache = SegmentCache(directory, segment_bytes=20_000, read_ahead=True)
    assert cache.get((name, 4)).end == first.end
    assert _wait(lambda: not cache._ahead_pending)
    assert _outcome(cache, first.end) == want
