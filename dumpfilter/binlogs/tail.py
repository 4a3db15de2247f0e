"""Reads a binlog directory, which a live server may still be writing, to the end of what is
written: at a Rotate (or when the index names a newer file) it moves on to the next file."""

from __future__ import annotations

import os
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import BinaryIO

from dumpfilter.codec import Event, EventSplitter, EventType, FormatDescription, read_format_description
from dumpfilter.codec.checksum import crc_ok
from dumpfilter.codec.constants import HEADER_LEN, KNOWN_TYPES, LOG_EVENT_ARTIFICIAL_F, LOG_EVENT_IGNORABLE_F
from dumpfilter.codec.event import HEADER
from dumpfilter.codec.reader import MAX_EVENT_SIZE
from dumpfilter.errors import BinlogError, PositionError
from dumpfilter.binlogs.files import Listing, binlog_listing, open_regular

CHUNK = 1 << 20
MAX_PROBE = 1 << 16


def _looks_like_event(head: bytes, fmt: FormatDescription, start: int) -> bool:
    """Whether bytes read at a requested start position begin a real event: a known type, a sane
    size, and either a matching CRC (when it is wholly there) or a log_pos that ends it."""
    if len(head) < HEADER_LEN:
        # Exactly at the end of the file, or a live server caught writing a header (1-18 bytes
        # of it are there): not yet written, the reader waits for the rest. What is there is
        # checked: a sane size, a log_pos that ends the event.
        if len(head) >= 13:
            size = int.from_bytes(head[9:13], "little")
            return HEADER_LEN <= size <= MAX_EVENT_SIZE and (
                len(head) < 17 or int.from_bytes(head[13:17], "little") in (0, start + size))
        return True
    _, type_code, _, size, log_pos, flags = HEADER.unpack_from(head, 0)
    if not HEADER_LEN <= size <= MAX_EVENT_SIZE or (type_code not in KNOWN_TYPES and not flags & LOG_EVENT_IGNORABLE_F):
        return False
    if fmt.checksum_len and len(head) >= size:
        return crc_ok(head[:size])
    return log_pos in (0, start + size)


def confined_rotate_target(target: str, current: str, offset: int) -> str:
    """`target` if it is a plain file name (the next binlog, in the same directory), else a
    BinlogError: a hostile Rotate must not lead a reader to /etc/passwd or ../x. For every
    reader that follows Rotates (this one, the master's segment reader)."""
    if not target or "/" in target or "\\" in target or "\0" in target or target in (".", ".."):
        raise BinlogError(f"Rotate names {target[:80]!r}, which is not a binlog file name", path=current,
                          offset=offset)
    return target


def _rotated_name(event: Event, current: str) -> str:
    try:
        target = event.rotate[1]
    except BinlogError as exc:
        raise BinlogError(exc.message, path=current, offset=event.pos) from None
    return confined_rotate_target(target, current, event.pos)


class TailingReader:
    """Yields (file name, Event) from `start_file` at `start_pos` onward, to the current end of
    the last file.

    Memory is bounded by the chunk size plus the largest event. The FDE of each file is always
    read first so that events are decoded with the right format, even when starting mid-file;
    it is yielded only when the read starts at the file's beginning.
    """

    def __init__(self, directory: str | os.PathLike[str], start_file: str | None = None, start_pos: int = 4, *,
                 verify_checksums: bool = True):
        self.directory = Path(directory)
        self.verify_checksums = verify_checksums
        files = self.files()
        if not files:
            raise files.problem or BinlogError("no binlog files", path=str(self.directory))
        self.file = start_file or files[0]
        if self.file not in files:
            raise PositionError(f"binlog file '{self.file}' is not in {self.directory} (purged or never written)")
        self.start_pos = start_pos

    def files(self) -> Listing:
        return binlog_listing(self.directory)

    def next_file(self, current: str) -> str | None:
        return self.files().next_after(self.directory, current)

    def __iter__(self) -> Iterator[tuple[str, Event]]:
        name: str | None = self.file
        start = self.start_pos
        while name is not None:
            name = yield from self._read_file(name, start)
            # A Rotate can name a file the server has not created yet (not one its index names).
            if name is not None and not os.path.lexists(self.directory / name):
                self.files().check_absent(self.directory, name)
                return
            start = 4

    def open_at(self, f: BinaryIO, path: Path, start: int) -> EventSplitter:
        """A splitter positioned at `start`. Starting mid-file, the FDE at offset 4 is read first
        so that later events are decoded with their file's format."""
        if start <= 4:
            return EventSplitter(str(path), verify_checksums=self.verify_checksums)
        fde, fmt = read_format_description(f, str(path))
        if start < fde.end_pos:
            raise PositionError(f"position {start} is inside the Format_description event of '{path.name}'")
        f.seek(start)
        if not _looks_like_event(f.read(MAX_PROBE), fmt, start):
            raise PositionError(f"position {start} in '{path.name}' is not at an event boundary")
        f.seek(start)
        return EventSplitter(str(path), verify_checksums=self.verify_checksums, start=start, fmt=fmt)

    def _read_file(self, name: str, start: int) -> Generator[tuple[str, Event], None, str | None]:
        """Yield the events of one file; return the name of the file to continue with, or None."""
        path = self.directory / name
        with open_regular(path) as f:
            size = os.fstat(f.fileno()).st_size
            if start > size:
                raise PositionError(f"position {start} is past the end of '{name}' ({size} bytes)")
            splitter = self.open_at(f, path, start)
            rotated_to: str | None = None
            while True:
                data = f.read(CHUNK)
                if data:
                    splitter.feed(data)
                    for event in splitter.events():
                        yield name, event
                        # A Rotate names the next file. The dump thread's artificial Rotate
                        # (flag 0x20) at the start of a relay stream does not end the file.
                        if event.type_code == EventType.ROTATE and not event.flags & LOG_EVENT_ARTIFICIAL_F:
                            rotated_to = _rotated_name(event, name)
                    continue
                # At the end of what has been written so far.
                if rotated_to:
                    return rotated_to
                newer = self.next_file(name)
                if newer is not None and os.fstat(f.fileno()).st_size > f.tell():
                    continue  # it grew before the newer file was made (a writer makes that once this one is whole)
                if newer is not None and splitter.pending == 0:
                    return newer  # a Stop event, or a crash, ended this file without a Rotate
                splitter.close()  # raises if the file ends inside an event
                return None
