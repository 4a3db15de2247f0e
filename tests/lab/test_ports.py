"""lab.ports.free_port: a port below the kernel's ephemeral range, never one in use, never the same
twice in a process (CI once lost a test to a bind(0) port an outgoing connection took meanwhile)."""

from __future__ import annotations

import socket

from dumpfilter.lab import ports


def test_ports_are_below_the_ephemeral_range_and_bind():
    low = ports._ephemeral_low()
    chosen = [ports.free_port() for _ in range(50)]
    assert len(set(chosen)) == len(chosen)
    for port in chosen:
        assert ports._LOWEST <= port < low
        with socket.socket() as s:
            s.bind(("127.0.0.1", port))


def test_a_port_in_use_or_given_is_passed_over(monkeypatch):
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        busy = held.getsockname()[1]
        given = ports.free_port()
        # The last try must be a port nothing else holds: another test of this worker may have
        # been given a fixed one (CI once lost this test to 23456 taken before it ran).
        fresh = next(
            p
            for p in range(23456, 60000)
            if p not in ports._GIVEN and p not in (busy, given) and ports._binds("127.0.0.1", p)
        )
        tries = iter([busy, given, busy, fresh])
        monkeypatch.setattr(ports.random, "randrange", lambda a, b: next(tries))
        monkeypatch.setattr(ports, "_ephemeral_low", lambda: 60000)
        assert ports.free_port() == fresh


def test_a_range_that_leaves_no_room_falls_back_to_the_kernels_choice(monkeypatch):
    monkeypatch.setattr(ports, "_ephemeral_low", lambda: 1024)
    port = ports.free_port()
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))
