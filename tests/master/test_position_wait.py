"""A live stream's new position over skipped transactions only waits (master.stream.slave_stream.POSITION_WAIT)
for the next kept data, which it goes with as one Heartbeat before it; at a wait of 0 each
skipped transaction appended is a batch of its own (the old behaviour). No clock is asserted:
with the wait at an hour, the first batch after the stream reported the end is the kept one."""

from __future__ import annotations

import struct
import threading
import time

import grpc
import pytest

from dumpfilter.binlogs import TailingReader
from dumpfilter.codec import EventType, group_transactions
from dumpfilter.master.stream import slave_stream as stream_module
from dumpfilter.rules.evaluate import RuleEngine
from dumpfilter.rules.ruleset import RuleSet, Settings
from dumpfilter.rules.transaction_filter import KEEP, KEPT, TransactionFilter
from dumpfilter.v1 import dump_pb2, dump_pb2_grpc

from tests.support.waiting import wait_for

pytestmark = [pytest.mark.grpc, pytest.mark.timeout(120)]

LAST = "master-bin.000008"
SKIPPED_RUN = 3  # skipped transactions appended one by one before the kept one


def _plan(binlog_dir):
    """(cut, [ends of SKIPPED_RUN skipped transactions], end of the kept one after them) in the
    last file, as the offline filter decides for do-db db1."""
    tf = TransactionFilter(RuleEngine(RuleSet(do_db=("db1",)), Settings()), empty_transactions=KEEP)
    events = [e for name, e in TailingReader(binlog_dir, LAST) if name == LAST]
    txns = [t for t in group_transactions(events) if t.kind != "control"]
    kept = [tf.filter(t).outcome == KEPT for t in txns]
    for i in range(len(txns) - SKIPPED_RUN):
        if not any(kept[i:i + SKIPPED_RUN]) and kept[i + SKIPPED_RUN] and i > 0:
            start = txns[i].events[0].pos
            ends = [t.events[-1].pos + t.events[-1].size for t in txns[i:i + SKIPPED_RUN + 1]]
            return start, ends[:-1], ends[-1]
    pytest.skip("no run of skipped transactions then a kept one in the workload's last file")


@pytest.mark.parametrize("wait,late", [(3600.0, False), (3600.0, True), (0.0, False)])
def test_a_live_position_over_skipped_transactions_waits_for_kept_data(binlog_copy, master_factory, monkeypatch, wait,
                                                                        late):
    monkeypatch.setattr(stream_module, "POSITION_WAIT", wait)
    if late:  # the stream looks for the binlog's end only once the next transaction is written (CI's race, made sure)
        at_end = stream_module.SlaveStream._at_binlog_end
        monkeypatch.setattr(stream_module.SlaveStream, "_at_binlog_end", lambda self: time.sleep(0.3) or at_end(self))
    last = binlog_copy / LAST
    data = last.read_bytes()
    cut, skipped_ends, kept_end = _plan(binlog_copy)
    last.write_bytes(data[:cut])
    _, address = master_factory(binlog_copy)
    batches: list = []
    with grpc.insecure_channel(address) as channel:
        stub = dump_pb2_grpc.DumpFilterStub(channel)
        stub.Register(dump_pb2.RegisterRequest(server_id=3, filters=[dump_pb2.ChannelFilters(
            change_replication_filter="CHANGE REPLICATION FILTER REPLICATE_DO_DB = (db1)")]), timeout=30)
        call = stub.Dump(dump_pb2.DumpRequest(server_id=3, heartbeat_period=3600,
                                              position=dump_pb2.Position(file=LAST, pos=4)), timeout=60)
        def read() -> None:
            try:
                for batch in call:
                    batches.append(batch)
            except grpc.RpcError:  # cancelled at the end
                pass

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        assert wait_for(lambda: any(b.caught_up for b in batches), give_up=30)
        reported = len(batches)

        def at(pos: int) -> bool:
            slaves = stub.Stats(dump_pb2.StatsRequest(), timeout=30).slaves
            return any(s.server_id == 3 and (s.position.file, s.position.pos) == (LAST, pos) for s in slaves)

        start = cut
        for end in skipped_ends:  # appended one at a time, each read by the stream before the next
            with open(last, "ab") as f:
                f.write(data[start:end])
            start = end
            assert wait_for(lambda end=end: at(end), give_up=30)
            if wait == 0:
                assert wait_for(lambda end=end: batches[-1].position.pos == end, give_up=30)
        with open(last, "ab") as f:
            f.write(data[start:kept_end])
        assert wait_for(lambda: batches[-1].position.pos == kept_end, give_up=30)
        call.cancel()
        reader.join(30)
    after = batches[reported:]
    if wait == 0:
        assert [b.position.pos for b in after] == [*skipped_ends, kept_end]
        assert all(b.events[4] == EventType.HEARTBEAT for b in after[:-1])
        assert after[-1].events.endswith(data[skipped_ends[-1]:kept_end])
        return
    # One batch: the Heartbeat for the skipped stretch (its log_pos the stretch's end), then the
    # kept transaction, byte for byte.
    assert len(after) == 1, [b.position.pos for b in after]
    events = after[0].events
    assert events[4] == EventType.HEARTBEAT and struct.unpack_from("<I", events, 13)[0] == skipped_ends[-1]
    heartbeat_size = struct.unpack_from("<I", events, 9)[0]
    assert events[heartbeat_size:] == data[skipped_ends[-1]:kept_end]
    assert after[0].caught_up
