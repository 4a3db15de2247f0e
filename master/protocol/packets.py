"""MySQL client/server protocol framing and the value encodings every other module of the endpoint
uses: 4-byte packet headers with sequence ids (payloads of 16 MB and more split across packets),
length-encoded integers and strings, and the OK / ERR / EOF / text result-set packets.

No maintained Python library serves the replication side of the protocol: mysql-mimic (the one
server-side library on PyPI) dispatches a fixed set of commands (no COM_REGISTER_SLAVE,
COM_BINLOG_DUMP or COM_BINLOG_DUMP_GTID) on asyncio, while the dump service is thread based. So
this small layer is written by hand, after the protocol documentation of MySQL and MariaDB."""

from __future__ import annotations

import socket
import struct
import time
from collections.abc import Sequence

from dumpfilter.codec.packing import encode_lenenc

MAX_PAYLOAD = 0xFFFFFF  # a packet of exactly this length says "more of the payload follows"
# A replica's commands are small (the largest is COM_BINLOG_DUMP_GTID with its GTID set: 16 bytes
# an interval, so 1 MiB holds 65 000 of them); a client announcing more than this is refused
# before it is read into memory. The endpoint's max_allowed_packet (--mysql-max-packet).
MAX_COMMAND_BYTES = 1 << 20

SERVER_STATUS_AUTOCOMMIT = 0x0002

# column types of the text result sets this server sends
TYPE_LONGLONG = 0x08
TYPE_VAR_STRING = 0xFD
CHARSET_UTF8 = 33      # utf8_general_ci (what MySQL and MariaDB use for result metadata)
CHARSET_BINARY = 63


class ProtocolError(Exception):
    """A client sent something that is not the protocol (a broken header, a truncated field)."""


class PacketTooLarge(ProtocolError):
    """A command longer than max_allowed_packet (MySQL's ER_NET_PACKET_TOO_LARGE): the rest of it
    is never read, so the connection cannot go on."""


class ConnectionClosed(Exception):
    """The peer closed the connection (or it broke) while a packet was being read or written."""


class ReadTimeout(ConnectionClosed):
    """A read did not complete before its deadline (connect_timeout during the handshake,
    wait_timeout between commands)."""


# -- value encodings -------------------------------------------------------------------------

def lenenc_str(value: bytes | str) -> bytes:
    data = value.encode("utf-8") if isinstance(value, str) else value
    return encode_lenenc(len(data)) + data


class Reader:
    """Reads fields from one payload; every overrun is a ProtocolError naming the field."""

    def __init__(self, data: bytes):
        self.data, self.at = data, 0

    def remaining(self) -> int:
        return len(self.data) - self.at

    def take(self, n: int, what: str) -> bytes:
        if n < 0 or self.at + n > len(self.data):
            raise ProtocolError(f"{what}: the packet ends after {len(self.data)} bytes")
        out = self.data[self.at:self.at + n]
        self.at += n
        return out

    def u8(self, what: str) -> int:
        return self.take(1, what)[0]

    def u16(self, what: str) -> int:
        return int.from_bytes(self.take(2, what), "little")

    def u32(self, what: str) -> int:
        return int.from_bytes(self.take(4, what), "little")

    def u64(self, what: str) -> int:
        return int.from_bytes(self.take(8, what), "little")

    def lenenc(self, what: str) -> int:
        first = self.u8(what)
        if first < 0xFB:
            return first
        if first == 0xFC:
            return self.u16(what)
        if first == 0xFD:
            return int.from_bytes(self.take(3, what), "little")
        if first == 0xFE:
            return self.u64(what)
        raise ProtocolError(f"{what}: 0x{first:02x} is not a length-encoded integer")

    def lenenc_bytes(self, what: str) -> bytes:
        return self.take(self.lenenc(what), what)

    def nul_str(self, what: str) -> bytes:
        end = self.data.find(b"\0", self.at)
        if end < 0:
            raise ProtocolError(f"{what}: no terminating NUL byte")
        out = self.data[self.at:end]
        self.at = end + 1
        return out

    def rest(self) -> bytes:
        out = self.data[self.at:]
        self.at = len(self.data)
        return out


# -- generic response packets ------------------------------------------------------------------

# OK: no rows affected, no insert id, autocommit, no warnings; EOF: no warnings, autocommit.
OK_PACKET = b"\x00\x00\x00" + struct.pack("<HH", SERVER_STATUS_AUTOCOMMIT, 0)
EOF_PACKET = b"\xfe" + struct.pack("<HH", 0, SERVER_STATUS_AUTOCOMMIT)


# The endpoint's MySQL error codes whose SQLSTATE is not HY000, each with the one MySQL's error list
# (errmsg-utf8.txt) pairs with it: a client reads the class of an error from it (08: the connection).
ER_CON_COUNT_ERROR, ER_HANDSHAKE_ERROR, ER_ACCESS_DENIED_ERROR, ER_UNKNOWN_COM_ERROR = 1040, 1043, 1045, 1047
ER_SERVER_SHUTDOWN, ER_TOO_LONG_IDENT, ER_PARSE_ERROR, ER_NET_PACKET_TOO_LARGE = 1053, 1059, 1064, 1153
ER_TOO_MANY_USER_CONNECTIONS, ER_NOT_SUPPORTED_YET = 1203, 1235
SQLSTATES = {ER_CON_COUNT_ERROR: "08004", ER_HANDSHAKE_ERROR: "08S01", ER_ACCESS_DENIED_ERROR: "28000",
             ER_UNKNOWN_COM_ERROR: "08S01", ER_SERVER_SHUTDOWN: "08S01", ER_TOO_LONG_IDENT: "42000",
             ER_PARSE_ERROR: "42000", ER_NET_PACKET_TOO_LARGE: "08S01", ER_TOO_MANY_USER_CONNECTIONS: "42000",
             ER_NOT_SUPPORTED_YET: "42000"}


def err_packet(code: int, message: str) -> bytes:
    # Protocol 4.1: 0xff, error code, '#', 5-character SQLSTATE, message (no terminator).
    text = message.encode("utf-8", "replace")[:2000]
    return b"\xff" + struct.pack("<H", code) + b"#" + SQLSTATES.get(code, "HY000").encode("ascii") + text


def column_definition(name: str, column_type: int = TYPE_VAR_STRING, length: int = 255) -> bytes:
    charset = CHARSET_BINARY if column_type == TYPE_LONGLONG else CHARSET_UTF8
    return (lenenc_str("def") + lenenc_str("") + lenenc_str("") + lenenc_str("") + lenenc_str(name) + lenenc_str(name)
            + b"\x0c" + struct.pack("<HIBHB", charset, length, column_type, 0, 0) + b"\0\0")


def text_result_set(columns: Sequence[tuple[str, int]], rows: Sequence[Sequence[str | int | None]]) -> list[bytes]:
    """The packets of a text result set (column count, definitions, EOF, rows, EOF): the client
    did not get CLIENT_DEPRECATE_EOF, so both EOF packets are sent."""
    packets = [encode_lenenc(len(columns))]
    packets += [column_definition(name, kind) for name, kind in columns]
    packets.append(EOF_PACKET)
    for row in rows:
        packets.append(b"".join(b"\xfb" if value is None else lenenc_str(str(value)) for value in row))
    packets.append(EOF_PACKET)
    return packets


# -- framing ------------------------------------------------------------------------------------

class PacketStream:
    """One connection's packets. `seq` is the sequence id of the next packet: a command starts
    at 0 and each packet of the exchange (in either direction) takes the next id, mod 256."""

    def __init__(self, sock: socket.socket):
        self.sock = sock
        self.seq = 0

    def _recv_exact(self, n: int, deadline: float | None) -> bytes:
        """`n` bytes. `deadline` (time.monotonic()) bounds the whole read, however the client
        trickles its bytes: a per-recv timeout alone lets one byte every few seconds hold the
        socket for ever."""
        chunks, need = [], n
        timeout = self.sock.gettimeout()
        try:
            while need:
                if deadline is not None:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        raise ReadTimeout("no complete packet before the deadline")
                    self.sock.settimeout(left)
                try:
                    chunk = self.sock.recv(min(need, 1 << 20))
                except TimeoutError:
                    if deadline is None:
                        raise ConnectionClosed("timed out") from None
                    continue  # the loop's check raises ReadTimeout once the deadline is past
                except OSError as exc:
                    raise ConnectionClosed(str(exc)) from None
                if not chunk:
                    raise ConnectionClosed("the client closed the connection")
                chunks.append(chunk)
                need -= len(chunk)
        finally:
            if deadline is not None:
                self.sock.settimeout(timeout)
        return b"".join(chunks)

    def read(self, limit: int = MAX_COMMAND_BYTES, deadline: float | None = None) -> bytes:
        """One payload (joined across 16 MB packets), complete before `deadline` (a
        time.monotonic() value; ReadTimeout after it). A client sequence id out of order is not
        checked: a real server only warns ("Got packets out of order") and so do we not care."""
        parts, total = [], 0
        while True:
            header = self._recv_exact(4, deadline)
            length = header[0] | header[1] << 8 | header[2] << 16
            self.seq = (header[3] + 1) & 0xFF
            total += length
            if total > limit:
                raise PacketTooLarge(f"a packet of more than {limit} bytes (a replica's commands are small)")
            parts.append(self._recv_exact(length, deadline) if length else b"")
            if length < MAX_PAYLOAD:
                return b"".join(parts)

    def frame(self, payload: bytes) -> bytes:
        """`payload` as packets, taking sequence ids."""
        out = []
        at = 0
        while True:
            chunk = payload[at:at + MAX_PAYLOAD]
            out.append(struct.pack("<I", len(chunk))[:3] + bytes((self.seq,)) + chunk)
            self.seq = (self.seq + 1) & 0xFF
            at += len(chunk)
            if len(chunk) < MAX_PAYLOAD:
                return b"".join(out)

    def write(self, *payloads: bytes) -> None:
        data = b"".join(self.frame(p) for p in payloads)
        self.send_raw(data)

    def send_raw(self, data: bytes) -> None:
        try:
            self.sock.sendall(data)
        except OSError as exc:  # broken pipe, reset, or the send timeout of a replica that stopped reading
            raise ConnectionClosed(str(exc) or type(exc).__name__) from None
