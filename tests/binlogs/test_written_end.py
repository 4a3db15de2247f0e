"""binlogs/written.py: the end of what a live server has written is the end of the file's last
complete event, whatever part of the next one (header or body) is there already."""

from __future__ import annotations

import pytest

from dumpfilter.binlogs import TailingReader
from dumpfilter.binlogs import written
from dumpfilter.binlogs.written import WrittenEnd


def _ends(path):
    return [e.end_pos for _, e in TailingReader(path.parent, path.name)]


@pytest.mark.parametrize("chunk", [written.CHUNK, 64])  # 64: every event larger than a chunk is stepped over
def test_the_written_end_is_the_last_complete_event(binlog_copy, monkeypatch, chunk):
    monkeypatch.setattr(written, "CHUNK", chunk)
    path = binlog_copy / "master-bin.000008"
    data = path.read_bytes()
    ends = _ends(path)
    assert ends[-1] == len(data)
    cut = ends[-4]
    written_end = WrittenEnd()
    for partial in (0, 1, 12, 18, 19, 30):  # none, header bytes, a header and part of the body
        if cut + partial >= ends[-3]:
            continue
        path.write_bytes(data[: cut + partial])
        assert written_end.of(path) == cut, partial
        assert WrittenEnd().of(path) == cut, partial  # the same without what the first one remembered
    with open(path, "ab") as f:  # the server goes on writing: the end moves with each whole event
        f.write(data[cut + 30 : ends[-2] + 5])
    assert written_end.of(path) == ends[-2]
    with open(path, "ab") as f:
        f.write(data[ends[-2] + 5 :])
    assert written_end.of(path) == len(data)


def test_a_file_without_its_magic_yet(tmp_path):
    path = tmp_path / "master-bin.000001"
    path.write_bytes(b"\xfebi")
    assert WrittenEnd().of(path) == 3


def test_a_noted_boundary_is_where_the_hop_starts(binlog_copy):
    """`note` (a segment's read found the units before `boundary`): `of` hops from there, so the
    bytes before it are not read again. Here they are overwritten with zeros, which a hop from
    the start stops at (an "event" of size 0): only a hop from the noted boundary finds the end."""
    path = binlog_copy / "master-bin.000008"
    ends = _ends(path)
    boundary = ends[len(ends) // 2]
    data = bytearray(path.read_bytes())
    data[4:boundary] = bytes(boundary - 4)
    path.write_bytes(data)
    inode = path.stat().st_ino
    assert WrittenEnd().of(path) == 4  # the zeros are nothing complete
    written_end = WrittenEnd()
    written_end.note(path, inode, boundary)
    written_end.note(path, inode, boundary - 1)  # an earlier boundary does not move it back
    assert written_end.of(path) == len(data)
    other = WrittenEnd()
    other.note(path, inode + 1, boundary)  # another file that had this name: not this one's boundary
    assert other.of(path) == 4
    past = WrittenEnd()
    past.note(path, inode, len(data) + 100)  # past the size (a file cut shorter since): not used
    assert past.of(path) == 4


def test_a_stream_that_read_a_file_leaves_its_end_known(binlog_copy):
    """After a master's stream has read a file through the segment cache, the file's written end
    is where the last scan stopped: `end()` hops over nothing already read."""
    from dumpfilter.master.service import DumpService

    service = DumpService(binlog_copy)
    try:
        names = service.segments.file_names()
        last = names[-1]
        pos = (names[0], 4)
        while True:
            seg = service.segments.get(pos)
            if seg.at_end or seg.end == pos:
                break
            pos = seg.end
        noted = service.segments.written._boundary
        assert noted is not None and noted[0] == binlog_copy / last
        assert noted[2] == _ends(binlog_copy / last)[-1] == service.segments.end()[1]
    finally:
        service.shutdown()


def test_callers_at_once_hop_a_file_once(binlog_copy, monkeypatch):
    """Two threads asking for the end of a file not hopped yet (a master's warm-up and its shadow
    pass, as it starts): one hops it, the other takes its end."""
    import threading
    import time

    path = binlog_copy / "master-bin.000008"
    hops: list[int] = []
    real = written.hop_to_end

    def slow(*args: object) -> int:
        hops.append(1)
        time.sleep(0.2)  # (the other caller asks while this one hops)
        return real(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(written, "hop_to_end", slow)
    written_end = WrittenEnd()
    ends: list[int] = []
    callers = [threading.Thread(target=lambda: ends.append(written_end.of(path))) for _ in range(2)]
    for caller in callers:
        caller.start()
    for caller in callers:
        caller.join()
    assert ends == [path.stat().st_size] * 2 and len(hops) == 1, (ends, hops)
