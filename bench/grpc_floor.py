"""The transport's floor for `bench fanout_procs` (issue #42): a bare gRPC server process that
streams ready-made 1 MiB replies (no binlog, no filtering: bytes built once, sent through the same
kind of identity serializer as the master's Dump replies) to client processes that count what they
receive. Its CPU for N MB to one client against N/8 MB to each of eight, started together, is what
gRPC itself adds when one slave becomes eight; the master's own figures are read beside it.

    python -m bench.grpc_floor server PORT | client PORT REPLIES   (run by `floor_cpu`)
"""

from __future__ import annotations

import subprocess
import sys
import time
from concurrent import futures

import grpc

from bench.common import free_port, process_cpu_s

REPLY = b"x" * (1 << 20)
SERVICE, METHOD = "bench.Floor", "Stream"


def _serve(port: int) -> None:
    def stream(request: bytes, context):
        for _ in range(int(request)):
            yield REPLY

    handler = grpc.unary_stream_rpc_method_handler(stream, request_deserializer=bytes,
                                                   response_serializer=lambda reply: b"".join((b"\n", reply)))
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=16),
                         options=[("grpc.max_send_message_length", 64 << 20)])
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE, {METHOD: handler}),))
    server.add_insecure_port(f"127.0.0.1:{port}")
    server.start()
    print("ready", flush=True)
    server.wait_for_termination()


def _client(port: int, replies: int) -> None:
    with grpc.insecure_channel(f"127.0.0.1:{port}", options=[("grpc.max_receive_message_length", 64 << 20)]) as channel:
        call = channel.unary_stream(f"/{SERVICE}/{METHOD}", request_serializer=bytes, response_deserializer=bytes)
        got = sum(len(reply) for reply in call(str(replies).encode()))
    if got != replies * (len(REPLY) + 1):
        raise SystemExit(f"received {got} bytes of {replies * (len(REPLY) + 1)}")


def floor_cpu(mb: int, clients: list[int], repeat: int = 2) -> dict[int, float]:
    """The server's least CPU seconds to stream `mb` MiB in all, split over each count of client
    processes started together."""
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "bench.grpc_floor", "server", str(port)], stdout=subprocess.PIPE,
                              text=True)
    best: dict[int, float] = {}
    try:
        if server.stdout is None or server.stdout.readline().strip() != "ready":
            raise RuntimeError("the bare gRPC server did not start")
        for _ in range(repeat):
            for n in clients:
                before = process_cpu_s(server.pid)
                procs = [subprocess.Popen([sys.executable, "-m", "bench.grpc_floor", "client", str(port), str(mb // n)])
                         for _ in range(n)]
                if any(proc.wait() != 0 for proc in procs):
                    raise RuntimeError("a bare gRPC client failed")
                time.sleep(0.2)  # the last replies' completions
                best[n] = min(best.get(n, float("inf")), process_cpu_s(server.pid) - before)
    finally:
        server.kill()
        server.wait()
    return best


if __name__ == "__main__":
    if sys.argv[1] == "server":
        _serve(int(sys.argv[2]))
    else:
        _client(int(sys.argv[2]), int(sys.argv[3]))
