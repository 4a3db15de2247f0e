"""DumpService.warm_up (run by `master serve` as it starts): what the first slave's stream paid
before, paid once off its path: the directory watch in place, the rule modules' patterns
compiled, the last file's written end known."""

from __future__ import annotations

from dumpfilter.master.service import DumpService
from dumpfilter.rules.lazy_pattern import LazyPattern, compile_all


def test_warm_up_does_the_first_streams_one_time_work(binlog_copy):
    service = DumpService(binlog_copy)
    try:
        assert service.segments.written._known is None
        fresh = LazyPattern(r"a+b")  # made after the modules' own: compiled by the warm-up too
        assert not fresh.is_compiled
        service.warm_up()
        assert service.watch._started and service.watch._hub is not None
        assert fresh.is_compiled and all(p.is_compiled for p in LazyPattern.made)
        assert compile_all() == 0  # nothing left to compile
        last = service.segments.file_names()[-1]
        known = service.segments.written._known
        assert known is not None and known[0] == binlog_copy / last
        assert known[3] == service.segments.end()[1]
    finally:
        service.shutdown()
