"""What a stream started by GTID skips: the transactions whose GTID the slave already has, as the
servers' dump threads skip them (a MySQL GTID set, or MariaDB's per-domain sequence numbers)."""

from __future__ import annotations

from collections.abc import Callable

from dumpfilter.codec import Event
from dumpfilter.binlogs.gtid_start import GtidState


def gtid_filter(state: GtidState | None) -> Callable[[Event], bool] | None:
    """A predicate 'this GTID is already in the slave's state' for a start by GTID."""
    if state is None:
        return None
    if state.mysql is not None:
        wanted = state.mysql
        return lambda event: not event.gtid_info.anonymous and (
            event.gtid_info.source, event.gtid_info.tag, event.gtid_info.gno) in wanted
    assert state.limits is not None, "GtidState.parse gives MariaDB's limits or a MySQL set"
    return KnownMariaDB(state.limits)


class KnownMariaDB:
    """MariaDB's dump thread skips, per domain, every GTID at or below the slave's sequence number.
    `limits` (domain -> seq_no) also lets the fast path see that a whole segment skips nothing."""

    def __init__(self, limits: dict[int, int]):
        self.limits = limits

    def __call__(self, event: Event) -> bool:
        return event.gtid_info.gno <= self.limits.get(event.gtid_info.domain, -1)
