"""The lint worker of the master's lint at Register (master.lint_jobs): one niced child process
(`python -m` this module) that holds each followed rule set's FollowingLint and runs their looks,
and the dispatch thread that feeds it from a queue. It takes neither the GIL nor the Register
threads from the streams.

A worker process that ends (killed, out of memory) is started again, in one WARNING line
(`Worker.restarts` counts them): at once when it ended while idle, or when it ended during an
exchange, whose looks are answered ENDED so that their owners queue them again. A process started
anew holds no follower: each follower's next look carries its last checkpoint (the follower as it
stood, pickled, handed back with a look's answer once it has read `checkpoint_bytes` since the
last one; else its first-look arguments) and the position the master has told up to: the worker
reads silently from the checkpoint to that position (a replay: its breaks were told already), then
looks on from there. No break is told twice, and a checkpoint (about 2 MB and 40 ms for a schema of
5000 tables) is taken only once per CHECKPOINT_BYTES read.
"""

from __future__ import annotations

import atexit
import logging
import os
import pickle
import signal
import subprocess
import sys
import threading
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dumpfilter.errors import BinlogError, DumpFilterError
from dumpfilter.binlogs.lint import FollowingLint, look_together, new_linter
from dumpfilter.binlogs.scan_index import ScanIndex
from dumpfilter.rules.schema import load_schema
import contextlib

log = logging.getLogger("dumpfilter.master.lint")

LINT_WARNINGS = 5        # predictions told per slave; the rest are counted
MAX_QUEUED = 64          # rule sets waiting for their first look; more are told "not run"
                         # (each identity its share of them: master.shares)
TOGETHER = 64            # looks handed to the worker in one message (read together where they can)
WATCH_EVERY = 1.0        # seconds: how often an idle worker is checked for having ended

DONE, NOT_RUN, FAILED = "done", "not run", "failed"
LOST = "lost"  # the follower was not made: its owner asks again with its next look
ENDED = "ended"  # the worker process ended during this look: queued again, from the last checkpoint
# A follower's checkpoint is taken once it read this much since the last one: a worker started anew
# reads again (silently) at most this much per rule set, together where they are at one place.
CHECKPOINT_BYTES = 256 << 20

# The pickled messages (see `_serve`): a binlog's files as (path, size); a look as a Job holds it
# (follower id, first-look arguments or None, files, budget) and as the worker takes it (the same,
# the first-look arguments or a checkpoint, the position to replay to, the bytes between
# checkpoints); a message (followers to drop, looks); a reply (state, value) per look.
Files = list[tuple[str, int]]
JobLook = tuple[int, Any, Files, int]
Look = tuple[int, Any, Files, int, Any, int]
Message = tuple[list[int], list[Look]]
Reply = tuple[str, object]


# -- the worker process -------------------------------------------------------------------------
def _serve(parent: int | None = None) -> None:
    """The worker process's main loop (`python -m <this module>`): a Message, pickled, on stdin;
    its Replies, one per look, pickled, on stdout; until stdin closes (the master ended). `parent`:
    the process that started it, gone before this one could ask to die with it (`simulate`'s):
    nothing done."""
    if parent is not None and os.getppid() != parent:
        return
    with contextlib.suppress(OSError):
        os.nice(10)  # the streams come first
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr  # nothing else may write to the result pipe
    followers: dict[int, FollowingLint] = {}
    since: dict[int, int] = {}  # bytes each follower read since its last checkpoint
    index = ScanIndex()  # the closed files' scans, for every rule set linted after the first
    while True:
        try:
            drops, looks = pickle.load(stdin)
        except (EOFError, OSError, pickle.UnpicklingError, TypeError, ValueError):
            return
        for fid in drops:
            followers.pop(fid, None)
            since.pop(fid, None)
        pickle.dump(_looks(followers, looks, index, since), stdout)
        stdout.flush()


def _looks(followers: dict[int, FollowingLint], looks: list[Look], index: ScanIndex | None = None,
           since: dict[int, int] | None = None) -> list[Reply]:
    """One message's looks, answered in order; each follower made on its first look, or made again
    (from its checkpoint, or from the start) and read silently up to where the master told it
    (a replay). Followers at one place of one binlog read it together (`look_together`: one read
    and scan for all). A look after which its follower read `every` bytes since its last
    checkpoint hands back a new one."""
    since = {} if since is None else since
    replies: list[Reply] = [(LOST, None)] * len(looks)
    replays: dict[tuple[object, tuple[Any, ...]], list[int]] = {}
    for n, (fid, first, files, _budget, replay_to, _every) in enumerate(looks):
        try:
            if isinstance(first, bytes):  # a worker started anew: the follower as it stood
                followers[fid] = FollowingLint.resume(first, index)
            elif first is not None:
                rules, settings, schema, replica_schema, verify_checksums = first
                if isinstance(replica_schema, str):  # a source (`simulate`'s topology), read here
                    replica_schema = load_schema(replica_schema, "replica_schema")
                followers[fid] = FollowingLint(new_linter(rules, settings, schema, replica_schema),
                                               verify_checksums=verify_checksums, index=index)
        except Exception as exc:  # a rule set lint cannot set up: told as a warning
            followers.pop(fid, None)
            replies[n] = (NOT_RUN, _why(exc))
            continue
        if first is not None:
            since[fid] = 0
            if replay_to is not None and not files:  # the index caught being written: LOST, made again later
                followers.pop(fid, None)
            elif replay_to is not None:
                replays.setdefault((followers[fid].place(), tuple(replay_to)), []).append(n)
    for (_, replay_to), members in replays.items():
        fids = [looks[n][0] for n in members]
        try:
            got = look_together([followers[fid] for fid in fids], _up_to(looks[members[0]][2], replay_to), 1 << 62, 0)
            for fid in fids:
                since[fid] += got[0].read
        except Exception as exc:  # its file left the index, or the binlog's error: told as a warning
            for n, fid in zip(members, fids):
                followers.pop(fid, None)
                replies[n] = (NOT_RUN, _why(exc))
    groups: dict[tuple[object, tuple[tuple[str, int], ...], int], list[int]] = {}
    for n, (fid, _first, files, budget, _replay_to, _every) in enumerate(looks):
        following = followers.get(fid)
        if following is not None and replies[n][0] == LOST:  # else LOST: the worker was started anew
            groups.setdefault((following.place(), tuple(files), budget), []).append(n)
    for (_, group_files, budget), members in groups.items():
        fids = [looks[n][0] for n in members]
        try:
            followings = [followers[fid] for fid in fids]
            got = look_together(followings, group_files, budget, LINT_WARNINGS)
            for n, fid, following, look in zip(members, fids, followings, got):
                since[fid] = since.get(fid, 0) + look.read
                every = looks[n][5]
                if every > 0 and since[fid] >= every:
                    look.checkpoint, since[fid] = following.checkpoint(), 0
                replies[n] = (DONE, look)
        except Exception as exc:  # the binlog's error (or lint's own bug): told as a warning, never a failed Register
            for n, fid in zip(members, fids):
                followers.pop(fid, None)
                replies[n] = (NOT_RUN, _why(exc))
    return replies


def _why(exc: Exception) -> str:
    return str(exc) if isinstance(exc, DumpFilterError) else f"{type(exc).__name__}: {exc}"


def _up_to(files: list[tuple[str, int]], position: tuple[str, int]) -> list[tuple[str, int]]:
    """The binlog's files up to `position` (its file cut there)."""
    names = [Path(path).name for path, _ in files]
    if position[0] not in names:
        raise BinlogError(f"{position[0]} left the binlog index before lint read it again")
    i = names.index(position[0])
    return [*files[:i], (files[i][0], position[1])]


@dataclass(eq=False)
class Job:
    """One look of one follower."""
    owner: Any           # its master's LintJobs: `finished(job, state, value)` takes the answer
    follower: Any        # the follower looked at (its `checkpoint`: what a worker started anew is given)
    look: JobLook        # (follower id, first-look arguments or None, files, budget)
    seen: tuple[str, int] | None  # the binlog's end (last file, size) when it was queued
    cancelled: bool = False


class Worker:
    """The one worker process of this Python process, fed from a queue by one thread. A plain
    `python -m` child (not multiprocessing): it never re-imports the caller's main script. A job
    nobody waits for any more is taken out of the queue (`drop`), freeing its place; a follower
    nobody follows any more is dropped from the worker with the next message (`forget`). A worker
    process that ended is started again (the module docstring says when). `held`: the followers the
    running process holds; a look of any other is sent with the follower's checkpoint."""

    def __init__(self) -> None:
        self.queued: deque[Job] = deque()
        self.forgotten: list[int] = []
        self.ready = threading.Condition()
        self.proc: subprocess.Popen[bytes] | None = None
        self.closed = False  # the process exits: no worker is started again, no look run
        self.held: set[int] = set()   # follower ids the running worker process holds
        self.answered = False         # the running worker process answered a message
        self.sending: list[int] = []  # follower ids of the looks being exchanged (for the restart's line)
        self.restarts = 0             # worker processes started again after one ended
        self.thread = threading.Thread(target=self._dispatch, name="lint-dispatch", daemon=True)
        self.thread.start()
        atexit.register(self.close)

    def _start(self) -> str:
        """Starts a worker process: '' or why it cannot be."""
        try:
            self.proc = subprocess.Popen([sys.executable, "-m", __name__], stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, start_new_session=True)
        except (OSError, ValueError, subprocess.SubprocessError) as exc:
            self.proc = None
            why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            return f"the lint worker process cannot be started ({sys.executable}: {why})"
        self.held, self.answered = set(), False
        return ""

    def _restart(self, ended: subprocess.Popen[bytes], during: str) -> str:
        """The worker process `ended` (it exited, or was killed): a new one is started, in one WARNING
        line; '' or why it cannot be."""
        try:
            code = ended.wait(1)  # its pipe's end was seen: its exit is at hand
            how = (f"was killed by {signal.Signals(-code).name}" if code < 0 and -code in signal.valid_signals()
                   else f"exited with status {code}")
        except subprocess.TimeoutExpired:  # alive, but its pipes are gone or it answered out of turn
            ended.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                ended.wait(5)
            how = "stopped answering"
        resume = len(self.held | set(self.sending))
        self.proc = None
        if self.closed:
            return "the master is shutting down"
        self.restarts += 1
        why = self._start()
        if why:
            log.warning("lint: the worker process %s %s, and %s", how, during, why)
            return why
        log.warning("lint: the worker process %s %s; started again (%d restart(s)): %d rule set(s) read on "
                    "from their last positions", how, during, self.restarts, resume)
        return ""

    def _run(self, message: Message, n: int) -> list[Reply]:
        """One message's exchange with the worker: its n replies, or n failures (ENDED: the worker
        process ended during it, and was started again)."""
        if self.closed:
            return [(FAILED, "the master is shutting down")] * n
        # (one reference: `close`, at exit on another thread, may take self.proc away after the
        # check; a CI run's master raised AttributeError here as it shut down)
        proc = self.proc
        if proc is not None and proc.poll() is not None:  # ended since it last answered
            if why := self._restart(proc, "while idle"):
                return [(FAILED, why)] * n
        if self.proc is None and (why := self._start()):
            return [(FAILED, why)] * n
        # One reference for the whole exchange: `close` (at exit, on another thread) may take
        # self.proc away and kill the worker meanwhile; the exchange then fails as a worker that
        # ended does, instead of raising in this thread (a traceback as the master exits).
        proc = self.proc
        if proc is None or proc.stdin is None or proc.stdout is None:
            return [(FAILED, "the lint worker process ended")] * n
        try:
            pickle.dump(message, proc.stdin)
            proc.stdin.flush()
            replies: list[Reply] | str = pickle.load(proc.stdout)
        except (OSError, ValueError, EOFError, pickle.UnpicklingError) as exc:
            replies = f"the lint worker process ended ({type(exc).__name__})"
        else:
            if not isinstance(replies, list) or len(replies) != n:
                replies = "the lint worker process answered out of turn"
        if isinstance(replies, str):
            if self.closed:  # killed by `close` at exit: not a failure of the rules' look
                return [(FAILED, "the master is shutting down")] * n
            if self.proc is not proc:
                return [(FAILED, replies)] * n
            self._restart(proc, f"during a look of {n} rule set(s)" if n else "during an exchange")
            return [(ENDED, replies)] * n
        self.answered = True
        return replies

    def put(self, job: Job, bounded: bool = True) -> bool:
        """Queues a look; a first look (`bounded`) only while fewer than MAX_QUEUED wait (a later
        look is bounded by its follower: one at a time each)."""
        with self.ready:
            if bounded and sum(1 for j in self.queued if j.look[1] is not None) >= MAX_QUEUED:
                return False
            self.queued.append(job)
            self.ready.notify()
            return True

    def drop(self, job: Job) -> None:
        with self.ready, contextlib.suppress(ValueError):  # already taken by the worker: it ends on its own
            self.queued.remove(job)

    def forget(self, fid: int) -> None:
        with self.ready:
            self.forgotten.append(fid)
            self.ready.notify()

    def _take(self) -> list[Job]:
        """Under self.ready: the next job and up to TOGETHER queued ones that can read with it
        (same first file, same budget), out of the queue; `_dispatch` hands them all the newest
        snapshot among theirs (a newer snapshot than a look's own only reads further)."""
        first = self.queued.popleft()
        if first.cancelled:
            return [first]
        jobs, rest = [first], deque[Job]()
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

    def _message(self, job: Job, files: Files) -> Look:
        """The job's look as the worker takes it: with what it needs to make the follower (its first-look
        arguments; its checkpoint, or those arguments, and the position told up to, when the running
        process does not hold it: started anew), and the bytes between checkpoints."""
        fid, first, _files, budget = job.look
        replay_to = None
        if first is None and fid not in self.held:
            follower = job.follower
            first, replay_to = follower.checkpoint or follower.first, follower.position
        return fid, first, files, budget, replay_to, getattr(job.owner, "checkpoint_bytes", CHECKPOINT_BYTES)

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
            self._exchange(jobs, drops)
            jobs = []  # not kept while the next jobs are awaited: a job's owner is a master's LintJobs

    def _exchange(self, jobs: list[Job], drops: list[int]) -> None:
        """The jobs' looks sent, their answers handed to their owners."""
        if self.proc is not None and self.proc.poll() is not None and not self.closed:
            self._restart(self.proc, "while idle")  # before the looks are made: none is held now
        newest = max((job.look[2] for job in jobs), key=lambda files: (len(files), files[-1][1] if files else 0))
        looks = [self._message(job, newest) for job in jobs]
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

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait(5)

    def close(self) -> None:
        """At exit: the worker killed, and none started again by a look still queued."""
        self.closed = True
        self.stop()


_WORKER: Worker | None = None
_WORKER_LOCK = threading.Lock()
def worker() -> Worker:
    """This process's lint worker (one for every master in it), made on first use."""
    global _WORKER
    with _WORKER_LOCK:
        if _WORKER is None:
            _WORKER = Worker()
        return _WORKER


def restarts() -> int:
    """Times this process's lint worker was started again after it ended (0: none made yet)."""
    return _WORKER.restarts if _WORKER is not None else 0


if __name__ == "__main__":
    _serve(int(sys.argv[1]) if len(sys.argv) > 1 else None)
