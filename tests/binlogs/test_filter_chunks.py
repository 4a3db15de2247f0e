"""The filter reads a file a chunk at a time (a plain file read again from where the scan stopped,
a compressed one joined): whatever the chunk size, even smaller than one unit, the output and the
statistics are those of one read of the whole file, and a truncated file is reported at its offset."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from dumpfilter.binlogs import filtering
from dumpfilter.binlogs.sinks import FileSink
from dumpfilter.binlogs.filtering import filter_files
from dumpfilter.errors import TruncatedBinlogError
from dumpfilter.rules.transaction_filter import TransactionFilter
from dumpfilter.workload import WorkloadSpec, generate
from tests.support.filtering import engine


def _filter(path: Path, out: Path) -> tuple[bytes, dict]:
    tfilter = TransactionFilter(engine([("replicate-do-db", "db2")], flavor="mariadb"))
    stats = filter_files([path], tfilter, FileSink(out))
    return out.read_bytes(), stats.as_dict()


@pytest.fixture(scope="module")
def binlog(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("chunks")
    generate(WorkloadSpec(seed=9, schemas=4, transactions=300, ddl_share=0.1, cross_db_share=0.3,
                          statements_per_transaction=4), d)
    [path] = sorted(d.glob("*-bin.0*"))
    return path


@pytest.mark.parametrize("chunk", [37, 300, 4096, 65536])
def test_any_chunk_size_gives_one_read_of_the_file(binlog, tmp_path, monkeypatch, chunk):
    whole = _filter(binlog, tmp_path / "whole.bin")
    compressed = tmp_path / "in.gz"
    compressed.write_bytes(gzip.compress(binlog.read_bytes()))
    monkeypatch.setattr(filtering, "FAST_CHUNK", chunk)
    assert _filter(binlog, tmp_path / "plain.bin") == whole
    assert _filter(compressed, tmp_path / "gz.bin") == whole


def test_a_truncated_file_is_reported_at_its_offset(binlog, tmp_path, monkeypatch):
    data = binlog.read_bytes()
    cut = tmp_path / "cut.bin"
    cut.write_bytes(data[: len(data) - 10])
    monkeypatch.setattr(filtering, "FAST_CHUNK", 512)
    with pytest.raises(TruncatedBinlogError) as err:
        _filter(cut, tmp_path / "out.bin")
    assert err.value.offset is not None and 4 < err.value.offset < len(data) - 10
