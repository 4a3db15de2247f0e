"""The gRPC face of the dump service: converts protobuf to domain values, calls master.service,
and maps the exception hierarchy to status codes in one place (`_status_for`)."""

from __future__ import annotations

import functools
import logging
from concurrent import futures
from pathlib import Path

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from dumpfilter.proto_gen import ensure_generated

ensure_generated()

from binlog_codec.errors import BinlogError, DumpFilterError, PositionError, RuleError, UnknownSlaveError  # noqa: E402
from dumpfilter.v1 import dump_pb2, dump_pb2_grpc  # noqa: E402
from dumpfilter.wire import rules_from_proto, rules_to_proto  # noqa: E402
from filter_rules.ruleset import Settings  # noqa: E402
from master.policy import AccessDeniedError, MasterPolicy  # noqa: E402
from master.service import (  # noqa: E402
    EMPTY_TRANSACTION,
    HEARTBEAT,
    PLACEHOLDER,
    ChangeTimeoutError,
    ChannelSpec,
    DumpService,
    Effective,
    Registration,
    ShuttingDownError,
    StreamReplacedError,
)

log = logging.getLogger("dumpfilter.master")
SERVICE_NAME = dump_pb2.DESCRIPTOR.services_by_name["DumpFilter"].full_name

_SKIP = {dump_pb2.SKIP_POLICY_UNSPECIFIED: HEARTBEAT, dump_pb2.SKIP_POLICY_HEARTBEAT: HEARTBEAT,
         dump_pb2.SKIP_POLICY_PLACEHOLDER: PLACEHOLDER, dump_pb2.SKIP_POLICY_EMPTY_TRANSACTION: EMPTY_TRANSACTION}
_SEMANTICS = {dump_pb2.FILTER_SEMANTICS_UNSPECIFIED: "mysql", dump_pb2.FILTER_SEMANTICS_MYSQL: "mysql",
              dump_pb2.FILTER_SEMANTICS_EFFECTIVE: "effective"}


def registration_from_proto(req) -> Registration:
    specs = []
    for f in req.filters:
        channel = f.channel if f.HasField("channel") else None
        if f.WhichOneof("spec") == "change_replication_filter":
            specs.append(ChannelSpec(channel, text=f.change_replication_filter))
        else:
            specs.append(ChannelSpec(channel, rules=rules_from_proto(f.rules)))
    settings = Settings(flavor=req.flavor or "mysql", lower_case_table_names=req.lower_case_table_names,
                        semantics=_SEMANTICS.get(req.semantics, "mysql"))
    if req.skip_policy not in _SKIP:
        raise RuleError(f"skip_policy {req.skip_policy} is not a known SkipPolicy")
    return Registration(req.server_id, req.hostname, tuple(req.channels) or ("",), tuple(specs), settings,
                        _SKIP[req.skip_policy], req.credentials.user, req.credentials.password)


def effective_to_proto(items: list[Effective]) -> list:
    return [dump_pb2.EffectiveFilters(channel=e.channel, rules=rules_to_proto(e.rules),
                                      change_replication_filter=e.rules.render(),
                                      policy_allow=list(e.gate.allow), policy_restricted=e.gate.restricted)
            for e in items]


def _position(pos) -> dump_pb2.Position | None:
    return dump_pb2.Position(file=pos[0], pos=pos[1]) if pos else None


def _status_for(exc: BaseException) -> tuple[grpc.StatusCode, str]:
    """The one place where errors become gRPC status codes."""
    if isinstance(exc, RuleError):
        return grpc.StatusCode.INVALID_ARGUMENT, str(exc)
    if isinstance(exc, UnknownSlaveError):
        return grpc.StatusCode.NOT_FOUND, str(exc)
    if isinstance(exc, PositionError):  # MySQL error 1236
        return grpc.StatusCode.OUT_OF_RANGE, f"(1236) {exc}"
    if isinstance(exc, BinlogError):
        return grpc.StatusCode.DATA_LOSS, str(exc)  # names the file and the byte offset
    if isinstance(exc, AccessDeniedError):
        return grpc.StatusCode.PERMISSION_DENIED, str(exc)
    if isinstance(exc, StreamReplacedError):
        return grpc.StatusCode.ABORTED, str(exc)
    if isinstance(exc, ShuttingDownError):
        return grpc.StatusCode.UNAVAILABLE, str(exc)
    if isinstance(exc, ChangeTimeoutError):
        return grpc.StatusCode.DEADLINE_EXCEEDED, str(exc)
    if isinstance(exc, DumpFilterError):
        return grpc.StatusCode.FAILED_PRECONDITION, str(exc)
    return grpc.StatusCode.INTERNAL, f"internal error: {type(exc).__name__}: {exc}"


def _mapped(method):
    """Run a unary handler; any exception ends the RPC with its mapped status."""
    @functools.wraps(method)
    def wrapper(self, request, context):
        try:
            return method(self, request, context)
        except Exception as exc:
            code, message = _status_for(exc)
            if code == grpc.StatusCode.INTERNAL:
                log.exception("%s failed", method.__name__)
            context.abort(code, message)
    return wrapper


class DumpFilterServicer(dump_pb2_grpc.DumpFilterServicer):
    def __init__(self, service: DumpService):
        self.service = service

    @_mapped
    def Register(self, request, context):
        result = self.service.register(registration_from_proto(request))
        return dump_pb2.RegisterReply(server_id=result.server_id, effective=effective_to_proto(result.effective),
                                      warnings=result.warnings, replaced=result.replaced)

    def Dump(self, request, context):
        which = request.WhichOneof("start")
        start = (request.position.file, request.position.pos) if which == "position" else None
        gtid_state = request.gtid_state if which == "gtid_state" else None
        batches = self.service.stream(request.server_id, channel=request.channel, start=start, gtid_state=gtid_state,
                                      heartbeat_period=request.heartbeat_period or 1.0, is_active=context.is_active)
        try:
            for batch in batches:
                yield dump_pb2.DumpBatch(events=batch.events, position=_position(batch.position),
                                         transactions=batch.transactions, skipped_bytes=batch.skipped_bytes,
                                         caught_up=batch.caught_up, heartbeat=batch.heartbeat,
                                         gtid_state=batch.gtid_state,
                                         filter_changed_at=_position(batch.filter_changed_at))
        except Exception as exc:
            code, message = _status_for(exc)
            if code == grpc.StatusCode.INTERNAL:
                log.exception("Dump for server_id %s failed", request.server_id)
            context.abort(code, message)
        finally:
            batches.close()

    @_mapped
    def ChangeFilter(self, request, context):
        remaining = context.time_remaining()
        timeout = None if remaining is None else max(0.0, remaining - 0.05)
        position, running, effective = self.service.change_filter(request.server_id,
                                                                  request.change_replication_filter, timeout)
        return dump_pb2.ChangeFilterReply(effective_at=_position(position), applied_to_running_stream=running,
                                          effective=effective_to_proto(effective))

    @_mapped
    def ListFilters(self, request, context):
        rows, global_rows = self.service.list_filters(request.server_id)
        return dump_pb2.ListFiltersReply(filters=[_filter_row(r) for r in rows],
                                         global_filters=[_filter_row(r) for r in global_rows])

    @_mapped
    def Stats(self, request, context):
        reply = dump_pb2.StatsReply()
        for slave, end, behind in self.service.stats(request.server_id):
            s = slave.stats
            reply.slaves.add(
                server_id=slave.server_id, streaming=slave.stream is not None, position=_position(slave.position),
                binlog_end=_position(end), bytes_behind=behind, events_read=s.events_read, bytes_read=s.bytes_read,
                events_sent=s.events_sent, bytes_sent=s.bytes_sent, events_skipped=s.events_skipped,
                bytes_skipped=s.bytes_skipped, heartbeats=s.heartbeats, heartbeat_bytes=s.heartbeat_bytes,
                placeholders=s.placeholders, placeholder_bytes=s.placeholder_bytes,
                empty_transactions=s.empty_transactions, empty_transaction_bytes=s.empty_transaction_bytes,
                transactions_kept=s.transactions_kept, transactions_partial=s.transactions_partial,
                transactions_skipped=s.transactions_skipped, rule_hits=dict(s.rule_hits),
                skip_policy=slave.reg.skip_policy, kept_bytes=s.kept_bytes, hostname=slave.reg.hostname,
                registered_at=slave.registered_at.isoformat(), channels=list(slave.registry.channels))
        return reply

    @_mapped
    def Unregister(self, request, context):
        return dump_pb2.UnregisterReply(stream_ended=self.service.unregister(request.server_id))


def _filter_row(row: dict) -> dump_pb2.FilterRow:
    since = row.get("ACTIVE_SINCE")
    return dump_pb2.FilterRow(server_id=row["server_id"], channel_name=row.get("CHANNEL_NAME", ""),
                              filter_name=row["FILTER_NAME"], filter_rule=row["FILTER_RULE"],
                              configured_by=row["CONFIGURED_BY"], active_since=since.isoformat() if since else "",
                              counter=row.get("COUNTER", 0))


class MasterServer:
    """A running master: the gRPC server, its dump service and health servicer."""

    def __init__(self, server: grpc.Server, service: DumpService, health_servicer: health.HealthServicer, port: int):
        self.server, self.service, self.health, self.port = server, service, health_servicer, port

    def stop(self, grace: float = 5.0) -> None:
        """Graceful shutdown: NOT_SERVING, streams asked to end after their current batch, then
        the server drains in-flight RPCs for up to `grace` seconds."""
        self.health.set("", health_pb2.HealthCheckResponse.NOT_SERVING)
        self.health.set(SERVICE_NAME, health_pb2.HealthCheckResponse.NOT_SERVING)
        self.service.shutdown()
        self.server.stop(grace).wait()


def create_server(binlog_dir: str | Path, listen: str = "127.0.0.1:0", *, policy: str | Path | MasterPolicy | None = None,
                  tls_cert: str | Path | None = None, tls_key: str | Path | None = None, max_streams: int = 64,
                  **service_options) -> tuple[MasterServer, int]:
    """A started master serving `binlog_dir` on `listen`; returns (MasterServer, bound port)."""
    if isinstance(policy, str | Path):
        policy = MasterPolicy.load(policy)
    service = DumpService(binlog_dir, policy=policy, **service_options)
    # The sync server gives each RPC a pool thread for its whole life: size the pool for the
    # streams plus room for unary calls, and refuse streams beyond it rather than queueing them.
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=max_streams + 8, thread_name_prefix="dump"),
                         maximum_concurrent_rpcs=max_streams + 8)
    dump_pb2_grpc.add_DumpFilterServicer_to_server(DumpFilterServicer(service), server)
    health_servicer = health.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    reflection.enable_server_reflection((SERVICE_NAME, health.SERVICE_NAME, reflection.SERVICE_NAME), server)
    if tls_cert or tls_key:
        if not (tls_cert and tls_key):
            raise RuleError("--tls-cert and --tls-key go together")
        creds = grpc.ssl_server_credentials([(Path(tls_key).read_bytes(), Path(tls_cert).read_bytes())])
        port = server.add_secure_port(listen, creds)
    else:
        port = server.add_insecure_port(listen)
    if port == 0:
        raise DumpFilterError(f"cannot listen on {listen}")
    server.start()
    health_servicer.set("", health_pb2.HealthCheckResponse.SERVING)
    health_servicer.set(SERVICE_NAME, health_pb2.HealthCheckResponse.SERVING)
    return MasterServer(server, service, health_servicer, port), port
