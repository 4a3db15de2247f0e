"""Split on the compiled scan (issue #40): the work it leaves to Python is bounded (only the units
the core does not take go through Router.route, no event of a chunk's cut search reaches Python),
and its two new byte paths give the reference paths' bytes (BinlogSeriesWriter.write_run against
write_transaction; the core's cuts against chunks.gtid_boundaries). The outputs themselves are pinned by
test_split_reference."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dumpfilter.binlogs.series import BinlogSeriesWriter, encode_unit
from dumpfilter.codec.scanner import Scanner
from dumpfilter.spark_jobs.tasks import compiled
from dumpfilter.spark_jobs.tasks.chunks import plan_chunks, source_header
from dumpfilter.spark_jobs.tasks.local import split_local
from dumpfilter.spark_jobs.tasks.routing import Router, config_from_maps
from dumpfilter.workload import WorkloadSpec, generate
from tests.oracles.chunk_units import read_units

SPEC = WorkloadSpec(seed=40, schemas=3, tables_per_schema=2, transactions=400, binlog_format="row",
                    flavor="mariadb", max_binlog_size=30_000, cross_db_share=0.3)


@pytest.fixture(scope="module")
def row_series(tmp_path_factory) -> list[Path]:
    return generate(SPEC, tmp_path_factory.mktemp("row"), "master-bin")


def _slow_units(paths: list[Path]) -> int:
    """Units the scanner does not mark fast (control events, DDL groups, ...), counted by the core."""
    n = 0
    for path in paths:
        data = path.read_bytes()
        scan = Scanner(str(path)).units(data, 4, 4, at_eof=True)
        n += sum(not scan.units.is_fast(i) for i in range(len(scan.units)))
    return n


@pytest.mark.parametrize("maps", [[], ["a=db1%", "b=replicate-wild-ignore-table=db1.%"]])
def test_only_units_the_core_does_not_take_are_routed_in_python(row_series, tmp_path, monkeypatch, maps):
    calls = []
    route = Router.route
    monkeypatch.setattr(Router, "route", lambda self, txn: calls.append(txn) or route(self, txn))
    result = split_local(row_series, tmp_path / "out", config_from_maps(maps))
    units = sum(1 for p in row_series for _ in read_units(plan_chunks([p], None)[0]))
    slow = _slow_units(row_series)
    assert result.stats.units == units > 10 * slow
    # Each routed in Python is a unit the core does not take, or a fast one whose copies cut a
    # statement's Table_maps apart (a statement over two schemas): few.
    assert slow <= len(calls) <= slow + units // 20


def test_a_run_read_in_small_buffers_writes_the_same_files(row_series, tmp_path, monkeypatch):
    split_local(row_series, tmp_path / "a", config_from_maps([]))
    monkeypatch.setattr(compiled, "READ_BYTES", 3000)  # units cut across buffers, read again
    split_local(row_series, tmp_path / "b", config_from_maps([]))
    names = sorted(p.name for p in (tmp_path / "a").iterdir())
    assert names == sorted(p.name for p in (tmp_path / "b").iterdir())
    assert all((tmp_path / "a" / n).read_bytes() == (tmp_path / "b" / n).read_bytes() for n in names)


@pytest.fixture(scope="module")
def units_and_header(row_series):
    paths = row_series[:2]
    events = [txn.events for p in paths for txn in read_units(plan_chunks([p], None)[0])
              if txn.complete and txn.kind != "control"]
    return events, [encode_unit(unit) for unit in events], source_header(paths)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data(), max_size=st.integers(200, 20_000))
def test_write_run_writes_what_write_transaction_writes(units_and_header, tmp_path_factory, data, max_size):
    """Any units, any cut into blocks, any file size: the same series byte for byte as the units'
    events written one unit at a time."""
    events, units, header = units_and_header
    lo = data.draw(st.integers(0, len(units) - 1))
    hi = data.draw(st.integers(lo, min(len(units), lo + 120)))
    blocks = data.draw(st.lists(st.integers(1, 30), min_size=1, max_size=8))
    root = tmp_path_factory.mktemp("runs")
    ref, writer = (BinlogSeriesWriter(root / name, "x-bin", header.fde, max_size=max_size,
                                      start_state=header.start_state) for name in ("events", "run"))
    for unit_events in events[lo:hi]:
        ref.write_transaction(unit_events)
    at, b = lo, 0
    while at < hi:
        block = units[at : min(hi, at + blocks[b % len(blocks)])]
        buf = bytearray(b"".join(block))
        ends, end = [], 0
        for unit in block:
            end += len(unit)
            ends.append(end)
        writer.write_run(buf, ends)
        at += len(block)
        b += 1
    assert {p.name: p.read_bytes() for p in writer.close()} == {p.name: p.read_bytes() for p in ref.close()}


def test_the_walks_gtid_marks_are_the_cores_marks_of_its_bytes(row_series):
    """The GTID events a run's output needs for its next file's state, as the routing walk reports
    them, are those `gtid_marks` finds in the run's bytes (what write_run uses when a run rotates)."""
    from dumpfilter._core import gtid_marks, split_route

    data = row_series[0].read_bytes()
    scanner = Scanner(str(row_series[0]))
    scan = scanner.units(data, 4, 4, at_eof=True)
    dbs = sorted({db for db, _ in scanner.names})
    keeps = [bytes(db == d for d, _ in scanner.names) for db in dbs]
    i, checked = 0, 0
    while i < len(scan.units):
        routed = split_route(scanner.core, data, i, keeps, [True] * len(keeps), [0] * len(keeps))
        for output in routed.outputs:
            assert output.gtid_marks == gtid_marks(output.out, 0, len(output.out))
            checked += bool(output.out)
        i = max(routed.next, i + 1)
    assert checked > 3


# ------------------------------------------------------------------------ statement units by key
MIXED = WorkloadSpec(seed=41, schemas=3, tables_per_schema=2, transactions=500, binlog_format="mixed",
                     flavor="mariadb", max_binlog_size=30_000, cross_db_share=0.3, statements_per_transaction=3,
                     insert_select_share=0.25)
_DML = ("INSERT", "UPDATE", "DELETE", "REPLACE")


@pytest.fixture(scope="module")
def mixed_series(tmp_path_factory) -> list[Path]:
    return generate(MIXED, tmp_path_factory.mktemp("mixed"), "master-bin")


def _statement_units(paths: list[Path]) -> int:
    """Units of a GTID, DML Queries and an XID: what the core routes by its statements' keys."""
    from dumpfilter.codec.transactions import statement_verb
    n = 0
    for path in paths:
        for txn in read_units(plan_chunks([path], None)[0]):
            queries = [e for e in txn.events if e.is_query]
            n += bool(queries) and txn.complete and all(statement_verb(e.sql) in _DML for e in queries) \
                and not any(e.is_rows for e in txn.events)
    return n


@pytest.mark.parametrize("maps", [[], ["a=db1%", "b=replicate-wild-ignore-table=db1.%", "c=replicate-do-db=db3"]])
def test_statement_units_are_routed_by_their_keys_not_in_python(mixed_series, tmp_path, monkeypatch, maps):
    calls = []
    route = Router.route
    monkeypatch.setattr(Router, "route", lambda self, txn: calls.append(txn) or route(self, txn))
    result = split_local(mixed_series, tmp_path / "out", config_from_maps(maps))
    statements = _statement_units(mixed_series)
    assert statements > result.stats.units // 3  # the workload is mostly statement units
    # Python routes the rest (control events, DDL, statements of no default database), not them.
    assert len(calls) <= result.stats.units - statements + statements // 20


_RULES = ["replicate-do-db=db1", "replicate-ignore-db=db2", "replicate-wild-do-table=db%.t1",
          "replicate-do-table=db3.t2", "replicate-wild-ignore-table=db1.%", "db2%", "db3.t1"]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(maps=st.lists(st.sampled_from(_RULES), max_size=3), effective=st.booleans(), small=st.booleans(),
       unassigned=st.booleans())
def test_routing_by_keys_writes_what_python_routing_writes(mixed_series, tmp_path_factory, monkeypatch,
                                                           maps, effective, small, unassigned):
    """The same files whether statement units are routed by the core's keys or by Router."""
    from dumpfilter.rules.ruleset import Settings
    settings_ = Settings(semantics="effective" if effective else "mysql")
    config = config_from_maps([f"m{i}={r}" for i, r in enumerate(maps)], settings_,
                              "unassigned" if unassigned else None)
    out = tmp_path_factory.mktemp("by-keys")
    with monkeypatch.context() as m:
        if small:
            m.setattr(compiled, "READ_BYTES", 5000)  # keys met across buffers, units read again
        split_local(mixed_series, out / "a", config)
        core_route = compiled.split_route
        m.setattr(compiled, "split_route", lambda *args, **kw: core_route(*args[:6], **kw))  # no statement keys
        split_local(mixed_series, out / "b", config)
    names = sorted(p.name for p in (out / "a").iterdir())
    assert names == sorted(p.name for p in (out / "b").iterdir())
    assert all((out / "a" / n).read_bytes() == (out / "b" / n).read_bytes() for n in names)
