"""What a lazy decoder's failure on a malformed event says: the event's fault in the codec's words
(its body too short for the fixed fields its type starts with, a field past the body's end, a value
out of range), never Python's (`unpack_from requires a buffer of at least 13 bytes`, `IndexError`,
`byte must be in range(0, 256)`). `Event`'s decoders turn what they raise into this text."""

from __future__ import annotations

import linecache
import struct
import zlib

from dumpfilter.codec.constants import EventType

# The fixed fields each type's decoder reads first, in bytes of body (after the common header,
# before the CRC): a shorter body is said to be short, with both sizes.
MIN_BODY: dict[int, int] = {
    EventType.MARIADB_GTID: 13,        # seq_no u64, domain u32, flags2 u8
    EventType.GTID: 25,                # flags u8, source uuid [16], gno i64
    EventType.ANONYMOUS_GTID: 25,
    EventType.GTID_TAGGED: 3,          # version u8, payload size and last non-ignorable field (varlen)
    EventType.ROTATE: 8,               # position u64
    EventType.PREVIOUS_GTIDS: 8,       # n_sids u64
    EventType.MARIADB_GTID_LIST: 4,    # count u32
    EventType.BINLOG_CHECKPOINT: 4,    # name length u32
    EventType.RAND: 16,                # seed1, seed2 u64
}


def raised_in_codec_words(exc: BaseException) -> bool:
    """Whether a `raise` statement raised `exc` (a ValueError of the codec's: a bad length prefix,
    a varlen past its field, a GTID set's count), not a builtin the decoder called
    (`bytearray.append`, `bytes.index`, whose messages are Python's)."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    if tb is None:
        return False
    return linecache.getline(tb.tb_frame.f_code.co_filename, tb.tb_lineno).lstrip().startswith("raise ")


def problem(type_code: int, body_len: int, exc: BaseException) -> str:
    """What is wrong with an event of `type_code` whose body (as its size says) is `body_len`
    bytes, for `exc`, what its decoder raised on it (IndexError, struct.error, ValueError,
    zlib.error, OverflowError)."""
    need = MIN_BODY.get(type_code, 0)
    if body_len < need:
        return f"body of {body_len} bytes, needs {need}"
    if isinstance(exc, (struct.error, IndexError)):
        return f"a field runs past the end of its {body_len}-byte body"
    if isinstance(exc, ValueError) and not isinstance(exc, UnicodeError) and raised_in_codec_words(exc):
        return str(exc)
    if isinstance(exc, zlib.error):
        return "its compressed field does not decompress"
    return "a field holds a value out of range"
