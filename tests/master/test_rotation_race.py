"""A file the segment reader finds ending inside a unit while a newer file exists was cut by a
crash, unless it grew in between: a writer (the server, the --source series) makes the newer file
only once the older one is whole, so the reader looks at the older file's end again before it
gives out the incomplete unit a crash leaves. Here the writer finishes the file between the
reader's two looks (the look at its end and the look for a newer file), as it did under load in
bench soak, where every slave and the replica got a torn transaction at a rotation. Or it appends
whole transactions before it makes the newer file (--source after a restarted primary), which
both readers read before they move on."""

from __future__ import annotations

import pytest

from dumpfilter.binlogs import TailingReader
from dumpfilter.codec import EventType, read_events
from dumpfilter.master.read import segment_reader
from dumpfilter.master.read import windows
from dumpfilter.master.read.segments import SegmentCache
from dumpfilter.workload.generator import WorkloadSpec, generate


def _units(directory, first: str) -> list:
    seg = SegmentCache(directory, read_ahead=False).get((first, 4))
    return [(u.end, bytes(u.raw) if u.raw is not None else None, u.txn.complete) for u in seg.units]


@pytest.mark.parametrize("mapped", [False, True])
def test_a_file_finished_between_the_readers_two_looks_is_read_whole(tmp_path, monkeypatch, mapped):
    generate(WorkloadSpec(seed=6, schemas=2, transactions=200, flavor="mariadb", max_binlog_size=30_000), tmp_path)
    first = sorted(p.name for p in tmp_path.iterdir() if p.suffix[1:].isdigit())[0]
    path = tmp_path / first
    whole = path.read_bytes()
    want = _units(tmp_path, first)
    assert all(complete for _, _, complete in want)
    events = read_events(whole)
    assert events[-1].type_code == EventType.ROTATE
    cut = events[-2].pos  # the start of the last transaction's last event (its XID / COMMIT)
    path.write_bytes(whole[:cut])
    if mapped:
        monkeypatch.setattr(windows.Window, "MAP_MIN", 0)
    real = segment_reader._Opener.next_file
    finished = []

    def next_file(self, current):
        if current == first and not finished:  # the writer completes the file, then the reader looks
            path.write_bytes(whole)
            finished.append(True)
        return real(self, current)

    monkeypatch.setattr(segment_reader._Opener, "next_file", next_file)
    got = _units(tmp_path, first)
    assert finished
    assert got == want


@pytest.mark.parametrize("rotate", [True, False])
@pytest.mark.parametrize("mapped", [False, True])
def test_whole_units_written_between_the_readers_two_looks_are_read(tmp_path, monkeypatch, mapped, rotate):
    """The file ends at a unit boundary at the first look, and the writer appends whole
    transactions, then makes the newer file, before the look for it: --source after a restarted
    primary (the rest of the crashed file, with no Rotate when the crash cut it, then the next
    file). The reader reads them before it moves on (they went unsent: CI of 5306c11d)."""
    generate(WorkloadSpec(seed=6, schemas=2, transactions=200, flavor="mariadb", max_binlog_size=30_000), tmp_path)
    first = sorted(p.name for p in tmp_path.iterdir() if p.suffix[1:].isdigit())[0]
    path = tmp_path / first
    events = read_events(path.read_bytes())
    whole = path.read_bytes() if rotate else path.read_bytes()[:events[-1].pos]
    gtids = [e.pos for e in events if e.type_code == EventType.MARIADB_GTID]
    cut = gtids[-3]  # three whole transactions after the first look
    path.write_bytes(whole)
    want = _units(tmp_path, first)
    path.write_bytes(whole[:cut])
    if mapped:
        monkeypatch.setattr(windows.Window, "MAP_MIN", 0)
    real_segment, real_tail = segment_reader._Opener.next_file, TailingReader.next_file
    finished = []

    def hooked(real):
        def next_file(self, current):
            if current == first and not finished:  # the writer appends, then the reader looks
                path.write_bytes(whole)
                finished.append(True)
            return real(self, current)
        return next_file

    monkeypatch.setattr(segment_reader._Opener, "next_file", hooked(real_segment))
    got = _units(tmp_path, first)
    assert finished
    assert got == want
    # the reference reader, the same way
    read = [(name, event.end_pos) for name, event in TailingReader(tmp_path, first)]
    path.write_bytes(whole[:cut])
    finished.clear()
    monkeypatch.setattr(TailingReader, "next_file", hooked(real_tail))
    seen = [(name, event.end_pos) for name, event in TailingReader(tmp_path, first)]
    assert finished
    assert seen == read
