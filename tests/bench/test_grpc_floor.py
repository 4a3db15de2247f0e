"""bench.grpc_floor, the transport's floor beside `bench fanout_procs`' goals, on a bounded amount of
work: a bare gRPC server process streams its replies to client processes that check every byte
arrived; its CPU is read for each count of clients. Nothing here asserts a time."""

from __future__ import annotations

import subprocess
import sys

import pytest

from bench import grpc_floor
from bench.common import free_port


def test_the_floor_streams_to_each_count_of_clients():
    assert sorted(grpc_floor.floor_cpu(8, [1, 4], repeat=1)) == [1, 4]


def test_a_client_short_of_its_bytes_fails(monkeypatch):
    """The client's check is what makes a floor a floor of bytes really sent: one that expects
    more than the server sends exits with the difference."""
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "bench.grpc_floor", "server", str(port)], stdout=subprocess.PIPE,
                              text=True)
    try:
        assert server.stdout is not None and server.stdout.readline().strip() == "ready"
        grpc_floor._client(port, 2)  # as many bytes as it asked for
        monkeypatch.setattr(grpc_floor, "REPLY", grpc_floor.REPLY + b"x")  # expects one byte more per reply
        with pytest.raises(SystemExit, match="received 2097154 bytes of 2097156"):
            grpc_floor._client(port, 2)
    finally:
        server.kill()
        server.wait()
