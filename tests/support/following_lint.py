"""FollowingLint (the master's lint at Register) driven over a binlog revealed piecewise, as a
growing binlog shows itself to the lint worker: shared by the lint scan and lint-follows tests."""

from __future__ import annotations

from pathlib import Path

from dumpfilter.binlogs.lint import FollowingLint, look_together
from dumpfilter.binlogs.scan_index import ScanIndex
from dumpfilter.rules.lint import Linter


def follow_revealed(paths: list[Path], linter: Linter, reveals: list[int], budget: int,
                    chunk: int) -> tuple[list, FollowingLint, int]:
    """FollowingLint over `paths` revealed up to each of `reveals` bytes, then wholly (cut
    anywhere: inside events and units, at file ends), looking on with `budget` until caught up
    each time: (the breaks it handed back, the follower, the bytes its looks read)."""
    [found], [following], read = follow_revealed_together(paths, [linter], reveals, budget, chunk)
    return found, following, read


def follow_revealed_together(paths: list[Path], linters: list[Linter], reveals: list[int], budget: int,
                             chunk: int, index: ScanIndex | None = None) -> tuple[list[list], list[FollowingLint], int]:
    """`follow_revealed` for several Linters whose looks read together (`look_together`, as the
    master's lint worker runs the looks of slaves that registered together), with the worker's
    kept scans (`index`) or without: (each one's breaks, the followers, the bytes their shared
    looks read)."""
    sizes = [p.stat().st_size for p in paths]
    followings = [FollowingLint(linter, chunk_size=chunk, index=index) for linter in linters]
    found: list[list] = [[] for _ in linters]
    read = 0
    before = None
    for shown in [*sorted(reveals), sum(sizes)]:
        files, left = [], shown
        for path, size in zip(paths, sizes):
            if left <= 0:
                break
            files.append((path, min(size, left)))
            left -= size
        while True:
            looks = look_together(followings, files, budget, keep=10**6)
            assert [look.reader for look in looks] == list(range(len(looks)))
            assert len({(look.read, look.caught_up, look.position) for look in looks}) == 1
            for mine, look in zip(found, looks):
                mine += look.breaks
            read += looks[0].read
            if looks[0].caught_up:
                break
            assert looks[0].read or looks[0].position != before, "a look that neither read nor moved on"
            before = looks[0].position
    return found, followings, read
