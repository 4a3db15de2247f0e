"""The Python reference of `dumpfilter experiment`'s counting (spark_jobs/tasks/bandwidth.py): every unit
of a chunk through TransactionFilter, one slave at a time, as the counting was before it ran on the
compiled walk. Tests only: the product decides with the core's walk (one decision path).

What master-side filtering would send each slave, counted per chunk of binlog (pure).

For every slave of a topology and every unit of a chunk: the events and bytes a dump thread reads
(everything) and what it sends with master-side filtering, counted as the master's stream
(master/stream.py `_unit`) counts them, in the master's own counter type (dumpfilter.sent):

- the slave's rules ANDed with the master policy's gate for its identity (`gated`, as the master
  composes them), through the TransactionFilter every consumer shares;
- control events (FDE, Gtid_list/Previous_GTIDs, Rotate, Stop, ...) are sent as they are, but
  for a Heartbeat written in the binlog, which the master reads and never forwards;
- a partial or skipped transaction is sent as its skip policy says (dumpfilter.skip_policy: the
  same objects the master's stream asks), and counted by the policy's `tally`;
- a skipped stretch costs one HEARTBEAT event (body: the binlog file name), sent before the next
  event that is sent, or once the stream has read the whole binlog (a stretch ending one file
  without a Rotate goes before the next file's FDE: the same one heartbeat).

Heartbeat stretches can cross chunk boundaries: `merge_counts` joins them again, so the totals do
not depend on how files were cut.
"""

from __future__ import annotations

from dumpfilter.codec import EventType, Transaction
from dumpfilter.codec.constants import HEADER_LEN
from dumpfilter.codec.transactions import CONTROL
from dumpfilter.rules.decider import gated
from dumpfilter.rules.evaluate import RuleEngine
from dumpfilter.rules.transaction_filter import KEEP, KEPT, PARTIAL, TransactionFilter
from dumpfilter import skip_policy
from dumpfilter.spark_jobs.tasks.bandwidth import ChunkCounts, SlaveCounts
from dumpfilter.spark_jobs.tasks.chunks import Chunk, read_units

_NOT_FORWARDED = (EventType.HEARTBEAT, EventType.HEARTBEAT_V2)  # read by the master's stream, never sent


class _SlaveCounter:
    """One slave over one chunk, as master/stream.py's `_unit` sends and counts each unit."""

    def __init__(self, name: str, rules, settings, policy_name: str, gate, chunk: Chunk, crc_len: int):
        self.filter = TransactionFilter(gated(RuleEngine(rules, settings), gate), empty_transactions=KEEP)
        self.policy = skip_policy.named(policy_name)
        self.out = ChunkCounts(chunk.file_index, chunk.start, SlaveCounts(slave=name))
        self.out.heartbeat_size = HEADER_LEN + len(chunk.name.encode()) + crc_len
        self.pending = False
        self.sent_any = False

    def _send(self, events) -> int:
        c = self.out.counts
        if self.pending:
            c.heartbeats += 1
            c.heartbeat_bytes += self.out.heartbeat_size
            c.events_sent += 1
            c.bytes_sent += self.out.heartbeat_size
            self.pending = False
        self.sent_any = True
        size = sum(e.size for e in events)
        c.events_sent += len(events)
        c.bytes_sent += size
        return size

    def _skip_stretch(self) -> None:
        if not self.sent_any and not self.pending:
            self.out.leading_skip = True
        self.pending = True

    def _skipped(self, events: int, size: int) -> None:
        c = self.out.counts
        c.events_skipped += max(0, events)
        c.bytes_skipped += max(0, size)

    def unit(self, txn: Transaction) -> None:
        c = self.out.counts
        c.events_read += len(txn.events)
        c.bytes_read += txn.size
        if txn.kind == CONTROL:
            event = txn.events[0]
            if event.type_code == EventType.FORMAT_DESCRIPTION:
                self.filter.reset()
            if event.type_code in _NOT_FORWARDED:
                return
            c.kept_events += 1
            c.kept_bytes += self._send(txn.events)
            return
        result = self.filter.filter(txn)
        if result.outcome in (KEPT, PARTIAL):
            kept = result.events
            events = kept if result.outcome == KEPT else self.policy.partial(txn.events, kept)
            sent = self._send(events)
            c.kept_bytes += sent - self.policy.tally(c, events, skipped=False)
            c.kept_events += len(kept)
            c.transactions_kept += result.outcome == KEPT
            c.transactions_partial += result.outcome == PARTIAL
            self._skipped(len(txn.events) - len(kept), txn.size - sum(e.size for e in kept))
            return
        c.transactions_skipped += 1
        self._skipped(len(txn.events), txn.size)
        events = self.policy.skipped(txn.events, result)
        if events is None:
            self._skip_stretch()
        else:
            self._send(events)
            self.policy.tally(c, events, skipped=True)

    def finish(self) -> ChunkCounts:
        if self.pending:  # flushed before the next file's FDE, or once the whole binlog is read: counted here
            c = self.out.counts
            c.heartbeats += 1
            c.heartbeat_bytes += self.out.heartbeat_size
            c.events_sent += 1
            c.bytes_sent += self.out.heartbeat_size
            self.out.trailing_skip = True
        return self.out


def count_chunk(chunk: Chunk, slaves, gates=None, *, verify_checksums: bool = True) -> list[ChunkCounts]:
    """Counts of every slave (`dumpfilter.topology.SlaveSpec`-like: name, rules, settings,
    skip_policy) over one chunk; `gates`: each slave's master-policy gate (None: unbounded)."""
    gates = list(gates) if gates is not None else [None] * len(slaves)
    counters = None
    for txn in read_units(chunk, verify_checksums=verify_checksums):
        if counters is None:
            crc_len = txn.events[0].fmt.checksum_len if txn.events[0].fmt is not None else 0
            counters = [_SlaveCounter(s.name, s.rules, s.settings, s.skip_policy, gate, chunk, crc_len)
                        for s, gate in zip(slaves, gates)]
        for counter in counters:
            counter.unit(txn)
    return [counter.finish() for counter in counters or ()]
