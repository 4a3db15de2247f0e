"""The compiled scanner (dumpfilter._core through dumpfilter.codec.scanner) against the slow Python
reference of tests/core/reference_scanner.py: the same units (boundaries, event counts, kinds,
completeness, fast shape with its tables, GTIDs, Rotate ends) and the same first error (class
and offset), on every real fixture binlog, on generated binlogs of both flavors and every
format, on hypothesis-built and hypothesis-mutated binlogs, and whatever the buffer slicing."""

from __future__ import annotations

import gzip
import io
import struct
import uuid
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dumpfilter.codec import BinlogWriter, Event
from dumpfilter.errors import BinlogError
from dumpfilter.codec.scanner import (F_HAS_FDE, F_MARIADB_GTID, F_MYSQL_GTID, F_ROTATE_END, F_TAGGED_GTID, UnitList,
                                      Scanner, unit_record)
from dumpfilter.workload.generator import FLAVORS, FORMATS, WorkloadSpec, generate
from tests.codec.test_properties import binlogs
from tests.core import reference_scanner as ref


def core_units(data: bytes, *, verify: bool = True, chunks: list[int] | None = None):
    """The scanner's units as reference_scanner.units() describes them, fed in slices of the
    given sizes (as the segment reader and the filter feed it: the unhanded rest carried over)."""
    scanner = Scanner("<test>", verify_checksums=verify)
    out, error = [], None
    buf, base, at = b"", 4, 4
    sizes = iter(chunks or [len(data)])
    while error is None:
        size = next(sizes, len(data))
        piece = data[at : at + max(1, size)]
        at += len(piece)
        eof = at >= len(data)
        buf += piece
        scan = scanner.units(buf, 0, base, at_eof=eof)
        for rec in scan.units:
            raw = buf[rec.start : rec.end]
            tables = None
            if rec.fast:
                tables = [scanner.names[i] for i in scan.tables[rec.tables_lo : rec.tables_hi]]
            out.append(_described(rec, raw, tables, ((rec.gtid_domain, rec.gtid_server), rec.gtid_seq), base))
        error = scan.error
        buf, base = buf[scan.stop :], base + scan.stop
        if eof:
            break
    return out, error


def _described(rec, raw: bytes, tables, gtid_fields, base: int) -> tuple:
    """A unit as reference_scanner.units() describes it, from the core's record fields."""
    gtid = None
    if rec.flags & F_MARIADB_GTID:
        (domain, server), seq = gtid_fields
        gtid = f"{domain}-{server}-{seq}"
    elif rec.flags & F_MYSQL_GTID:
        gno = rec.gtid_seq - (1 << 64) if rec.gtid_seq >= 1 << 63 else rec.gtid_seq  # an int64 on the wire
        gtid = f"{uuid.UUID(bytes=raw[20:36])}:{gno}"
    elif rec.flags & F_TAGGED_GTID:
        gtid = Event(raw[: rec.gtid_size], 0, None).gtid  # tags are decoded in Python
    return (base + rec.start, base + rec.end, rec.events, rec.kind, rec.complete, tables, gtid,
            bool(rec.flags & F_ROTATE_END))


def plan_units(data: bytes, *, verify: bool = True, chunks: list[int] | None = None, threaded: bool = False):
    """`core_units` through the master's path: each scan appended to a UnitList (`scan_into`, or
    with `threaded` on a thread of its own through `scan_start` and `scan_finish`, as
    SegmentReader feeds it) and every unit read back from the UnitList (`unit`, `tables`, `gtid`,
    `end`); the UnitList's whole-segment answers (size, flags, GTID sources) checked on the way."""
    scanner = Scanner("<test>", verify_checksums=verify)
    plan = UnitList()
    out, error = [], None
    buf, base, at = b"", 4, 4
    sizes = iter(chunks or [len(data)])
    bases, size, flags_any, sources = [], 0, 0, set()
    while error is None:
        size_ = next(sizes, len(data))
        piece = data[at : at + max(1, size_)]
        at += len(piece)
        eof = at >= len(data)
        buf += piece
        first = len(plan)
        if threaded:
            scanner.scan_start(plan, buf, 0, base, f"bin.{len(bases):06d}", at_eof=eof)
            scan = scanner.scan_finish(plan)
        else:
            scan = scanner.scan_into(plan, buf, 0, base, f"bin.{len(bases):06d}", at_eof=eof)
        assert len(plan) == first + scan.added
        if scan.added:
            bases.append(base)
        for k in range(first, len(plan)):
            part, rec = unit_record(plan, k)
            assert part == len(bases) - 1
            raw = buf[rec.start : rec.end]
            tables = [scanner.names[i] for i in plan.tables(k)] if rec.fast else None
            assert rec.fast or plan.tables(k) == []
            gtid = plan.gtid(k)
            assert (gtid is not None) == bool(rec.flags & F_MARIADB_GTID)
            assert plan.gtids(k, k + 1) == [gtid]
            end = plan.end(k)
            assert (end and (end.part, end.pos)) == (None if rec.flags & F_ROTATE_END else (part, base + rec.end))
            out.append(_described(rec, raw, tables, gtid, base))
            size += rec.end - rec.start
            flags_any |= rec.flags
            if gtid is not None:
                sources.add(gtid[0])
        error = scan.error
        buf, base = buf[scan.stop :], base + scan.stop
        if eof:
            break
    assert (plan.size, plan.flags_any, plan.gtid_sources()) == (size, flags_any, len(sources))
    for mask in (F_HAS_FDE, F_MYSQL_GTID | F_TAGGED_GTID, F_ROTATE_END):
        assert plan.with_flags(mask, 1) == [k for k in range(1, len(plan)) if plan.unit(k).flags & mask]
    with pytest.raises(IndexError):
        plan.unit(len(plan))
    assert plan.end(len(plan)) is None and plan.gtid(len(plan)) is None and plan.tables(len(plan)) == []
    return out, error


def threaded_plan_units(data: bytes, **kwargs):
    return plan_units(data, threaded=True, **kwargs)


READS = (core_units, plan_units, threaded_plan_units)


def assert_same(data: bytes, *, verify: bool = True, chunks: list[int] | None = None) -> int:
    want, want_error = ref.units(data, verify=verify)
    for read in READS:
        got, got_error = read(data, verify=verify, chunks=chunks)
        assert got == want, read.__name__
        if want_error is None:
            assert got_error is None, got_error
        else:
            assert got_error is not None, f"reference stopped with {want_error}"
            assert (type(got_error), got_error.offset) == (type(want_error), want_error.offset), \
                (read.__name__, got_error, want_error)
    return len(want)


def fixture_files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file() and p.name != "MANIFEST.md")


@pytest.mark.fixtures
def test_every_real_fixture_binlog(shared_fixtures):
    files = fixture_files(shared_fixtures)
    assert len(files) == 15
    total = 0
    for path in files:
        data = gzip.open(path).read() if path.suffix == ".gz" else path.read_bytes()
        total += assert_same(data)
        assert_same(data, chunks=[4096, 777, 65536])
    assert total > 1000


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("flavor", FLAVORS)
def test_generated_binlogs(tmp_path, fmt, flavor):
    paths = generate(WorkloadSpec(seed=7, transactions=400, binlog_format=fmt, flavor=flavor, ddl_share=0.05,
                                  cross_db_share=0.3), tmp_path)
    for path in paths:
        data = path.read_bytes()
        assert assert_same(data) > 400
        assert_same(data, chunks=[1000, 3333, 100_000])


def _written(spec) -> bytes:
    fde, txns = spec
    out = io.BytesIO()
    writer = BinlogWriter(out, fde)
    for txn in txns:
        writer.write_transaction(txn)
    writer.rotate("next-bin.000002")
    return out.getvalue()


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(binlogs(), st.lists(st.integers(1, 400), min_size=1, max_size=6))
def test_hypothesis_binlogs_any_slicing(spec, chunks):
    data = _written(spec)
    assert_same(data, chunks=chunks)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(binlogs(), st.data())
def test_mutated_binlogs_same_units_and_first_error(spec, data):
    """Flipped bits, overwritten bytes and truncation: the scanner finds what the reference
    finds (without CRC checks too, where damage reaches the grouping and the decoders)."""
    raw = bytearray(_written(spec))
    for _ in range(data.draw(st.integers(1, 4))):
        at = data.draw(st.integers(4, len(raw) - 1))
        how = data.draw(st.sampled_from(["flip", "byte", "cut"]))
        if how == "flip":
            raw[at] ^= 1 << data.draw(st.integers(0, 7))
        elif how == "byte":
            raw[at] = data.draw(st.integers(0, 255))
        else:
            del raw[at:]
            break
    verify = data.draw(st.booleans())
    try:
        want = ref.units(bytes(raw), verify=verify)
    except (BinlogError, ValueError, IndexError, UnicodeDecodeError, KeyError, struct.error) as exc:
        # The reference's Python decoders choke on damage the scanner reports (or walks past):
        # the scanner must still come back with units or a BinlogError, never anything else.
        for read in READS:
            got, error = read(bytes(raw), verify=verify)
            assert error is None or isinstance(error, BinlogError), exc
        return
    for read in READS:
        got, error = read(bytes(raw), verify=verify)
        assert got == want[0], read.__name__
        assert (error is None) == (want[1] is None)
        if error is not None:
            assert (type(error), error.offset) == (type(want[1]), want[1].offset)


@pytest.mark.parametrize("damage", [False, True])
def test_crc_checker_thread_or_not_same_answer(tmp_path, damage):
    """A buffer above the pipelining size scanned with its CRC runs checked on a second thread
    (the default) and on the scanning thread (`pipeline_min = None`, the master's segment
    reader): the same units and, with a flipped bit, the same first error as the reference."""
    path = generate(WorkloadSpec(seed=3, transactions=6000, max_binlog_size=1 << 30), tmp_path)[0]
    data = bytearray(path.read_bytes())
    assert len(data) > 2 << 20
    if damage:
        data[len(data) // 2] ^= 0x10
    data = bytes(data)
    want, want_error = ref.units(data)
    for pipeline_min in (1 << 20, None):
        scanner = Scanner("<test>", verify_checksums=True)
        scanner.core.pipeline_min = pipeline_min
        assert scanner.core.pipeline_min == pipeline_min
        scan = scanner.units(data, 4, 0, at_eof=True)
        got = [_described(rec, data[rec.start : rec.end],
                          [scanner.names[i] for i in scan.tables[rec.tables_lo : rec.tables_hi]] if rec.fast else None,
                          ((rec.gtid_domain, rec.gtid_server), rec.gtid_seq), 0)
               for rec in scan.units]
        assert got == want
        if damage:
            assert (type(scan.error), scan.error.offset) == (type(want_error), want_error.offset)
        else:
            assert scan.error is None and want_error is None
