"""`UnitList.rows_many` answers every slave's units in one read, its fast units from its keep byte
per table name and its statement units from its keep byte per statement key: each slave's row is
the one its own bytes give, whatever the other slaves asked with it (up to 70: two words of the
core's lanes), read here unit by unit from the units' Table_maps and keyed statements."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from dumpfilter import _core
from dumpfilter.codec.scanner import KEEP_ASK, KEEP_DROP, KEEP_KEEP, ROW_KEEP, ROW_PARTIAL, ROW_SKIP, ROW_SLOW
from dumpfilter.codec.scanner import Scanner, UnitList
from dumpfilter.workload.generator import WorkloadSpec, generate


Segment = tuple[UnitList, int, list[list[int]], list[list[int] | None]]


@pytest.fixture(scope="module")
def segment(tmp_path_factory: pytest.TempPathFactory) -> Segment:
    return _segment(tmp_path_factory.mktemp("mixed"))


def _segment(directory: Path) -> Segment:
    """A generated MIXED binlog's units (row-logged and statement-logged), its names' count, and
    per unit its Table_maps' name ids and its keyed statements' key ids (None: not fast, no keys)."""
    spec = WorkloadSpec(seed=54, transactions=400, binlog_format="mixed", cross_db_share=0.3, ddl_share=0.02)
    data = generate(spec, directory)[0].read_bytes()
    scanner = Scanner("<test>")
    units = UnitList()
    scanner.scan_into(units, data, 4, 0, "bin.000001", at_eof=True)
    keys = units.statement_units([(13, 4, 0)]).keys
    pieces = _core.statement_pieces(units, len(units))
    bounds = memoryview(pieces.bounds).cast("I").tolist()
    key_ids = memoryview(pieces.keys).cast("I").tolist()
    tables = [units.tables(k) for k in range(len(units))]
    keyed = [key_ids[bounds[k]:bounds[k + 1]] or None for k in range(len(units))]
    return units, len(keys), tables, keyed


def _answer(answers: list[bool | None]) -> int:
    if None in answers:
        return ROW_SLOW
    return ROW_KEEP if all(answers) else ROW_PARTIAL if any(answers) else ROW_SKIP


def _row(units: UnitList, tables: list[list[int]], keyed: list[list[int] | None], keep: bytes,
         stmt_keep: bytes | None) -> list[int | None]:
    """One slave's answer per unit read one by one (None: a unit that is neither fast nor holds a
    keyed statement, a statement unit of framing only or not one at all, not checked)."""
    codes = {KEEP_KEEP: True, KEEP_DROP: False}
    out: list[int | None] = []
    for k in range(len(units)):
        if units.unit(k).flags & _core.F_FAST:
            out.append(_answer([(keep[i] != KEEP_DROP) if i < len(keep) else None for i in tables[k]]))
        elif keyed[k] is None:
            out.append(None)
        else:
            out.append(ROW_SLOW if stmt_keep is None else
                       _answer([codes.get(stmt_keep[i]) if i < len(stmt_keep) else None for i in keyed[k]]))
    return out


_BYTES = (KEEP_DROP, KEEP_KEEP, KEEP_KEEP, KEEP_ASK, 9)


@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_every_slave_is_answered_by_its_own_keep_bytes(segment: Segment, data: st.DataObject) -> None:
    units, keys, tables, keyed = segment
    assert any(t for t in tables) and sum(k is not None for k in keyed) > 100
    names = 1 + max(i for t in tables for i in t)
    # (each slave's bytes drawn from a seed Hypothesis draws: 70 slaves' bytes drawn one by one
    # are more than its inputs may hold)
    slaves, rnd = data.draw(st.integers(1, 70)), random.Random(data.draw(st.integers(0, 1 << 32)))

    def drawn(size: int) -> bytes:  # (a slave's bytes, the last ones possibly not given)
        return bytes(rnd.choice(_BYTES) for _ in range(size - rnd.randrange(3)))

    keeps = [drawn(names) for _ in range(slaves)]
    stmt_keeps = [None if rnd.randrange(8) == 0 else drawn(keys) for _ in range(slaves)]
    rows = units.rows_many(keeps, stmt_keeps)
    assert len(rows) == slaves
    for row, keep, stmt_keep in zip(rows, keeps, stmt_keeps):
        want = _row(units, tables, keyed, keep, stmt_keep)
        assert [None if w is None else code for code, w in zip(row, want)] == want
        assert units.rows_many([keep], [stmt_keep])[0] == row
