"""A loopback TCP proxy that injects faults into the master->slave direction: after every `every`
bytes it drops the connection (FIN), resets it (RST) or stalls it (holds the bytes for `stall`
seconds), in turn; with `rate`, it is a slow link (at most `rate` bytes a second, over all its
connections). Real sockets, real gRPC on both sides."""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
import time

FAULTS = ("drop", "reset", "stall")


class FaultyProxy:
    def __init__(self, target: tuple[str, int], *, every: int | None = None, stall: float = 3.0, faults=FAULTS,
                 rate: float | None = None):
        self.target, self.every, self.stall, self.faults, self.rate = target, every, stall, faults, rate
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.forwarded = 0          # master->slave bytes, over every connection
        self.next_fault = every
        self.started: float | None = None  # the first forwarded byte's time: the pace counts from it
        self.injected: dict[str, int] = dict.fromkeys(faults, 0)
        self.connections = 0
        self._lock = threading.Lock()
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def close(self) -> None:
        self._closed = True
        self.listener.close()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(self.target)
            except OSError:
                client.close()
                continue
            self.connections += 1
            threading.Thread(target=self._pump, args=(client, upstream, False), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client, True), daemon=True).start()

    def _fault_for(self, n: int) -> str | None:
        with self._lock:
            self.forwarded += n
            if self.rate:  # the link's pace: these bytes leave no sooner than the rate allows
                if self.started is None:
                    self.started = time.monotonic()
                time.sleep(max(0.0, self.started + self.forwarded / self.rate - time.monotonic()))
            if self.next_fault is None or self.forwarded < self.next_fault:
                return None
            self.next_fault = self.forwarded + (self.every or 0)
            kind = self.faults[sum(self.injected.values()) % len(self.faults)]
            self.injected[kind] += 1
            return kind

    def _pump(self, src: socket.socket, dst: socket.socket, downstream: bool) -> None:
        try:
            while True:
                data = src.recv(16384)
                if not data:
                    break
                fault = self._fault_for(len(data)) if downstream else None
                if fault == "stall":
                    time.sleep(self.stall)  # the bytes are held: the link looks dead
                elif fault is not None:
                    half = len(data) // 2
                    dst.sendall(data[:half])  # mid-message
                    if fault == "reset":
                        dst.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    break
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with contextlib.suppress(OSError):
                    s.close()
