"""A connection's dump (COM_BINLOG_DUMP, COM_BINLOG_DUMP_GTID) on the MySQL endpoint: its start
(file and position, a MariaDB GTID state or a MySQL GTID set), the stream of the dump service's
batches as the packets a replica's IO thread reads (dump.py, positions.py), what a server serves
that other clients need (a dump with server_id 0 that does not register, no heartbeats to a
client that asked for none, nothing read from a dumping client), and the reason it ends."""

from __future__ import annotations

import dataclasses
import logging
import select
import socket
import ssl
from pathlib import Path
from typing import TYPE_CHECKING

from dumpfilter import skip_policy
from dumpfilter.binlogs import served_paths
from dumpfilter.binlogs.files import file_format
from dumpfilter.binlogs.gtid_start import GtidState, start_file
from dumpfilter.errors import (
    DumpFilterError,
    PositionError,
    ResourceExhaustedError,
    ShuttingDownError,
    StreamReplacedError,
)
from dumpfilter.codec.encode import artificial_rotate
from dumpfilter.codec.rename import PositionKeeper
from dumpfilter.master.endpoint.dump import DumpRequest, replica_packets
from dumpfilter.master.endpoint.positions import ReplicaCount, WithoutHeartbeats
from dumpfilter.master.protocol.commands import (
    BINLOG_DUMP_NON_BLOCK,
    BINLOG_SEND_ANNOTATE_ROWS_EVENT,
    USE_HEARTBEAT_EVENT_V2,
)
from dumpfilter.master.protocol.packets import ER_CON_COUNT_ERROR, ER_SERVER_SHUTDOWN, ConnectionClosed, EOF_PACKET
from dumpfilter.master.service import DumpService
from dumpfilter.rules.renamer import live_renamer, renames

if TYPE_CHECKING:
    from dumpfilter.master.endpoint.queries import Session
    from dumpfilter.master.endpoint.server import MysqlEndpoint
    from dumpfilter.master.policy import Identity
    from dumpfilter.master.protocol.packets import PacketStream

log = logging.getLogger("dumpfilter.master.mysql")

ER_MASTER_FATAL_ERROR_READING_BINLOG = 1236
NO_HEARTBEAT = 3600.0      # the replica asked for no heartbeats: one an hour keeps the stream honest
IGNORED_BYTES = 1 << 20    # what a dumping client may send (and have dropped) before it is disconnected


class Dumping:
    """The dump commands of a `server._Connection` (which holds the session, socket and service)."""

    # What the connection holds and these commands use (server._Connection sets them).
    endpoint: MysqlEndpoint
    service: DumpService
    sock: socket.socket
    stream: PacketStream
    session: Session | None
    identity: Identity | None
    peer: str
    user: str
    id: int
    registered: dict[int, str]
    reported: set[int]
    why: str
    why_warns: bool
    dumping: bool
    ignored: int
    closed: bool

    if TYPE_CHECKING:  # the connection's own (server._Connection)
        def _error(self, code: int, message: str) -> None: ...
        def _try_error(self, code: int, message: str) -> None: ...
        def _registration(self, server_id: int, host: str) -> None: ...

    def _session(self) -> Session:
        session = self.session
        assert session is not None, "a command is read after the handshake made the session"
        return session

    def _dump(self, request: DumpRequest) -> None:
        self.dumping = True
        session = self._session()
        facts = session.facts
        gtid_state = request.gtid_set
        if gtid_state is None and session.has_user_var("slave_connect_state"):
            # MariaDB: MASTER_USE_GTID sets @slave_connect_state; the file and position are ignored.
            gtid_state = session.user_var("slave_connect_state") or ""
        checksum = session.user_var("master_binlog_checksum") or session.user_var("source_binlog_checksum")
        if facts.checksum == "CRC32" and not checksum:
            self._error(ER_MASTER_FATAL_ERROR_READING_BINLOG, "Slave can not handle replication events with the "
                        "checksum that master is configured to log")
            return
        period_ns = session.user_var("master_heartbeat_period") or session.user_var("source_heartbeat_period")
        try:
            period = int(float(period_ns)) / 1e9 if period_ns else 0.0
        except ValueError:
            period = 0.0
        server_id = request.server_id
        try:
            if server_id == 0:
                server_id = self._unregistered()
            elif server_id not in self.registered:
                self._registration(server_id, self.peer.rpartition(":")[0])
        except DumpFilterError as exc:
            self._error(code_for(exc), str(exc))
            return
        mine = self.service.slaves.get(server_id)
        try:
            self._stream(request, server_id, gtid_state, checksum, period)
        finally:
            if server_id != request.server_id and self.service.slaves.get(server_id) is mine:
                self.service.unregister(server_id)  # (unless a replica took its server_id meanwhile)

    def _unregistered(self) -> int:
        """A dump with server_id 0 (`mariadb-binlog --read-from-remote-server` without
        --stop-never): one that does not register, as a server serves it (sql_repl.cc: a zero
        server_id replaces no other dump). It streams under a server_id of its own, the highest
        free one, registered for the dump alone with the rules `--replicas` gives its user."""
        taken = self.service.slaves
        server_id = next(i for i in range(0xFFFFFFFF, 0, -1) if i not in taken)
        reg = self.endpoint.replicas.registration(0, self.user, self.peer.rpartition(":")[0])
        self.service.register(dataclasses.replace(reg, server_id=server_id), self.identity)
        log.info("mysql connection %s from %s (user %r): a dump with server_id 0 (one that does not register) "
                 "streams as server_id %s", self.id, self.peer, self.user, server_id)
        return server_id

    def _stream(self, request: DumpRequest, server_id: int, gtid_state: str | None, checksum: str | None,
                period: float) -> None:
        session = self._session()
        facts = session.facts
        try:
            file, start = self._start(request, gtid_state)
            batches = self.service.stream(server_id, start=start, gtid_state=gtid_state or None,
                                          heartbeat_period=period if period > 0 else NO_HEARTBEAT,
                                          is_active=self._active, caller=self.identity)
            first = next(batches)
        except StopIteration:
            return
        except (DumpFilterError, OSError) as exc:
            self._error(code_for(exc), str(exc) if not isinstance(exc, OSError) else f"cannot read the binlog: {exc}")
            return
        pos = start[1] if start else 4
        log.info("mysql replica server_id %s: dump from %s:%s%s", server_id, file, pos,
                 f" (GTID state {gtid_state!r})" if gtid_state is not None else "")
        mariadb = session.has_user_var("mariadb_slave_capability")  # flag 0x02 means one thing to each
        annotate = mariadb and bool(request.flags & BINLOG_SEND_ANNOTATE_ROWS_EVENT)
        heartbeats_v2 = not mariadb and bool(request.flags & USE_HEARTBEAT_EVENT_V2)
        fmt = file_format(Path(self.service.binlog_dir) / file)
        # The artificial Rotate a dump thread sends first, naming the start file and position, with
        # a CRC when the binlog carries them (the replica announced it handles them, else the dump
        # was refused). A client that asked for no checksums ('NONE', as mariadb-binlog does) gets
        # it without one, as a server sends it; the binlog's own events keep theirs (their FDE says so).
        rotate = artificial_rotate(file, pos, fmt=None if str(checksum).upper() == "NONE" else fmt,
                                   server_id=facts.server_id).raw
        frame, send = self.stream.frame, self.stream.send_raw
        slave = self.service.slaves.get(server_id)
        policy = skip_policy.named(slave.reg.skip_policy if slave else skip_policy.DEFAULT)
        if period <= 0:
            policy = WithoutHeartbeats(policy)
        count = ReplicaCount(self.service.binlog_dir, policy, file=file, pos=pos,
                             gtid_state=gtid_state, fmt=fmt, server_id=facts.server_id,
                             records_gtids=request.server_id in self.reported)
        # Its events renamed as its rules (the stream's current ones) rewrite, its position the master's.
        names = PositionKeeper(live_renamer(lambda: slave.state if slave is not None else None), file=file, pos=pos,
                               server_id=facts.server_id)
        try:
            send(frame(b"\x00" + rotate))
            batch = first
            while True:
                state = slave.state if slave else None
                data = replica_packets(batch, self.stream, count, names, policy=policy, annotate=annotate, fmt=fmt,
                                       server_id=facts.server_id, heartbeats_v2=heartbeats_v2,
                                       renaming=state is not None and renames(state.rules, state.engine.settings))
                if data:
                    send(data)
                if batch.caught_up and request.flags & BINLOG_DUMP_NON_BLOCK:
                    send(frame(EOF_PACKET))
                    self.why = "a non-blocking dump (BINLOG_DUMP_NON_BLOCK) reached the end of the binlog"
                    return
                batch = next(batches)
        except StopIteration:
            if self.service.shutting_down:
                self._try_error(ER_SERVER_SHUTDOWN, "Server shutdown in progress")
                self.why_warns = False  # the operator stopped the master: not a problem of the dump
            elif not self.why:
                self.why = "the client closed it during its dump"
        except ConnectionClosed:
            self.why = "the client closed it during its dump (a send failed)"
        except StreamReplacedError:
            self.why = f"its dump was replaced by a newer connection with server_id {server_id}"
            self.why_warns = True
        except DumpFilterError as exc:
            code = code_for(exc)
            self._try_error(code, str(exc))
            if code == ER_SERVER_SHUTDOWN:
                self.why_warns = False
        finally:
            batches.close()

    def _start(self, request: DumpRequest, gtid_state: str | None) -> tuple[str, tuple[str, int] | None]:
        """(the file the fake Rotate names, the service's start position)."""
        if gtid_state is not None:
            if not gtid_state.strip():
                return self.service.segments.first_file(), None
            return start_file(served_paths(self.service.binlog_dir), GtidState.parse(gtid_state)).name, None
        if not request.file:
            return self.service.segments.first_file(), None  # an empty name: the first binlog
        if request.pos < 4:
            raise PositionError(f"position {request.pos} in '{request.file}' is before the first event (4)")
        return request.file, (request.file, request.pos)

    def _active(self) -> bool:
        """False once the client closed its side. A server's dump thread reads nothing from its
        client, so what a dumping client sends anyway is taken and dropped, not taken for a close:
        python-mysql-replication's MariaDB dump request is one byte longer than its header says
        (its header counts 14 bytes of 15), and this stray byte ended every such dump, the socket
        closed with it unread (a reset: the client retried forever). Past IGNORED_BYTES the
        client is disconnected. Over TLS a record cannot be peeked at: anything read ends it."""
        if self.closed:
            return False
        # poll, not select: select() takes no descriptor past FD_SETSIZE (1024), and a master
        # holding more (replicas, mapped binlogs) took every replica for gone (ValueError).
        poller = select.poll()
        try:
            poller.register(self.sock, select.POLLIN | select.POLLPRI)
            ready = poller.poll(0)
        except (OSError, ValueError):
            return False
        if not ready:
            return True
        if ready[0][1] & (select.POLLERR | select.POLLNVAL) or isinstance(self.sock, ssl.SSLSocket):
            return False
        try:
            data = self.sock.recv(1 << 16, socket.MSG_DONTWAIT)
        except BlockingIOError:
            return True
        except OSError:
            return False
        if not data:
            return False
        self.ignored += len(data)
        if self.ignored > IGNORED_BYTES:
            self.why = f"it sent {self.ignored} bytes during its dump (a dump reads none; at most {IGNORED_BYTES})"
            self.why_warns = True
            return False
        return True


def code_for(exc: BaseException) -> int:
    """MySQL error codes for the service's exceptions: the class's own `mysql_errno` when the error
    hierarchy names one (1236 for positions, 1045 for access), else the nearest server error."""
    errno = exc.mysql_errno if isinstance(exc, DumpFilterError) else None
    if errno is None and isinstance(exc, ResourceExhaustedError):
        errno = ER_CON_COUNT_ERROR
    elif errno is None and isinstance(exc, ShuttingDownError):
        errno = ER_SERVER_SHUTDOWN
    elif errno is None:
        # A corrupt binlog, rules that do not compile, anything else the dump cannot get past: the
        # replica's IO thread stops on 1236 with the message, as on a server's unreadable binlog.
        errno = ER_MASTER_FATAL_ERROR_READING_BINLOG
    return errno
