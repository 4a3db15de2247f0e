"""The file-system edge's checks of a binlog directory (dumpfilter.binlogs.files): only regular
files are opened, never waiting on a FIFO; each index line stands for a name in the index's own
directory; bad lines, and a process out of file descriptors, are one typed line."""

from __future__ import annotations

import os
import resource
import socket

import pytest

from dumpfilter.binlogs import binlog_paths, read_index
from dumpfilter.binlogs.files import binlog_listing, index_listing, open_regular
from dumpfilter.errors import BinlogError, ExternalError, PositionError


def test_only_regular_files_are_opened(tmp_path):
    os.mkfifo(tmp_path / "fifo")  # no writer: a plain open would wait for one for ever
    (tmp_path / "dir").mkdir()
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(tmp_path / "sock"))
    os.symlink("/dev/null", tmp_path / "device")
    os.symlink("loop", tmp_path / "loop")
    (tmp_path / "plain").write_bytes(b"\xfebin")
    os.symlink(tmp_path / "plain", tmp_path / "link")
    for name, kind in (("fifo", r"is a FIFO \(named pipe\)"), ("dir", "is a directory"), ("sock", "is a socket"),
                       ("device", "is a character device"), ("loop", "too many levels of symbolic links"),
                       ("missing", "no such file")):
        with pytest.raises(BinlogError, match=kind) as info:
            open_regular(tmp_path / name)
        assert str(info.value).startswith(f"{tmp_path / name}: ")
    with open_regular(tmp_path / "link") as f:  # a symlink to a regular file is followed
        assert f.read() == b"\xfebin"


def test_a_process_out_of_file_descriptors_gets_a_line_it_may_retry(tmp_path):
    (tmp_path / "plain").write_bytes(b"\xfebin")
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    held = []
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (len(os.listdir("/proc/self/fd")) + 8, hard))
        with pytest.raises(ExternalError, match="too many open files") as info:
            while True:
                held.append(open_regular(tmp_path / "plain"))
        assert info.value.grpc_code == "UNAVAILABLE" and len(held) >= 1
    finally:
        for f in held:
            f.close()
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_each_index_line_names_a_file_of_the_index_directory(tmp_path):
    (tmp_path / "b.index").write_bytes(b"./b.000001\r\n\r\nb.000002\n  /var/lib/mysql/b.000003  \n"
                                       b"../../etc/b.000004\r\n")
    assert read_index(tmp_path / "b.index") == [tmp_path / f"b.00000{n}" for n in range(1, 5)]


FIRST = b"./b.000001\n"


@pytest.mark.parametrize("line, offset, says", [
    (b"./b.\xff0002", len(FIRST) + 4, "line 2 of the binlog index is not UTF-8"),  # the bad byte
    (b"./b.00\x000002", len(FIRST), "line 2 of the binlog index names no binlog file"),  # the line
    (b"/etc/", len(FIRST), "line 2 of the binlog index names no binlog file"),
    (b"..", len(FIRST), "line 2 of the binlog index names no binlog file"),
])
def test_a_bad_index_line_ends_the_listing_with_its_line_and_offset(tmp_path, line, offset, says):
    (tmp_path / "b.000001").write_bytes(b"\xfebin")
    (tmp_path / "b.000003").write_bytes(b"\xfebin")
    (tmp_path / "b.index").write_bytes(FIRST + line + b"\n./b.000003\n")
    listing = index_listing(tmp_path / "b.index")
    assert list(listing) == ["b.000001"]
    assert str(listing.problem).startswith(f"{tmp_path / 'b.index'} at byte {offset}: {says}")
    with pytest.raises(BinlogError, match=says):  # offline tools: the whole directory is refused
        binlog_paths(tmp_path)
    # A reader at the end of the last good file meets the line: the server moved past that file.
    with pytest.raises(BinlogError, match=says):
        listing.next_after(tmp_path, "b.000001")


def test_a_missing_file_named_by_the_index_is_listed_and_refused_when_reached(tmp_path):
    (tmp_path / "b.000001").write_bytes(b"\xfebin")
    (tmp_path / "b.index").write_bytes(b"./b.000001\n./b.000002\n")
    listing = binlog_listing(tmp_path)
    assert list(listing) == ["b.000001", "b.000002"] and listing.problem is None
    # Offline, the whole directory is refused, naming the index and its line (a server will not
    # start on it either); a reader (the master) meets it only when it reaches the file.
    with pytest.raises(BinlogError, match=r"b\.index at byte 11: line 2 of the binlog index names 'b\.000002'"):
        binlog_paths(tmp_path)
    with pytest.raises(PositionError, match="'b.000002' is named by the binlog index .* does not exist"):
        listing.next_after(tmp_path, "b.000001")
    assert not listing.not_yet_indexed("b.000002")
    assert listing.not_yet_indexed("b.000003")  # past the index: a Rotate's file not indexed yet


def test_an_index_that_is_not_a_regular_file_or_too_large(tmp_path):
    os.mkfifo(tmp_path / "b.index")
    assert "is a FIFO (named pipe), not an index file" in str(binlog_listing(tmp_path).problem)
    os.unlink(tmp_path / "b.index")
    with open(tmp_path / "b.index", "wb") as f:
        f.truncate((16 << 20) + 1)  # sparse
    assert "index file is larger than 16 MiB" in str(binlog_listing(tmp_path).problem)


def test_a_file_created_and_indexed_after_the_callers_look_is_not_absent(tmp_path):
    """A reader looks for the next file (absent: the server, or --source's mirror, has not
    created it yet), then reads the listing, which by then names it: the file was created before
    it was indexed, so it is there now. It was reported as 'named by the index but does not
    exist' (1236), which stopped a slave right after a rotation (bench soak, about one run in four)."""
    (tmp_path / "b.000001").write_bytes(b"\xfebin")
    (tmp_path / "b.index").write_text("./b.000001\n")
    missing = tmp_path / "b.000002"
    assert not missing.exists()                       # the caller's look
    missing.write_bytes(b"\xfebin")                   # the mirror creates it, then indexes it
    (tmp_path / "b.index").write_text("./b.000001\n./b.000002\n")
    binlog_listing(tmp_path).check_absent(tmp_path, "b.000002")   # there now: not absent
    missing.unlink()                                  # really gone while the index names it: 1236
    with pytest.raises(PositionError, match="named by the binlog index"):
        binlog_listing(tmp_path).check_absent(tmp_path, "b.000002")
