"""The dump service's fast path (one-pass SegmentReader with raw units, per-slave runs decided by
flag-word masks, raw partial units) gives exactly what the reference path gives: the same units
from the reader, and byte-identical batches and equal stats for every slave, whatever the
workload, rules, skip policy, segment and batch sizes. Units the fast path cannot decide on raw
bytes (a statement whose tables are partly kept, the placeholder policy on a partial unit) go
through TransactionFilter."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dumpfilter.codec import EventType, group_transactions, read_events
from dumpfilter.binlogs import TailingReader
from dumpfilter.workload.generator import FLAVORS, FORMATS, WorkloadSpec, generate
from dumpfilter.rules.ruleset import RuleSet
from dumpfilter.rules.transaction_filter import TransactionFilter
from dumpfilter.master.decide.flags import StatementWords
from dumpfilter.master.read.segments import SegmentCache
from tests.oracles.master import ReferenceSegmentCache, reference_service
from dumpfilter.master.model import ChannelSpec, Registration
from dumpfilter.master.service import DumpService
from dumpfilter.skip_policy import NAMES as SKIP_POLICIES
from tests.oracles.slave import reference_receive
import contextlib

SCHEMAS = [f"db{i}" for i in range(1, 5)]


def _files(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name[-1].isdigit())


def _segments(directory: Path, fast: bool, segment_bytes: int, made: list | None = None, **cache_options) -> list:
    """Every segment of `directory` from its first file, unit by unit, event by event (the
    cache used is appended to `made`)."""
    cache = (SegmentCache if fast else ReferenceSegmentCache)(directory, segment_bytes=segment_bytes,
                                                              cache_bytes=1 << 20, **cache_options)
    if made is not None:
        made.append(cache)
    pos, out = (_files(directory)[0], 4), []
    while True:
        seg = cache.get(pos)
        out.append(("segment", seg.start, seg.end, seg.at_end, str(seg.error)))
        for u in seg.units:
            out.append((u.file, u.end, u.size, u.txn.kind, u.txn.complete, [(e.pos, e.raw) for e in u.txn.events]))
        if seg.at_end or not seg.units:
            return out
        pos = seg.end


def _dump(directory: Path, regs: list[Registration], fast: bool, gtid_state: str | None = None, **kwargs) -> dict:
    svc = DumpService(directory, **kwargs) if fast else reference_service(directory, **kwargs)
    for reg in regs:
        svc.register(reg)
    out = {}
    for reg in regs:
        batches = []
        for b in svc.stream(reg.server_id, gtid_state=gtid_state):
            batches.append((b.events, b.position, b.transactions, b.skipped_bytes, b.caught_up, b.heartbeat,
                            b.gtid_state, b.filter_changed_at))
            if b.caught_up:
                break
        stats = svc.slaves[reg.server_id].stats
        rows, global_rows = svc.list_filters(reg.server_id)
        out[reg.server_id] = (batches, stats, [(r["FILTER_NAME"], r["COUNTER"]) for r in rows])
    return out


def _assert_same(directory: Path, regs: list[Registration], **kwargs) -> dict:
    slow = _dump(directory, regs, False, **kwargs)
    fast = _dump(directory, regs, True, **kwargs)
    assert slow, "nothing compared"
    for sid in slow:
        assert fast[sid][0] == slow[sid][0], f"server_id {sid}: batches differ"
        assert fast[sid][1] == slow[sid][1], f"server_id {sid}: stats differ"
        assert fast[sid][2] == slow[sid][2], f"server_id {sid}: P_S counters differ"
    return fast


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("flavor", FLAVORS)
def test_segment_reader_equals_reference_reader(tmp_path, fmt, flavor):
    generate(WorkloadSpec(seed=3, transactions=500, binlog_format=fmt, flavor=flavor, max_binlog_size=50_000,
                          cross_db_share=0.3), tmp_path)
    for segment_bytes in (2_000, 1 << 20):
        assert _segments(tmp_path, True, segment_bytes) == _segments(tmp_path, False, segment_bytes)


def test_segment_reader_on_a_file_being_written(tmp_path):
    """Cut anywhere (inside an event, inside a transaction), both readers stop at the same unit."""
    src = tmp_path / "src"
    generate(WorkloadSpec(seed=5, transactions=200), src)
    data = (src / "master-bin.000001").read_bytes()
    for cut in (4, 200, 1000, 5003, len(data) // 2 + 7, len(data) - 3):
        d = tmp_path / f"cut{cut}"
        d.mkdir()
        (d / "master-bin.000001").write_bytes(data[:cut])
        assert _segments(d, True, 3_000) == _segments(d, False, 3_000)


def _rules(draw) -> RuleSet:
    kind = draw(st.sampled_from(["do_db", "ignore_db", "wild_do_table", "wild_ignore_table", "do_table", "none"]))
    dbs = tuple(draw(st.lists(st.sampled_from(SCHEMAS), min_size=1, max_size=3, unique=True)))
    if kind == "do_db":
        return RuleSet(do_db=dbs)
    if kind == "ignore_db":
        return RuleSet(ignore_db=dbs)
    if kind == "wild_do_table":
        return RuleSet(wild_do_table=tuple(f"{db}.t{draw(st.sampled_from(['1', '2', '%']))}" for db in dbs))
    if kind == "wild_ignore_table":
        return RuleSet(wild_ignore_table=tuple(f"{db}.t{draw(st.sampled_from(['1', '%']))}" for db in dbs))
    if kind == "do_table":
        return RuleSet(do_table=tuple(f"{db}.t1" for db in dbs))
    return RuleSet()


@st.composite
def scenarios(draw):
    spec = WorkloadSpec(seed=draw(st.integers(0, 10_000)), schemas=len(SCHEMAS), tables_per_schema=2,
                        transactions=draw(st.integers(50, 400)), binlog_format=draw(st.sampled_from(FORMATS)),
                        flavor=draw(st.sampled_from(FLAVORS)), cross_db_share=draw(st.sampled_from([0.0, 0.3, 0.8])),
                        ddl_share=draw(st.sampled_from([0.0, 0.05])),
                        max_binlog_size=draw(st.sampled_from([20_000, 1 << 30])))
    regs = [Registration(server_id=sid, skip_policy=draw(st.sampled_from(SKIP_POLICIES)),
                         filters=(ChannelSpec(None, _rules(draw)),))
            for sid in range(1, draw(st.integers(1, 4)) + 1)]
    sizes = {"segment_bytes": draw(st.sampled_from([1_500, 20_000, 1 << 20])),
             "batch_bytes": draw(st.sampled_from([1, 3_000, 256 << 10]))}
    return spec, regs, sizes


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(scenarios())
def test_fast_dump_equals_reference_dump(tmp_path_factory, scenario):
    spec, regs, sizes = scenario
    directory = tmp_path_factory.mktemp("binlog")
    generate(spec, directory)
    _assert_same(directory, regs, **sizes)


@pytest.fixture(scope="module")
def row_workload(tmp_path_factory) -> Path:
    directory = tmp_path_factory.mktemp("row")
    generate(WorkloadSpec(seed=11, schemas=4, transactions=600, cross_db_share=0.5, max_binlog_size=40_000), directory)
    return directory


def _dump_until(directory: Path, regs: list[Registration], fast: bool, batches: int, **kwargs) -> dict:
    """Each slave's stream ended by its caller (the generator closed) after `batches` batches, none of
    them caught up: its stats and P_S counters then."""
    svc = DumpService(directory, **kwargs) if fast else reference_service(directory, **kwargs)
    for reg in regs:
        svc.register(reg)
    out = {}
    for reg in regs:
        stream = svc.stream(reg.server_id)
        for _ in range(batches):
            assert not next(stream).caught_up, "the test needs a stream ended before it caught up"
        stream.close()
        rows, _ = svc.list_filters(reg.server_id)
        out[reg.server_id] = (svc.slaves[reg.server_id].stats, [(r["FILTER_NAME"], r["COUNTER"]) for r in rows])
    return out


def test_a_stream_ended_early_has_counted_every_rule_hit(row_workload):
    """The fast path folds the Table_maps it ran into the slave's rule hits at most every
    HITS_EVERY seconds (and at the end of the binlog); a stream whose caller goes away before
    either has still counted every one, as the reference path counts them unit by unit."""
    regs = [Registration(server_id=1, filters=(ChannelSpec(None, RuleSet(do_db=("db1",))),)),
            Registration(server_id=2, filters=(ChannelSpec(None, RuleSet(wild_ignore_table=("db2.t%",))),))]
    slow = _dump_until(row_workload, regs, False, 5, batch_bytes=3_000)
    fast = _dump_until(row_workload, regs, True, 5, batch_bytes=3_000)
    for sid in (1, 2):
        assert sum(slow[sid][0].rule_hits.values()) > 0
        assert fast[sid] == slow[sid], f"server_id {sid}: stats or P_S counters differ"


def _count_filter_calls(monkeypatch) -> list:
    calls = []
    original = TransactionFilter.filter

    def spy(self, txn):
        calls.append(txn)
        return original(self, txn)

    monkeypatch.setattr(TransactionFilter, "filter", spy)
    return calls


def test_fast_path_decides_row_units_without_transaction_filter(row_workload, monkeypatch):
    """Kept, skipped and cross-db partial ROW units under the heartbeat policy never reach
    TransactionFilter (only DDL and control units do), and the result equals the reference."""
    regs = [Registration(server_id=1, filters=(ChannelSpec(None, RuleSet(do_db=("db1",))),)),
            Registration(server_id=2, filters=(ChannelSpec(None, RuleSet(ignore_db=("db2", "db3"))),))]
    fast = _assert_same(row_workload, regs)
    assert fast[1][1].transactions_partial > 0 and fast[1][1].transactions_kept > 0
    calls = _count_filter_calls(monkeypatch)
    lone = []
    original = StatementWords.answer
    monkeypatch.setattr(StatementWords, "answer", lambda self, sql, *a: lone.append(sql) or original(self, sql, *a))
    _dump(row_workload, regs, True)
    assert lone, "DDL units (a GTID and one statement) are answered by the statement flag words"
    assert all(any(e.type_code in (EventType.QUERY, EventType.FORMAT_DESCRIPTION, EventType.ROTATE,
                                   EventType.MARIADB_GTID_LIST, EventType.BINLOG_CHECKPOINT)
                   for e in txn.events) for txn in calls), "a pure ROW unit went through TransactionFilter"


def test_scanned_segments_are_sent_by_the_core_in_one_call_per_batch(row_workload, monkeypatch):
    """Segments read by the scanner carry the core's UnitList: every fast run, partial unit and
    heartbeat of a stream goes through UnitList.send (production has no other run loop), and the
    heartbeats it builds are the master's own (same bytes as the reference path's, which
    _assert_same checks)."""
    from dumpfilter.master.read.columns import UnitIndex

    svc = DumpService(row_workload)
    seg = svc.segments.get((sorted(p.name for p in row_workload.iterdir() if p.name[-1].isdigit())[0], 4))
    assert isinstance(seg.index, UnitIndex) and seg.index.unit_list is not None
    regs = [Registration(server_id=1, filters=(ChannelSpec(None, RuleSet(do_db=("db1",))),)),
            Registration(server_id=2, filters=(ChannelSpec(None, RuleSet(do_db=("db2",))),))]
    fast = _dump(row_workload, regs, True)
    for sid in (1, 2):
        stats = fast[sid][1]
        assert stats.heartbeats > 0 and stats.transactions_kept > 0 and stats.transactions_partial > 0


def test_statement_units_join_the_core_runs_under_the_heartbeat_policy(row_workload, monkeypatch):
    """DDL units kept whole or skipped go out in the core's runs (UnitList.send), decided once per rule
    group when the slave's row is made: the per-unit Python path (_unit) sees control units only."""
    from dumpfilter.master.stream.slave_stream import SlaveStream

    slow_units = []
    original = SlaveStream._unit

    def spy(self, unit):
        slow_units.append(unit)
        return original(self, unit)

    regs = [Registration(server_id=1, filters=(ChannelSpec(None, RuleSet(do_db=("db1",))),)),
            Registration(server_id=2, filters=(ChannelSpec(None, RuleSet(ignore_db=("db2",))),))]
    monkeypatch.setattr(SlaveStream, "_unit", spy)
    fast = _dump(row_workload, regs, True)
    assert not [u for u in slow_units if u.txn.kind != "control"], "a statement unit took the per-unit path"
    for sid in (1, 2):
        assert fast[sid][2] and any(counter for _, counter in fast[sid][2])  # DDL rule hits counted
    monkeypatch.undo()
    _assert_same(row_workload, regs)


def test_each_statement_is_parsed_once_whatever_the_number_of_rule_groups(row_workload, monkeypatch):
    from dumpfilter.rules import evaluate

    parsed = []
    original = evaluate.statement_tables

    def spy(sql, db):
        parsed.append((sql, db))
        return original(sql, db)

    monkeypatch.setattr(evaluate, "statement_tables", spy)
    regs = [Registration(server_id=i, filters=(ChannelSpec(None, RuleSet(do_db=(f"db{i}",))),)) for i in range(1, 5)]
    _dump(row_workload, regs, True, cache_bytes=1 << 30)
    assert parsed and len(parsed) == len(set(parsed)), "a statement was parsed again for another rule group"


@pytest.fixture(scope="module")
def mixed_mariadb_workload(tmp_path_factory) -> Path:
    """MariaDB MIXED: statement units by key (some with several statements), lone DDL, row units."""
    directory = tmp_path_factory.mktemp("mixed")
    generate(WorkloadSpec(seed=13, schemas=4, transactions=800, binlog_format="mixed", flavor="mariadb",
                          cross_db_share=0.4, ddl_share=0.05, max_binlog_size=40_000), directory)
    return directory


@pytest.mark.parametrize("policy", ["placeholder", "empty-transaction"])
@pytest.mark.parametrize("workload", ["row_workload", "mixed_mariadb_workload"])
def test_skipped_and_partial_units_under_every_policy_are_made_by_the_walk(request, monkeypatch, policy, workload):
    """The core's send walk makes what the placeholder and empty-transaction policies send of a
    MariaDB unit skipped or kept in part (skip_forms.rs): row units, statement units by key and
    lone DDL alike, byte for byte what the reference path sends, and none of them goes through
    TransactionFilter (issue #57: no slow twin per policy)."""
    directory = request.getfixturevalue(workload)
    regs = [Registration(server_id=1, skip_policy=policy, filters=(ChannelSpec(None, RuleSet(do_db=("db1",))),)),
            Registration(server_id=2, skip_policy=policy,
                         filters=(ChannelSpec(None, RuleSet(wild_do_table=("db2.t1", "db3.%"))),))]
    fast = _assert_same(directory, regs)
    for sid in (1, 2):
        stats = fast[sid][1]
        assert stats.transactions_skipped > 0
        assert (stats.placeholders if policy == "placeholder" else stats.empty_transactions) > 0
    assert fast[2][1].transactions_partial > 0
    calls = _count_filter_calls(monkeypatch)
    _dump(directory, regs, True)
    assert not [txn for txn in calls if txn.kind != "control"]


def _synth_binlog(directory: Path, flavor: str, *, stale_map: bool = False) -> None:
    from dumpfilter.codec import encode as enc
    from dumpfilter.codec.constants import STMT_END_F
    from tests.support.filtering import Synth

    synth = Synth(flavor)
    synth.rows_txn([[(1, "a", "t1"), (2, "b", "t2")]])                  # one statement, two dbs
    synth.rows_txn([[(1, "a", "t1")], [(2, "b", "t2")]])                # two statements
    synth.rows_txn([[(3, "b", "t3"), (4, "b", "t4")], [(1, "a", "t1")]])
    synth.rows_txn([[(1, "a", "t1"), (2, "b", "t2")]], rows_order=[1, 0])
    if not stale_map:
        synth.rows_txn([[(1, "a", "t1")]])
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "master-bin.000001").write_bytes(synth.bytes())
        return
    # A statement whose rows use the Table_map of an earlier statement of the transaction: a
    # replica forgot that map at the earlier statement's STMT_END_F (issue #44 item 4).
    synth.rows_txn([[(1, "a", "t1")], [(2, "b", "t2")]])
    xid = synth.events.pop()
    rows_type = EventType.WRITE_ROWS_V1 if flavor == "mariadb" else EventType.WRITE_ROWS
    image = b"\x00" + (1).to_bytes(4, "little") + b"\x01\x00\x00\x00"
    synth.events.append(synth.ev(EventType.TABLE_MAP, enc.table_map_body(3, "b", "t3", b"\x03\x03", nullable=b"\x02")))
    synth.events.append(synth.ev(rows_type, enc.rows_body(1, image, ncols=2, v2=flavor != "mariadb", flags=0)))
    synth.events.append(synth.ev(rows_type, enc.rows_body(3, image, ncols=2, v2=flavor != "mariadb",
                                                          flags=STMT_END_F)))
    synth.events.append(xid)
    synth.rows_txn([[(1, "a", "t1")]])
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "master-bin.000001").write_bytes(synth.bytes())


@pytest.mark.parametrize("flavor", FLAVORS)
@pytest.mark.parametrize("policy", SKIP_POLICIES)
def test_partly_kept_statement_takes_the_reference_path(tmp_path, monkeypatch, flavor, policy):
    """A multi-table statement whose tables are partly kept has its STMT_END_F moved by
    TransactionFilter: the fast path hands such units to it, and the bytes are the reference's."""
    _synth_binlog(tmp_path, flavor)
    regs = [Registration(server_id=1, skip_policy=policy, filters=(ChannelSpec(None, RuleSet(do_db=("a",))),)),
            Registration(server_id=2, skip_policy=policy, filters=(ChannelSpec(None, RuleSet(do_db=("b",))),)),
            Registration(server_id=3, skip_policy=policy, filters=(ChannelSpec(None, RuleSet(ignore_db=("c",))),))]
    fast = _assert_same(tmp_path, regs, segment_bytes=200)
    assert fast[1][1].transactions_partial >= 3
    calls = _count_filter_calls(monkeypatch)
    _dump(tmp_path, regs, True, segment_bytes=200)
    mixed = [txn for txn in calls if sum(e.type_code == EventType.TABLE_MAP for e in txn.events) == 2
             and len({e.table_map[1] for e in txn.events if e.type_code == EventType.TABLE_MAP}) == 2]
    assert mixed, "the partly kept statement went through TransactionFilter"


@pytest.mark.parametrize("flavor", FLAVORS)
def test_rows_naming_an_earlier_statements_map_are_refused(tmp_path, flavor):
    """The core's fast units forget a statement's table ids at its STMT_END_F: a later rows event
    of the transaction naming one goes to the reference path, which refuses it (DATA_LOSS, file
    and offset) instead of routing it by the map of another statement (another table)."""
    from dumpfilter.errors import MalformedEventError

    _synth_binlog(tmp_path, flavor, stale_map=True)
    regs = [Registration(server_id=1, skip_policy="heartbeat", filters=(ChannelSpec(None, RuleSet(do_db=("b",))),))]
    for fast in (True, False):
        with pytest.raises(MalformedEventError, match="master-bin.000001 at byte [0-9]+: .* no Table_map"):
            _dump(tmp_path, regs, fast, segment_bytes=200)


def test_fast_path_on_the_grpc_workload_with_changes_at_boundaries(workload_dir, tmp_path):
    """The multi-file workload of the gRPC tests, several slaves with overlapping rules and a
    ChangeFilter queued before the stream starts (applied at the first boundary)."""
    directory = tmp_path / "b"
    shutil.copytree(workload_dir, directory)
    regs = [Registration(server_id=sid, skip_policy=policy, filters=(ChannelSpec(None, RuleSet(do_db=(db,))),))
            for sid, (db, policy) in enumerate([("db1", "heartbeat"), ("db1", "empty-transaction"),
                                                ("db2", "heartbeat"), ("db3", "placeholder")], start=1)]
    _assert_same(directory, regs, segment_bytes=30_000, batch_bytes=20_000)


def test_segment_reader_reports_corruption_like_the_reference(tmp_path):
    """A flipped byte anywhere (a row event, a Table_map, a GTID, an XID, a header's size):
    the same units before it, the same error (file and offset) after them."""
    from dumpfilter.codec import read_events

    src = tmp_path / "src"
    generate(WorkloadSpec(seed=9, transactions=300), src)
    data = (src / "master-bin.000001").read_bytes()
    events = read_events(data)
    picks = {}
    for e in events[5:]:
        picks.setdefault(e.type_code, e)
    for n, event in enumerate(picks.values()):
        for where in (event.pos + 25, event.pos + event.size - 2, event.pos + 10):
            d = tmp_path / f"c{n}-{where}"
            d.mkdir()
            broken = bytearray(data)
            broken[where] ^= 0x5A
            (d / "master-bin.000001").write_bytes(bytes(broken))
            for segment_bytes in (2_000, 1 << 20):
                try:
                    fast = _segments(d, True, segment_bytes)
                except Exception as exc:  # noqa: BLE001 - compared with the reference's
                    fast = repr(exc)
                try:
                    slow = _segments(d, False, segment_bytes)
                except Exception as exc:  # noqa: BLE001
                    slow = repr(exc)
                assert fast == slow, (event, where)


# -- the slave's fast receive ---------------------------------------------------------------------------
def _slave_run(address: str, relay_dir: Path, server_id: int, fast: bool, crash_at: int | None = None, **options):
    from dumpfilter.slave.node import Slave
    from tests.support import SimulatedCrash
    from dumpfilter.slave.config import SlaveConfig

    config = SlaveConfig(master=address, server_id=server_id, relay_dir=relay_dir, until_caught_up=True,
                         connect_retry=0, **options)

    def after_unit(n: int) -> None:
        if crash_at is not None and n == crash_at:
            raise SimulatedCrash

    slave = Slave(config, after_unit=after_unit)
    if not fast:
        reference_receive(slave)
    with contextlib.suppress(SimulatedCrash):
        assert slave.run() == 0
    return slave


def _relay_files(relay_dir: Path) -> dict:
    from dumpfilter.slave.info_file import read_info

    out = {p.name: p.read_bytes() for p in sorted(relay_dir.iterdir()) if p.name.startswith("relay-bin.0")}
    info = read_info(relay_dir)  # its fields (without the check of its text, which covers server_id)
    info.pop("master"), info.pop("server_id"), info.pop("committed_at")
    return {"files": out, "info": info}


@pytest.mark.parametrize("policy", SKIP_POLICIES)
@pytest.mark.parametrize("rules", [RuleSet(do_db=("db1",)), RuleSet(ignore_db=("db2",)),
                                   RuleSet(do_db=("db1", "db3"), rewrite_db=(("db1", "x1"),)),
                                   RuleSet(wild_ignore_table=("db3.t1%",))])
def test_slave_fast_receive_equals_reference(workload_dir, master_factory, tmp_path, policy, rules):
    """Relay logs, relay-log.info and counters are the same with and without the fast receive,
    including after a crash in the middle and a restart."""
    _master, address = master_factory(workload_dir)
    results = []
    for n, fast in enumerate((False, True)):
        relay = tmp_path / f"relay{n}"
        first = _slave_run(address, relay, 300 + 10 * n, fast, crash_at=700, rules=rules, skip_policy=policy)
        second = _slave_run(address, relay, 300 + 10 * n, fast, rules=rules, skip_policy=policy)
        counters = dict(second.counters.__dict__)
        counters.pop("batches")  # how the stream was cut into batches depends on timing only
        results.append((_relay_files(relay), counters, first.units_written))
    assert results[0] == results[1]


@pytest.mark.parametrize("state", ["0-1-250", "0-1-1300,1-1-5", "0-1-999999", "0-1-0"])
def test_fast_path_with_a_gtid_start(row_workload, state):
    """A stream started by GTID skips what the slave has: segments holding such GTIDs go unit
    by unit, the others take the fast path; the same batches either way."""
    regs = [Registration(server_id=1, filters=(ChannelSpec(None, RuleSet(do_db=("db1",))),)),
            Registration(server_id=2, skip_policy="empty-transaction",
                         filters=(ChannelSpec(None, RuleSet(ignore_db=("db2",))),))]
    _assert_same(row_workload, regs, gtid_state=state, segment_bytes=5_000)


@pytest.fixture(scope="module")
def mysql_row_workload(tmp_path_factory) -> Path:
    directory = tmp_path_factory.mktemp("mysql-row")
    generate(WorkloadSpec(seed=12, schemas=4, transactions=600, cross_db_share=0.5, flavor="mysql",
                          max_binlog_size=40_000), directory)
    return directory


@pytest.mark.parametrize("upto", [0, 1, 250, 599, 10_000])
def test_fast_path_with_a_mysql_gtid_start(mysql_row_workload, upto):
    """The same for a MySQL GTID set: MySQL ROW units are fast units, and segments holding GTIDs
    in the slave's set go unit by unit."""
    first = next(e for _, e in TailingReader(mysql_row_workload) if e.type_code == EventType.GTID)
    source = first.gtid_info.source
    state = f"{source}:1-{upto}" if upto else f"{source}:5:9-12"
    regs = [Registration(server_id=1, filters=(ChannelSpec(None, RuleSet(do_db=("db1",))),)),
            Registration(server_id=2, filters=(ChannelSpec(None, RuleSet(ignore_db=("db2",))),))]
    fast = _assert_same(mysql_row_workload, regs, gtid_state=state, segment_bytes=5_000)
    assert (fast[1][1].transactions_kept > 0) == (upto < 10_000)  # a state past the end keeps nothing


@pytest.mark.fixtures
def test_fast_dump_equals_reference_dump_on_every_real_binlog(shared_fixtures, tmp_path):
    """Binlogs written by real servers (MySQL 5.1-9.6, MariaDB 10.5-11.8: Anonymous_GTID, GTID,
    tagged GTIDs, payloads, MariaDB annotations) stream the same through the fast path as through
    the reference path, for a slave keeping everything and one with table rules."""
    import gzip

    files = sorted(p for p in shared_fixtures.rglob("*") if p.is_file() and p.name != "MANIFEST.md")
    assert len(files) == 15
    fast_units = 0
    unfinished: list[str] = []
    for i, path in enumerate(files):
        directory = tmp_path / f"f{i}"
        directory.mkdir()
        # A name that sorts before any file a fixture's Rotate names (which is never written here).
        name = "a.000001"
        data = gzip.open(path).read() if path.suffix == ".gz" else path.read_bytes()
        if not list(group_transactions(read_events(data)))[-1].complete:
            unfinished.append(path.name)  # ends inside a transaction: a live master waits for the rest
            continue
        (directory / name).write_bytes(data)
        regs = [Registration(server_id=1),
                Registration(server_id=2, filters=(ChannelSpec(None, rules=RuleSet(
                    wild_ignore_table=("auth.%", "test.t1%"), ignore_db=("mysql",))),))]
        try:
            _assert_same(directory, regs)
        except AssertionError as exc:
            raise AssertionError(f"{path.name}: {exc}") from None
        cache = SegmentCache(directory)
        fast_units += sum(u.raw is not None for u in cache.get((name, 4)).units)
    assert fast_units > 0  # the fast path really ran on some of them
    assert unfinished == ["mysql-bin.aurora-padding"]


def test_a_stream_replaced_from_another_channel_counts_its_hits_under_its_own(row_workload):
    """A slave's stream on one channel replaced by its stream on another: what the first decided
    since it last folded its rule hits is counted under its own channel's rules and P_S rows when
    it ends, as the reference path counted each unit when it decided it."""
    from dumpfilter.errors import StreamReplacedError

    reg = Registration(server_id=1, channels=("a", "b"),
                       filters=(ChannelSpec("a", RuleSet(do_db=("db1",))),
                                ChannelSpec("b", RuleSet(ignore_table=("db2.t1",)))))

    def run(fast: bool):
        svc = DumpService(row_workload, batch_bytes=3_000) if fast else \
            reference_service(row_workload, batch_bytes=3_000)
        svc.register(reg)
        first = svc.stream(1, channel="a")
        for _ in range(5):
            assert not next(first).caught_up
        second = svc.stream(1, channel="b")
        next(second)
        with pytest.raises(StreamReplacedError):
            for _ in range(50):  # the batch under way ends first
                next(first)
        second.close()
        rows, _ = svc.list_filters(1)
        return svc.slaves[1].stats, sorted((r["CHANNEL_NAME"], r["FILTER_NAME"], r["COUNTER"]) for r in rows)

    slow, fast = run(False), run(True)
    assert any(name == "a" and counter > 0 for name, _, counter in slow[1])
    assert fast == slow
