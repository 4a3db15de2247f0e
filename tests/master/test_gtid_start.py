"""A dump that starts from a slave's GTID state begins in the newest binlog file whose
Previous_GTIDs / Gtid_list the slave already has (not at the first file), sends every
transaction the slave lacks exactly once, and fails with MySQL's error 1236 (OUT_OF_RANGE) when
the files holding GTIDs it lacks were purged. MySQL GTID sets are parsed as intervals."""

from __future__ import annotations

import io
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dumpfilter.codec import BinlogReader, EventType
from dumpfilter.errors import PositionError
from dumpfilter.codec.gtid import MysqlGtidSet
from dumpfilter.binlogs import binlog_paths, write_index
from dumpfilter.binlogs.gtid_start import GtidState, file_gtid_list, start_file
from dumpfilter.workload.generator import WorkloadSpec, generate
from dumpfilter.master.model import Registration
from dumpfilter.master.service import DumpService
from tests.support.dump_helpers import split_events

UUID = "3e11fa47-71ca-11e1-9e33-c80aa9429562"


@pytest.fixture(scope="module", params=["mariadb", "mysql"])
def series(request, tmp_path_factory) -> tuple[Path, list[tuple[str, str]]]:
    """A multi-file ROW series and its GTIDs in order, each with the file that holds it."""
    directory = tmp_path_factory.mktemp(f"gtid-{request.param}")
    generate(WorkloadSpec(seed=5, schemas=3, transactions=400, flavor=request.param, max_binlog_size=20_000),
             directory)
    gtids = []
    for path in binlog_paths(directory):
        for event in BinlogReader(io.BytesIO(path.read_bytes()), path.name):
            if event.type_code in (EventType.GTID, EventType.MARIADB_GTID):
                gtids.append((event.gtid, path.name))
    assert len(binlog_paths(directory)) >= 5
    return directory, gtids


def _state(gtids: list[tuple[str, str]], k: int) -> str:
    """The GTID state of a slave that has applied the first k transactions."""
    first = gtids[0][0]
    if ":" in first:  # MySQL uuid:gno, one source in the workload
        source = first.rsplit(":", 1)[0]
        return f"{source}:1-{k}" if k else ""
    domain, server, _ = first.split("-")
    return f"{domain}-{server}-{gtids[k - 1][0].split('-')[2]}" if k else ""


def _sent_gtids(directory: Path, state: str) -> list[str]:
    svc = DumpService(directory)
    svc.register(Registration(server_id=9))
    sent, fmt = [], None
    for batch in svc.stream(9, gtid_state=state):
        events, fmt = split_events(batch.events, fmt)
        for event in events:
            if event.type_code in (EventType.GTID, EventType.MARIADB_GTID):
                sent.append(event.gtid)
        if batch.caught_up:
            return sent
    return sent


@pytest.mark.parametrize("fraction", [0.01, 0.3, 0.55, 0.9, 1.0])
def test_start_file_is_the_newest_file_the_slave_has_before(series, fraction):
    directory, gtids = series
    paths = binlog_paths(directory)
    k = max(1, int(len(gtids) * fraction))
    state = GtidState.parse(_state(gtids, k))
    chosen = start_file(paths, state)
    names = [p.name for p in paths]
    # Everything the slave lacks is in the chosen file or later ...
    assert all(names.index(file) >= names.index(chosen.name) for _, file in gtids[k:])
    # ... and the next file would be too late: it starts after a GTID the slave lacks.
    later = names.index(chosen.name) + 1
    if later < len(names) and k < len(gtids):
        assert not state.covers(file_gtid_list(paths[later]))
    if k >= len(gtids) // 2:
        assert chosen != paths[0]


@pytest.mark.parametrize("fraction", [0.0, 0.4, 0.8, 1.0])
def test_gtid_start_sends_exactly_what_the_slave_lacks(series, fraction):
    directory, gtids = series
    k = int(len(gtids) * fraction)
    sent = _sent_gtids(directory, _state(gtids, k))
    assert sent == [g for g, _ in gtids[k:]]


def test_purged_files_holding_missing_gtids_are_out_of_range(series, tmp_path):
    directory, gtids = series
    paths = binlog_paths(directory)
    kept = tmp_path / "purged"
    kept.mkdir()
    for path in paths[2:]:
        (kept / path.name).write_bytes(path.read_bytes())
    write_index(kept / "master-bin.index", [p.name for p in paths[2:]])
    early = _state(gtids, 1)  # the slave lacks transactions of the purged files
    with pytest.raises(PositionError, match="purged"):
        start_file(binlog_paths(kept), GtidState.parse(early))
    with pytest.raises(PositionError, match="purged"):
        _sent_gtids(kept, early)
    # A slave that has everything before the oldest remaining file starts there.
    in_third = [i for i, (_, f) in enumerate(gtids) if f == paths[2].name][0]
    assert start_file(binlog_paths(kept), GtidState.parse(_state(gtids, in_third))) == kept / paths[2].name


def test_mysql_gtid_set_text_is_parsed_as_intervals():
    started = time.thread_time()  # this thread's CPU time: a loaded machine does not stretch it
    big = MysqlGtidSet.parse(f"{UUID.upper()}:1-1000000000:1000000005, {UUID[:-1]}0:7\n")
    assert time.thread_time() - started < 5  # a billion gnos are never expanded one by one (minutes)
    assert big.intervals[(UUID, "")] == [[1, 1000000001], [1000000005, 1000000006]]
    assert (UUID, "", 999_999_999) in big and (UUID, "", 1000000002) not in big
    tagged = MysqlGtidSet.parse(f"{UUID}:1-5:Tag_a:1-3:7")
    assert tagged.intervals == {(UUID, ""): [[1, 6]], (UUID, "tag_a"): [[1, 4], [7, 8]]}
    assert MysqlGtidSet.parse(f"{UUID}:2-3").issubset(tagged) and not MysqlGtidSet.parse(f"{UUID}:6").issubset(tagged)
    for bad in ("not-a-uuid:1-3", f"{UUID}:1-x", f"{UUID}:-3"):
        with pytest.raises(ValueError):
            MysqlGtidSet.parse(bad)
    with pytest.raises(PositionError, match="GTID state"):
        GtidState.parse(f"{UUID}:1-x")


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["", "tag_a", "b"]), st.integers(1, 10**12), st.integers(0, 10**6)),
                min_size=1, max_size=12))
def test_mysql_gtid_set_text_round_trips(spans):
    gtid_set = MysqlGtidSet()
    for tag, start, length in spans:
        gtid_set.add_interval(UUID, start, start + length + 1, tag)
    assert MysqlGtidSet.parse(str(gtid_set)).intervals == gtid_set.intervals
    assert gtid_set.issubset(MysqlGtidSet.parse(str(gtid_set)))
