"""Chunk cuts found by the compiled walk (issue #40, goal 4: the driver makes no per-event pass):
`gtid_boundaries` cuts every real fixture binlog and generated workloads exactly where the Python
reference (every event walked by the codec's reader) cuts them, for several chunk sizes."""

from __future__ import annotations

from pathlib import Path

import pytest

from dumpfilter.binlogs import open_binlog
from dumpfilter.codec import BinlogReader
from dumpfilter.codec.constants import GTID_EVENT_TYPES
from dumpfilter.errors import BinlogError
from dumpfilter.spark_jobs.tasks import chunks
from dumpfilter.workload import WorkloadSpec, generate


def _reference_cuts(path: Path, chunk_bytes: int) -> list[int]:
    if path.suffix == ".gz" or path.stat().st_size <= chunk_bytes:
        return []
    cuts, next_cut = [], chunk_bytes
    with open_binlog(path) as stream:
        for event in BinlogReader(stream, str(path), verify_checksums=False):
            if event.pos >= next_cut and event.type_code in GTID_EVENT_TYPES:
                cuts.append(event.pos)
                next_cut = (event.pos // chunk_bytes + 1) * chunk_bytes
    return cuts


@pytest.mark.fixtures
def test_cuts_of_real_binlogs_are_the_reference_cuts(shared_fixtures):
    paths = sorted(p for p in shared_fixtures.rglob("*") if p.is_file() and not p.name.endswith(".md"))
    found = 0
    for path in paths:
        for chunk_bytes in (300, 4_096, 50_000):
            cuts = chunks.gtid_boundaries(path, chunk_bytes)
            assert cuts == _reference_cuts(path, chunk_bytes), (path.name, chunk_bytes)
            found += len(cuts)
    assert found > 0


@pytest.mark.parametrize("fmt,flavor", [("row", "mariadb"), ("mixed", "mysql"), ("statement", "mariadb")])
def test_cuts_of_generated_binlogs_are_the_reference_cuts(tmp_path, fmt, flavor):
    spec = WorkloadSpec(seed=5, schemas=2, tables_per_schema=2, transactions=500, binlog_format=fmt, flavor=flavor)
    for path in generate(spec, tmp_path, "master-bin"):
        for chunk_bytes in (1_000, 7_777, 40_000):
            cuts = chunks.gtid_boundaries(path, chunk_bytes)
            assert cuts and cuts == _reference_cuts(path, chunk_bytes)


def test_no_event_reaches_python_while_cutting(tmp_path, monkeypatch):
    """The walk is the core's: the codec's Python reader is never asked for an event."""
    spec = WorkloadSpec(seed=6, schemas=2, tables_per_schema=2, transactions=300, binlog_format="row")
    path = generate(spec, tmp_path, "master-bin")[0]
    monkeypatch.setattr(BinlogReader, "__init__", lambda *a, **k: (_ for _ in ()).throw(AssertionError("reader")))
    assert chunks.gtid_boundaries(path, 2_000)


def test_a_file_without_the_magic_is_one_line(tmp_path):
    bad = tmp_path / "master-bin.000001"
    bad.write_bytes(b"root:x:0:0" * 1000)
    with pytest.raises(BinlogError, match="master-bin.000001 at byte 0: bad magic"):
        chunks.gtid_boundaries(bad, 100)


def test_a_compressed_file_read_in_buffers_shorter_than_its_units_gives_every_unit(tmp_path, monkeypatch):
    """A gzipped binlog is read forward: after a unit longer than a buffer (read at twice the size),
    what a scan leaves may fill the next buffer alone; that is no end of the file (it was taken for
    one, and the unit it cut reported as running past the end)."""
    import gzip

    from dumpfilter.codec.scanner import Scanner

    spec = WorkloadSpec(seed=5, schemas=2, tables_per_schema=2, transactions=200, binlog_format="row",
                        rows_per_statement=8)
    plain = generate(spec, tmp_path, "master-bin")[0]
    path = tmp_path / (plain.name + ".gz")
    path.write_bytes(gzip.compress(plain.read_bytes()))

    def units(read_bytes: int) -> int:
        monkeypatch.setattr(chunks, "READ_BYTES", read_bytes)
        chunk = chunks.plan_chunks([path], None)[0]
        return sum(n for _fmt, _buf, _pos, _units, n, _crc in chunks.chunk_buffers(chunk, Scanner(chunk.path)))

    assert units(300) == units(1 << 20) > 200
