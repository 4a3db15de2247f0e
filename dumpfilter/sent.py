"""What a slave's stream reads and sends, counted one way (`SentCounts`): by the master per
registered slave (master/model.py's SlaveStats adds its rule hits), and by `experiment` per slave
of a topology (spark_jobs/tasks/bandwidth.py adds the slave's name and the kept events). The skip
policies' `tally` (dumpfilter.skip_policy) writes into it; `add_walk` adds what one call of the
core's send walk (`UnitList.send`, or `UnitList.count_many` counting it) read and sent."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from dumpfilter._core import SendResult


@dataclass
class SentCounts:
    events_read: int = 0
    bytes_read: int = 0
    events_sent: int = 0
    bytes_sent: int = 0          # every event byte sent, skip-policy events included
    kept_bytes: int = 0          # master events sent as themselves
    events_skipped: int = 0
    bytes_skipped: int = 0
    heartbeats: int = 0
    heartbeat_bytes: int = 0
    placeholders: int = 0
    placeholder_bytes: int = 0
    empty_transactions: int = 0
    empty_transaction_bytes: int = 0
    transactions_kept: int = 0
    transactions_partial: int = 0
    transactions_skipped: int = 0

    def add_walk(self, w: SendResult) -> None:
        """Adds what one call of the send walk read and sent (the skip policy's own counts are its
        `tally_walk`'s)."""
        self.events_read += w.read_events
        self.bytes_read += w.read_bytes
        self.heartbeats += w.heartbeats
        self.heartbeat_bytes += w.heartbeat_bytes
        self.events_sent += w.sent_events + w.heartbeats + w.skip_events
        self.bytes_sent += w.sent_bytes + w.heartbeat_bytes + w.skip_bytes
        self.kept_bytes += w.sent_bytes
        self.transactions_kept += w.kept
        self.transactions_partial += w.partial
        self.transactions_skipped += w.skipped
        self.events_skipped += w.read_events - w.sent_events
        self.bytes_skipped += w.read_bytes - w.sent_bytes

    def add_heartbeats(self, size: int, count: int = 1) -> None:
        """`count` Heartbeats of `size` bytes sent (a count below zero takes them back)."""
        self.heartbeats += count
        self.heartbeat_bytes += count * size
        self.events_sent += count
        self.bytes_sent += count * size

    def add(self, other: SentCounts) -> None:
        """Adds `other`'s counts (every whole-number field both have) to these."""
        for f in fields(self):
            mine = getattr(self, f.name)
            if type(mine) is int and hasattr(other, f.name):
                setattr(self, f.name, mine + getattr(other, f.name))
