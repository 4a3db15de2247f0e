"""Streaming binlog readers over bytes and file-like objects, with memory bounded by the largest
event whatever the file size. `EventSplitter` is the sans-I/O core: feed it bytes, take events."""

from __future__ import annotations

from collections.abc import Iterator
from typing import BinaryIO, Protocol

from dumpfilter.codec.constants import HEADER_LEN, MAGIC, EventType
from dumpfilter.errors import BinlogError, CutEventError, TruncatedBinlogError
from dumpfilter.codec.event import HEADER, Buffer, Event
from dumpfilter.codec.format_description import FormatDescription
from dumpfilter.codec.scanner import Scanner, type_mask

FDE = int(EventType.FORMAT_DESCRIPTION)
ALL_TYPES = type_mask(None)
DEFAULT_CHUNK = 1 << 20
# Events larger than this are refused: the server's own limit (max_allowed_packet) is 1 GiB.
MAX_EVENT_SIZE = 1 << 30


class EventSplitter:
    """Turns a byte stream that starts at a binlog file's first byte into Events.

    `feed()` takes any slicing of the stream; `events()` yields every complete event so far.
    The first event must be a Format_description event; each later FDE replaces the format.
    The bytes are walked by the compiled scanner (`dumpfilter.codec.scanner`), one call per buffer:
    header hop, bounds, CRC32 and the FDEs all happen there.
    """

    def __init__(self, name: str = "<binlog>", *, verify_checksums: bool = True, start: int = 0,
                 fmt: FormatDescription | None = None):
        self.name = name
        self.verify_checksums = verify_checksums
        self.fmt = fmt
        self._buf = b""
        self._off = 0
        self._pos = start  # file offset of self._buf[self._off]
        self._need_magic = start == 0
        self._scanner = Scanner(name, verify_checksums=verify_checksums)
        if fmt is not None:
            self._scanner.load_format(fmt.raw)

    @property
    def position(self) -> int:
        """File offset just after the last complete event returned."""
        return self._pos

    @property
    def pending(self) -> int:
        return len(self._buf) - self._off

    def feed(self, data: bytes) -> None:
        if self._off:
            self._buf = self._buf[self._off :] + data
            self._off = 0
        else:
            self._buf += data

    def events(self) -> Iterator[Event]:
        buf = self._buf
        if self._need_magic:  # the 4-byte magic a file starts with, skipped once it is all there
            if len(buf) - self._off < 4:
                return
            if buf[self._off : self._off + 4] != MAGIC:
                raise bad_magic(self.name)
            self._off += 4
            self._pos = 4
            self._need_magic = False
        base = self._pos - self._off
        offsets, stop, error = self._scanner.walk(buf, self._off, base, ALL_TYPES)
        unpack = HEADER.unpack_from
        fmt = self.fmt
        for at in offsets:
            header = unpack(buf, at)
            size = header[3]
            if header[1] == FDE:  # the Python view of an FDE the scanner has already checked and adopted
                fmt = self.fmt = FormatDescription.parse(buf[at : at + size], path=self.name, offset=base + at)
            self._off = at + size
            self._pos = base + at + size
            yield Event(buf[at : at + size], base + at, fmt, header)
        self._off = stop
        self._pos = base + stop
        if error is not None:
            raise error

    def close(self) -> None:
        """Call at end of input: a partial event left over means a truncated file."""
        if self._need_magic:
            raise TruncatedBinlogError(f"file is {len(self._buf)} bytes long, too short for the binlog magic", path=self.name, offset=0)
        if len(self._buf) > self._off:
            raise truncated(self._buf[self._off :], self.name, self._pos)


class Readable(Protocol):
    """What BinlogReader reads from: a binary stream's `read` (a file, or a view of part of one)."""

    def read(self, size: int = -1, /) -> bytes: ...


class BinlogReader:
    """Iterates the events of one binlog file read from a file-like object, chunk by chunk.

    With `start` > 4 the stream must be positioned at that event boundary; the format is then
    taken from `fmt` (read the FDE first with `read_format_description`).
    """

    def __init__(self, stream: Readable, name: str = "<binlog>", *, verify_checksums: bool = True,
                 chunk_size: int = DEFAULT_CHUNK, start: int = 0, fmt: FormatDescription | None = None):
        self.stream = stream
        self.splitter = EventSplitter(name, verify_checksums=verify_checksums, start=start, fmt=fmt)
        self.chunk_size = chunk_size

    @property
    def fmt(self) -> FormatDescription | None:
        return self.splitter.fmt

    @property
    def position(self) -> int:
        return self.splitter.position

    def __iter__(self) -> Iterator[Event]:
        splitter = self.splitter
        read = self.stream.read
        while True:
            data = read(self.chunk_size)
            if not data:
                break
            splitter.feed(data)
            yield from splitter.events()
        splitter.close()


def read_events(data: bytes, name: str = "<bytes>", *, verify_checksums: bool = True) -> list[Event]:
    """Every event of a whole binlog held in memory."""
    splitter = EventSplitter(name, verify_checksums=verify_checksums)
    splitter.feed(data)
    events = list(splitter.events())
    splitter.close()
    return events


def batch_events(data: bytes, fmt: FormatDescription | None, name: str = "<batch>") -> Iterator[Event]:
    """Every event of a master stream's batch (whole events, no magic: what a Dump sends), in
    the format `fmt` until an FDE among them replaces it. The master made or checked these bytes:
    their CRCs are not checked again."""
    splitter = EventSplitter(name, verify_checksums=False, start=4, fmt=fmt)
    splitter.feed(data)
    yield from splitter.events()
    splitter.close()


def bad_magic(path: str) -> BinlogError:
    """A file that does not start with the binlog magic. Its bytes are not shown: a remote slave
    may read this line, and the file may be a symlink to anything."""
    return BinlogError("bad magic: not a binlog file (a binlog starts with the 4 bytes fe 62 69 6e)", path=path,
                       offset=0)


def truncated(rest: Buffer, path: str, offset: int) -> CutEventError:
    """The error of a file whose last bytes `rest` (at `offset`) are not a whole event."""
    n = len(rest)
    msg = (f"event size {int.from_bytes(rest[9:13], 'little')} runs past the end of the file ({n} bytes left)"
           if n >= HEADER_LEN else f"file ends inside an event header ({n} of {HEADER_LEN} bytes)")
    return CutEventError(msg, path=path, offset=offset)


def read_format_description(stream: BinaryIO, name: str = "<binlog>", *,
                            verify_checksums: bool = True) -> tuple[Event, FormatDescription]:
    """The FDE at offset 4 of a binlog file (the stream is left positioned after it).
    `verify_checksums` False: its CRC32 is not checked."""
    splitter = EventSplitter(name, verify_checksums=verify_checksums)
    while True:
        data = stream.read(4096)
        if not data:
            splitter.close()
            raise BinlogError("no Format_description event", path=name, offset=4)
        splitter.feed(data)
        for event in splitter.events():
            if event.type_code != EventType.FORMAT_DESCRIPTION:
                raise BinlogError(f"first event is {event.type_name}, not Format_description", path=name, offset=event.pos)
            stream.seek(event.end_pos)
            fmt = splitter.fmt
            assert fmt is not None  # the Format_description event just read set it
            return event, fmt
