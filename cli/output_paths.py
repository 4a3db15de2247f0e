"""Where the commands write, and the files they read by name: checked before any work starts (an
--out that cannot be written, an --ssl-ca that cannot be read, is one line and exit 2, not a
traceback after the run), never over one of the inputs, and a file is written whole or not at all
(a temporary file in the same directory, then os.replace)."""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import IO, Any

from dumpfilter.errors import ExternalError, InvalidArgumentError


class OutputError(InvalidArgumentError):
    """An output path that cannot be written, or that would overwrite an input."""


def temp_beside(directory: str | os.PathLike[str], prefix: str, suffix: str = "") -> tuple[int, str]:
    """A new file of its own (O_EXCL, mode 0600) in `directory`: (descriptor, path), as
    tempfile.mkstemp makes one. Not tempfile's: it imports shutil, random, bz2 and lzma, a
    fifth of the offline `filter` command's start."""
    for _ in range(100):
        path = os.path.join(directory, f"{prefix}{os.urandom(6).hex()}{suffix}")
        with contextlib.suppress(FileExistsError):
            return os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o600), path
    raise FileExistsError(f"no free temporary name in {directory}")


def _check_writable(directory: Path, label: str, make: bool = True) -> None:
    """`label: cannot write there: why` (OutputError) when no file can be written in DIR once it is
    made (with its parents; `make` False: DIR must exist already)."""
    try:
        if make:
            directory.mkdir(parents=True, exist_ok=True)
        fd, probe = temp_beside(directory, ".dumpfilter-probe-")
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        where = f" ({exc.filename})" if exc.filename and Path(exc.filename) != directory else ""
        raise OutputError(f"{label}: cannot write there: {exc.strerror or exc}{where}") from None


def writable_dir(path: str | os.PathLike[str], option: str = "--out") -> Path:
    """Create DIR (and its parents) and prove a file can be written in it."""
    directory = Path(path)
    _check_writable(directory, f"{option} {directory}")
    return directory


def readable_file(path: str | os.PathLike[str], option: str) -> Path:
    """FILE is a regular file (not a directory, nor a FIFO or device that would block or never end)
    and can be opened for reading."""
    from dumpfilter.regular_file import open_regular

    target = Path(path)
    try:
        open_regular(target).close()
    except (OSError, ValueError) as exc:
        raise OutputError(f"{option} {target}: cannot read it: {getattr(exc, 'strerror', None) or exc}") from None
    return target


def existing_dir(path: str | os.PathLike[str], option: str) -> Path:
    """DIR is a directory when it exists (a command that reads it says itself what a missing one means)."""
    directory = Path(path)
    if directory.exists() and not directory.is_dir():
        raise OutputError(f"{option} {directory}: not a directory")
    return directory


def is_stream(path: str | os.PathLike[str]) -> bool:
    """A device or pipe, or a link into /proc such as /dev/stdout (which is a regular file when stdout
    was redirected to one): written in place as it comes, never replaced by a renamed file."""
    target = Path(path)
    if target.is_symlink() and os.readlink(target).startswith("/proc/"):
        return True
    return target.exists() and not target.is_file() and not target.is_dir()


def missing_parent(path: str | os.PathLike[str], option: str) -> None:
    """A file output's directory must exist: no option naming one FILE makes the directory it is in
    (as cp makes none; an --out DIR is made with its parents)."""
    parent = Path(path).parent
    try:
        reason = None if stat.S_ISDIR(os.stat(parent).st_mode) else "not a directory"
    except FileNotFoundError:
        reason = f"no such directory ({option} creates none)"
    except OSError as exc:  # an ancestor that is a file, or may not be searched
        reason = exc.strerror or str(exc)
    if reason:
        raise OutputError(f"{option} {path}: {parent}: {reason}")


def writable_file(path: str | os.PathLike[str], option: str = "--out") -> Path:
    """The parent directory of FILE exists (missing_parent) and can take a new file (the file itself is
    written later, atomically), or FILE is a stream (is_stream), opened when written."""
    target = Path(path)
    if is_stream(target):
        return target
    if target.is_dir():
        raise OutputError(f"{option} {target}: is a directory")
    missing_parent(target, option)
    _check_writable(target.parent, f"{option} {target}", make=False)
    return target


def _binlog_stem(path: Path) -> str:
    """`mysql-bin` for `mysql-bin.000012` (a binlog file's base name), else the name itself."""
    stem, dot, number = path.name.rpartition(".")
    return stem if dot and number.isdigit() else path.name


def refuse_input_as_output(inputs: Iterable[str | os.PathLike[str]], *, file: str | os.PathLike[str] | None = None,
                           directory: str | os.PathLike[str] | None = None, basename: str | None = None,
                           option: str = "-o") -> None:
    """An output may not be an input: the same file (also through a link), or a binlog of the same
    directory and base name (`mysql-bin.000002` beside an input `mysql-bin.000001`, or a series
    `mysql-bin.NNNNNN` + `mysql-bin.index` written into the input's directory)."""
    for item in inputs:
        source = Path(item)
        real = source.resolve()
        out_stem: str | None
        if file is not None:
            out = Path(file)
            if real == out.resolve() or (out.exists() and os.path.samefile(out, source)):
                raise OutputError(f"{option} {out}: is the input {source}; write the output elsewhere")
            out_dir, out_stem = out.resolve().parent, _binlog_stem(out)
        else:
            assert directory is not None, "refuse_input_as_output: give file= or directory="
            out_dir, out_stem = Path(directory).resolve(), basename
        if real.parent == out_dir and _binlog_stem(real) == out_stem:
            raise OutputError(f"{option} {file or directory}: has the directory and base name ({out_stem}) of the "
                              f"input {source}; write the output elsewhere")


class _Written:
    """A file being written whose failed write, flush or close (a full disk, /dev/full, a device that
    refuses) is one line naming the output (ExternalError), not an OSError's traceback; a reader gone
    from a pipe stays the BrokenPipeError every command ends on quietly."""

    def __init__(self, handle: IO[Any], label: str) -> None:
        self.handle, self.label = handle, label

    def write(self, data: Any) -> int:
        with writes_named(self.label):
            return self.handle.write(data)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.handle, name)


@contextlib.contextmanager
def writes_named(label: str) -> Iterator[None]:
    """An OSError of the output's own flush, fsync, close or rename is one line naming it."""
    try:
        yield
    except BrokenPipeError:
        raise
    except OSError as exc:
        raise ExternalError(f"{label}: cannot write: {exc.strerror or exc}") from None


@contextlib.contextmanager
def atomic_output(path: str | os.PathLike[str], mode: str = "wb", option: str | None = None) -> Iterator[IO[Any]]:
    """Open a temporary file beside PATH; on success it replaces PATH, on any error it is removed
    and an existing PATH is left as it was. A stream (is_stream) is written in place. The one home
    of a command's file output: a write that fails is one line naming `option` and PATH."""
    target = Path(path)
    label = f"{option} {target}" if option else str(target)
    if target.is_dir():  # told before anything is written, not as IsADirectoryError at the end
        raise OutputError(f"{target}: is a directory, not a file to write")
    if is_stream(target):  # appended to: a file behind /dev/stderr keeps what it holds
        with writes_named(label):
            stream = open(target, mode.replace("w", "a"))
        yield from _written(stream, label, lambda: None)
        return
    with writes_named(label):
        fd, tmp = temp_beside(target.parent if str(target.parent) else ".", f".{target.name}.", ".tmp")
    try:
        handle = os.fdopen(fd, mode)

        def durable() -> None:
            handle.flush()
            os.fsync(handle.fileno())

        yield from _written(handle, label, durable)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


@contextlib.contextmanager
def made_for_the_run(path: str | os.PathLike[str], option: str = "--out") -> Iterator[Path]:
    """`writable_dir(path)`, undone if the run does not end well: the directories it made (DIR and
    any missing parent), whatever they hold by then, are removed when the body raises (an
    interrupt, SIGTERM as `Terminated`, an error). A directory that was there before is left, and
    what it held before stays."""
    directory = Path(path)
    top = None  # the outermost directory this call makes
    for candidate in (directory, *directory.parents):
        if candidate.exists() or candidate.is_symlink():
            break
        top = candidate
    writable_dir(directory, option)
    try:
        yield directory
    except BaseException:
        if top is not None:
            import shutil

            shutil.rmtree(top, ignore_errors=True)
        raise
def _written(handle: IO[Any], label: str, finish: Callable[[], object]) -> Iterator[IO[Any]]:
    """Yield HANDLE (its writes named: _Written), then finish and close it; an error of the body's
    own (an input that cannot be read) closes it quietly and is the one reported."""
    try:
        yield _Written(handle, label)  # type: ignore[misc]
    except BaseException:
        with contextlib.suppress(OSError):
            handle.close()
        raise
    with writes_named(label):
        finish()
        handle.close()
