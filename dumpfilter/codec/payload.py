"""MySQL 8.0.20+ Transaction_payload events: their zstd-compressed inner events, and re-packing
a filtered set of inner events into a new payload."""

from __future__ import annotations

from dumpfilter.codec.constants import HEADER_LEN
from dumpfilter.errors import BinlogError
from dumpfilter.codec.event import HEADER, Event
from dumpfilter.codec.packing import encode_lenenc
from dumpfilter._core import payload_bytes

PAYLOAD_SIZE, COMPRESSION_TYPE, UNCOMPRESSED_SIZE = 1, 2, 3
ZSTD, NONE = 0, 255


def payload_events(event: Event) -> list[Event]:
    """The inner events: no CRC, log_pos 0, positions relative to the uncompressed buffer."""
    # Decompressed by the compiled core (zstd), bounded by the event's own uncompressed size.
    try:
        data = payload_bytes(event.body)
    except ValueError as exc:
        raise BinlogError(str(exc), offset=event.pos) from None
    assert event.fmt is not None  # a Transaction_payload is read after its file's FDE
    inner_fmt = event.fmt.without_checksums()
    out = []
    i = 0
    while i + HEADER_LEN <= len(data):
        header = HEADER.unpack_from(data, i)
        size = header[3]
        if size < HEADER_LEN or i + size > len(data):
            raise BinlogError(f"Transaction_payload inner event at {i} has bad size {size}", offset=event.pos)
        out.append(Event(data[i : i + size], i, inner_fmt, header))
        i += size
    if i != len(data):
        raise BinlogError("Transaction_payload ends inside an inner event", offset=event.pos)
    return out


def repack_payload(event: Event, inner: list[Event]) -> Event:
    """A new Transaction_payload holding `inner`, compressed as the original was."""
    fields, _ = event.transaction_payload
    compression = fields.get(COMPRESSION_TYPE, NONE)
    data = plain = b"".join(e.raw for e in inner)
    if compression == ZSTD:
        import zstandard  # only for a compressed payload: not every run of the codec loads it

        data = zstandard.ZstdCompressor().compress(plain)

    def field(kind: int, value: int) -> bytes:
        encoded = encode_lenenc(value)
        return bytes((kind,)) + encode_lenenc(len(encoded)) + encoded

    body = field(PAYLOAD_SIZE, len(data)) + field(COMPRESSION_TYPE, compression)
    if compression == ZSTD:
        body += field(UNCOMPRESSED_SIZE, len(plain))
    body += b"\0" + data
    return event.with_body(body)
