"""A binlog purged while a slave lags (PURGE BINARY LOGS: files leave the index and the disk).
Files before the slave's position going away change nothing: it resumes with nothing lost or
duplicated. Its own file going away is MySQL's error 1236: the slave stops at once, with one
line naming the purged file, and is not retried."""

from __future__ import annotations

import json

import pytest

from dumpfilter.errors import PositionError
from dumpfilter.binlogs import read_index, write_index
from tests.support.dump_helpers import relay_units, run_slave
from tests.support import SimulatedCrash

pytestmark = [pytest.mark.grpc, pytest.mark.timeout(120)]

# Small batches: the lagging slave's crash after 1500 units comes after several committed batches,
# the last of them past the first file.
_BATCH = 256 << 10


def _purge_to(binlog_dir, keep_from: str) -> list[str]:
    """PURGE BINARY LOGS TO keep_from: the files before it leave the index, then the disk."""
    index = binlog_dir / "master-bin.index"
    names = [p.name for p in read_index(index)]
    gone = names[: names.index(keep_from)]
    write_index(index, names[names.index(keep_from):])
    for name in gone:
        (binlog_dir / name).unlink()
    return gone


def _lagging_slave(address, relay, server_id, units):
    def crash(written):
        if written >= units:
            raise SimulatedCrash
    with pytest.raises(SimulatedCrash):
        run_slave(address, relay, server_id, after_unit=crash)


def test_purge_of_files_before_a_lagging_slave_loses_nothing(binlog_copy, master_factory, tmp_path):
    _, address = master_factory(binlog_copy, batch_bytes=_BATCH)
    run_slave(address, tmp_path / "clean", 51)
    relay = tmp_path / "lagging"
    _lagging_slave(address, relay, 52, 1500)
    at = json.loads((relay / "relay-log.info").read_text())["master_file"]
    assert at != "master-bin.000001"
    gone = _purge_to(binlog_copy, at)
    assert gone
    run_slave(address, relay, 52)
    assert relay_units(relay) == relay_units(tmp_path / "clean")


def test_purge_of_a_lagging_slaves_own_file_is_error_1236(binlog_copy, master_factory, tmp_path):
    _, address = master_factory(binlog_copy, batch_bytes=_BATCH)
    relay = tmp_path / "lagging"
    _lagging_slave(address, relay, 53, 1500)
    at = json.loads((relay / "relay-log.info").read_text())["master_file"]
    names = [p.name for p in read_index(binlog_copy / "master-bin.index")]
    _purge_to(binlog_copy, names[names.index(at) + 1])
    told = []
    with pytest.raises(PositionError, match=rf"\(1236\).*{at}"):
        run_slave(address, relay, 53, report=told.append)
    assert told == []  # final: not retried
    info = json.loads((relay / "relay-log.info").read_text())
    assert "1236" in info["last_error"] and at in info["last_error"]
