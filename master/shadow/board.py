"""Shadow candidates of a live master (issue #80 goal 4): rule sets counted, never streamed, from where
each was added to the live end of the binlog, all of them in one pass per range, with lint following
each (master.lint_jobs), and their state for `master status`, `master shadow list|report` and /metrics.

The counting is `experiment --candidates`' own (spark_jobs.tasks.shadow_counts, handed in by the CLI
as a `Counting`: the master does not import spark_jobs): each time the binlog directory changes, the
pass counts every candidate over the bytes written since it last counted (a closed file to its end,
the file being written up to its last GTID event: whole units only) and folds the counts into each
candidate's totals as `experiment` joins its chunks. A candidate added while the master runs joins
from the live end (the end of the last whole transaction; a file that holds none yet from its start);
those of `master serve --shadow FILE` from the first file of the binlog. Candidates that stand at the
same place are counted together; one added behind the others is counted alone until it reaches them
(a range at a time), then with them.

The pass reads no byte the streams have read: it counts the UnitLists of the master's own segments
(master.read.segments, `count_scanned`), those the streams read (cached or kept by their scan) as
it finds them; one no stream has read is read through the cache (the streams then find it), but
while a stream behind the pass will read it the pass waits for it (DEFER_MAX). Only where a segment
cannot be counted so (it spans two files, a corrupt event ends it, a rule fails) does the pass scan
the range itself, as `experiment` does; the counts are the same either way.

What stops a candidate is said in its `note`, one line, and it is never a silent dead counter:
- a rule the counting cannot apply: that candidate stops (`broken: ...`), the others count on;
- a binlog the pass cannot read (a corrupt event): every candidate says so, and the pass tries again
  at the next change;
- files purged before the pass counted them: the gap is named, and the pass goes on from the first
  file still there; a candidate whose start file is purged says its counts cover a range no longer
  on disk;
- a restart: the candidates of --shadow come back (counted again from the first file); those added at
  run time are lost (the master logs how many it held as it stops).
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from dumpfilter.binlogs import served_paths
from dumpfilter.binlogs.watch import DirectoryWatch
from dumpfilter.errors import AccessDeniedError, DumpFilterError, InvalidArgumentError, UnknownSlaveError
from dumpfilter.master.lint_jobs import LintJobs, LintStatus
from dumpfilter.master.policy import Identity, MasterPolicy
from dumpfilter.rules.gate import Gate
from dumpfilter.topology import SlaveSpec, Topology

if TYPE_CHECKING:
    from dumpfilter.codec.scanner import UnitList
    from dumpfilter.master.read.columns import Part
    from dumpfilter.master.read.segments import SegmentCache
    from dumpfilter.master.read.units import Segment, TableName

log = logging.getLogger("dumpfilter.master.shadow")

MAX_CANDIDATES = 64  # as `experiment --candidates` counts in one pass
PASS_EVERY = 0.5     # seconds: the binlog's changes are counted at most this often
# Seconds the pass waits for the streams behind it to read the segment it counts next (then counted
# from their read, not read once for it and again for them when the cache has let it go); past it,
# it reads on alone until it meets a segment the streams read (streams whose segments start
# elsewhere, a stream stalled).
DEFER_MAX = 5.0
# The segments one range of the pass counts at most (128 MiB of the master's 8 MiB segments): the
# candidates' totals, /metrics and `master status` move on as each range is folded in, and a
# catch-up over gigabytes counted in one range showed nothing until it was done. A range costs its
# set-up and a fold per candidate (64 candidates: about 3 ms, a diagnostic's figure).
RANGE_SEGMENTS = 16
# The pass's nice above the streams' (as the lint worker's): the replicas come first, and the pass
# spends less working while the streams wait on their sockets than cut short by their turns at the
# GIL (64 candidates, the DDL-heavy binlog: 0.63-0.68 s user + system at their priority, 0.55-0.59 s).
PASS_NICE = 10
SHADOW = "--shadow"  # added_by of the candidates of `master serve --shadow FILE`
Pos = tuple[str, int]
_LINT_IDS = itertools.count(1)  # lint subscribers of candidates: negative ids, never a slave's server_id


class Counting(Protocol):
    """What the pass needs of `experiment`'s counting (spark_jobs.tasks.shadow_counts.ShadowCounts)."""

    def count(self, file_index: int, path: str, start: int, end: int | None, specs: Sequence[SlaveSpec],
              gates: Sequence[Gate | None]) -> list[Any]: ...

    def whole_units_end(self, path: str, start: int, written: int) -> int: ...

    def live_start(self, path: str, written: int) -> int: ...

    def count_scanned(self, file_index: int, path: str, scanned: Iterator[tuple[UnitList, Part, list[TableName]]],
                      specs: Sequence[SlaveSpec], gates: Sequence[Gate | None]) -> list[Any]: ...

    def fold(self, before: Any, part: Any) -> Any: ...

    def report(self, specs: Sequence[SlaveSpec], gates: Sequence[Gate | None], totals: Sequence[Any],
               lint: Sequence[tuple[str, int | None, bool]]) -> dict[str, list[dict[str, Any]]]: ...


@dataclass(eq=False)
class Candidate:
    spec: SlaveSpec
    gate: Gate | None
    added_by: str
    start: Pos
    lint_id: int
    total: Any = None                # the folded counts (a ChunkCounts), None before its first range
    counted_to: Pos | None = None
    at: Pos = ("", 0)                # where its next range starts (its start, then counted_to)
    broken: str = ""                 # why it counts no more ("" while it counts)


@dataclass(frozen=True)
class CandidateStatus:
    """One candidate as `master shadow list`, `master status` and /metrics show it."""
    name: str
    skip_policy: str
    rules: tuple[str, ...]
    added_by: str
    start: Pos
    counted_to: Pos | None
    state: str                       # counting, broken
    note: str                        # one line: why it stopped, a gap, a purged start ("" when none)
    counts: dict[str, int] = field(default_factory=dict)  # bytes_all, bytes_sent, bytes_saved, events_sent, ...
    lint_state: str = ""
    lint_line: str = ""              # the first break, or "no break", and the writes it diverges by
    lint_breaks: int = 0
    diverges: int = 0


class ShadowBoard:
    """The candidates of one master and the pass that counts them."""

    def __init__(self, binlog_dir: str | Path, counting: Counting, lint: LintJobs, policy: MasterPolicy | None,
                 segments: SegmentCache) -> None:
        self.binlog_dir = Path(binlog_dir)
        self.segments = segments  # the streams' segments, counted from (see _from_segment)
        self._defer_since: float | None = None  # see DEFER_MAX
        self._may_defer = True
        self.range_segments = RANGE_SEGMENTS  # see there
        self.counting = counting
        self.lint = lint
        self.written_end = segments.end  # the master's end of the last whole event
        self.policy = policy
        self.lock = threading.Lock()          # the candidates
        self.pass_lock = threading.Lock()     # one pass at a time
        self.candidates: dict[str, Candidate] = {}
        self.problem = ""                     # the pass's own trouble (a corrupt binlog, a gap), one line
        self.passes = 0
        self.wake = threading.Event()
        self.stopped = threading.Event()
        self.thread: threading.Thread | None = None
        self.watch: DirectoryWatch | None = None

    # -- candidates --------------------------------------------------------------------------
    def add(self, topology: Topology, caller: Identity | None, *, from_start: bool = False) -> list[str]:
        """Adds the candidates of `topology` (the --candidates format); their names. An admin
        only (PERMISSION_DENIED otherwise). Under a policy each counts what the gate of the identity
        that added it allows (a --shadow file's: the identity its `user` names; none: unbounded)."""
        require_admin(caller, "add shadow candidates")
        specs = list(topology.slaves)
        gates = [self._gate(spec, caller) for spec in specs]
        with self.pass_lock, self.lock:
            taken = sorted({s.name for s in specs} & set(self.candidates))
            if taken:
                raise InvalidArgumentError(f"shadow candidate {taken[0]!r} already exists (remove it first)")
            if len(self.candidates) + len(specs) > MAX_CANDIDATES:
                raise InvalidArgumentError(f"the master counts at most {MAX_CANDIDATES} shadow candidates "
                                           f"({len(self.candidates)} already)")
            start = self._start(from_start)
            who = SHADOW if caller is None else (caller.name or "admin")
            for spec, gate in zip(specs, gates):
                lint_id = -next(_LINT_IDS)
                self.candidates[spec.name] = Candidate(spec, gate, who, start, lint_id, at=start)
                self.lint.request(lint_id, spec.rules, spec.settings, account=who)
        self._mark()
        self.wake.set()
        return [s.name for s in specs]

    def _gate(self, spec: SlaveSpec, caller: Identity | None) -> Gate | None:
        if self.policy is None:
            return None
        try:
            if caller is None:
                if not spec.user:
                    return None
                caller = self.policy.proven(spec.user)
            return self.policy.gate_for_identity(caller, spec.server_id)
        except DumpFilterError as exc:
            raise InvalidArgumentError(f"shadow candidate {spec.name!r}: the master policy: {exc}") from None

    def _start(self, from_start: bool) -> Pos:
        """Where a new candidate starts: the binlog's first file (--shadow), or its live end."""
        if from_start:
            names = self._names()
            return (names[0].name, 0) if names else ("", 0)
        return self._live_end()

    def remove(self, name: str, caller: Identity | None) -> None:
        require_admin(caller, "remove shadow candidates")
        with self.lock:
            candidate = self.candidates.pop(name, None)
        if candidate is None:
            raise UnknownSlaveError(f"no shadow candidate {name!r}")
        self.lint.forget(candidate.lint_id)
        self._mark()

    def statuses(self, caller: Identity | None = None) -> list[CandidateStatus]:
        """Every candidate, for an admin (another caller sees none)."""
        if caller is not None and not caller.admin:
            return []
        with self.lock:
            candidates = list(self.candidates.values())
        present = {p.name for p in self._names()}
        return [self._status(c, present) for c in candidates]

    def report(self, caller: Identity | None = None) -> dict[str, list[dict[str, Any]]]:
        """`experiment`'s report rows over every candidate counted so far (admin only)."""
        require_admin(caller, "read the shadow report")
        with self.lock:
            counted = [c for c in self.candidates.values() if c.total is not None]
        statuses = [self.lint.status(c.lint_id) for c in counted]
        lint = [(_lint_line(s), s.diverges if s.state == "done" else None, s.breaks > 0) for s in statuses]
        return self.counting.report([c.spec for c in counted], [c.gate for c in counted],
                                    [c.total for c in counted], lint)

    def _status(self, c: Candidate, present: set[str]) -> CandidateStatus:
        note = c.broken or self.problem
        if not note and c.start[0] and c.start[0] not in present:
            note = f"its start {c.start[0]} was purged: its counts cover binlog no longer on disk"
        counts: dict[str, int] = {}
        if c.total is not None:
            row = c.total.counts.as_row()
            counts = {k: int(row[k]) for k in ("events_all", "bytes_all", "events_sent", "bytes_sent",
                                               "saving_bytes", "heartbeats", "placeholders", "empty_transactions")}
        lint = self.lint.status(c.lint_id)
        return CandidateStatus(c.spec.name, c.spec.skip_policy, c.spec.rule_text, c.added_by, c.start,
                               c.counted_to, "broken" if c.broken else "counting", note, counts, lint.state,
                               _lint_line(lint), lint.breaks, lint.diverges)

    # -- the pass ----------------------------------------------------------------------------
    def follow(self, watch: DirectoryWatch) -> None:
        """Count at every change of the binlog directory, on a thread of its own."""
        self.watch = watch
        watch.add(self.wake)
        self.thread = threading.Thread(target=self._run, name="shadow-pass", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        if sys.platform.startswith("linux"):  # (Linux sets a thread's own nice, by its id)
            tid = threading.get_native_id()
            with contextlib.suppress(OSError):  # (a limit the system sets: left as it is)
                os.setpriority(os.PRIO_PROCESS, tid, min(19, os.getpriority(os.PRIO_PROCESS, tid) + PASS_NICE))
        while not self.stopped.is_set():
            self.wake.wait()
            self.wake.clear()
            if self.stopped.is_set():
                return
            try:
                self.count()
            except Exception:  # noqa: BLE001 - the pass must outlive any one range
                log.exception("shadow: the pass failed")
            self._mark()
            # At most one pass per PASS_EVERY: a pass has a fixed cost (1.5 ms for 64 candidates over
            # one small transaction), so a primary committing thousands a second is counted in batches.
            if self.stopped.wait(PASS_EVERY):
                return

    def _mark(self) -> None:
        """The pass's place among the readers of the streams' segment cache (its candidate furthest
        behind): segments the streams let go before it keep their pages until it has counted them
        (SegmentCache.at, TRAIL_BYTES; handed back first, the count faulted each page in again)."""
        with self.lock:
            places = [c.at for c in self.candidates.values() if not c.broken]
        self.segments.at(self, min(places) if places else None)

    def close(self) -> None:
        with self.lock:
            runtime = sum(1 for c in self.candidates.values() if c.added_by != SHADOW)
        if runtime:
            log.warning("shadow: %d candidate(s) added at run time are not kept across a restart", runtime)
        self.stopped.set()
        self.wake.set()
        if self.watch is not None:
            self.watch.discard(self.wake)

    def count(self) -> int:
        """One pass: every counting candidate over what was written since it last counted, those that
        stand at the same place together, the one furthest behind first; the ranges counted."""
        ranges = 0
        with self.pass_lock:
            waiting: set[Pos] = set()  # places with nothing more to count now
            while True:
                with self.lock:
                    groups: dict[Pos, list[Candidate]] = {}
                    for c in self.candidates.values():
                        if not c.broken and c.at not in waiting:
                            groups.setdefault(c.at, []).append(c)
                if not groups:
                    return ranges
                at = min(groups, key=lambda p: (_number(p[0]), p[1]))
                active = groups[at]
                try:
                    step = self._next_range(at)
                except (DumpFilterError, OSError) as exc:  # a file purged or unreadable under the pass
                    self._stopped(at, exc)
                    return ranges
                if step is None:
                    waiting.add(at)
                    continue
                index, path, start, end, after = step
                try:
                    scanned = self._from_segment(active, index, path, start)
                    if scanned is not None:
                        after = scanned
                    else:
                        if end is not None and after[1] == end:  # the file being written: its whole units
                            end = self.counting.whole_units_end(path, start, end)
                            if end <= start:
                                waiting.add(at)
                                continue
                            after = (after[0], end)
                        self._count_range(active, index, path, start, end)
                except _Deferred:
                    waiting.add(at)
                    self.wake.set()  # looked at again after PASS_EVERY
                    continue
                except _Stopped:
                    return ranges
                with self.lock:
                    for c in active:
                        c.counted_to = c.at = after
                ranges += 1
                self.passes += 1

    def _next_range(self, at: Pos) -> tuple[int, str, int, int | None, Pos] | None:
        """The next range to count from `at`: (file number, path, start, end, where it ends).
        In the file being written it ends at its written end, the caller finding the last whole unit
        only where it scans the range itself (a segment holds whole units only; looking for them
        costs a search back from the end)."""
        names = self._names()
        by_name = {p.name: k for k, p in enumerate(names)}
        file, pos = at
        k = by_name.get(file)
        if k is None:
            later = [p for p in names if _number(p.name) > _number(file)] if file else names
            if not later:
                return None
            if file:
                self.problem = (f"gap: {file}:{pos} to {later[0].name} was purged before it was counted; "
                                f"counting goes on from {later[0].name}")
                log.warning("shadow: %s", self.problem)
            return self._next_range((later[0].name, 0))
        path = names[k]
        if k + 1 < len(names):  # closed: to its end
            if pos > 0 and pos >= path.stat().st_size:
                return self._next_range((names[k + 1].name, 0))
            return _number(path.name), str(path), pos, None, (names[k + 1].name, 0)
        end_file, written = self.written_end()
        if end_file != path.name or written <= pos:
            return None
        return _number(path.name), str(path), pos, written, (path.name, written)

    def _count_range(self, active: list[Candidate], index: int, path: str, start: int, end: int | None) -> None:
        """Every active candidate over one range, in one count; a candidate whose rules the counting
        cannot apply is found by counting each alone, and stops (the others are counted)."""
        try:
            parts: list[Any] = self.counting.count(index, path, start, end, [c.spec for c in active],
                                                   [c.gate for c in active])
        except OSError as exc:  # the file went (a purge under the pass): the next pass says where it goes on
            self._stopped((Path(path).name, start), exc)
            raise _Stopped(self.problem) from None
        except DumpFilterError as exc:
            alone: list[Any] = []
            why: list[str] = []
            for c in active:
                try:
                    alone += self.counting.count(index, path, start, end, [c.spec], [c.gate])
                    why.append("")
                except DumpFilterError as one:
                    alone.append(None)
                    why.append(str(one).splitlines()[0])
            if all(p is None for p in alone):  # the binlog, not a rule: every candidate says so, tried again
                self._stopped((Path(path).name, start), exc)
                raise _Stopped(self.problem) from None
            for c, line in zip(active, why):
                if line:
                    to = f"{c.counted_to[0]}:{c.counted_to[1]}" if c.counted_to is not None else "its start"
                    c.broken = f"broken: {line} (counted up to {to})"
                    log.warning("shadow candidate %r: %s", c.spec.name, c.broken)
            parts = alone
        self._fold(active, parts)

    def _from_segment(self, active: list[Candidate], index: int, path: str, start: int) -> Pos | None:
        """Every active candidate over the master's segments from `start` of `path` on, as far as
        they go in it, RANGE_SEGMENTS at most (the streams' segments, from the cache or kept by
        their scan; else read through the cache, so that streams reaching them find them): their
        UnitLists counted in one count, the binlog not scanned again. Where the last counted ends
        (the next range's start); None where the first cannot be counted so (none there, one that
        spans files or stops at a corrupt event, a rule the counting cannot apply): the caller
        scans the range itself."""
        cache = self.segments
        name = Path(path).name
        first = self._segment(cache, name, start)
        if first is None:
            return None
        end: list[Pos] = []

        def scanned() -> Iterator[tuple[UnitList, Part, list[TableName]]]:
            seg: Segment | None = first
            for taken in itertools.count(1):
                if seg is None:
                    return
                idx = seg.index
                assert idx is not None  # (_usable)
                part = idx.parts[0]
                try:
                    yield idx.unit_list, part, idx.names
                finally:
                    cache.at(self, seg.end)  # (its pages kept for the pass no more)
                    cache.done_with(seg)
                end[:] = [(name, part.base + part.used)]  # (seg.end, but for a Rotate's: the next file's)
                if taken >= self.range_segments:
                    return  # (the next range starts there: RANGE_SEGMENTS)
                try:
                    seg = None if seg.at_end or seg.end[0] != name else self._segment(cache, name, seg.end[1])
                except _Deferred:
                    seg = None

        try:
            parts = self.counting.count_scanned(index, path, scanned(), [c.spec for c in active],
                                                [c.gate for c in active])
        except DumpFilterError:
            return None  # (the caller's count finds which candidate's rule, or the binlog)
        if not end:  # (every segment counted leaves where it ends)
            return None
        self._fold(active, parts)
        return end[0]

    def _fold(self, active: list[Candidate], parts: list[Any]) -> None:
        """Each counting candidate's counts of a range (None: its rule failed) into its totals."""
        self.problem = "" if self.problem.startswith("the pass stopped") else self.problem
        with self.lock:
            for c, part in zip(active, parts):
                if part is not None and not c.broken:
                    c.total = self.counting.fold(c.total, part)

    def _segment(self, cache: SegmentCache, name: str, pos: int) -> Segment | None:
        """The segment at `pos` of `name` to count (`_usable`); _Deferred while the streams behind
        it have yet to read it (see DEFER_MAX)."""
        here = (name, max(pos, 4))
        held = cache.holds(here)
        if not held and self._may_defer and cache.streams_before(here, but=self):
            now = time.monotonic()
            if self._defer_since is None:
                self._defer_since = now
            if now - self._defer_since < DEFER_MAX:
                raise _Deferred  # a stream reads it soon: counted then, not read twice
            self._may_defer = False  # the streams do not come here: read on alone
        self._defer_since = None
        self._may_defer = self._may_defer or held
        return _usable(cache, name, pos)

    def _stopped(self, at: Pos, exc: BaseException) -> None:
        """The pass cannot read on from `at`: one line for every candidate; the next change tries again."""
        why = getattr(exc, "strerror", None) or (str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
        problem = f"the pass stopped at {at[0]}:{at[1]}: {why}"
        if problem != self.problem:
            log.warning("shadow: %s", problem)
        self.problem = problem

    def _names(self) -> list[Path]:
        try:
            return served_paths(self.binlog_dir)
        except DumpFilterError:
            return []

    def _live_end(self) -> Pos:
        names = self._names()
        if not names:
            return ("", 0)
        try:
            end_file, written = self.written_end()
        except DumpFilterError:
            return (names[-1].name, 0)
        return end_file, self.counting.live_start(str(self.binlog_dir / end_file), written)


class _Deferred(Exception):
    """The segment at the pass's place is not read yet, and a stream behind it will read it."""


class _Stopped(DumpFilterError):
    """The pass cannot read on (said in ShadowBoard.problem); it tries again at the next change."""


def _usable(cache: SegmentCache, name: str, pos: int) -> Segment | None:
    """The cache's segment at `pos` of file `name` (4 for 0), if its units can be counted as they
    are: one part, in that file, no corrupt event after them."""
    try:
        seg = cache.get((name, max(pos, 4)))
    except (DumpFilterError, OSError):
        return None
    idx = seg.index
    if idx is None or seg.error is not None or not len(seg.units) or len(idx.parts) != 1 or idx.parts[0].file != name:
        cache.done_with(seg)
        return None
    return seg


def require_admin(caller: Identity | None, what: str) -> None:
    if caller is not None and not caller.admin:
        raise AccessDeniedError(f"identity {caller.name!r} may not {what} (admin only)")


def _number(name: str) -> int:
    ext = Path(name).suffix[1:]
    return int(ext) if ext.isdigit() else 0


def _lint_line(lint: LintStatus) -> str:
    """A candidate's lint in one line: its state, the first break or "no break", its divergence."""
    if lint.state != "done":
        return f"{lint.state}" + (f": {lint.warnings[0]}" if lint.warnings else "")
    first = next((w for w in lint.warnings if "stop" in w or "break" in w), "") if lint.breaks else ""
    return (first or "no break") + (f"; diverges: {lint.diverges} writes" if lint.diverges else "")
