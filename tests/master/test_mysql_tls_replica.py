"""Real MariaDB replicas on --mysql-listen over TLS (issue #31, item 2): MASTER_SSL=1 with the CA
and MASTER_SSL_VERIFY_SERVER_CERT=1 streams and ends identical to the primary, and the bytes on
the wire (a recording proxy between them) never show a value the replica received in clear; a
plain replica under --mysql-require-secure-transport stops connecting with 3159 in Last_IO_Error;
identities on client_ed25519 and on caching_sha2_password alone are served to a replica whose
plugin_dir holds libmariadb's client plugins."""

from __future__ import annotations

import socket
import threading
from pathlib import Path

import pytest

from dumpfilter.lab.sandbox import replica_status
from dumpfilter.master.serve.grpc_server import create_server
from dumpfilter.master.endpoint import MysqlEndpoint
from dumpfilter.master.endpoint.tls import endpoint_tls
from tests.conftest import skip_or_fail
from tests.support.mysql_replicas import converge, point_at, wait_applied
from tests.support.tls_helpers import make_pki
from tests.support.waiting import wait_for
import contextlib

pytestmark = [pytest.mark.mariadb, pytest.mark.timeout(300)]
CLIENT_PLUGINS = Path("/usr/lib/x86_64-linux-gnu/libmariadb3/plugin")
SERVER_PLUGINS = Path("/usr/lib/mysql/plugin")
MARKER = "plaintext-marker-7c1e"

POLICY = """
[slave.repl]
password = "s3cret"
allow = ["%.%"]

[slave.ed]
password = "ed-pw"
allow = ["%.%"]
mysql_auth = ["client_ed25519"]

[slave.sha]
password = "sha-pw"
allow = ["%.%"]
mysql_auth = ["caching_sha2_password"]
"""


class RecordingProxy:
    """A loopback TCP relay that keeps every byte it forwards, both ways."""

    def __init__(self, port: int):
        self.target = ("127.0.0.1", port)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.seen = bytearray()
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(self.target)
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while chunk := src.recv(65536):
                with self._lock:
                    self.seen += chunk
                dst.sendall(chunk)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        self.listener.close()


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    directory = make_pki(tmp_path_factory.mktemp("replica-pki") / "pki", clients=("repl",))
    if directory is None:
        skip_or_fail("openssl is not installed")
    directory.chmod(0o755)   # the replica's mariadbd reads the CA
    for file in directory.iterdir():
        file.chmod(0o644)
    return directory


def _master(primary, tmp_path, pki, **tls_options):
    policy = tmp_path / "policy.toml"
    policy.write_text(POLICY)
    master, _port = create_server(primary.binlog_dir, "127.0.0.1:0", policy=str(policy))
    endpoint = MysqlEndpoint(master.service, "127.0.0.1:0",
                             tls=endpoint_tls(pki / "server.crt", pki / "server.key", **tls_options))
    return master, endpoint


def test_a_replica_with_master_ssl_verify_server_cert_streams_encrypted(mariadb_factory, tmp_path, pki):
    primary = mariadb_factory("primary-tls")
    replica = mariadb_factory("real-tls", server_id=61, log_bin=False)
    primary.execute(["CREATE DATABASE s1"])
    primary.execute(["CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(40))", "INSERT INTO t VALUES (1, 'a')"], db="s1")
    master, endpoint = _master(primary, tmp_path, pki)
    proxy = RecordingProxy(endpoint.port)
    try:
        point_at(replica, proxy.port, gtid=True, password="s3cret",
                 extra=f", MASTER_SSL=1, MASTER_SSL_CA='{pki / 'ca.crt'}', MASTER_SSL_VERIFY_SERVER_CERT=1")
        wait_applied(replica, service=master.service, server_id=61)
        primary.execute([f"INSERT INTO t VALUES (2, '{MARKER}')"], db="s1")
        assert converge(primary, replica) == []
        assert replica.query("SELECT v FROM s1.t WHERE id = 2") == [{"v": MARKER}]
        status = replica_status(replica)
        assert status["Master_SSL_Allowed"] == "Yes" and status["Master_SSL_Verify_Server_Cert"] == "Yes"
        dumping = [c for c in endpoint.connections if 61 in c.registered]
        assert dumping and all(c.cipher for c in dumping), [(c.peer, c.cipher) for c in endpoint.connections]
        assert dumping[0].auth_path.startswith("caching_sha2_password/") or \
            dumping[0].auth_path.startswith("mysql_native_password/")
        assert len(proxy.seen) > 1000
        assert MARKER.encode() not in proxy.seen and b"CREATE TABLE" not in proxy.seen
    finally:
        replica.execute(["STOP SLAVE"])
        proxy.close()
        endpoint.stop()
        master.stop(grace=1.0)


def test_an_mtls_replica_is_the_identity_of_its_certificate(mariadb_factory, tmp_path, pki):
    """--tls-client-ca: the replica's certificate (CN repl) with MASTER_USER='repl' streams; the
    rogue CA's certificate fails in the TLS handshake, before any password is read (TLS 1.3
    verifies the client's certificate after the client's side of the handshake is done: the
    replica sees a lost connection, 2013, or an SSL error, 2026)."""
    primary = mariadb_factory("primary-mtls")
    replica = mariadb_factory("real-mtls", server_id=64, log_bin=False)
    primary.execute(["CREATE DATABASE s1"])
    master, endpoint = _master(primary, tmp_path, pki, client_ca=pki / "ca.crt")
    ssl = f", MASTER_SSL=1, MASTER_SSL_CA='{pki / 'ca.crt'}', MASTER_SSL_VERIFY_SERVER_CERT=1"
    try:
        point_at(replica, endpoint.port, gtid=True, password="s3cret",
                 extra=f"{ssl}, MASTER_SSL_CERT='{pki / 'rogue-ana.crt'}', MASTER_SSL_KEY='{pki / 'rogue-ana.key'}'")
        assert wait_for(lambda: replica_status(replica).get("Last_IO_Errno") in (2013, 2026), 60, every=0.2), \
            {k: v for k, v in replica_status(replica).items() if k.startswith("Last_IO")}
        assert 64 not in master.service.slaves and endpoint.auth.counts == {}
        point_at(replica, endpoint.port, gtid=True, password="s3cret",
                 extra=f"{ssl}, MASTER_SSL_CERT='{pki / 'repl.crt'}', MASTER_SSL_KEY='{pki / 'repl.key'}'")
        wait_applied(replica, service=master.service, server_id=64)
        assert replica.query("SHOW DATABASES LIKE 's1'") == [{"Database (s1)": "s1"}]
        assert [c.certificate_name for c in endpoint.connections if 64 in c.registered] == ["repl"]
    finally:
        replica.execute(["STOP SLAVE"])
        endpoint.stop()
        master.stop(grace=1.0)


def test_a_plain_replica_is_refused_under_require_secure_transport(mariadb_factory, tmp_path, pki):
    primary = mariadb_factory("primary-plain")
    replica = mariadb_factory("real-plain", server_id=62, log_bin=False)
    master, endpoint = _master(primary, tmp_path, pki, require_secure_transport=True)
    try:
        point_at(replica, endpoint.port, gtid=True, password="s3cret")
        assert wait_for(lambda: replica_status(replica).get("Last_IO_Errno") == 3159, 60, every=0.2), \
            replica_status(replica)
        assert "insecure transport are prohibited" in replica_status(replica)["Last_IO_Error"]
        assert 62 not in master.service.slaves
    finally:
        replica.execute(["STOP SLAVE"])
        endpoint.stop()
        master.stop(grace=1.0)


def test_a_replica_authenticates_with_client_ed25519_and_caching_sha2(mariadb_factory, tmp_path, pki):
    """MariaDB 10.11's replica loads client plugins from its plugin_dir: there, libmariadb's
    client_ed25519.so and caching_sha2_password.so (an AuthSwitch names them)."""
    if not all((CLIENT_PLUGINS / f"{name}.so").exists() for name in ("client_ed25519", "caching_sha2_password")):
        skip_or_fail("libmariadb's client plugins are not installed (Debian's libmariadb3, with mariadb-client)")
    plugins = tmp_path / "plugins"
    plugins.mkdir()
    for directory in (SERVER_PLUGINS, CLIENT_PLUGINS):
        for plugin in directory.iterdir():
            if not (plugins / plugin.name).exists():
                (plugins / plugin.name).symlink_to(plugin)
    primary = mariadb_factory("primary-ed")
    replica = mariadb_factory("real-ed", server_id=63, log_bin=False, options=[f"--plugin-dir={plugins}"])
    primary.execute(["CREATE DATABASE s1"])
    master, endpoint = _master(primary, tmp_path, pki)
    try:
        point_at(replica, endpoint.port, gtid=True, user="ed", password="wrong")
        assert wait_for(lambda: replica_status(replica).get("Last_IO_Errno") == 1045, 60, every=0.2), \
            replica_status(replica)
        point_at(replica, endpoint.port, gtid=True, user="ed", password="ed-pw")
        wait_applied(replica, service=master.service, server_id=63)
        assert replica.query("SHOW DATABASES LIKE 's1'") == [{"Database (s1)": "s1"}]
        assert endpoint.auth.counts.get(("client_ed25519", "signature", True), 0) >= 1

        # caching_sha2_password alone: full auth inside TLS, then fast auth from the cache in clear
        replica.execute(["STOP SLAVE"])
        master.service.unregister(63)   # server_id 63 belongs to 'ed' until then
        point_at(replica, endpoint.port, gtid=True, user="sha", password="sha-pw",
                 extra=f", MASTER_SSL=1, MASTER_SSL_CA='{pki / 'ca.crt'}'")
        assert wait_for(lambda: endpoint.auth.counts.get(("caching_sha2_password", "full-tls", True)), 60, every=0.2)
        replica.execute(["STOP SLAVE"])
        point_at(replica, endpoint.port, gtid=True, user="sha", password="sha-pw")
        assert wait_for(lambda: endpoint.auth.counts.get(("caching_sha2_password", "fast", True)), 60, every=0.2)
        primary.execute(["CREATE DATABASE s2"])
        wait_applied(replica)
        assert replica.query("SHOW DATABASES LIKE 's2'") == [{"Database (s2)": "s2"}]
    finally:
        replica.execute(["STOP SLAVE"])
        endpoint.stop()
        master.stop(grace=1.0)
