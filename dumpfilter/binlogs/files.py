"""Opening binlog files and reading or writing `<base>.index` files."""

from __future__ import annotations

import gzip
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from dumpfilter.codec import BinlogReader, Event
from dumpfilter.errors import BinlogError

_NUMBERED = re.compile(r"^(?P<base>.+)\.(?P<num>\d{6,})$")


def open_binlog(path: str | os.PathLike) -> BinaryIO:
    """A binary stream over a binlog file; `.gz` files are decompressed on the fly."""
    path = Path(path)
    try:
        if path.suffix == ".gz":
            return gzip.open(path, "rb")
        return open(path, "rb")
    except FileNotFoundError:
        raise BinlogError("no such file", path=str(path)) from None
    except IsADirectoryError:
        raise BinlogError("is a directory, not a binlog file", path=str(path)) from None
    except PermissionError:
        raise BinlogError("permission denied", path=str(path)) from None


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


def read_index(index_path: str | os.PathLike) -> list[Path]:
    """Files named by an index file, resolved against the index's directory. MySQL writes
    `./name.000001`; absolute paths are kept."""
    index_path = Path(index_path)
    out = []
    for line in index_path.read_text().splitlines():
        line = line.strip()
        if line:
            p = Path(line)
            out.append(p if p.is_absolute() else index_path.parent / p.name)
    return out


def write_index(index_path: str | os.PathLike, names: list[str]) -> None:
    """Write an index file atomically, in the server's `./name` form."""
    index_path = Path(index_path)
    tmp = index_path.with_suffix(index_path.suffix + ".tmp")
    tmp.write_text("".join(f"./{n}\n" for n in names))
    os.replace(tmp, index_path)


def binlog_paths(target: str | os.PathLike) -> list[Path]:
    """The binlog files a path stands for: a file itself, or a directory's files in order (from
    its single `.index` file when there is one, else every `name.NNNNNN` file by number)."""
    target = Path(target)
    if not target.is_dir():
        return [target]
    indexes = sorted(target.glob("*.index"))
    if len(indexes) == 1:
        return [p for p in read_index(indexes[0]) if p.exists()]
    numbered = []
    for p in target.iterdir():
        m = _NUMBERED.match(p.name)
        if m and p.is_file():
            numbered.append((m["base"], int(m["num"]), p))
    if not numbered:
        raise BinlogError("no binlog files (name.NNNNNN) or index file in directory", path=str(target))
    bases = {b for b, _, _ in numbered}
    if len(bases) > 1:
        raise BinlogError(f"several binlog series in one directory ({', '.join(sorted(bases))}); name the index file", path=str(target))
    return [p for _, _, p in sorted(numbered)]
