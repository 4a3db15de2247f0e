"""A file the segment reader finds ending inside a unit while a newer file exists was cut by a
crash, unless it grew in between: a writer (the server, the --source series) makes the newer file
only once the older one is whole, so the reader looks at the older file's end again before it
gives out the incomplete unit a crash leaves. Here the writer finishes the file between the
reader's two looks (the look at its end and the look for a newer file), as it did under load in
bench soak, where every slave and the replica got a torn transaction at a rotation."""

from __future__ import annotations

import pytest

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
