"""The scanner over what a master streams under the placeholder policy: the same units whether
CRCs are checked a run at a time or one by one, and, for a slave's scanner (`holes`), a row unit
kept in part (its kept tables' events, placeholders for the rest) flagged F_HOLES with its
tables recorded, where a binlog's reader takes it as not fast. The streams are the master's
DumpService batches (no gRPC) of generated MySQL and MariaDB ROW binlogs whose transactions
write a kept and a dropped schema."""

from __future__ import annotations

import pytest

from dumpfilter.codec.scanner import F_FAST, Scanner
from dumpfilter.master.model import ChannelSpec, Registration
from dumpfilter.master.service import DumpService
from dumpfilter.rules.ruleset import RuleSet
from dumpfilter.workload.generator import WorkloadSpec, generate

F_HOLES = 4096  # core scan::F_HOLES (not exported: no Python reader acts on it)
F_PLACEHOLDERS = 2048


def _stream(binlog, runs: bool) -> bytes:
    svc = DumpService(binlog)
    svc.register(Registration(5, skip_policy="placeholder", filters=(ChannelSpec(None, RuleSet(do_db=("db1",))),)))
    blob = b""
    for batch in svc.stream(5, start=("", 4), placeholder_runs=runs):
        blob += batch.events
        if batch.caught_up:
            break
    return blob


def _scan(blob: bytes, batch_crc: bool, holes: bool):
    scanner = Scanner("<test>")
    scanner.core.batch_crc = batch_crc
    scanner.core.holes = holes
    scan = scanner.units(blob, 0, 0, at_eof=True)
    assert scan.error is None
    return [(u.start, u.end, u.events, u.kind, u.flags) for u in scan.units], scanner, scan


@pytest.mark.parametrize("flavor", ["mysql", "mariadb"])
@pytest.mark.parametrize("runs", [False, True])
def test_placeholder_streams_scan_alike_and_a_slave_sees_the_holes(tmp_path, flavor, runs):
    binlog = tmp_path / "binlog"
    generate(WorkloadSpec(seed=4, transactions=300, flavor=flavor, binlog_format="row", cross_db_share=0.4,
                          ddl_share=0.05, max_binlog_size=1 << 30), binlog)
    blob = _stream(binlog, runs)
    reader, _, _ = _scan(blob, True, False)
    # CRCs one by one (the way a run with a bad CRC is scanned again): the same units, flags too.
    assert _scan(blob, False, False)[0] == reader
    if flavor == "mariadb":
        assert any(f & F_PLACEHOLDERS for *_, f in reader)
    for batch_crc in (True, False):
        slave, scanner, scan = _scan(blob, batch_crc, True)
        assert [u[:4] for u in slave] == [u[:4] for u in reader]
        holed = 0
        for (*_, before), (*_, after), rec in zip(reader, slave, scan.units):
            assert before & ~(F_FAST | F_HOLES) == after & ~(F_FAST | F_HOLES)
            assert before & F_FAST == after & F_FAST
            assert not before & F_HOLES
            if after & F_HOLES:
                assert not after & F_FAST
                names = {scanner.names[i] for i in scan.tables[rec.tables_lo:rec.tables_hi]}
                # A unit kept in part: only the kept schema's tables are left in it.
                holed += bool(names)
                assert all(db == "db1" for db, _ in names), names
        assert holed > 10
