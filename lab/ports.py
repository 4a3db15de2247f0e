"""Loopback ports for the servers the lab starts (MariaDB sandboxes, Spark's standalone cluster),
and for the tests and benches that start masters: one chosen below the kernel's ephemeral range.

A port the kernel hands out for `bind(0)` comes from that range, and it is free again the moment
the probe closes: any outgoing connection (a replica's, a gRPC channel's) may take it as its source
port before the server binds it, and the server then fails with "Address already in use". Below
the range, only a server's own bind takes a port.

Processes that start servers side by side (the test suite's xdist workers) each take a slice of
that range in DUMPFILTER_PORTS ("LOW-HIGH", HIGH excluded), which their children inherit: the bind
probe sees only a port bound now, and another process's choice may not be bound yet, or be between
its server's stop and its restart on the same port."""

from __future__ import annotations

import os
import random
import socket
import threading
from pathlib import Path

from dumpfilter.errors import InvalidArgumentError

_LOWEST = 10000  # above the well-known and registered ports servers here listen on (3306, 7077, ...)
_GIVEN: set[int] = set()  # chosen by this process, maybe not bound yet: never twice
_LOCK = threading.Lock()


def _ephemeral_low() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768  # Linux's default range starts here


def port_range() -> tuple[int, int]:
    """[low, high) to choose from: DUMPFILTER_PORTS's, else from _LOWEST to the ephemeral range."""
    given = os.environ.get("DUMPFILTER_PORTS", "").strip()
    if not given:
        return _LOWEST, _ephemeral_low()
    low, dash, high = given.partition("-")
    if not (dash and low.isdigit() and high.isdigit() and 1024 <= int(low) < int(high) <= 65536):
        raise InvalidArgumentError(f"DUMPFILTER_PORTS={given!r}: expected LOW-HIGH, 1024 <= LOW < HIGH <= 65536")
    return int(low), int(high)


def free_port(host: str = "127.0.0.1") -> int:
    """A port nothing listens on or connects from on `host`, in port_range() where it can be (else
    the kernel's choice), and not one this process chose before."""
    low, high = port_range()
    with _LOCK:
        for _ in range(500 if high - low > 100 else 0):
            port = random.randrange(low, high)
            if port not in _GIVEN and _binds(host, port):
                _GIVEN.add(port)
                return port
        with socket.socket() as s:
            s.bind((host, 0))
            chosen: int = s.getsockname()[1]  # (host, port) of an AF_INET socket
            _GIVEN.add(chosen)
            return chosen


def _binds(host: str, port: int) -> bool:
    # No SO_REUSEADDR: a port with connections lingering in TIME_WAIT is refused too.
    with socket.socket() as s:
        try:
            s.bind((host, port))
        except OSError:
            return False
        return True
