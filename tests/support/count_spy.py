"""A UnitList stand-in that records the core count walks asked of it (`count_many`: for every slave
of a buffer, or "count", one slave's run alone, which carries no Heartbeat across buckets), for
the tests that hold a count to one walk per segment or buffer."""

from __future__ import annotations

from typing import Any


class CountSpy:
    """`units` with each count walk recorded in `calls` as (call, jobs)."""

    def __init__(self, units: Any, calls: list[tuple[str, int]]) -> None:
        self._units, self._calls = units, calls

    def __getattr__(self, name: str) -> Any:
        return getattr(self._units, name)

    def __len__(self) -> int:
        return len(self._units)

    def count_many(self, jobs: Any, starts: Any, carry: Any) -> Any:
        self._calls.append(("count_many" if carry else "count", len(jobs)))
        return self._units.count_many(jobs, starts, carry)
