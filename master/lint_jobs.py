"""Lint at Register (issue #17) as a background job: `dumpfilter lint`'s predictions for each
registered slave, computed off the Register path and handed to the slave when ready.

Register never waits for lint. It asks `LintJobs.request()`, which answers at once from the cache
when these rules were already linted over the binlog as it is now, and otherwise queues one job per
distinct rule set (slaves with equal rules and settings share it). The jobs run one at a time in
one worker process (a niced child), so a long lint takes neither the GIL nor the Register
threads from the streams. The predictions reach the slave:
  - in the Register reply, when the cache already holds them;
  - else on its Dump stream, in the `warnings` of the first batch after the job ends;
  - and always in Stats (`master status`): `lint_state` and `lint_warnings`.
"""

from __future__ import annotations

import atexit
import os
import pickle
import subprocess
import sys
import threading
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from dumpfilter.codec import BinlogReader, group_transactions
from dumpfilter.errors import BinlogError, DumpFilterError, ResourceExhaustedError
from dumpfilter.binlogs import binlog_paths
from dumpfilter.binlogs.files import open_binlog
from dumpfilter.binlogs.lint import new_linter
from dumpfilter.rules.lint import Break
from dumpfilter.rules.lint_rules import rule_warnings
from dumpfilter.rules.ruleset import RuleSet, Settings
from dumpfilter.rules.schema import SchemaModel

# Lint reads the whole binlog (about 2 MB per CPU second): above this many bytes it is not run at
# Register and the warning says so. `master serve --lint-max-mb` sets it; 0 turns lint off.
LINT_MAX_BYTES = 64 << 20
LINT_WARNINGS = 5        # predictions told per slave; the rest are counted
MAX_QUEUED = 64          # distinct rule sets waiting for the worker; more are told "not run"
                         # (each identity its share of them: master.shares)
MAX_CACHED = 256         # rule sets whose last result is kept

OFF, PENDING, DONE, NOT_RUN = "off", "pending", "done", "not run"


# -- the worker process -------------------------------------------------------------------------
class _Bounded:
    """A binlog file read only up to the size it had when the job was queued: a live server may
    be writing past it."""

    def __init__(self, stream, size: int):
        self.stream, self.left = stream, size

    def read(self, n: int = -1) -> bytes:
        n = self.left if n is None or n < 0 else min(n, self.left)
        data = self.stream.read(n) if n else b""
        self.left -= len(data)
        return data


def lint_snapshot(files: list[tuple[str, int]], rules: RuleSet, settings: Settings, schema: SchemaModel | None,
                  replica_schema: SchemaModel | None = None, verify_checksums: bool = True) -> list[Break]:
    """`dumpfilter.binlogs.lint.lint_files` over each file's first `size` bytes. The last file may end
    inside an event being written: lint stops there, as a tailing reader waits there."""
    linter = new_linter(rules, settings, schema, replica_schema)
    for i, (path, size) in enumerate(files):
        name = Path(path).name
        try:
            with open_binlog(path) as stream:
                reader = BinlogReader(_Bounded(stream, size), str(path), verify_checksums=verify_checksums)
                for txn in group_transactions(reader):
                    linter.feed(name, txn)
        except BinlogError:
            if i < len(files) - 1:
                raise
            break
    return linter.breaks


def _serve() -> None:
    """The worker process's main loop (`python -m <this module>`): a job, pickled, on stdin; its
    result, pickled, on stdout; until stdin closes (the master ended)."""
    try:
        os.nice(10)  # the streams come first
    except OSError:
        pass
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr  # nothing else may write to the result pipe
    while True:
        try:
            args = pickle.load(stdin)
        except (EOFError, OSError, pickle.UnpicklingError):
            return
        try:
            reply = (DONE, lint_snapshot(*args))
        except DumpFilterError as exc:
            reply = (NOT_RUN, str(exc))
        except Exception as exc:  # lint's own bug: told as a warning, never a failed Register
            reply = (NOT_RUN, f"{type(exc).__name__}: {exc}")
        pickle.dump(reply, stdout)
        stdout.flush()


@dataclass(eq=False)
class _Job:
    owner: LintJobs
    key: tuple
    args: tuple
    snapshot: tuple = ()
    cancelled: bool = False
    account: str = ""   # the identity account that queued it (master.shares)


class _Worker:
    """The one worker process of this Python process, fed from a bounded queue by one thread. A
    plain `python -m` child (not multiprocessing): it never re-imports the caller's main script.
    A job nobody waits for any more is taken out of the queue (`drop`), freeing its place."""

    def __init__(self):
        self.queued: deque[_Job] = deque()
        self.ready = threading.Condition()
        self.proc: subprocess.Popen | None = None
        self.thread = threading.Thread(target=self._dispatch, name="lint-dispatch", daemon=True)
        self.thread.start()
        atexit.register(self.stop)

    def _start(self) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", __name__], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, start_new_session=True)

    def _run(self, args: tuple) -> tuple[str, object]:
        if self.proc is None or self.proc.poll() is not None:
            self._start()
        try:
            pickle.dump(args, self.proc.stdin)
            self.proc.stdin.flush()
            return pickle.load(self.proc.stdout)
        except (OSError, EOFError, pickle.UnpicklingError) as exc:
            self.stop()
            return NOT_RUN, f"the lint worker process ended ({type(exc).__name__})"

    def put(self, job: _Job) -> bool:
        with self.ready:
            if len(self.queued) >= MAX_QUEUED:
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

    def _dispatch(self) -> None:
        while True:
            with self.ready:
                while not self.queued:
                    self.ready.wait()
                job = self.queued.popleft()
            if job.cancelled:
                continue
            state, value = self._run(job.args)
            job.owner.finished(job, state, value)
            # Not kept while the next job is awaited: the job's owner is a master's LintJobs,
            # which holds that master (its registry, engines and segment cache) alive.
            job = state = value = None

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait(5)


_WORKER: _Worker | None = None
_WORKER_LOCK = threading.Lock()


def _worker() -> _Worker:
    global _WORKER
    with _WORKER_LOCK:
        if _WORKER is None:
            _WORKER = _Worker()
        return _WORKER


# -- one master's jobs --------------------------------------------------------------------------
@dataclass
class _Result:
    state: str
    snapshot: tuple = ()
    warnings: list[str] = field(default_factory=list)


@dataclass
class _Sub:
    key: tuple
    delivered: bool = False


def warning_lines(breaks: list[Break]) -> list[str]:
    """One warning per predicted break (the first LINT_WARNINGS), as `slave run` prints them."""
    out = []
    for b in breaks[:LINT_WARNINGS]:
        cause = b.cause
        why = (f"; the event it needs was skipped at {cause.file}:{cause.pos} by {cause.rule}"
               if cause is not None and cause.file else f"; {cause.rule}" if cause is not None else "")
        gtid = f" (GTID {b.gtid})" if b.gtid else ""
        out.append(f"lint: a replica with these filters would stop at {b.file}:{b.pos}{gtid} with error "
                   f"{b.errno}: {b.message}{why}")
    if len(breaks) > LINT_WARNINGS:
        out.append(f"lint: {len(breaks) - LINT_WARNINGS} more predicted break(s): run `dumpfilter lint`")
    return out


class LintJobs:
    """Register-time lint for one master: a cache by rule set and the slaves waiting on it."""

    def __init__(self, binlog_dir: Path, max_bytes: int = LINT_MAX_BYTES, schema: SchemaModel | None = None,
                 verify_checksums: bool = True):
        self.binlog_dir = Path(binlog_dir)
        self.max_bytes = max_bytes
        self.schema = schema
        self.verify_checksums = verify_checksums
        self.lock = threading.Lock()
        self.results: OrderedDict[tuple, _Result] = OrderedDict()  # by (rules, settings, replica schema)
        self.running: dict[tuple, _Job] = {}
        self.subs: dict[int, _Sub] = {}
        self.closed = False
        self.jobs_run = 0  # for tests and Stats: jobs handed to the worker

    @property
    def enabled(self) -> bool:
        return self.max_bytes > 0

    def _snapshot(self) -> tuple[tuple[str, int], ...] | str:
        """The binlog as it is now ((path, size) per file), or why it cannot be linted."""
        try:
            paths = binlog_paths(self.binlog_dir)
            # Regular files only: an index naming a FIFO or a device must not block the worker.
            if not paths or not all(p.is_file() and not p.is_symlink() for p in paths):
                return ""
            return tuple((str(p), p.stat().st_size) for p in paths)
        except (DumpFilterError, OSError):
            return ""

    def request(self, server_id: int, rules: RuleSet, settings: Settings, account: str = "",
                check: Callable[[int], None] | None = None,
                replica_schema: SchemaModel | None = None) -> list[str]:
        """Called by Register: the warnings to put in its reply now (cached predictions, or why
        lint is not run); otherwise queues the job and answers []. The job the server_id's former
        rules queued is dropped when no other slave waits for it. `check(n)` raises
        ResourceExhaustedError when `account`, with n jobs queued, may queue no more: the
        Register is not refused for it (lint is advice), the reply says lint was not run.
        `replica_schema`: the slave's own starting schema (RegisterRequest.replica_schema), else
        the master's --schema."""
        if not self.enabled:
            self.forget(server_id)
            return []
        snapshot = self._snapshot()
        if not snapshot:
            return []
        total = sum(size for _, size in snapshot)
        if total > self.max_bytes:
            return [f"lint: not run at Register (the binlog holds {total / 1e6:.0f} MB, above "
                    f"{self.max_bytes / 1e6:.0f} MB; see `master serve --lint-max-mb`): run `dumpfilter lint` on it"]
        key = (rules, settings, replica_schema.key() if replica_schema is not None else None)
        with self.lock:
            old = self.subs.get(server_id)
            sub = self.subs[server_id] = _Sub(key)
            if old is not None and old.key != key:
                self._drop_unwanted(old.key)
            done = self.results.get(key)
            if done is not None and done.state != PENDING and done.snapshot == snapshot:
                self.results.move_to_end(key)
                sub.delivered = True
                return list(done.warnings)
            if key in self.running:  # another slave with these rules is being linted: share it
                return []
            try:
                if check is not None:
                    check(sum(1 for job in self.running.values() if job.account == account))
            except ResourceExhaustedError as exc:
                sub.delivered = True
                return [f"lint: not run at Register: {exc}"]
            job = _Job(self, key, ([(p, s) for p, s in snapshot], rules, settings, self.schema, replica_schema,
                                   self.verify_checksums), snapshot, account=account)
            if not _worker().put(job):
                sub.delivered = True
                return [f"lint: not run at Register: {MAX_QUEUED} lint jobs are already queued"]
            self.running[key] = job
            self.jobs_run += 1
        return []

    def finished(self, job: _Job, state: str, value) -> None:
        if state == DONE:
            # a rule that keeps no table (`db.`) first: the predictions alone would say "no break"
            rules = job.args[1]
            result = _Result(DONE, job.snapshot, [f"lint: {w}" for w in rule_warnings(rules)] + warning_lines(value))
        else:
            result = _Result(NOT_RUN, job.snapshot, [f"lint: not run: {value}"])
        with self.lock:
            if self.running.get(job.key) is job:
                del self.running[job.key]
            if self.closed:
                return
            self.results[job.key] = result
            self.results.move_to_end(job.key)
            while len(self.results) > MAX_CACHED:
                self.results.popitem(last=False)

    def status(self, server_id: int) -> tuple[str, list[str]]:
        """(lint_state, warnings) of a slave, for Stats."""
        if not self.enabled:
            return OFF, []
        with self.lock:
            sub = self.subs.get(server_id)
            if sub is None:
                return OFF, []
            if sub.key in self.running:
                return PENDING, []
            done = self.results.get(sub.key)
        if done is None:
            return NOT_RUN, []
        return done.state, list(done.warnings)

    def take(self, server_id: int) -> list[str]:
        """The slave's warnings once, the first time they are ready and not yet told (the Dump
        stream puts them in its next batch)."""
        sub = self.subs.get(server_id)
        if sub is None or sub.delivered:
            return []
        with self.lock:
            if sub.key in self.running:
                return []
            done = self.results.get(sub.key)
            sub.delivered = True
        return list(done.warnings) if done is not None else []

    def forget(self, server_id: int) -> None:
        with self.lock:
            old = self.subs.pop(server_id, None)
            if old is not None:
                self._drop_unwanted(old.key)

    def _drop_unwanted(self, key: tuple) -> None:
        """Under self.lock: the job of `key` leaves the queue when no slave waits for it."""
        job = self.running.get(key)
        if job is None or any(sub.key == key for sub in self.subs.values()):
            return
        del self.running[key]
        job.cancelled = True
        _worker().drop(job)

    def close(self) -> None:
        """Queued jobs of this master are dropped; a running one ends on its own."""
        with self.lock:
            self.closed = True
            for job in self.running.values():
                job.cancelled = True
                if _WORKER is not None:
                    _WORKER.drop(job)
            self.running.clear()
            self.subs.clear()


if __name__ == "__main__":
    _serve()
