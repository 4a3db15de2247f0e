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
    (`lint_position`) and how many breaks it found (`lint_breaks`);
  - a break found, or a lint that failed, is also one WARNING line in the master's log.

The worker process may die (killed, out of memory): the master starts it again at once, in one
WARNING line, and every rule set reads on from its last position. After each look that moved on,
the worker hands back its follower as it stands (`FollowingLint.checkpoint`: its Linter, pickled)
and the master keeps it; a worker started anew is given it with the follower's next look. A look
the worker died in is queued again from there (its breaks were never told, so none is told twice);
a rule set whose looks end the worker MAX_CRASHES times in a row fails. How far behind the live end
of the binlog each rule set is (bytes and files) is in Stats and /metrics.
"""

from __future__ import annotations

import atexit
import itertools
import logging
import os
import pickle
import signal
import subprocess
import sys
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from dumpfilter.errors import DumpFilterError, ResourceExhaustedError
from dumpfilter.binlogs import binlog_paths
from dumpfilter.binlogs.lint import FollowingLint, Look, look_together, new_linter
from dumpfilter.binlogs.scan_index import ScanIndex
from dumpfilter.binlogs.watch import DirectoryWatch
from dumpfilter.rules.lint import Break
from dumpfilter.rules.lint_rules import rule_warnings
from dumpfilter.rules.ruleset import RuleSet, Settings
from dumpfilter.rules.schema import SchemaModel

log = logging.getLogger("dumpfilter.master.lint")

MiB = 1 << 20
# The most one look of lint reads: the first look reads the whole binlog, so a binlog holding more
# is not linted at Register (the warning says so); each later look reads what was appended since,
# at most this much, and the next look goes on from there. A look reads the compiled scan and
# feeds the Linter only the units that may matter (binlogs.lint_scan.FollowScan): about 1.1 GB of
# ROW binlog per CPU second, 60 MB of MIXED with a break in every eighth transaction; it was 64
# MiB while every unit went through Python (about 2 MB per CPU second).
# `master serve --lint-max-mb` sets it; 0 turns lint off.
LINT_MAX_BYTES = 1024 * MiB
LINT_WARNINGS = 5        # predictions told per slave; the rest are counted
MAX_QUEUED = 64          # rule sets waiting for their first look; more are told "not run"
                         # (each identity its share of them: master.shares)
MAX_FOLLOWED = 256       # rule sets followed at once (each one Linter in the worker process)
FOLLOW_EVERY = 0.5       # seconds: the binlog's changes are looked at at most this often
TOGETHER = 64            # looks handed to the worker in one message (read together where they can)

OFF, PENDING, DONE, NOT_RUN, FAILED = "off", "pending", "done", "not run", "failed"
LOST = "lost"  # the worker process does not hold the follower (it was restarted): resume it
ENDED = "ended"  # the worker process ended during this look: queued again, from the last checkpoint
MAX_CRASHES = 3  # looks of one rule set in a row the worker ended in: then it fails
WATCH_EVERY = 1.0  # seconds: how often an idle worker is checked for having ended


# -- the worker process -------------------------------------------------------------------------
def _serve() -> None:
    """The worker process's main loop (`python -m <this module>`): a message, pickled, on stdin;
    its replies, pickled, on stdout; until stdin closes (the master ended). A message is
    (followers to drop, [look...]); a look is (follower id, the linter's arguments on its first
    look, its checkpoint when this process does not hold it, else None, [(path, size)...],
    budget); the reply is [(state, value)...], one per look."""
    try:
        os.nice(10)  # the streams come first
    except OSError:
        pass
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr  # nothing else may write to the result pipe
    followers: dict[int, FollowingLint] = {}
    index = ScanIndex()  # the closed files' scans, for every rule set linted after the first
    while True:
        try:
            drops, looks = pickle.load(stdin)
        except (EOFError, OSError, pickle.UnpicklingError, TypeError, ValueError):
            return
        for fid in drops:
            followers.pop(fid, None)
        pickle.dump(_looks(followers, looks, index), stdout)
        stdout.flush()


def _looks(followers: dict[int, FollowingLint], looks: list[tuple],
           index: ScanIndex | None = None) -> list[tuple[str, object]]:
    """One message's looks, answered in order; each follower made on its first look, or made again
    from its checkpoint. Followers at one place of one binlog read it together (`look_together`:
    one read and scan for all). A look that moved its follower on hands back its checkpoint."""
    replies: list[tuple[str, object]] = [(LOST, None)] * len(looks)
    groups: dict[tuple, list[int]] = {}
    for n, (fid, first, files, budget) in enumerate(looks):
        try:
            if isinstance(first, bytes):  # a worker started anew: the follower as it stood
                followers[fid] = FollowingLint.resume(first, index)
            elif first is not None:
                rules, settings, schema, replica_schema, verify_checksums = first
                followers[fid] = FollowingLint(new_linter(rules, settings, schema, replica_schema),
                                               verify_checksums=verify_checksums, index=index)
        except Exception as exc:  # a rule set lint cannot set up: told as a warning
            followers.pop(fid, None)
            replies[n] = (NOT_RUN, str(exc) if isinstance(exc, DumpFilterError) else f"{type(exc).__name__}: {exc}")
            continue
        following = followers.get(fid)
        if following is not None:  # else LOST: the worker was started anew
            groups.setdefault((following.place(), tuple(files), budget), []).append(n)
    for (_, files, budget), members in groups.items():
        fids = [looks[n][0] for n in members]
        try:
            followings = [followers[fid] for fid in fids]
            places = [(f.file, f.pos) for f in followings]
            got = look_together(followings, files, budget, LINT_WARNINGS)
            for n, following, place, look in zip(members, followings, places, got):
                if (following.file, following.pos) != place or looks[n][1] is not None:
                    look.checkpoint = following.checkpoint()
                replies[n] = (DONE, look)
        except Exception as exc:  # the binlog's error (or lint's own bug): told as a warning, never a failed Register
            why = str(exc) if isinstance(exc, DumpFilterError) else f"{type(exc).__name__}: {exc}"
            for n, fid in zip(members, fids):
                followers.pop(fid, None)
                replies[n] = (NOT_RUN, why)
    return replies


@dataclass(eq=False)
class _Job:
    """One look of one follower."""
    owner: LintJobs
    follower: _Follower
    look: tuple          # (follower id, first-look arguments or None, files, budget)
    seen: tuple | None   # the binlog's end (last file, size) when it was queued
    cancelled: bool = False


class _Worker:
    """The one worker process of this Python process, fed from a queue by one thread. A plain
    `python -m` child (not multiprocessing): it never re-imports the caller's main script. A job
    nobody waits for any more is taken out of the queue (`drop`), freeing its place; a follower
    nobody follows any more is dropped from the worker with the next message (`forget`).

    A worker process that ended (killed, out of memory) is started again: at once when it ended
    while idle (the dispatch thread looks every WATCH_EVERY seconds), or when it ended during an
    exchange (its looks are answered ENDED: their owners queue them again). Either way one WARNING
    line, and `restarts` counts it. `held`: the followers the running process holds; a look of
    any other is sent with the follower's checkpoint (a process started anew holds none)."""

    def __init__(self):
        self.queued: deque[_Job] = deque()
        self.forgotten: list[int] = []
        self.ready = threading.Condition()
        self.proc: subprocess.Popen | None = None
        self.closed = False  # the process exits: no worker is started again, no look run
        self.held: set[int] = set()   # follower ids the running worker process holds
        self.answered = False         # the running worker process answered a message
        self.sending: list[int] = []  # follower ids of the looks being exchanged (for the restart's line)
        self.restarts = 0             # worker processes started again after one ended
        self.thread = threading.Thread(target=self._dispatch, name="lint-dispatch", daemon=True)
        self.thread.start()
        atexit.register(self.close)

    def _start(self) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", __name__], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, start_new_session=True)
        self.held, self.answered = set(), False

    def _restart(self, ended: subprocess.Popen, during: str) -> str:
        """The worker process `ended` (it exited, or was killed): a new one is started, in one WARNING
        line; '' or why it cannot be."""
        try:
            code = ended.wait(1)  # its pipe's end was seen: its exit is at hand
            how = (f"was killed by {signal.Signals(-code).name}" if code < 0 and -code in signal.valid_signals()
                   else f"exited with status {code}")
        except subprocess.TimeoutExpired:  # alive, but its pipes are gone or it answered out of turn
            ended.kill()
            try:
                ended.wait(5)
            except subprocess.TimeoutExpired:
                pass
            how = "stopped answering"
        resume = len(self.held | set(self.sending))
        self.proc = None
        if self.closed:
            return "the master is shutting down"
        self.restarts += 1
        try:
            self._start()
        except (OSError, ValueError, subprocess.SubprocessError) as exc:
            self.proc = None
            why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            why = f"the lint worker process cannot be started ({sys.executable}: {why})"
            log.warning("lint: the worker process %s %s, and %s", how, during, why)
            return why
        log.warning("lint: the worker process %s %s; started again (%d restart(s)): %d rule set(s) read on "
                    "from their last positions", how, during, self.restarts, resume)
        return ""

    def _run(self, message: tuple, n: int) -> list[tuple[str, object]]:
        """One message's exchange with the worker: its n replies, or n failures (ENDED: the worker
        process ended during it, and was started again)."""
        if self.closed:
            return [(FAILED, "the master is shutting down")] * n
        if self.proc is not None and self.proc.poll() is not None:  # ended since it last answered
            if self._restart(self.proc, "while idle"):
                self.proc = None
        if self.proc is None:
            try:
                self._start()
            except (OSError, ValueError, subprocess.SubprocessError) as exc:
                self.proc = None
                why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
                return [(FAILED, f"the lint worker process cannot be started ({sys.executable}: {why})")] * n
        # One reference for the whole exchange: `close` (at exit, on another thread) may take
        # self.proc away and kill the worker meanwhile; the exchange then fails as a worker that
        # ended does, instead of raising in this thread (a traceback as the master exits).
        proc = self.proc
        if proc is None or proc.stdin is None or proc.stdout is None:
            return [(FAILED, "the lint worker process ended")] * n
        try:
            pickle.dump(message, proc.stdin)
            proc.stdin.flush()
            replies = pickle.load(proc.stdout)
        except (OSError, ValueError, EOFError, pickle.UnpicklingError) as exc:
            replies = f"the lint worker process ended ({type(exc).__name__})"
        else:
            if not isinstance(replies, list) or len(replies) != n:
                replies = "the lint worker process answered out of turn"
        if isinstance(replies, str):
            if self.closed or self.proc is not proc:
                return [(FAILED, replies)] * n
            self._restart(proc, f"during a look of {n} rule set(s)" if n else "during an exchange")
            return [(ENDED, replies)] * n
        self.answered = True
        return replies

    def put(self, job: _Job, bounded: bool = True) -> bool:
        """Queues a look; a first look (`bounded`) only while fewer than MAX_QUEUED wait (a later
        look is bounded by its follower: one at a time each)."""
        with self.ready:
            if bounded and sum(1 for j in self.queued if j.look[1] is not None) >= MAX_QUEUED:
                return False
            self.queued.append(job)
            self.ready.notify()
            return True

    def drop(self, job: _Job) -> None:
        with self.ready:
            try:
                self.queued.remove(job)
            except ValueError:
                pass  # already taken by the worker: it ends on its own

    def forget(self, fid: int) -> None:
        with self.ready:
            self.forgotten.append(fid)
            self.ready.notify()

    def _take(self) -> list[_Job]:
        """Under self.ready: the next job and up to TOGETHER queued ones that can read with it
        (same first file, same budget), out of the queue; `_dispatch` hands them all the newest
        snapshot among theirs (a newer snapshot than a look's own only reads further)."""
        first = self.queued.popleft()
        if first.cancelled:
            return [first]
        jobs, rest = [first], deque()
        files, budget = first.look[2], first.look[3]
        while self.queued:
            job = self.queued.popleft()
            if (len(jobs) < TOGETHER and not job.cancelled and job.look[3] == budget and job.look[2] and files
                    and job.look[2][0][0] == files[0][0]):
                jobs.append(job)
            else:
                rest.append(job)
        self.queued = rest
        return jobs

    def _watch(self) -> None:
        """Idle: a worker process that answered before and has ended since is started again now."""
        proc = self.proc
        if proc is not None and self.answered and not self.closed and proc.poll() is not None:
            self._restart(proc, "while idle")

    def _first(self, job: _Job) -> object:
        """What the worker needs to make the job's follower: its first-look arguments, its checkpoint
        when the running process does not hold it (started anew), else None."""
        fid, first = job.look[0], job.look[1]
        if first is None and fid not in self.held:
            return job.follower.checkpoint or None  # none: the worker answers LOST, the owner starts it again
        return first

    def _dispatch(self) -> None:
        while True:
            with self.ready:
                if not self.queued and not self.forgotten:
                    self.ready.wait(WATCH_EVERY)
                jobs = self._take() if self.queued else []
                drops, self.forgotten = self.forgotten, []
            jobs = [job for job in jobs if not job.cancelled]
            if not jobs:
                proc = self.proc
                if drops and proc is not None and proc.poll() is None:
                    self._run((drops, []), 0)  # a worker started anew holds none of them
                self.held.difference_update(drops)
                try:
                    self._watch()
                except Exception:  # noqa: BLE001 - the thread must outlive any one restart
                    log.exception("lint: the worker process could not be started again")
                continue
            if self.proc is not None and self.proc.poll() is not None and not self.closed:
                self._restart(self.proc, "while idle")  # before the looks are made: none is held now
            newest = max((job.look[2] for job in jobs), key=lambda files: (len(files), files[-1][1] if files else 0))
            looks = [(job.look[0], self._first(job), newest, job.look[3]) for job in jobs]
            self.held.difference_update(drops)
            self.sending = [job.look[0] for job in jobs]
            try:
                replies = self._run((drops, looks), len(jobs))
            except Exception as exc:  # noqa: BLE001 - the thread must outlive any one job
                if not self.closed:
                    log.exception("lint: a look failed")
                replies = [(FAILED, f"{type(exc).__name__}: {exc}")] * len(jobs)
            self.sending = []
            for job, (state, value) in zip(jobs, replies):
                if state == DONE:
                    self.held.add(job.look[0])
                else:
                    self.held.discard(job.look[0])
                try:
                    job.owner.finished(job, state, value)
                except Exception:  # noqa: BLE001 - as above
                    log.exception("lint: a look's result was lost")
            # Not kept while the next jobs are awaited: a job's owner is a master's LintJobs.
            jobs = replies = looks = state = value = None

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait(5)

    def close(self) -> None:
        """At exit: the worker killed, and none started again by a look still queued."""
        self.closed = True
        self.stop()


_WORKER: _Worker | None = None
_WORKER_LOCK = threading.Lock()
_FOLLOWER_IDS = itertools.count(1)  # unique in this process: every master's followers share the worker


def _worker() -> _Worker:
    global _WORKER
    with _WORKER_LOCK:
        if _WORKER is None:
            _WORKER = _Worker()
        return _WORKER


# -- one master's followers ----------------------------------------------------------------------
@dataclass(eq=False)
class _Follower:
    """Lint of one rule set over this master's binlog, as far as it has read."""
    key: tuple
    first: tuple                     # the worker's Linter arguments (sent with the first look)
    account: str = ""                # the identity account that started it (master.shares)
    fid: int = field(default_factory=lambda: next(_FOLLOWER_IDS))
    state: str = PENDING
    position: tuple[str, int] | None = None  # how far lint has read: the end of its last whole unit
    seen: tuple | None = None        # the binlog's end its last look reached (None: look again)
    breaks: list[Break] = field(default_factory=list)  # the first LINT_WARNINGS found
    found: int = 0                   # every break found
    reason: str = ""                 # why not run, or failed
    job: _Job | None = None          # its look queued or running
    started: bool = False            # the worker holds its Linter
    checkpoint: bytes = b""          # the follower as it stood after its last look (FollowingLint.checkpoint)
    crashes: int = 0                 # its looks in a row the worker process ended in

    def warnings(self) -> list[str]:
        if self.state == DONE:
            # a rule that keeps no table (`db.`) first: the predictions alone would say "no break"
            return [f"lint: {w}" for w in rule_warnings(self.first[0])] + warning_lines(self.breaks, self.found)
        return [f"lint: {self.state}: {self.reason}"] if self.reason else []


@dataclass
class _Sub:
    key: tuple
    delivered: bool = False  # its warnings were told (Register reply or a batch)
    told: int = 0            # breaks told


@dataclass(frozen=True)
class LintStatus:
    """A slave's lint for Stats: its state, warnings, how far lint has read and the breaks found."""
    state: str
    warnings: list[str] = field(default_factory=list)
    position: tuple[str, int] | None = None
    breaks: int = 0


def _break_line(b: Break) -> str:
    cause = b.cause
    why = (f"; the event it needs was skipped at {cause.file}:{cause.pos} by {cause.rule}"
           if cause is not None and cause.file else f"; {cause.rule}" if cause is not None else "")
    gtid = f" (GTID {b.gtid})" if b.gtid else ""
    return (f"lint: a replica with these filters would stop at {b.file}:{b.pos}{gtid} with error "
            f"{b.errno}: {b.message}{why}")


def warning_lines(breaks: list[Break], found: int | None = None, start: int = 0) -> list[str]:
    """One warning per predicted break (the first LINT_WARNINGS of `found`), as `slave run` prints
    them; from the `start`th on (those not yet told)."""
    found = len(breaks) if found is None else found
    out = [_break_line(b) for b in breaks[start:LINT_WARNINGS]]
    if found > LINT_WARNINGS:
        out.append(f"lint: {found - LINT_WARNINGS} more predicted break(s): run `dumpfilter lint`")
    return out


class LintJobs:
    """Lint for one master: a follower per registered rule set and the slaves that share it."""

    def __init__(self, binlog_dir: Path, max_bytes: int = LINT_MAX_BYTES, schema: SchemaModel | None = None,
                 verify_checksums: bool = True):
        self.binlog_dir = Path(binlog_dir)
        self.max_bytes = max_bytes
        self.schema = schema
        self.verify_checksums = verify_checksums
        self.lock = threading.Lock()
        self.followers: dict[tuple, _Follower] = {}  # by (rules, settings, replica schema)
        self.subs: dict[int, _Sub] = {}
        self.closed = False
        self.jobs_run = 0  # for tests and Stats: first looks handed to the worker (rule sets linted)
        self.looks = 0     # every look handed to the worker
        self.bytes_read = 0  # the binlog bytes the looks read (each once, but for a unit a look stopped inside;
                             # a read shared by looks together once)
        self.largest_look = 0  # the most one look read (about --lint-max-mb at most)
        self.bytes_scanned = 0  # of bytes_read, those read and scanned, not taken from the worker's kept scans
        self.wake = threading.Event()
        self.stopped = threading.Event()
        self.watch: DirectoryWatch | None = None
        self.thread: threading.Thread | None = None

    @property
    def enabled(self) -> bool:
        return self.max_bytes > 0

    def follow(self, watch: DirectoryWatch) -> None:
        """Look again whenever the binlog directory changes (the master's watch)."""
        self.watch = watch

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
            old = self.subs.get(server_id)
            sub = self.subs[server_id] = _Sub(key)
            if old is not None and old.key != key:
                self._drop_unwanted(old.key)
            follower = self.followers.get(key)
            if follower is not None and follower.state == DONE:
                sub.delivered, sub.told = True, follower.found
                return follower.warnings()
            if follower is not None and follower.state == PENDING:  # being linted for another slave: shared
                return []
            if follower is not None:  # not run or failed before: tried again
                self._unfollow(follower)
            follower = self.followers[key] = _Follower(key, (rules, settings, self.schema, replica_schema,
                                                             self.verify_checksums), account)
            why = self._start(follower, check)
            if why:
                follower.state, follower.reason = NOT_RUN, why
                sub.delivered = True
                return [f"lint: not run at Register: {why}"]
        self._ensure_thread()
        return []

    def _start(self, follower: _Follower, check: Callable[[int], None] | None = None) -> str:
        """Under self.lock: queues the follower's first look; '' or why it cannot be."""
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
        follower.state, follower.position, follower.seen = PENDING, None, None
        follower.breaks, follower.found, follower.started = [], 0, False
        follower.checkpoint, follower.crashes = b"", 0
        job = _Job(self, follower, (follower.fid, follower.first, snapshot, self.max_bytes), _end(snapshot))
        if not _worker().put(job):
            return f"{MAX_QUEUED} lint jobs are already queued"
        follower.job = job
        self.jobs_run += 1
        self.looks += 1
        return ""

    def finished(self, job: _Job, state: str, value) -> None:
        """The worker's answer to a look (the dispatch thread)."""
        follower = job.follower
        told: list[str] = []
        with self.lock:
            if follower.job is job:
                follower.job = None
            if state == DONE and isinstance(value, Look) and value.reader == 0:  # a read shared by looks: once
                self.bytes_read += value.read
                self.bytes_scanned += value.scanned
            if self.closed or self.followers.get(follower.key) is not follower or job.cancelled:
                return
            ids = sorted(server_id for server_id, sub in self.subs.items() if sub.key == follower.key)
            if state == ENDED and follower.crashes + 1 >= MAX_CRASHES:
                follower.crashes += 1
                follower.state = FAILED
                follower.reason = (f"{value}: the worker process ended during {follower.crashes} looks in a row "
                                   f"of these rules, from {_where(follower.position)}")
                told.append(f"lint: {follower.state}: {follower.reason}")
                follower.started = False
            elif state == ENDED or (state == LOST and (follower.checkpoint or job.look[1] is not None)):
                # The worker process ended (during this look, or before it): the look is queued again
                # and reads on from the follower's checkpoint, the breaks it found were never told.
                follower.crashes += state == ENDED
                follower.started = False
                again = _Job(self, follower, job.look, job.seen)
                follower.job = again
                _worker().put(again, bounded=False)
            elif state == LOST:  # the worker does not hold it and there is no checkpoint: read from the start again
                why = self._start(follower)
                if why:
                    follower.state, follower.reason = NOT_RUN, f"the lint worker was restarted and {why}"
                    told.append(f"lint: not run: {follower.reason}")
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
        with self.lock:
            sub = self.subs.get(server_id)
            follower = self.followers.get(sub.key) if sub is not None else None
            if follower is None:
                return LintStatus(OFF if sub is None else NOT_RUN)
            return LintStatus(follower.state, follower.warnings(), follower.position, follower.found)

    def take(self, server_id: int) -> list[str]:
        """The slave's warnings not yet told: all of them the first time they are ready, then the
        breaks found since (the Dump stream puts them in its next batch)."""
        with self.lock:
            sub = self.subs.get(server_id)
            follower = self.followers.get(sub.key) if sub is not None else None
            if sub is None or follower is None or follower.state == PENDING:
                return []
            if not sub.delivered:
                sub.delivered, sub.told = True, follower.found
                return follower.warnings()
            if follower.state != DONE or follower.found <= sub.told:
                return []
            told, sub.told = sub.told, follower.found
            return warning_lines(follower.breaks, follower.found, told)

    def forget(self, server_id: int) -> None:
        with self.lock:
            old = self.subs.pop(server_id, None)
            if old is not None:
                self._drop_unwanted(old.key)

    def _drop_unwanted(self, key: tuple) -> None:
        """Under self.lock: the follower of `key` ends when no slave shares it."""
        follower = self.followers.get(key)
        if follower is not None and not any(sub.key == key for sub in self.subs.values()):
            self._unfollow(follower)

    def _unfollow(self, follower: _Follower) -> None:
        """Under self.lock: its look leaves the queue, the worker drops its Linter."""
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


def _end(snapshot: list[tuple[str, int]]) -> tuple | None:
    """The binlog's end in a snapshot: its last file's name and size."""
    return (Path(snapshot[-1][0]).name, snapshot[-1][1]) if snapshot else None


if __name__ == "__main__":
    _serve()
