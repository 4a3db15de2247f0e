"""`dumpfilter filter` reads its input ahead and writes its output behind, each on a thread of its
own (binlogs/background.py, issue #30 goal 4): on every real binlog of the shared fixtures, and
with chunks small enough that every unit boundary is met, the output bytes and the statistics
are those of the plain loop; errors on those threads reach the caller as the same OSError; the
threads end with the run; the staging file is written through the descriptor that made it."""

from __future__ import annotations

import errno
import os
import threading
from pathlib import Path

import pytest

from dumpfilter.binlogs import filtering
from dumpfilter.binlogs.background import ReadAhead, WriteBehind, pread_full
from dumpfilter.binlogs.filtering import filter_files
from dumpfilter.binlogs.sinks import FileSink
from dumpfilter.errors import DumpFilterError
from dumpfilter.rules.transaction_filter import TransactionFilter
from tests.support.filtering import engine

RULES = [(), (("replicate-do-db", "db1"),), (("replicate-wild-ignore-table", "test.%"),)]


def _fixtures(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file() and not p.name.endswith((".md", ".index")))


def _run(path: Path, out: Path, rules, *, background: bool):
    """(output bytes, stats) or the error's (type, text)."""
    tfilter = TransactionFilter(engine(list(rules), flavor="mariadb"))
    if background:
        fd = os.open(out, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
        sink = FileSink(out, fd=fd, write_behind=True)
    else:
        sink = FileSink(out)
    try:
        stats = filter_files([path], tfilter, sink, read_ahead=background)
    except DumpFilterError as exc:
        return type(exc).__name__, str(exc)
    return out.read_bytes(), stats.as_dict()


@pytest.mark.parametrize("chunk", [97, 4 << 20])
def test_every_fixture_gives_the_plain_loops_bytes(shared_fixtures, tmp_path, monkeypatch, chunk):
    monkeypatch.setattr(filtering, "FAST_CHUNK", chunk)
    before = set(threading.enumerate())  # (other tests' threads may end meanwhile: counted apart)
    compared = 0
    for i, path in enumerate(_fixtures(shared_fixtures)):
        for j, rules in enumerate(RULES):
            plain = _run(path, tmp_path / f"plain-{i}-{j}.bin", rules, background=False)
            threaded = _run(path, tmp_path / f"threaded-{i}-{j}.bin", rules, background=True)
            assert threaded == plain, (path.name, rules)
            compared += isinstance(plain[0], bytes) and len(plain[0]) > 4
    assert compared >= 10  # most fixtures filter (a few are refused, alike on both paths)
    left = [t.name for t in threading.enumerate() if t not in before]
    assert not left, left  # every reader and writer thread ended with its run


def test_a_full_disk_is_the_same_oserror(tmp_path):
    """/dev/full refuses every write with ENOSPC: raised by the next write or by close."""
    behind = WriteBehind(open("/dev/full", "wb", buffering=0), batch=16)
    with pytest.raises(OSError) as err:
        for _ in range(100):  # the thread's error shows up at a later write, or at close
            behind.write(b"x" * 64)
        behind.close()
    assert err.value.errno == errno.ENOSPC
    if not behind.closed:  # a write raised it: close still reports it, once the thread has ended
        with pytest.raises(OSError) as again:
            behind.close()
        assert again.value is err.value
    behind.close()  # then nothing more
    assert behind.closed


def test_writes_keep_their_order_and_copy_what_may_change(tmp_path):
    path = tmp_path / "out.bin"
    behind = WriteBehind(open(path, "wb", buffering=0), batch=10)
    reused = bytearray(b"abc")
    behind.write(reused)
    reused[:] = b"XYZ"  # the caller's buffer reused at once: what was written stays
    for piece in (b"0123456789", memoryview(b"defgh")[1:3], reused, b"!" * 3):
        behind.write(piece)
    behind.close()
    assert path.read_bytes() == b"abc0123456789ef" + b"XYZ" + b"!!!"


def test_a_batch_of_more_pieces_than_one_writev_takes(tmp_path):
    path = tmp_path / "out.bin"
    pieces = [bytes([i % 251]) * (i % 7) for i in range(5000)]  # empty ones too
    behind = WriteBehind(open(path, "wb", buffering=0), batch=1 << 20)
    for piece in pieces:
        behind.write(piece)
    behind.close()
    assert path.read_bytes() == b"".join(pieces)


def test_read_ahead_reads_in_order_and_reports_errors(tmp_path):
    data = bytes(range(256)) * 40
    path = tmp_path / "in.bin"
    path.write_bytes(data)
    with open(path, "rb") as f:
        ahead = ReadAhead(f.fileno())
        ahead.start(4, 100)
        ahead.start(10_000, 1000)  # past the end of the file: what is there
        assert ahead.take() == data[4:104]
        assert ahead.take() == data[10_000:]
        ahead.close()
    assert pread_full(os.open(path, os.O_RDONLY), len(data) + 5, 0) == data
    fd = os.open(tmp_path, os.O_RDONLY)  # a directory: EISDIR on the thread, raised by take()
    try:
        ahead = ReadAhead(fd)
        ahead.start(0, 10)
        with pytest.raises(OSError) as err:
            ahead.take()
        assert err.value.errno == errno.EISDIR
        ahead.close()
    finally:
        os.close(fd)


def test_file_sink_writes_through_its_descriptor(shared_fixtures, tmp_path):
    """Given a descriptor, the sink writes there (the staging file is never opened again and
    truncated) and closes it, also when no event ever came."""
    staged, named = tmp_path / "staged.bin", tmp_path / "named.bin"
    fd = os.open(staged, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
    [source] = shared_fixtures.rglob("mariadb-bin.000001")
    stats = filter_files([source], TransactionFilter(engine([], flavor="mariadb")), FileSink(named, fd=fd))
    assert staged.read_bytes() == source.read_bytes() and stats.files_in == 1
    assert not named.exists()
    with pytest.raises(OSError):
        os.fstat(fd)  # closed with the sink
    fd = os.open(tmp_path / "never.bin", os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
    FileSink(tmp_path / "never.bin", fd=fd).close()
    with pytest.raises(OSError):
        os.fstat(fd)
