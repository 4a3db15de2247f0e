"""bench.grpc_floor, the transport's floor beside `bench fanout_procs`' goals, on a bounded amount of
work: a bare gRPC server process streams its replies to client processes that check every byte
arrived; its CPU is read for each count of clients. Nothing here asserts a time."""

from __future__ import annotations

import grpc
import pytest

from bench import grpc_floor


def test_the_floor_streams_to_each_count_of_clients():
    assert sorted(grpc_floor.floor_cpu(8, [1, 4], repeat=1)) == [1, 4]


def test_a_client_short_of_its_bytes_fails(monkeypatch):
    """The client's check is what makes a floor a floor of bytes really sent: one that expects
    more than the server sends exits with the difference."""
    port, server = grpc_floor.start_server(1)
    try:
        grpc_floor._client(port, 2)  # as many bytes as it asked for
        monkeypatch.setattr(grpc_floor, "REPLY", grpc_floor.REPLY + b"x")  # expects one byte more per reply
        with pytest.raises(SystemExit, match="received 2097154 bytes of 2097156"):
            grpc_floor._client(port, 2)
    finally:
        server.kill()
        server.wait()


def test_the_server_streams_every_client_at_once():
    """The floor is the production configuration's: the master streams every slave at once (a
    pool thread per stream), so the floor's server has a thread per client. Four calls each get
    a first reply while none has ended; a server with fewer threads would hold the fourth until
    one ended (the deadline is a limit on that hang, not a time the test asserts)."""
    clients = 4
    port, server = grpc_floor.start_server(clients)
    try:
        with grpc.insecure_channel(f"127.0.0.1:{port}", options=[("grpc.max_receive_message_length", 64 << 20)]) as channel:
            stream = channel.unary_stream(f"/{grpc_floor.SERVICE}/{grpc_floor.METHOD}", request_serializer=bytes,
                                          response_deserializer=bytes)
            # (each asks more than the transport's windows hold, so a handler stays on its thread)
            calls = [stream(b"1000", timeout=60) for _ in range(clients)]
            firsts = [next(call) for call in calls]
            assert [len(reply) for reply in firsts] == [len(grpc_floor.REPLY) + 1] * clients
            for call in calls:
                call.cancel()
    finally:
        server.kill()
        server.wait()
