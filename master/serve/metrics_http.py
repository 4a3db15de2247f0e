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
- At most MAX_CONNECTIONS connections at once; when they are all taken, a newcomer from another
  address than the one holding the most unfinished requests closes that address's oldest, as the
  MySQL endpoint makes room among unfinished handshakes: sockets that trickle their headers
  (slowloris) cannot keep the scrapers of other addresses out. A newcomer from any address, the
  same one included, closes a connection held for longer than REQUEST_TIMEOUT (a request still
  trickling in, an answer still being taken a byte at a time): a scraper behind the same address
  as such sockets waits at most that long. GET and HEAD only.
"""

from __future__ import annotations

import hmac
import logging
import socket
import ssl
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable
from contextlib import suppress
from pathlib import Path
from typing import Any, cast
from socketserver import ThreadingMixIn
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from dumpfilter.errors import DumpFilterError, InvalidArgumentError
from dumpfilter.master.serve.metrics import registry_for, view_for
from dumpfilter.master.policy import OPEN, Identity
from dumpfilter.master.service import DumpService

log = logging.getLogger("dumpfilter.master")
REQUEST_TIMEOUT = 10.0  # a scraper that stalls its TLS handshake or its request is dropped after this
MAX_CONNECTIONS = 16    # connections served at once (a thread each); see _Server.make_room
ROOM_WAIT = 2.0         # how long a newcomer waits for the place of the connection it closed
_PEER_CN = "dumpfilter.peer_cn"
# WSGI's call (PEP 3333): the request's environ, start_response(status, headers)
_Environ = dict[str, Any]
_StartResponse = Callable[[str, list[tuple[str, str]]], object]
_Request = socket.socket | tuple[bytes, socket.socket]  # (socketserver's)


class _Server(ThreadingMixIn, WSGIServer):
    daemon_threads = True
    block_on_close = False

    def server_activate(self) -> None:
        super().server_activate()
        self.slots = threading.BoundedSemaphore(MAX_CONNECTIONS)
        # Each connection held: (client address, when it came, whether its request is read yet).
        self.held: dict[_Request, tuple[str, float, bool]] = {}
        self.held_lock = threading.Lock()
        self.evicted = 0

    def process_request(self, request: _Request, client_address: Any) -> None:
        """A thread per connection, at most MAX_CONNECTIONS: a scraper that opens more (or holds
        them open) cannot make the master start threads without bound. A newcomer finding them
        all taken makes room (`make_room`); if none can be made, it is closed unanswered."""
        if not self.slots.acquire(blocking=False):
            if not (self.make_room(str(client_address[0])) and self.slots.acquire(timeout=ROOM_WAIT)):
                self.shutdown_request(request)
                return
        with self.held_lock:
            self.held[request] = (str(client_address[0]), time.monotonic(), False)
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._let_go(request)
            raise

    def process_request_thread(self, request: _Request, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._let_go(request)

    def _let_go(self, request: _Request) -> None:
        with self.held_lock:
            self.held.pop(request, None)
        self.slots.release()

    def request_read(self, request: _Request) -> None:
        """The connection's request is read: it is being answered now."""
        with self.held_lock:
            if request in self.held:
                host, since, _ = self.held[request]
                self.held[request] = (host, since, True)

    def make_room(self, newcomer: str) -> bool:
        """Close one connection for a newcomer from address `newcomer`: the oldest still sending its
        request, of the address with the most of them, when that address holds more unfinished
        requests than the newcomer's (slow senders from one address cannot keep another address's
        scraper out); else the oldest held for more than REQUEST_TIMEOUT, its request unfinished
        or its answer untaken (the socket timeout drops only a silent one: a byte every few
        seconds keeps it). False when none may go: the newcomer is refused."""
        now = time.monotonic()
        with self.held_lock:
            reading = [(request, host) for request, (host, _, read) in self.held.items() if not read]
            counts = Counter(host for _, host in reading)
            victim: _Request | None = None
            if counts:
                busiest, most = counts.most_common(1)[0]
                if most > counts.get(newcomer, 0) + 1:
                    victim = next(request for request, host in reading if host == busiest)
            if victim is None:  # (held in arrival order: the first found is the oldest)
                victim = next((request for request, (_, since, _) in self.held.items()
                               if now - since > REQUEST_TIMEOUT), None)
            if victim is None:
                return False
            del self.held[victim]  # (its thread lets its place go when its read or write fails)
            self.evicted += 1
        sock = victim if isinstance(victim, socket.socket) else victim[1]
        with suppress(OSError):
            socket.socket.shutdown(sock, socket.SHUT_RDWR)  # the descriptor's: never a TLS object's state
        log.debug("metrics: every connection was taken: the oldest unfinished one was closed for a newcomer")
        return True

    def handle_error(self, request: _Request, client_address: Any) -> None:
        """A broken client (a failed handshake, a reset) is one debug line, never a traceback."""
        log.debug("metrics: a request from %s failed", client_address, exc_info=True)


class _Server6(_Server):
    address_family = socket.AF_INET6


class _Handler(WSGIRequestHandler):
    timeout = REQUEST_TIMEOUT

    def setup(self) -> None:
        super().setup()
        if isinstance(self.connection, ssl.SSLSocket):
            self.connection.do_handshake()  # here, on the request's thread: never on the accepting one

    def parse_request(self) -> bool:
        parsed = super().parse_request()
        if isinstance(self.server, _Server):
            self.server.request_read(self.request)  # its headers are in: no more a slow sender's place
        return parsed

    def get_environ(self) -> dict[str, str]:
        environ = super().get_environ()
        cert = self.connection.getpeercert() if isinstance(self.connection, ssl.SSLSocket) else None
        # (the subject is a tuple of RDNs, each of (key, value) pairs: the stubs type every field alike)
        subject = cast("tuple[tuple[tuple[str, str], ...], ...]", (cert or {}).get("subject", ()))
        names = [value for rdn in subject for key, value in rdn if key == "commonName"]
        if names:
            environ[_PEER_CN] = names[0]
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
        self.httpd = make_server(bare, port, self._app, _Server6 if ":" in bare else _Server, handler_class=_Handler)
        self.scheme = "http"
        if tls_cert and tls_key:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(tls_cert, tls_key)
            if tls_client_ca:
                context.load_verify_locations(tls_client_ca)
                context.verify_mode = ssl.CERT_REQUIRED
            self.httpd.socket = context.wrap_socket(self.httpd.socket, server_side=True,
                                                    do_handshake_on_connect=False)
            self.scheme = "https"
        self.port = self.httpd.server_address[1]
        self.url = f"{self.scheme}://{host}:{self.port}/metrics"
        self.thread = threading.Thread(target=self.httpd.serve_forever, name="metrics", daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.httpd.shutdown()
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
