"""FollowingLint (the master's lint at Register) driven over a binlog revealed piecewise, as a
growing binlog shows itself to the lint worker: shared by the lint scan and lint-follows tests."""

from __future__ import annotations

from pathlib import Path

from dumpfilter.binlogs.lint import FollowingLint
from dumpfilter.rules.lint import Linter


def follow_revealed(paths: list[Path], linter: Linter, reveals: list[int], budget: int,
                    chunk: int) -> tuple[list, FollowingLint, int]:
    """FollowingLint over `paths` revealed up to each of `reveals` bytes, then wholly (cut
    anywhere: inside events and units, at file ends), looking on with `budget` until caught up
    each time: (the breaks it handed back, the follower, the bytes its looks read)."""
    sizes = [p.stat().st_size for p in paths]
    following = FollowingLint(linter, chunk_size=chunk)
    found: list = []
    read = 0
    for shown in [*sorted(reveals), sum(sizes)]:
        files, left = [], shown
        for path, size in zip(paths, sizes):
            if left <= 0:
                break
            files.append((path, min(size, left)))
            left -= size
        while True:
            look = following.look(files, budget, keep=10**6)
            found += look.breaks
            read += look.read
            if look.caught_up:
                break
    return found, following, read
