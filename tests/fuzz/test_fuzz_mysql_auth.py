"""Fuzz target: the MySQL endpoint's connection phase (issue #31): SSL Requests, Handshake
Responses, AuthSwitch responses, caching_sha2_password's full-auth packets (public key requests,
RSA ciphertexts, cleartext passwords) made of hostile bytes. Offline, the parsers and the
exchange raise only ProtocolError (or end the conversation) and never let a client in; against a
live endpoint with TLS, every hostile connection gets one ERR packet with a typed code (never
1105, an internal error) or a closed socket, and a real client still logs in after them all."""

from __future__ import annotations

import socket
import struct

import pymysql
import pytest
from hypothesis import given
from hypothesis import strategies as st

from dumpfilter.master.serve.grpc_server import create_server
from dumpfilter.master.endpoint import MysqlEndpoint
from dumpfilter.master.endpoint.auth import Account, Authenticator, Conversation, RsaKeys
from dumpfilter.master.endpoint.handshake import is_ssl_request, parse_handshake_response
from dumpfilter.master.protocol.packets import ConnectionClosed, PacketStream, ProtocolError
from dumpfilter.master.endpoint.tls import endpoint_tls
from dumpfilter.master.policy import MYSQL_AUTH_PLUGINS
from dumpfilter.rules.policy_gates import PLAIN, Secret
from dumpfilter.workload.generator import WorkloadSpec, generate
from tests.fuzz.fuzz_support import FUZZ, TARGET_TIMEOUT
from tests.support.tls_helpers import make_pki
import contextlib

pytestmark = pytest.mark.timeout(TARGET_TIMEOUT)
RSA = RsaKeys()
CAPS = 0x00AAA20F | 0x00080000          # protocol 4.1, secure connection, plugin auth (a MariaDB replica's)
SSL = 0x00000800
FUZZ_FROM = "127.0.0.2"  # the hostile connections' address (the real client's is 127.0.0.1)
PLUGIN_NAMES = st.sampled_from([*MYSQL_AUTH_PLUGINS, "sha256_password", "dialog", "", "x" * 300])
HOSTILE = st.one_of(st.binary(max_size=600), st.sampled_from([b"", b"\0", b"\x02", b"\x01", b"\x04", b"\xfe",
                                                             b"\x02" * 256, b"\0" * 256, b"s3cret\0"]))


def _handshake(user: bytes, plugin: str, auth: bytes, caps: int = CAPS) -> bytes:
    return (struct.pack("<IIB", caps, 1 << 24, 45) + b"\0" * 23 + user + b"\0" + bytes((len(auth) & 0xFF,))
            + auth[:255] + plugin.encode() + b"\0")


@given(st.binary(max_size=300), st.integers(0, 0xFFFFFFFF))
@FUZZ
def test_fuzz_ssl_requests_and_handshake_responses(data, caps):
    for payload in (data, struct.pack("<I", caps) + data[:28], struct.pack("<I", caps | SSL) + data):
        for parse in (is_ssl_request, parse_handshake_response):
            with contextlib.suppress(ProtocolError):
                parse(payload)


@given(st.sampled_from(MYSQL_AUTH_PLUGINS + ("unknown",)), st.lists(HOSTILE, max_size=4), st.booleans(),
       st.sampled_from([("sha2", "pw"), ("nopass", None), ("decoy", "x")]))
@FUZZ
def test_fuzz_the_exchange_never_lets_hostile_bytes_in(plugin, packets, secure, who):
    name, password = who
    auth = Authenticator(RSA)
    account = Account(name, MYSQL_AUTH_PLUGINS, None if password is None else Secret(PLAIN, password),
                      decoy=name == "decoy")
    sent: list[bytes] = []
    queue = list(packets)

    def read() -> bytes:
        if not queue:
            raise ConnectionClosed("the client sent nothing more")
        return queue.pop(0)

    first = queue.pop(0) if queue else b""
    try:
        outcome = auth.authenticate(Conversation(lambda p: sent.append(p), read), account, plugin, first, b"n" * 20,
                                    secure)
    except (ProtocolError, ConnectionClosed):
        return
    # Hostile bytes pass only where nothing is checked: an identity without a password.
    assert not outcome.ok or password is None, (outcome, packets)
    assert all(isinstance(p, bytes) and p for p in sent)


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("fuzz-mysql-auth")
    pki = make_pki(tmp / "pki")
    if pki is None:
        pytest.skip("openssl is not installed")
    generate(WorkloadSpec(seed=2, transactions=10, max_binlog_size=60_000), tmp / "binlogs")
    policy = tmp / "policy.toml"
    policy.write_text('[slave.sha2]\npassword = "pw"\nallow = ["%.%"]\nmysql_auth = ["caching_sha2_password"]\n'
                      '[slave.native]\npassword = "pw"\nallow = ["%.%"]\nmysql_auth = ["mysql_native_password"]\n'
                      '[login]\nhold_seconds = 0\n')   # a refused login answered at once: the fuzz reads 0.05 s
    master, _port = create_server(tmp / "binlogs", "127.0.0.1:0", policy=str(policy))
    endpoint = MysqlEndpoint(master.service, "127.0.0.1:0", rsa_keys=RSA,
                             tls=endpoint_tls(pki / "server.crt", pki / "server.key"))
    # The real client logs in once before the fuzz: its address is then one this identity is
    # known from, which a flood from elsewhere cannot lock out (master.login_guard). The fuzz
    # comes from 127.0.0.2.
    pymysql.connect(host="127.0.0.1", port=endpoint.port, user="sha2", password="pw", ssl_disabled=True).close()
    yield endpoint
    endpoint.stop()
    master.stop(0)


def _reply(port: int, packets: list[bytes]) -> bytes | None:
    """Send `packets` after the server's handshake (framed with sequence ids from 1); the first
    ERR packet the server sends, or None when it closed or waits for more."""
    with socket.create_connection(("127.0.0.1", port), timeout=10, source_address=(FUZZ_FROM, 0)) as sock:
        stream = PacketStream(sock)
        assert stream.read()[0] == 0x0A
        try:
            for packet in packets:
                stream.write(packet)
                sock.settimeout(0.05)
                try:
                    reply = stream.read(limit=1 << 20)
                except ConnectionClosed:
                    continue
                finally:
                    sock.settimeout(10)
                if reply[:1] == b"\xff":
                    return reply
                if reply[:1] == b"\x00":
                    raise AssertionError(f"hostile bytes were let in: {packets!r}")
        except ConnectionClosed:
            return None
    return None


@given(st.one_of(
    # an SSL Request followed by bytes that are no TLS ClientHello
    st.builds(lambda caps, rest: [struct.pack("<IIB", caps | SSL | 0x200, 1 << 24, 45) + b"\0" * 23, *rest],
              st.integers(0, 0xFFFFFFFF), st.lists(HOSTILE, max_size=2)),
    # a Handshake Response for a real identity, then hostile AuthSwitch / full-auth packets
    st.builds(lambda user, plugin, auth, rest: [_handshake(user, plugin, auth), *rest],
              st.sampled_from([b"sha2", b"native", b"nobody", b""]), PLUGIN_NAMES, HOSTILE,
              st.lists(HOSTILE, max_size=3)),
    st.lists(HOSTILE, min_size=1, max_size=3)))
@FUZZ
def test_fuzz_live_connection_phase(live, packets):
    reply = _reply(live.port, packets)
    if reply is not None:
        code = struct.unpack("<H", reply[1:3])[0]
        # 1129: the login guard refuses a flooding address without a check (host blocked)
        assert code in (1043, 1045, 1129, 1153, 3159), reply


def test_the_endpoint_still_serves_after_the_live_fuzz(live):
    before = sum(n for (_plugin, _path, ok), n in live.auth.counts.items() if ok)
    conn = pymysql.connect(host="127.0.0.1", port=live.port, user="sha2", password="pw", ssl_disabled=True)
    conn.close()
    assert live.auth.counts.get(("caching_sha2_password", "full-rsa", True), 0) >= 1
    assert sum(n for (_plugin, _path, ok), n in live.auth.counts.items() if ok) == before + 1
