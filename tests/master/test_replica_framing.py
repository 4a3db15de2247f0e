"""The MySQL endpoint's batches framed by the core (`dump.framed_batch`, `_core.replica_frames`)
are the packets the per-event way makes (an Event per event, the skip policy asked, each framed
behind a 0x00 byte), with the same sequence ids and the same counters after every batch: where
the replica counts itself (ReplicaCount: position, GTIDs per domain) and the master's position
beside it (PositionKeeper). Every format and flavor, with and without Annotate_rows, a slave
that keeps everything and ones that skip (heartbeats in their batches)."""

from __future__ import annotations

import pytest

from dumpfilter import skip_policy
from dumpfilter.binlogs import open_binlog
from dumpfilter.codec import read_format_description
from dumpfilter.master.endpoint.dump import framed_batch, replica_events
from dumpfilter.master.endpoint.positions import ReplicaCount
from dumpfilter.master.protocol.packets import PacketStream
from dumpfilter.master.model import ChannelSpec, Registration
from dumpfilter.master.service import DumpService
from dumpfilter.codec.rename import PositionKeeper
from dumpfilter.rules.renamer import live_renamer
from dumpfilter.rules.ruleset import RuleSet
from dumpfilter.workload.generator import FLAVORS, FORMATS, WorkloadSpec, generate

REGS = [Registration(server_id=1),
        Registration(server_id=2, filters=(ChannelSpec(None, RuleSet(do_db=("db2",))),)),
        Registration(server_id=3, filters=(ChannelSpec(None, RuleSet(ignore_table=("db1.t1", "db3.t2"))),))]


class _Replica:
    """One replica's side of the endpoint's dump loop: its packet sequence and counters."""

    def __init__(self, directory, first: str, fmt):
        self.stream = PacketStream(None)  # type: ignore[arg-type]  # framing only: nothing is sent
        self.count = ReplicaCount(directory, skip_policy.named(skip_policy.DEFAULT), file=first, pos=4,
                                  gtid_state=None, fmt=fmt, server_id=9)
        self.names = PositionKeeper(live_renamer(lambda: None), file=first, pos=4, server_id=9)

    def per_event(self, batch, annotate: bool, fmt) -> bytes:
        return b"".join(self.stream.frame(b"\x00" + e.raw) for e in self.count.events(batch, self.names.events(
            replica_events(batch.events, self.count.policy, annotate=annotate, fmt=fmt, server_id=9,
                           end=batch.position[1] if batch.position else None))))

    def state(self):
        c, n = self.count, self.names
        return self.stream.seq, c.file, c.pos, dict(c.has), n.file, n.master_pos, n.counted


@pytest.mark.parametrize("annotate", [True, False])
@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("flavor", FLAVORS)
def test_core_framing_is_the_per_event_framing(tmp_path, flavor, fmt, annotate):
    generate(WorkloadSpec(seed=23, transactions=400, binlog_format=fmt, flavor=flavor, max_binlog_size=150_000,
                          ddl_share=0.03), tmp_path)
    svc = DumpService(tmp_path, batch_bytes=3_000)
    first = svc.segments.first_file()
    with open_binlog(tmp_path / first) as f:
        binlog_fmt = read_format_description(f, first)[1]
    for reg in REGS:
        svc.register(reg)
        per_event, framed = _Replica(tmp_path, first, binlog_fmt), _Replica(tmp_path, first, binlog_fmt)
        by_core = batches = 0
        for batch in svc.stream(reg.server_id):
            batches += 1
            expected = per_event.per_event(batch, annotate, binlog_fmt)
            got = None if batch.caught_up else framed_batch(
                batch.events, seq=framed.stream.seq, annotate=annotate, count=framed.count, names=framed.names)
            if got is None:
                data = framed.per_event(batch, annotate, binlog_fmt)
            else:
                data, framed.stream.seq = got
                by_core += 1
            assert data == expected, f"server_id {reg.server_id}, batch {batches}: other packets"
            assert framed.state() == per_event.state(), f"server_id {reg.server_id}, batch {batches}"
            if batch.caught_up:
                break
        # Most batches go the core's way (those with a Rotate or an FDE, and the last, do not).
        assert by_core * 3 >= batches > 3, (reg.server_id, by_core, batches)
