"""The master policy's annotation check reads a segment's Annotate_rows texts straight from its
columns (policy_check's reader: the unit's record and its part's buffer, no Unit made), and reads
exactly what the per-Unit reading (`annotations`) reads: every text's shape with the Table_maps
after it, over ROW and MIXED MariaDB workloads with cross-database transactions and several
binlog files."""

from __future__ import annotations

import pytest

from dumpfilter.codec.constants import HEADER_LEN
from dumpfilter.codec.scanner import F_FAST
from dumpfilter.master.decide import policy_check
from dumpfilter.master.decide.policy_check import _ANNOTATIONS, _ROWS_QUERY, _SIZE, _TABLE_MAP
from dumpfilter.rules.policy_bound import shape
from dumpfilter.master.service import DumpService
from dumpfilter.workload.generator import WorkloadSpec, generate


def unit_annotations(unit):
    """(text shape, the (db, table) of the Table_maps after it) of each annotation of a fast unit, read
    from a Unit: the reference policy_check's `_reader` is held to."""
    raw, tables = unit.raw, unit.tables
    if raw is None:
        return ()
    crc = unit.fmt.checksum_len if unit.fmt is not None else 0
    found: list[tuple[str, list[tuple[str, str]]]] = []
    at, t, end = 0, 0, len(raw)
    while at + HEADER_LEN <= end:
        kind = raw[at + 4]
        size: int = _SIZE.unpack_from(raw, at + 9)[0]
        if size < HEADER_LEN:
            break
        if kind in _ANNOTATIONS:
            body = HEADER_LEN + (kind == _ROWS_QUERY)  # Rows_query: a length byte the server ignores
            text = raw[at + body:at + size - crc].decode("utf-8", "surrogateescape")
            found.append((shape(text), []))
        elif kind == _TABLE_MAP:
            if found and t < len(tables):
                found[-1][1].append(tables[t])
            t += 1
        at += size
    return tuple((sql, tuple(maps)) for sql, maps in found)


@pytest.mark.parametrize("fmt", ["row", "mixed"])
def test_the_column_reader_reads_what_each_unit_holds(tmp_path, fmt):
    generate(WorkloadSpec(seed=7, transactions=400, binlog_format=fmt, flavor="mariadb", cross_db_share=0.4,
                          max_binlog_size=60_000), tmp_path)
    svc = DumpService(tmp_path, lint_bytes=0)
    pos = (svc.segments.first_file(), 4)
    read_units = texts = 0
    while True:
        seg = svc.segments.get(pos)
        if not seg.units:
            break
        read = policy_check._reader(seg.index)
        assert read is not None
        for k in range(len(seg.units)):
            if not seg.index.unit_list.unit(k).flags & F_FAST:  # the check reads fast units only
                continue
            expected = unit_annotations(seg.units[k])
            assert read(k) == expected, (seg.start, k)
            read_units += 1
            texts += len(expected)
        if seg.at_end and seg.end[0] == sorted(p.name for p in tmp_path.glob("master-bin.0*"))[-1]:
            break
        pos = seg.end
    assert read_units > 100 and texts > 100  # (MIXED: the row-logged units only)
