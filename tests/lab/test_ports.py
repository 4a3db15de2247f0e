"""lab.ports.free_port: a port below the kernel's ephemeral range, never one in use, never the same
twice in a process (CI once lost a test to a bind(0) port an outgoing connection took meanwhile)."""

from __future__ import annotations

import socket

import pytest

from dumpfilter.errors import InvalidArgumentError
from dumpfilter.lab import ports


def test_ports_are_below_the_ephemeral_range_and_bind(monkeypatch):
    monkeypatch.delenv("DUMPFILTER_PORTS", raising=False)  # (set for each xdist worker by conftest)
    low = ports._ephemeral_low()
    chosen = [ports.free_port() for _ in range(50)]
    assert len(set(chosen)) == len(chosen)
    for port in chosen:
        assert ports._LOWEST <= port < low
        with socket.socket() as s:
            s.bind(("127.0.0.1", port))


def test_a_port_in_use_or_given_is_passed_over(monkeypatch):
    monkeypatch.delenv("DUMPFILTER_PORTS", raising=False)
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
    monkeypatch.delenv("DUMPFILTER_PORTS", raising=False)
    monkeypatch.setattr(ports, "_ephemeral_low", lambda: 1024)
    port = ports.free_port()
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))


def test_a_slice_in_the_environment_is_where_ports_are_chosen(monkeypatch):
    monkeypatch.setenv("DUMPFILTER_PORTS", "20000-20400")
    chosen = [ports.free_port() for _ in range(20)]
    assert all(20000 <= port < 20400 for port in chosen), chosen
    assert len(set(chosen)) == len(chosen)


@pytest.mark.parametrize("given", ["20000", "20000-", "x-20010", "20010-20000", "80-90", "20000-70000"])
def test_a_malformed_slice_is_one_clear_error(monkeypatch, given):
    monkeypatch.setenv("DUMPFILTER_PORTS", given)
    with pytest.raises(InvalidArgumentError, match="DUMPFILTER_PORTS=.*expected LOW-HIGH"):
        ports.free_port()


def test_the_suites_workers_choose_in_slices_apart():
    """conftest gives each xdist worker its own slice, inside the range below the ephemeral ports."""
    import os

    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker is None:
        pytest.skip("not an xdist worker: no slice given")
    count, index = int(os.environ["PYTEST_XDIST_WORKER_COUNT"]), int(worker[2:])
    width = (ports._ephemeral_low() - ports._LOWEST) // count
    if width <= 100:
        pytest.skip("no room below the ephemeral ports for a slice each: the kernel chooses")
    low, high = ports.port_range()
    assert (low, high) == (ports._LOWEST + index * width, ports._LOWEST + (index + 1) * width)
