"""`master serve` with an expired (or not yet valid) --tls-cert says so at start-up (issue #44 item
4): every client that verifies the certificate would refuse to connect."""

from __future__ import annotations

import datetime
import logging

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from dumpfilter.master.serve.grpc_server import create_server
from dumpfilter.wire import certificate_date_problems
from dumpfilter.workload.generator import WorkloadSpec, generate

NOW = datetime.datetime.now(datetime.UTC)


def certificate(tmp_path, start: datetime.datetime, end: datetime.datetime):
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(start).not_valid_after(end)
            .sign(key, hashes.SHA256()))
    cert_path, key_path = tmp_path / "server.crt", tmp_path / "server.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_path, key_path


@pytest.mark.parametrize("start,end,expected", [
    (NOW - datetime.timedelta(days=400), NOW - datetime.timedelta(days=35), "expired on"),
    (NOW + datetime.timedelta(days=2), NOW + datetime.timedelta(days=30), "not valid before"),
    (NOW - datetime.timedelta(days=1), NOW + datetime.timedelta(days=30), None),
])
def test_the_certificates_dates_are_checked(tmp_path, start, end, expected):
    cert, _ = certificate(tmp_path, start, end)
    problems = certificate_date_problems(cert.read_bytes())
    assert (problems == []) if expected is None else (len(problems) == 1 and expected in problems[0])


@pytest.mark.grpc
def test_serving_with_an_expired_certificate_is_warned_of(tmp_path, caplog):
    binlogs = tmp_path / "binlogs"
    binlogs.mkdir()
    generate(WorkloadSpec(seed=1, transactions=5, max_binlog_size=60_000), binlogs)
    cert, key = certificate(tmp_path, NOW - datetime.timedelta(days=400), NOW - datetime.timedelta(days=35))
    with caplog.at_level(logging.WARNING, logger="dumpfilter.master"):
        master, _ = create_server(binlogs, "127.0.0.1:0", tls_cert=cert, tls_key=key)
    try:
        warned = [r.getMessage() for r in caplog.records if "expired on" in r.getMessage()]
        assert len(warned) == 1 and str(cert) in warned[0] and "35 day(s) ago" in warned[0]
    finally:
        master.stop(0)
