"""A Dump reply's wire bytes as the master writes them (`grpc_server._dump_reply_bytes`: the
events' pieces written straight in beside protobuf's serialization of the other fields) read back
by protobuf as the message protobuf itself would have made, whatever the pieces and their size
(the length's varint from one to four bytes)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from dumpfilter.master.serve.grpc_server import _dump_reply_bytes
from dumpfilter.v1 import dump_pb2

pieces = st.lists(st.one_of(st.binary(max_size=300),
                            st.integers(0, 2).map(lambda k: bytes(range(256)) * (1 << (4 * k)))),
                  max_size=5)


@settings(max_examples=200, deadline=None)
@given(parts=pieces, caught_up=st.booleans(), transactions=st.integers(0, (1 << 32) - 1),
       gtid=st.text(max_size=40), warnings=st.lists(st.text(max_size=20), max_size=3))
def test_the_reply_reads_back_as_the_message_protobuf_makes(parts, caught_up, transactions, gtid, warnings):
    fields = dict(position=dump_pb2.Position(file="bin.000002", pos=12345), transactions=transactions,
                  caught_up=caught_up, gtid_state=gtid, warnings=warnings)
    expected = dump_pb2.DumpBatch(events=b"".join(parts), **fields)
    wire = _dump_reply_bytes((dump_pb2.DumpBatch(**fields), parts))
    assert dump_pb2.DumpBatch.FromString(wire) == expected
    assert len(wire) == len(expected.SerializeToString())


def test_lengths_at_every_varint_width():
    for size in (0, 1, 127, 128, 16_383, 16_384, (1 << 21) - 1, 1 << 21, 5 << 20):
        events = bytes(size)
        got = dump_pb2.DumpBatch.FromString(_dump_reply_bytes((dump_pb2.DumpBatch(heartbeat=True), [events])))
        assert got.events == events and got.heartbeat
