"""Fixtures for the simulate tests: the built-in topology run once per session (work kept, so
relay logs can be read), with every raw DumpBatch the slaves receive captured by a counter that
shares no code with the report: it parses event sizes from the headers itself."""

from __future__ import annotations

import struct
from collections import defaultdict

import pytest

from dumpfilter.slave import node as slave_client
from dumpfilter.lab.simulate import load_default_topology, run_simulation

HEARTBEAT_LOG_EVENT = 27
RAND_EVENT = 13
SKIP_REPLICATION_F = 0x8000


class BatchCapture:
    """Per (hostname, skip policy): events, bytes and heartbeats of every batch received."""

    def __init__(self):
        self.events = defaultdict(int)
        self.bytes = defaultdict(int)
        self.heartbeats = defaultdict(int)
        self.heartbeat_bytes = defaultdict(int)

    def record(self, key, blob: bytes) -> None:
        off = 0
        while off < len(blob):
            # v4 header: timestamp(4) type(1) server_id(4) event_size(4) log_pos(4) flags(2)
            type_code = blob[off + 4]
            (size,) = struct.unpack_from("<I", blob, off + 9)
            assert size >= 19
            self.events[key] += 1
            self.bytes[key] += size
            server_id, flags = struct.unpack_from("<I", blob, off + 5)[0], struct.unpack_from("<H", blob, off + 17)[0]
            if type_code == RAND_EVENT and server_id == 0 and flags & SKIP_REPLICATION_F:
                # A placeholder; seeds (n, 0) stand for a run of n (DumpRequest.placeholder_runs),
                # which a replica is sent as n of this size.
                length, kind = struct.unpack_from("<QQ", blob, off + 19)
                if kind == 0:
                    self.events[key] += length - 1
                    self.bytes[key] += (length - 1) * size
                elif kind in (0x100, 0x101):
                    # A stretch (DumpRequest.skip_stretches): whole events inside, each sent, and
                    # `length` placeholders of 35 bytes and the stretch's checksum; 0x101 holds
                    # GTIDs alone, each sent with a COMMIT of 39 bytes and the checksum.
                    inner, at = 0, off + 35
                    while at < off + size - 4:
                        (inner_size,) = struct.unpack_from("<I", blob, at + 9)
                        inner, at = inner + 1, at + inner_size
                    crc = off + size - at
                    commits = inner if kind == 0x101 else 0
                    self.events[key] += inner + commits + length - 1
                    self.bytes[key] += (at - off - 35) + length * (35 + crc) + commits * (39 + crc) - size
            if type_code == HEARTBEAT_LOG_EVENT:
                self.heartbeats[key] += 1
                self.heartbeat_bytes[key] += size
            off += size
        assert off == len(blob)


@pytest.fixture(scope="session")
def capture_batches():
    """A context manager factory: patches Slave._batch to record raw batches while active."""
    import contextlib

    @contextlib.contextmanager
    def active():
        capture = BatchCapture()
        original = slave_client.Slave._batch

        def recording(self, batch):
            capture.record((self.config.hostname, self.config.skip_policy), batch.events)
            return original(self, batch)

        slave_client.Slave._batch = recording
        try:
            yield capture
        finally:
            slave_client.Slave._batch = original

    return active


@pytest.fixture(scope="session")
def default_run(tmp_path_factory, capture_batches):
    """(SimulationResult, BatchCapture, work dir) of the built-in topology with --verify."""
    work = tmp_path_factory.mktemp("simulate-default")
    with capture_batches() as capture:
        result = run_simulation(load_default_topology(), work / "out", verify=True, progress=False,
                                keep_work=work / "work")
    return result, capture, work
