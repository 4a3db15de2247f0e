"""Opening a path only if it is a regular file, and reading one up to a size cap, for every layer (a
binlog directory's files, a my.cnf, a --schema dump, a command's side files): a FIFO never blocks, a
device is never opened, and anything else is one typed error saying what the path is ("is a FIFO",
"is a directory": RegularFileError), which each caller words for its users."""

from __future__ import annotations

import os
import stat
from typing import BinaryIO

_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISSOCK, "a socket"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"))


# A side file's most: a policy, a topology, a PEM certificate, key or CA bundle, a token or password
# file, a few KB each.
SIDE_FILE_BYTES = 16 << 20


class RegularFileError(ValueError):
    """Not a regular file (`kind`: "a FIFO (named pipe)", "a directory", ...), or a regular file over the cap it
    was read with (`kind` None). The message never names the path: its caller knows what it is for."""

    def __init__(self, message: str, kind: str | None = None):
        super().__init__(message)
        self.kind = kind


def _check(mode: int) -> None:
    if not stat.S_ISREG(mode):
        kind = next((name for test, name in _KINDS if test(mode)), "not a regular file")
        raise RegularFileError(f"is {kind}", kind)


def open_regular(path: str | os.PathLike[str]) -> BinaryIO:
    """A binary reader over `path` if it is a regular file (or a symlink to one), else RegularFileError.
    The type is checked before the open (a device is never opened) and again on the descriptor, opened
    O_NONBLOCK (a FIFO put in its place meanwhile never blocks). stat's and open's own errors are raised
    as they are: OSError, or ValueError for a NUL byte in the name."""
    _check(os.stat(path).st_mode)
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        _check(os.fstat(fd).st_mode)
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_regular(path: str | os.PathLike[str], limit: int) -> bytes:
    """The bytes of the regular file `path` (open_regular), at most `limit` of them: a larger one (or
    one that grows past it while read) is RegularFileError too."""
    with open_regular(path) as handle:
        data = handle.read(limit + 1)
    if len(data) > limit:
        raise RegularFileError(f"is larger than {limit >> 20} MiB")
    return data
