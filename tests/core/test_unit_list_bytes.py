"""What a master keeps of a segment by its scan (`_core.held_bytes`, which the kept budget counts:
master.read.segments INDEX_BYTES) is what the UnitList allocates, and a unit of small transactions
costs at most 64 bytes of it (its record 32 bytes, its Table_map bounds 8, each of its two Table_maps'
name id and bytes 8, and a time run 8 where every unit's time is new, as the generator's are; a
server's change once a second): the lists of 2.1 million units of the bench matrix's
small-transaction binlog fit the budget with room."""

from __future__ import annotations

import ctypes
import ctypes.util
import gc

import pytest

from dumpfilter._core import held_bytes
from dumpfilter.codec.scanner import Scanner, UnitList
from dumpfilter.workload.generator import WorkloadSpec, generate


class _Mallinfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in
                ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks",
                 "keepcost")]


def _allocated() -> int:
    """The bytes malloc has handed out and not had back (glibc's mallinfo2: the main arena, where
    a scan on the calling thread allocates, and the mmapped blocks)."""
    libc = ctypes.CDLL(ctypes.util.find_library("c"))
    libc.mallinfo2.restype = _Mallinfo2
    m = libc.mallinfo2()
    return int(m.uordblks + m.hblkhd)


@pytest.mark.parametrize("binlog_format", ["row", "mixed"])
def test_held_bytes_are_what_a_unit_list_allocates(tmp_path, binlog_format):
    spec = WorkloadSpec(seed=49, transactions=20_000, rows_per_statement=1, statements_per_transaction=2,
                        ddl_share=0.0, cross_db_share=0.0, binlog_format=binlog_format)
    data = generate(spec, tmp_path)[0].read_bytes()
    scanner = Scanner("<test>")
    gc.collect()
    before = _allocated()
    units = UnitList()
    scanner.scan_into(units, data, 4, 0, "bin.000001", at_eof=True)
    if binlog_format == "mixed":  # the statement units, read once for every stream (MariaDB: QUERY
        assert units.statement_units([(13, 4, 0)]).units > 10_000  # post-header 13, CRC32 4)
    grown = _allocated() - before
    held = held_bytes(units)
    assert len(units) > 20_000
    assert abs(grown - held) <= 0.1 * held, (grown, held)
    if binlog_format == "row":
        assert held <= 64 * len(units), held / len(units)


def test_a_counts_skip_forms_are_held_bytes(tmp_path):
    """The skip forms a count makes stay with the list for its later counts (`count_many`) until
    `forget_forms`, and count in its held bytes: the master's kept segments hold them within their
    budget. They are what the count allocated, and a second count under the same policies makes none."""
    from dumpfilter._core import ROW_SKIP, SKIP_EMPTY, SKIP_PLACEHOLDER, CountJob, SendConfig

    spec = WorkloadSpec(seed=81, transactions=20_000, rows_per_statement=1, statements_per_transaction=2,
                        ddl_share=0.0, cross_db_share=0.0, binlog_format="row")
    data = generate(spec, tmp_path)[0].read_bytes()
    units = UnitList()
    Scanner("<test>").scan_into(units, data, 4, 0, "bin.000001", at_eof=True)
    row = bytes([ROW_SKIP]) * len(units)
    jobs = [CountJob(row, b"", SendConfig(skip=skip, partial_ok=False, server_id=0, heartbeat_crc=True))
            for skip in (SKIP_PLACEHOLDER, SKIP_EMPTY)]
    gc.collect()
    held, before = held_bytes(units), _allocated()
    first = units.count_many(jobs, [0], 0)
    grown, forms = _allocated() - before, held_bytes(units) - held
    assert forms >= 2 * 16 * len(units)  # (a sum of 16 bytes a unit and policy)
    assert abs(grown - forms) <= 0.1 * forms, (grown, forms)
    again = units.count_many(jobs, [0], 0)
    assert held_bytes(units) - held == forms
    assert [(r.read_by_bucket, r.sent_by_bucket) for r in again] == [(r.read_by_bucket, r.sent_by_bucket) for r in first]
    # Forgotten once its count is done (bandwidth._count_units): the list holds none, and a later
    # count makes them again, to the same counts.
    counted = held_bytes(units)
    units.forget_forms()
    assert counted - held_bytes(units) >= 2 * 16 * len(units)  # (the forms; the list's byte sums stay)
    made = units.count_many(jobs, [0], 0)
    assert held_bytes(units) == counted
    assert [(r.read_by_bucket, r.sent_by_bucket) for r in made] == [(r.read_by_bucket, r.sent_by_bucket) for r in first]
