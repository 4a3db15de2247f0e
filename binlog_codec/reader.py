"""Streaming binlog readers over bytes and file-like objects, with memory bounded by the largest
event whatever the file size. `EventSplitter` is the sans-I/O core: feed it bytes, take events."""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import BinaryIO
from zlib import crc32

from binlog_codec.checksum import crc_ok, crc_ok_in
from binlog_codec.constants import CHECKSUM_LEN, HEADER_LEN, KNOWN_TYPES, MAGIC, EventType, LOG_EVENT_IGNORABLE_F, type_name
from binlog_codec.errors import BinlogError, ChecksumError, TruncatedBinlogError
from binlog_codec.event import HEADER, Event, EventCursor, LazyHeaderCursor
from binlog_codec.format_description import FormatDescription

_U32 = struct.Struct("<I")
_TYPE_SIZE = struct.Struct("<4xB4xI")  # type_code, event_size of a common header
# The CRC-32 of a message followed by its own little-endian CRC-32 is always this constant, so
# an event's checksum is checked with one crc32() over the whole event.
CRC_RESIDUE = 0x2144DF1C
DEFAULT_CHUNK = 1 << 20
# Events larger than this are refused: the server's own limit (max_allowed_packet) is 1 GiB.
MAX_EVENT_SIZE = 1 << 30


class EventSplitter:
    """Turns a byte stream that starts at a binlog file's first byte into Events.

    `feed()` takes any slicing of the stream; `events()` yields every complete event so far.
    The first event must be a Format_description event; each later FDE replaces the format.
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
        self.events_walked = 0  # events passed by walk_stream(types=...)

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

    def _consume_magic(self) -> bool:
        """Skip the 4-byte magic at the start of a file; False while it is not all there."""
        if not self._need_magic:
            return True
        buf = self._buf
        if len(buf) - self._off < 4:
            return False
        if buf[self._off : self._off + 4] != MAGIC:
            raise BinlogError(f"bad magic {buf[:4].hex()} (expected fe62696e): not a binlog file", path=self.name, offset=0)
        self._off += 4
        self._pos = 4
        self._need_magic = False
        return True

    def events(self) -> Iterator[Event]:
        if not self._consume_magic():
            return
        buf = self._buf
        off = self._off
        end = len(buf)
        unpack = HEADER.unpack_from
        unpack_u32 = _U32.unpack_from
        known = KNOWN_TYPES
        fde_type = EventType.FORMAT_DESCRIPTION
        while off + HEADER_LEN <= end:
            header = unpack(buf, off)
            size = header[3]
            if size < HEADER_LEN or size > MAX_EVENT_SIZE:
                raise BinlogError(f"event size {size} is impossible (type {header[1]})", path=self.name, offset=self._pos)
            if off + size > end:
                break
            raw = buf[off : off + size]
            pos = self._pos
            event = Event(raw, pos, self.fmt, header)
            type_code = header[1]
            if type_code == fde_type or type_code not in known or self.fmt is None:
                self._check(event)
            elif self.verify_checksums and self.fmt.checksum_len:
                # The CRC check, inlined: it runs for every event.
                if crc32(raw[:-CHECKSUM_LEN]) != unpack_u32(raw, size - CHECKSUM_LEN)[0]:
                    raise ChecksumError(f"CRC32 mismatch in {type_name(type_code)} event", path=self.name, offset=pos)
            off += size
            self._off = off
            self._pos = pos + size
            yield event
        self._off = off

    def _chunks(self, read, chunk_size: int) -> Iterator[tuple[bytes, int, int]]:
        """Reads with `read(chunk_size)` and feeds the splitter; yields (buffer, offset of its
        first unwalked event, file offset of buffer[0]) per chunk. The walks record where they
        stopped in `_off` / `_pos` before asking for the next chunk."""
        while True:
            data = read(chunk_size)
            if not data:
                return
            self.feed(data)
            if self._consume_magic():
                yield self._buf, self._off, self._pos - self._off

    def walk_stream(self, read, chunk_size: int, types: frozenset[int] | None = None) -> Iterator[EventCursor]:
        """Reads with `read(chunk_size)` and moves one reused EventCursor over each chunk instead
        of copying every event: the fast path for walks that look at most events and keep few.
        One generator does both reading and splitting, as each layer costs time per event.

        With `types`, only events of those type codes are yielded; every other event is still
        split, size-checked and (when verifying) CRC-checked, just not handed out, which saves
        the generator round trip for the events a caller would skip anyway. Format_description
        and unknown events are always checked. `events_walked` counts every event."""
        if types is not None:
            yield from self._walk_types(read, chunk_size, frozenset(types))
            return
        cursor = EventCursor()
        unpack = HEADER.unpack_from
        known = KNOWN_TYPES
        fde_type = EventType.FORMAT_DESCRIPTION
        verify = self.verify_checksums
        crc_len = self.fmt.checksum_len if verify and self.fmt is not None else 0
        unpack_u32 = _U32.unpack_from
        for buf, off, base in self._chunks(read, chunk_size):
            end = len(buf)
            cursor._buf = buf
            cursor._base = base
            view = memoryview(buf)
            no_format = self.fmt is None
            try:
                while off + HEADER_LEN <= end:
                    header = unpack(buf, off)
                    size = header[3]
                    if size < HEADER_LEN or size > MAX_EVENT_SIZE:
                        raise BinlogError(f"event size {size} is impossible (type {header[1]})", path=self.name,
                                          offset=base + off)
                    if off + size > end:
                        break
                    if cursor.__dict__:
                        cursor.__dict__.clear()
                    cursor._start = off
                    cursor._h = header
                    type_code = header[1]
                    if type_code == fde_type or type_code not in known or no_format:
                        cursor.fmt = self.fmt
                        self._pos = base + off
                        self._check(cursor)
                        cursor.fmt = self.fmt
                        no_format = self.fmt is None
                        crc_len = self.fmt.checksum_len if verify and not no_format else 0
                    elif crc_len:  # the CRC check, inlined: it runs for every event
                        crc_end = off + size - CHECKSUM_LEN
                        if crc32(view[off:crc_end]) != unpack_u32(buf, crc_end)[0]:
                            raise ChecksumError(f"CRC32 mismatch in {type_name(type_code)} event", path=self.name,
                                                offset=base + off)
                    off += size
                    yield cursor
            finally:
                # Where the walk stands, also when the consumer stops early (kept out of the
                # per-event loop: an attribute store per event costs as much as the check above).
                self._off = off
                self._pos = base + off
        self.close()

    def _walk_types(self, read, chunk_size: int, types: frozenset[int]) -> Iterator[EventCursor]:
        """walk_stream's loop for a type filter: a skipped event costs what it costs in a
        header-only loop, plus the CRC check when verifying."""
        cursor = LazyHeaderCursor()
        type_size = _TYPE_SIZE.unpack_from
        known = KNOWN_TYPES
        fde_type = EventType.FORMAT_DESCRIPTION
        verify = self.verify_checksums
        nothing: frozenset[int] = frozenset()

        def type_sets() -> tuple[frozenset[int], frozenset[int], frozenset[int], int]:
            """(skipped unchecked, skipped after a CRC check, handed out as they are, CRC length)
            for the current format. Before the first FDE every event is checked against it."""
            if self.fmt is None:
                return nothing, nothing, nothing, 0
            skipped = known - types - {fde_type}
            crc_len = self.fmt.checksum_len if verify else 0
            return (nothing, skipped, (types & known) - {fde_type}, crc_len) if crc_len else \
                (skipped, nothing, (types & known) - {fde_type}, 0)

        skip, skip_checked, plain, crc_len = type_sets()
        count = 0
        for buf, off, base in self._chunks(read, chunk_size):
            end = len(buf)
            cursor._buf = buf
            cursor._base = base
            try:
                while True:
                    # No `off + HEADER_LEN <= end` test per event (a try costs nothing in 3.11):
                    # unpacking past the end of the chunk raises struct.error, and an event that
                    # does not fit ends the chunk at the `nxt > end` test.
                    try:
                        type_code, size = type_size(buf, off)
                    except struct.error:
                        break
                    nxt = off + size
                    if nxt > end or size < HEADER_LEN:
                        if size < HEADER_LEN or size > MAX_EVENT_SIZE:
                            raise BinlogError(f"event size {size} is impossible (type {type_code})", path=self.name,
                                              offset=base + off)
                        break
                    count += 1
                    if type_code in skip:
                        off = nxt
                        continue
                    if type_code in skip_checked:
                        if crc32(buf[off:nxt]) != CRC_RESIDUE:
                            raise ChecksumError(f"CRC32 mismatch in {type_name(type_code)} event", path=self.name,
                                                offset=base + off)
                        off = nxt
                        continue
                    if cursor.__dict__:
                        cursor.__dict__.clear()
                    cursor._start = off
                    cursor._h = None
                    if type_code in plain:
                        if crc_len and crc32(buf[off:nxt]) != CRC_RESIDUE:
                            raise ChecksumError(f"CRC32 mismatch in {type_name(type_code)} event", path=self.name,
                                                offset=base + off)
                        off = nxt
                        yield cursor
                        continue
                    # A Format_description, an unknown type, or anything before the first FDE.
                    cursor.fmt = self.fmt
                    self._pos = base + off
                    self._check(cursor)
                    cursor.fmt = self.fmt
                    skip, skip_checked, plain, crc_len = type_sets()
                    off = nxt
                    if type_code in types:
                        yield cursor
            finally:
                self._off = off
                self._pos = base + off
                self.events_walked += count
                count = 0
        self.close()

    def _check(self, event: Event) -> None:
        type_code = event.type_code
        if type_code == EventType.FORMAT_DESCRIPTION:
            self.fmt = FormatDescription.parse(event.raw, path=self.name, offset=event.pos)
            event.fmt = self.fmt
            if self.verify_checksums and self.fmt.checksum_alg is not None and not crc_ok(event.raw):
                raise ChecksumError("CRC32 mismatch in Format_description event", path=self.name, offset=event.pos)
            return
        if self.fmt is None:
            if type_code == EventType.START_V3:
                raise BinlogError("binlog v1/v3 (Start_v3 event) is not supported: no Format_description event", path=self.name, offset=event.pos)
            raise BinlogError(f"no Format_description event before {event.type_name}", path=self.name, offset=event.pos)
        if self.verify_checksums and self.fmt.checksum_len and not crc_ok_in(event._buf, event._start, event.size):
            raise ChecksumError(f"CRC32 mismatch in {event.type_name} event", path=self.name, offset=event.pos)
        if type_code not in KNOWN_TYPES and not event.flags & LOG_EVENT_IGNORABLE_F:
            # Unknown and not flagged ignorable: the server would refuse it. Passing it through is
            # still safe for a filter (it is never the filter's to decide), so only flag it.
            event.__dict__["unknown_non_ignorable"] = True

    def close(self) -> None:
        """Call at end of input: a partial event left over means a truncated file."""
        if self._need_magic:
            raise TruncatedBinlogError(f"file is {len(self._buf)} bytes long, too short for the binlog magic", path=self.name, offset=0)
        left = len(self._buf) - self._off
        if left:
            if left >= HEADER_LEN:
                size = HEADER.unpack_from(self._buf, self._off)[3]
                msg = f"event size {size} runs past the end of the file ({left} bytes left)"
            else:
                msg = f"file ends inside an event header ({left} of {HEADER_LEN} bytes)"
            raise TruncatedBinlogError(msg, path=self.name, offset=self._pos)


class BinlogReader:
    """Iterates the events of one binlog file read from a file-like object, chunk by chunk.

    With `start` > 4 the stream must be positioned at that event boundary; the format is then
    taken from `fmt` (read the FDE first with `read_format_description`).
    """

    def __init__(self, stream: BinaryIO, name: str = "<binlog>", *, verify_checksums: bool = True,
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

    def walk(self, types=None) -> Iterator[EventCursor]:
        """Iterate with one reused EventCursor (see EventCursor): several times faster than
        `iter(reader)` for walks that decode few events. `types` (type codes) yields only those
        events; the others are still checked, and counted in `events_walked`."""
        return self.splitter.walk_stream(self.stream.read, self.chunk_size, types)

    @property
    def events_walked(self) -> int:
        return self.splitter.events_walked

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


def read_format_description(stream: BinaryIO, name: str = "<binlog>") -> tuple[Event, FormatDescription]:
    """The FDE at offset 4 of a binlog file (the stream is left positioned after it)."""
    splitter = EventSplitter(name)
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
            return event, splitter.fmt
