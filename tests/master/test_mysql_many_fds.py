"""A replica whose socket is past descriptor 1024 is still served: the endpoint's "is the replica
still there?" look took select(), which refuses descriptors past FD_SETSIZE, and a master holding
more descriptors (replicas, mapped binlogs) took every replica for gone (a CI run's real
replicas all stopped once a test process held 1 120 descriptors)."""

from __future__ import annotations

import os
import resource
import socket
from types import SimpleNamespace

import pytest

from dumpfilter.master.endpoint.server import _Connection

HIGH = 1500


@pytest.fixture
def high_socketpair():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft <= HIGH:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (HIGH + 100, max(hard, HIGH + 100)))
        except (ValueError, OSError):
            pytest.skip(f"cannot open descriptor {HIGH} here (RLIMIT_NOFILE {soft}/{hard})")
    a, b = socket.socketpair()
    high = socket.socket(fileno=os.dup2(a.fileno(), HIGH))
    a.close()
    try:
        yield high, b
    finally:
        high.close()
        b.close()
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_a_replica_past_descriptor_1024_is_still_there_until_it_closes(high_socketpair):
    replica_side_of_master, replica = high_socketpair
    assert replica_side_of_master.fileno() >= 1024
    conn = SimpleNamespace(closed=False, sock=replica_side_of_master)
    assert _Connection._active(conn)  # a dumping replica sends nothing: still there
    replica.close()
    assert not _Connection._active(conn)  # its side closed: gone
