"""The master hands back the pages of its one mapping of a closed binlog file behind its streams
(issue #60, goal 4: `simulate` on a 250 MB MariaDB MIXED binlog peaked at 460 MB, the whole file
mapped and resident after the streams passed it): once a segment leaves the cache and the
RESIDENT_BYTES budget, its range of the shared mapping is MADV_DONTNEED'd, out of the process's
RSS (the pages stay in the page cache). Checked in /proc/self/smaps: after a stream's pass over a
closed file, the mapping's resident bytes are what the cache and the budget hold, not the file;
a second pass reads the same units again."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from dumpfilter.master.read import windows
from dumpfilter.master.read.segments import SegmentCache
from dumpfilter.workload.generator import WorkloadSpec, generate

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux") or not Path("/proc/self/smaps").is_file(),
                                reason="reads /proc/self/smaps (Linux)")

SEGMENT, CACHE, RESIDENT = 128 << 10, 256 << 10, 256 << 10


def _resident(path: Path) -> int:
    """Rss bytes of every mapping of `path` in this process."""
    total, inside = 0, False
    with open("/proc/self/smaps") as f:
        for line in f:
            first = line.split(None, 1)[0]
            if "-" in first and not first.endswith(":"):  # a mapping's header line
                inside = line.rstrip("\n").endswith(str(path))
            elif inside and first == "Rss:":
                total += int(line.split()[1]) * 1024
    return total


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
        resident = _resident(path)
        # The cache, the resident budget, and a page at each segment's edge (a page two segments share stays).
        assert 0 < resident <= CACHE + RESIDENT + SEGMENT + len(first) * 2 * 4096, (resident, size)
        assert _pass(cache, name) == first  # a later pass maps the pages again
    finally:
        cache.close()
