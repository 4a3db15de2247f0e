"""The filter's fast path on single units placed where their output lands at their own input
offset (nothing dropped before them): the fast path writes what the reference path writes, and
every log_pos is the event's end offset in the output."""

from __future__ import annotations

import struct
import tempfile
from pathlib import Path

import pytest

from dumpfilter.codec import EventType
from dumpfilter._core import renumber
from dumpfilter.workload import WorkloadSpec, generate
from tests.support.filtering import assert_positions, run

RULES = [("replicate-do-db", "db3")]


def units_of(flavor: str) -> tuple[bytes, list[bytes]]:
    """(the file's events before its first GTID, each GTID-started unit's bytes)."""
    spec = WorkloadSpec(seed=7, schemas=4, tables_per_schema=3, transactions=60, binlog_format="row",
                        flavor=flavor, ddl_share=0.1, cross_db_share=0.5, statements_per_transaction=3)
    with tempfile.TemporaryDirectory() as tmp:
        [path] = generate(spec, tmp, "u-bin")
        data = Path(path).read_bytes()
    gtids = {int(EventType.MARIADB_GTID), int(EventType.GTID), int(EventType.ANONYMOUS_GTID)}
    starts, off = [], 4
    while off < len(data):
        if data[off + 4] in gtids:
            starts.append(off)
        off += struct.unpack_from("<I", data, off + 9)[0]
    return data[: starts[0]], [data[a:b] for a, b in zip(starts, starts[1:] + [len(data)])]


@pytest.mark.parametrize("flavor", ["mariadb", "mysql"])
@pytest.mark.parametrize("empty", ["keep", "drop"])
def test_each_unit_first_fast_equals_reference(flavor, empty):
    head, units = units_of(flavor)
    outcomes = set()
    for unit in units:
        buf = bytearray(unit)
        renumber(buf, 0, len(buf), len(head), True)
        data = head + bytes(buf)
        fast, fstats, _ = run(data, RULES, flavor=flavor, empty=empty)
        slow, sstats, _ = run(data, RULES, flavor=flavor, empty=empty, fast=False)
        assert fast == slow
        assert fstats.as_dict() == sstats.as_dict()
        assert_positions(fast)
        outcomes.update(k for k in ("kept", "partial", "emptied", "skipped") if getattr(fstats, k))
    assert {"kept", "partial"} <= outcomes
