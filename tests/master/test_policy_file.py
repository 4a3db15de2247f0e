"""The policy file refuses its mistakes with one line naming the file, line and key (unknown keys,
a server_id listed by two identities, an identity without `allow`), warns when others may read
passwords kept in clear, and keeps passwords hashed (MySQL's mysql_native_password hash, or
PBKDF2-HMAC-SHA256 from `dumpfilter master hash-password`), checked by the gRPC side and by real
clients of --mysql-listen (issues #41 item 4, #44 item 4)."""

from __future__ import annotations

import hashlib
import logging
import os
import subprocess
import sys
from pathlib import Path

import pymysql
import pytest

from dumpfilter.errors import AccessDeniedError, RuleError
from dumpfilter.master.endpoint.auth import Account, Authenticator, Conversation, RsaKeys
from dumpfilter.master.policy import MasterPolicy
from dumpfilter.rules.policy_gates import NATIVE_HASH, PBKDF2, PLAIN, Secret, hash_password

ROOT = Path(__file__).resolve().parents[2]


def load(tmp_path: Path, text: str, mode: int = 0o600) -> MasterPolicy:
    path = tmp_path / "policy.toml"
    path.write_text(text)
    os.chmod(path, mode)
    return MasterPolicy.load(path)


def refused(tmp_path: Path, text: str) -> str:
    with pytest.raises(RuleError) as info:
        load(tmp_path, text)
    message = str(info.value)
    assert "\n" not in message
    return message


def native_hash(password: str) -> str:
    return "*" + hashlib.sha1(hashlib.sha1(password.encode()).digest()).hexdigest().upper()


@pytest.mark.parametrize("key", ["alow", "pasword", "server_id"])
def test_an_unknown_key_is_one_line_with_file_line_and_key(tmp_path, key):
    message = refused(tmp_path, f'[slave.a]\nallow = ["db1.%"]\n\n[slave.b]\nallow = []\n{key} = "x"\n')
    assert f"policy.toml:6: [slave.b] unknown key {key!r}" in message


def test_an_unknown_section_is_refused(tmp_path):
    assert "unknown section [slaves]" in refused(tmp_path, '[slaves.a]\nallow = []\n')


def test_a_server_id_belongs_to_one_identity(tmp_path):
    message = refused(tmp_path, '[slave.a]\nallow = []\nserver_ids = [7, 8]\n\n'
                                '[slave.b]\nallow = []\nserver_ids = [9, 8]\n')
    assert "policy.toml:7:" in message and "server_id 8" in message
    assert "[slave.a]" in message and "[slave.b]" in message


def test_an_identity_without_allow_is_refused_with_the_hint(tmp_path):
    """A section for authentication only would be served nothing without a word."""
    message = refused(tmp_path, '[slave.repl8]\npassword = "pw"\nserver_ids = [8]\n')
    assert "policy.toml:1: [slave.repl8] has no allow" in message
    assert 'allow = ["%.%"]' in message
    # An explicit empty list is a choice, and loads.
    assert load(tmp_path, '[slave.repl8]\npassword = "pw"\nallow = []\n').entries["repl8"].allow == ()


def test_passwords_in_clear_in_a_file_others_read_are_warned_of(tmp_path, caplog):
    text = '[slave.a]\npassword = "pw"\nallow = []\n'
    with caplog.at_level(logging.WARNING, logger="dumpfilter.master.policy"):
        load(tmp_path, text, 0o644)
    assert any("readable by everyone" in r.getMessage() and "'a'" in r.getMessage() for r in caplog.records)
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="dumpfilter.master.policy"):
        load(tmp_path, text, 0o600)
        load(tmp_path, f'[slave.a]\npassword_hash = "{native_hash("pw")}"\nallow = []\n', 0o644)
    assert not any("readable" in r.getMessage() for r in caplog.records)


def test_hashed_passwords_authenticate_the_grpc_side(tmp_path):
    pbkdf2 = hash_password("pb-pw", iterations=1000)
    policy = load(tmp_path, f'[slave.n]\npassword_hash = "{native_hash("nat-pw")}"\nallow = []\n\n'
                            f'[slave.p]\npassword_hash = "{pbkdf2}"\nallow = []\n')
    assert policy.entries["n"].secret.kind == NATIVE_HASH and policy.entries["p"].secret.kind == PBKDF2
    assert policy.authenticate("n", "nat-pw").name == "n"
    assert policy.authenticate("p", "pb-pw").name == "p"
    for user, wrong in (("n", "pb-pw"), ("p", "nat-pw"), ("p", "")):
        with pytest.raises(AccessDeniedError, match="access denied") as info:
            policy.authenticate(user, wrong)
        assert info.value.reason == "wrong password"


@pytest.mark.parametrize("value", ["*1234", "sha256$x", "pbkdf2_sha256$0$00$00", 42])
def test_a_malformed_hash_is_refused(tmp_path, value):
    shown = f'"{value}"' if isinstance(value, str) else value
    assert "password_hash must be" in refused(tmp_path, f"[slave.a]\npassword_hash = {shown}\nallow = []\n")


def test_a_plugin_that_cannot_check_a_hash_is_refused(tmp_path):
    pbkdf2 = hash_password("pw", iterations=1000)
    message = refused(tmp_path, f'[slave.a]\npassword_hash = "{pbkdf2}"\nallow = []\n'
                                'mysql_auth = ["mysql_native_password"]\n')
    assert "policy.toml:4:" in message and "mysql_native_password cannot check" in message
    assert "client_ed25519 cannot check" in refused(
        tmp_path, f'[slave.a]\npassword_hash = "{native_hash("pw")}"\nallow = []\nmysql_auth = ["client_ed25519"]\n')
    # Left to its default, a PBKDF2 identity is offered caching_sha2_password alone.
    entry = load(tmp_path, f'[slave.a]\npassword_hash = "{pbkdf2}"\nallow = []\n').entries["a"]
    assert entry.mysql_auth == ("caching_sha2_password",)


def test_hash_password_prints_a_hash_the_policy_accepts(tmp_path):
    run = subprocess.run([sys.executable, "-m", "dumpfilter", "master", "hash-password"], input="s3cret\n",
                         capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert run.returncode == 0, run.stderr
    value = run.stdout.strip()
    assert value.startswith("pbkdf2_sha256$") and "s3cret" not in value
    policy = load(tmp_path, f'[slave.a]\npassword_hash = "{value}"\nallow = []\n')
    assert policy.authenticate("a", "s3cret").name == "a"
    empty = subprocess.run([sys.executable, "-m", "dumpfilter", "master", "hash-password"], input="\n",
                           capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert empty.returncode == 2 and len(empty.stderr.strip().splitlines()) == 1


def test_the_right_password_in_clear_over_a_plain_connection_says_so():
    """caching_sha2_password's full authentication without TLS takes only an RSA-encrypted
    password: one sent in clear is refused, as MySQL refuses it, and the log says why."""
    auth = Authenticator(RsaKeys())
    account = Account("a", ("caching_sha2_password",), Secret(PLAIN, "pw"))
    for given, reason in ((b"pw\0", "sent in clear"), (b"nope\0", "")):
        replies = [given]
        outcome = auth.authenticate(Conversation(lambda _data: None, replies.pop), account, "caching_sha2_password",
                                    b"\x01" * 32, b"n" * 20, secure=False)
        assert not outcome.ok and outcome.path == "full-rsa"
        assert (reason in outcome.reason) if reason else outcome.reason == ""


@pytest.mark.grpc
def test_real_clients_log_in_with_hashed_passwords(tmp_path):
    """pymysql over --mysql-listen: mysql_native_password checked against MySQL's own '*' hash, and
    caching_sha2_password (full authentication over RSA, then the fast path) against PBKDF2."""
    from dumpfilter.master.serve.grpc_server import create_server
    from dumpfilter.master.endpoint import MysqlEndpoint
    from dumpfilter.workload.generator import WorkloadSpec, generate

    binlogs = tmp_path / "binlogs"
    binlogs.mkdir()
    generate(WorkloadSpec(seed=3, transactions=10, max_binlog_size=60_000), binlogs)
    pbkdf2 = hash_password("pb-pw", iterations=1000)
    policy = tmp_path / "policy.toml"
    policy.write_text(f'[slave.nat]\npassword_hash = "{native_hash("nat-pw")}"\nallow = ["%.%"]\n'
                      'mysql_auth = ["mysql_native_password"]\n\n'
                      f'[slave.pb]\npassword_hash = "{pbkdf2}"\nallow = ["%.%"]\n')
    master, _ = create_server(binlogs, "127.0.0.1:0", policy=str(policy))
    endpoint = MysqlEndpoint(master.service, "127.0.0.1:0")
    try:
        def login(user: str, password: str) -> None:
            pymysql.connect(host="127.0.0.1", port=endpoint.port, user=user, password=password, connect_timeout=30,
                            ssl_disabled=True).close()

        login("nat", "nat-pw")
        assert endpoint.auth.counts.get(("mysql_native_password", "scramble", True)) == 1
        login("pb", "pb-pw")   # full authentication over RSA: the password checked against PBKDF2
        login("pb", "pb-pw")   # then the cache's fast path
        assert endpoint.auth.counts.get(("caching_sha2_password", "full-rsa", True)) == 1
        assert endpoint.auth.counts.get(("caching_sha2_password", "fast", True)) == 1
        for user, wrong in (("nat", "pb-pw"), ("pb", "nat-pw")):
            with pytest.raises(pymysql.err.OperationalError) as info:
                login(user, wrong)
            assert info.value.args[0] == 1045
    finally:
        endpoint.stop()
        master.stop(0)
