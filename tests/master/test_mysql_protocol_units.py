"""The MySQL endpoint's pieces without a server: framing across the 16 MB packet limit, the
mysql_native_password check against pymysql's client side, GTID sets as MySQL encodes them, the
connect-time query answers, and hostile bytes (only the module's own error types come out)."""

from __future__ import annotations

import hashlib
import socket
import struct
import threading
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pymysql._auth import scramble_native_password

from dumpfilter.codec.gtid import MysqlGtidSet
from dumpfilter.master.endpoint.dump import (
    decode_gtid_set,
    parse_binlog_dump,
    parse_binlog_dump_gtid,
    parse_register_slave,
)
from dumpfilter.master.endpoint.handshake import native_scramble_matches, new_scramble, parse_handshake_response
from dumpfilter.master.protocol.packets import MAX_PAYLOAD, PacketStream, ProtocolError, Reader
from dumpfilter.master.endpoint.queries import QueryError, ServerFacts, Session, _like_matcher
import contextlib

FACTS = ServerFacts(server_id=7, server_uuid="3e11fa47-71ca-11e1-9e33-c80aa9429562", version="10.11.19-MariaDB-log",
                    checksum="CRC32")


def _like(pattern: str, name: str) -> bool:
    return bool(_like_matcher(pattern)(name))


def native_password_matches(password: str, scramble: bytes, response: bytes) -> bool:
    """mysql_native_password from the password: the server's stored stage2 = SHA1(SHA1(pw))
    (b"" for an empty password), checked as the endpoint checks it."""
    stage2 = hashlib.sha1(hashlib.sha1(password.encode("utf-8")).digest()).digest() if password else b""
    return native_scramble_matches(stage2, scramble, response)


def encode_gtid_set(text: str) -> bytes:
    """MySQL's binary Gtid_set for `text` (n_sids, per sid its uuid and [start, end) intervals),
    written here independently of the endpoint, which only decodes one."""
    sids = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        sid, *ranges = part.split(":")
        intervals = []
        for r in ranges:
            start, _, end = r.partition("-")
            intervals.append((int(start), int(end or start) + 1))
        sids.append(uuid.UUID(sid).bytes + struct.pack("<Q", len(intervals))
                    + b"".join(struct.pack("<QQ", a, b) for a, b in intervals))
    return struct.pack("<Q", len(sids)) + b"".join(sids)


def test_framing_splits_and_joins_payloads_at_16_mb():
    a, b = socket.socketpair()
    try:
        writer, reader = PacketStream(a), PacketStream(b)
        payloads = [b"", b"x" * 10, b"y" * MAX_PAYLOAD, b"z" * (MAX_PAYLOAD + 5)]
        thread = threading.Thread(target=lambda: [writer.write(p) for p in payloads])
        thread.start()
        got = [reader.read(limit=1 << 26) for _ in payloads]
        thread.join()
        assert got == payloads
        # exactly 16 MB - 1 needs an empty packet after it; each packet takes a sequence id
        assert writer.seq == (1 + 1 + 2 + 2) % 256
    finally:
        a.close()
        b.close()


def test_oversized_commands_are_refused_before_they_are_read():
    a, b = socket.socketpair()
    try:
        a.sendall(b"\xff\xff\xff\x00")
        with pytest.raises(ProtocolError, match="more than"):
            PacketStream(b).read(limit=1 << 20)
    finally:
        a.close()
        b.close()


@given(st.text(max_size=40), st.binary(min_size=20, max_size=20))
@settings(max_examples=50)
def test_native_password_matches_what_pymysql_sends(password, scramble):
    response = scramble_native_password(password.encode("utf-8"), scramble) if password else b""
    assert native_password_matches(password, scramble, response)
    assert not native_password_matches(password + "x", scramble, response)


def test_scrambles_have_no_nul_byte():
    assert all(len(s) == 20 and 0 not in s for s in (new_scramble() for _ in range(200)))


_SID = st.uuids().map(str)
_RANGES = st.lists(st.tuples(st.integers(1, 1 << 40), st.integers(0, 1000)), min_size=1, max_size=4)


@given(st.dictionaries(_SID, _RANGES, max_size=4))
def test_gtid_sets_round_trip_through_mysql_binary_encoding(sets):
    parts = []
    for sid, ranges in sets.items():
        texts, at = [], 0
        for start, length in ranges:  # disjoint, increasing intervals
            start = at + start
            texts.append(str(start) if length == 0 else f"{start}-{start + length}")
            at = start + length + 1
        parts.append(":".join([sid, *texts]))
    text = ",".join(parts)
    # the same set, in the order codec's MysqlGtidSet prints one (sorted by uuid)
    assert MysqlGtidSet.parse(decode_gtid_set(encode_gtid_set(text))) == MysqlGtidSet.parse(text)


def test_connect_time_queries_are_answered_like_a_server():
    s = Session(FACTS)
    s.answer("SET @master_heartbeat_period= 30000001024")
    s.answer("SET @master_binlog_checksum= @@global.binlog_checksum")
    s.answer("SET @mariadb_slave_capability=4")
    s.answer("SET @slave_connect_state='0-1-10,1-2-5'")
    s.answer("SET NAMES latin1, @slave_gtid_strict_mode=0, skip_replication=1")
    assert s.user_var("master_heartbeat_period") == "30000001024"
    assert s.user_var("master_binlog_checksum") == "CRC32"
    assert s.user_var("slave_connect_state") == "0-1-10,1-2-5"
    assert s.user_var("slave_gtid_strict_mode") == "0"
    assert not s.has_user_var("nothing")
    packets = s.answer("SELECT @master_binlog_checksum")
    assert packets[-2].endswith(b"\x05CRC32")  # the one row before the final EOF
    assert s.answer("SELECT @@GLOBAL.gtid_domain_id")[-2] == b"\x010"
    assert s.answer("SHOW VARIABLES LIKE 'SERVER_ID'")[-2] == b"\x09server_id\x017"
    assert len(s.answer("SELECT UNIX_TIMESTAMP(), VERSION() AS v, @@server_uuid")) == 1 + 3 + 1 + 1 + 1
    with pytest.raises(QueryError) as info:
        s.answer("SELECT @@no_such_thing")
    assert info.value.code == 1193
    with pytest.raises(QueryError) as info:
        s.answer("DROP DATABASE a")
    assert info.value.code == 1235


def test_like_follows_sql():
    assert _like("server\\_id", "server_id") and not _like("server\\_id", "serverXid")
    assert _like("SERVER%", "server_uuid") and _like("gtid_d_main%", "gtid_domain_id")
    assert not _like("server", "server_id")


@given(st.text(max_size=200))
@settings(max_examples=300)
def test_any_query_text_gets_packets_or_a_query_error(sql):
    try:
        packets = Session(FACTS).answer(sql)
    except QueryError as exc:
        assert exc.code in (1064, 1193, 1235)
        return
    assert packets and all(isinstance(p, bytes) for p in packets)


@given(st.binary(max_size=300))
@settings(max_examples=300)
def test_hostile_command_bodies_raise_only_protocol_errors(data):
    for parse in (parse_handshake_response, parse_binlog_dump, parse_binlog_dump_gtid, parse_register_slave,
                  decode_gtid_set):
        with contextlib.suppress(ProtocolError):
            parse(data)


def test_a_mariadb_replica_handshake_response_parses():
    # What a MariaDB 10.11 IO thread sends (capabilities, utf8mb4, user repl, 20-byte scramble).
    body = (struct.pack("<IIB", 0x00AAA20F | 0x80000, 1 << 24, 45) + b"\0" * 23 + b"repl\0"
            + bytes((20,)) + b"s" * 20 + b"mysql_native_password\0")
    response = parse_handshake_response(body)
    assert (response.user, response.auth_response, response.plugin) == ("repl", b"s" * 20, "mysql_native_password")
    with pytest.raises(ProtocolError, match="protocol 4.1"):
        parse_handshake_response(b"\0" * 40)
    assert Reader(b"\xfc\x01\x02").lenenc("x") == 0x0201


def _stream(*events) -> bytes:
    return b"".join(e.raw for e in events)


def test_events_reach_a_real_replica_in_a_form_it_takes():
    """What the endpoint changes of the service's batches: the empty-transaction COMMIT is dated
    at the skipped transaction's end (where the next event starts), a placeholder for a Query is a
    comment-only Query of its size with the original log_pos, Annotate_rows go only to replicas that asked."""
    from dumpfilter.codec import EventType, read_events
    from dumpfilter.codec.constants import LOG_EVENT_SKIP_REPLICATION_F
    from dumpfilter.codec.encode import build_event, format_description, mariadb_gtid_body, query_body
    from dumpfilter.master.endpoint.dump import replica_events
    from dumpfilter.skip_policy import PLACEHOLDER_SQL, named

    fde = format_description("10.11.19-MariaDB-log")
    fmt = fde.fmt
    gtid = build_event(EventType.MARIADB_GTID, mariadb_gtid_body(7), fmt=fmt, log_pos=400)
    commit = build_event(EventType.QUERY, query_body("COMMIT"), fmt=fmt, log_pos=400)  # the GTID's log_pos
    annotate = build_event(EventType.ANNOTATE_ROWS, b"INSERT INTO t VALUES (1)", fmt=fmt, log_pos=0)
    ddl_gtid = build_event(EventType.MARIADB_GTID, mariadb_gtid_body(8, standalone=True), fmt=fmt, log_pos=900)
    rand = build_event(EventType.RAND, struct.pack("<QQ", 120, EventType.QUERY), fmt=fmt, server_id=0, log_pos=1020,
                       flags=LOG_EVENT_SKIP_REPLICATION_F)
    batch = _stream(gtid, commit, ddl_gtid, annotate, rand)

    def sent(policy: str, annotate_rows: bool, end=None):
        sent = replica_events(batch, named(policy), annotate=annotate_rows, fmt=fmt, server_id=5, end=end)
        return read_events(b"\xfebin" + fde.raw + b"".join(e.raw for e in sent), "<sent>")[1:]

    events = sent("empty-transaction", False)
    assert [e.type_code for e in events] == [EventType.MARIADB_GTID, EventType.QUERY, EventType.MARIADB_GTID,
                                             EventType.RAND]
    # the next event (the DDL's GTID) starts at 900 - its size: there the skipped transaction ended
    assert events[1].sql == "COMMIT" and events[1].log_pos == 900 - ddl_gtid.size
    events = sent("placeholder", False)
    assert [e.type_code for e in events] == [EventType.MARIADB_GTID, EventType.QUERY, EventType.MARIADB_GTID,
                                             EventType.QUERY]
    assert events[1].log_pos == 400  # only the empty-transaction policy makes (and dates) such a COMMIT
    assert events[3].sql.rstrip() == PLACEHOLDER_SQL and events[3].log_pos == 1020 and events[3].server_id == 5
    assert events[3].size == 120  # the size of the Query it stands for (skip_policy.replica_placeholder)
    assert [e.type_code for e in sent("heartbeat", True)].count(EventType.ANNOTATE_ROWS) == 1
    assert [e.type_code for e in sent("heartbeat", False)].count(EventType.ANNOTATE_ROWS) == 0
    # a COMMIT that ends the batch takes the batch's end position
    last = list(replica_events(_stream(gtid, commit), named("empty-transaction"), annotate=False, fmt=fmt,
                               end=777))[-1].raw
    assert read_events(b"\xfebin" + fde.raw + gtid.raw + last, "<sent>")[-1].log_pos == 777


@pytest.mark.parametrize("checksum", [True, False])
def test_a_placeholder_never_reaches_a_real_replica_larger_than_what_it_replaced(checksum):
    """A replica's IO thread counts each event's size (a log_pos further on is a hole it jumps,
    never one behind): the 39-byte RAND for a 38-byte Table_map left MariaDB one byte past the
    transaction. A Query's placeholder is a comment Query of its size; any other event gets the
    RAND when it is at least as large, and is left out (a hole) when it is smaller."""
    from dumpfilter.codec import EventType, read_events
    from dumpfilter.codec.encode import build_event, format_description
    from dumpfilter.skip_policy import placeholder, replica_placeholder

    fde = format_description("10.11.19-MariaDB-log", checksum=checksum)
    fmt = fde.fmt
    crc = 4 if checksum else 0
    rand_size = 19 + 16 + crc
    for kind in (EventType.TABLE_MAP, EventType.QUERY):
        for size in range(19 + 13 + 1 + 1 + crc, 200):
            original = build_event(kind, b"\0" * (size - 19 - crc), fmt=fmt, log_pos=5000)
            rand = placeholder(original)
            sent = replica_placeholder(rand, server_id=9)
            if kind == EventType.TABLE_MAP:
                assert sent is (rand if size >= rand_size else None), size
                continue
            event = read_events(b"\xfebin" + fde.raw + sent.raw, "<sent>")[1]
            assert (event.type_code, event.size, event.log_pos, event.server_id) == (EventType.QUERY, size, 5000, 9)
            assert event.sql.startswith("#") and event.db == ""


@given(st.binary(min_size=32, max_size=32), st.binary(min_size=1, max_size=64))
@settings(max_examples=30)
def test_ed25519_account_keys_match_rfc8032_for_32_byte_passwords(password, nonce):
    """MariaDB hashes the whole password as the seed: for a 32-byte password that is RFC 8032's
    derivation, which cryptography implements independently."""
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from dumpfilter.master.endpoint.auth import ed25519_public_key

    key = Ed25519PrivateKey.from_private_bytes(password)
    assert ed25519_public_key(password) == key.public_key().public_bytes_raw()


@given(st.text(min_size=1, max_size=40), st.binary(min_size=20, max_size=20))
@settings(max_examples=50)
def test_caching_sha2_fast_auth_matches_what_pymysql_sends(password, nonce):
    from pymysql._auth import scramble_caching_sha2

    from dumpfilter.master.endpoint.auth import sha2_digest, sha2_fast_matches

    response = scramble_caching_sha2(password.encode("utf-8"), nonce)
    assert sha2_fast_matches(sha2_digest(password.encode("utf-8")), nonce, response)
    assert not sha2_fast_matches(sha2_digest((password + "x").encode("utf-8")), nonce, response)


@pytest.mark.parametrize("value, message", [
    ('["sha256_password"]', "unknown plugin 'sha256_password'"),
    ("[]", "mysql_auth must be a non-empty list"),
    ('"caching_sha2_password"', "mysql_auth must be a non-empty list"),
])
def test_policy_mysql_auth_is_checked(tmp_path, value, message):
    from dumpfilter.errors import RuleError
    from dumpfilter.master.policy import MasterPolicy

    path = tmp_path / "policy.toml"
    path.write_text(f'[slave.a]\npassword = "x"\nallow = []\nmysql_auth = {value}\n')
    with pytest.raises(RuleError, match=message):
        MasterPolicy.load(path)


def test_unknown_names_take_one_identity_path_each_time(tmp_path):
    """A decoy's plugins and kind of secret come from the policy's own identities, the same for a
    name every time (so retrying a name tells nothing), and no answer passes it."""
    from dumpfilter.master.endpoint.auth import Authenticator, RsaKeys
    from dumpfilter.master.policy import MasterPolicy
    from dumpfilter.rules.policy_gates import PBKDF2, PLAIN, hash_password

    path = tmp_path / "policy.toml"
    path.write_text(f'[slave.a]\npassword = "x"\nallow = []\nmysql_auth = ["caching_sha2_password"]\n\n'
                    f'[slave.b]\npassword = "y"\nallow = []\nmysql_auth = ["mysql_native_password"]\n\n'
                    f'[slave.c]\npassword_hash = "{hash_password("z", iterations=1234)}"\nallow = []\n')
    policy = MasterPolicy.load(path)
    auth = Authenticator(RsaKeys())
    picks = {auth.account(policy, f"user{i}").plugins for i in range(64)}
    assert picks == {("caching_sha2_password",), ("mysql_native_password",), ("caching_sha2_password",)}
    shapes = {(a.secret.kind, a.secret.value.split("$")[1] if a.secret.kind == PBKDF2 else "")
              for a in (auth.account(policy, f"user{i}") for i in range(64))}
    assert shapes == {(PLAIN, ""), (PBKDF2, "1234")}   # as costly to check as the identity it mimics
    assert all(auth.account(policy, "someone").plugins == auth.account(policy, "someone").plugins for _ in range(5))
    assert auth.account(policy, "someone").decoy
