"""`_core.KeyIndex` (issue #80 goal 4): statement keys numbered by their bytes across buffers, so
that a count meets each key once per process, not once per segment (rules.keep_table.KeyShapes,
spark_jobs' keyed_tables). Held to a dict numbering of the same keys, over real statement keys
of generated MIXED binlogs cut into buffers at random places."""

from __future__ import annotations

from hypothesis import given, settings, strategies as st

from dumpfilter import _core
from dumpfilter.codec.scanner import Scanner, UnitList
from dumpfilter.workload.generator import WorkloadSpec, generate

_TWINS = {_core.KIND_INSERT, _core.KIND_REPLACE, _core.KIND_DELETE}


def _keys(tmp_path, seed: int, buffers: int) -> list[list[_core.StatementKey]]:
    """The statement keys of `buffers` scans of one MIXED binlog (each buffer its own key ids)."""
    spec = WorkloadSpec(seed=seed, transactions=600, rows_per_statement=1, statements_per_transaction=2,
                        ddl_share=0.0, cross_db_share=0.3, binlog_format="mixed")
    data = generate(spec, tmp_path)[0].read_bytes()
    out = []
    for _ in range(buffers):
        units = UnitList()
        Scanner("<test>").scan_into(units, data, 4, 0, "bin.000001", at_eof=True)
        out.append(units.statement_units([(13, 4, 0)]).keys)
    return out


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 1000), twins=st.booleans(), cuts=st.lists(st.integers(0, 400), max_size=4))
def test_numbers_are_the_first_met_order_across_calls(tmp_path_factory, seed, twins, cuts):
    lists = _keys(tmp_path_factory.mktemp("k"), seed, 2)
    keys = lists[0] + lists[1][::-1]
    calls = [keys[a:b] for a, b in zip([0, *sorted(cuts)], [*sorted(cuts), len(keys)])]
    index, numbers = _core.KeyIndex(twins=twins), {}
    for call in calls:
        got = index.number(call)
        want, new = [], []
        for at, key in enumerate(call):
            b = key.key
            if twins and b[0] in _TWINS:
                b = bytes([_core.KIND_UPDATE]) + b[1:]
            if b not in numbers:
                numbers[b] = len(numbers)
                new.append(at)
            want.append(numbers[b])
        assert list(memoryview(got.numbers).cast("I")) == want
        assert got.new == new and len(index) == len(numbers)
    assert len(numbers) > 1
    index.clear()
    assert len(index) == 0 and index.number(keys[:1]).numbers == bytes(4)
