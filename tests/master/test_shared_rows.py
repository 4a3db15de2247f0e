"""Slaves with the same rules share a segment's answer row (`UnitIndex.rows_for`, issue #59 goal
1): the core makes it once per segment for each distinct keep, not once per slave (64 slaves over
eight schemas had it walk every unit of every segment 64 times for eight rows); what each slave
is sent is what it is sent alone."""

from __future__ import annotations

from dumpfilter.master.model import ChannelSpec, Registration
from dumpfilter.master.read import segments as segments_module
from dumpfilter.master.service import DumpService
from dumpfilter.rules.ruleset import RuleSet
from dumpfilter.workload.generator import WorkloadSpec, generate


def _reg(server_id: int, db: str) -> Registration:
    return Registration(server_id=server_id, filters=(ChannelSpec(None, RuleSet(do_db=(db,))),))


REGS = [_reg(1, "db1"), _reg(2, "db1"), _reg(3, "db1"), _reg(4, "db2")]


def _batches(svc: DumpService, server_id: int) -> list[tuple]:
    out = []
    for b in svc.stream(server_id):
        out.append((b.events, b.position, b.transactions, b.skipped_bytes, b.caught_up, b.gtid_state))
        if b.caught_up:
            return out
    return out


def _spied_indexes(monkeypatch) -> dict:
    """Every segment's UnitIndex the cache hands out from now on, by id."""
    indexes = {}
    real_get = segments_module.SegmentCache.get

    def get(self, start):
        seg = real_get(self, start)
        if seg.index is not None:
            indexes[id(seg.index)] = seg.index
        return seg

    monkeypatch.setattr(segments_module.SegmentCache, "get", get)
    return indexes


def test_slaves_with_the_same_rules_share_each_segments_row(tmp_path, monkeypatch):
    generate(WorkloadSpec(seed=11, schemas=3, transactions=3000, flavor="mariadb", max_binlog_size=1 << 20), tmp_path)
    indexes = _spied_indexes(monkeypatch)
    # A cache that holds every segment: each stream after the first is served the same ones.
    svc = DumpService(tmp_path, segment_bytes=64 << 10, cache_bytes=1 << 30)
    for reg in REGS:
        svc.register(reg)
    got = {reg.server_id: _batches(svc, reg.server_id) for reg in REGS}
    assert len(indexes) > 4
    made = sum(index.rows_made for index in indexes.values())
    # one row per segment for db1's three slaves, one for db2's
    assert made == 2 * len(indexes), made
    for reg in REGS:
        alone = DumpService(tmp_path, segment_bytes=64 << 10)
        alone.register(reg)
        assert _batches(alone, reg.server_id) == got[reg.server_id], f"server_id {reg.server_id}"


def test_slaves_with_different_rules_are_answered_in_one_walk_of_each_segment(tmp_path, monkeypatch):
    """Issue #80 goal 1: the first stream to reach a segment answers it for every registered
    slave in one walk of its units (`UnitList.rows_many`); eight do-db slaves each walked every
    unit for their own row. What each is sent is what it is sent alone."""
    generate(WorkloadSpec(seed=5, schemas=4, transactions=3000, flavor="mariadb", max_binlog_size=1 << 20), tmp_path)
    indexes = _spied_indexes(monkeypatch)
    regs = [_reg(k, f"db{k}") for k in range(1, 5)]
    svc = DumpService(tmp_path, segment_bytes=64 << 10, cache_bytes=1 << 30)
    for reg in regs:
        svc.register(reg)
    got = {reg.server_id: _batches(svc, reg.server_id) for reg in regs}
    assert len(indexes) > 4
    assert sum(index.row_walks for index in indexes.values()) == len(indexes)
    assert sum(index.rows_made for index in indexes.values()) == 4 * len(indexes)
    for reg in regs:
        alone = DumpService(tmp_path, segment_bytes=64 << 10)
        alone.register(reg)
        assert _batches(alone, reg.server_id) == got[reg.server_id], f"server_id {reg.server_id}"


def test_a_segments_table_map_tally_is_made_once_for_the_streams_that_walk_all_of_it(tmp_path, monkeypatch):
    """Issue #80 goal 1: the rule hits of the Table_maps a stream's core walk went over come from
    one tally per segment (`UnitIndex.tally`), shared by the streams whose walks covered the same
    units: eight do-db streams each tallied every Table_map of every segment. Each slave's rule
    hits, and what it is sent, are what it gets alone."""
    generate(WorkloadSpec(seed=7, schemas=4, transactions=3000, flavor="mariadb", binlog_format="mixed",
                          max_binlog_size=1 << 20), tmp_path)
    indexes = _spied_indexes(monkeypatch)
    regs = [_reg(k, f"db{k}") for k in range(1, 5)]
    svc = DumpService(tmp_path, segment_bytes=64 << 10, cache_bytes=1 << 30)
    for reg in regs:
        svc.register(reg)
    got = {reg.server_id: _batches(svc, reg.server_id) for reg in regs}
    hits = {reg.server_id: +svc.slaves[reg.server_id].stats.rule_hits for reg in regs}
    assert len(indexes) > 4 and all(hits.values())
    assert sum(index.tallies for index in indexes.values()) == len(indexes)
    for reg in regs:
        alone = DumpService(tmp_path, segment_bytes=64 << 10)
        alone.register(reg)
        assert _batches(alone, reg.server_id) == got[reg.server_id], f"server_id {reg.server_id}"
        assert +alone.slaves[reg.server_id].stats.rule_hits == hits[reg.server_id], f"server_id {reg.server_id}"
