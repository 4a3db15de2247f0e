"""CRC32 event checksums as the server computes them (zlib polynomial, over every byte but the last four)."""

from __future__ import annotations

import struct
import zlib

from dumpfilter.codec.constants import CHECKSUM_LEN, EventType, LOG_EVENT_BINLOG_IN_USE_F

_U32 = struct.Struct("<I")


def compute_crc(event_without_crc: bytes) -> int:
    return zlib.crc32(event_without_crc) & 0xFFFFFFFF


def crc_input(raw: bytes) -> bytes:
    """The bytes the server's CRC covers. For a Format_description event the server computes
    the CRC with LOG_EVENT_BINLOG_IN_USE_F cleared: it sets the flag when it opens the file and
    clears it in place on close without recomputing the CRC (event_checksum_test)."""
    body = raw[:-CHECKSUM_LEN]
    if raw[4] == EventType.FORMAT_DESCRIPTION and raw[17] & LOG_EVENT_BINLOG_IN_USE_F:
        body = body[:17] + bytes((raw[17] & ~LOG_EVENT_BINLOG_IN_USE_F,)) + body[18:]
    return body


def crc_ok(raw: bytes) -> bool:
    stored: int = _U32.unpack_from(raw, len(raw) - CHECKSUM_LEN)[0]
    return compute_crc(crc_input(raw)) == stored


def with_crc(event_without_crc: bytes) -> bytes:
    """Append the CRC of `event_without_crc` (for an FDE, as if IN_USE were clear)."""
    probe = event_without_crc + b"\0\0\0\0"
    return event_without_crc + _U32.pack(compute_crc(crc_input(probe)))
