"""caching_sha2_password and TLS on --mysql-listen with real clients (issue #31, items 1 and 2):
pymysql, mysql-connector-python's pure-Python protocol, and its C extension (MySQL's own
libmysqlclient, run in a subprocess: it needs its own OpenSSL loaded before Python's). Each path
of the exchange (full auth over TLS, full auth over RSA with the public key asked for, fast auth
from the cache) is proven by the endpoint's own count of it; a wrong password is 1045 on each;
mTLS takes the certificate's CN as the identity. No MySQL server exists here: these clients are
the independent side."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import mysql.connector
import pymysql
import pytest

from dumpfilter.master.serve.grpc_server import create_server
from dumpfilter.master.endpoint import MysqlEndpoint
from dumpfilter.master.endpoint.tls import endpoint_tls
from dumpfilter.workload.generator import WorkloadSpec, generate
from tests.conftest import skip_or_fail
from tests.support.tls_helpers import make_pki

pytestmark = [pytest.mark.timeout(240)]
ROOT = Path(__file__).resolve().parents[2]

POLICY = """
[slave.repl]
password = "s3cret"
allow = ["%.%"]

[slave.sha2]
password = "sha2-pw"
allow = ["%.%"]
mysql_auth = ["caching_sha2_password"]

[slave.native]
password = "native-pw"
allow = ["%.%"]
mysql_auth = ["mysql_native_password"]
"""


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("mysql-auth")
    pki = make_pki(tmp / "pki", clients=("repl", "stranger"))
    if pki is None:
        skip_or_fail("openssl is not installed")
    binlogs = tmp / "binlogs"
    binlogs.mkdir()
    generate(WorkloadSpec(seed=3, transactions=20, max_binlog_size=60_000), binlogs)
    policy = tmp / "policy.toml"
    policy.write_text(POLICY)
    master, _port = create_server(binlogs, "127.0.0.1:0", policy=str(policy))
    cert, key, ca = pki / "server.crt", pki / "server.key", pki / "ca.crt"
    endpoints = {
        "tls": MysqlEndpoint(master.service, "127.0.0.1:0", tls=endpoint_tls(cert, key)),
        "secure": MysqlEndpoint(master.service, "127.0.0.1:0", tls=endpoint_tls(cert, key, None, True)),
        "mtls": MysqlEndpoint(master.service, "127.0.0.1:0", tls=endpoint_tls(cert, key, ca)),
    }
    try:
        yield type("Env", (), {"pki": pki, "ca": str(ca), **endpoints})
    finally:
        for endpoint in endpoints.values():
            endpoint.stop()
        master.stop(0)


def _count(endpoint, plugin: str, path: str, ok: bool = True) -> int:
    return endpoint.auth.counts.get((plugin, path, ok), 0)


def _pymysql(endpoint, user: str, password: str, *, tls: bool, ca: str | None = None, **kwargs) -> str:
    """Log in and return the session's Ssl_cipher ('' on a plain connection)."""
    options = {"ssl": {"ca": ca}} if tls else {"ssl_disabled": True}
    conn = pymysql.connect(host="127.0.0.1", port=endpoint.port, user=user, password=password, connect_timeout=30,
                           **options, **kwargs)
    try:
        with conn.cursor() as cur:
            cur.execute("SHOW STATUS LIKE 'Ssl_cipher'")
            return cur.fetchone()[1]
    finally:
        conn.close()


def _denied(call) -> tuple[int, str]:
    with pytest.raises((pymysql.err.MySQLError, mysql.connector.Error)) as info:
        call()
    error = info.value
    return (error.errno, error.msg) if isinstance(error, mysql.connector.Error) else tuple(error.args[:2])


@pytest.fixture
def no_native(monkeypatch):
    """pymysql without mysql_native_password, as a MySQL 9 client: computing its scramble fails."""
    def refuse(*_args):
        raise AssertionError("mysql_native_password was used")
    monkeypatch.setattr(pymysql.connections._auth, "scramble_native_password", refuse)


def test_pymysql_full_auth_over_tls_then_fast_auth(env, no_native):
    env.tls.auth.forget()
    full, fast = _count(env.tls, "caching_sha2_password", "full-tls"), _count(env.tls, "caching_sha2_password", "fast")
    cipher = _pymysql(env.tls, "sha2", "sha2-pw", tls=True, ca=env.ca)
    assert cipher  # the session really is encrypted: the endpoint's own TLS state
    assert _count(env.tls, "caching_sha2_password", "full-tls") == full + 1
    assert _pymysql(env.tls, "sha2", "sha2-pw", tls=True, ca=env.ca) == cipher
    assert _count(env.tls, "caching_sha2_password", "fast") == fast + 1
    # the cache also serves a plain connection: no password crosses it
    assert _pymysql(env.tls, "sha2", "sha2-pw", tls=False) == ""
    assert _count(env.tls, "caching_sha2_password", "fast") == fast + 2


def test_pymysql_rsa_exchange_without_tls(env, no_native):
    env.tls.auth.forget()
    rsa = _count(env.tls, "caching_sha2_password", "full-rsa")
    assert _pymysql(env.tls, "sha2", "sha2-pw", tls=False) == ""   # pymysql asks for the key (0x02)
    assert _count(env.tls, "caching_sha2_password", "full-rsa") == rsa + 1
    fast = _count(env.tls, "caching_sha2_password", "fast")
    _pymysql(env.tls, "sha2", "sha2-pw", tls=False)
    assert _count(env.tls, "caching_sha2_password", "fast") == fast + 1


def test_wrong_passwords_and_unknown_users_are_1045_on_every_path(env):
    env.tls.auth.forget()
    for tls in (True, False):   # full auth over TLS, over RSA
        code, message = _denied(lambda: _pymysql(env.tls, "sha2", "wrong", tls=tls, ca=env.ca))
        assert (code, message) == (1045, "Access denied for user 'sha2'@'127.0.0.1' (using password: YES)")
    _pymysql(env.tls, "sha2", "sha2-pw", tls=False)   # fills the cache: a wrong scramble now meets it
    code, _ = _denied(lambda: _pymysql(env.tls, "sha2", "wrong", tls=False))
    assert code == 1045
    # An unknown name gets the same answer as a wrong password, on the path of one of the policy's
    # identities (a keyed hash of the name picks which: here caching_sha2 or native).
    unknown = _denied(lambda: _pymysql(env.tls, "nobody", "wrong", tls=True, ca=env.ca))
    assert unknown == (1045, "Access denied for user 'nobody'@'127.0.0.1' (using password: YES)")
    assert _denied(lambda: _pymysql(env.tls, "repl", "", tls=True, ca=env.ca))[0] == 1045


def test_an_identity_on_native_gets_an_auth_switch(env):
    switched = _count(env.tls, "mysql_native_password", "scramble")
    assert _pymysql(env.tls, "native", "native-pw", tls=True, ca=env.ca)
    assert _count(env.tls, "mysql_native_password", "scramble") == switched + 1
    assert _denied(lambda: _pymysql(env.tls, "native", "wrong", tls=False))[0] == 1045


def _connector(endpoint, user: str, password: str, *, tls: bool, ca: str) -> str:
    options = {"ssl_ca": ca, "ssl_verify_cert": True} if tls else {"ssl_disabled": True}
    conn = mysql.connector.connect(host="127.0.0.1", port=endpoint.port, user=user, password=password, use_pure=True,
                                   auth_plugin="caching_sha2_password", connection_timeout=30, **options)
    try:
        cur = conn.cursor()
        cur.execute("SHOW STATUS LIKE 'Ssl_cipher'")
        return cur.fetchone()[1]
    finally:
        conn.close()


def test_mysql_connector_pure_python(env):
    """Its pure-Python caching_sha2_password has no RSA (it sends the password in clear after
    perform_full_authentication, whatever the transport): on a plain connection that is refused
    as a wrong password; over TLS it logs in, and then by fast auth even without TLS."""
    env.tls.auth.forget()
    assert _denied(lambda: _connector(env.tls, "sha2", "sha2-pw", tls=False, ca=env.ca))[0] == 1045
    full = _count(env.tls, "caching_sha2_password", "full-tls")
    assert _connector(env.tls, "sha2", "sha2-pw", tls=True, ca=env.ca)
    assert _count(env.tls, "caching_sha2_password", "full-tls") == full + 1
    fast = _count(env.tls, "caching_sha2_password", "fast")
    assert _connector(env.tls, "sha2", "sha2-pw", tls=False, ca=env.ca) == ""
    assert _count(env.tls, "caching_sha2_password", "fast") == fast + 1
    assert _denied(lambda: _connector(env.tls, "sha2", "wrong", tls=True, ca=env.ca))[0] == 1045


_CEXT = """
import _mysql_connector  # first: it needs its own OpenSSL, not the one Python's ssl module loads
import json, sys
import mysql.connector
args = json.loads(sys.argv[1])
try:
    conn = mysql.connector.connect(use_pure=False, connection_timeout=30, **args)
    cur = conn.cursor()
    cur.execute("SHOW STATUS LIKE 'Ssl_cipher'")
    print(json.dumps({"cipher": cur.fetchone()[1]}))
except mysql.connector.Error as exc:
    print(json.dumps({"errno": exc.errno, "msg": exc.msg}))
"""


def _libmysqlclient(endpoint, **args) -> dict:
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(_CEXT), json.dumps(
        {"host": "127.0.0.1", "port": endpoint.port, **args})], capture_output=True, text=True, timeout=120, cwd=ROOT)
    if "C Extension not available" in out.stderr:
        skip_or_fail(f"mysql-connector's C extension does not load here: {out.stderr.strip().splitlines()[-1]}")
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_libmysqlclient_through_mysql_connector_c_extension(env):
    env.tls.auth.forget()
    full = _count(env.tls, "caching_sha2_password", "full-tls")
    # libmysqlclient's own default plugin is caching_sha2_password (MySQL 8.0+); auth_plugin pins it
    reply = _libmysqlclient(env.tls, user="sha2", password="sha2-pw", ssl_ca=env.ca, ssl_verify_cert=True,
                            ssl_verify_identity=True, auth_plugin="caching_sha2_password")
    assert reply.get("cipher"), reply
    assert _count(env.tls, "caching_sha2_password", "full-tls") == full + 1
    fast = _count(env.tls, "caching_sha2_password", "fast")
    # (auth_plugin with ssl_disabled makes the connector's C wrapper fail before the handshake: 2002)
    assert _libmysqlclient(env.tls, user="sha2", password="sha2-pw", ssl_disabled=True) == {"cipher": ""}
    assert _count(env.tls, "caching_sha2_password", "fast") == fast + 1
    assert _libmysqlclient(env.tls, user="sha2", password="wrong", ssl_ca=env.ca)["errno"] == 1045


def test_require_secure_transport_refuses_plain_clients(env):
    assert _denied(lambda: _pymysql(env.secure, "repl", "s3cret", tls=False))[0] == 3159
    assert _pymysql(env.secure, "repl", "s3cret", tls=True, ca=env.ca)


def test_mtls_takes_the_certificate_cn_as_the_identity(env):
    pki = env.pki

    def with_cert(name: str, user: str, password: str):
        ssl = {"ca": env.ca, "cert": str(pki / f"{name}.crt"), "key": str(pki / f"{name}.key")}
        conn = pymysql.connect(host="127.0.0.1", port=env.mtls.port, user=user, password=password, ssl=ssl,
                               connect_timeout=30)
        conn.close()

    with_cert("repl", "repl", "s3cret")
    # a CN that is no policy identity, a user that is not the CN, a rogue CA's certificate, no TLS
    assert _denied(lambda: with_cert("stranger", "stranger", "x"))[0] == 1045
    assert _denied(lambda: with_cert("repl", "sha2", "sha2-pw"))[0] == 1045
    with pytest.raises(pymysql.err.OperationalError):
        with_cert("rogue-ana", "repl", "s3cret")
    assert _denied(lambda: _pymysql(env.mtls, "repl", "s3cret", tls=False))[0] == 3159
