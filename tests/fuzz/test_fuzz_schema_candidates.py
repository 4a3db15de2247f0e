"""Fuzz target: `_core.schema_candidates`, split's first pass (sql::query_for_python).

Query and Query_compressed events with any post-header (db and status-variable lengths that may
run past the event), any db name and any text bytes (compressed or not, well or badly): the
core hands Python every event whose text `is_schema_statement` accepts and every event Python's
decoding refuses (so the pass still reports it), and never fails otherwise."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dumpfilter.codec import EventType
from dumpfilter.codec import encode as enc
from dumpfilter.codec.constants import MAGIC
from dumpfilter.codec.event import Event
from dumpfilter.codec.packing import mariadb_compress
from dumpfilter.codec.scanner import Scanner
from dumpfilter.errors import DumpFilterError
from dumpfilter.rules.schema import is_schema_statement
from tests.fuzz.fuzz_support import FUZZ, TARGET_TIMEOUT, only_project_errors
from tests.spark_jobs.test_split_first_pass import TEXTS

pytestmark = pytest.mark.timeout(TARGET_TIMEOUT)

FDE = enc.format_description("10.11.6-MariaDB-log")
_POST = struct.Struct("<IIBHH")

_text = st.one_of(TEXTS.map(lambda s: s.encode("utf-8", "surrogateescape")), st.binary(max_size=60))
# (type, db_len, status_len, db and status bytes, text, how the text is stored)
_event = st.tuples(st.sampled_from([EventType.QUERY, EventType.QUERY_COMPRESSED]),
                   st.one_of(st.none(), st.integers(0, 255)), st.one_of(st.none(), st.integers(0, 0xFFFF)),
                   st.binary(max_size=12), _text, st.sampled_from(["plain", "compressed", "cut"]))


def _body(t: int, db_len: int | None, status_len: int | None, head: bytes, text: bytes, stored: str) -> bytes:
    """A Query body: db_len and status_len as given (None: what `head` holds, a db name)."""
    if stored == "compressed" or (stored == "cut" and t == EventType.QUERY_COMPRESSED):
        text = mariadb_compress(text)[: None if stored == "compressed" else len(text) // 2 + 1]
    db_len = len(head) if db_len is None else db_len
    status_len = 0 if status_len is None else status_len
    return _POST.pack(1, 0, db_len, 0, status_len) + head + b"\0" + text


@FUZZ
@given(st.lists(_event, min_size=1, max_size=6))
def test_python_sees_every_schema_statement_and_every_query_it_refuses(events):
    data = bytearray(MAGIC + FDE.raw)
    positions = []
    for fields in events:
        positions.append(len(data))
        data += enc.build_event(fields[0], _body(*fields), fmt=FDE.fmt).raw
    with only_project_errors("schema_candidates"):
        offsets, stop, error = Scanner("<fuzz>").schema_candidates(bytes(data), 4, 0)
        assert error is None and stop == len(data)
        found = set(offsets.tolist())
        for pos in positions:
            size = int.from_bytes(data[pos + 9 : pos + 13], "little")
            try:
                sql = Event(bytes(data[pos : pos + size]), pos, FDE.fmt).query.sql
            except DumpFilterError:
                assert pos in found, "a Query Python's decoding refuses was passed over"
                continue
            assert pos in found or not is_schema_statement(sql), sql
