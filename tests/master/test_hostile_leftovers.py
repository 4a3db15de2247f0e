"""The hostile-input probe's leftovers on the gRPC face, against a real master over a real channel:
the health and reflection services answered a request that does not parse INTERNAL ("Exception
deserializing request!", the code of a master's bug), now INVALID_ARGUMENT as DumpFilter's
methods do; and a Register whose replica schema is far over its identity's rule budget had its
schema model built first (about 90 MB for a 4 MiB one) before the refusal, now refused from the
request's counts, the model never built."""

from __future__ import annotations

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from dumpfilter.master.serve import grpc_server
from dumpfilter.v1 import dump_pb2, dump_pb2_grpc

pytestmark = [pytest.mark.grpc, pytest.mark.timeout(120)]

GIVE_UP = 30.0
# A tag whose varint never ends; field 1 (a string in both requests) holding bytes that are not UTF-8.
CUT_SHORT, NOT_UTF8 = b"\xff\xff\xff\xff\xff", b"\x0a\x02\xff\xfe"
POLICY = '[slave.small]\npassword = "small-pw"\nallow = ["%.%"]\nmax_rules = 1000\n'
SMALL = [("dumpfilter-user", "small"), ("dumpfilter-password", "small-pw")]


def _same(data: bytes) -> bytes:
    return data


@pytest.mark.parametrize(("path", "kind", "payloads"), [
    ("/grpc.health.v1.Health/Check", "unary_unary", [CUT_SHORT, NOT_UTF8]),
    ("/grpc.health.v1.Health/List", "unary_unary", [CUT_SHORT]),  # (no fields: field 1 is an unknown one)
    ("/grpc.health.v1.Health/Watch", "unary_stream", [CUT_SHORT, NOT_UTF8]),
    ("/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo", "stream_stream", [CUT_SHORT, NOT_UTF8]),
], ids=["check", "list", "watch", "reflection"])
def test_health_and_reflection_answer_a_request_that_does_not_parse_invalid_argument(workload_dir, master_factory,
                                                                                     path, kind, payloads):
    _, address = master_factory(workload_dir)
    with grpc.insecure_channel(address) as channel:
        call = getattr(channel, kind)(path, request_serializer=_same, response_deserializer=_same)
        for payload in payloads:
            with pytest.raises(grpc.RpcError) as info:
                reply = call(iter([payload]) if kind == "stream_stream" else payload, timeout=GIVE_UP)
                if kind != "unary_unary":
                    list(reply)
            assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT, (payload, info.value)
            assert "well-formed" in (info.value.details() or ""), info.value.details()
        # Still served, a well-formed request as before.
        health = health_pb2_grpc.HealthStub(channel)
        assert health.Check(health_pb2.HealthCheckRequest(), timeout=GIVE_UP).status == health_pb2.HealthCheckResponse.SERVING
        watch = health.Watch(health_pb2.HealthCheckRequest(), timeout=GIVE_UP)
        assert next(watch).status == health_pb2.HealthCheckResponse.SERVING
        watch.cancel()
        answers = reflection_pb2_grpc.ServerReflectionStub(channel).ServerReflectionInfo(
            iter([reflection_pb2.ServerReflectionRequest(list_services="")]), timeout=GIVE_UP)
        assert "dumpfilter.v1.DumpFilter" in {s.name for a in answers for s in a.list_services_response.service}


def test_a_replica_schema_over_the_rule_budget_is_refused_before_its_model_is_built(workload_dir, master_factory,
                                                                                    tmp_path, monkeypatch):
    """`small` may hold 1000 rules: a replica schema of 20 000 tables of 25 columns (2.6 MB,
    520 000 items) is RESOURCE_EXHAUSTED, and the function that builds its model is never called; one of
    900 tables is built and registered."""
    built = []

    def counted(message, *args):
        built.append(len(message.tables))
        return schema_from_proto(message, *args)

    schema_from_proto = grpc_server.schema_from_proto
    monkeypatch.setattr(grpc_server, "schema_from_proto", counted)
    (tmp_path / "policy.toml").write_text(POLICY)
    _, address = master_factory(workload_dir, policy=tmp_path / "policy.toml")
    columns = [f"c{j}" for j in range(25)]
    with grpc.insecure_channel(address) as channel:
        stub = dump_pb2_grpc.DumpFilterStub(channel)

        def register(tables: int, width: list[str]) -> dump_pb2.RegisterReply:
            schema = dump_pb2.ReplicaSchema(tables=[dump_pb2.SchemaTable(db="d", name=f"t{i}", columns=width)
                                                    for i in range(tables)])
            return stub.Register(dump_pb2.RegisterRequest(server_id=7, replica_schema=schema), metadata=SMALL,
                                 timeout=GIVE_UP)

        with pytest.raises(grpc.RpcError) as info:
            register(20_000, columns)
        assert info.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, info.value
        assert "replica_schema" in (info.value.details() or "") and "at most 1000" in info.value.details()
        assert built == []  # refused from the request's counts: no model made
        register(900, [])
        assert built == [900]
