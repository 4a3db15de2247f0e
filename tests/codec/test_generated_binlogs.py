"""The workload generator's binlogs (written through the codec's writer) are read by mariadb-binlog
and applied by a real MariaDB to exactly the rows the generator says it wrote."""

from __future__ import annotations

import subprocess

import pytest

from dumpfilter.codec import BinlogReader, EventType, group_transactions
from dumpfilter.workload import WorkloadSpec, generate
from dumpfilter.workload.generator import _Generator
from dumpfilter.lab.sandbox import snapshot
from tests.support.binlog_apply import apply_binlog
from dumpfilter.lab.sandbox.server import find_binary


@pytest.mark.parametrize("binlog_format", ["row", "statement", "mixed"])
@pytest.mark.parametrize("flavor", ["mariadb", "mysql"])
def test_generated_binlog_structure(tmp_path, binlog_format, flavor):
    spec = WorkloadSpec(seed=7, transactions=300, binlog_format=binlog_format, flavor=flavor, max_binlog_size=20_000)
    paths = generate(spec, tmp_path, "gen-bin")
    assert len(paths) > 1
    events = [e for p in paths for e in BinlogReader(open(p, "rb"), str(p))]
    units = [u for u in group_transactions(events) if u.gtid_event is not None]
    setup = spec.schemas * (1 + spec.tables_per_schema)
    assert len(units) == setup + spec.transactions
    assert all(u.complete for u in units)
    gtid_type = EventType.MARIADB_GTID if flavor == "mariadb" else EventType.GTID
    assert all(u.gtid_event.type_code == gtid_type for u in units)
    if flavor == "mysql":
        assert all(u.gtid_event.gtid_info.transaction_length == u.size for u in units)
    # Same seed, same bytes.
    again = generate(spec, tmp_path / "again", "gen-bin")
    assert [p.read_bytes() for p in again] == [p.read_bytes() for p in paths]


@pytest.mark.mariadb
@pytest.mark.parametrize("binlog_format", ["row", "statement", "mixed"])
@pytest.mark.parametrize("flavor", ["mariadb", "mysql"])
def test_mariadb_reads_and_applies_generated_binlogs(mariadb_factory, tmp_path, binlog_format, flavor):
    spec = WorkloadSpec(seed=11, transactions=200, binlog_format=binlog_format, flavor=flavor, max_binlog_size=30_000)
    paths = generate(spec, tmp_path, "gen-bin")
    proc = subprocess.run([find_binary("mariadb-binlog"), "--no-defaults", *map(str, paths)],
                          capture_output=True, text=True)
    assert proc.returncode == 0 and "ERROR" not in proc.stderr, proc.stderr
    server = mariadb_factory(f"gen-{binlog_format}-{flavor}", log_bin=False)
    ok, error = apply_binlog(server, paths)
    assert ok, error
    # The generator's own model of the data, replayed independently of the binlog bytes.
    model = _Generator(spec)
    for _ in model.units():
        pass
    snap = snapshot(server, schemas=spec.schema_names)
    for table in model.tables:
        got = snap.table(table.db, table.name)
        assert got.row_count == len(table.rows), table.name
        # snapshot rows are canonical strings
        assert sorted((int(r[0]), int(r[1])) for r in got.rows) == sorted(table.rows.items())
