"""A walk's bytes as `UnitList.send` hands them over (`SentBytes`: its pieces of the binlog, not
copied yet) and `_core.join_parts`, which copies them once, straight into a Dump reply's wire
bytes or a replica's batch: what they hold is what `bytes()` of them fills, a join is `b"".join`'s,
and the binlog's mapping stays open while they are held."""

from __future__ import annotations

import mmap

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dumpfilter._core import KEEP_DROP, KEEP_KEEP, ROW_KEEP, SKIP_HEARTBEAT, SendConfig, SentBytes, UnitList, join_parts
from dumpfilter.codec.scanner import Scanner
from dumpfilter.workload.generator import WorkloadSpec, generate

_PART = st.one_of(st.binary(max_size=300), st.binary(max_size=300).map(memoryview),
                  st.binary(max_size=300).map(bytearray))


@given(head=st.binary(max_size=20), parts=st.lists(_PART, max_size=8), tail=st.binary(max_size=20))
def test_join_parts_is_a_bytes_join(head, parts, tail):
    assert join_parts(head, parts, tail) == head + b"".join(bytes(p) for p in parts) + tail


def test_a_part_that_is_not_bytes_is_refused():
    with pytest.raises(TypeError):
        join_parts(b"", [b"a", 7], b"")  # type: ignore[list-item]


def _walk(units: UnitList, keep: bytes) -> tuple[list[SentBytes], list[int]]:
    """Every run the walk sends under the heartbeat policy, keeping the tables `keep` keeps, and
    the units it kept whole."""
    row = units.rows_many([keep])[0]
    config = SendConfig(skip=SKIP_HEARTBEAT, partial_ok=False, server_id=1, heartbeat_crc=True)
    outs, at = [], 0
    while at < len(units):
        sent = units.send(row, keep, at, config, None)
        if sent.next == at:  # a unit the compiled walk leaves to Python
            at += 1
            continue
        outs.append(sent.out)
        at = sent.next
    return outs, [k for k in range(len(units)) if row[k] == ROW_KEEP]


def test_a_walks_bytes_are_its_kept_units_and_stay_readable_past_the_mapping(tmp_path):
    spec = WorkloadSpec(seed=7, transactions=600, rows_per_statement=1, statements_per_transaction=2,
                        ddl_share=0.0, cross_db_share=0.0, binlog_format="row")
    path = generate(spec, tmp_path)[0]
    data = path.read_bytes()
    with open(path, "rb") as f:
        mapped = mmap.mmap(f.fileno(), 0, mmap.MAP_SHARED, mmap.PROT_READ)
    view = memoryview(mapped)
    scanner = Scanner("<test>")
    units = UnitList()
    scanner.scan_into(units, view, 4, 0, path.name, at_eof=True)
    keep = bytes(KEEP_KEEP if k % 2 else KEEP_DROP for k in range(len(scanner.names)))
    outs, kept = _walk(units, keep)
    assert kept and len(kept) < len(units)  # some units kept whole, some skipped
    filled = [bytes(out) for out in outs]
    assert [len(out) for out in outs] == [len(b) for b in filled]
    # Every unit kept whole is sent as it is in the binlog, in order (heartbeats between them).
    sent, at = b"".join(filled), 0
    for k in kept:
        entry = units.unit(k)
        at = sent.find(data[entry.start:entry.end], at)
        assert at >= 0, f"unit {k} is not in what the walk sent"
    assert join_parts(b"head", [*outs, b"-", view[4:40]], b"tail") == b"head" + sent + b"-" + data[4:40] + b"tail"
    # The walk's bytes hold the mapping: it cannot be closed under them, and they read the binlog
    # once the UnitList and every other view are gone.
    del units, view
    with pytest.raises(BufferError):
        mapped.close()
    assert join_parts(b"", outs, b"") == sent
    del outs
    mapped.close()
