"""What master-side filtering would send each slave, counted per chunk of binlog (pure).

For every slave of a topology and every unit of a chunk: the events and bytes a dump thread sends
without master-side filtering (everything), and with it (the slave's TransactionFilter applied,
plus what its skip policy sends for what it skips), following master/service.py and
proto/dumpfilter/v1/dump.proto:

- control events (FDE, Gtid_list/Previous_GTIDs, Rotate, ...) are always sent;
- a partial or skipped transaction is sent as its skip policy says (dumpfilter.skip_policy: the
  same objects the master's stream asks), and counted by the policy's `tally`;
- a skipped stretch costs one HEARTBEAT event (body: the binlog file name), sent before the next
  event that is sent or at the end of the file.

Heartbeat stretches can cross chunk boundaries: `merge_counts` joins them again, so the totals do
not depend on how files were cut.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from dumpfilter.codec import EventType, Transaction
from dumpfilter.codec.constants import HEADER_LEN
from dumpfilter.charts import saved_percent
from dumpfilter.codec.transactions import CONTROL
from dumpfilter.rules.evaluate import RuleEngine
from dumpfilter.rules.transaction_filter import KEEP, KEPT, PARTIAL, TransactionFilter
from dumpfilter import skip_policy
from dumpfilter.spark_jobs.tasks.chunks import Chunk, read_units


@dataclass
class SlaveCounts:
    """Totals for one slave (over one chunk, or merged over many)."""

    slave: str
    events_all: int = 0
    bytes_all: int = 0
    events_sent: int = 0
    bytes_sent: int = 0
    kept_events: int = 0
    kept_bytes: int = 0
    heartbeats: int = 0
    heartbeat_bytes: int = 0
    placeholders: int = 0
    placeholder_bytes: int = 0
    empty_transactions: int = 0
    empty_transaction_bytes: int = 0
    transactions_kept: int = 0
    transactions_partial: int = 0
    transactions_skipped: int = 0

    def add(self, other: SlaveCounts) -> None:
        for f in fields(self):
            if f.name != "slave":
                setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))

    def as_row(self) -> dict:
        row = {f.name: getattr(self, f.name) for f in fields(self)}
        row["saving_bytes"] = self.bytes_all - self.bytes_sent
        row["saving_pct"] = saved_percent(self.bytes_all, self.bytes_sent) or 0.0  # as the chart labels it
        return row


@dataclass
class ChunkCounts:
    """One slave's counts over one chunk, with what is needed to join heartbeat stretches."""

    file_index: int
    start: int
    counts: SlaveCounts
    leading_skip: bool = False  # the chunk opens inside a skipped stretch (nothing sent before it)
    trailing_skip: bool = False  # the chunk ends with a stretch whose heartbeat it counted
    heartbeat_size: int = 0


class _SlaveCounter:
    def __init__(self, name: str, rules, settings, policy_name: str, chunk: Chunk, crc_len: int):
        self.filter = TransactionFilter(RuleEngine(rules, settings), empty_transactions=KEEP)
        self.policy = skip_policy.named(policy_name)
        self.out = ChunkCounts(chunk.file_index, chunk.start, SlaveCounts(name))
        self.out.heartbeat_size = HEADER_LEN + len(chunk.name.encode()) + crc_len
        self.pending = False
        self.sent_any = False

    def _send(self, n: int, size: int) -> None:
        if n == 0:
            return
        c = self.out.counts
        if self.pending:
            c.heartbeats += 1
            c.heartbeat_bytes += self.out.heartbeat_size
            c.events_sent += 1
            c.bytes_sent += self.out.heartbeat_size
            self.pending = False
        self.sent_any = True
        c.events_sent += n
        c.bytes_sent += size

    def _skip_stretch(self) -> None:
        if not self.sent_any and not self.pending:
            self.out.leading_skip = True
        self.pending = True

    def unit(self, txn: Transaction) -> None:
        c = self.out.counts
        size = txn.size
        c.events_all += len(txn.events)
        c.bytes_all += size
        if txn.kind == CONTROL:
            event = txn.events[0]
            if event.type_code == EventType.FORMAT_DESCRIPTION:
                self.filter.reset()
            c.kept_events += 1
            c.kept_bytes += size
            self._send(1, size)
            return
        result = self.filter.filter(txn)
        if result.outcome in (KEPT, PARTIAL):
            kept = result.events
            kept_bytes = sum(e.size for e in kept)
            c.kept_events += len(kept)
            c.kept_bytes += kept_bytes
            c.transactions_kept += result.outcome == KEPT
            c.transactions_partial += result.outcome == PARTIAL
            if result.outcome == PARTIAL:
                sent = self.policy.partial(txn.events, kept)
                self.policy.tally(c, sent, skipped=False)
                self._send(len(sent), sum(e.size for e in sent))
            else:
                self._send(len(kept), kept_bytes)
            return
        c.transactions_skipped += 1
        sent = self.policy.skipped(txn.events, result)
        if sent is None:
            self._skip_stretch()
        else:
            self._send(len(sent), self.policy.tally(c, sent, skipped=True))

    def finish(self) -> ChunkCounts:
        if self.pending:  # flushed at the end of the file (or of a batch): counted here
            c = self.out.counts
            c.heartbeats += 1
            c.heartbeat_bytes += self.out.heartbeat_size
            c.events_sent += 1
            c.bytes_sent += self.out.heartbeat_size
            self.out.trailing_skip = True
        return self.out


def count_chunk(chunk: Chunk, slaves, *, verify_checksums: bool = True) -> list[ChunkCounts]:
    """Counts of every slave (`dumpfilter.topology.SlaveSpec`-like: name, rules, settings,
    skip_policy) over one chunk."""
    counters = None
    for txn in read_units(chunk, verify_checksums=verify_checksums):
        if counters is None:
            crc_len = txn.events[0].fmt.checksum_len if txn.events[0].fmt is not None else 0
            counters = [_SlaveCounter(s.name, s.rules, s.settings, s.skip_policy, chunk, crc_len) for s in slaves]
        for counter in counters:
            counter.unit(txn)
    return [counter.finish() for counter in counters or ()]


def merge_counts(parts: list[ChunkCounts], slave_names: list[str]) -> list[SlaveCounts]:
    """Sum chunk counts per slave, in `slave_names` order. A stretch that ends one chunk and opens
    the next chunk of the same file is one heartbeat, not two."""
    totals = {name: SlaveCounts(name) for name in slave_names}
    by_slave: dict[str, list[ChunkCounts]] = {name: [] for name in slave_names}
    for part in parts:
        by_slave[part.counts.slave].append(part)
    for name, chunks in by_slave.items():
        chunks.sort(key=lambda p: (p.file_index, p.start))
        previous = None
        for part in chunks:
            totals[name].add(part.counts)
            if (previous is not None and previous.file_index == part.file_index and previous.trailing_skip
                    and part.leading_skip):
                t = totals[name]
                t.heartbeats -= 1
                t.heartbeat_bytes -= part.heartbeat_size
                t.events_sent -= 1
                t.bytes_sent -= part.heartbeat_size
            previous = part
    return [totals[name] for name in slave_names]
