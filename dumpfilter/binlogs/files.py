"""Opening binlog files and reading or writing `<base>.index` files: the one place that opens a
file of a binlog directory for reading, so that only regular files are read (a FIFO, device,
socket or directory is one line, never a blocked open) and an index line never leads outside
the directory."""

from __future__ import annotations

import errno
import functools
import gzip
import os
import re
import zlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, TypeVar, cast

from dumpfilter.codec import BinlogReader, Event, EventType, FormatDescription, read_format_description
from dumpfilter.codec.constants import LOG_EVENT_BINLOG_IN_USE_F, MAGIC
from dumpfilter.errors import BinlogError, DumpFilterError, ExternalError, PositionError, TruncatedBinlogError
from dumpfilter import regular_file
from dumpfilter.regular_file import RegularFileError

_NUMBERED = re.compile(r"^(?P<base>.+)\.(?P<num>\d{6,})$")
_T = TypeVar("_T")

MAX_INDEX_BYTES = 16 << 20  # an index of 16 MiB names ~600 000 files


# Flags of the FDE's common header: set while the server writes the file, cleared in place when
# it closes it (the FDE's CRC is computed without it, so the clearing needs no new CRC).
_FDE_FLAGS_AT = 4 + 17


def closed_by_server(fd: int) -> bool:
    """Whether the file's FDE is there and says the server closed the file: it is neither
    written nor truncated again (a crash recovery truncates only the file left in use), so a
    mapping of it never faults (SIGBUS) but on a truncation by hand."""
    head = os.pread(fd, _FDE_FLAGS_AT + 2, 0)
    return (len(head) == _FDE_FLAGS_AT + 2 and head[8] == EventType.FORMAT_DESCRIPTION
            and not head[_FDE_FLAGS_AT] & LOG_EVENT_BINLOG_IN_USE_F)


def _regular(call: Callable[..., _T], path: str | os.PathLike[str], what: str, *args: Any) -> _T:
    """`call(path, *args)` of dumpfilter.regular_file, its errors as one line naming `path`."""
    try:
        return call(path, *args)
    except RegularFileError as exc:  # "index file is larger than 16 MiB" (kind None), or not a file
        message = f"is {exc.kind}, not {what}" if exc.kind else f"{what.split(' ', 1)[-1]} {exc}"
        raise BinlogError(message, path=str(path)) from None
    except OSError as exc:
        raise file_error(exc, path, what) from None
    except ValueError:  # a NUL byte in the name
        raise BinlogError(f"is not a file name ({what})", path=repr(str(path))[:200]) from None


def file_error(exc: OSError, path: str | os.PathLike[str], what: str = "a binlog file") -> DumpFilterError:
    """One line for an OSError met opening, listing or reading a file of a binlog directory: a
    BinlogError (the stream that meets it stops, as MySQL's dump thread does with error 1236),
    but for a process out of file descriptors, which a retry may get past."""
    name = str(path)
    if exc.errno in (errno.EMFILE, errno.ENFILE):
        return ExternalError(f"{name}: cannot open: too many open files (the process's limit: ulimit -n)")
    message = {errno.ENOENT: "no such file", errno.EACCES: "permission denied", errno.EPERM: "permission denied",
               errno.ELOOP: "too many levels of symbolic links (a symlink loop)",
               errno.EISDIR: f"is a directory, not {what}", errno.ENXIO: f"is a socket or a device, not {what}"}
    return BinlogError(message.get(exc.errno or 0, f"cannot read: {exc.strerror or exc}"), path=name)


def naming(exc: BinlogError, path: str | os.PathLike[str]) -> BinlogError:
    """`exc` naming the file by its path: where an event's decoder knew no file (None, the
    "<binlog>" of its line), or a reader knew only its name (`path`'s last part)."""
    name = str(path)
    if exc.path is not None and exc.path not in (Path(name).name, "<binlog>"):
        return exc
    return type(exc)(exc.message, path=name, offset=exc.offset)


def open_regular(path: str | os.PathLike[str], what: str = "a binlog file") -> BinaryIO:
    """A buffered binary reader over `path` if it is a regular file (or a symlink to one: MySQL and
    MariaDB follow them, an operator may move old binlogs to another disk and link them back), else
    a one-line BinlogError (`file_error`); never a blocked open (dumpfilter.regular_file)."""
    return _regular(regular_file.open_regular, path, what)


def open_binlog(path: str | os.PathLike[str]) -> BinaryIO:
    """A binary stream over a binlog file; `.gz` files are decompressed on the fly (`GzipBinlog`:
    corrupt or truncated compressed data is a one-line BinlogError, whoever reads)."""
    path = Path(path)
    f = open_regular(path)
    if path.suffix != ".gz":
        return f
    try:
        stream = GzipBinlog(f, str(path))
    except BaseException:
        f.close()
        raise
    return cast(BinaryIO, stream)  # a binary reader; typeshed's GzipFile is not a typing.BinaryIO


def _gzip_errors(method: Callable[..., _T]) -> Callable[..., _T]:
    """A GzipFile method whose errors on bad compressed data are GzipBinlog's `_error`."""
    @functools.wraps(method)
    def wrapped(self: GzipBinlog, *args: Any, **kwargs: Any) -> _T:
        try:
            return method(self, *args, **kwargs)
        except _GZIP_ERRORS as exc:
            raise self._error(exc) from None
    return wrapped


class GzipBinlog(gzip.GzipFile):
    """A gzipped binlog, read as the binlog it holds. What gzip and zlib raise on bad compressed
    data (EOFError for a truncated file, BadGzipFile, zlib.error) and an I/O error under it
    become one BinlogError naming the file and, where known, the offset in the decompressed
    stream (the binlog's own offsets) where the compressed data went bad: the one place every
    reader of a `.gz` binlog (the codec's readers, the compiled scans' buffers, lint, split)
    gets its error from, instead of a traceback."""

    def __init__(self, fileobj: BinaryIO, path: str):
        super().__init__(fileobj=fileobj, mode="rb")
        # closed with the GzipFile, as when gzip opens the file itself (typeshed types the
        # attribute as the FileIO gzip opens; any binary file closes the same way)
        self.myfileobj = fileobj  # type: ignore[assignment]
        self.binlog_path = path

    # Every read and seek, what gzip and zlib raise on bad data as one BinlogError (`_error`).
    read = _gzip_errors(gzip.GzipFile.read)
    read1 = _gzip_errors(gzip.GzipFile.read1)
    readinto = _gzip_errors(gzip.GzipFile.readinto)
    peek = _gzip_errors(gzip.GzipFile.peek)
    readline = _gzip_errors(gzip.GzipFile.readline)
    seek = _gzip_errors(gzip.GzipFile.seek)

    def _decompressed(self) -> int | None:
        """How many bytes of the binlog were decompressed before the error (gzip's reader counts
        them; None where this Python's gzip does not say)."""
        pos = getattr(getattr(getattr(self, "_buffer", None), "raw", None), "_pos", None)
        return pos if isinstance(pos, int) else None

    def _error(self, exc: BaseException) -> DumpFilterError:
        path, at = self.binlog_path, self._decompressed()
        if isinstance(exc, EOFError):
            return TruncatedBinlogError("the gzip data ends early (a truncated .gz file): the binlog is cut here",
                                        path=path, offset=at)
        if isinstance(exc, zlib.error):
            reason = str(exc).rpartition(": ")[2]  # zlib's own words, without "Error -3 while ..."
            return BinlogError(f"corrupt gzip data: it does not decompress past here (zlib: {reason})",
                               path=path, offset=at)
        if isinstance(exc, gzip.BadGzipFile):
            text = str(exc)
            if text.startswith("Not a gzipped file") and not at:
                hint = (": it is a plain binlog (rename it without .gz)" if self._starts_with_magic()
                        else " (no gzip header)")
                return BinlogError(f"not a gzip file, though its name ends in .gz{hint}", path=path, offset=0)
            what = next((what for start, what in _GZIP_FAULTS if text.startswith(start)), "corrupt gzip header")
            return BinlogError(what, path=path, offset=at)
        assert isinstance(exc, OSError)
        return file_error(exc, path)

    def _starts_with_magic(self) -> bool:
        try:
            return os.pread(cast(BinaryIO, self.myfileobj).fileno(), 4, 0) == MAGIC
        except (OSError, ValueError, AttributeError):
            return False


# gzip.BadGzipFile is an OSError: GzipBinlog._error tells them apart.
_GZIP_ERRORS = (EOFError, zlib.error, OSError)
# gzip.BadGzipFile's messages past the header, by how they start: what GzipBinlog._error says.
_GZIP_FAULTS = (("Not a gzipped file", "bytes after the gzip data that are not gzip data"),
                ("CRC check failed", "gzip CRC32 mismatch: the compressed data is corrupt"),
                ("Incorrect length", "gzip length mismatch: the compressed data is corrupt"),
                ("Unknown compression method", "unknown gzip compression method"))


def binlog_format(path: str | os.PathLike[str], *, verify_checksums: bool = False) -> FormatDescription:
    """The format a binlog file's Format_description sets (one line where the file cannot be
    opened or does not begin with one). Its CRC32 is checked only with `verify_checksums`: a
    command asks the format (the flavor, the post-header lengths) before it reads the file, and
    that read checks every CRC, the FDE's too, as its --no-verify-checksums says."""
    with open_binlog(path) as f:
        return read_format_description(f, str(path), verify_checksums=verify_checksums)[1]


def file_format(path: str | os.PathLike[str]) -> FormatDescription | None:
    """`binlog_format`, or None where the file cannot be opened or does not begin with a
    Format_description."""
    try:
        return binlog_format(path, verify_checksums=True)
    except (DumpFilterError, OSError):
        return None


@dataclass
class BinlogFile:
    """One binlog file on disk, iterable as events."""

    path: Path
    verify_checksums: bool = True

    def __iter__(self) -> Iterator[Event]:
        with open_binlog(self.path) as stream:
            reader = BinlogReader(stream, str(self.path), verify_checksums=self.verify_checksums)
            try:
                yield from reader
            except OSError as exc:  # (a .gz file's bad data is GzipBinlog's BinlogError already)
                raise file_error(exc, self.path) from None
            if reader.fmt is None:  # the magic and nothing after it: as read_format_description says
                raise BinlogError("no Format_description event", path=str(self.path), offset=4)


class Listing(list[str]):
    """The names of a binlog directory's files in order, those its index names but that are
    missing included (a reader that reaches one stops with error 1236, as MySQL's dump thread
    does: "could not open log file"). `problem`, when set, is why the listing stops early (the
    index's first bad line, an unreadable index or directory): a reader that needs a file past
    the last name meets it."""

    def __init__(self, names: Iterable[str] = (), problem: DumpFilterError | None = None, *,
                 index_path: Path | None = None, lines: Iterable[IndexLine] = ()):
        super().__init__(names)
        self.problem = problem
        self.index_path = index_path  # the index file the names come from (None: the directory's numbered files)
        self.lines = list(lines)  # with an index: the line each name comes from, name by name

    def missing_file(self, directory: Path) -> BinlogError | None:
        """For the offline commands, which read every file listed: the error of the first name
        that is not a file of `directory` (naming the index and its line, as a server that will
        not start on such an index does), or None when every one is there."""
        for k, name in enumerate(self):
            if os.path.lexists(directory / name):
                continue
            if self.index_path is None or k >= len(self.lines):
                return BinlogError("no such file", path=str(directory / name))
            line = self.lines[k]
            written = f" ({line.text[:80]!r})" if line.text != name else ""
            return BinlogError(f"line {line.number} of the binlog index names {name!r}{written}, which is not in "
                               f"{directory} (each line names a file of the index's own directory)",
                               path=str(self.index_path), offset=line.offset)
        return None

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


@dataclass(frozen=True)
class IndexLine:
    """Where an index names a file: its line number, the line's byte offset, its text (stripped)."""

    number: int
    offset: int
    text: str


def index_listing(index_path: str | os.PathLike[str]) -> Listing:
    """The files an index names, each in the index's directory, up to its first bad line (its
    `problem`). Each line stands for the file of that name in the index's directory, whatever
    directory it names (MySQL writes `./name` or an absolute path): a copied or moved binlog
    directory serves its own files, and no index line leads a reader outside its directory.
    Lines may end in CRLF; blank lines are skipped. A line that is not UTF-8, holds a NUL or
    names no file (`.`, `..`, `dir/`) is bad: it is named by line number and byte offset."""
    index_path = Path(index_path)
    try:
        data = _regular(regular_file.read_regular, index_path, "an index file", MAX_INDEX_BYTES)
    except DumpFilterError as exc:
        return Listing(problem=exc, index_path=index_path)
    names: list[str] = []
    lines: list[IndexLine] = []
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
                                              offset=at + raw.index(line) + exc.start), index_path=index_path, lines=lines)
        name = text.replace("\\", "/").rpartition("/")[2]
        if "\0" in text or name in ("", ".", ".."):
            return Listing(names, BinlogError(f"line {number} of the binlog index names no binlog file: "
                                              f"{text[:80]!r}", path=str(index_path), offset=at),
                           index_path=index_path, lines=lines)
        names.append(name)
        lines.append(IndexLine(number, at, text))
    return Listing(names, index_path=index_path, lines=lines)


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
    its single `.index` file when there is one, else every `name.NNNNNN` file by number). What
    an offline command cannot read whole is a BinlogError naming the index and its line: a bad
    line, a line naming a file that is not in the directory (a server will not start on such an
    index either), an index that names no file."""
    target = Path(target)
    if not target.is_dir():
        return [target]
    listing = binlog_listing(target)
    if listing.problem is not None:
        raise listing.problem
    missing = listing.missing_file(target)
    if missing is not None:
        raise missing
    if not listing:
        raise BinlogError("the binlog index names no binlog file", path=str(listing.index_path or target))
    return [target / name for name in listing]


def distinct_paths(paths: Iterable[str | os.PathLike[str]]) -> list[Path]:
    """`paths` as Paths, each file once: a file given twice (by the same or another name, a
    symbolic or hard link) would be read twice, its transactions written or counted twice."""
    seen: dict[object, Path] = {}  # each file's first path, in order
    for path in map(Path, paths):
        try:
            st = os.stat(path)
            key: object = (st.st_dev, st.st_ino)
        except (OSError, ValueError):  # its own error comes when it is opened
            key = path.absolute()
        first = seen.get(key)
        if first is not None:
            also = "" if first == path else f" (also as {first})"
            raise BinlogError(f"binlog file given twice{also}", path=str(path))
        seen[key] = path
    return list(seen.values())


def input_paths(targets: Iterable[str | os.PathLike[str]]) -> list[Path]:
    """Every binlog file a command's arguments stand for, in order (`binlog_paths` of each), each
    once (`distinct_paths`); at least one."""
    paths = distinct_paths(path for target in targets for path in binlog_paths(target))
    if not paths:
        raise BinlogError("no input binlog files")
    return paths


def served_paths(directory: str | os.PathLike[str]) -> list[Path]:
    """For the master: a directory's binlog files that exist, in order, up to its index's first
    bad line (a stream meets that line's error only when it reads past the files before it, see
    `Listing`). Raises only when nothing at all is listed."""
    directory = Path(directory)
    listing = binlog_listing(directory)
    if not listing and listing.problem is not None:
        raise listing.problem
    return [directory / name for name in listing if (directory / name).exists()]


def file_size(path: str | os.PathLike[str], default: int) -> int:
    """A file's size; `default` when it cannot be stat'ed (gone, or never there)."""
    try:
        return os.stat(path).st_size
    except OSError:
        return default
