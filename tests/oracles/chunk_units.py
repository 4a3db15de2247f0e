"""A chunk's units read the reference way: every event decoded by `BinlogReader` and grouped by
`TransactionGrouper`, what the split's compiled walk is held to."""

from __future__ import annotations

from collections.abc import Iterator
from typing import BinaryIO

from dumpfilter.binlogs import open_binlog
from dumpfilter.codec import BinlogReader, Transaction, TransactionGrouper, read_format_description
from dumpfilter.spark_jobs.tasks.chunks import Chunk


class _Limited:
    """A read-only view of a stream that ends at byte `end` of the file."""

    def __init__(self, stream: BinaryIO, position: int, end: int | None):
        self.stream = stream
        self.left: int | None = None if end is None else end - position

    def read(self, size: int = -1) -> bytes:
        if self.left is None:
            return self.stream.read(size)
        if self.left <= 0:
            return b""
        data = self.stream.read(self.left if size < 0 else min(size, self.left))
        self.left -= len(data)
        return data


def _reader(stream: BinaryIO, chunk: Chunk, verify_checksums: bool) -> BinlogReader:
    if chunk.start <= 4:
        return BinlogReader(_Limited(stream, 0, chunk.end), chunk.path, verify_checksums=verify_checksums)
    _, fmt = read_format_description(stream, chunk.path)
    stream.seek(chunk.start)
    return BinlogReader(_Limited(stream, chunk.start, chunk.end), chunk.path, verify_checksums=verify_checksums,
                        start=chunk.start, fmt=fmt)


def read_units(chunk: Chunk, *, verify_checksums: bool = True) -> Iterator[Transaction]:
    """The units (transactions, statements, control events) of one chunk, in file order; a
    unit the input ends inside comes out with `complete=False`."""
    with open_binlog(chunk.path) as stream:
        reader = _reader(stream, chunk, verify_checksums)
        grouper = TransactionGrouper()
        for event in reader:
            yield from grouper.push(event)
        yield from grouper.flush()
