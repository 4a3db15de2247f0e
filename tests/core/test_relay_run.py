"""The slave's compiled relay run (core relay_run through Scanner.relay_run) against the
per-unit Python loop it replaced in slave.client.Slave._receive: from any unit index, the same
lone Heartbeats passed over, the same fast units kept whole copied as they came, and the same
stopping unit; on every real fixture binlog and on hypothesis-built binlogs, with Heartbeats
(as the master sends them for skipped stretches) put between their units, under every kind of
keep answer (kept, not kept, not known yet)."""

from __future__ import annotations

import gzip
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dumpfilter import _core
from dumpfilter.codec.constants import EventType
from dumpfilter.codec.scanner import Scanner
from tests.codec.test_properties import binlogs
from tests.core.test_scanner_differential import _written, fixture_files

HEARTBEATS = (int(EventType.HEARTBEAT), int(EventType.HEARTBEAT_V2))


def reference_run(buf: bytes, units, tables, keep: bytes, start: int):
    """The slave's former loop, unit by unit: (bytes, next, units, events, bytes, heartbeats)."""
    out, i, relayed, events, heartbeats = [], start, 0, 0, 0
    while i < len(units):
        rec = units[i]
        if rec.kind == "control" and rec.events == 1 and buf[rec.start + 4] in HEARTBEATS:
            heartbeats += 1
            i += 1
            continue
        ids = tables[rec.tables_lo : rec.tables_hi]
        if not rec.fast or not all(j < len(keep) and keep[j] == 1 for j in ids):
            break
        out.append(buf[rec.start : rec.end])
        relayed += 1
        events += rec.events
        i += 1
    data = b"".join(out)
    return data, i, relayed, events, len(data), heartbeats


def with_heartbeats(data: bytes, rng: random.Random, share: float) -> bytes:
    """A dump stream of the binlog file `data`: its units back to back (no magic), a Heartbeat
    (with a CRC when the FDE says so, a Heartbeat_v2 now and then) before a `share` of them."""
    scanner = Scanner("<test>")
    scan = scanner.units(data, 4, 0, at_eof=True)
    crc = scanner.checksum_len == 4
    parts = []
    for n, rec in enumerate(scan.units):
        if n > 0 and rng.random() < share:
            beat = bytearray(_core.heartbeat("master-bin.000001", rec.start, 1, crc))
            parts.append(bytes(beat))
        parts.append(data[rec.start : rec.end])
    return b"".join(parts)


def keeps(names: int, rng: random.Random) -> list[bytes]:
    """Keep arrays: all kept, none kept, a random mix of kept / not kept / not known (2), and one
    shorter than the names (the last ones not known yet)."""
    mixed = bytes(rng.choice((1, 1, 1, 0, 2)) for _ in range(names))
    return [b"\x01" * names, b"\x00" * names, mixed, b"\x01" * (names // 2)]


def assert_same_runs(stream: bytes, rng: random.Random) -> tuple[int, int]:
    """Every run over `stream` from 0, then from each unit after the one a run stopped at,
    equal to the reference; returns (units relayed, heartbeats) over the all-kept array."""
    scanner = Scanner("<test>")
    scan = scanner.units(stream, 0, 0, at_eof=True)
    units = list(scan.units)
    tables = list(scan.tables)
    totals = (0, 0)
    for n, keep in enumerate(keeps(len(scanner.names), rng)):
        i = 0
        relayed = heartbeats = 0
        while i < len(units):
            got = scanner.relay_run(stream, i, keep)
            want = reference_run(stream, units, tables, keep, i)
            assert got == want, (i, got[1:], want[1:])
            relayed, heartbeats = relayed + got[2], heartbeats + got[5]
            i = got[1] + 1  # the unit the run stopped at goes to Python
        if n == 0:
            totals = (relayed, heartbeats)
    return totals


@pytest.mark.fixtures
def test_every_real_fixture_binlog(shared_fixtures):
    rng = random.Random(2387)
    relayed = heartbeats = 0
    for path in fixture_files(shared_fixtures):
        data = gzip.open(path).read() if path.suffix == ".gz" else path.read_bytes()
        for share in (0.0, 0.3):
            r, h = assert_same_runs(with_heartbeats(data, rng, share), rng)
            relayed, heartbeats = relayed + r, heartbeats + h
    assert relayed > 100 and heartbeats > 100  # the runs did relay and pass over something


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(binlogs(), st.integers(0, 2**32), st.sampled_from([0.0, 0.2, 0.9]))
def test_hypothesis_binlogs(spec, seed, share):
    rng = random.Random(seed)
    assert_same_runs(with_heartbeats(_written(spec), rng, share), rng)


def test_a_stream_of_only_heartbeats_and_kept_units_is_one_run():
    """The bench's shape (kept ROW transactions with Heartbeats between): one call relays it all."""
    from dumpfilter.workload.generator import WorkloadSpec, generate
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as tmp:
        (path,) = generate(WorkloadSpec(seed=3, transactions=300, ddl_share=0.0), Path(tmp))[:1]
        data = path.read_bytes()
    stream = with_heartbeats(data, random.Random(1), 0.5)
    scanner = Scanner("<test>")
    scan = scanner.units(stream, 0, 0, at_eof=True)
    first_fast = next(i for i, rec in enumerate(scan.units) if rec.fast)
    out, nxt, relayed, events, size, heartbeats = scanner.relay_run(stream, first_fast, b"\x01" * len(scanner.names))
    rest = list(scan.units)[nxt:]
    assert all(rec.kind == "control" for rec in rest)  # only the file's end (Rotate, Stop) is left
    assert relayed > 250 and heartbeats > 100 and size == len(out)
    assert out == b"".join(stream[r.start : r.end] for r in list(scan.units)[first_fast:nxt]
                           if not (r.kind == "control" and r.events == 1 and stream[r.start + 4] in HEARTBEATS))
