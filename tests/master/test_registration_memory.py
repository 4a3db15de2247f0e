"""Issue #27: re-registering one server_id (each time with new rules, changing them live, streaming
a little) against a real gRPC master retains a bounded amount of memory, whatever the number of
registrations: the replaced registration's rule engines, rule-group keys, engine locks, queued
lint jobs and pending changes are let go. Memory is measured with tracemalloc, never time."""

from __future__ import annotations

import gc
import tracemalloc

import grpc
import pytest

from dumpfilter.v1 import dump_pb2, dump_pb2_grpc

pytestmark = [pytest.mark.grpc, pytest.mark.timeout(300)]


def _crf(text: str) -> list:
    return [dump_pb2.ChannelFilters(change_replication_filter=text)]


def _retained() -> int:
    """Bytes held by allocations under 64 KiB: leaks are many small objects, while Python's own
    tables (the interned-string table, a dict's storage) grow in one-off doublings that would
    hide or fake them. The least of three looks: what threads still at work (this master's, or
    one an earlier test left winding down) hold for a moment only adds to a look, never takes
    from what is retained (one look alone failed the bound in a full run, on code without leaks)."""
    looks = []
    for _ in range(3):
        gc.collect()
        looks.append(sum(trace.size for trace in tracemalloc.take_snapshot().traces if trace.size < 65536))
    return min(looks)


def test_re_registering_a_server_id_retains_bounded_memory(workload_dir, master_factory):
    # Lint stays on (each new rule set starts a follower); a follower ends with the last
    # registration using its rules, so the re-registrations leave one. Database and table rules
    # only: wild rules would fill Python's own `re` cache (512 patterns) as they go.
    master, address = master_factory(workload_dir)
    with grpc.insecure_channel(address) as channel:
        stub = dump_pb2_grpc.DumpFilterStub(channel)

        def step(i: int) -> None:
            reply = stub.Register(dump_pb2.RegisterRequest(server_id=5, filters=_crf(
                f"CHANGE REPLICATION FILTER REPLICATE_DO_DB = (db{i % 6 + 1}, other{i})")), timeout=30)
            assert reply.replaced == (i > 0)
            stub.ChangeFilter(dump_pb2.ChangeFilterRequest(server_id=5, change_replication_filter=(
                f"CHANGE REPLICATION FILTER REPLICATE_IGNORE_TABLE = (db1.t{i})")), timeout=30)
            if i % 10 == 0:  # a stream on these rules, replaced by the next Register
                call = stub.Dump(dump_pb2.DumpRequest(server_id=5, heartbeat_period=0.1), timeout=30)
                assert next(call).events
                call.cancel()

        for i in range(30):
            step(i)
        tracemalloc.start(1)
        try:
            start = _retained()
            for i in range(30, 110):
                step(i)
            middle = _retained()
            for i in range(110, 190):
                step(i)
            end = _retained()
        finally:
            tracemalloc.stop()
    # Before the fix each step kept about 10 KB (two rule engines, a rule-group key, a lock): 800 KB
    # per 80 steps. Now the second 80 steps keep what the first did not: noise.
    assert end - middle < 200_000, (start, middle, end)
    assert end - start < 400_000, (start, middle, end)
    service = master.service
    # Only the live registration's engine, rule group and lock are left.
    assert len(service._engines) == 1 and len(service._group_ids) == 1 and len(service.group_locks) == 1
    assert len(service.lint.followers) <= 1 and len(service.lint.subs) == 1


def test_pending_changes_of_one_slave_are_bounded(workload_dir):
    """ChangeFilter calls that time out leave their change queued for the stream's next transaction
    boundary: a stream whose slave takes no more batches (its generator held between two, as a
    send held back by flow control holds it) cannot collect them without bound, and the stream's
    replacement lets them all go."""
    from dumpfilter.errors import ChangeTimeoutError, ResourceExhaustedError
    from dumpfilter.master.registry import MAX_PENDING_CHANGES
    from dumpfilter.master.model import Registration
    from dumpfilter.master.service import DumpService

    service = DumpService(workload_dir, batch_bytes=64 << 10, lint_bytes=0)
    try:
        service.register(Registration(6))
        stream = service.stream(6)
        assert next(stream).parts  # streaming, and now held between two batches
        slave = service.slaves[6]
        for i in range(MAX_PENDING_CHANGES):
            with pytest.raises(ChangeTimeoutError):
                service.change_filter(6, f"CHANGE REPLICATION FILTER REPLICATE_DO_DB = (d{i})", timeout=0.01)
        with pytest.raises(ResourceExhaustedError, match=f"at most {MAX_PENDING_CHANGES}"):
            service.change_filter(6, "CHANGE REPLICATION FILTER REPLICATE_DO_DB = (x)", timeout=0.01)
        assert len(slave.pending) == MAX_PENDING_CHANGES
        service.register(Registration(6))  # ends the stream: every queued change is let go
        assert slave.pending == [] and service.slaves[6].pending == []
        stream.close()
    finally:
        service.shutdown()
