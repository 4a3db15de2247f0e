"""Split's core route takes fast MySQL ROW units (a GTID or Anonymous_GTID, BEGIN, statements, XID):
none of them reaches the Python Router, by schema or by --map, and the outputs are the Router's
bytes (its own path, forced, writes the same files) and hold what a replica checks: each GTID's
transaction_length is its transaction's size, each log_pos its event's end, each schema's output
only its schema's Table_maps and BEGINs of its schema (or of none). Generated MySQL binlogs with and
without CRC32, with units over several schemas (copies cut, BEGINs given another schema)."""

from __future__ import annotations

import functools
from pathlib import Path

import pytest

from dumpfilter.codec import EventType, group_transactions
from dumpfilter.spark_jobs.tasks import compiled
from dumpfilter.spark_jobs.tasks.local import split_local
from dumpfilter.spark_jobs.tasks.routing import Router, config_from_maps
from dumpfilter.workload import WorkloadSpec, generate
from dumpfilter.workload import generator
from tests.support.filtering import assert_positions, assert_transaction_lengths, events_of

SPEC = WorkloadSpec(seed=71, schemas=3, tables_per_schema=2, transactions=300, binlog_format="row",
                    flavor="mysql", cross_db_share=0.5, statements_per_transaction=3, max_binlog_size=60_000)
MAPS = ["a=db1%", "b=replicate-wild-ignore-table=db1.%", "b=replicate-ignore-table=db2.t2"]


@pytest.fixture(scope="module", params=[True, False], ids=["crc32", "no-checksum"])
def mysql_row(request, tmp_path_factory) -> list[Path]:
    fde = generator.enc.format_description
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(generator.enc, "format_description", functools.partial(fde, checksum=request.param))
        return generate(SPEC, tmp_path_factory.mktemp("mysql"), "master-bin")


def _tables(events) -> set[str]:
    return {e.table_map[1] for e in events if e.type_code == EventType.TABLE_MAP}


def test_the_workload_holds_the_units_that_need_rewriting(mysql_row):
    """Units over several schemas (cut, transaction_length rewritten) and single-schema units whose
    BEGIN names another schema (kept whole, their BEGIN retargeted by schema)."""
    units = [u for p in mysql_row for u in group_transactions(events_of(p.read_bytes()))
             if u.kind != "control" and u.events[0].type_code == EventType.GTID and _tables(u.events)]
    assert sum(len(_tables(u.events)) > 1 for u in units) > 50
    assert sum(_tables(u.events) != {u.events[1].query.db} for u in units if len(_tables(u.events)) == 1) > 0


def _split(paths: list[Path], out: Path, maps: list[str]) -> dict[str, bytes]:
    split_local(paths, out, config_from_maps(maps), max_size=40_000, chunk_bytes=50_000)
    return {p.name: p.read_bytes() for p in sorted(out.iterdir())}


@pytest.mark.parametrize("maps", [[], MAPS], ids=["by-schema", "by-map"])
def test_fast_mysql_units_are_routed_by_the_core_as_the_router_routes_them(mysql_row, tmp_path, monkeypatch, maps):
    routed: list[int] = []
    route = Router.route

    def spy(self, txn):
        if txn.kind != "control" and txn.events[0].type_code in (EventType.GTID, EventType.ANONYMOUS_GTID):
            routed.append(len(_tables(txn.events)))
        return route(self, txn)

    monkeypatch.setattr(Router, "route", spy)
    step = compiled._ChunkWalk.step
    fast: list[int] = []
    monkeypatch.setattr(compiled._ChunkWalk, "step",
                        lambda self, at: (fast.append(at) if self.units.is_fast(at) else None) or step(self, at))
    got = _split(mysql_row, tmp_path / "core", maps)
    assert fast == [] and all(n == 0 for n in routed)  # only DDL (no Table_map) went to Python

    # The Router's own path, every unit through it: the same files, byte for byte.
    monkeypatch.setattr(compiled._ChunkWalk, "run", lambda self, at, keys: None)
    routed.clear()
    want = _split(mysql_row, tmp_path / "router", maps)
    assert sum(n > 0 for n in routed) > 200
    assert list(got) == list(want)
    for name in got:
        assert got[name] == want[name], name

    # What a replica checks of each output.
    lengths = 0
    for name, data in got.items():
        if name.endswith(".index"):
            continue
        assert_positions(data)
        lengths += assert_transaction_lengths(data)
        if not maps:
            schema = name.split("-bin.")[0]
            events = events_of(data)
            assert _tables(events) <= {schema}
            assert {e.query.db for e in events if e.is_query and e.query.sql == "BEGIN"} <= {schema, ""}
    assert lengths > 200
