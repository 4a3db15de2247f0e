"""The offline filter's reference path: every unit of a binlog as Events through
TransactionFilter.filter, written by the sink's BinlogWriter, never a byte range decided from
the unit's tables or assembled by the core."""

from __future__ import annotations

import contextlib
import tempfile
from pathlib import Path

from dumpfilter.binlogs.filtering import BinlogFilter, FilterStats
from dumpfilter.binlogs.sinks import FileSink, Sink
from dumpfilter.rules.transaction_filter import TransactionFilter


class _EventsOnly:
    """A sink as the reference path sees it: no writer to assemble bytes into."""

    def __init__(self, sink: Sink):
        self._sink = sink

    def direct_writer(self):
        return None

    def __getattr__(self, name):
        return getattr(self._sink, name)


class ReferenceBinlogFilter(BinlogFilter):
    """BinlogFilter with every unit through TransactionFilter (`_unit`)."""

    def __init__(self, tfilter: TransactionFilter, sink: Sink, **options):
        super().__init__(tfilter, _EventsOnly(sink), **options)


def reference_filter_files(paths, tfilter: TransactionFilter, sink: Sink, *, verify_checksums: bool = True) -> FilterStats:
    """filter_files by the reference path."""
    with contextlib.closing(sink):
        return ReferenceBinlogFilter(tfilter, sink, verify_checksums=verify_checksums).filter_paths(paths)


def reference_filter_bytes(data: bytes, tfilter: TransactionFilter, *,
                           verify_checksums: bool = True) -> tuple[bytes, FilterStats]:
    """filter_bytes (tests/support/filtering.py) by the reference path."""
    with tempfile.TemporaryDirectory(prefix="dumpfilter-ref-") as tmp:
        src, dst = Path(tmp, "in.bin"), Path(tmp, "out.bin")
        src.write_bytes(data)
        stats = reference_filter_files([src], tfilter, FileSink(dst), verify_checksums=verify_checksums)
        return dst.read_bytes(), stats
