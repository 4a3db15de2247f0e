"""The master hands back the pages of its one mapping of a closed binlog file behind its streams
(issue #60, goal 4: `simulate` on a 250 MB MariaDB MIXED binlog peaked at 460 MB, the whole file
mapped and resident after the streams passed it): once a segment leaves the cache and the
RESIDENT_BYTES budget, its range of the shared mapping is MADV_DONTNEED'd, out of the process's
RSS (the pages stay in the page cache). Checked in /proc/self/smaps: after a stream's pass over a
closed file, the mapping's resident bytes are what the cache and the budget hold, not the file;
a second pass reads the same units again."""

from __future__ import annotations



from dumpfilter.master.read import windows
from dumpfilter.master.read.segments import SegmentCache
from dumpfilter.workload.generator import WorkloadSpec, generate
from tests.support.smaps import needs_smaps, resident

pytestmark = needs_smaps

SEGMENT, CACHE, RESIDENT = 128 << 10, 256 << 10, 256 << 10


def _pass(cache: SegmentCache, name: str) -> list[tuple[object, int]]:
    """A stream's pass over file `name`, segment by segment: (start, units) of each."""
    seen, pos = [], (name, 4)
    while pos[0] == name:
        seg = cache.get(pos)
        if not seg.units:
            break
        seen.append((seg.start, len(seg.units)))
        cache.done_with(seg)
        pos = seg.end
    return seen


def test_a_streams_pass_leaves_no_more_of_the_mapping_resident_than_the_cache_holds(tmp_path, monkeypatch):
    binlogs = tmp_path / "binlogs"
    generate(WorkloadSpec(seed=7, schemas=3, transactions=12000, flavor="mariadb", max_binlog_size=4 << 20), binlogs)
    name = sorted(p.name for p in binlogs.glob("*.0*"))[0]
    path = binlogs / name
    size = path.stat().st_size
    assert size > 4 * (CACHE + RESIDENT + SEGMENT)
    monkeypatch.setattr(windows.Window, "MAP_MIN", 0)  # every segment of the closed file a view of its mapping
    cache = SegmentCache(binlogs, segment_bytes=SEGMENT, cache_bytes=CACHE, resident_bytes=RESIDENT, read_ahead=False)
    try:
        first = _pass(cache, name)
        assert len(first) > 12
        assert cache.mappings.whole_mappings()[name] == size  # one shared mapping of the file
        held = resident(path)
        # The cache, the resident budget, and a page at each segment's edge (a page two segments share stays).
        assert 0 < held <= CACHE + RESIDENT + SEGMENT + len(first) * 2 * 4096, (held, size)
        assert _pass(cache, name) == first  # a later pass maps the pages again
    finally:
        cache.close()
