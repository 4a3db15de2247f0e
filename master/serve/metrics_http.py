"""The /metrics HTTP endpoint of `master serve`: where it listens, who a scraper is, and what it
may see (master.serve.metrics builds the view).

- `--metrics-listen HOST:PORT` (or `--metrics-port N`, on 127.0.0.1) is chosen by the operator,
  apart from the gRPC port; it speaks HTTPS with the master's certificate when the master has one
  (`--tls-cert/--tls-key`), and with `--tls-client-ca` it requires a client certificate signed by
  that CA, whose CN is the scraper's policy identity, as on the gRPC side.
- `--metrics-token-file F`: a scrape must carry `Authorization: Bearer <the file's token>` (or,
  under mTLS, a client certificate): else 401. The token sees every slave, as an administrator.
- A scraper's view: the token, every slave; a client certificate, what its identity sees over gRPC
  (`Stats`); anonymous (no token file), every slave on an open master, none by name under a policy.
- Connections are accepted, and their TLS handshake and request head read, by one selector
  thread without a thread each (master.serve.http_acceptor): a slow sender (slowloris), from
  any address, the scraper's own included, never holds a thread a scraper needs. At most 256
  wait for their head (a newcomer past them closes the oldest); a head not in within
  REQUEST_TIMEOUT is closed; a complete one is answered by one of a few workers. GET and HEAD
  only.
"""

from __future__ import annotations

import hmac
import io
import logging
import socket
import ssl
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from dumpfilter.errors import DumpFilterError, InvalidArgumentError
from dumpfilter.master.endpoint.tls import endpoint_tls, peer_common_name
from dumpfilter.master.serve.http_acceptor import HEAD_TIMEOUT, HeadAcceptor
from dumpfilter.master.serve.metrics import registry_for, view_for
from dumpfilter.master.policy import OPEN, Identity
from dumpfilter.master.service import DumpService

log = logging.getLogger("dumpfilter.master")
REQUEST_TIMEOUT = HEAD_TIMEOUT  # a scraper that stalls its TLS handshake or its request is dropped after this
_PEER_CN = "dumpfilter.peer_cn"
# WSGI's call (PEP 3333): the request's environ, start_response(status, headers)
_Environ = dict[str, Any]
_StartResponse = Callable[[str, list[tuple[str, str]]], object]


class _Server(WSGIServer):
    """The listening socket and the WSGI environ's base; the acceptor accepts, never serve_forever."""

    request_queue_size = 128   # listen()'s backlog: a burst of connections waits for the acceptor


class _Server6(_Server):
    address_family = socket.AF_INET6


class _Handler(WSGIRequestHandler):
    """Answers one request whose head the acceptor read already (`head`)."""

    timeout = REQUEST_TIMEOUT

    def __init__(self, head: bytes, request: socket.socket, client_address: Any, server: _Server) -> None:
        self.head = head
        super().__init__(request, client_address, server)

    def setup(self) -> None:
        super().setup()
        self.rfile.close()
        self.rfile = io.BytesIO(self.head)   # GET and HEAD: the head is the whole request

    def get_environ(self) -> dict[str, str]:
        environ = super().get_environ()
        name = peer_common_name(self.connection) if isinstance(self.connection, ssl.SSLSocket) else None
        if name is not None:
            environ[_PEER_CN] = name
        return environ

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's signature
        pass


class MetricsEndpoint:
    """A started /metrics endpoint over `service`; `stop()` ends it."""

    def __init__(self, service: DumpService, host: str, port: int, *, token: bytes | None = None,
                 tls_cert: str | Path | None = None, tls_key: str | Path | None = None,
                 tls_client_ca: str | Path | None = None) -> None:
        self.service, self.token = service, token
        bare = host[1:-1] if host.startswith("[") and host.endswith("]") else host
        self.httpd = (_Server6 if ":" in bare else _Server)((bare, port), WSGIRequestHandler)  # (_answer handles)
        self.httpd.set_app(self._app)
        # the MySQL endpoint's server context: one identity, and the same client CA, for every face
        context = endpoint_tls(tls_cert, tls_key, tls_client_ca).context if tls_cert and tls_key else None
        self.scheme = "http" if context is None else "https"
        self.port = self.httpd.server_address[1]
        self.url = f"{self.scheme}://{host}:{self.port}/metrics"
        self.acceptor = HeadAcceptor(self.httpd.socket, self._answer, context)

    def _answer(self, sock: socket.socket, client_address: Any, head: bytes) -> None:
        _Handler(head, sock, client_address, self.httpd)

    def stop(self) -> None:
        self.acceptor.stop()
        self.httpd.server_close()

    def _viewer(self, environ: _Environ) -> tuple[Identity | None, str | None]:
        """(viewer, None) or (None, the refusal's status line)."""
        header = environ.get("HTTP_AUTHORIZATION", "")
        if self.token is not None and header:
            scheme, _, presented = header.partition(" ")
            if scheme.lower() == "bearer" and hmac.compare_digest(presented.strip().encode("utf-8", "replace"),
                                                                  self.token):
                return OPEN, None
            return None, "401 Unauthorized"
        name = environ.get(_PEER_CN)
        if name is not None:
            try:
                return view_for(self.service, self.service.authenticate(certificate_name=name)), None
            except DumpFilterError:
                return None, "403 Forbidden"
        if self.token is not None:
            return None, "401 Unauthorized"
        return view_for(self.service, None), None

    def _app(self, environ: _Environ, start_response: _StartResponse) -> Iterable[bytes]:
        if environ.get("PATH_INFO", "/") not in ("/metrics", "/metrics/"):
            start_response("404 Not Found", [("Content-Type", "text/plain")])
            return [b"not found: the metrics are at /metrics\n"]
        method = environ.get("REQUEST_METHOD", "GET")
        if method not in ("GET", "HEAD"):
            start_response("405 Method Not Allowed", [("Content-Type", "text/plain"), ("Allow", "GET, HEAD")])
            return [b"method not allowed: /metrics answers GET and HEAD\n"]
        viewer, refused = self._viewer(environ)
        if refused is not None:
            start_response(refused, [("Content-Type", "text/plain"), ("WWW-Authenticate", 'Bearer realm="dumpfilter"')])
            return [f"{refused}: see master serve --metrics-token-file\n".encode()]
        body = generate_latest(registry_for(self.service, viewer))
        start_response("200 OK", [("Content-Type", CONTENT_TYPE_LATEST), ("Content-Length", str(len(body)))])
        return [body] if method == "GET" else []  # HEAD: the headers alone


def read_token(path: str | Path) -> bytes:
    """The bearer token in `path` (surrounding whitespace dropped): one line, at least 16 characters,
    read from a regular file of at most 1 MiB (a FIFO or /dev/zero is refused unread)."""
    from dumpfilter.regular_file import read_regular

    try:
        token = read_regular(path, 1 << 20).decode("utf-8").strip()
    except UnicodeDecodeError:  # (never the token's bytes in the message)
        raise InvalidArgumentError(f"--metrics-token-file {path}: not UTF-8 text") from None
    except (OSError, ValueError) as exc:
        raise InvalidArgumentError(f"--metrics-token-file {path}: {getattr(exc, 'strerror', None) or exc}") from None
    if len(token) < 16 or any(c.isspace() for c in token):
        raise InvalidArgumentError(f"--metrics-token-file {path}: the token must be one word of at least 16 "
                                   "characters")
    return token.encode("utf-8")
