"""TLS on the MySQL endpoint: the server context made from the master's --tls-cert/--tls-key (one
server identity for gRPC, /metrics and the MySQL protocol), client certificates under
--tls-client-ca (the certificate's CN is the policy identity, as on the gRPC side), and the
--mysql-require-secure-transport refusal (MySQL's ER_SECURE_TRANSPORT_REQUIRED, 3159)."""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from pathlib import Path
from typing import cast

from dumpfilter.errors import InvalidArgumentError

ER_SECURE_TRANSPORT_REQUIRED = 3159
SECURE_TRANSPORT_MESSAGE = "Connections using insecure transport are prohibited while --require_secure_transport=ON."


@dataclass(frozen=True)
class EndpointTls:
    """`context` is None without --tls-cert: the handshake then offers no CLIENT_SSL."""

    context: ssl.SSLContext | None = None
    require_secure_transport: bool = False
    client_certificates: bool = False   # --tls-client-ca: every client proves its identity with one

    @property
    def offered(self) -> bool:
        return self.context is not None


def endpoint_tls(cert: str | Path | None, key: str | Path | None, client_ca: str | Path | None = None,
                 require_secure_transport: bool = False) -> EndpointTls:
    """The endpoint's TLS settings. mTLS implies secure transport: a plain connection could not
    show a certificate, so it is refused as --mysql-require-secure-transport refuses it."""
    if not (cert and key):
        if cert or key:
            raise InvalidArgumentError("--tls-cert and --tls-key go together")
        if client_ca:
            raise InvalidArgumentError("--tls-client-ca (mTLS) needs --tls-cert and --tls-key")
        if require_secure_transport:
            raise InvalidArgumentError("--mysql-require-secure-transport needs TLS: give --tls-cert and --tls-key")
        return EndpointTls()
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2   # MySQL 8.4 accepts TLSv1.2 and TLSv1.3 only
    try:
        context.load_cert_chain(str(cert), str(key))
    except (OSError, ssl.SSLError) as exc:
        raise InvalidArgumentError(f"--tls-cert {cert} / --tls-key {key}: {getattr(exc, 'strerror', None) or exc}") \
            from None
    if client_ca:
        try:
            context.load_verify_locations(str(client_ca))
        except (OSError, ssl.SSLError) as exc:
            raise InvalidArgumentError(f"--tls-client-ca {client_ca}: {getattr(exc, 'strerror', None) or exc}") \
                from None
        context.verify_mode = ssl.CERT_REQUIRED
    return EndpointTls(context, require_secure_transport or bool(client_ca), bool(client_ca))


def peer_common_name(sock: ssl.SSLSocket) -> str | None:
    """The verified client certificate's CN (None without one)."""
    cert = sock.getpeercert() or {}
    # (the subject is a tuple of RDNs, each of (key, value) pairs: the stubs type every field alike)
    subject = cast("tuple[tuple[tuple[str, str], ...], ...]", cert.get("subject", ()))
    names = [value for rdn in subject for key, value in rdn if key == "commonName"]
    return names[0] if names else None
