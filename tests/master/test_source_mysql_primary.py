"""`--source` from a MySQL 8.4/9 primary (issue #31 item 4). No MySQL server exists here: the
primary is dumpfilter's own --mysql-listen endpoint, which behaves as a MySQL 8.4 primary does
(caching_sha2_password by default, gtid_mode ON, COM_BINLOG_DUMP_GTID) while it serves real MySQL
binlogs: the MySQL 9.6 tagged-GTID fixture and the MySQL 5.7 GTID fixture. The identity it
authenticates is caching_sha2_password only. The series must be the fixture byte for byte, with the
password over TLS (verified CA and name) and over RSA (the key pinned, or asked for), and a
restart continues by GTID (the series' executed set: its Previous_gtids and the GTIDs after it)
with nothing lost or written twice."""

from __future__ import annotations

import shutil

import pytest

from dumpfilter.codec.reader import read_events
from dumpfilter.master.serve.grpc_server import create_server
from dumpfilter.master.endpoint import MysqlEndpoint
from dumpfilter.master.upstream.binlog_mirror import BinlogMirror
from dumpfilter.master.upstream.source import SourceReplicator, SourceURL
from dumpfilter.master.endpoint.tls import endpoint_tls
from tests.conftest import skip_or_fail
from tests.support.tls_helpers import make_pki
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.timeout(240)]

POLICY = """
[slave.sha2]
password = "sha2-pw"
allow = ["%.%"]
mysql_auth = ["caching_sha2_password"]
"""
# (fixture, the name its own Rotate implies)
TAGGED = ("blackbeam-rust_mysql_common/binlog_transaction_with_GTID_TAG.000001", "binlog.000004")
GTID_57 = ("rust-us-mysql-cdc-rs/5.7_14_user_var/log.bin", "mysql_bin.000001")
COMPRESSED = ("osheroff-mysql-binlog-connector-java/mysql-bin.compressed", "mysql-bin.000004")
EXECUTED = {"binlog.000004": "55778904-0299-11f1-b1b8-4ef0c4956feb:1-13,55778904-0299-11f1-b1b8-4ef0c4956feb:mytag:1-3",
            "mysql_bin.000001": "e3e2a4ee-b6dc-11ea-8bcf-0242ac150002:1-3"}


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    pki = make_pki(tmp_path_factory.mktemp("source-pki"))
    if pki is None:
        skip_or_fail("openssl is not installed")
    return pki


class Primary:
    """dumpfilter's endpoint over `directory`, as a MySQL 8.4-style primary with TLS."""

    def __init__(self, directory, policy, pki):
        self.master, _port = create_server(directory, "127.0.0.1:0", policy=str(policy))
        self.endpoint = MysqlEndpoint(self.master.service, "127.0.0.1:0",
                                      tls=endpoint_tls(pki / "server.crt", pki / "server.key"))

    def logins(self, path: str) -> int:
        return self.endpoint.auth.counts.get(("caching_sha2_password", path, True), 0)

    def stop(self) -> None:
        self.endpoint.stop()
        self.master.stop(0)


def _cut(data: bytes, name: str, units: int) -> int:
    """The offset after the first `units` GTID transactions (where the next GTID, or the file's
    closing Rotate, starts)."""
    events = list(read_events(data, name, verify_checksums=False))
    starts = [e.pos for e in events if e.is_gtid] + [events[-1].pos]
    return starts[units]


def _setup(shared_fixtures, tmp_path, fixture, held: int | None = None):
    source, name = fixture
    data = (shared_fixtures / source).read_bytes()
    up = tmp_path / "upstream"
    up.mkdir()
    (up / name).write_bytes(data if held is None else data[:held])
    (up / f"{name.rsplit('.', 1)[0]}.index").write_text(f"./{name}\n")
    policy = tmp_path / "policy.toml"
    policy.write_text(POLICY)
    return up, name, data, policy


def _mirror(url: str, local) -> SourceReplicator:
    replicator = SourceReplicator(SourceURL.parse(url), BinlogMirror(local))
    replicator.start()
    return replicator


def _complete(local, name: str, data: bytes) -> bool:
    path = local / name
    return path.is_file() and path.stat().st_size >= len(data)


@pytest.mark.parametrize("transport", ["tls-verify-identity", "rsa-pinned-key", "rsa-asked-key"])
def test_the_series_is_the_tagged_fixture_byte_for_byte(shared_fixtures, tmp_path, pki, transport):
    up, name, data, policy = _setup(shared_fixtures, tmp_path, TAGGED)
    primary = Primary(up, policy, pki)
    key = tmp_path / "primary-rsa.pem"
    key.write_bytes(primary.endpoint.auth.rsa.public_pem)
    query = {"tls-verify-identity": f"ssl-mode=VERIFY_IDENTITY&ssl-ca={pki / 'ca.crt'}",
             "rsa-pinned-key": f"ssl-mode=DISABLED&public-key={key}",
             "rsa-asked-key": "ssl-mode=DISABLED&get-public-key=1"}[transport]
    local = tmp_path / "series"
    replicator = _mirror(f"mysql://sha2:sha2-pw@127.0.0.1:{primary.endpoint.port}?{query}", local)
    try:
        assert wait_for(lambda: _complete(local, name, data), every=0.1), replicator.last_error
        assert (local / name).read_bytes() == data
        assert (local / "binlog.index").read_text().split() == [f"./{name}"]
        # The password went the way the URL says, in caching_sha2_password's full authentication.
        assert primary.logins("full-tls" if transport.startswith("tls") else "full-rsa") >= 1
        assert primary.logins("full-rsa" if transport.startswith("tls") else "full-tls") == 0
        # The series' executed set is the primary's, tagged GTIDs included.
        assert str(replicator.mirror.gtids.mysql) == EXECUTED[name]
    finally:
        replicator.stop()
        primary.stop()


def test_without_tls_or_a_key_the_password_is_not_sent(shared_fixtures, tmp_path, pki):
    """As a MySQL replica without GET_SOURCE_PUBLIC_KEY: 2061, and the source stops trying."""
    up, _name, _data, policy = _setup(shared_fixtures, tmp_path, TAGGED)
    primary = Primary(up, policy, pki)
    replicator = _mirror(f"mysql://sha2:sha2-pw@127.0.0.1:{primary.endpoint.port}?ssl-mode=DISABLED",
                         tmp_path / "series")
    try:
        assert wait_for(lambda: replicator.state == "stopped", every=0.1), replicator.status()
        assert "error 2061" in replicator.last_error and "secure connection" in replicator.last_error
        assert primary.logins("full-rsa") == 0 and primary.logins("full-tls") == 0
    finally:
        replicator.stop()
        primary.stop()


@pytest.mark.parametrize("fixture, held_units", [(TAGGED, 1), (GTID_57, 1), (GTID_57, 2)],
                         ids=["9.6-tagged-after-mytag:3", "5.7-after-gtid-1", "5.7-after-gtid-2"])
def test_a_restart_continues_by_gtid_without_loss_or_duplication(shared_fixtures, tmp_path, pki, fixture,
                                                                 held_units):
    """The primary holds the fixture up to a transaction's end; the series takes it; the master
    stops; the primary writes the rest; a new master over the same series resumes by GTID: the
    primary skips what the series' set holds (a heartbeat says where to), re-sends the file's
    head (checked against the series) and the series ends as the fixture, byte for byte."""
    _source, name = fixture
    data = (shared_fixtures / fixture[0]).read_bytes()
    held = _cut(data, name, held_units)
    up, name, data, policy = _setup(shared_fixtures, tmp_path, fixture, held)
    primary = Primary(up, policy, pki)
    url = f"mysql://sha2:sha2-pw@127.0.0.1:{primary.endpoint.port}?ssl-mode=VERIFY_CA&ssl-ca={pki / 'ca.crt'}"
    local = tmp_path / "series"
    try:
        first = _mirror(url, local)
        assert wait_for(lambda: (local / name).is_file() and (local / name).stat().st_size == held, every=0.1), \
            first.last_error
        first.stop()
        before = str(first.mirror.gtids.mysql)
        with open(up / name, "ab") as f:  # the primary goes on writing
            f.write(data[held:])
        second = _mirror(url, local)
        try:
            assert str(second.mirror.gtids.mysql) == before  # read back from the series on disk
            assert wait_for(lambda: _complete(local, name, data), every=0.1), second.last_error
            assert (local / name).read_bytes() == data
            assert second.last_error is None, second.last_error
            assert str(second.mirror.gtids.mysql) == EXECUTED[name]
        finally:
            second.stop()
    finally:
        primary.stop()


def test_a_series_that_differs_from_the_primary_is_refused(shared_fixtures, tmp_path, pki):
    """What the primary re-sends on a resume by GTID (the file's head: its FDE and Previous_gtids;
    the transactions the set holds are skipped) is checked against the series: a series that is
    not the primary's binlog (here a byte of its Previous_gtids' CRC changed) stops with one line
    naming the file and offset, never appending to it."""
    up, name, data, policy = _setup(shared_fixtures, tmp_path, GTID_57)
    held = _cut(data, name, 1)
    local = tmp_path / "series"
    local.mkdir()
    forged = bytearray(data[:held])
    previous = next(e for e in read_events(data, name, verify_checksums=False) if e.type_code == 35)
    forged[previous.end_pos - 1] ^= 0xFF
    (local / name).write_bytes(bytes(forged))
    shutil.copyfile(up / "mysql_bin.index", local / "mysql_bin.index")
    primary = Primary(up, policy, pki)
    replicator = _mirror(f"mysql://sha2:sha2-pw@127.0.0.1:{primary.endpoint.port}?ssl-mode=REQUIRED", local)
    try:
        assert wait_for(lambda: replicator.state == "stopped", every=0.1), replicator.status()
        assert f"{name}: the primary re-sent, at offset {previous.pos}" in replicator.last_error, replicator.last_error
        assert (local / name).read_bytes() == bytes(forged)
    finally:
        replicator.stop()
        primary.stop()


@pytest.mark.parametrize("executed, start", [("1-2", 719), ("1", 357), ("1-3", 1237), ("2", 4)])
def test_source_gtid_starts_at_the_first_transaction_the_set_lacks(shared_fixtures, tmp_path, pki, executed, start):
    """--source-gtid with a MySQL set: in the file the primary's dump by GTID begins with (its
    artificial Rotate names it), at the first transaction the set lacks, behind the series' own
    head (Previous_gtids with the set's GTIDs before there, fillers); at 4 when that is the file's
    first transaction; after the file's last whole transaction when the set lacks none. A set that
    is not a MySQL GTID set is one line, and the source stops."""
    up, name, data, policy = _setup(shared_fixtures, tmp_path, GTID_57)
    primary = Primary(up, policy, pki)
    url = SourceURL.parse(f"mysql://sha2:sha2-pw@127.0.0.1:{primary.endpoint.port}?ssl-mode=REQUIRED")
    uuid = EXECUTED[name].split(":")[0]
    started = SourceReplicator(url, BinlogMirror(tmp_path / "series"), start_gtid=f"{uuid}:{executed}")
    refused = SourceReplicator(url, BinlogMirror(tmp_path / "other"), start_gtid="0-1-2")
    try:
        started.start()
        refused.start()
        assert wait_for(lambda: _complete(tmp_path / "series", name, data), every=0.1), started.last_error
        ours = (tmp_path / "series" / name).read_bytes()
        assert ours[start:] == data[start:] and (ours == data) == (start == 4)
        if start > 4:
            previous = [e for e in read_events(ours[:start], name) if e.type_code == 35]
            gnos = [e.gtid_info.gno for e in read_events(data[:start], name, verify_checksums=False) if e.is_gtid]
            assert [str(e.gtid_set) for e in previous] == [f"{uuid}:1-{max(gnos)}" if len(gnos) > 1 else f"{uuid}:1"]
        assert str(started.mirror.gtids.mysql) == EXECUTED[name]
        assert wait_for(lambda: refused.state == "stopped", every=0.1), refused.status()
        assert refused.last_error.startswith("--source-gtid: ") and "MySQL GTID set" in refused.last_error
        assert not (tmp_path / "other" / name).exists()
    finally:
        started.stop()
        refused.stop()
        primary.stop()


def test_compressed_payloads_are_kept_as_the_primary_wrote_them(shared_fixtures, tmp_path, pki):
    """The MySQL 8.0.28 fixture with a zstd Transaction_payload (anonymous GTIDs): the series holds
    it byte for byte, the compressed payload untouched."""
    up, name, data, policy = _setup(shared_fixtures, tmp_path, COMPRESSED)
    primary = Primary(up, policy, pki)
    local = tmp_path / "series"
    replicator = _mirror(f"mysql://sha2:sha2-pw@127.0.0.1:{primary.endpoint.port}?ssl-mode=VERIFY_IDENTITY"
                         f"&ssl-ca={pki / 'ca.crt'}", local)
    try:
        assert wait_for(lambda: _complete(local, name, data), every=0.1), replicator.last_error
        assert (local / name).read_bytes() == data
        assert any(e.type_code == 40 for e in read_events(data, name))  # TRANSACTION_PAYLOAD
    finally:
        replicator.stop()
        primary.stop()


@pytest.mark.parametrize("query, message", [
    ("ssl-mode=SOMETIMES", "ssl-mode 'SOMETIMES' is not one of"),
    ("ssl-mode=VERIFY_CA", "ssl-mode VERIFY_CA needs ssl-ca=PATH"),
    ("ssl-ca=/nonexistent/ca.pem", "ssl-ca '/nonexistent/ca.pem' is not a readable file"),
    ("public-key=/nonexistent/key.pem", "public-key '/nonexistent/key.pem' is not a readable file"),
    ("sslmode=REQUIRED", "unknown option 'sslmode'"),
])
def test_source_url_options_are_checked_and_never_show_the_password(query, message):
    from dumpfilter.errors import RuleError

    with pytest.raises(RuleError, match=message) as refused:
        SourceURL.parse(f"mysql://repl:pa@ss-w0rd@127.0.0.1:3306?{query}")
    assert "w0rd" not in str(refused.value) and "pa@" not in str(refused.value)
    url = SourceURL.parse("mysql://repl:pa%40ss@127.0.0.1:3306?ssl-mode=required&get-public-key=1")
    assert (url.password, url.ssl_mode, url.get_public_key, url.ssl_ca) == ("pa@ss", "REQUIRED", True, None)
    assert "pa@ss" not in repr(url)


@pytest.mark.parametrize("transport", ["tls", "rsa"])
def test_master_serve_processes_over_tls_or_rsa_with_a_restart(shared_fixtures, tmp_path, pki, transport):
    """The production shape: `master serve --mysql-listen --policy --tls-cert --tls-key
    --mysql-rsa-key` over the MySQL 5.7 GTID fixture (cut after its first transaction) as the
    primary, `master serve --source URL --source-password-file` as the binlog server. The binlog
    server is stopped (SIGTERM), the primary writes the rest, a new binlog server continues by GTID:
    the series ends as the fixture, byte for byte. The identity is caching_sha2_password only and
    its digest is not cached at the first login, so the password went by full authentication: in
    TLS (VERIFY_IDENTITY), or with ssl-mode=DISABLED by RSA with the pinned key (the in-process
    tests above count each path at the endpoint)."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    from tests.support.master_command import free_port, serve_master, stop_master

    _source, name = GTID_57
    data = (shared_fixtures / GTID_57[0]).read_bytes()
    held = _cut(data, name, 1)
    up, name, data, policy = _setup(shared_fixtures, tmp_path, GTID_57, held)
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    (tmp_path / "rsa.pem").write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                         serialization.NoEncryption()))
    (tmp_path / "rsa.pub").write_bytes(key.public_key().public_bytes(serialization.Encoding.PEM,
                                                                     serialization.PublicFormat.SubjectPublicKeyInfo))
    (tmp_path / "password").write_text("sha2-pw\n")
    port = free_port()
    query = (f"ssl-mode=VERIFY_IDENTITY&ssl-ca={pki / 'ca.crt'}" if transport == "tls"
             else f"ssl-mode=DISABLED&public-key={tmp_path / 'rsa.pub'}")
    source = ["--source", f"mysql://sha2@127.0.0.1:{port}?{query}", "--source-password-file", str(tmp_path / "password")]
    local = tmp_path / "series"
    errors = []
    primary = serve_master(up, "--mysql-listen", f"127.0.0.1:{port}", "--policy", str(policy), "--tls-cert",
                           str(pki / "server.crt"), "--tls-key", str(pki / "server.key"), "--mysql-rsa-key",
                           str(tmp_path / "rsa.pem"))[0]
    try:
        server = serve_master(local, *source)[0]
        assert wait_for(lambda: (local / name).is_file() and (local / name).stat().st_size == held, every=0.1)
        errors.append(stop_master(server))
        with open(up / name, "ab") as f:
            f.write(data[held:])
        server = serve_master(local, *source)[0]
        assert wait_for(lambda: _complete(local, name, data), every=0.1)
        errors.append(stop_master(server))
        assert (local / name).read_bytes() == data
    finally:
        errors.append(stop_master(primary))
    for stderr in errors:
        assert "Traceback" not in stderr and "error" not in stderr.lower(), stderr
