"""A master dropped in a process that goes on (simulate's and verify's in-process masters, the
tests) is collected whole: nothing outside it keeps its segment cache, whose mapped segments
hold descriptors and address space. The compiled FlagWords held its Python owner through a
bound method, a cycle the collector could not see; the lint thread kept its last job's master."""

from __future__ import annotations

import gc
import weakref

from dumpfilter.master.model import ChannelSpec, Registration
from dumpfilter.master.service import DumpService
from dumpfilter.rules.ruleset import RuleSet

from tests.support.waiting import wait_for


def _streamed_master(binlog_dir) -> weakref.ref:
    svc = DumpService(binlog_dir)
    svc.register(Registration(server_id=1))
    svc.register(Registration(server_id=2, filters=(ChannelSpec(None, RuleSet(do_db=("db1",))),)))
    sent = 0
    for sid in (1, 2):
        for batch in svc.stream(sid):
            sent += len(batch.events)
            if batch.caught_up:
                break
    assert sent > 0 and svc.segments.reads > 0
    return weakref.ref(svc.segments)


def test_a_dropped_master_is_collected(workload_dir):
    cache = _streamed_master(workload_dir)

    def collected() -> bool:
        gc.collect()
        return cache() is None
    assert wait_for(collected, give_up=30), f"still held by {[type(r).__name__ for r in gc.get_referrers(cache())]}"
