"""A stream's MySQL GTIDs read by the core as runs (`UnitList.mysql_gtids`, master.read.columns
`_MysqlRuns`): the GTID state a stream reports and what a start by GTID set skips, over MySQL
binlogs whose GTIDs interleave two sources, skip gnos, go back, and include a tagged GTID (the
one form decoded in Python). The reference is the codec's reading of the file's own GTID events
(`Event.gtid_info`), event by event, and the real MySQL 9.6 file with a tagged GTID."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dumpfilter.binlogs import TailingReader
from dumpfilter.codec import EventType, group_transactions
from dumpfilter.codec import encode as enc
from dumpfilter.codec.gtid import MysqlGtidSet
from dumpfilter.master.model import ChannelSpec, Registration
from dumpfilter.master.service import DumpService
from dumpfilter.rules.ruleset import RuleSet
from tests.support.filtering import Synth

SOURCES = ("6ba0ff1e-4d0b-11ef-9f4b-0242ac110002", "0b6c7ad0-aaaa-11ef-8000-00000000beef")
REAL = Path(__file__).resolve().parents[3] / "shared" / "fixtures" / "real_binlogs"


class _Gtids(Synth):
    """A MySQL binlog whose transactions carry the given (source, gno) GTIDs."""

    def __init__(self, gtids: list[tuple[int, int]]):
        super().__init__("mysql")
        self._next = iter(gtids)

    def gtid(self):
        self.seq += 1
        source, gno = next(self._next)
        return self.ev(EventType.GTID, enc.mysql_gtid_body(SOURCES[source], gno, transaction_length=1))


def _binlog(tmp_path: Path, gtids: list[tuple[int, int]]) -> Path:
    synth = _Gtids(gtids)
    for k in range(len(gtids)):
        synth.rows_txn([[(k % 3 + 1, f"db{k % 3 + 1}", "t")]])
    directory = tmp_path / f"binlog-{len(list(tmp_path.iterdir()))}"
    directory.mkdir()
    (directory / "master-bin.000001").write_bytes(synth.bytes())
    return directory


def _file_gtids(directory: Path) -> list[tuple[str, str, int]]:
    """The GTIDs of the file's complete transactions, as the codec reads each GTID event."""
    events = (e for _, e in TailingReader(directory))
    out = []
    for unit in group_transactions(events):
        info = unit.gtid_event.gtid_info if unit.gtid_event is not None else None
        if unit.complete and info is not None and not info.anonymous and info.source:
            out.append((info.source, info.tag, info.gno))
    return out


def _stream(directory: Path, gtid_state: str | None = None, rules: RuleSet | None = None) -> tuple[str, int]:
    """One stream to caught-up: its last GTID state and how many transactions it kept."""
    svc = DumpService(directory)
    svc.register(Registration(server_id=7, filters=(ChannelSpec(None, rules or RuleSet()),)))
    state = ""
    for batch in svc.stream(7, gtid_state=gtid_state):
        state = batch.gtid_state or state
        if batch.caught_up:
            break
    return state, svc.slaves[7].stats.transactions_kept


def _set(gtids) -> MysqlGtidSet:
    out = MysqlGtidSet()
    for source, tag, gno in gtids:
        out.add(source, gno, tag)
    return out


_GTID_LISTS = st.lists(st.tuples(st.integers(0, 1), st.integers(1, 40)), min_size=1, max_size=60)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(gtids=_GTID_LISTS)
def test_the_state_a_stream_reports_is_every_gtid_of_the_file(tmp_path, gtids):
    directory = _binlog(tmp_path, gtids)
    want = _set(_file_gtids(directory))
    assert len(_file_gtids(directory)) == len(gtids)
    for rules in (RuleSet(), RuleSet(do_db=("db2",))):  # kept whole, and mostly skipped
        state, _ = _stream(directory, rules=rules)
        assert MysqlGtidSet.parse(state) == want if state else not want.intervals


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(gtids=_GTID_LISTS, data=st.data())
def test_a_start_by_gtid_set_skips_exactly_what_it_holds(tmp_path, gtids, data):
    directory = _binlog(tmp_path, gtids)
    found = _file_gtids(directory)
    held = data.draw(st.lists(st.sampled_from(found), max_size=len(found)))
    start = _set(held)
    _, kept = _stream(directory, gtid_state=str(start) or None)
    assert kept == sum(1 for g in found if g not in start)


def test_a_tagged_gtid_is_read_beside_the_runs(tmp_path):
    """MySQL 9.6's tagged GTID (type 42), written by a real server, is in the state the stream
    reports, decoded by the codec, not the run reader."""
    fixture = REAL / "blackbeam-rust_mysql_common" / "binlog_transaction_with_GTID_TAG.000001"
    if not fixture.exists():
        pytest.skip(f"the real binlog fixtures are not beside the checkout ({fixture})")
    directory = tmp_path / "tagged"
    directory.mkdir()
    shutil.copy(fixture, directory / "binlog.000001")
    tagged = [g for g in _file_gtids(directory) if g[1]]
    assert tagged, "the fixture holds a tagged GTID"
    state, _ = _stream(directory)
    for source, tag, gno in tagged:
        assert (source, tag, gno) in MysqlGtidSet.parse(state)
