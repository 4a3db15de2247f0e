"""The one exception hierarchy of dumpfilter. Adapters map it to exit codes and gRPC status codes.

Every error says where it happened: a file and byte offset, a rule, or a field.
"""

from __future__ import annotations


class DumpFilterError(Exception):
    """Base of every error dumpfilter raises on bad input or a bad request."""


class BinlogError(DumpFilterError):
    """A binlog that cannot be read: names the file and the byte offset of the bad event."""

    def __init__(self, message: str, *, path: str | None = None, offset: int | None = None):
        self.message = message
        self.path = path
        self.offset = offset
        where = path or "<binlog>"
        if offset is not None:
            where = f"{where} at byte {offset}"
        super().__init__(f"{where}: {message}")


class ChecksumError(BinlogError):
    """An event whose CRC32 does not match its bytes."""


class TruncatedBinlogError(BinlogError):
    """A file that ends in the middle of an event."""


class MalformedEventError(BinlogError):
    """An event whose fields contradict its size (a name length past the body, a short post-header,
    a bad length-encoded integer...), found when a lazy decoder reads it. Events do not know their
    file: whoever knows it fills `path` in with `in_file`."""

    def in_file(self, path: str) -> "MalformedEventError":
        return self if self.path is not None else MalformedEventError(self.message, path=path, offset=self.offset)


class RuleError(DumpFilterError):
    """A malformed filter rule or rule-set text; the message names the rule."""


class PositionError(DumpFilterError):
    """A requested binlog position that is purged or past the end (MySQL's error 1236)."""


class UnknownSlaveError(DumpFilterError):
    """A request that names a slave the master does not know."""
