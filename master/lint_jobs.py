"""Lint at Register that follows the live binlog (issues #17, #44): `dumpfilter lint`'s predictions for
each registered slave, computed off the Register path and kept up to date as the binlog grows.

Register never waits for lint. It asks `LintJobs.request()`, which answers at once when another
slave with these rules is already followed, and otherwise starts following them: one follower per
distinct rule set (slaves with equal rules and settings share it). Its first look reads the binlog
from its start, when it holds at most `--lint-max-mb` MiB; from then on, each change of the binlog
directory (the master's DirectoryWatch) queues one more look, which reads only the whole units
written since the last one, at most `--lint-max-mb` MiB of them (a look that stops there is
followed by another). The looks run one at a time in one worker process (a niced child, which
keeps each follower's Linter: its schema models, never the binlog), so lint takes neither the GIL
nor the Register threads from the streams. The predictions reach the slave:
  - in the Register reply, when its rules are already followed;
  - else on its Dump stream, in the `warnings` of the first batch after they are found (a break
    found later too);
  - and always in Stats (`master status`): `lint_state`, `lint_warnings`, how far lint has read
    (`lint_position`), how far that is behind the live end of the binlog (`lint_behind_bytes`,
    `lint_behind_files`) and how many breaks it found (`lint_breaks`); /metrics has them per rule set;
  - a break found, or a lint that failed, is also one WARNING line in the master's log;
  - writes a replica with these rules would silently get wrong (rules.lint_divergence) are one more
    warning (with their count so far) wherever the breaks are told, and one WARNING line when first found.

The worker process may die (killed, out of memory): the master starts it again at once, in one
WARNING line, and every rule set reads on from its last position (binlogs.lint_worker: from its
last checkpoint, read silently up to the position told). A look the worker died in is queued
again (its breaks were never told, so none is told twice); a rule set whose looks end the worker
MAX_CRASHES times in a row fails. How far behind the live end of the binlog each rule set is
(bytes and files) is in Stats and /metrics.
"""

from __future__ import annotations

import itertools
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from dumpfilter.errors import DumpFilterError, ResourceExhaustedError
from dumpfilter.binlogs import binlog_paths
from dumpfilter.binlogs.lint import Look
from dumpfilter.binlogs.lint_worker import (CHECKPOINT_BYTES, DONE, ENDED, FAILED, LINT_WARNINGS, LOST,  # noqa: F401
                                            MAX_QUEUED, NOT_RUN,
                                            Job as _Job, Worker as _Worker, worker as _worker)
from dumpfilter.binlogs.watch import DirectoryWatch
from dumpfilter.rules.lint import Break
from dumpfilter.rules.lint_rules import rule_warnings
from dumpfilter.rules.ruleset import RuleSet, Settings
from dumpfilter.rules.schema import SchemaModel
from dumpfilter.rules.statement_info import TableRef

log = logging.getLogger("dumpfilter.master.lint")

MiB = 1 << 20
# The most one look of lint reads (`master serve --lint-max-mb`; 0 turns lint off; see the module
# docstring). A look reads the compiled scan and feeds the Linter only the units that may matter
# (binlogs.lint.FollowingLint): about 1.1 GB of ROW binlog per CPU second, 60 MB of MIXED with a
# break in every eighth transaction; it was 64 MiB while every unit went through Python (about 2 MB
# per CPU second).
LINT_MAX_BYTES = 1024 * MiB
MAX_FOLLOWED = 256       # rule sets followed at once (each one Linter in the worker process)
FOLLOW_EVERY = 0.5       # seconds: the binlog's changes are looked at at most this often
MAX_CRASHES = 3          # looks of one rule set in a row the worker ended in: then it fails

OFF, PENDING = "off", "pending"  # and the worker's answers: DONE, NOT_RUN, FAILED, LOST, ENDED
FOLLOWED = (PENDING, DONE)  # the states of a rule set lint reads, and so may be behind


# A followed rule set: (rules, settings, the replica schema's key); and the worker's Linter arguments
# for it (rules, settings, the master's --schema, the replica schema, verify checksums).
SchemaKey = tuple[tuple[str, ...], tuple[tuple[TableRef, tuple[str, ...] | None], ...]]  # SchemaModel.key()
FollowerKey = tuple[RuleSet, Settings, SchemaKey | None]
LinterArgs = tuple[RuleSet, Settings, SchemaModel | None, SchemaModel | None, bool]
_FOLLOWER_IDS = itertools.count(1)  # unique in this process: every master's followers share the worker


# -- one master's followers ----------------------------------------------------------------------
@dataclass(eq=False)
class _Follower:
    """Lint of one rule set over this master's binlog, as far as it has read."""
    key: FollowerKey
    first: LinterArgs                # the worker's Linter arguments (sent with the first look)
    account: str = ""                # the identity account that started it (master.shares)
    fid: int = field(default_factory=lambda: next(_FOLLOWER_IDS))
    state: str = PENDING
    position: tuple[str, int] | None = None  # how far lint has read: the end of its last whole unit
    seen: tuple[str, int] | None = None  # the binlog's end its last look reached (None: look again)
    breaks: list[Break] = field(default_factory=list)  # the first LINT_WARNINGS found
    found: int = 0                   # every break found
    reason: str = ""                 # why not run, or failed
    job: _Job | None = None          # its look queued or running
    started: bool = False            # the worker holds its Linter
    checkpoint: bytes = b""          # the follower as it stood at its last checkpoint (FollowingLint.checkpoint)
    crashes: int = 0                 # its looks in a row the worker process ended in
    diverges: int = 0                # writes a replica with these rules silently gets wrong, up to `position`

    def warnings(self) -> list[str]:
        if self.state == DONE:
            # a rule that keeps no table (`db.`) first: the predictions alone would say "no break"
            return ([f"lint: {w}" for w in rule_warnings(self.first[0])] + warning_lines(self.breaks, self.found)
                    + ([divergence_line(self.diverges, self.position)] if self.diverges else []))
        return [f"lint: {self.state}: {self.reason}"] if self.reason else []


@dataclass
class _Sub:
    key: FollowerKey
    delivered: bool = False  # its warnings were told (Register reply or a batch)
    told: int = 0            # breaks told
    told_diverges: bool = False  # its divergence line was told
    seen: int = -1           # LintJobs.changes at its last take: nothing new to tell while equal


@dataclass(frozen=True)
class LintStatus:
    """A slave's lint for Stats: its state, warnings, how far lint has read, the breaks found, and
    how far behind the live end of the binlog it is: the bytes not yet read and the files after the
    one it is in (every file before its first look; 0 when lint does not read it: `followed`)."""
    state: str
    warnings: list[str] = field(default_factory=list)
    position: tuple[str, int] | None = None
    breaks: int = 0
    behind_bytes: int = 0
    behind_files: int = 0
    diverges: int = 0

    @property
    def followed(self) -> bool:
        """Lint reads this rule set (pending, done): its lag means something; else it has none."""
        return self.state in FOLLOWED


@dataclass(frozen=True)
class RuleSetLint:
    """One followed rule set, for /metrics: `rule_set` its id (the same while it is followed, a
    worker restart included), the slaves that share it, and its LintStatus."""
    rule_set: int
    server_ids: tuple[int, ...]
    status: LintStatus


def behind(position: tuple[str, int] | None, snapshot: list[tuple[str, int]]) -> tuple[int, int]:
    """(bytes, files) from `position` to the end of the binlog `snapshot` ((path, size) per file):
    the rest of its file and every later file; the whole binlog when lint has not read a unit yet,
    or its file left the index."""
    names = [Path(path).name for path, _ in snapshot]
    if position is None or position[0] not in names:
        return sum(size for _, size in snapshot), len(snapshot)
    i = names.index(position[0])
    return max(0, snapshot[i][1] - position[1]) + sum(size for _, size in snapshot[i + 1:]), len(snapshot) - 1 - i


def _break_line(b: Break) -> str:
    cause = b.cause
    why = (f"; the event it needs was skipped at {cause.file}:{cause.pos} by {cause.rule}"
           if cause is not None and cause.file else f"; {cause.rule}" if cause is not None else "")
    gtid = f" (GTID {b.gtid})" if b.gtid else ""
    return (f"lint: a replica with these filters would stop at {b.file}:{b.pos}{gtid} with error "
            f"{b.errno}: {b.message}{why}")


def divergence_line(writes: int, position: tuple[str, int] | None) -> str:
    """The warning for the writes lint found a replica with these rules silently gets wrong
    (rules.lint_divergence: a statement judged by its default database otherwise than its tables)."""
    upto = f" up to {position[0]}:{position[1]}" if position else ""
    return (f"lint: {writes} write(s){upto} would silently diverge on a replica with these filters (it never "
            "stops for them): run `dumpfilter lint` for the rule, the cause and the fix")


def warning_lines(breaks: list[Break], found: int, start: int = 0) -> list[str]:
    """One warning per predicted break (the first LINT_WARNINGS of `found`), as `slave run` prints
    them; from the `start`th on (those not yet told)."""
    out = [_break_line(b) for b in breaks[start:LINT_WARNINGS]]
    if found > LINT_WARNINGS:
        out.append(f"lint: {found - LINT_WARNINGS} more predicted break(s): run `dumpfilter lint`")
    return out


class LintJobs:
    """Lint for one master: a follower per registered rule set and the slaves that share it."""

    def __init__(self, binlog_dir: Path, max_bytes: int = LINT_MAX_BYTES, schema: SchemaModel | None = None):
        self.binlog_dir = Path(binlog_dir)
        self.max_bytes = max_bytes
        self.schema = schema
        self.verify_checksums = True  # the master's --[no-]verify-checksums (DumpService sets it): lint reads as it
        self.checkpoint_bytes = CHECKPOINT_BYTES  # read between a rule set's checkpoints (binlogs.lint_worker)
        self.lock = threading.Lock()
        self.followers: dict[FollowerKey, _Follower] = {}  # by (rules, settings, replica schema)
        self.subs: dict[int, _Sub] = {}
        # Bumped under the lock by whatever may give a slave something to be told (a Register, a
        # look's answer, a follower dropped): `take`, which every Dump batch calls, returns at once
        # while it has not moved. 64 streams on 2 CPUs each took the lock for every batch, a
        # tenth of the master's Python (py-spy --gil), most of it handing the lock and the GIL on.
        self.changes = 0
        self.closed = False
        self.jobs_run = 0  # for tests and Stats: first looks handed to the worker (rule sets linted)
        self.looks = 0     # every look handed to the worker
        self.bytes_read = 0  # the binlog bytes the looks read (each once, but for a unit a look stopped inside;
                             # a read shared by looks together once)
        self.largest_look = 0  # the most one look read (about --lint-max-mb at most)
        self.bytes_scanned = 0  # of bytes_read, those read and scanned, not taken from the worker's kept scans
        self.wake = threading.Event()
        self.stopped = threading.Event()
        self.watch: DirectoryWatch | None = None  # the master's: a look again at each change of the binlog directory
        self.thread: threading.Thread | None = None

    @property
    def enabled(self) -> bool:
        return self.max_bytes > 0

    def _snapshot(self) -> list[tuple[str, int]] | str:
        """The binlog as it is now ((path, size) per file), or why it cannot be linted."""
        try:
            paths = binlog_paths(self.binlog_dir)
            # Regular files only: an index naming a FIFO or a device must not block the worker.
            if not all(p.is_file() and not p.is_symlink() for p in paths):
                return "the binlog index names a file that is not a regular file"
            return [(str(p), p.stat().st_size) for p in paths]
        except (DumpFilterError, OSError) as exc:
            return f"the binlog cannot be listed ({exc})"

    def request(self, server_id: int, rules: RuleSet, settings: Settings, account: str = "",
                check: Callable[[int], None] | None = None,
                replica_schema: SchemaModel | None = None) -> list[str]:
        """Called by Register: the warnings to put in its reply now (the followed rule set's
        predictions so far, or why lint is not run); otherwise starts following these rules and
        answers []. The follower of the server_id's former rules is dropped when no other slave
        shares it. `check(n)` raises ResourceExhaustedError when `account`, with n first looks
        queued, may queue no more: the Register is not refused for it (lint is advice), the reply
        says lint was not run. `replica_schema`: the slave's own starting schema
        (RegisterRequest.replica_schema), else the master's --schema."""
        if not self.enabled:
            self.forget(server_id)
            return []
        key = (rules, settings, replica_schema.key() if replica_schema is not None else None)
        with self.lock:
            self.changes += 1
            old = self.subs.get(server_id)
            sub = self.subs[server_id] = _Sub(key)
            if old is not None and old.key != key:
                self._drop_unwanted(old.key)
            follower = self.followers.get(key)
            if follower is not None and follower.state == DONE:
                sub.delivered, sub.told, sub.told_diverges = True, follower.found, bool(follower.diverges)
                return follower.warnings()
            if follower is not None and follower.state == PENDING:  # being linted for another slave: shared
                return []
            if follower is not None:  # not run or failed before: tried again
                self._unfollow(follower)
            args = (rules, settings, self.schema, replica_schema, self.verify_checksums)
            follower = self.followers[key] = _Follower(key, args, account)
            why = self._start(follower, check)
            if why:
                follower.state, follower.reason = NOT_RUN, why
                sub.delivered = True
                return [f"lint: not run at Register: {why}"]
        self._ensure_thread()
        return []

    def _start(self, follower: _Follower, check: Callable[[int], None] | None = None) -> str:
        """Under self.lock: queues the first look of a follower just made; '' or why it cannot be."""
        snapshot = self._snapshot()
        if isinstance(snapshot, str):
            return snapshot
        total = sum(size for _, size in snapshot)
        if total > self.max_bytes:
            return (f"the binlog holds {total / MiB:.1f} MiB, above {self.max_bytes / MiB:g} MiB "
                    "(see `master serve --lint-max-mb`): run `dumpfilter lint` on it")
        if sum(1 for f in self.followers.values() if f.state in (PENDING, DONE)) > MAX_FOLLOWED:
            return f"lint already follows {MAX_FOLLOWED} rule sets"
        try:
            if check is not None:
                check(sum(1 for f in self.followers.values()
                          if f.account == follower.account and f.state == PENDING and f.job is not None))
        except ResourceExhaustedError as exc:
            return str(exc)
        job = _Job(self, follower, (follower.fid, follower.first, snapshot, self.max_bytes), _end(snapshot))
        if not _worker().put(job):
            return f"{MAX_QUEUED} lint jobs are already queued"
        follower.job = job
        self.jobs_run += 1
        self.looks += 1
        return ""

    def finished(self, job: _Job, state: str, value: object) -> None:
        """The worker's answer to a look (the dispatch thread)."""
        follower: _Follower = job.follower
        told: list[str] = []
        with self.lock:
            self.changes += 1
            if follower.job is job:
                follower.job = None
            if state == DONE and isinstance(value, Look) and value.reader == 0:  # a read shared by looks: once
                self.bytes_read += value.read
                self.bytes_scanned += value.scanned
            if (self.closed or _worker().closed or self.followers.get(follower.key) is not follower
                    or job.cancelled):
                return  # (the worker closed: the process is exiting, and no look failed)
            ids = sorted(server_id for server_id, sub in self.subs.items() if sub.key == follower.key)
            if state == ENDED:
                # The worker process ended during this look: the look is queued again and the worker
                # makes the follower again (binlogs.lint_worker); what it found was never told.
                follower.crashes += 1
                follower.started = False
                if follower.crashes >= MAX_CRASHES:
                    follower.state = FAILED
                    follower.reason = (f"{value}: the worker process ended during {follower.crashes} looks in a "
                                       f"row of these rules, from {_where(follower.position)}")
                    told.append(f"lint: {follower.state}: {follower.reason}")
                else:
                    follower.job = _Job(self, follower, job.look, job.seen)
                    _worker().put(follower.job, bounded=False)
            elif state == LOST:  # not made again (no binlog file listed yet): with the next look
                follower.started, follower.seen = False, None
            elif state == DONE and isinstance(value, Look):
                follower.started = True
                follower.crashes = 0
                follower.checkpoint = value.checkpoint or follower.checkpoint
                self.largest_look = max(self.largest_look, value.read)
                follower.state = DONE
                follower.position = value.position or follower.position
                follower.seen = job.seen if value.caught_up else None
                known = follower.found
                follower.found += value.found
                follower.breaks += value.breaks[:max(0, LINT_WARNINGS - len(follower.breaks))]
                # Logged once each: the breaks told in full, and the count beyond them once.
                told += [_break_line(b) for b in follower.breaks[known:]]
                if known <= LINT_WARNINGS < follower.found:
                    told.append("lint: more predicted breaks follow: run `dumpfilter lint`")
                if value.diverges and not follower.diverges:  # logged once, when first found
                    told.append(divergence_line(value.diverges, follower.position))
                follower.diverges = max(follower.diverges, value.diverges)  # the Linter's count so far
            else:
                follower.state = FAILED if state == FAILED else NOT_RUN
                follower.reason = str(value)
                told.append(f"lint: {follower.state}: {follower.reason}")
                if follower.started:
                    _worker().forget(follower.fid)
                    follower.started = False
        self.wake.set()  # the binlog may have grown while it was read
        who = ",".join(str(i) for i in ids) or "-"
        for line in told:
            log.warning("server_id %s: %s", who, line)

    def _ensure_thread(self) -> None:
        """The follow thread, started with the first follower: at each change of the binlog
        directory (at most every FOLLOW_EVERY seconds), a look for each follower the binlog grew past."""
        with self.lock:
            if self.thread is not None or self.closed:
                return
            self.thread = threading.Thread(target=self._follow, name="lint-follow", daemon=True)
        if self.watch is not None:
            self.watch.add(self.wake)
        self.thread.start()

    def _follow(self) -> None:
        while True:
            self.wake.wait()
            if self.closed:
                return
            self.wake.clear()
            try:
                self.look()
            except Exception:  # noqa: BLE001 - the thread must outlive any one look
                log.exception("lint: following the binlog failed")
            if self.stopped.wait(FOLLOW_EVERY):
                return

    def look(self) -> int:
        """Queues a look for each follower whose binlog grew since its last one; how many."""
        snapshot = self._snapshot()
        if isinstance(snapshot, str):
            return 0
        end = _end(snapshot)
        queued = 0
        with self.lock:
            for follower in self.followers.values():
                if self.closed or follower.state != DONE or follower.job is not None or follower.seen == end:
                    continue
                job = _Job(self, follower, (follower.fid, None, snapshot, self.max_bytes), end)
                _worker().put(job, bounded=False)
                follower.job = job
                self.looks += 1
                queued += 1
        return queued

    def status(self, server_id: int) -> LintStatus:
        """A slave's lint, for Stats."""
        if not self.enabled:
            return LintStatus(OFF)
        snapshot = self._snapshot()  # the live end, before the follower is read: lag is never understated
        with self.lock:
            sub = self.subs.get(server_id)
            follower = self.followers.get(sub.key) if sub is not None else None
            if follower is None:
                return LintStatus(OFF if sub is None else NOT_RUN)
            return self._status(follower, snapshot)

    def _status(self, follower: _Follower, snapshot: list[tuple[str, int]] | str) -> LintStatus:
        """Under self.lock. Lag only for a rule set lint reads (pending, done): one it does not run or
        that failed reads nothing, and is behind by nothing (it counted the whole binlog, never
        shrinking: a lag alert that fired for good)."""
        followed = follower.state in FOLLOWED
        lag = behind(follower.position, snapshot) if followed and not isinstance(snapshot, str) else (0, 0)
        return LintStatus(follower.state, follower.warnings(), follower.position, follower.found, *lag,
                          diverges=follower.diverges)

    def rule_sets(self) -> list[RuleSetLint]:
        """Every followed rule set's lint, for /metrics (one listing of the binlog for all)."""
        if not self.enabled:
            return []
        snapshot = self._snapshot()
        with self.lock:
            ids: dict[FollowerKey, list[int]] = {}
            for server_id, sub in self.subs.items():
                ids.setdefault(sub.key, []).append(server_id)
            return [RuleSetLint(f.fid, tuple(sorted(ids.get(key, ()))), self._status(f, snapshot))
                    for key, f in self.followers.items()]

    def take(self, server_id: int) -> list[str]:
        """The slave's warnings not yet told: all of them the first time they are ready, then the
        breaks found since (the Dump stream puts them in its next batch)."""
        sub = self.subs.get(server_id)
        if sub is not None and sub.seen == self.changes:  # (read without the lock: see `changes`)
            return []
        with self.lock:
            sub = self.subs.get(server_id)
            if sub is not None:
                sub.seen = self.changes
            follower = self.followers.get(sub.key) if sub is not None else None
            if sub is None or follower is None or follower.state == PENDING:
                return []
            if not sub.delivered:
                sub.delivered, sub.told, sub.told_diverges = True, follower.found, bool(follower.diverges)
                return follower.warnings()
            diverged = follower.state == DONE and follower.diverges > 0 and not sub.told_diverges
            if follower.state != DONE or (follower.found <= sub.told and not diverged):
                return []
            told, sub.told = sub.told, follower.found
            sub.told_diverges = sub.told_diverges or diverged
            return warning_lines(follower.breaks, follower.found, told) + (
                [divergence_line(follower.diverges, follower.position)] if diverged else [])

    def forget(self, server_id: int) -> None:
        with self.lock:
            self.changes += 1
            old = self.subs.pop(server_id, None)
            if old is not None:
                self._drop_unwanted(old.key)

    def _drop_unwanted(self, key: FollowerKey) -> None:
        """Under self.lock: the follower of `key` ends when no slave shares it."""
        follower = self.followers.get(key)
        if follower is not None and not any(sub.key == key for sub in self.subs.values()):
            self._unfollow(follower)

    def _unfollow(self, follower: _Follower) -> None:
        """Under self.lock: its look leaves the queue, the worker drops its Linter."""
        self.changes += 1
        if self.followers.get(follower.key) is follower:
            del self.followers[follower.key]
        job, follower.job = follower.job, None
        if job is not None:
            job.cancelled = True
            _worker().drop(job)
        if follower.started or job is not None:
            _worker().forget(follower.fid)

    def close(self) -> None:
        """Queued looks of this master are dropped; a running one ends on its own."""
        with self.lock:
            self.closed = True
            for follower in list(self.followers.values()):
                self._unfollow(follower)
            self.subs.clear()
        self.stopped.set()
        self.wake.set()
        if self.watch is not None:
            self.watch.discard(self.wake)


def _where(position: tuple[str, int] | None) -> str:
    return f"{position[0]}:{position[1]}" if position is not None else "the binlog's start"


def _end(snapshot: list[tuple[str, int]]) -> tuple[str, int] | None:
    """The binlog's end in a snapshot: its last file's name and size."""
    return (Path(snapshot[-1][0]).name, snapshot[-1][1]) if snapshot else None
