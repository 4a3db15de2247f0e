"""Hypothesis: encodings round-trip, the writer's output reads back as what was written, and the
streaming reader gives the same events whatever the chunk boundaries of its input."""

from __future__ import annotations

import io

from hypothesis import given, settings, strategies as st

from dumpfilter.codec import BinlogReader, BinlogWriter, EventSplitter, EventType, read_events
from dumpfilter.codec import encode as enc
from dumpfilter.codec.gtid import MariadbGtidList, MysqlGtidSet, decode_mysql_gtid, with_transaction_length
from dumpfilter.codec.packing import (
    encode_lenenc, encode_varlen, mariadb_compress, mariadb_uncompress,
    read_lenenc, read_varlen, read_varlen_signed,
)
from dumpfilter.codec.writer import fix_transaction_length

names = st.text(st.characters(min_codepoint=33, max_codepoint=0x2FF, exclude_characters="\0"), min_size=1, max_size=20)
sql_text = st.text(st.characters(min_codepoint=32, max_codepoint=0x7FF, exclude_characters="\0"), max_size=200)


@given(st.integers(0, 2**64 - 1))
def test_lenenc_round_trip(value):
    raw = encode_lenenc(value)
    assert read_lenenc(raw + b"junk", 0) == (value, len(raw))


@given(st.integers(0, 2**64 - 1))
def test_varlen_round_trip(value):
    raw = encode_varlen(value)
    assert read_varlen(raw + b"\x00", 0) == (value, len(raw))


@given(st.integers(-(2**62), 2**62))
def test_signed_varlen_round_trip(value):
    raw = encode_varlen(2 * value if value >= 0 else -2 * value - 1)  # zigzag, as MySQL writes it
    assert read_varlen_signed(raw, 0) == (value, len(raw))


@given(st.binary(max_size=5000))
def test_mariadb_compression_round_trip(data):
    assert mariadb_uncompress(mariadb_compress(data)) == data


@given(st.dictionaries(st.tuples(st.uuids().map(str), st.sampled_from(["", "tag_a", "b"])),
                       st.lists(st.integers(1, 10**6), min_size=1, max_size=20), max_size=5))
def test_mysql_gtid_set_round_trip(spec):
    s = MysqlGtidSet()
    for (source, tag), gnos in spec.items():
        for g in gnos:
            s.add(source, g, tag)
    again = MysqlGtidSet.decode(s.encode())
    assert again.intervals == s.intervals
    for (source, tag), gnos in spec.items():
        assert all((source, tag, g) in again for g in gnos)


@given(st.dictionaries(st.tuples(st.integers(0, 2**32 - 1), st.integers(0, 2**32 - 1)), st.integers(0, 2**64 - 1), max_size=6))
def test_mariadb_gtid_list_round_trip(gtids):
    lst = MariadbGtidList(dict(gtids))
    assert MariadbGtidList.decode(lst.encode()).gtids == lst.gtids


@given(st.integers(0, 2**40))
def test_transaction_length_rewrite(length):
    body = enc.mysql_gtid_body("3e11fa47-71ca-11e1-9e33-c80aa9429562", 5, transaction_length=300)
    new = with_transaction_length(EventType.GTID, body, length)
    info = decode_mysql_gtid(new, anonymous=False)
    assert info.transaction_length == length and info.gno == 5


# A random transaction stream, built with the codec's own builders.
@st.composite
def statements(draw, fde):
    fmt = fde.fmt
    kind = draw(st.sampled_from(["query", "rows", "ddl"]))
    db, table = draw(names), draw(names)
    gno = draw(st.integers(1, 2**40))
    flavor_mariadb = fmt.flavor == "mariadb"
    gtid = (enc.build_event(EventType.MARIADB_GTID, enc.mariadb_gtid_body(gno, standalone=kind == "ddl"), fmt=fmt)
            if flavor_mariadb else
            enc.build_event(EventType.GTID, enc.mysql_gtid_body("3e11fa47-71ca-11e1-9e33-c80aa9429562", gno, transaction_length=1), fmt=fmt))
    events = [gtid]
    if kind == "ddl":
        events.append(enc.build_event(EventType.QUERY, enc.query_body(draw(sql_text), db), fmt=fmt))
    else:
        if not flavor_mariadb:
            events.append(enc.build_event(EventType.QUERY, enc.query_body("BEGIN", db), fmt=fmt))
        if kind == "query":
            events.append(enc.build_event(EventType.QUERY, enc.query_body(draw(sql_text), db, compressed=flavor_mariadb and draw(st.booleans())), fmt=fmt))
        else:
            tid = draw(st.integers(1, 2**40))
            events.append(enc.build_event(EventType.TABLE_MAP, enc.table_map_body(tid, db, table), fmt=fmt))
            for _ in range(draw(st.integers(1, 3))):
                events.append(enc.build_event(EventType.WRITE_ROWS, enc.rows_body(tid, draw(st.binary(max_size=64))), fmt=fmt))
        events.append(enc.build_event(EventType.XID, enc.xid_body(draw(st.integers(0, 2**64 - 1))), fmt=fmt))
    return events


@st.composite
def binlogs(draw):
    version = draw(st.sampled_from(["8.0.36-log", "10.11.6-MariaDB-log"]))
    fde = enc.format_description(version, checksum=draw(st.booleans()))
    return fde, [draw(statements(fde)) for _ in range(draw(st.integers(0, 8)))]


@settings(max_examples=60, deadline=None)
@given(binlogs())
def test_written_binlog_reads_back(spec):
    fde, txns = spec
    out = io.BytesIO()
    writer = BinlogWriter(out, fde)
    for txn in txns:
        writer.write_transaction(txn)
    writer.rotate("next-bin.000002")
    events = read_events(out.getvalue())
    flat = [e for t in txns for e in t]
    assert [e.type_code for e in events[1:-1]] == [e.type_code for e in flat]
    for got, want in zip(events[1:-1], flat):
        assert got.log_pos == got.end_pos
        if want.type_code == EventType.QUERY:
            assert (got.db, got.sql) == (want.db, want.sql)
        if want.type_code == EventType.TABLE_MAP:
            assert got.table_map == want.table_map
        if want.is_rows:
            assert got.body == want.body
    for t in list(txns):
        fixed = fix_transaction_length(t)
        if fixed[0].type_code == EventType.GTID:
            assert fixed[0].gtid_info.transaction_length == sum(e.size for e in fixed)
    assert events[-1].rotate == (4, "next-bin.000002")


def written(fde, txns) -> bytes:
    """The bytes of a binlog holding `txns`, as BinlogWriter writes them."""
    out = io.BytesIO()
    writer = BinlogWriter(out, fde)
    for txn in txns:
        writer.write_transaction(txn)
    return out.getvalue()


class Dribble(io.RawIOBase):
    """A stream that returns reads of arbitrary sizes, as a pipe or a socket would."""

    def __init__(self, data: bytes, sizes: list[int]):
        self.data, self.sizes, self.off = data, sizes or [1], 0

    def readable(self):
        return True

    def read(self, n=-1):
        size = self.sizes[self.off % len(self.sizes)] if self.off < len(self.data) else 0
        chunk = self.data[self.off : self.off + min(size, n if n >= 0 else size)]
        self.off += len(chunk)
        return chunk


@settings(max_examples=60, deadline=None)
@given(binlogs(), st.lists(st.integers(1, 700), min_size=1, max_size=30), st.integers(1, 4096))
def test_reader_is_independent_of_chunk_boundaries(spec, sizes, chunk):
    data = written(*spec)
    whole = [e.raw for e in read_events(data)]
    streamed = [e.raw for e in BinlogReader(Dribble(data, sizes), chunk_size=chunk)]
    assert streamed == whole
    splitter = EventSplitter()
    fed = []
    for i in range(0, len(data), sizes[0]):
        splitter.feed(data[i : i + sizes[0]])
        fed.extend(e.raw for e in splitter.events())
    splitter.close()
    assert fed == whole
