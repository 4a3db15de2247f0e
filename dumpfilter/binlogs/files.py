"""Opening binlog files and reading or writing `<base>.index` files: the one place that opens a
file of a binlog directory for reading, so that only regular files are read (a FIFO, device,
socket or directory is one line, never a blocked open) and an index line never leads outside
the directory."""

from __future__ import annotations

import errno
import gzip
import os
import re
import stat
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, cast

from dumpfilter.codec import BinlogReader, Event, EventType, FormatDescription, read_format_description
from dumpfilter.errors import BinlogError, DumpFilterError, ExternalError, PositionError

_NUMBERED = re.compile(r"^(?P<base>.+)\.(?P<num>\d{6,})$")

# O_NONBLOCK: opening a FIFO for reading otherwise waits for a writer, for ever. Regular files
# ignore the flag. Symbolic links are followed, as MySQL and MariaDB follow them (an operator may
# move old binlogs to another disk and link them back), but only to a regular file.
_OPEN_FLAGS = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
MAX_INDEX_BYTES = 16 << 20  # an index of 16 MiB names ~600 000 files

_NOT_REGULAR = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISSOCK, "a socket"),
                (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"))


# Flags of the FDE's common header: set while the server writes the file, cleared in place when
# it closes it (the FDE's CRC is computed without it, so the clearing needs no new CRC).
_FDE_FLAGS_AT = 4 + 17
_BINLOG_IN_USE_F = 0x1


def closed_by_server(fd: int) -> bool:
    """Whether the file's FDE is there and says the server closed the file: it is neither
    written nor truncated again (a crash recovery truncates only the file left in use), so a
    mapping of it never faults (SIGBUS) but on a truncation by hand."""
    head = os.pread(fd, _FDE_FLAGS_AT + 2, 0)
    return (len(head) == _FDE_FLAGS_AT + 2 and head[8] == EventType.FORMAT_DESCRIPTION
            and not head[_FDE_FLAGS_AT] & _BINLOG_IN_USE_F)


def _not_regular(mode: int, path: str | os.PathLike[str], what: str) -> BinlogError:
    kind = next((name for test, name in _NOT_REGULAR if test(mode)), "not a regular file")
    return BinlogError(f"is {kind}, not {what}", path=str(path))


def file_error(exc: OSError, path: str | os.PathLike[str], what: str = "a binlog file") -> DumpFilterError:
    """One line for an OSError met opening, listing or reading a file of a binlog directory: a
    BinlogError (the stream that meets it stops, as MySQL's dump thread does with error 1236),
    but for a process out of file descriptors, which a retry may get past."""
    name = str(path)
    code = exc.errno
    if code in (errno.EMFILE, errno.ENFILE):
        return ExternalError(f"{name}: cannot open: too many open files (the process's limit: ulimit -n)")
    if code == errno.ENOENT:
        return BinlogError("no such file", path=name)
    if code in (errno.EACCES, errno.EPERM):
        return BinlogError("permission denied", path=name)
    if code == errno.ELOOP:
        return BinlogError("too many levels of symbolic links (a symlink loop)", path=name)
    if code == errno.EISDIR:
        return BinlogError(f"is a directory, not {what}", path=name)
    if code == errno.ENXIO:
        return BinlogError(f"is a socket or a device, not {what}", path=name)
    return BinlogError(f"cannot read: {exc.strerror or exc}", path=name)


def open_regular(path: str | os.PathLike[str], what: str = "a binlog file") -> BinaryIO:
    """A buffered binary reader over `path` if it is a regular file (or a symlink to one), else a
    one-line error (`file_error`). A device is never opened (its type is checked first) and a
    FIFO never blocks (O_NONBLOCK, and the type checked again on the open descriptor)."""
    try:
        st = os.stat(path)
        if not stat.S_ISREG(st.st_mode):
            raise _not_regular(st.st_mode, path, what)
        fd = os.open(path, _OPEN_FLAGS)
    except OSError as exc:
        raise file_error(exc, path, what) from None
    except ValueError:  # a NUL byte in the name
        raise BinlogError(f"is not a file name ({what})", path=repr(str(path))[:200]) from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):  # replaced between the stat and the open
            raise _not_regular(st.st_mode, path, what)
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def open_binlog(path: str | os.PathLike[str]) -> BinaryIO:
    """A binary stream over a binlog file; `.gz` files are decompressed on the fly."""
    path = Path(path)
    f = open_regular(path)
    if path.suffix != ".gz":
        return f
    stream = gzip.GzipFile(fileobj=f, mode="rb")
    # closed with the GzipFile, as when gzip opens the file itself (typeshed types the attribute as
    # the FileIO gzip opens; any binary file closes the same way)
    stream.myfileobj = f  # type: ignore[assignment]
    return cast(BinaryIO, stream)  # a binary reader; typeshed's GzipFile is not a typing.BinaryIO


def binlog_format(path: str | os.PathLike[str]) -> FormatDescription:
    """The format a binlog file's Format_description sets (one line where the file cannot be
    opened or does not begin with one)."""
    with open_binlog(path) as f:
        return read_format_description(f, str(path))[1]


def file_format(path: str | os.PathLike[str]) -> FormatDescription | None:
    """`binlog_format`, or None where the file cannot be opened or does not begin with a
    Format_description."""
    try:
        return binlog_format(path)
    except (DumpFilterError, OSError):
        return None


@dataclass
class BinlogFile:
    """One binlog file on disk, iterable as events."""

    path: Path
    verify_checksums: bool = True

    def __iter__(self) -> Iterator[Event]:
        with open_binlog(self.path) as stream:
            try:
                yield from BinlogReader(stream, str(self.path), verify_checksums=self.verify_checksums)
            except (OSError, EOFError, gzip.BadGzipFile) as exc:
                raise BinlogError(f"read error: {exc}", path=str(self.path)) from None

    @property
    def name(self) -> str:
        return self.path.name


class Listing(list[str]):
    """The names of a binlog directory's files in order, those its index names but that are
    missing included (a reader that reaches one stops with error 1236, as MySQL's dump thread
    does: "could not open log file"). `problem`, when set, is why the listing stops early (the
    index's first bad line, an unreadable index or directory): a reader that needs a file past
    the last name meets it."""

    def __init__(self, names: Iterable[str] = (), problem: DumpFilterError | None = None):
        super().__init__(names)
        self.problem = problem

    def not_yet_indexed(self, file: str) -> bool:
        """MariaDB creates the next binlog and writes its FDE before it adds it to the index
        (MYSQL_BIN_LOG::open): a file past the index's last one is not written yet for a reader
        that followed a Rotate there, unless the index went bad there (then that is the error)."""
        if not self or file in self or file <= self[-1]:
            return False
        if self.problem is not None:
            raise self.problem
        return True

    def check_absent(self, directory: Path, file: str) -> None:
        """For a file that does not exist: returns if a server may still create it (a Rotate
        named it, the index does not yet), else raises PositionError (MySQL's 1236): the index
        names it, or a later file exists (it was purged). The caller looked for the file before
        this listing was read: a file the server (or `--source`'s mirror) created and indexed
        meanwhile is there now, not absent (files are created before they are indexed)."""
        if file in self:
            if os.path.lexists(directory / file):
                return
            raise PositionError(f"binlog file '{file}' is named by the binlog index of {directory} but does not "
                                "exist (deleted by hand?): could not open log file")
        if self and self[-1] > file:
            raise PositionError(f"binlog file '{file}' is not in {directory} (purged)")
        if self.problem is not None:  # past the last good name: the index went bad there
            raise self.problem

    def next_after(self, directory: Path, current: str) -> str | None:
        """The file after `current` in the listing (None when `current` is the last, or not
        listed); raises when the index goes bad right after it, or names a missing file next."""
        if current not in self:
            return None
        i = self.index(current)
        if i + 1 == len(self):
            if self.problem is not None:
                raise self.problem
            return None
        name = self[i + 1]
        if not os.path.lexists(directory / name):
            self.check_absent(directory, name)
        return name


def _read_index_bytes(index_path: Path) -> bytes:
    with open_regular(index_path, "an index file") as f:
        data = f.read(MAX_INDEX_BYTES + 1)
    if len(data) > MAX_INDEX_BYTES:
        raise BinlogError(f"index file is larger than {MAX_INDEX_BYTES >> 20} MiB", path=str(index_path))
    return data


def index_listing(index_path: str | os.PathLike[str]) -> Listing:
    """The files an index names, each in the index's directory, up to its first bad line (its
    `problem`). Each line stands for the file of that name in the index's directory, whatever
    directory it names (MySQL writes `./name` or an absolute path): a copied or moved binlog
    directory serves its own files, and no index line leads a reader outside its directory.
    Lines may end in CRLF; blank lines are skipped. A line that is not UTF-8, holds a NUL or
    names no file (`.`, `..`, `dir/`) is bad: it is named by line number and byte offset."""
    index_path = Path(index_path)
    try:
        data = _read_index_bytes(index_path)
    except DumpFilterError as exc:
        return Listing(problem=exc)
    names: list[str] = []
    offset = 0
    for number, raw in enumerate(data.split(b"\n"), 1):
        at, offset = offset, offset + len(raw) + 1
        line = raw.strip()
        if not line:
            continue
        try:
            text = line.decode("utf-8")
        except UnicodeDecodeError as exc:
            return Listing(names, BinlogError(f"line {number} of the binlog index is not UTF-8", path=str(index_path),
                                              offset=at + raw.index(line) + exc.start))
        name = text.replace("\\", "/").rpartition("/")[2]
        if "\0" in text or name in ("", ".", ".."):
            return Listing(names, BinlogError(f"line {number} of the binlog index names no binlog file: "
                                              f"{text[:80]!r}", path=str(index_path), offset=at))
        names.append(name)
    return Listing(names)


def read_index(index_path: str | os.PathLike[str]) -> list[Path]:
    """Files named by an index file, in the index's directory (see `index_listing`); a bad line
    or an unreadable index is a BinlogError."""
    listing = index_listing(index_path)
    if listing.problem is not None:
        raise listing.problem
    return [Path(index_path).parent / name for name in listing]


def write_index(index_path: str | os.PathLike[str], names: list[str]) -> None:
    """Write an index file atomically, in the server's `./name` form."""
    index_path = Path(index_path)
    tmp = index_path.with_suffix(index_path.suffix + ".tmp")
    tmp.write_text("".join(f"./{n}\n" for n in names))
    os.replace(tmp, index_path)


def binlog_listing(directory: str | os.PathLike[str]) -> Listing:
    """A directory's binlog files in order, never raising (see `Listing`): from its single
    `.index` file when there is one, else every regular `name.NNNNNN` file by number."""
    directory = Path(directory)
    try:
        with os.scandir(directory) as scan:
            entries = list(scan)
    except OSError as exc:
        return Listing(problem=file_error(exc, directory, "a binlog directory"))
    indexes = sorted(e.name for e in entries if e.name.endswith(".index"))
    if len(indexes) == 1:
        return index_listing(directory / indexes[0])
    numbered = []
    for entry in entries:
        m = _NUMBERED.match(entry.name)
        try:
            if m and entry.is_file():
                numbered.append((m["base"], int(m["num"]), entry.name))
        except OSError:
            continue
    if not numbered:
        return Listing(problem=BinlogError("no binlog files (name.NNNNNN) or index file in directory",
                                           path=str(directory)))
    bases = {b for b, _, _ in numbered}
    if len(bases) > 1:
        return Listing(problem=BinlogError(f"several binlog series in one directory ({', '.join(sorted(bases))}); "
                                           "name the index file", path=str(directory)))
    return Listing(name for _, _, name in sorted(numbered))


def binlog_paths(target: str | os.PathLike[str]) -> list[Path]:
    """The binlog files a path stands for: a file itself, or a directory's files in order (from
    its single `.index` file when there is one, else every `name.NNNNNN` file by number). Files
    the index names that do not exist are left out; a bad index line is a BinlogError."""
    target = Path(target)
    if not target.is_dir():
        return [target]
    listing = binlog_listing(target)
    if listing.problem is not None:
        raise listing.problem
    return [target / name for name in listing if (target / name).exists()]


def served_paths(directory: str | os.PathLike[str]) -> list[Path]:
    """For the master: a directory's binlog files that exist, in order, up to its index's first
    bad line (a stream meets that line's error only when it reads past the files before it, see
    `Listing`). Raises only when nothing at all is listed."""
    directory = Path(directory)
    listing = binlog_listing(directory)
    if not listing and listing.problem is not None:
        raise listing.problem
    return [directory / name for name in listing if (directory / name).exists()]


def file_size(path: str | os.PathLike[str], default: int | None = None) -> int:
    """A file's size; `default`, or a one-line error (`file_error`), when it cannot be stat'ed."""
    try:
        return os.stat(path).st_size
    except OSError as exc:
        if default is not None:
            return default
        raise file_error(exc, path) from None
