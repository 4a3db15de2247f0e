"""Integer and string encodings used inside binlog events: length-encoded ints, the MySQL
serialization library's varlen ints (tagged GTIDs), and MariaDB's compressed-field framing."""

from __future__ import annotations

import struct
import zlib

_U16 = struct.Struct("<H")
_U64 = struct.Struct("<Q")


def read_lenenc(buf: bytes, off: int) -> tuple[int, int]:
    """Decode a protocol length-encoded integer at `off`; return (value, offset after it)."""
    first = buf[off]
    if first < 0xFB:
        return first, off + 1
    if first == 0xFC:
        return _U16.unpack_from(buf, off + 1)[0], off + 3
    if first == 0xFD:
        return int.from_bytes(buf[off + 1 : off + 4], "little"), off + 4
    if first == 0xFE:
        return _U64.unpack_from(buf, off + 1)[0], off + 9
    raise ValueError(f"invalid length-encoded integer prefix 0x{first:02x}")


def encode_lenenc(value: int) -> bytes:
    if value < 0xFB:
        return bytes((value,))
    if value < 1 << 16:
        return b"\xfc" + _U16.pack(value)
    if value < 1 << 24:
        return b"\xfd" + value.to_bytes(3, "little")
    return b"\xfe" + _U64.pack(value)


# MySQL serialization library (libs/mysql/serialization) variable-length unsigned integers:
# the number of trailing one-bits in the first byte is the count of extra bytes; the value
# is the little-endian integer shifted right by the byte count. 0xFF means 8 raw bytes follow.
def read_varlen(buf: bytes, off: int) -> tuple[int, int]:
    first = buf[off]
    if first == 0xFF:
        return _U64.unpack_from(buf, off + 1)[0], off + 9
    n = 1
    while first & (1 << (n - 1)):
        n += 1
    if off + n > len(buf):
        raise ValueError("varlen integer runs past the end of the field")
    raw = int.from_bytes(buf[off : off + n], "little")
    return raw >> n, off + n


def encode_varlen(value: int) -> bytes:
    for n in range(1, 9):
        if value < 1 << (7 * n):
            raw = (value << n) | ((1 << (n - 1)) - 1)
            return raw.to_bytes(n, "little")
    return b"\xff" + _U64.pack(value)


def read_varlen_signed(buf: bytes, off: int) -> tuple[int, int]:
    raw, off = read_varlen(buf, off)
    return (-(raw >> 1) - 1 if raw & 1 else raw >> 1), off


# MariaDB compressed fields (QUERY_COMPRESSED, *_ROWS_COMPRESSED): a header byte 0x80|n
# (algorithm in bits 4-6, 0 = zlib), the uncompressed length in n BIG-endian bytes, then zlib.
def mariadb_uncompress(buf: bytes) -> bytes:
    if not buf:
        raise ValueError("empty compressed field")
    header = buf[0]
    n = header & 0x07
    if not header & 0x80 or not 1 <= n <= 4:
        raise ValueError(f"bad MariaDB compression header 0x{header:02x}")
    if (header >> 4) & 0x07:
        raise ValueError(f"unknown MariaDB compression algorithm {(header >> 4) & 0x07}")
    expected = int.from_bytes(buf[1 : 1 + n], "big")
    # At most what the header announces (+1 to see a longer stream): no decompression bomb.
    data = zlib.decompressobj().decompress(buf[1 + n :], expected + 1)
    if len(data) != expected:
        raise ValueError(f"compressed field holds {len(data)} bytes, header says {expected}")
    return data


def mariadb_compress(data: bytes) -> bytes:
    n = max(1, (len(data).bit_length() + 7) // 8)
    return bytes((0x80 | n,)) + len(data).to_bytes(n, "big") + zlib.compress(data)
