"""Each identity's share of the master's bounded resources (registrations, the filter rules they
hold, Dump streams, concurrent Register/ChangeFilter/Unregister calls, queued lint jobs, MySQL
endpoint sessions), so that no identity can take what another needs.

An identity's limit for a resource is its policy entry's `max_<resource>` when set, else the
operator's per-identity option (`--max-streams-per-identity`), else the default share:
max(1, total // number of policy entries). Identities admitted by `[default]` (any user the
policy does not list) are one account: they share one share, so inventing user names buys
nothing. Without a policy file there is one account and it may use every slot.

Going past a limit is a `ResourceExhaustedError` (RESOURCE_EXHAUSTED) naming the limit."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from dumpfilter.errors import ResourceExhaustedError
from dumpfilter.master.policy import Identity, MasterPolicy

# The resources (a policy entry caps one with `max_<resource>`); the option that sets a total.
REGISTRATIONS, RULES, STREAMS, CALLS, LINT_JOBS = "registrations", "rules", "streams", "calls", "lint_jobs"
SESSIONS = "sessions"  # authenticated --mysql-listen sessions: MySQL's max_user_connections
TOTAL_OPTION = {STREAMS: " (--max-streams)", CALLS: " (--max-calls)", SESSIONS: " (--mysql-max-connections)"}
DEFAULT_ACCOUNT = "[default]"


def account(identity: Identity | None) -> str:
    """What an identity's use is counted under: its policy section's name ([slave.X] is X, every
    identity of [default] is "[default]"), "" without a policy."""
    if identity is None or identity.entry is None:
        return "" if identity is None else identity.name
    return DEFAULT_ACCOUNT if identity.entry.is_default else identity.entry.identity


class Shares:
    """The per-identity limits of one master: `limit(identity, resource)`; `check` raises when
    `used` has reached it."""

    def __init__(self, policy: MasterPolicy | None, totals: dict[str, int | None]):
        self.policy = policy
        self.totals = totals
        self.per_identity: dict[str, int | None] = {}  # a resource's default share (DumpService sets it)
        self.accounts = 1 if policy is None else max(1, len(policy.entries) + (policy.default is not None))

    def limit(self, identity: Identity | None, resource: str) -> int | None:
        """None: no per-identity limit (only the total applies)."""
        entry = identity.entry if identity is not None else None
        own = entry.limits.get(resource) if entry is not None else None
        if own is not None:
            return own
        if self.per_identity.get(resource) is not None:
            return self.per_identity[resource]
        total = self.totals.get(resource)
        if total is None or self.policy is None:
            return None  # one account: the total is its limit
        return max(1, total // self.accounts)

    def check(self, identity: Identity | None, resource: str, used: int, adding: int = 1) -> None:
        """RESOURCE_EXHAUSTED when `used` plus `adding` more would pass the identity's limit."""
        limit = self.limit(identity, resource)
        if limit is not None and used + adding > limit:
            raise ResourceExhaustedError(self.describe(identity, resource, used, limit, adding))

    def describe(self, identity: Identity | None, resource: str, used: int, limit: int, adding: int = 1) -> str:
        entry = identity.entry if identity is not None else None
        if entry is not None and entry.limits.get(resource) is not None:
            why = f"policy max_{resource}"
        elif self.per_identity.get(resource) is not None:
            why = f"--max-{resource.replace('_', '-')}-per-identity"
        else:
            why = f"its share of the master's {self.totals.get(resource)}{TOTAL_OPTION.get(resource, '')} among " \
                  f"{self.accounts} policy sections"
        more = f", {adding} more asked" if adding != 1 else ""
        return f"identity {account(identity)!r} already has {used} {resource.replace('_', ' ')}{more} " \
               f"(at most {limit}: {why})"


class InFlight:
    """Concurrent use per account (calls in flight): `hold(identity)` takes a slot for the `with`
    block or raises RESOURCE_EXHAUSTED; the slot is given back however the block ends."""

    def __init__(self, shares: Shares, resource: str):
        self.shares, self.resource = shares, resource
        self._lock = threading.Lock()
        self.used: dict[str, int] = {}

    @contextmanager
    def hold(self, identity: Identity | None) -> Iterator[None]:
        key = account(identity)
        with self._lock:
            used = self.used.get(key, 0)
            self.shares.check(identity, self.resource, used)
            self.used[key] = used + 1
        try:
            yield
        finally:
            with self._lock:
                self.used[key] -= 1
                if not self.used[key]:
                    del self.used[key]
