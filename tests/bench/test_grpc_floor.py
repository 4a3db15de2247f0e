"""bench.grpc_floor, the transport's floor beside `bench fanout_procs`' goals, on a bounded amount of
work: a bare gRPC server process streams its replies to client processes that check every byte
arrived; its CPU is read for each count of clients. Nothing here asserts a time."""

from __future__ import annotations

from bench.grpc_floor import floor_cpu


def test_the_floor_streams_to_each_count_of_clients_and_reads_the_server_cpu():
    got = floor_cpu(8, [1, 4], repeat=1)
    assert sorted(got) == [1, 4]
    assert all(cpu >= 0 for cpu in got.values())

