"""A stream's rule hits (RuleHits, held by master.stream.slave_stream.SlaveStream): the replicate-*
rules each decision counted, into the slave's stats and its channel's P_S COUNTER rows, whether the
decision was a unit's own (the stream's `_unit`), a statement answered for a run, or the Table_maps
the core ran (its tally, folded per segment reader)."""

from __future__ import annotations

import bisect
from collections import Counter
from collections.abc import Sequence
from itertools import compress
from typing import TYPE_CHECKING

from dumpfilter.master.decide.flags import ASSUMED_DECISIONS, Hits

if TYPE_CHECKING:
    from dumpfilter.master.read.columns import UnitIndex
    from dumpfilter.master.read.units import TableName
    from dumpfilter.master.registry import RegisteredSlave

# Rule hits of units answered alike: (their ascending unit indices, the hits they share).
GroupHits = list[tuple[Sequence[int], Hits]]


class RuleHits:
    """One stream's rule-hit bookkeeping, for its registered slave: what the stream hands it (a
    unit's hits, a run's statement units, the core's Table_map tally) is counted into the slave's
    stats and P_S counters. The stream reads `unit_hits` and `group_hits` to know whether a run
    has statement hits to count; StatementAnswers fills them (`for_segment`)."""

    __slots__ = ("slave", "state", "occurrences", "unit_hits", "group_hits", "_tally")

    def __init__(self, slave: RegisteredSlave) -> None:
        self.slave = slave
        # The rules the stream decides with (the slave's state when it started, and after each
        # filter change it applies, `SlaveStream._boundary`): a stream that ends because another
        # replaced it folds what it ran under its own rules and channel, not the newer stream's.
        self.state = slave.state
        # Table_maps whose rule hits are not counted yet (folded from the tally, counted by `flush`).
        self.occurrences: Counter[TableName] = Counter()
        self.unit_hits: dict[int, Hits] = {}  # rule hits of the current segment's statement units in runs
        self.group_hits: GroupHits = []  # the same for groups of units answered alike: (indices, hits)
        # The ranges of a segment's units the core walked, their Table_maps not yet tallied:
        # (the segment's UnitIndex, [(start, end), ...]).
        self._tally: tuple[UnitIndex, list[tuple[int, int]]] | None = None

    def for_segment(self) -> tuple[dict[int, Hits], GroupHits]:
        """Fresh records of a segment's statement hits (`unit_hits`, `group_hits`), for its row's
        answers to fill."""
        self.unit_hits, self.group_hits = {}, []
        return self.unit_hits, self.group_hits

    def walked(self, index: UnitIndex, start: int, end: int) -> None:
        """The core walked units [start, end) of a segment (its UnitIndex): their Table_maps are
        tallied (`UnitIndex.tally`) when folded, over every range walked in the segment, the
        segment before folded first."""
        tally = self._tally
        if tally is None or tally[0] is not index:
            self._fold_tally()
            tally = self._tally = (index, [])
        ranges = tally[1]
        if ranges and ranges[-1][1] == start:  # (a run that goes on: one range)
            ranges[-1] = (ranges[-1][0], end)
        else:
            ranges.append((start, end))

    def statements(self, start: int, end: int) -> None:
        """The rule hits of the statement units in the run [start, end) (answered with the row)."""
        unit_hits = self.unit_hits
        passed = [k for k in unit_hits if start <= k < end]
        # Units answered alike share one Counter (the statement flag words' answer for their
        # database): each distinct one is added once, times the units that carry it.
        same: dict[int, tuple[Hits, list[int]]] = {}  # id(hits) -> (hits, [units that carry it])
        for k in passed:
            hits = unit_hits.pop(k)
            seen = same.get(id(hits))
            if seen is None:
                same[id(hits)] = (hits, [1])
            else:
                seen[1][0] += 1
        for ks, hits in self.group_hits:  # ascending unit indices
            n = bisect.bisect_left(ks, end) - bisect.bisect_left(ks, start)
            if n:
                same.setdefault(id(hits), (hits, [0]))[1][0] += n
        for hits, (n,) in same.values():
            self.add(hits if n == 1 else Counter({name: count * n for name, count in hits.items()}))

    def add(self, hits: Hits) -> None:
        """A decision's rule hits into the slave's stats and its channel's P_S counters."""
        stats = self.slave.stats
        stats.rule_hits.update(hits)
        stats.assumed_decisions += hits.get(ASSUMED_DECISIONS, 0)
        self._count_filter_hits(hits)

    def _fold_tally(self) -> None:
        """The Table_maps of the units the core walked (per name id of one segment) into `occurrences`."""
        tally = self._tally
        if tally is None:
            return
        self._tally = None
        index, ranges = tally
        counted = index.tally(ranges)
        occurrences = self.occurrences
        get = occurrences.get  # (a Counter's += calls __missing__ in Python for each new name)
        for name, count in zip(compress(index.names, counted), filter(None, counted)):
            occurrences[name] = get(name, 0) + count

    def flush(self, current: bool = True) -> None:
        """Rule hits of the Table_maps decided in runs: what SlaveDecider.table_kept counts per
        Table_map (the engine's COUNTER names, MASTER_POLICY when the policy refused it), added
        to the stats and P_S counters as the reference path adds its per-unit hits. Without
        `current`, the segment being walked waits for its end (`walked` folds it when the next
        one starts): a stream tallies each segment once, over the whole of it, a tally the other
        streams that walked all of it share (UnitIndex.tally). Folded at every batch, 64 do-db
        streams each tallied each part of a segment a batch had walked."""
        if current:
            self._fold_tally()
        occurrences = self.occurrences
        if not occurrences:
            return
        self.occurrences = Counter()
        state = self.state
        assert state is not None, "hits are counted by a stream, of a slave with its state"
        decider, engine, gate = state.decider, state.engine, self.slave.gate
        hits: Hits = Counter()
        counters = engine.counters
        for (db, table), count in occurrences.items():
            counted = engine.decide_table(db, table).counted
            for name in counted:  # (loops: Counter.update's Mapping check cost more, per name and batch)
                hits[name] += count
                if count > 1:
                    counters[name] += count - 1
            if gate.bounds and not decider.words.kept(db, table, decider.bit) \
                    and not gate.table_allowed(db, table):
                hits["MASTER_POLICY"] += count
        hits = +hits
        if hits:
            self.slave.stats.rule_hits.update(hits)
            self._count_filter_hits(hits)

    def _count_filter_hits(self, hits: Hits) -> None:
        """P_S COUNTER of the slave's channel rows."""
        state = self.state
        assert state is not None, "hits are counted by a stream, of a slave with its state"
        channel = self.slave.registry.channels.get(state.channel)
        if channel is None:
            return
        for name, n in hits.items():
            entry = channel.entries.get(name.removeprefix("REPLICATE_").lower())
            if entry is not None:
                entry.counter += n
