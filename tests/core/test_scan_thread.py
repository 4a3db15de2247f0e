"""`UnitList.scan_start` / `UnitList.scan_finish`: a UnitList's scan on a thread of the core's (the master's
read ahead), or at once for a small buffer (a live binlog's tail); `Scanner.scan_into` is the same scan
waited for at once (tests/core/test_scanner_differential.py compares it with the reference); here,
the rules of use: one scan under way per UnitList, the scanner busy until it is finished, and a UnitList
dropped with its scan under way."""

from __future__ import annotations

import gc
import mmap

import pytest

from dumpfilter._core import UnitList
from dumpfilter.codec.scanner import Scanner
from dumpfilter.workload.generator import WorkloadSpec, generate


@pytest.fixture(scope="module")
def binlog(tmp_path_factory) -> bytes:
    d = tmp_path_factory.mktemp("scan-thread")
    return generate(WorkloadSpec(seed=8, transactions=2_000), d)[0].read_bytes()


def test_a_threaded_scan_gives_the_plan_a_plain_scan_gives(binlog):
    plain, threaded = UnitList(), UnitList()
    reference = Scanner("a")
    want = reference.scan_into(plain, binlog, 4, 0, "a", at_eof=True)
    scanner = Scanner("a")
    scanner.scan_start(threaded, binlog, 4, 0, "a", at_eof=True)
    got = scanner.scan_finish(threaded)
    assert (got.added, got.stop, got.events, got.last_rotate) == (want.added, want.stop, want.events, want.last_rotate)
    assert got.added > 2_000 and len(threaded) == len(plain)
    assert [repr(threaded.unit(k)) for k in range(len(threaded))] == [repr(plain.unit(k)) for k in range(len(plain))]
    assert scanner.names == reference.names and len(scanner.names) > 4


def test_a_small_buffer_is_scanned_at_once_and_a_large_one_on_a_thread(binlog):
    """A live binlog's tail is a few KB per wake: a thread started and joined for it cost more
    than its scan, on the path from a commit to the replicas. Either way the UnitList is the same."""
    small = binlog[:100_000]  # (cut inside a unit: the scan stops before it)
    for buf, inline in ((small, 1), (binlog, 0)):
        plain, started = UnitList(), UnitList()
        want = Scanner("a").scan_into(plain, buf, 4, 0, "a")
        scanner = Scanner("a")
        scanner.scan_start(started, buf, 4, 0, "a")
        with pytest.raises(RuntimeError, match="scanner is busy"):  # until finished, either way
            scanner.units(buf, 4, 0)
        got = scanner.scan_finish(started)
        assert started.scans_inline == inline
        assert (got.added, got.stop) == (want.added, want.stop) and got.added > 0
        assert [repr(started.unit(k)) for k in range(len(started))] == [repr(plain.unit(k)) for k in range(len(plain))]


def test_one_scan_at_a_time_and_the_scanner_busy_until_it_is_finished(binlog):
    plan, scanner = UnitList(), Scanner("a")
    with pytest.raises(RuntimeError, match="no scan under way"):
        plan.scan_finish()
    scanner.scan_start(plan, binlog, 4, 0, "a", limit=100_000)
    with pytest.raises(RuntimeError, match="under way on this UnitList"):
        scanner.scan_start(plan, binlog, 4, 0, "a")
    with pytest.raises(RuntimeError, match="scanner is busy"):
        scanner.units(binlog, 4, 0)
    with pytest.raises(RuntimeError, match="scanner is busy"):
        scanner.scan_into(UnitList(), binlog, 4, 0, "a")
    first = scanner.scan_finish(plan)
    assert 0 < first.stop < len(binlog)
    # The scanner's state came back: the next scan goes on from where the first stopped.
    scanner.scan_start(plan, binlog, first.stop, 0, "a", at_eof=True)
    second = scanner.scan_finish(plan)
    assert second.stop == len(binlog) and len(plan) == first.added + second.added


def test_a_bad_offset_or_a_writable_buffer_is_refused_before_any_thread(binlog):
    plan, scanner = UnitList(), Scanner("a")
    with pytest.raises(ValueError, match="past the buffer"):
        scanner.scan_start(plan, binlog, len(binlog) + 1, 0, "a")
    with pytest.raises(ValueError, match="read-only"):
        scanner.scan_start(plan, bytearray(binlog), 4, 0, "a")
    scanner.scan_start(plan, binlog, 4, 0, "a", at_eof=True)  # neither left the plan or scanner busy
    assert scanner.scan_finish(plan).stop == len(binlog)


def test_a_plan_dropped_with_its_scan_under_way_waits_for_it(binlog, tmp_path):
    """The scan reads the buffer the UnitList holds (here a mapping): dropping the UnitList joins the
    thread before the buffer is let go, so the mapping can then be closed."""
    path = tmp_path / "b"
    path.write_bytes(binlog)
    with open(path, "rb") as f:
        mapped = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)
    for _ in range(20):
        plan = UnitList()
        Scanner("b").scan_start(plan, mapped, 4, 0, "b", at_eof=True)
        with pytest.raises(BufferError):
            mapped.close()  # exported to the scan
        del plan
        gc.collect()
    mapped.close()
    assert mapped.closed
