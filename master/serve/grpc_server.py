"""The gRPC face of the dump service: converts protobuf to domain values, authenticates every call
(password metadata or an mTLS client certificate) before master.service authorizes it, ends
streams whose client stopped reading, and maps the exception hierarchy to status codes in one
place (`_status_for`)."""

from __future__ import annotations

import dataclasses
import functools
import ipaddress
import logging
import threading
import time
import urllib.parse
from collections.abc import Callable, Generator, Iterator, Mapping
from concurrent import futures
from pathlib import Path
from typing import Any, NoReturn, TypeVar, cast

import grpc
from google.protobuf.message import DecodeError
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from dumpfilter._core import join_parts
from dumpfilter.errors import AccessDeniedError, DumpFilterError, InvalidArgumentError
from dumpfilter.rules.ruleset import Settings
from dumpfilter.sent import SentCounts
from dumpfilter.v1 import dump_pb2, dump_pb2_grpc
from dumpfilter.wire import (PASSWORD_KEY, USER_KEY, certificate_date_problems, read_pem, rules_from_proto,
                             rules_to_proto, schema_from_proto, skip_policy_from_proto)
from dumpfilter.master.login_guard import HOLD_SLOTS, RESERVED_SLOTS, ChecksBusy, LoginThrottled
from dumpfilter.master.model import Batch, ChannelSpec, Effective, Part, Registration
from dumpfilter.master.policy import Identity, MasterPolicy
from dumpfilter.master.read.units import Pos
from dumpfilter.master.rate_limited_log import ProblemLog, shown_user
from dumpfilter.master.stream.send_ahead import OUTPUT_BYTES, OutputBudget, SendAhead
from dumpfilter.master.service import DumpService
from dumpfilter.master.shadow import rpc as shadow_rpc
from dumpfilter.master.shares import CALLS, InFlight

log = logging.getLogger("dumpfilter.master")
STALL_TIMEOUT = 60.0
# Concurrent Register, ChangeFilter and Unregister calls of every identity together, each identity
# its share (master.shares): the calls that may hold a thread (a Register compiles up to 4 MiB of
# rules, a ChangeFilter waits for a transaction boundary). Stats and ListFilters are not counted:
# they never wait, and their work is the caller's own slaves (every slave for an admin only).
MAX_CALLS = 8
# The largest request the master reads (grpc's default, made explicit): a Register's rules are at
# most this many bytes, and the rule budget (registry.MAX_RULES_TOTAL) bounds what they compile to.
MAX_REQUEST_BYTES = 4 << 20
SERVICE_NAME = dump_pb2.DESCRIPTOR.services_by_name["DumpFilter"].full_name

_SEMANTICS = {dump_pb2.FILTER_SEMANTICS_UNSPECIFIED: "mysql", dump_pb2.FILTER_SEMANTICS_MYSQL: "mysql",
              dump_pb2.FILTER_SEMANTICS_EFFECTIVE: "effective"}


# DumpBatch.events on the wire: field 1, length-delimited.
_EVENTS_KEY = bytes([1 << 3 | 2])
# A Dump reply as the stream makes it: the DumpBatch without its events, and the events' pieces.
DumpReply = tuple[dump_pb2.DumpBatch, list[Part]]
_Servicer = TypeVar("_Servicer")
_Request = TypeVar("_Request")
_Reply = TypeVar("_Reply")


def _varint(n: int) -> bytes:
    out = bytearray()
    while n > 0x7F:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _dump_reply_bytes(reply: DumpReply) -> bytes:
    """A Dump reply's wire bytes, made on grpc's thread rather than the stream's: the events
    (a batch's pieces, about a megabyte) are copied once, straight into them (`join_parts`: the
    compiled walk's pieces of the binlog too), beside the other fields as protobuf serializes them. A reader takes the fields in any order. Through
    protobuf, the events were joined, copied into the message, then copied again to serialize.
    The reply gives its pieces up (`parts` is emptied): grpc holds the reply until the stream
    has made the next one, and its pieces would be a third copy of the events (besides these
    bytes and grpc core's) through the send and the next reply's making: 64 slaves held about
    four batches of pieces each, 100 MB (bench fanout_procs under memray)."""
    message, parts = reply
    size = sum(map(len, parts))
    if not size:
        return message.SerializeToString()
    wire = join_parts(_EVENTS_KEY + _varint(size), parts, message.SerializeToString())
    parts.clear()
    return wire


class _Malformed:
    """A request whose bytes are not its message (a truncated field, a string that is not UTF-8):
    what `_parsed` hands the handler instead, so that the call is answered INVALID_ARGUMENT (grpc
    answers a deserializer's exception with INTERNAL, "Exception deserializing request!")."""

    def __init__(self, name: str, reason: str) -> None:
        self.name, self.reason = name, reason


def _parsed(read: Callable[[bytes], Any], name: str) -> Callable[[bytes], Any]:
    def parse(data: bytes) -> Any:
        try:
            return read(data)
        except (DecodeError, ValueError) as exc:  # (never the request's bytes in the answer)
            return _Malformed(name, str(exc)[:200])
    return parse


def _refuse(request: _Malformed, context: grpc.ServicerContext) -> NoReturn:
    context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"the request is not a well-formed {request.name} "
                  f"(its string fields must be UTF-8): {request.reason}")


def _refusing_malformed(behavior: Callable[[Any, grpc.ServicerContext], Any],
                        caller: Callable[[grpc.ServicerContext], Any] | None = None, *, stream: bool = False
                        ) -> Callable[[Any, grpc.ServicerContext], Any]:
    """`behavior`, but a request `_parsed` could not read ends the call with INVALID_ARGUMENT, once
    `caller` has authenticated it (DumpFilter's calls: a stranger is told no more than
    UNAUTHENTICATED; health and reflection authenticate no one); each request of a `stream`
    (reflection's) likewise."""
    @functools.wraps(behavior)  # (with its attributes: health's Watch is experimental_non_blocking, given a 3rd)
    def call(request: Any, context: grpc.ServicerContext, *more: Any) -> Any:
        if stream:
            request = (_refuse(r, context) if isinstance(r, _Malformed) else r for r in request)
        elif isinstance(request, _Malformed):
            try:
                if caller is not None:
                    caller(context)
            except Exception as exc:
                context.abort(*_status_for(exc))
            _refuse(request, context)
        return behavior(request, context, *more)
    return call


class _Lenient:
    """The server as the health and reflection services' generated code sees it when it adds their
    handlers: each of them reads its requests with `_parsed` (`_refusing_malformed`)."""

    def __init__(self, server: grpc.Server) -> None:
        self.server = server

    def add_generic_rpc_handlers(self, handlers: Any) -> None:
        pass  # (the generated code gives the same handlers to add_registered_method_handlers)

    def add_registered_method_handlers(self, service: str, handlers: dict[str, Any]) -> None:
        lenient = {}
        for name, handler in handlers.items():
            kind = f"{'stream' if handler.request_streaming else 'unary'}_" \
                   f"{'stream' if handler.response_streaming else 'unary'}"
            behavior = _refusing_malformed(getattr(handler, kind), stream=handler.request_streaming)
            lenient[name] = getattr(grpc, f"{kind}_rpc_method_handler")(
                behavior, request_deserializer=_parsed(handler.request_deserializer, f"{name} request"),
                response_serializer=handler.response_serializer)
        self.server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(service, lenient),))
        self.server.add_registered_method_handlers(service, lenient)


def _add_dump_filter(servicer: DumpFilterServicer, server: grpc.Server) -> None:
    """The DumpFilter service's handlers, made from its descriptor as the generated
    add_DumpFilterServicer_to_server makes them, except that Dump's replies are serialized by
    `_dump_reply_bytes` and a request that does not parse is INVALID_ARGUMENT (`_parsed`)."""
    service = dump_pb2.DESCRIPTOR.services_by_name["DumpFilter"]
    handlers: dict[str, grpc.RpcMethodHandler[Any, Any]] = {}
    for method in service.methods:
        if method.client_streaming:
            raise TypeError(f"{method.full_name}: client streaming is not handled here")
        request, reply = (getattr(dump_pb2, m.name) for m in (method.input_type, method.output_type))
        make = grpc.unary_stream_rpc_method_handler if method.server_streaming else grpc.unary_unary_rpc_method_handler
        handlers[method.name] = make(_refusing_malformed(getattr(servicer, method.name), servicer.caller),
                                     request_deserializer=_parsed(request.FromString, request.DESCRIPTOR.name),
                                     response_serializer=_dump_reply_bytes if method.name == "Dump"
                                     else reply.SerializeToString)
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(service.full_name, handlers),))
    server.add_registered_method_handlers(service.full_name, handlers)


def registration_from_proto(req: dump_pb2.RegisterRequest) -> Registration:
    specs = []
    for f in req.filters:
        channel = f.channel if f.HasField("channel") else None
        if f.WhichOneof("spec") == "change_replication_filter":
            specs.append(ChannelSpec(channel, text=f.change_replication_filter))
        else:
            specs.append(ChannelSpec(channel, rules=rules_from_proto(f.rules)))
    if req.semantics not in _SEMANTICS:  # (a newer slave's: filtering by other rules than it asked is wrong)
        raise InvalidArgumentError(f"semantics {req.semantics} is not a known FilterSemantics")
    settings = Settings(flavor=req.flavor or "mysql", lower_case_table_names=req.lower_case_table_names,
                        semantics=_SEMANTICS[req.semantics])
    return Registration(req.server_id, req.hostname, tuple(req.channels) or ("",), tuple(specs), settings,
                        skip_policy_from_proto(req.skip_policy), req.credentials.user, req.credentials.password,
                        schema_from_proto(req.replica_schema) if req.HasField("replica_schema") else None)


def effective_to_proto(items: list[Effective]) -> list[dump_pb2.EffectiveFilters]:
    return [dump_pb2.EffectiveFilters(channel=e.channel, rules=rules_to_proto(e.rules),
                                      change_replication_filter=e.rules.render(),
                                      policy_allow=list(e.gate.allow), policy_restricted=e.gate.restricted)
            for e in items]


def _position(pos: Pos | None) -> dump_pb2.Position | None:
    return dump_pb2.Position(file=pos[0], pos=pos[1]) if pos else None


def _status_for(exc: BaseException) -> tuple[grpc.StatusCode, str]:
    """Errors become gRPC status codes here, by the code their class names (dumpfilter.errors);
    a MySQL error number, when the error has one, leads the message as "(1236) ..."."""
    if isinstance(exc, DumpFilterError):
        message = f"({exc.mysql_errno}) {exc}" if exc.mysql_errno is not None else str(exc)
        return getattr(grpc.StatusCode, exc.grpc_code), message
    return grpc.StatusCode.INTERNAL, f"internal error: {type(exc).__name__}: {exc}"


def _mapped(method: Callable[[_Servicer, _Request, grpc.ServicerContext], _Reply]
            ) -> Callable[[_Servicer, _Request, grpc.ServicerContext], _Reply]:
    """Run a unary handler; any exception ends the RPC with its mapped status."""
    @functools.wraps(method)
    def wrapper(self: _Servicer, request: _Request, context: grpc.ServicerContext) -> _Reply:
        try:
            return method(self, request, context)
        except Exception as exc:
            code, message = _status_for(exc)
            if code == grpc.StatusCode.INTERNAL:
                log.exception("%s failed", method.__name__)
            context.abort(code, message)
    return wrapper


def _metadata(context: grpc.ServicerContext) -> dict[str, str]:
    return {key: value for key, value in (context.invocation_metadata() or ()) if isinstance(value, str)}


@functools.lru_cache(maxsize=4096)   # read once per connection: a refused login's path is short (issue #62)
def _address_of_peer(peer: str) -> str:
    """The caller's address from grpc's peer ("ipv4:127.0.0.1:5000", "ipv6:[::1]:5000"); the
    whole peer for another transport (a unix socket)."""
    peer = urllib.parse.unquote(peer)   # grpc writes an IPv6 one as "ipv6:%5B::1%5D:5000"
    kind, _, rest = peer.partition(":")
    if kind in ("ipv4", "ipv6"):
        return rest.rsplit(":", 1)[0].strip("[]")
    return peer


def _certificate_name(context: grpc.ServicerContext) -> str | None:
    """The verified client certificate's common name (only set when the server requires client
    certificates: grpc fills the auth context from the verified peer)."""
    # (grpc gives each property as a list of values: the stubs say one bytes value)
    auth = cast("Mapping[str, list[bytes]]", context.auth_context() or {})
    if auth.get("transport_security_type") != [b"ssl"]:
        return None
    names = auth.get("x509_common_name") or ()
    return names[0].decode("utf-8", "replace") if names else None


class _StallWatch:
    """Ends Dump streams whose client has not taken a batch for `timeout` seconds: a slave that
    never reads holds a worker thread and a stream slot until then, never for good. The servicer
    marks a stream while one of its batches is being sent (grpc returns from the send once flow
    control lets the batch out); one thread looks at the marks."""

    def __init__(self, timeout: float | None) -> None:
        self.timeout = timeout
        self._sending: dict[int, tuple[float, grpc.ServicerContext, int]] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self.cancelled = 0
        if timeout:
            threading.Thread(target=self._run, args=(timeout,), name="dump-stall-watch", daemon=True).start()

    def sending(self, token: int, context: grpc.ServicerContext, server_id: int) -> None:
        if self.timeout:
            self._sending[token] = (time.monotonic() + self.timeout, context, server_id)

    def sent(self, token: int) -> None:
        self._sending.pop(token, None)

    def _run(self, timeout: float) -> None:
        while not self._stop.wait(min(1.0, timeout / 4)):
            now = time.monotonic()
            for token, (deadline, context, server_id) in list(self._sending.items()):
                if now >= deadline and self._sending.pop(token, None) is not None:
                    self.cancelled += 1
                    log.warning("server_id %s: the slave took no batch for %.0fs; stream ended", server_id,
                                timeout)
                    context.cancel()

    def stop(self) -> None:
        self._stop.set()


class DumpFilterServicer(dump_pb2_grpc.DumpFilterServicer):
    def __init__(self, service: DumpService, stall_timeout: float | None = STALL_TIMEOUT) -> None:
        self.service = service
        self.stalls = _StallWatch(stall_timeout)
        self.calls = InFlight(service.shares, CALLS)  # Register/ChangeFilter/Unregister in flight, per identity
        self.failed_logins = ProblemLog(log, "failed gRPC logins")
        # a truncated or corrupt binlog ends every stream that reaches it: one line each, rate-limited
        self.binlog_errors = ProblemLog(log, "streams ended by a binlog the master cannot read")
        self.output = OutputBudget(OUTPUT_BYTES)

    def caller(self, context: grpc.ServicerContext, credentials: dump_pb2.Credentials | None = None) -> Identity:
        """Authenticate the call: mTLS certificate, else the metadata user/password, else (for
        Register) the request's own credentials."""
        meta = _metadata(context)
        user, password = meta.get(USER_KEY, ""), meta.get(PASSWORD_KEY, "")
        if not user and credentials is not None and credentials.user:
            user, password = credentials.user, credentials.password
        policy = self.service.policy
        try:
            if policy is None:
                return self.service.authenticate(user, password, _certificate_name(context))
            # The login guard backs off per address and identity; expensive checks run in its pool.
            peer = context.peer() or ""
            return policy.authenticate(user, password, _certificate_name(context),
                                       address=_address_of_peer(peer), connection=peer)
        except (AccessDeniedError, LoginThrottled, ChecksBusy) as exc:  # a WARNING, rate-limited against floods
            refused = not isinstance(exc, AccessDeniedError)
            self.failed_logins.warning("grpc login %s: user %s from %s: %s", "refused" if refused else "failed",
                                       shown_user(user), context.peer(), str(getattr(exc, "reason", exc))[:200])
            raise

    @_mapped
    def Register(self, request: dump_pb2.RegisterRequest, context: grpc.ServicerContext) -> dump_pb2.RegisterReply:
        caller = self.caller(context, request.credentials)
        with self.calls.hold(caller):
            if request.HasField("replica_schema"):  # its size against the rule budget before its model is built
                schema = request.replica_schema
                self.service.check_replica_schema(caller, request.server_id, len(schema.databases) + len(
                    schema.tables) + sum(len(table.columns) for table in schema.tables))
            result = self.service.register(registration_from_proto(request), caller)
        return dump_pb2.RegisterReply(server_id=result.server_id, effective=effective_to_proto(result.effective),
                                      warnings=result.warnings, replaced=result.replaced)

    def Dump(self, request: dump_pb2.DumpRequest, context: grpc.ServicerContext) -> Iterator[DumpReply]:
        token = id(context)
        try:
            caller = self.caller(context)
            which = request.WhichOneof("start")
            start = (request.position.file, request.position.pos) if which == "position" else None
            gtid_state = request.gtid_state if which == "gtid_state" else None
            batches = self.service.stream(request.server_id, channel=request.channel, start=start,
                                          gtid_state=gtid_state, heartbeat_period=request.heartbeat_period or 1.0,
                                          is_active=context.is_active, caller=caller,
                                          placeholder_runs=request.placeholder_runs,
                                          skip_stretches=request.skip_stretches)
        except Exception as exc:
            context.abort(*_status_for(exc))
        # A stream waiting at the binlog's end learns at once that its RPC is gone (cancelled, the
        # slave caught up and left), and frees its slot: nothing else would wake it before a change.
        context.add_callback(lambda: self.service.wake(request.server_id))
        ahead = SendAhead(self._replies(batches, request.server_id), f"dump-{request.server_id}",
                           context.is_active, self.output, at_end=self._made_by_handler)
        try:
            for reply in ahead:
                self.stalls.sending(token, context, request.server_id)
                yield reply  # returns once grpc has sent it (flow control: the client reads)
                self.stalls.sent(token)
        except Exception as exc:
            code, message = _status_for(exc)
            if code == grpc.StatusCode.INTERNAL:
                log.exception("Dump for server_id %s failed", request.server_id)
            elif code == grpc.StatusCode.DATA_LOSS:  # a binlog the master cannot serve: its operator's to mend
                self.binlog_errors.warning("server_id %s: Dump ended: DATA_LOSS %s", request.server_id, message)
            context.abort(code, message)
        finally:
            self.stalls.sent(token)
            ahead.close()

    def _made_by_handler(self, reply: DumpReply) -> bool:
        """Whether the Dump handler makes the replies after `reply` itself, between its sends
        (SendAhead's lent mode), rather than a thread of the stream's own ahead of it: once the
        stream is at the binlog's end (a live batch goes to the socket without a hand-over), and
        while more streams run than the master has CPUs (DumpService.crowded: 64 slaves' master
        CPU 12.7 s instead of 13.6-14.7 s, 8 slaves' 1.15 s instead of 1.29 s)."""
        return reply[0].caught_up or self.service.crowded()

    def _replies(self, batches: Generator[Batch, None, None], server_id: int) -> Generator[DumpReply, None, None]:
        """(DumpBatch without its events, the events' pieces): see `_dump_reply_bytes`."""
        lint = self.service.lint  # its predictions ride on the first batch after they are ready
        try:
            for batch in batches:
                yield (dump_pb2.DumpBatch(position=_position(batch.position),
                                          transactions=batch.transactions, skipped_bytes=batch.skipped_bytes,
                                          caught_up=batch.caught_up, heartbeat=batch.heartbeat,
                                          gtid_state=batch.gtid_state,
                                          filter_changed_at=_position(batch.filter_changed_at),
                                          warnings=lint.take(server_id),
                                          schema_decided=[dump_pb2.Position(file=file, pos=pos)
                                                          for file, pos in batch.schema_decided]),
                       batch.parts)
        finally:
            batches.close()

    @_mapped
    def ChangeFilter(self, request: dump_pb2.ChangeFilterRequest, context: grpc.ServicerContext
                     ) -> dump_pb2.ChangeFilterReply:
        remaining = context.time_remaining()
        timeout = None if remaining is None else max(0.0, remaining - 0.05)
        caller = self.caller(context)
        with self.calls.hold(caller):
            position, running, effective = self.service.change_filter(request.server_id,
                                                                      request.change_replication_filter, timeout,
                                                                      caller=caller)
        return dump_pb2.ChangeFilterReply(effective_at=_position(position), applied_to_running_stream=running,
                                          effective=effective_to_proto(effective))

    @_mapped
    def ListFilters(self, request: dump_pb2.ListFiltersRequest, context: grpc.ServicerContext
                    ) -> dump_pb2.ListFiltersReply:
        rows, global_rows = self.service.list_filters(request.server_id, caller=self.caller(context))
        return dump_pb2.ListFiltersReply(filters=[_filter_row(r) for r in rows],
                                         global_filters=[_filter_row(r) for r in global_rows])

    @_mapped
    def Stats(self, request: dump_pb2.StatsRequest, context: grpc.ServicerContext) -> dump_pb2.StatsReply:
        reply, caller = dump_pb2.StatsReply(), self.caller(context)
        for slave, end, behind in self.service.stats(request.server_id, caller=caller):
            s, lint = slave.stats, self.service.lint.status(slave.server_id)
            reply.slaves.add(
                server_id=slave.server_id, streaming=slave.stream is not None, position=_position(slave.position),
                binlog_end=_position(end), bytes_behind=behind, rule_hits=dict(s.rule_hits),
                skip_policy=slave.reg.skip_policy, hostname=slave.reg.hostname,
                registered_at=slave.registered_at.isoformat(), channels=list(slave.registry.channels),
                lint_state=lint.state, lint_breaks=lint.breaks, lint_diverges=lint.diverges,
                lint_behind_bytes=lint.behind_bytes, lint_behind_files=lint.behind_files,
                lint_warnings=lint.warnings, lint_position=_position(lint.position),
                **{f.name: getattr(s, f.name) for f in dataclasses.fields(SentCounts)})  # (each a reply field)
        reply.shadows.extend(shadow_rpc.listed(self.service.shadow, caller))
        source = self.service.source
        if source is not None:
            status = source.status()
            if caller is not None and not caller.admin:  # where the primary is, and its errors, are the operator's
                status = {**status, "source": "", "last_error": ""}
            reply.source.CopyFrom(dump_pb2.SourceStatus(**status))
        return reply

    @_mapped
    def AddShadow(self, request: dump_pb2.AddShadowRequest, context: grpc.ServicerContext) -> dump_pb2.AddShadowReply:
        caller = self.caller(context)
        with self.calls.hold(caller):
            return shadow_rpc.add(self.service.shadow, request, caller)

    @_mapped
    def RemoveShadow(self, request: dump_pb2.RemoveShadowRequest, context: grpc.ServicerContext) -> Any:
        return shadow_rpc.remove(self.service.shadow, request, self.caller(context))

    @_mapped
    def ListShadows(self, request: dump_pb2.ListShadowsRequest, context: grpc.ServicerContext) -> Any:
        return shadow_rpc.list_shadows(self.service.shadow, self.caller(context))

    @_mapped
    def ShadowReport(self, request: dump_pb2.ShadowReportRequest, context: grpc.ServicerContext) -> Any:
        return shadow_rpc.report(self.service.shadow, self.caller(context))

    @_mapped
    def Unregister(self, request: dump_pb2.UnregisterRequest, context: grpc.ServicerContext
                   ) -> dump_pb2.UnregisterReply:
        caller = self.caller(context)
        with self.calls.hold(caller):
            return dump_pb2.UnregisterReply(stream_ended=self.service.unregister(request.server_id, caller=caller))


def _filter_row(row: dict[str, Any]) -> dump_pb2.FilterRow:
    since = row.get("ACTIVE_SINCE")
    return dump_pb2.FilterRow(server_id=row["server_id"], channel_name=row.get("CHANNEL_NAME", ""),
                              filter_name=row["FILTER_NAME"], filter_rule=row["FILTER_RULE"],
                              configured_by=row["CONFIGURED_BY"], active_since=since.isoformat() if since else "",
                              counter=row.get("COUNTER", 0))


class MasterServer:
    """A running master: the gRPC server, its dump service and health servicer."""

    def __init__(self, server: grpc.Server, service: DumpService, health_servicer: health.HealthServicer, port: int,
                 servicer: DumpFilterServicer) -> None:
        self.server, self.service, self.health, self.port = server, service, health_servicer, port
        self.servicer = servicer

    def stop(self, grace: float = 5.0) -> None:
        """Graceful shutdown: NOT_SERVING, streams asked to end after their current batch, then
        the server drains in-flight RPCs for up to `grace` seconds; then the segments and the
        mappings of the closed binlog files are let go."""
        self.health.set("", health_pb2.HealthCheckResponse.NOT_SERVING)
        self.health.set(SERVICE_NAME, health_pb2.HealthCheckResponse.NOT_SERVING)
        self.service.shutdown()
        self.server.stop(grace).wait()
        self.servicer.stalls.stop()
        # its mappings of the closed binlog files let go (they would stay in the RSS of a process
        # that goes on after the master, as simulate --verify does)
        self.service.segments.close()


def parse_listen(listen: str, option: str = "--listen") -> tuple[str, int]:
    """HOST:PORT (IPv6 as [::1]:PORT) with a port in 0..65535 (0: any free port); an error names `option`."""
    host, sep, port_text = listen.rpartition(":")
    if not sep or not host or not port_text.isdigit():
        raise InvalidArgumentError(f"{option} {listen!r}: expected HOST:PORT")
    port = int(port_text)
    if not 0 <= port <= 65535:
        raise InvalidArgumentError(f"{option} {listen!r}: port {port} is out of range (0..65535)")
    bare = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    try:
        ipaddress.ip_address(bare)
    except ValueError:
        if not all(part.isalnum() or part.replace("-", "").isalnum() for part in bare.split(".")):
            raise InvalidArgumentError(f"{option} {listen!r}: {host!r} is not a host name or address") from None
    return host, port


def create_server(binlog_dir: str | Path, listen: str = "127.0.0.1:0", *, policy: str | Path | MasterPolicy | None = None,
                  tls_cert: str | Path | None = None, tls_key: str | Path | None = None,
                  tls_client_ca: str | Path | None = None, max_streams: int = 64,
                  max_streams_per_identity: int | None = None, stall_timeout: float | None = STALL_TIMEOUT,
                  max_calls: int = MAX_CALLS, **service_options: Any) -> tuple[MasterServer, int]:
    """A started master serving `binlog_dir` on `listen`; returns (MasterServer, bound port).
    `tls_client_ca` turns on mTLS: clients must present a certificate signed by it, whose CN is
    their policy identity."""
    parse_listen(listen)
    if max_streams < 1:
        raise InvalidArgumentError(f"--max-streams {max_streams}: must be at least 1")
    if max_calls < 1:
        raise InvalidArgumentError(f"--max-calls {max_calls}: must be at least 1")
    if isinstance(policy, str | Path):
        policy = MasterPolicy.load(policy)
    service = DumpService(binlog_dir, policy=policy, max_streams=max_streams,
                          max_streams_per_identity=max_streams_per_identity, **service_options)
    service.shares.totals[CALLS] = max_calls
    # The sync server gives each RPC a pool thread for its whole life: size the pool for the
    # streams, the counted calls, and two more for health checks, Stats and refusals. The
    # service refuses streams beyond max_streams and each identity's calls beyond its share
    # (RESOURCE_EXHAUSTED), so no identity holds the threads the others need. The login guard's
    # held refusals and the logins waiting for a reserved check (at most HOLD_SLOTS and
    # RESERVED_SLOTS sleeping at once) have threads of their own.
    # grpc.so_reuseport off: a second master on the same port fails instead of sharing it.
    threads = max_streams + max_calls + 2 + HOLD_SLOTS + RESERVED_SLOTS
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=threads, thread_name_prefix="dump"),
                         maximum_concurrent_rpcs=threads,
                         options=[("grpc.so_reuseport", 0), ("grpc.max_receive_message_length", MAX_REQUEST_BYTES)])
    servicer = DumpFilterServicer(service, stall_timeout)
    _add_dump_filter(servicer, server)
    health_servicer = health.HealthServicer()
    lenient = cast(grpc.Server, _Lenient(server))  # a request that does not parse: INVALID_ARGUMENT, not INTERNAL
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, lenient)
    reflection.enable_server_reflection((SERVICE_NAME, health.SERVICE_NAME, reflection.SERVICE_NAME), lenient)
    if tls_client_ca and not (tls_cert and tls_key):
        raise InvalidArgumentError("--tls-client-ca (mTLS) needs --tls-cert and --tls-key")
    try:
        if tls_cert or tls_key:
            if not (tls_cert and tls_key):
                raise InvalidArgumentError("--tls-cert and --tls-key go together")
            root = read_pem(tls_client_ca, "--tls-client-ca") if tls_client_ca else None
            chain = read_pem(tls_cert, "--tls-cert")
            for problem in certificate_date_problems(chain):
                log.warning("--tls-cert %s: %s", tls_cert, problem)
            creds = grpc.ssl_server_credentials([(read_pem(tls_key, "--tls-key"), chain)],
                                                root_certificates=root, require_client_auth=root is not None)
            port = server.add_secure_port(listen, creds)
        else:
            port = server.add_insecure_port(listen)
    except RuntimeError:  # grpcio >= 1.5x raises where older ones returned 0
        port = 0
    if port == 0:
        servicer.stalls.stop()
        raise DumpFilterError(f"cannot listen on {listen}: the port is in use or the address is not local")
    server.start()
    health_servicer.set("", health_pb2.HealthCheckResponse.SERVING)
    health_servicer.set(SERVICE_NAME, health_pb2.HealthCheckResponse.SERVING)
    return MasterServer(server, service, health_servicer, port, servicer), port
