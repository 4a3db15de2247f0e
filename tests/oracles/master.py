"""The master's reference reader: segments read an Event per event through TailingReader and
TransactionGrouper, with no core UnitList. A stream over them goes unit by unit (every unit through
TransactionFilter: `SlaveStream._fast_runs` finds no index to run on), the reference the core's
runs are compared against."""

from __future__ import annotations

from dumpfilter.codec import TransactionGrouper
from dumpfilter.errors import BinlogError, PositionError
from dumpfilter.binlogs import TailingReader
from dumpfilter.master.read.segments import SegmentCache
from dumpfilter.master.read.units import Pos, Segment, Unit, unit_end
from dumpfilter.master.service import DumpService


class _Reader(TailingReader):
    """A TailingReader for which an event partly written at the end of the last file is not yet
    written (as for the master's SegmentReader), not a truncated file."""

    def open_at(self, f, path, start):
        splitter = super().open_at(f, path, start)
        splitter.close = lambda: None
        return splitter


class ReferenceSegmentCache(SegmentCache):
    """A SegmentCache whose segments are read by the reference reader (no read ahead)."""

    def __init__(self, directory, **options):
        options["read_ahead"] = False
        super().__init__(directory, **options)

    def _reader(self, start: Pos):
        return self._read_reference(start)
        yield  # a generator that returns the segment at once, as SegmentReader.steps returns it

    def _read_reference(self, start: Pos) -> Segment:
        file, pos = start
        reader = _Reader(self.directory, file, pos, verify_checksums=self.verify_checksums)
        grouper = TransactionGrouper()
        units: list[Unit] = []
        size = 0
        end = start
        at_end = False
        error = None
        try:
            for name, event in reader:
                for txn in grouper.push(event):
                    units.append(Unit(txn, name, unit_end(name, txn.events[-1])))
                    end = units[-1].end
                    size += txn.size
                if size >= self.segment_bytes and grouper.current is None:
                    break
            else:  # the reader reached what is written so far
                at_end = True
        except PositionError:
            if units:  # a later file vanished under us: serve what we have
                at_end = True
            else:
                raise
        except BinlogError as exc:
            if not units:
                raise
            error = exc
        return Segment(start, units, end, at_end, error)


def reference_service(binlog_dir, *, segment_bytes: int | None = None, cache_bytes: int | None = None,
                      verify_checksums: bool = True, **options) -> DumpService:
    """A DumpService that reads through the reference reader: every unit of every stream through
    TransactionFilter."""
    sizes = {k: v for k, v in (("segment_bytes", segment_bytes), ("cache_bytes", cache_bytes)) if v is not None}
    cache = ReferenceSegmentCache(binlog_dir, verify_checksums=verify_checksums, **sizes)
    return DumpService(binlog_dir, segments=cache, verify_checksums=verify_checksums, **sizes, **options)
