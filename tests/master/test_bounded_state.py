"""What a long-running `master serve --source` holds stays bounded (issue #32, "a soak that stays
flat"): the segment cache holds at most CACHE_SEGMENTS segments however small they are (streams at
the binlog's end read one per change, a few KB each; bench soak's master held thousands), and the
segments of files retention purges leave the cache with them, so no mapping keeps a deleted file's
pages. Entries and mappings are counted, never bytes or time."""

from __future__ import annotations

import gc
from pathlib import Path

from dumpfilter.master.model import Registration
from dumpfilter.master.upstream.binlog_mirror import BinlogMirror
from dumpfilter.master.upstream.retention import RetentionLimits, SeriesRetention
from dumpfilter.master.read.segments import CACHE_SEGMENTS, SegmentCache
from dumpfilter.master.service import DumpService
from dumpfilter.workload.generator import WorkloadSpec, generate
from tests.master.test_mapped_segments import mapping  # noqa: F401 - the fixture: every closed file mapped


def _walk(cache: SegmentCache, start: tuple[str, int]) -> int:
    """Gets every segment from `start` to the binlog's end; returns how many."""
    n = 0
    while True:
        seg = cache.get(start)
        n += 1
        if not seg.units or seg.at_end:
            return n
        start = seg.end


def _deleted_mappings(directory: Path) -> list[str]:
    """This process's mappings of files of `directory` that were deleted."""
    with open("/proc/self/maps") as f:
        return [line.strip() for line in f if str(directory) in line and line.rstrip().endswith("(deleted)")]


def test_the_cache_holds_at_most_cache_segments_however_small_they_are(tmp_path):
    generate(WorkloadSpec(seed=3, schemas=2, transactions=3 * CACHE_SEGMENTS, flavor="mariadb"), tmp_path)
    # One unit per segment, and bytes enough for them all: only the count bounds the cache.
    cache = SegmentCache(tmp_path, segment_bytes=1, cache_bytes=1 << 40, read_ahead=False)
    first = cache.file_names()[0]
    read = _walk(cache, (first, 4))
    assert read > 2 * CACHE_SEGMENTS
    assert len(cache._cache) == CACHE_SEGMENTS
    assert cache._cached_bytes == sum(seg.size for seg in cache._cache.values())


def test_purged_files_leave_the_cache_and_their_mappings_go(tmp_path, mapping):  # noqa: F811
    directory = tmp_path / "series"
    generate(WorkloadSpec(seed=5, schemas=2, transactions=300, flavor="mariadb", max_binlog_size=20_000), directory)
    mirror = BinlogMirror(directory)
    names = mirror.files()
    assert len(names) >= 4
    service = DumpService(directory, segment_bytes=4_000)
    _walk(service.segments, (names[0], 4))
    cached_files = {start[0] for start in service.segments._cache}
    assert set(names[:-1]) <= cached_files and mapping  # every file read, the closed ones mapped
    service.register(Registration(server_id=9))  # registered, not positioned: holds no file
    retention = SeriesRetention(mirror, service, RetentionLimits(expire_seconds=1), clock=lambda: 2e9)
    purged = retention.apply()
    assert purged == names[:-1]
    left = [start for start in service.segments._cache if start[0] in purged]
    assert left == [], f"segments of purged files still cached: {left[:5]}"
    assert service.segments._cached_bytes == sum(seg.size for seg in service.segments._cache.values())
    mapping.clear()  # the test's own references to the mappings made
    gc.collect()
    assert _deleted_mappings(directory) == []
