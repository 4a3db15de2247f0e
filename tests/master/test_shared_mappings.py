"""One mapping per closed binlog file for the whole master (`windows.MappingFiles.view`, issue #42):
every segment of a file, read by any stream at any time, is a view into the same mapping, so its
page-table entries are set once; the table is bounded by files; a file purged, deleted or
replaced under its name is let go, while a segment read before goes on reading the bytes it
scanned (never another file's pages), and the mapping goes with its last view. Mappings and
views are counted, never bytes of memory or time."""

from __future__ import annotations

import gc
import mmap
import os
from pathlib import Path

import pytest

from dumpfilter.errors import PositionError
from dumpfilter.master.read import windows
from dumpfilter.master.read.segments import SegmentCache
from dumpfilter.workload.generator import WorkloadSpec, generate
from tests.master.test_fast_path import _files

SEGMENT_BYTES = 4_000


@pytest.fixture
def made(monkeypatch):
    """Every closed file mapped, however small; each mmap made is recorded."""
    made: list = []
    real = mmap.mmap

    def counting(*args, **kwargs):
        m = real(*args, **kwargs)
        made.append(m)
        return m

    monkeypatch.setattr(windows.Window, "MAP_MIN", 0)
    monkeypatch.setattr(windows.mmap, "mmap", counting)
    return made


def _binlog(directory: Path) -> list[str]:
    generate(WorkloadSpec(seed=42, schemas=3, transactions=500, flavor="mariadb", max_binlog_size=60_000), directory)
    names = _files(directory)
    assert len(names) >= 4
    return names


def _pass(cache: SegmentCache, start: tuple[str, int]) -> list:
    """Every segment from `start` to the binlog's end."""
    segs = []
    while True:
        seg = cache.get(start)
        segs.append(seg)
        if not seg.units or seg.at_end:
            return segs
        start = seg.end


def _mappings_of(directory: Path, deleted: bool) -> list[str]:
    with open("/proc/self/maps") as f:
        return [line for line in f if str(directory) in line and line.rstrip().endswith("(deleted)") == deleted]


def test_every_segment_of_a_file_is_a_view_into_one_mapping(tmp_path, made):
    names = _binlog(tmp_path)
    # No segment kept by its scan and a cache of one: every pass reads every segment again.
    cache = SegmentCache(tmp_path, segment_bytes=SEGMENT_BYTES, cache_bytes=1, index_bytes=0, read_ahead=False)
    passes = [_pass(cache, (names[0], 4)) for _ in range(3)]
    closed = names  # (the generator closes its last file too: every file is mapped)
    assert cache.reads >= 3 * 4 * len(closed)  # several segments per file, each read three times
    assert len(made) == len(closed), "a file was mapped more than once"
    for segs in passes:
        for seg in segs:
            for part in seg.index.parts:
                if part.file in closed:
                    assert windows.shared_view(part.buf)
                    assert part.buf.obj is made[closed.index(part.file)]  # the file's one mapping
    assert cache.mappings.mapped_files == len(closed)


def test_the_table_is_bounded_by_files_and_a_let_go_mapping_lives_with_its_views(tmp_path, made, monkeypatch):
    monkeypatch.setattr(windows.MappingFiles, "SHARED_FILES", 2)
    names = _binlog(tmp_path)
    cache = SegmentCache(tmp_path, segment_bytes=SEGMENT_BYTES, cache_bytes=1 << 30, index_bytes=0, read_ahead=False)
    first = cache.get((names[0], 4))
    want = (tmp_path / names[0]).read_bytes()
    segs = _pass(cache, first.end)
    assert len(cache.mappings.whole_mappings()) <= 2
    assert names[0] not in cache.mappings.whole_mappings()
    part = first.index.parts[0]
    assert bytes(part.buf[: part.used]) == want[part.base : part.base + part.used]  # still readable
    assert cache.mappings.mapped_files == len(names)
    del segs


def test_a_purged_file_s_mapping_serves_its_holders_and_then_goes(tmp_path, made):
    names = _binlog(tmp_path)
    cache = SegmentCache(tmp_path, segment_bytes=SEGMENT_BYTES, read_ahead=False)
    want = (tmp_path / names[0]).read_bytes()
    held = cache.get((names[0], 4))
    later = _pass(cache, held.end)
    (tmp_path / names[0]).unlink()
    cache.forget([names[0]])
    assert names[0] not in cache.mappings.whole_mappings()
    part = held.index.parts[0]
    # The stream holding the segment reads the bytes it scanned (the inode lives while mapped).
    assert bytes(part.buf[: part.used]) == want[part.base : part.base + part.used]
    assert _mappings_of(tmp_path, deleted=True)
    with pytest.raises(PositionError):
        cache.get((names[0], 4))  # a new read of the purged file: 1236, not the old pages
    del held, part, later
    made.clear()
    gc.collect()
    assert _mappings_of(tmp_path, deleted=True) == []  # gone with its last view


def test_a_file_replaced_under_its_name_is_mapped_anew_and_its_old_readers_keep_their_bytes(tmp_path, made):
    names = _binlog(tmp_path)
    cache = SegmentCache(tmp_path, segment_bytes=SEGMENT_BYTES, read_ahead=False)
    old_bytes = (tmp_path / names[0]).read_bytes()
    held = cache.get((names[0], 4))
    old_mapping = held.index.parts[0].buf.obj
    # The file replaced under its name by another binlog's file (a new inode), as a restore would.
    other = tmp_path / "other"
    generate(WorkloadSpec(seed=43, schemas=2, transactions=200, flavor="mariadb", max_binlog_size=60_000), other)
    new = other / _files(other)[0]
    os.replace(new, tmp_path / names[0])
    new_bytes = (tmp_path / names[0]).read_bytes()
    assert new_bytes != old_bytes
    cache.forget([names[0]])  # (the cache drops the name's segments, as retention and a restore do)
    again = cache.get((names[0], 4))
    part = again.index.parts[0]
    assert part.buf.obj is not old_mapping
    assert bytes(part.buf[: part.used]) == new_bytes[part.base : part.base + part.used]
    old = held.index.parts[0]
    assert bytes(old.buf[: old.used]) == old_bytes[old.base : old.base + old.used]
    # Mapping another file looks at the table: the replaced file's first mapping was let go.
    assert list(cache.mappings.whole_mappings()).count(names[0]) == 1


# -- the shared index: a later stream decides from the kept scans and reads only what it sends ----

PAGE = mmap.PAGESIZE


def _present_pages(path: Path) -> tuple[int, int]:
    """(pages present, pages) in this process's page tables for its one whole mapping of `path`
    (/proc/self/maps for the address, /proc/self/pagemap's present bit, 63)."""
    size = path.stat().st_size
    with open("/proc/self/maps") as f:
        lines = [line.split() for line in f if line.rstrip().endswith(str(path))]
    spans = [tuple(int(x, 16) for x in line[0].split("-")) for line in lines if int(line[2], 16) == 0]
    lo, hi = next((lo, hi) for lo, hi in spans if hi - lo >= size)  # the whole file's mapping
    pages = -(-size // PAGE)
    with open("/proc/self/pagemap", "rb") as f:
        f.seek(lo // PAGE * 8)
        entries = f.read(pages * 8)
    present = sum(1 for k in range(pages) if int.from_bytes(entries[8 * k : 8 * k + 8], "little") >> 63)
    return present, pages


@pytest.mark.skipif(not Path("/proc/self/pagemap").exists(), reason="reads /proc/self/pagemap (Linux)")
def test_a_later_stream_skipping_everything_touches_none_of_the_pages_it_skips(tmp_path, made):
    """Streams far apart (the cache holds one segment): the first, keeping everything, scans each
    segment once, and the cache keeps its scan. Its page entries are then cleared; a second
    stream whose rules keep nothing of the binlog decides every unit from the kept scans
    (UnitList.rows_many, the send walk over their records, a heartbeat per skipped stretch) and sets
    entries for almost none of the file's pages. Before one mapping per file (#42), each kept
    segment had its own mapping: there was no file mapping to look at."""
    from dumpfilter.master.model import ChannelSpec, Registration
    from dumpfilter.master.service import DumpService
    from dumpfilter.rules.ruleset import RuleSet

    generate(WorkloadSpec(seed=44, schemas=2, transactions=2_000, flavor="mariadb", ddl_share=0.0,
                          cross_db_share=0.0, max_binlog_size=1 << 30), tmp_path)
    name = _files(tmp_path)[0]
    path = tmp_path / name
    svc = DumpService(tmp_path, segment_bytes=64_000, cache_bytes=1)
    svc.segments.read_ahead = False
    regs = [Registration(server_id=1), Registration(server_id=2, filters=(ChannelSpec(None, RuleSet(do_db=("nosuch",))),))]
    for reg in regs:
        svc.register(reg)

    def stream(server_id: int) -> int:
        sent = 0
        for b in svc.stream(server_id, start=(name, 4)):
            sent += sum(len(part) for part in b.parts)
            if b.caught_up:
                return sent
        return sent

    assert stream(1) >= path.stat().st_size - 4096
    reads = svc.segments.reads
    present, pages = _present_pages(path)
    assert present == pages  # the first pass touched every page
    whole = svc.segments.mappings._whole
    assert len(whole) == 1
    next(iter(whole.values()))[0].madvise(mmap.MADV_DONTNEED)  # its entries cleared (the pages stay cached)
    assert _present_pages(path)[0] == 0
    stream(2)
    assert svc.segments.reads == reads  # every segment from its kept scan
    present, _ = _present_pages(path)
    # The file's first units (FDE, the schemas' CREATEs) are read; fault-around maps up to 16
    # pages around each touch. A stream that read what it skips would set them all.
    assert present <= 64, f"{present} of {pages} pages touched by a stream that sends nothing"
