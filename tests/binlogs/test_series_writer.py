"""The one binlog series writer (dumpfilter.binlogs.BinlogSeriesWriter): units given as Events and
units given as raw bytes make the same files, in any mix, across rotations."""

from __future__ import annotations

import pytest

from dumpfilter.binlogs import FILE_FRAMING_TYPES, BinlogSeriesWriter, binlog_paths
from dumpfilter.binlogs.series import encode_unit
from dumpfilter.codec import EventType, group_transactions, read_events
from dumpfilter.workload import WorkloadSpec, generate
from tests.spark_jobs.helpers import same_tree


@pytest.fixture(scope="module", params=["mariadb", "mysql"])
def source(request, tmp_path_factory):
    """(fde, start_state, units) of a seeded workload of several files."""
    directory = tmp_path_factory.mktemp(request.param)
    generate(WorkloadSpec(seed=5, schemas=2, transactions=150, flavor=request.param, binlog_format="mixed",
                          max_binlog_size=8_000), directory)
    events = [e for path in binlog_paths(directory) for e in read_events(path.read_bytes())]
    state = next(e for e in events if e.type_code in (EventType.PREVIOUS_GTIDS, EventType.MARIADB_GTID_LIST))
    units = [u.events for u in group_transactions(events) if u.events[0].type_code not in FILE_FRAMING_TYPES]
    return events[0], state, units


def test_raw_and_event_units_mix_into_the_same_files(source, tmp_path):
    fde, state, units = source
    with BinlogSeriesWriter(tmp_path / "events", "x-bin", fde, max_size=3_000, start_state=state) as ref:
        for unit in units:
            ref.write_transaction(unit)
    with BinlogSeriesWriter(tmp_path / "mixed", "x-bin", fde, max_size=3_000, start_state=state) as mixed:
        i = 0
        while i < len(units):
            if i % 3 == 0:
                mixed.write_transaction(units[i])
                i += 1
                continue
            buf, ends = bytearray(), []
            for unit in units[i : i + 4]:  # a block of raw units, rotating inside it
                buf += encode_unit(unit)
                ends.append(len(buf))
            mixed.write_run(buf, ends)
            i += 4
    assert len(ref.names) > 3
    same_tree(tmp_path / "events", tmp_path / "mixed")


def test_the_raw_path_only_renumbers(source, tmp_path):
    fde, _, units = source
    series = BinlogSeriesWriter(tmp_path, "x-bin", fde, renumber_positions=False)
    data = encode_unit(units[0])
    with pytest.raises(ValueError):
        series.write_run(bytearray(data), [len(data)])
