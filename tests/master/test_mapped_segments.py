"""The master maps binlog files the server has closed (their FDE without
LOG_EVENT_BINLOG_IN_USE_F) instead of reading them (`windows.Window`): segments, batches and
stats are the same as when every file is read, a file still in use is read, and a mapping is
really made where it should be."""

from __future__ import annotations

import gzip
import mmap
from pathlib import Path

import pytest

from dumpfilter.codec import group_transactions, read_events
from dumpfilter.master.read import windows
from dumpfilter.master.model import ChannelSpec, Registration
from dumpfilter.master.read.segments import SegmentCache
from dumpfilter.master.service import DumpService
from dumpfilter.rules.ruleset import RuleSet
from dumpfilter.workload.generator import FLAVORS, FORMATS, WorkloadSpec, generate
from tests.master.test_fast_path import _files
from tests.master.test_fast_path import _segments as fast_path_segments

IN_USE_AT = 4 + 17  # the FDE's header flags; its CRC is computed without the in-use bit


@pytest.fixture
def mapping(monkeypatch):
    """Every closed file mapped, however small, and each mapping made counted."""
    made = []
    real = mmap.mmap

    def counting(*args, **kwargs):
        m = real(*args, **kwargs)
        made.append(m)
        return m

    monkeypatch.setattr(windows.Window, "MAP_MIN", 0)
    monkeypatch.setattr(windows.mmap, "mmap", counting)
    return made


def _segments(directory: Path, map_closed: bool, segment_bytes: int) -> list:
    return fast_path_segments(directory, True, segment_bytes, map_closed=map_closed)


def _dump(directory: Path, regs: list[Registration], map_closed: bool, made: list | None = None,
          read_ahead: bool = True, **kwargs) -> dict:
    """Each slave's batches and stats, streamed to its end (the service's segment cache is
    appended to `made`)."""
    svc = DumpService(directory, **kwargs)
    svc.segments.map_closed = map_closed
    svc.segments.read_ahead = read_ahead
    if made is not None:
        made.append(svc.segments)
    for reg in regs:
        svc.register(reg)
    out = {}
    for reg in regs:
        batches = []
        for b in svc.stream(reg.server_id):
            batches.append((b.events, b.position, b.transactions, b.skipped_bytes, b.caught_up, b.gtid_state))
            if b.caught_up:
                break
        out[reg.server_id] = (batches, svc.slaves[reg.server_id].stats)
    return out


REGS = [Registration(server_id=1),
        Registration(server_id=2, filters=(ChannelSpec(None, RuleSet(do_db=("db2",))),)),
        Registration(server_id=3, filters=(ChannelSpec(None, RuleSet(wild_ignore_table=("db1.t1%",))),))]


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("flavor", FLAVORS)
def test_mapped_files_give_the_segments_and_batches_read_files_give(tmp_path, mapping, fmt, flavor):
    generate(WorkloadSpec(seed=7, transactions=400, binlog_format=fmt, flavor=flavor, max_binlog_size=40_000,
                          cross_db_share=0.3, ddl_share=0.05), tmp_path)
    for segment_bytes in (3_000, 1 << 20):
        read = _segments(tmp_path, False, segment_bytes)
        assert not mapping
        assert _segments(tmp_path, True, segment_bytes) == read
        assert mapping, "no file was mapped"
        mapping.clear()
    read = _dump(tmp_path, REGS, False, segment_bytes=5_000, batch_bytes=4_000)
    mapped = _dump(tmp_path, REGS, True, segment_bytes=5_000, batch_bytes=4_000)
    assert mapping
    for sid in read:
        assert mapped[sid][0] == read[sid][0], f"server_id {sid}: batches differ"
        assert mapped[sid][1] == read[sid][1], f"server_id {sid}: stats differ"


def test_a_file_the_server_still_writes_is_read_not_mapped(tmp_path, mapping):
    generate(WorkloadSpec(seed=3, transactions=200), tmp_path)
    path = tmp_path / _files(tmp_path)[0]
    closed = _segments(tmp_path, True, 1 << 20)
    assert mapping
    mapping.clear()
    data = bytearray(path.read_bytes())
    data[IN_USE_AT] |= 1  # LOG_EVENT_BINLOG_IN_USE_F: the server has it open (it may truncate it)
    path.write_bytes(bytes(data))
    in_use = _segments(tmp_path, True, 1 << 20)
    assert not mapping
    # The same units but for the FDE's flag byte.
    assert [row[:5] for row in in_use] == [row[:5] for row in closed]


def test_a_mapped_file_that_grows_is_followed(tmp_path, mapping):
    """A closed-looking file still appended to (a tool writing it): each read maps what is there
    now, and units cut by the end of what is written are taken on the next read."""
    src = tmp_path / "src"
    generate(WorkloadSpec(seed=5, transactions=300), src)
    name = _files(src)[0]
    data = (src / name).read_bytes()
    d = tmp_path / "d"
    d.mkdir()
    path = d / name
    cache = SegmentCache(d, segment_bytes=1 << 20, cache_bytes=1 << 20)
    pos, got = (name, 4), []
    for cut in (1000, 5003, len(data) // 2 + 7, len(data)):
        path.write_bytes(data[:cut])
        while True:
            seg = cache.get(pos)
            got += [u.end for u in seg.units]
            pos = seg.end
            if seg.at_end or not seg.units:
                break
    assert mapping
    whole = SegmentCache(src, segment_bytes=1 << 30, cache_bytes=1 << 30, map_closed=False).get((name, 4))
    assert got == [u.end for u in whole.units]


def test_a_file_system_that_refuses_mmap_is_read(tmp_path, monkeypatch):
    generate(WorkloadSpec(seed=3, transactions=200), tmp_path)
    read = _segments(tmp_path, False, 4_000)

    def refuse(*args, **kwargs):
        raise OSError(19, "No such device")

    monkeypatch.setattr(windows.Window, "MAP_MIN", 0)
    monkeypatch.setattr(windows.mmap, "mmap", refuse)
    assert _segments(tmp_path, True, 4_000) == read


def test_large_closed_files_are_mapped_by_default_and_small_ones_read(tmp_path, monkeypatch):
    made = []
    real = mmap.mmap
    monkeypatch.setattr(windows.mmap, "mmap", lambda *a, **k: made.append(1) or real(*a, **k))
    generate(WorkloadSpec(seed=3, transactions=200), tmp_path)
    assert (tmp_path / _files(tmp_path)[0]).stat().st_size < windows.Window.MAP_MIN
    _segments(tmp_path, True, 1 << 20)
    assert not made
    generate(WorkloadSpec(seed=4, transactions=6_000, max_binlog_size=1 << 30), tmp_path / "big")
    assert (tmp_path / "big" / _files(tmp_path / "big")[0]).stat().st_size >= windows.Window.MAP_MIN
    _segments(tmp_path / "big", True, 1 << 20)
    assert made


@pytest.mark.fixtures
def test_mapped_equals_read_on_every_real_binlog(shared_fixtures, tmp_path, mapping):
    """Real servers' binlogs (MySQL 5.1-9.6, MariaDB 10.5-11.8), mapped from offset 4 and from a
    position that is not page-aligned, give the segments they give when read."""
    files = sorted(p for p in shared_fixtures.rglob("*") if p.is_file() and p.name != "MANIFEST.md")
    assert len(files) == 15
    compared = 0
    for i, path in enumerate(files):
        data = gzip.open(path).read() if path.suffix == ".gz" else path.read_bytes()
        if not list(group_transactions(read_events(data)))[-1].complete:
            continue  # ends inside a transaction: a live master waits for the rest
        directory = tmp_path / f"f{i}"
        directory.mkdir()
        data = bytearray(data)
        data[IN_USE_AT] &= ~1  # closed, so that it is mapped
        (directory / "a.000001").write_bytes(bytes(data))
        for segment_bytes in (700, 1 << 20):
            try:
                assert _segments(directory, True, segment_bytes) == _segments(directory, False, segment_bytes)
            except AssertionError:
                raise AssertionError(f"{path.name}, {segment_bytes}-byte segments: mapped != read") from None
        compared += 1
    assert compared >= 13
    assert mapping


def test_a_plan_reads_bytes_or_read_only_mappings_only(tmp_path):
    """The core scans a part without the GIL and reads it again later: a buffer that could
    change meanwhile (a bytearray, a writable mapping) is refused; a read-only mapping is read
    as the same bytes are."""
    from dumpfilter.codec.scanner import UnitList, Scanner

    generate(WorkloadSpec(seed=3, transactions=50), tmp_path)
    path = tmp_path / _files(tmp_path)[0]
    data = path.read_bytes()
    with open(path, "r+b") as f:
        writable = mmap.mmap(f.fileno(), 0)
        read_only = mmap.mmap(f.fileno(), 0, mmap.MAP_SHARED, mmap.PROT_READ)
    for buf in (bytearray(data), writable):
        with pytest.raises(ValueError, match="read-only"):
            Scanner(str(path)).scan_into(UnitList(), buf, 4, 0, path.name, at_eof=True)
    by_bytes, by_map = UnitList(), UnitList()
    a = Scanner(str(path)).scan_into(by_bytes, data, 4, 0, path.name, at_eof=True)
    b = Scanner(str(path)).scan_into(by_map, read_only, 4, 0, path.name, at_eof=True)
    assert a == b and a.added > 0
    assert [repr(by_bytes.unit(k)) for k in range(len(by_bytes))] == [repr(by_map.unit(k)) for k in range(len(by_map))]
    writable.close()
