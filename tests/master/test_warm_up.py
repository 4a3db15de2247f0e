"""DumpService.warm_up (run by `master serve` as it starts): what the first slave's stream paid
before, paid once off its path: the directory watch in place, the rule modules' patterns
compiled, the last file's written end known, the statement parser's sqlglot imported."""

from __future__ import annotations

import subprocess
import sys

from dumpfilter.master.service import DumpService
from dumpfilter.rules import lazy_sqlglot
from dumpfilter.rules.lazy_pattern import LazyPattern, compile_all


def test_warm_up_does_the_first_streams_one_time_work(binlog_copy):
    service = DumpService(binlog_copy)
    try:
        assert service.segments.written._known is None
        fresh = LazyPattern(r"a+b")  # made after the modules' own: compiled by the warm-up too
        assert not fresh.is_compiled
        lazy_sqlglot.sqlglot._module = None  # (as in a fresh master: another test may have used it)
        service.warm_up()
        assert service.watch._started and service.watch._hub is not None
        assert fresh.is_compiled and all(p.is_compiled for p in LazyPattern.made)
        assert compile_all() == 0  # nothing left to compile
        last = service.segments.file_names()[-1]
        known = service.segments.written._known
        assert known is not None and known[0] == binlog_copy / last
        assert known[3] == service.segments.end()[1]
        assert lazy_sqlglot.sqlglot._module is not None  # the statement parser's general path, imported
    finally:
        service.shutdown()


def test_warm_up_loads_the_mysql_dialect_the_parser_reads_with(binlog_copy):
    """sqlglot's MySQL dialect (its tokenizer classes are made as it is imported: 9 ms), loaded by
    the warm-up, not by the first statement the core cannot read (a fresh process: this one's
    tests may have loaded it)."""
    script = ("import sys; from dumpfilter.master.service import DumpService; "
              f"s = DumpService({str(binlog_copy)!r}); before = 'sqlglot.dialects.mysql' in sys.modules; "
              "s.warm_up(); s.shutdown(); print(before, 'sqlglot.dialects.mysql' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.split() == ["False", "True"], out.stderr[-400:]


def test_warm_up_over_a_bad_binlog_leaves_it_to_the_streams(tmp_path):
    """A directory whose last binlog is not one (or that the index names but is missing): the
    warm-up raises nothing (it runs on a thread of its own; each stream tells its slave)."""
    (tmp_path / "master-bin.index").write_text("./master-bin.000001\n./master-bin.000002\n")
    (tmp_path / "master-bin.000001").write_bytes(b"not a binlog at all")
    service = DumpService(tmp_path)
    try:
        service.warm_up()  # master-bin.000002 is missing
        (tmp_path / "master-bin.000002").write_bytes(b"\xfebin" + b"\x00" * 40)
        service.warm_up()  # a magic, then no complete event
    finally:
        service.shutdown()


def test_warm_up_freezes_what_it_made_out_of_the_collector_when_asked(binlog_copy):
    """`master serve`'s warm-up (freeze=True) leaves the cyclic collector only what is made after
    it: its full passes no longer walk the imported modules (sqlglot's among them) again and
    again. Without it, nothing is frozen (the library leaves the process's collector alone). A
    fresh process each: this one's objects are the tests'."""
    script = ("import gc; from dumpfilter.master.service import DumpService; "
              f"s = DumpService({str(binlog_copy)!r}); s.warm_up(freeze={{}}); s.shutdown(); "
              "print(gc.get_freeze_count(), len(gc.get_objects()))")
    counts = {}
    for freeze in (False, True):
        out = subprocess.run([sys.executable, "-c", script.format(freeze)], capture_output=True, text=True,
                             timeout=120, check=True)
        counts[freeze] = [int(n) for n in out.stdout.split()]
    assert counts[False][0] == 0, counts
    frozen, left = counts[True]
    assert frozen > 10 * left and frozen > counts[False][1] // 2, counts  # (sqlglot's objects among the frozen)
