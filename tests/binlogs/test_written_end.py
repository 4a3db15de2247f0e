"""binlogs/written.py: the end of what a live server has written is the end of the file's last
complete event, whatever part of the next one (header or body) is there already."""

from __future__ import annotations

import pytest

from dumpfilter.binlogs import TailingReader
from dumpfilter.binlogs import written
from dumpfilter.binlogs.written import WrittenEnd


def _ends(path):
    return [e.end_pos for _, e in TailingReader(path.parent, path.name, follow=False)]


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
