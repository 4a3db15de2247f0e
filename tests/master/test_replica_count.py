"""endpoint/positions.ReplicaCount and skip_policy.replica_tail, event by event: what a real
replica counts of its stream, and what it is sent once caught up after a skipped tail (the real
replicas' side is tests/master/test_replica_positions.py)."""

from __future__ import annotations

import pytest

from dumpfilter.codec import EventType, read_events
from dumpfilter.codec.constants import LOG_EVENT_ARTIFICIAL_F, LOG_EVENT_BINLOG_IN_USE_F
from dumpfilter.codec.encode import build_event, format_description, mariadb_gtid_body
from dumpfilter.codec.gtid import MariadbGtidList
from dumpfilter.master.model import Batch
from dumpfilter.master.endpoint.positions import ReplicaCount
from dumpfilter.skip_policy import NAMES, named


def _sent(count: ReplicaCount, batch: Batch, fde) -> list:
    out = list(count.events(batch, read_events(b"\xfebin" + fde.raw + batch.events, "<batch>")[1:]))
    return read_events(b"\xfebin" + fde.raw + b"".join(e.raw for e in out), "<sent>")[1:]


@pytest.mark.parametrize("policy", NAMES)
def test_a_mariadb_replica_gets_one_gtid_list_at_the_end_of_a_skipped_tail(tmp_path, policy):
    fde = format_description("10.11.19-MariaDB-log", created=1_700_000_000)
    fmt = fde.fmt
    gtid = build_event(EventType.MARIADB_GTID, mariadb_gtid_body(7, domain=1), fmt=fmt, server_id=3, log_pos=500)
    xid = build_event(EventType.XID, b"\1" * 8, fmt=fmt, server_id=3, log_pos=531)
    count = ReplicaCount(tmp_path, named(policy), file="bin.000002", pos=4, gtid_state="0-3-40", fmt=fmt, server_id=9)
    # A kept transaction of domain 1, then (skipped, never sent) 0-3-41 and 1-3-8 up to 900.
    sent = _sent(count, Batch([gtid.raw, xid.raw], ("bin.000002", 531), caught_up=False,
                              gtid_state="0-3-41,1-3-7"), fde)
    assert [e.type_code for e in sent] == [EventType.MARIADB_GTID, EventType.XID] and count.pos == 531
    sent = _sent(count, Batch([], ("bin.000002", 900), caught_up=True, heartbeat=True, gtid_state="0-3-41,1-3-8"), fde)
    assert [e.type_code for e in sent] == [EventType.MARIADB_GTID_LIST]
    listed = MariadbGtidList.decode(sent[0].body)
    # FLAG_IGN_GTIDS with the last GTID per domain the replica never got (0-3-40 it had at connect)
    assert listed.flags << 28 == 1 << 29 and listed.gtids == {(0, 3): 41, (1, 3): 8}
    assert (sent[0].log_pos, sent[0].timestamp, sent[0].flags, sent[0].server_id) == (900, 0, LOG_EVENT_ARTIFICIAL_F, 9)
    assert count.pos == 900
    # Once per idle point: the next heartbeats at the same end add nothing.
    assert _sent(count, Batch([], ("bin.000002", 900), caught_up=True, heartbeat=True,
                              gtid_state="0-3-41,1-3-8"), fde) == []
    # A stretch skipped without a GTID moves the position only: an empty list, no flag.
    sent = _sent(count, Batch([], ("bin.000002", 950), caught_up=True, gtid_state="0-3-41,1-3-8"), fde)
    assert MariadbGtidList.decode(sent[0].body) == MariadbGtidList({}, 0) and sent[0].log_pos == 950
    # Not caught up, or in another file than the replica counts itself in: nothing is added.
    assert _sent(count, Batch([], ("bin.000002", 990), caught_up=False), fde) == []
    assert _sent(count, Batch([], ("bin.000003", 990), caught_up=True), fde) == []


def test_a_rotate_and_heartbeats_are_counted_as_a_replica_counts_them(tmp_path):
    fde = format_description("10.11.19-MariaDB-log")
    fmt = fde.fmt
    count = ReplicaCount(tmp_path, named("heartbeat"), file="bin.000001", pos=4, gtid_state=None, fmt=fmt, server_id=9)
    rotate = build_event(EventType.ROTATE, (4).to_bytes(8, "little") + b"bin.000002", fmt=fmt, log_pos=800)
    heartbeat = build_event(EventType.HEARTBEAT, b"bin.000002", fmt=fmt, log_pos=700)
    _sent(count, Batch([rotate.raw, heartbeat.raw], ("bin.000002", 4), caught_up=False), fde)
    assert (count.file, count.pos) == ("bin.000002", 4)
    sent = _sent(count, Batch([], ("bin.000002", 4), caught_up=True), fde)
    assert sent == []  # already at the end: nothing skipped


def test_a_mysql_replica_gets_what_a_dump_thread_starts_with(tmp_path):
    """MySQL replicas know no Gtid_list: an artificial Rotate to the same file at the end, then the
    file's FDE as a dump thread sends it (log_pos 0, created 0, not in use)."""
    fde = format_description("8.0.36", created=1_700_000_000)
    fde = fde.with_header(flags=fde.flags | LOG_EVENT_BINLOG_IN_USE_F)
    events = named("heartbeat").replica_tail(flavor="mysql", file="binlog.000004", end=1234, gtids={}, fmt=fde.fmt,
                          server_id=9, fde=fde)
    rotate, sent_fde = read_events(b"\xfebin" + fde.raw + b"".join(e.raw for e in events), "<sent>")[1:]
    assert rotate.type_code == EventType.ROTATE and rotate.rotate == (1234, "binlog.000004")
    assert (rotate.log_pos, rotate.timestamp, rotate.flags, rotate.server_id) == (0, 0, LOG_EVENT_ARTIFICIAL_F, 9)
    assert sent_fde.type_code == EventType.FORMAT_DESCRIPTION and sent_fde.log_pos == 0
    assert sent_fde.fmt.created == 0 and not sent_fde.flags & LOG_EVENT_BINLOG_IN_USE_F
    assert sent_fde.fmt.server_version == fde.fmt.server_version
