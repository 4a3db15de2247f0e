"""The transport's floor for `bench fanout_procs` (issue #42): a bare gRPC server process that
streams ready-made 1 MiB replies (no binlog, no filtering: bytes built once, sent through the same
kind of identity serializer as the master's Dump replies) to client processes that count what they
receive. Its CPU for N MB to one client against N/8 MB to each of eight, started together, is what
gRPC itself adds when one slave becomes eight; the master's own figures are read beside it.

The server has a pool thread for each client, as the master has one for each stream
(`master.serve.grpc_server`): all of them are streamed at once. Until session 92 it had 16, so
64 clients were streamed 16 at a time, in four waves (`workers`: that floor again, to compare).

    python -m bench.grpc_floor server PORT WORKERS | client PORT REPLIES   (run by `floor_cpu`)
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


def _serve(port: int, workers: int) -> None:
    def stream(request: bytes, context):
        for _ in range(int(request)):
            yield REPLY

    handler = grpc.unary_stream_rpc_method_handler(stream, request_deserializer=bytes,
                                                   response_serializer=lambda reply: b"".join((b"\n", reply)))
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=workers),
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


def start_server(workers: int) -> tuple[int, subprocess.Popen]:
    """A bare gRPC server process with `workers` pool threads, ready: (its port, the process)."""
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "bench.grpc_floor", "server", str(port), str(workers)],
                              stdout=subprocess.PIPE, text=True)
    if server.stdout is None or server.stdout.readline().strip() != "ready":
        server.kill()
        server.wait()
        raise RuntimeError("the bare gRPC server did not start")
    return port, server


def floor_cpu(mb: int, clients: list[int], repeat: int = 2, workers: int | None = None) -> dict[int, float]:
    """The server's least CPU seconds to stream `mb` MiB in all, split over each count of client
    processes started together; `workers`, the server's pool threads (None: one per client)."""
    port, server = start_server(workers or max(clients))
    best: dict[int, float] = {}
    try:
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
        _serve(int(sys.argv[2]), int(sys.argv[3]))
    else:
        _client(int(sys.argv[2]), int(sys.argv[3]))
