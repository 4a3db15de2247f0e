"""Fuzz target: every RPC message of dumpfilter.v1 against a real master on loopback, with
hostile field values (enum numbers out of range, server_id 0 and 2^32-1, rules that do not parse,
paths for file names, NaN heartbeat periods, GTID states that are not GTIDs). Every answer is a
reply or a typed status naming the field: never INTERNAL or UNKNOWN (an exception that escaped)."""

from __future__ import annotations

import math

import grpc
import pytest
from hypothesis import given
from hypothesis import strategies as st

from dumpfilter.workload.generator import WorkloadSpec, generate
from dumpfilter.v1 import dump_pb2, dump_pb2_grpc
from tests.fuzz.fuzz_support import FUZZ, TARGET_TIMEOUT
from dumpfilter.master.serve.grpc_server import create_server

pytestmark = [pytest.mark.grpc, pytest.mark.timeout(TARGET_TIMEOUT)]
BAD = (grpc.StatusCode.INTERNAL, grpc.StatusCode.UNKNOWN)
# Each call's gRPC deadline: a give-up, not a bound on speed (DEADLINE_EXCEEDED is an accepted
# answer; a Dump with a huge heartbeat period waits for its first batch until then).
GIVE_UP = 2.0

texts = st.text(alphabet="ab1_%.\\'`\" ,()=->:/\x00\u00e9", max_size=20)
server_ids = st.one_of(st.integers(0, 8), st.just(0xFFFFFFFF), st.integers(0, 0xFFFFFFFF))
crf = st.lists(st.sampled_from(["CHANGE", "REPLICATION", "FILTER", "REPLICATE_DO_DB", "REPLICATE_WILD_DO_TABLE",
                                "REPLICATE_REWRITE_DB", "=", "(", ")", ",", "'db%.t'", "db1", "FOR", "CHANNEL",
                                "CHANGE MASTER TO", "DO='a.%'", "IGNOR='x'", "'"]), max_size=10).map(" ".join)
rules = st.lists(st.builds(dump_pb2.FilterRule, type=st.integers(0, 15), value=texts, to=texts), max_size=4)
filters = st.lists(st.one_of(
    st.builds(lambda ch, r: dump_pb2.ChannelFilters(channel=ch, rules=dump_pb2.RuleList(rules=r)),
              st.one_of(st.none(), texts), rules),
    st.builds(lambda ch, t: dump_pb2.ChannelFilters(channel=ch, change_replication_filter=t),
              st.one_of(st.none(), texts), crf)), max_size=3)
register = st.builds(dump_pb2.RegisterRequest, server_id=server_ids, hostname=texts,
                     channels=st.lists(texts, max_size=3), filters=filters, semantics=st.integers(0, 5),
                     skip_policy=st.integers(0, 6),
                     credentials=st.builds(dump_pb2.Credentials, user=texts, password=texts),
                     flavor=st.sampled_from(["", "mysql", "mariadb", "oracle"]),
                     lower_case_table_names=st.integers(0, 0xFFFFFFFF))
files = st.one_of(st.sampled_from(["", "master-bin.000001", "master-bin.000003", "/etc/passwd", "../x", "master-bin.index",
                                   "master-bin.999999"]), texts)
floats = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.sampled_from([0.0, -1.0, 1e-9, math.nan]))
dump = st.one_of(
    st.builds(lambda sid, ch, f, p, hb: dump_pb2.DumpRequest(server_id=sid, channel=ch, heartbeat_period=hb,
                                                              position=dump_pb2.Position(file=f, pos=p)),
              server_ids, texts, files, st.one_of(st.integers(0, 1000), st.integers(0, (1 << 64) - 1)), floats),
    st.builds(lambda sid, g, hb: dump_pb2.DumpRequest(server_id=sid, gtid_state=g, heartbeat_period=hb),
              server_ids, st.one_of(texts, st.sampled_from(["0-1-5", "0-1-5,1-2-3", "3E11FA47-71CA-11E1-9E33-C80AA9429562:1-5",
                                                            "x-y-z", "0-1-99999999999999999999999"])), floats))


@pytest.fixture(scope="module")
def stub(tmp_path_factory):
    directory = tmp_path_factory.mktemp("fuzz-master")
    generate(WorkloadSpec(seed=5, transactions=200, max_binlog_size=60_000), directory)
    master, port = create_server(directory, "127.0.0.1:0", max_streams=256)
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        yield dump_pb2_grpc.DumpFilterStub(channel)
    master.stop(grace=0.5)


def _call(fn, request):
    try:
        fn(request, timeout=GIVE_UP)
    except grpc.RpcError as exc:
        assert exc.code() not in BAD, (request, exc.code(), exc.details())


@FUZZ
@given(register=register, change=st.builds(dump_pb2.ChangeFilterRequest, server_id=server_ids,
                                           change_replication_filter=crf),
       ids=server_ids)
def test_fuzz_unary_rpcs(stub, register, change, ids):
    _call(stub.Register, register)
    _call(stub.ChangeFilter, change)
    _call(stub.ListFilters, dump_pb2.ListFiltersRequest(server_id=ids))
    _call(stub.Stats, dump_pb2.StatsRequest(server_id=ids))
    if ids % 3 == 0:
        _call(stub.Unregister, dump_pb2.UnregisterRequest(server_id=ids))
    _call(stub.Unregister, dump_pb2.UnregisterRequest(server_id=register.server_id))  # stay under 1024 slaves


@FUZZ
@given(request=dump, register_first=st.booleans())
def test_fuzz_dump(stub, request, register_first):
    if register_first:
        _call(stub.Register, dump_pb2.RegisterRequest(server_id=request.server_id or 1))
    call = stub.Dump(request, timeout=GIVE_UP)
    try:
        next(call)
    except StopIteration:
        pass
    except grpc.RpcError as exc:
        assert exc.code() not in BAD, (request, exc.code(), exc.details())
    finally:
        call.cancel()
        if register_first:
            _call(stub.Unregister, dump_pb2.UnregisterRequest(server_id=request.server_id or 1))
