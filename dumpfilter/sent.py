"""What a slave's stream reads and sends, counted one way (`SentCounts`): by the master per
registered slave (master/model.py's SlaveStats adds its rule hits), and by `experiment` per slave
of a topology (spark_jobs/tasks/bandwidth.py adds the slave's name and the kept events). The skip
policies' `tally` (dumpfilter.skip_policy) writes into it."""

from __future__ import annotations

from dataclasses import dataclass, fields


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

    def add(self, other: SentCounts) -> None:
        """Adds `other`'s counts (every whole-number field both have) to these."""
        for f in fields(self):
            mine = getattr(self, f.name)
            if type(mine) is int and hasattr(other, f.name):
                setattr(self, f.name, mine + getattr(other, f.name))

    def counts(self) -> dict[str, int]:
        """The counts of SentCounts' own fields, by name."""
        return {f.name: getattr(self, f.name) for f in fields(SentCounts)}
