"""The slave's compiled relay run (core relay_run through Scanner.relay_run) against the
per-unit Python loop it replaced in slave.node.Slave._receive: from any unit index, the same
lone Heartbeats passed over, the same fast units kept whole copied as they came, given the
format the same lone statements (a GTID and one QUERY, read by codec.event.query_text) copied
with their texts and MySQL empty transactions (framing only) copied, and the same stopping unit; on every real fixture binlog and on
hypothesis-built binlogs, with Heartbeats (as the master sends them for skipped stretches) put
between their units, under every kind of keep answer (kept, not kept, not known yet)."""

from __future__ import annotations

import gzip
import io
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dumpfilter import _core
from dumpfilter.codec.constants import HEADER_LEN, EventType
from dumpfilter.codec.event import query_text
from dumpfilter.codec.reader import read_format_description
from dumpfilter.codec.scanner import (F_ANONYMOUS_GTID, F_COMPLETE, F_HAS_FDE, F_MARIADB_GTID, F_MYSQL_GTID, F_PAYLOAD,
                                      Scanner)
from dumpfilter.errors import BinlogError
from dumpfilter.rules.transaction_filter import framing_statement
from tests.codec.test_properties import binlogs
from tests.core.test_scanner_differential import _written, fixture_files

HEARTBEATS = (int(EventType.HEARTBEAT), int(EventType.HEARTBEAT_V2))


LONE = F_MARIADB_GTID | F_COMPLETE
ANY_GTID = F_MARIADB_GTID | F_MYSQL_GTID | F_ANONYMOUS_GTID


def _framing_only(buf: bytes, rec, fmt) -> bool:
    """A complete GTID unit whose events after its GTID are all XIDs or framing Queries (BEGIN,
    COMMIT, ...: a MySQL empty transaction), which the slave's loop relays as it came."""
    if not rec.flags & F_COMPLETE or not rec.flags & ANY_GTID or rec.flags & (F_PAYLOAD | F_HAS_FDE) \
            or rec.events < 2:
        return False
    at = rec.start + rec.gtid_size
    while at < rec.end:
        size = int.from_bytes(buf[at + 9:at + 13], "little")
        if buf[at + 4] != EventType.XID:
            text = query_text(buf, at, at + size, fmt) if buf[at + 4] == EventType.QUERY else None
            if text is None or not framing_statement(text[1]):
                return False
        at += size
    return at == rec.end


def reference_run(buf: bytes, units, tables, keep: bytes, start: int, fmt=None):
    """The slave's former loop, unit by unit: (bytes, next, units, events, bytes, heartbeats,
    lone statements' texts); with `fmt`, its lone-statement branch too."""
    out, i, relayed, events, heartbeats, texts = [], start, 0, 0, 0, []
    while i < len(units):
        rec = units[i]
        if rec.kind == "control" and rec.events == 1 and buf[rec.start + 4] in HEARTBEATS:
            heartbeats += 1
            i += 1
            continue
        if not rec.fast:
            text = None
            if (fmt is not None and rec.events == 2 and rec.flags & F_COMPLETE and rec.flags & ANY_GTID
                    and rec.gtid_size >= HEADER_LEN + 13 + fmt.checksum_len):
                text = query_text(buf, rec.start + rec.gtid_size, rec.end, fmt)
            if text is not None:
                texts.append((i, *text))
            elif fmt is None or not _framing_only(buf, rec, fmt):
                break
        else:
            ids = tables[rec.tables_lo : rec.tables_hi]
            if not all(j < len(keep) and keep[j] == 1 for j in ids):
                break
        out.append(buf[rec.start : rec.end])
        relayed += 1
        events += rec.events
        i += 1
    data = b"".join(out)
    return data, i, relayed, events, len(data), heartbeats, texts


def with_heartbeats(data: bytes, rng: random.Random, share: float) -> bytes:
    """A dump stream of the binlog file `data`: its units back to back (no magic), a Heartbeat
    (with a CRC when the FDE says so, a Heartbeat_v2 now and then) before a `share` of them."""
    scanner = Scanner("<test>")
    scan = scanner.units(data, 4, 0, at_eof=True)
    crc = scanner.checksum_len == 4
    parts = []
    for n, rec in enumerate(scan.units):
        if n > 0 and rng.random() < share:
            beat = bytearray(_core.heartbeat("master-bin.000001", rec.start, 1, crc))
            parts.append(bytes(beat))
        parts.append(data[rec.start : rec.end])
    return b"".join(parts)


def keeps(names: int, rng: random.Random) -> list[bytes]:
    """Keep arrays: all kept, none kept, a random mix of kept / not kept / not known (2), and one
    shorter than the names (the last ones not known yet)."""
    mixed = bytes(rng.choice((1, 1, 1, 0, 2)) for _ in range(names))
    return [b"\x01" * names, b"\x00" * names, mixed, b"\x01" * (names // 2)]


def assert_same_runs(stream: bytes, rng: random.Random, fmt=None) -> tuple[int, int, int]:
    """Every run over `stream` from 0, then from each unit after the one a run stopped at,
    equal to the reference, without and with the lone statements (`fmt`, the stream's format);
    returns (units relayed, heartbeats, lone statements) over the all-kept array."""
    scanner = Scanner("<test>")
    scan = scanner.units(stream, 0, 0, at_eof=True)
    units = list(scan.units)
    tables = list(scan.tables)
    totals = (0, 0, 0)
    for lone in (None, fmt) if fmt is not None else (None,):
        for n, keep in enumerate(keeps(len(scanner.names), rng)):
            i = 0
            relayed = heartbeats = statements = 0
            while i < len(units):
                got = scanner.relay_run(stream, i, keep, lone)
                want = reference_run(stream, units, tables, keep, i, lone)
                have = (got.out, got.next, got.units, got.events, got.bytes, got.heartbeats)
                assert have == want[:6] and got.placeholders == 0, (i, have[1:], want[1:])
                # Every lone text the slave's check must read comes back; a framing word
                # (BEGIN, COMMIT, ...), which the check keeps whatever the rules, need not.
                texts = [(t.unit, t.db, t.sql) for t in got.lone]
                assert set(texts) <= set(want[6]) and len(set(texts)) == len(texts)
                assert {t for t in want[6] if not framing_statement(t[2])} <= set(texts)
                relayed, heartbeats, statements = relayed + got.units, heartbeats + got.heartbeats, statements + len(want[6])
                i = got.next + 1  # the unit the run stopped at goes to Python
            if n == 0 and lone is not None or fmt is None:
                totals = (relayed, heartbeats, statements)
    return totals


def _format(data: bytes):
    try:
        return read_format_description(io.BytesIO(data))[1]
    except BinlogError:
        return None


@pytest.mark.fixtures
def test_every_real_fixture_binlog(shared_fixtures):
    rng = random.Random(2387)
    relayed = heartbeats = statements = 0
    for path in fixture_files(shared_fixtures):
        data = gzip.open(path).read() if path.suffix == ".gz" else path.read_bytes()
        for share in (0.0, 0.3):
            r, h, s = assert_same_runs(with_heartbeats(data, rng, share), rng, _format(data))
            relayed, heartbeats, statements = relayed + r, heartbeats + h, statements + s
    assert relayed > 100 and heartbeats > 100  # the runs did relay and pass over something


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(binlogs(), st.integers(0, 2**32), st.sampled_from([0.0, 0.2, 0.9]))
def test_hypothesis_binlogs(spec, seed, share):
    rng = random.Random(seed)
    data = _written(spec)
    assert_same_runs(with_heartbeats(data, rng, share), rng, _format(data))


@pytest.mark.parametrize("fmt", ["row", "mixed"])
def test_generated_binlogs_with_ddl(tmp_path, fmt):
    """MariaDB binlogs with DDL among the transactions: the lone statements a run copies."""
    from dumpfilter.workload.generator import WorkloadSpec, generate

    rng = random.Random(5)
    statements = 0
    for path in generate(WorkloadSpec(seed=12, transactions=300, binlog_format=fmt, flavor="mariadb", ddl_share=0.1,
                                      max_binlog_size=30_000), tmp_path):
        data = path.read_bytes()
        statements += assert_same_runs(with_heartbeats(data, rng, 0.3), rng, _format(data))[2]
    assert statements > 20


def test_a_stream_of_only_heartbeats_and_kept_units_is_one_run():
    """The bench's shape (kept ROW transactions with Heartbeats between): one call relays it all."""
    from dumpfilter.workload.generator import WorkloadSpec, generate
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as tmp:
        (path,) = generate(WorkloadSpec(seed=3, transactions=300, ddl_share=0.0), Path(tmp))[:1]
        data = path.read_bytes()
    stream = with_heartbeats(data, random.Random(1), 0.5)
    scanner = Scanner("<test>")
    scan = scanner.units(stream, 0, 0, at_eof=True)
    first_fast = next(i for i, rec in enumerate(scan.units) if rec.fast)
    run = scanner.relay_run(stream, first_fast, b"\x01" * len(scanner.names))
    out, nxt, relayed, size, heartbeats = run.out, run.next, run.units, run.bytes, run.heartbeats
    rest = list(scan.units)[nxt:]
    assert all(rec.kind == "control" for rec in rest)  # only the file's end (Rotate, Stop) is left
    assert relayed > 250 and heartbeats > 100 and size == len(out)
    assert out == b"".join(stream[r.start : r.end] for r in list(scan.units)[first_fast:nxt]
                           if not (r.kind == "control" and r.events == 1 and stream[r.start + 4] in HEARTBEATS))


def _ddl_and_emptied(tmp_path):
    """A generated MariaDB MIXED binlog's bytes and format, its first lone DDL unit, and an
    emptied unit as the empty-transaction policy sends it (that DDL's GTID and a COMMIT)."""
    from dumpfilter.codec.encode import build_event, query_body
    from dumpfilter.workload.generator import WorkloadSpec, generate

    path = generate(WorkloadSpec(seed=3, transactions=60, binlog_format="mixed", flavor="mariadb", ddl_share=0.2,
                                 max_binlog_size=1 << 30), tmp_path)[0]
    data = path.read_bytes()
    fmt = _format(data)
    scan = Scanner("<test>").units(data, 4, 0, at_eof=True)
    ddl = next(rec for rec in scan.units if rec.events == 2 and rec.flags & LONE == LONE)
    emptied = data[ddl.start : ddl.start + ddl.gtid_size] + build_event(EventType.QUERY, query_body("COMMIT"),
                                                                          fmt=fmt).raw
    return data, fmt, ddl, emptied


def test_framing_words_are_not_handed_back(tmp_path):
    """The empty-transaction policy's emptied units (a MariaDB GTID and a COMMIT) are relayed by
    the run without their text coming back for the slave's check, which keeps framing words
    whatever the rules (issue #57: a text per emptied unit cost the slave 1.4 s of its 4.7 s on a
    250 MB MIXED binlog); a DDL's text still comes back, with its unit."""
    data, fmt, ddl, emptied = _ddl_and_emptied(tmp_path)
    stream = data[:ddl.start] + emptied * 3 + data[ddl.start : ddl.end]
    scanner = Scanner("<test>")
    units = list(scanner.units(stream, 4, 0, at_eof=True).units)
    first = next(k for k, rec in enumerate(units) if rec.start == ddl.start)
    run = scanner.relay_run(stream, first, b"\x01" * len(scanner.names), fmt)
    assert (run.next, run.units) == (first + 4, 4)
    assert run.out == stream[ddl.start:]
    assert [(t.unit, t.sql) for t in run.lone] == [(first + 3, query_text(stream, units[first + 3].start
                                                                             + ddl.gtid_size, ddl.end + 3 * len(emptied),
                                                                             fmt)[1])]


def test_a_batch_relayed_whole_is_handed_back_as_it_came(tmp_path):
    """An empty-transaction stream's batch is kept units and emptied ones back to back: relayed
    whole, the run hands back the batch itself, not a copy of it (about 1 MB a batch, issue #57
    goal 3); relayed from a later unit on, a view of the batch's bytes."""
    data, fmt, ddl, emptied = _ddl_and_emptied(tmp_path)
    batch = emptied * 3 + data[ddl.start : ddl.end]
    scanner = Scanner("<test>")
    scanner.load_format(fmt.raw)
    units = list(scanner.units(batch, 0, 0, at_eof=True).units)
    keep = b"\x01" * len(scanner.names)
    run = scanner.relay_run(batch, 0, keep, fmt)
    assert (run.next, run.units, run.bytes) == (len(units), 4, len(batch))
    assert run.out is batch
    later = scanner.relay_run(batch, 1, keep, fmt)
    assert isinstance(later.out, memoryview) and later.out.obj is batch
    assert later.out == batch[len(emptied):]
