"""The Format_description event: server version, flavour, checksum algorithm and the post-header
length table that tells every other event's layout."""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass, field, replace

from dumpfilter.codec.constants import (
    CHECKSUM_CRC32,
    CHECKSUM_LEN,
    CHECKSUM_OFF,
    HEADER_LEN,
    EventType,
)
from dumpfilter.errors import BinlogError

# binlog_version u16, server_version char[50], create_timestamp u32, common_header_len u8
_FDE_FIXED = struct.Struct("<H50sIB")
_VERSION_RE = re.compile(rb"^(\d+)\.(\d+)\.(\d+)")


def _version_tuple(server_version: str) -> tuple[int, int, int]:
    m = _VERSION_RE.match(server_version.encode())
    return tuple(int(x) for x in m.groups()) if m else (0, 0, 0)  # type: ignore[return-value]


def is_checksum_aware(server_version: str) -> bool:
    """Servers from MySQL 5.6.1 and MariaDB 5.3.0 on end their FDE with the checksum algorithm
    byte and a CRC, even when binlog_checksum=NONE (Log_event_footer::get_checksum_alg)."""
    version = _version_tuple(server_version)
    if "mariadb" in server_version.lower():
        return version >= (5, 3, 0)
    return version >= (5, 6, 1)


@dataclass(frozen=True, slots=True)
class FormatDescription:
    """What a reader needs to know about the events after an FDE."""

    server_version: str
    created: int
    post_header_lens: bytes
    checksum_alg: int | None  # None for servers that predate checksums
    # The event itself, for the compiled scanner to adopt when a read starts past it.
    raw: bytes = field(default=b"", compare=False, repr=False)

    @property
    def flavor(self) -> str:
        return "mariadb" if "mariadb" in self.server_version.lower() else "mysql"

    @property
    def version(self) -> tuple[int, int, int]:
        return _version_tuple(self.server_version)

    @property
    def checksum_len(self) -> int:
        """Bytes of CRC at the end of every non-FDE event."""
        return CHECKSUM_LEN if self.checksum_alg == CHECKSUM_CRC32 else 0

    @property
    def fde_checksum_len(self) -> int:
        """Bytes of CRC at the end of the FDE itself: present whenever the alg byte is."""
        return CHECKSUM_LEN if self.checksum_alg is not None else 0

    def post_header_len(self, type_code: int) -> int:
        if 1 <= type_code <= len(self.post_header_lens):
            return self.post_header_lens[type_code - 1]
        return 0

    def table_id_len(self, type_code: int) -> int:
        """Table ids are 6 bytes, except in 5.1 pre-GA servers whose post-header is 6 bytes long
        (a 4-byte id plus 2 flag bytes)."""
        return 4 if self.post_header_len(type_code) == 6 else 6

    def without_checksums(self) -> FormatDescription:
        """The format of events nested in a Transaction_payload: same layout, no CRC."""
        return replace(self, checksum_alg=CHECKSUM_OFF, raw=b"")

    @classmethod
    def parse(cls, raw: bytes, *, path: str | None = None, offset: int | None = None) -> FormatDescription:
        if raw[4] != EventType.FORMAT_DESCRIPTION:
            raise BinlogError("expected a Format_description event", path=path, offset=offset)
        if len(raw) < HEADER_LEN + _FDE_FIXED.size:
            raise BinlogError(f"Format_description event too short ({len(raw)} bytes)", path=path, offset=offset)
        binlog_version, version_raw, created, header_len = _FDE_FIXED.unpack_from(raw, HEADER_LEN)
        if binlog_version != 4:
            raise BinlogError(f"binlog format version {binlog_version} is not supported (only v4)", path=path, offset=offset)
        if header_len != HEADER_LEN:
            raise BinlogError(f"common header length {header_len} is not 19", path=path, offset=offset)
        server_version = version_raw.split(b"\0", 1)[0].decode("ascii", "replace")
        aware = is_checksum_aware(server_version)
        end = len(raw) - CHECKSUM_LEN - 1 if aware else len(raw)  # (the algorithm's byte, then the CRC)
        return cls(server_version, created, bytes(raw[HEADER_LEN + _FDE_FIXED.size : end]), raw[end] if aware else None,
                   bytes(raw))
