"""`master serve --mysql-listen`: the MySQL-protocol endpoint beside gRPC. One thread per client
connection; each authenticates against the master policy, answers the replica's connect-time
queries, registers the replica with the shared DumpService (the rules --replicas names for it) and
streams its filtered binlog through the same per-slave decision and assembly path as a gRPC Dump.
Every failure becomes one ERR packet with a MySQL error code a replica understands (1236 for a
position it cannot have, 1045 for credentials, 1047 for an unknown command) and one log line;
the other connections go on."""

from __future__ import annotations

import contextlib
import itertools
import logging
import socket
import socketserver
import ssl
import threading
import time
import uuid
from contextlib import ExitStack, suppress

from dumpfilter.codec import read_format_description
from dumpfilter.codec.constants import CHECKSUM_CRC32
from dumpfilter.errors import (
    AccessDeniedError,
    DumpFilterError,
    ResourceExhaustedError,
)
from dumpfilter.binlogs import open_binlog, served_paths
from dumpfilter.binlogs.files import file_size
from dumpfilter.binlogs.gtid_start import BinlogStatus, binlog_gtid_pos
from dumpfilter.master.serve.grpc_server import parse_listen
from dumpfilter.master.endpoint.admission import Admission, EndpointLimits, Refused
from dumpfilter.master.protocol.commands import (
    COM_BINLOG_DUMP,
    COM_BINLOG_DUMP_GTID,
    COM_REGISTER_SLAVE,
)
from dumpfilter.master.endpoint.dump import (
    parse_binlog_dump,
    parse_binlog_dump_gtid,
    parse_register_slave,
)
from dumpfilter.master.endpoint.auth import Authenticator, Conversation, RsaKeys
from dumpfilter.master.endpoint.handshake import (
    initial_handshake,
    is_ssl_request,
    new_scramble,
    parse_handshake_response,
)
from dumpfilter.master.endpoint.dumping import Dumping, code_for
from dumpfilter.master.endpoint.row_metadata import binlog_row_metadata
from dumpfilter.master.protocol.packets import (
    ER_ACCESS_DENIED_ERROR,
    ER_CON_COUNT_ERROR,
    ER_HANDSHAKE_ERROR,
    ER_NET_PACKET_TOO_LARGE,
    ER_UNKNOWN_COM_ERROR,
    ConnectionClosed,
    PacketStream,
    PacketTooLarge,
    ProtocolError,
    ReadTimeout,
    err_packet,
    OK_PACKET,
)
from dumpfilter.master.endpoint.queries import QueryError, ServerFacts, Session
from dumpfilter.master.endpoint.replicas import ReplicaMap
from dumpfilter.master.endpoint.tls import ER_SECURE_TRANSPORT_REQUIRED, SECURE_TRANSPORT_MESSAGE, EndpointTls, peer_common_name
from dumpfilter.master.policy import Identity
from dumpfilter.master.rate_limited_log import ProblemLog, shown_user
from dumpfilter.master.service import DumpService

log = logging.getLogger("dumpfilter.master.mysql")

COM_QUIT, COM_INIT_DB, COM_QUERY, COM_PING = 0x01, 0x02, 0x03, 0x0E
ER_UNKNOWN_ERROR = 1105
ER_MALFORMED_PACKET = 1835
ER_CLIENT_INTERACTION_TIMEOUT = 4031  # MySQL 8.0.24+: sent before closing a session idle past wait_timeout
HANDSHAKE_BYTES = 64 << 10            # a handshake response is a few hundred bytes
LINGER_SECONDS, LINGER_BYTES = 2.0, 64 << 20  # what a closing connection still reads (see _linger)
DEFAULT_VERSION = "10.11.0-MariaDB-dumpfilter-log"
SEND_TIMEOUT = 60.0        # a replica that takes nothing for this long is disconnected
_COMMANDS = {0x00: "COM_SLEEP", 0x04: "COM_FIELD_LIST", 0x05: "COM_CREATE_DB", 0x06: "COM_DROP_DB",
             0x08: "COM_SHUTDOWN", 0x09: "COM_STATISTICS", 0x0A: "COM_PROCESS_INFO", 0x0C: "COM_PROCESS_KILL",
             0x11: "COM_CHANGE_USER", 0x13: "COM_TABLE_DUMP", 0x16: "COM_STMT_PREPARE", 0x17: "COM_STMT_EXECUTE",
             0x1A: "COM_SET_OPTION", 0x1F: "COM_RESET_CONNECTION"}


class MysqlEndpoint:
    """A running MySQL-protocol endpoint over a DumpService."""

    def __init__(self, service: DumpService, listen: str = "127.0.0.1:0", *, replicas: ReplicaMap | None = None,
                 limits: EndpointLimits | None = None,
                 tls: EndpointTls | None = None, rsa_keys: RsaKeys | None = None):
        host, port = parse_listen(listen)
        self.service = service
        self.tls = tls or EndpointTls()
        self.auth = Authenticator(rsa_keys or RsaKeys())
        self.replicas = replicas or ReplicaMap({}, {})
        self.limits = limits or EndpointLimits()
        self.admission = Admission(self.limits, service.policy)
        self.problems = ProblemLog(log, "refused or broken connections")
        self.failed_logins = ProblemLog(log, "failed logins")
        # Connection ids, and the lock over `connections`: each _Connection takes an id and adds itself.
        self.ids = itertools.count(1)
        self.lock = threading.Lock()
        self.connections: set[_Connection] = set()
        self.errors_sent = 0
        self.binlog_status = BinlogStatus()  # SHOW BINARY LOG STATUS, remembered while the file does not grow
        self._row_metadata: tuple[tuple[str, int] | tuple[()], str | None] = ((), None)  # (newest file, its size if none found), answer
        endpoint = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                _Connection(endpoint, self.request, self.client_address).run()

        class Server(socketserver.ThreadingTCPServer):
            allow_reuse_address = True   # a restarted master gets its port back at once
            daemon_threads = True
            request_queue_size = 128     # the listen backlog: replicas reconnect all at once after a restart
            address_family = socket.AF_INET6 if ":" in host.strip("[]") else socket.AF_INET

        try:
            self.server = Server((host.strip("[]"), port), Handler)
        except OSError as exc:
            raise DumpFilterError(f"--mysql-listen {listen}: cannot listen: {exc.strerror or exc}") from None
        self.port = self.server.server_address[1]
        self._thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.2},
                                        name="mysql-endpoint", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        with self.lock:
            connections = list(self.connections)
        for conn in connections:
            conn.close()

    # -- what the endpoint tells a replica about the master --------------------------------------
    def facts(self) -> ServerFacts:
        fmt, fde = None, None
        with contextlib.suppress(DumpFilterError, OSError):
            paths = served_paths(self.service.binlog_dir)
            if paths:
                with open_binlog(paths[-1]) as f:
                    fde, fmt = read_format_description(f, str(paths[-1]))
        server_id = fde.server_id if fde is not None else 1
        version = fmt.server_version if fmt is not None else DEFAULT_VERSION
        mysql = fmt is not None and fmt.flavor == "mysql"
        limits = self.limits
        return ServerFacts(
            server_id=server_id, server_uuid=str(uuid.uuid5(uuid.NAMESPACE_OID, f"dumpfilter-master-{server_id}")),
            version=version, checksum="CRC32" if fmt is None or fmt.checksum_alg == CHECKSUM_CRC32 else "NONE",
            gtid_mode="ON" if mysql and fmt is not None and fmt.version >= (5, 6, 0) else "OFF",
            binary_logs=lambda: [(p.name, file_size(p, 0)) for p in served_paths(self.service.binlog_dir)],
            gtid_at=lambda file, pos: binlog_gtid_pos(served_paths(self.service.binlog_dir), file, pos),
            binlog_status=lambda: self.binlog_status.of(served_paths(self.service.binlog_dir)),
            row_metadata=self.row_metadata,
            extra={"max_allowed_packet": limits.max_packet, "wait_timeout": round(limits.wait_timeout),
                   "connect_timeout": round(limits.connect_timeout), "max_connections": limits.max_connections,
                   "have_ssl": "YES" if self.tls.offered else "DISABLED",
                   "require_secure_transport": "ON" if self.tls.require_secure_transport else "OFF",
                   "default_authentication_plugin": "caching_sha2_password"})

    def row_metadata(self) -> str | None:
        """@@binlog_row_metadata as the served binlog shows it, looked for again only when the
        newest file changed (or grew, while no Table_map was found)."""
        try:
            paths = served_paths(self.service.binlog_dir)
        except (DumpFilterError, OSError):
            return None
        if not paths:
            return None
        key, value = self._row_metadata
        if key and key[0] == paths[-1].name and (value is not None or key[1] == file_size(paths[-1], 0)):
            return value
        value = binlog_row_metadata(paths)
        self._row_metadata = ((paths[-1].name, file_size(paths[-1], 0)), value)
        return value


class _Connection(Dumping):
    def __init__(self, endpoint: MysqlEndpoint, sock: socket.socket, address: tuple[object, ...]) -> None:
        self.endpoint, self.sock = endpoint, sock
        self.service = endpoint.service
        self.peer = f"{address[0]}:{address[1]}"
        self.host = str(address[0])
        self.id = next(endpoint.ids)
        self.stream = PacketStream(sock)
        self.identity: Identity | None = None
        self.user = ""
        self.session: Session | None = None
        self.registered: dict[int, str] = {}  # server_id -> reported host
        self.reported: set[int] = set()        # server_ids this connection sent COM_REGISTER_SLAVE for
        self.why = ""                          # why the endpoint ends the connection (logged once at its end)
        self.why_warns = False                 # ... and whether it was the endpoint's doing
        self.dumping = False                   # a dump command was read
        self.ignored = 0                       # bytes a dumping client sent, dropped (see _active)
        self.closed = False
        self.cipher: str | None = None         # the TLS cipher, once the client asked for TLS
        self.certificate_name: str | None = None
        self.auth_path = ""                    # how the client authenticated (plugin/path)

    def close(self) -> None:
        self.closed = True
        with suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)

    # -- life of a connection ----------------------------------------------------------------
    def run(self) -> None:
        endpoint = self.endpoint
        with endpoint.lock:
            endpoint.connections.add(self)
        try:
            self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self.sock.settimeout(SEND_TIMEOUT)
            try:
                evicted = endpoint.admission.enter_handshake(self.host, self.close)
            except Refused as exc:
                endpoint.problems.warning("mysql connection from %s refused: %s", self.peer, exc)
                self._error(ER_CON_COUNT_ERROR, str(exc))
                return
            if evicted is not None:  # its address's cap (--mysql-max-handshakes-per-host), or the one in all
                endpoint.problems.warning("mysql connection from %s: the handshake cap was full: the oldest from %s was "
                                          "closed to make room", self.peer, evicted)
            try:
                authenticated = self._connect()
            finally:
                endpoint.admission.leave_handshake(self.host, self.close)
            if not authenticated:
                return
            with ExitStack() as held:  # the session's place, left however its commands end
                try:
                    held.enter_context(endpoint.admission.session(self.identity))
                except Refused as exc:
                    endpoint.problems.warning("mysql connection %s from %s (user %s) refused: %s "
                                              "(--mysql-max-connections %d)", self.id, self.peer, shown_user(self.user),
                                              exc, endpoint.limits.max_connections)
                    self._error(exc.errno, str(exc))
                    return
                self.stream.write(OK_PACKET)
                log.info("mysql connection %s from %s: user %r authenticated (%s%s)", self.id, self.peer, self.user,
                         self.auth_path, f", TLS {self.cipher}" if self.cipher else "")
                self._commands()
        except ConnectionClosed:
            pass
        except Exception as exc:  # a bug: one line for the operator, an error for the client
            log.error("mysql connection %s from %s: internal error: %s: %s", self.id, self.peer, type(exc).__name__, exc)
            self._try_error(ER_UNKNOWN_ERROR, f"internal error: {type(exc).__name__}: {exc}")
        finally:
            with endpoint.lock:
                endpoint.connections.discard(self)
            with suppress(OSError):
                self.sock.close()
            if self.identity is not None:  # one line for every authenticated connection, saying why it ends
                # at WARNING where the endpoint ended a dump (an error, a replaced stream), else at INFO
                say = endpoint.problems.warning if self.dumping and self.why_warns else log.info
                say("mysql connection %s from %s (user %s) ended: %s", self.id, self.peer, shown_user(self.user),
                    self.why or "the client closed it")

    def _error(self, code: int, message: str) -> None:
        self.endpoint.errors_sent += 1
        # The message may quote what the client sent (a binlog file name, a GTID state): in the
        # master's log its control characters are escaped, so a client cannot forge a line.
        self.why = f"error {code} sent: {printable(message, 200)}"
        self.why_warns = True
        log.info("mysql connection %s from %s (user %s): error %s: %s", self.id, self.peer, shown_user(self.user), code,
                 printable(message, 500))
        self.stream.write(err_packet(code, message))

    def _try_error(self, code: int, message: str) -> None:
        with suppress(ConnectionClosed):
            self._error(code, message)

    def _connect(self) -> bool:
        """The handshake, all of it within connect_timeout (MySQL's: a socket that has not
        authenticated by then is closed, however slowly it trickles bytes); True once the client
        is authenticated. A failed login is one WARNING line (user, address, reason; never what
        the client sent as a password)."""
        endpoint = self.endpoint
        deadline = time.monotonic() + endpoint.limits.connect_timeout
        scramble = new_scramble()
        facts = endpoint.facts()
        self.session = Session(facts)
        self.stream.seq = 0
        self.stream.write(initial_handshake(facts.version, self.id, scramble, tls=endpoint.tls.offered))
        limit = min(HANDSHAKE_BYTES, endpoint.limits.max_packet)
        try:
            payload = self.stream.read(limit=limit, deadline=deadline)
            if is_ssl_request(payload):
                self._start_tls(deadline)
                payload = self.stream.read(limit=limit, deadline=deadline)
            elif endpoint.tls.require_secure_transport:
                endpoint.failed_logins.warning("mysql connection %s from %s: refused: not TLS "
                                               "(--mysql-require-secure-transport)", self.id, self.peer)
                self._error(ER_SECURE_TRANSPORT_REQUIRED, SECURE_TRANSPORT_MESSAGE)
                return False
            response = parse_handshake_response(payload)
            self.user = response.user
            account = endpoint.auth.account(self.service.policy, response.user)
            talk = Conversation(self.stream.write, lambda: self.stream.read(limit=limit, deadline=deadline))
            outcome = endpoint.auth.authenticate(talk, account, response.plugin, response.auth_response, scramble,
                                                 secure=self.cipher is not None, address=self.host,
                                                 connection=self.peer)
        except ResourceExhaustedError as exc:  # the login guard: too many failures lately, or its checks are full
            endpoint.failed_logins.warning("mysql login refused: user %s from %s: %s", shown_user(self.user), self.peer,
                                           exc)
            self._try_error(exc.mysql_errno or ER_CON_COUNT_ERROR, str(exc))
            return False
        except ReadTimeout:
            if not self.closed:  # not made room for a newcomer (admission)
                endpoint.problems.warning("mysql connection %s from %s: no handshake within connect_timeout (%gs): "
                                          "closed", self.id, self.peer, endpoint.limits.connect_timeout)
                self._try_error(ER_HANDSHAKE_ERROR, "Bad handshake: not completed within connect_timeout")
            return False
        except ProtocolError as exc:
            endpoint.problems.warning("mysql connection %s from %s: bad handshake: %s", self.id, self.peer,
                                      printable(str(exc), 500))
            self._try_error(ER_HANDSHAKE_ERROR, f"Bad handshake: {exc}")
            return False
        self.auth_path = f"{outcome.plugin}/{outcome.path}"
        identity, reason = self._identity(response.user, outcome.ok)
        reason = outcome.reason or reason  # what the exchange found (a right password sent the wrong way)
        if identity is None:
            endpoint.failed_logins.warning("mysql login failed: user %s from %s: %s", shown_user(response.user),
                                           self.peer, reason)
            self._error(ER_ACCESS_DENIED_ERROR, f"Access denied for user '{response.user[:64]}'@'{self.host}' "
                        f"(using password: {'YES' if outcome.password_used else 'NO'})")
            return False
        self.identity = identity
        return True

    def _start_tls(self, deadline: float) -> None:
        """The client sent an SSL Request: the TLS handshake (within the connect deadline), then
        the rest of the connection phase inside it, sequence ids going on."""
        tls = self.endpoint.tls
        context = tls.context
        if context is None:  # (not tls.offered)
            raise ProtocolError("the client asked for TLS, which this endpoint does not offer (the master has no "
                                "--tls-cert)")
        wrapped = context.wrap_socket(self.sock, server_side=True, do_handshake_on_connect=False)
        self.sock = self.stream.sock = wrapped
        try:
            wrapped.settimeout(max(0.001, deadline - time.monotonic()))
            wrapped.do_handshake()
            wrapped.settimeout(SEND_TIMEOUT)
        except TimeoutError:
            raise ReadTimeout("no TLS handshake before the deadline") from None
        except (ssl.SSLError, OSError) as exc:
            raise ProtocolError(f"TLS handshake failed: {getattr(exc, 'reason', None) or exc}") from None
        self.cipher = (wrapped.cipher() or ("",))[0]
        self._session().status.update(Ssl_cipher=self.cipher, Ssl_version=wrapped.version() or "")
        if tls.client_certificates:
            self.certificate_name = peer_common_name(wrapped)

    def _identity(self, user: str, proven: bool) -> tuple[Identity | None, str]:
        """(the policy identity for `user` once the exchange proved its password, else None; why
        not). Without a policy file the master is open, as its gRPC side is. Under mTLS the
        certificate's CN must be the user (its password is checked too, as MySQL checks an
        account's password under REQUIRE X509)."""
        policy = self.service.policy
        if not proven:
            if policy is not None and not user:
                return None, "no user name"
            if policy is not None and user not in policy.entries and policy.default is None:
                return None, "not in the master policy, which has no [default]"
            return None, "wrong password"
        try:
            return self.service.proven(user, self.certificate_name), ""
        except AccessDeniedError as exc:
            return None, str(exc)

    def _commands(self) -> None:
        while not self.closed:
            payload = self._read_command()
            if payload is None:
                return
            command, body = payload[0], payload[1:]
            if command == COM_QUIT:
                self.why = "the client sent COM_QUIT"
                return
            try:
                if command == COM_QUERY:
                    self._query(body)
                elif command in (COM_PING, COM_INIT_DB):
                    self.stream.write(OK_PACKET)
                elif command == COM_REGISTER_SLAVE:
                    self._register(body)
                elif command == COM_BINLOG_DUMP:
                    self._dump(parse_binlog_dump(body))
                    return  # a dump ends the connection, as a server's dump thread does
                elif command == COM_BINLOG_DUMP_GTID:
                    self._dump(parse_binlog_dump_gtid(body))
                    return
                else:
                    name = _COMMANDS.get(command, f"command 0x{command:02x}")
                    self._error(ER_UNKNOWN_COM_ERROR, f"Unknown command: dumpfilter's replication endpoint does not "
                                f"support {name}")
            except ProtocolError as exc:
                self._error(ER_MALFORMED_PACKET, f"Malformed communication packet: {exc}")

    def _read_command(self) -> bytes | None:
        """The next command, or None when the session must end: idle past wait_timeout (a dump
        never reads commands, so it is never idle), longer than max_allowed_packet (its unread
        rest would be taken for commands), or not a command."""
        limits = self.endpoint.limits
        try:
            payload = self.stream.read(limit=limits.max_packet, deadline=time.monotonic() + limits.wait_timeout)
        except ReadTimeout:
            log.info("mysql connection %s from %s (user %r): idle for wait_timeout (%gs): closed", self.id, self.peer,
                     self.user, limits.wait_timeout)
            self.stream.seq = 1  # as the reply to the client's next command: that is when it reads it
            self._try_error(ER_CLIENT_INTERACTION_TIMEOUT, "The client was disconnected by the server because of "
                            "inactivity (wait_timeout)")
            self._linger()
            return None
        except PacketTooLarge:
            self.endpoint.problems.warning("mysql connection %s from %s (user %s): a command of more than %d bytes "
                                           "(--mysql-max-packet): closed", self.id, self.peer, shown_user(self.user),
                                           limits.max_packet)
            self._try_error(ER_NET_PACKET_TOO_LARGE, "Got a packet bigger than 'max_allowed_packet' bytes "
                            f"({limits.max_packet})")
            self._linger()
            return None
        except ProtocolError as exc:
            self._error(ER_MALFORMED_PACKET, f"Malformed communication packet: {exc}")
            return None
        if not payload:
            self._error(ER_MALFORMED_PACKET, "Malformed communication packet: an empty command")
            return None
        return payload

    # -- commands --------------------------------------------------------------------------
    def _query(self, body: bytes) -> None:
        sql = body.decode("utf-8", "replace")
        try:
            packets = self._session().answer(sql)
        except QueryError as exc:
            self._error(exc.code, exc.message)
            return
        self.stream.write(*packets)

    def _register(self, body: bytes) -> None:
        reg = parse_register_slave(body)
        try:
            self._registration(reg.server_id, reg.host or self.peer.rpartition(":")[0])
        except DumpFilterError as exc:
            self._error(code_for(exc), str(exc))
            return
        self.reported.add(reg.server_id)
        self.stream.write(OK_PACKET)

    def _registration(self, server_id: int, host: str) -> None:
        """Register the replica with the dump service, unless this identity already registered
        that server_id: a reconnecting replica keeps its rules (ChangeFilter's too) and counters."""
        service = self.service
        existing = service.slaves.get(server_id)
        identity = self.identity
        assert identity is not None, "commands are read once the login made the identity"
        if existing is not None and existing.owner == identity.name:
            self.registered[server_id] = host
            return
        reg = self.endpoint.replicas.registration(server_id, self.user, host)
        result = service.register(reg, self.identity)
        for warning in result.warnings:
            log.warning("mysql replica server_id %s: %s", server_id, warning)
        self.registered[server_id] = host
        log.info("mysql replica server_id %s (%r, user %r) registered: %s", server_id, host, self.user,
                 "; ".join(e.rules.render() for e in result.effective))

    def _linger(self) -> None:
        """Before closing after a last ERR packet: stop sending, then take and drop what the
        client still sends (the rest of an oversized command, its next command), for at most
        LINGER_SECONDS and LINGER_BYTES. Closing a socket with unread bytes sends a TCP reset,
        which can destroy the ERR in the client's buffers before it reads it."""
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_WR)
            deadline, taken = time.monotonic() + LINGER_SECONDS, 0
            while taken < LINGER_BYTES and (left := deadline - time.monotonic()) > 0:
                self.sock.settimeout(left)
                chunk = self.sock.recv(1 << 16)
                if not chunk:
                    return
                taken += len(chunk)


def printable(text: str, limit: int) -> str:
    """`text` for a log line: at most `limit` characters, each one a line cannot show (a newline,
    a NUL, an escape) written as its Python escape."""
    shown = text if len(text) <= limit else text[:limit] + "..."
    if shown.isprintable():
        return shown
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in shown)
