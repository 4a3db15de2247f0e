"""Fuzz target: the lazy event decoders (dumpfilter/codec/event.py) over events of the real fixture
binlogs and of a generated workload, mutated (bytes flipped, bodies cut or grown, length fields
pushed past the body). Every decoder the event's type has must answer or raise a BinlogError
naming the offset; never IndexError, struct.error, ValueError..."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dumpfilter.codec import BinlogReader, EventType
from dumpfilter.codec.constants import HEADER_LEN, QUERY_EVENT_TYPES, ROWS_EVENT_TYPES
from dumpfilter.errors import BinlogError
from dumpfilter.codec.event import Event
from dumpfilter.binlogs import binlog_paths, open_binlog
from dumpfilter.workload.generator import WorkloadSpec, generate
from tests.fuzz.fuzz_support import TARGET_TIMEOUT, FUZZ, FUZZ_CHEAP, only_project_errors

pytestmark = pytest.mark.timeout(TARGET_TIMEOUT)

SHARED = Path(__file__).resolve().parents[2].parent / "shared" / "fixtures" / "real_binlogs"
DECODED_TYPES = {EventType.TABLE_MAP, EventType.ROTATE, EventType.XID, EventType.PREVIOUS_GTIDS,
                 EventType.MARIADB_GTID_LIST, EventType.MARIADB_GTID, EventType.GTID, EventType.ANONYMOUS_GTID,
                 EventType.GTID_TAGGED, EventType.INCIDENT, EventType.BINLOG_CHECKPOINT,
                 EventType.TRANSACTION_PAYLOAD, EventType.ANNOTATE_ROWS, EventType.ROWS_QUERY,
                 *QUERY_EVENT_TYPES, *ROWS_EVENT_TYPES}


def _events_of(path: Path, limit: int = 400) -> list[Event]:
    """Up to `limit` events of one file, a few of each type (the corpus)."""
    out, per_type = [], {}
    try:
        with open_binlog(path) as stream:
            for event in BinlogReader(stream, str(path)):
                if event.type_code in DECODED_TYPES and per_type.get(event.type_code, 0) < 12:
                    per_type[event.type_code] = per_type.get(event.type_code, 0) + 1
                    out.append(Event(event.raw, event.pos, event.fmt))
                if len(out) >= limit:
                    break
    except (BinlogError, OSError, EOFError):
        pass  # a fixture our reader refuses contributes what it read before
    return out


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> list[Event]:
    directory = tmp_path_factory.mktemp("fuzz-binlog")
    generate(WorkloadSpec(seed=13, transactions=300, max_binlog_size=100_000), directory)
    events = [e for p in binlog_paths(directory) for e in _events_of(p)]
    if SHARED.is_dir():
        for path in sorted(p for p in SHARED.rglob("*") if p.is_file() and not p.name.endswith(".md")):
            events.extend(_events_of(path))
    assert len({e.type_code for e in events}) >= 8
    return events


def _mutated(event: Event, cut: int, grow: bytes, flips: list[tuple[int, int]]) -> Event:
    """The event with its body cut by `cut` bytes, `grow` appended, bytes flipped; the header's
    event_size stays consistent with the bytes (what a reader would hand over)."""
    raw = bytearray(event.raw)
    body_end = max(HEADER_LEN, len(raw) - cut)
    raw = raw[:body_end] + grow
    for offset, value in flips:
        if len(raw) > HEADER_LEN:
            raw[HEADER_LEN + offset % (len(raw) - HEADER_LEN)] = value
    struct.pack_into("<I", raw, 9, len(raw))
    return Event(bytes(raw), event.pos, event.fmt)


def _decode_all(event: Event) -> None:
    t = event.type_code
    if event.is_query:
        event.query, event.db, event.sql
    if t == EventType.TABLE_MAP:
        event.table_names, event.table_map, event.table_id, event.db, event.table
    if event.is_rows:
        event.table_id, event.rows_flags
    if event.is_gtid:
        event.gtid_info, event.gtid
        if t == EventType.MARIADB_GTID:
            event.is_standalone
    if t in (EventType.PREVIOUS_GTIDS, EventType.MARIADB_GTID_LIST):
        event.gtid_set
    if t == EventType.ROTATE:
        event.rotate
    if t == EventType.TRANSACTION_PAYLOAD:
        event.transaction_payload
        for inner in event.payload_events():
            _decode_all(inner)
    if t in (EventType.ANNOTATE_ROWS, EventType.ROWS_QUERY):
        event.sql


@FUZZ_CHEAP
@given(data=st.data(), cut=st.integers(0, 64), grow=st.binary(max_size=8),
       flips=st.lists(st.tuples(st.integers(0, 1 << 16), st.integers(0, 255)), max_size=6))
def test_lazy_decoders_raise_only_binlog_errors(corpus, data, cut, grow, flips):
    event = data.draw(st.sampled_from(corpus))
    mutated = _mutated(event, cut, grow, flips)
    with only_project_errors(f"{mutated!r}"):
        _decode_all(mutated)


@pytest.mark.parametrize("field", ["db_len", "status_len"])
def test_query_with_a_length_past_the_body_names_the_offset(corpus, field):
    query = next(e for e in corpus if e.type_code == EventType.QUERY)
    raw = bytearray(query.raw)
    at = HEADER_LEN + 8 if field == "db_len" else HEADER_LEN + 11
    if field == "db_len":
        raw[at] = 255
    else:
        struct.pack_into("<H", raw, at, 0xFFFF)
    with pytest.raises(BinlogError, match=rf"at byte {query.pos}: malformed QUERY event"):
        Event(bytes(raw), query.pos, query.fmt).query


def test_table_map_with_a_db_length_past_the_body_names_the_offset(corpus):
    table_map = next(e for e in corpus if e.type_code == EventType.TABLE_MAP)
    raw = bytearray(table_map.raw)
    raw[HEADER_LEN + table_map.fmt.post_header_len(EventType.TABLE_MAP)] = 250
    with pytest.raises(BinlogError, match=rf"at byte {table_map.pos}: malformed TABLE_MAP event: the db or table"):
        Event(bytes(raw), table_map.pos, table_map.fmt).table_names


@pytest.mark.parametrize("type_code, decoder", [(EventType.ROTATE, "rotate"),
                                                (EventType.MARIADB_GTID, "gtid_info"),
                                                (EventType.MARIADB_GTID_LIST, "gtid_set")])
def test_short_control_events_name_the_offset(corpus, type_code, decoder):
    event = next(e for e in corpus if e.type_code == type_code)
    short = _mutated(event, len(event.raw) - HEADER_LEN - 2, b"", [])
    if decoder == "gtid_set":  # a count of entries the body does not hold
        short = _mutated(event, 0, b"", [])
        raw = bytearray(short.raw)
        struct.pack_into("<I", raw, HEADER_LEN, 1000)
        short = Event(bytes(raw), event.pos, event.fmt)
    with pytest.raises(BinlogError, match=rf"at byte {event.pos}: malformed"):
        getattr(short, decoder)


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> list[bytes]:
    directory = tmp_path_factory.mktemp("fuzz-files")
    generate(WorkloadSpec(seed=17, transactions=60, max_binlog_size=20_000), directory)
    out = [p.read_bytes() for p in binlog_paths(directory)][:3]
    if SHARED.is_dir():
        out += [p.read_bytes() for p in sorted(SHARED.rglob("*")) if p.is_file() and p.stat().st_size < 200_000
                and not p.name.endswith((".md", ".gz"))][:6]
    return out


@FUZZ
@given(data=st.data(), flips=st.lists(st.tuples(st.integers(0, 1 << 20), st.integers(0, 255)), min_size=1, max_size=4),
       cut=st.integers(0, 1 << 20))
def test_whole_file_reads_of_mutated_binlogs_raise_only_binlog_errors(files, data, flips, cut):
    """The codec's readers and the decoders a walk calls, over whole mutated files (the boundary
    between the byte walk and the lazy decoders): BinlogError or events, nothing else."""
    import io

    raw = bytearray(data.draw(st.sampled_from(files)))
    for offset, value in flips:
        raw[offset % len(raw)] = value
    raw = bytes(raw[: max(4, len(raw) - cut % len(raw))])
    with only_project_errors("mutated file"):
        for event in BinlogReader(io.BytesIO(raw), "<fuzz>", verify_checksums=data.draw(st.booleans())):
            _decode_all(event)
