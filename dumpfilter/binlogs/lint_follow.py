"""Lint of a binlog that grows (`binlogs.lint.FollowingLint`, the master's lint at Register): a
span of a file at a time, from where the last span's whole units ended, with `lint_scan`'s compiled
scan and feed (several rule sets at one place read a span together)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from dumpfilter.binlogs.lint_scan import LintScanStats, _feed, _feed_kept, _Lint
from dumpfilter.binlogs.scan_index import ScanIndex
from dumpfilter.codec.format_description import FormatDescription
from dumpfilter.codec.scanner import Scanner
from dumpfilter.rules.lint import Linter


class FollowScan:
    """`lint_scan` for a binlog that grows (`binlogs.lint.FollowingLint`, the master's lint at
    Register): one Linter fed, a span of a file at a time, from where the last span's whole units
    ended, with the format in force there. The span's units are found by the same compiled scan,
    and only those that may matter are decoded and fed. Several FollowScans at the same place read
    a span together (`follow_read`): one read and one scan for all of them."""

    def __init__(self, linter: Linter, verify_checksums: bool = True, index: ScanIndex | None = None):
        self.lint = _Lint(linter)
        self.verify_checksums = verify_checksums
        self.index = index  # whole closed files' scans, kept for every reader from their start
        self.stats = LintScanStats()
        # (the Linter's breaks before this look, how many of the look's to keep): the rest are
        # counted in `dropped` and let go after each buffer, so that a look over a binlog where
        # most units break holds `keep` breaks, not one per unit (FollowingLint.look)
        self.cap: tuple[int, int] | None = None
        self.dropped = 0

    def _trim(self) -> None:
        if self.cap is None:
            return
        breaks, (before, keep) = self.lint.linter.breaks, self.cap
        extra = len(breaks) - before - keep
        if extra > 0:  # between units: a unit's own later statements read its break (Linter.feed)
            self.dropped += extra
            del breaks[before + keep:]

    def read(self, path: Path, start: int, size: int, fmt: FormatDescription | None, budget: int, chunk: int,
             final: bool) -> tuple[int, bool, int, FormatDescription | None]:
        """`follow_read` for this one."""
        return follow_read([self], path, start, size, fmt, budget, chunk, final)


def follow_read(scans: Sequence[FollowScan], path: Path, start: int, size: int, fmt: FormatDescription | None,
                budget: int, chunk: int, final: bool) -> tuple[int, bool, int, FormatDescription | None]:
    """Feeds each FollowScan's Linter the whole units of `path` from `start` up to `size`, in reads
    of `chunk` bytes, stopping after the read that passes `budget` once a unit was fed (`_feed`):
    one read and one compiled scan for all of them. `final`: the file is left behind (a later one
    exists): what it ends inside is fed as `lint_files` does, a partial event is an error.
    Returns (bytes read, whether they reached `size`, the end of the last whole unit, the format
    in force there)."""
    stats = LintScanStats()

    def trim() -> None:
        for each in scans:
            each._trim()

    lead = scans[0]
    try:
        made = lead.index.scans if lead.index is not None else 0
        kept = (lead.index.get(path, size, lead.verify_checksums, final, chunk)
                if lead.index is not None and start == 0 else None)
        if kept is not None:
            if lead.index is not None and lead.index.scans > made:  # scanned now, out of the mapping
                stats.bytes_scanned += size
            return _feed_kept(path, kept, [scan.lint for scan in scans], budget, final, stats, trim)
        return _feed(path, [scan.lint for scan in scans], Scanner(str(path), verify_checksums=lead.verify_checksums),
                     start, size, fmt, budget, chunk, final, stats, trim)
    finally:
        for each in scans:
            each.stats.scans += 1 if stats.bytes_scanned else 0
            each.stats.units += stats.units
            each.stats.decoded += stats.decoded
            each.stats.bytes_scanned += stats.bytes_scanned
