"""The core's per-stream tallies a master's streams hand their counting to (`_core.class_sums`,
`_core.mark_slow`), held to their definitions on arbitrary input."""

from __future__ import annotations

import struct

from hypothesis import given, strategies as st

from dumpfilter import _core
from dumpfilter.codec.scanner import ROW_SLOW

_COUNTS = st.lists(st.tuples(st.integers(0, 2**32 - 1), st.integers(0, 255)), max_size=300)


@given(_COUNTS)
def test_class_sums_are_each_classes_counts_summed(keys):
    counts = bytearray(b"".join(struct.pack("<I", c) for c, _ in keys))
    classes = bytes(k for _, k in keys)
    want: dict[int, int] = {}
    for count, klass in keys:
        want[klass] = want.get(klass, 0) + count
    assert _core.class_sums(counts, classes) == {k: v for k, v in want.items() if v}


@given(st.binary(max_size=64).map(lambda b: bytes(x % 4 for x in b)), st.lists(st.integers(0, 80), max_size=40),
       st.integers(0, 2))
def test_mark_slow_sets_the_slow_units_it_is_given(row, units, code):
    got = bytearray(row)
    rest = _core.mark_slow(got, b"".join(struct.pack("<I", k) for k in units), code)
    want, set_ = bytearray(row), []
    for k in units:
        if k < len(want) and want[k] == ROW_SLOW:
            want[k] = code
            set_.append(k)
    assert got == want
    assert rest is None if len(set_) == len(units) else list(memoryview(rest).cast("I")) == set_
