"""The segment cache's binlog listing (SegmentCache.file_names): what binlog_listing gives, read
again whenever the directory's entries or its index change, kept only once the directory has
settled (a change within the file system's timestamp tick would otherwise go unseen)."""

from __future__ import annotations

import os
import time

import pytest

from dumpfilter.binlogs import binlog_paths
from dumpfilter.errors import BinlogError
from dumpfilter.master.read import listing
from dumpfilter.master.read.segments import SegmentCache


def _series(directory, names):
    for name in names:
        (directory / name).write_bytes(b"\xfebin")
    (directory / "bin.index").write_text("".join(f"./{n}\n" for n in names))


def _settle(directory, old: int | None = None) -> None:
    """Backdate the directory and its files (to `old`, ns), as if nothing had changed for a while."""
    old = old if old is not None else time.time_ns() - 5_000_000_000
    for p in [*directory.iterdir(), directory]:
        os.utime(p, ns=(old, old))


def _want(directory) -> list[str]:
    return [p.name for p in binlog_paths(directory)]


def test_a_settled_listing_is_kept_and_read_again_after_each_change(tmp_path, monkeypatch):
    _series(tmp_path, ["bin.000001", "bin.000002"])
    _settle(tmp_path)
    cache = SegmentCache(tmp_path)
    listed = []
    real = listing.binlog_listing
    monkeypatch.setattr(listing, "binlog_listing", lambda d: listed.append(1) or real(d))
    assert cache.file_names() == ["bin.000001", "bin.000002"]
    assert cache.file_names() == ["bin.000001", "bin.000002"]
    assert len(listed) == 1, "a settled listing is listed once"

    # The server rotates: a new file, then its name appended to the index in place.
    (tmp_path / "bin.000003").write_bytes(b"\xfebin")
    with open(tmp_path / "bin.index", "a") as f:
        f.write("./bin.000003\n")
    assert cache.file_names() == _want(tmp_path) == ["bin.000001", "bin.000002", "bin.000003"]

    # PURGE: the index rewritten (a new inode) and the file deleted.
    _settle(tmp_path)
    cache.file_names()
    (tmp_path / "bin.index.tmp").write_text("./bin.000002\n./bin.000003\n")
    os.replace(tmp_path / "bin.index.tmp", tmp_path / "bin.index")
    (tmp_path / "bin.000001").unlink()
    assert cache.file_names() == _want(tmp_path) == ["bin.000002", "bin.000003"]

    # A file named by the index removed by hand: the directory changed. The index still names it
    # (a reader that reaches it stops with 1236: "could not open log file"); an offline command
    # (binlog_paths) refuses the whole directory, naming the index's line.
    _settle(tmp_path)
    cache.file_names()
    (tmp_path / "bin.000003").unlink()
    assert cache.file_names() == ["bin.000002", "bin.000003"]
    with pytest.raises(BinlogError, match="line 2 of the binlog index names 'bin.000003'"):
        _want(tmp_path)


def test_a_listing_made_just_after_a_change_is_not_kept(tmp_path, monkeypatch):
    _series(tmp_path, ["bin.000001"])  # mtimes: now
    cache = SegmentCache(tmp_path)
    listed = []
    real = listing.binlog_listing
    monkeypatch.setattr(listing, "binlog_listing", lambda d: listed.append(1) or real(d))
    assert cache.file_names() == ["bin.000001"]
    assert cache.file_names() == ["bin.000001"]
    assert len(listed) == 2, "a racily fresh listing must be made again"


def test_an_index_appended_within_one_timestamp_tick_is_seen(tmp_path):
    # The index's size changes even when its mtime (backdated here) does not.
    _series(tmp_path, ["bin.000001"])
    old = time.time_ns() - 5_000_000_000
    _settle(tmp_path, old)
    cache = SegmentCache(tmp_path)
    assert cache.file_names() == ["bin.000001"]
    (tmp_path / "bin.000002").write_bytes(b"\xfebin")
    with open(tmp_path / "bin.index", "a") as f:
        f.write("./bin.000002\n")
    _settle(tmp_path, old)  # the same mtimes as when listed
    assert cache.file_names() == ["bin.000001", "bin.000002"]
