"""A stream's batch spans segments (`stream.BATCH_SEGMENTS`, issue #30): a slave sent a fraction
of the binlog makes batches in proportion to what it is sent and to the binlog's segments over
BATCH_SEGMENTS, not one per segment; what it is sent, and where it ends, are what a batch per
segment gives."""

from __future__ import annotations

import math

from dumpfilter.codec.constants import EventType

from dumpfilter.master.stream import slave_stream as stream_module
from dumpfilter.master.model import ChannelSpec, Registration
from dumpfilter.rules.ruleset import RuleSet
from tests.master.test_kept_segments import SEGMENT_BYTES, _binlog, _streamed
from tests.master.test_mapped_segments import mapping  # noqa: F401 - the fixture

REGS = [Registration(server_id=2, filters=(ChannelSpec(None, RuleSet(do_db=("db2",))),))]


def _sent(out):
    """The events sent but the heartbeats (a skipped stretch across a batch cut made one each
    side: fewer cuts, fewer of them), where the stream ended, and its counts."""
    batches, stats = out[2]
    data = b"".join(b[0] if isinstance(b[0], bytes) else b"".join(b[0]) for b in batches)
    events, at = [], 0
    while at < len(data):
        size = int.from_bytes(data[at + 9 : at + 13], "little")
        if data[at + 4] != EventType.HEARTBEAT:
            events.append(data[at : at + size])
        at += size
    assert at == len(data)
    return (events, batches[-1][1], stats.transactions_kept, stats.transactions_skipped, stats.kept_bytes,
            stats.bytes_read)


def test_a_batch_spans_segments(tmp_path, mapping, monkeypatch):  # noqa: F811
    _binlog(tmp_path)
    out, cache = _streamed(tmp_path, REGS, batch_bytes=1 << 30)  # never full: cut only by segments
    segments = cache.reads
    assert segments > 4 * stream_module.BATCH_SEGMENTS
    batches = out[2][0]
    assert len(batches) <= math.ceil(segments / stream_module.BATCH_SEGMENTS) + 1 <= segments // 2, \
        f"{len(batches)} batches over {segments} segments of {SEGMENT_BYTES} bytes"
    monkeypatch.setattr(stream_module, "BATCH_SEGMENTS", 1)  # a batch per segment, as before
    per_segment, _ = _streamed(tmp_path, REGS, batch_bytes=1 << 30)
    assert len(per_segment[2][0]) >= segments - 1
    assert _sent(out) == _sent(per_segment)
