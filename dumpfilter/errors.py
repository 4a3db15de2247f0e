"""The one exception hierarchy of dumpfilter, and the one mapping from an error to what a user sees.

Every error a user can cause (a bad binlog, rule, topology, script, request) is a DumpFilterError.
It says where it happened -- a file and byte offset, a rule, or a field -- in one line. The CLI
turns every one of them into that line and exit code 2 (`EXIT_CODE`); the gRPC server turns it into
the status code its class names (`grpc_code`, a `grpc.StatusCode` name, so this module needs no
grpc). Anything else escaping is a bug: the CLI and the server report it as internal.

Modules may subclass these for their own errors (the sandbox's, the slave's); the class they
extend decides the exit code and the status.
"""

from __future__ import annotations

import functools

EXIT_CODE = 2  # every DumpFilterError, whatever the command


def one_line(text: str, limit: int) -> str:
    """A text (a statement, a rule) on one line for a message: each run of white space one space,
    cut at `limit` characters."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[:limit - 3] + "..."


class DumpFilterError(Exception):
    """Base of every error dumpfilter raises on bad input or a bad request."""

    grpc_code = "FAILED_PRECONDITION"
    mysql_errno: int | None = None  # the MySQL error a replica would see (the gRPC message carries it)


# -- what the user wrote --------------------------------------------------------------------------

class InvalidArgumentError(DumpFilterError):
    """An option, file or request field that can never be valid; the message names it."""

    grpc_code = "INVALID_ARGUMENT"


class RuleError(InvalidArgumentError):
    """A malformed filter rule or rule-set text; the message names the rule."""


# -- binlogs and positions ------------------------------------------------------------------------

class BinlogError(DumpFilterError):
    """A binlog that cannot be read: names the file and the byte offset of the bad event."""

    grpc_code = "DATA_LOSS"
    mysql_errno = 1236  # ER_MASTER_FATAL_ERROR_READING_BINLOG, as a replica's IO thread shows it

    def __init__(self, message: str, *, path: str | None = None, offset: int | None = None):
        self.message = message
        self.path = path
        self.offset = offset
        where = path or "<binlog>"
        if offset is not None:
            where = f"{where} at byte {offset}"
        super().__init__(f"{where}: {message}")

    def __reduce__(self) -> tuple[object, tuple[object, ...]]:
        """Pickled as made (a Spark task's counts carry a cut back to the driver): its file and offset
        kept, not read again as a message with neither."""
        return functools.partial(type(self), path=self.path, offset=self.offset), (self.message,)


class ChecksumError(BinlogError):
    """An event whose CRC32 does not match its bytes."""


class TruncatedBinlogError(BinlogError):
    """A file that ends in the middle of an event."""


class CutEventError(TruncatedBinlogError):
    """A plain binlog file whose last bytes are a part of an event (the file was cut there): every
    event before them is whole, and `filter` and `lint` read up to them before they tell it."""


class MalformedEventError(BinlogError):
    """An event whose fields contradict its size (a name length past the body, a short post-header,
    a bad length-encoded integer...), found when a lazy decoder reads it. Events do not know their
    file: whoever knows it fills `path` in with `in_file`."""

    def in_file(self, path: str) -> MalformedEventError:
        return self if self.path is not None else MalformedEventError(self.message, path=path, offset=self.offset)


class PositionError(DumpFilterError):
    """A requested binlog position that is purged or past the end (MySQL's error 1236)."""

    grpc_code = "OUT_OF_RANGE"
    mysql_errno = 1236  # ER_MASTER_FATAL_ERROR_READING_BINLOG


# -- the master's requests ------------------------------------------------------------------------

class UnknownSlaveError(DumpFilterError):
    """A request that names a slave the master does not know (or may not see)."""

    grpc_code = "NOT_FOUND"


class AccessDeniedError(DumpFilterError):
    """Credentials that the policy file refuses, or a request outside the caller's rights."""

    grpc_code = "PERMISSION_DENIED"
    mysql_errno = 1045  # ER_ACCESS_DENIED_ERROR


class StreamReplacedError(DumpFilterError):
    """The stream was replaced by a newer one with the same server_id, or the slave unregistered."""

    grpc_code = "ABORTED"


class ShuttingDownError(DumpFilterError):
    """The master is shutting down and accepts no new streams."""

    grpc_code = "UNAVAILABLE"


class ResourceExhaustedError(DumpFilterError):
    """Too many streams or slaves: in all (--max-streams) or for one identity."""

    grpc_code = "RESOURCE_EXHAUSTED"


class ChangeTimeoutError(DumpFilterError):
    """A ChangeFilter whose stream did not reach a transaction boundary before the deadline.
    The change stays queued and still takes effect at the next boundary."""

    grpc_code = "DEADLINE_EXCEEDED"


# -- the machinery around a run -------------------------------------------------------------------

class ExternalError(DumpFilterError):
    """Something outside dumpfilter failed: a server that would not start, a disk that filled."""

    grpc_code = "UNAVAILABLE"


def without_password(url: str | None) -> str:
    """`url` as a message may show it: a mysql://USER:PASSWORD@HOST URL with its password as ***
    (everything between the user's colon and the last @, which urllib would take for it too, so
    that a password holding ':' or '@' never shows in part)."""
    if not url:
        return ""
    scheme, sep, rest = url.partition("://")
    userinfo, at, host = rest.rpartition("@")
    if not sep or not at or ":" not in userinfo:
        return url
    return f"{scheme}://{userinfo.partition(':')[0]}:***@{host}"
