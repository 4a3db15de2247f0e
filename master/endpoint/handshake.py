"""The connection phase's packets: the server's Initial Handshake (protocol v10, naming
caching_sha2_password as a MySQL 8.4 server does, CLIENT_SSL when TLS is on), the client's SSL
Request and Handshake Response 41, and the mysql_native_password scramble check. The exchange that
follows (auth.py) and the TLS wrap (tls.py) live apart. Nothing here knows about replication."""

from __future__ import annotations

import hashlib
import hmac
import os
import struct
from dataclasses import dataclass

from dumpfilter.master.protocol.packets import CHARSET_UTF8, SERVER_STATUS_AUTOCOMMIT, ProtocolError, Reader

# capability flags (the subset this server announces or reads)
CLIENT_LONG_PASSWORD = 0x00000001
CLIENT_FOUND_ROWS = 0x00000002
CLIENT_LONG_FLAG = 0x00000004
CLIENT_CONNECT_WITH_DB = 0x00000008
CLIENT_PROTOCOL_41 = 0x00000200
CLIENT_SSL = 0x00000800
CLIENT_TRANSACTIONS = 0x00002000
CLIENT_SECURE_CONNECTION = 0x00008000
CLIENT_MULTI_STATEMENTS = 0x00010000
CLIENT_MULTI_RESULTS = 0x00020000
CLIENT_PLUGIN_AUTH = 0x00080000
CLIENT_CONNECT_ATTRS = 0x00100000
CLIENT_PLUGIN_AUTH_LENENC_CLIENT_DATA = 0x00200000

NATIVE_PASSWORD = "mysql_native_password"
DEFAULT_PLUGIN = "caching_sha2_password"   # MySQL 8.4's default_authentication_plugin
SSL_REQUEST_BYTES = 32  # capabilities, max packet, character set, 23 reserved bytes: no user name yet
# CLIENT_LONG_PASSWORD set means "a MySQL server": MariaDB clients then do not read MariaDB's
# extended capabilities from the reserved bytes, which this server does not offer.
SERVER_CAPABILITIES = (CLIENT_LONG_PASSWORD | CLIENT_FOUND_ROWS | CLIENT_LONG_FLAG | CLIENT_CONNECT_WITH_DB
                       | CLIENT_PROTOCOL_41 | CLIENT_TRANSACTIONS | CLIENT_SECURE_CONNECTION
                       | CLIENT_MULTI_STATEMENTS | CLIENT_MULTI_RESULTS | CLIENT_PLUGIN_AUTH
                       | CLIENT_CONNECT_ATTRS | CLIENT_PLUGIN_AUTH_LENENC_CLIENT_DATA)


def new_scramble() -> bytes:
    """20 random bytes without NUL (clients read the second part as a NUL-terminated string)."""
    out = bytearray()
    while len(out) < 20:
        out += bytes(b for b in os.urandom(32) if b not in (0,))
    return bytes(out[:20])


def initial_handshake(server_version: str, connection_id: int, scramble: bytes, tls: bool = False) -> bytes:
    caps = SERVER_CAPABILITIES | (CLIENT_SSL if tls else 0)
    return (b"\x0a" + server_version.encode("ascii", "replace") + b"\0"
            + struct.pack("<I", connection_id & 0xFFFFFFFF) + scramble[:8] + b"\0"
            + struct.pack("<HBHH", caps & 0xFFFF, CHARSET_UTF8, SERVER_STATUS_AUTOCOMMIT, caps >> 16)
            + bytes((len(scramble) + 1,)) + b"\0" * 10
            + scramble[8:] + b"\0" + DEFAULT_PLUGIN.encode() + b"\0")


@dataclass(frozen=True)
class HandshakeResponse:
    user: str
    auth_response: bytes
    plugin: str


def is_ssl_request(payload: bytes) -> bool:
    """The client's SSL Request: the first 32 bytes of a Handshake Response, CLIENT_SSL set, and
    nothing after them (the rest comes again inside TLS)."""
    if len(payload) != SSL_REQUEST_BYTES:
        return False
    caps = Reader(payload).u32("capability flags")
    if not caps & CLIENT_PROTOCOL_41:
        raise ProtocolError("the client does not speak protocol 4.1 (MySQL 4.1 and later do)")
    return bool(caps & CLIENT_SSL)


def parse_handshake_response(payload: bytes) -> HandshakeResponse:
    r = Reader(payload)
    caps = r.u32("capability flags")
    if not caps & CLIENT_PROTOCOL_41:
        raise ProtocolError("the client does not speak protocol 4.1 (MySQL 4.1 and later do)")
    r.u32("max packet size")
    r.u8("character set")
    r.take(23, "reserved bytes")
    user = r.nul_str("user name").decode("utf-8", "replace")
    if caps & CLIENT_PLUGIN_AUTH_LENENC_CLIENT_DATA:
        auth = r.lenenc_bytes("auth response")
    elif caps & CLIENT_SECURE_CONNECTION:
        auth = r.take(r.u8("auth response length"), "auth response")
    else:
        auth = r.nul_str("auth response")
    if caps & CLIENT_CONNECT_WITH_DB and r.remaining():
        r.nul_str("database")  # (a replica names none; nothing reads it)
    plugin = r.nul_str("auth plugin").decode("ascii", "replace") if caps & CLIENT_PLUGIN_AUTH and r.remaining() else ""
    if caps & CLIENT_CONNECT_ATTRS and r.remaining():  # read only to refuse a malformed block, as a server does
        block = Reader(r.lenenc_bytes("connection attributes"))
        while block.remaining():
            block.lenenc_bytes("attribute name")
            block.lenenc_bytes("attribute value")
    # A client without CLIENT_PLUGIN_AUTH answers with the native scramble (pre-5.5 clients).
    return HandshakeResponse(user, auth, plugin or NATIVE_PASSWORD)


def native_scramble_matches(stage2: bytes, scramble: bytes, response: bytes) -> bool:
    """mysql_native_password checked as the server does (check_scramble), from what it stores:
    stage2 = SHA1(SHA1(pw)) (b"" for an empty password). The client's answer XOR
    SHA1(scramble + stage2) is SHA1(pw), whose SHA1 must be stage2."""
    if not stage2:
        return response == b""
    if len(response) != 20:
        return False
    mask = hashlib.sha1(scramble + stage2).digest()
    stage1 = bytes(a ^ b for a, b in zip(response, mask))
    return hmac.compare_digest(hashlib.sha1(stage1).digest(), stage2)
