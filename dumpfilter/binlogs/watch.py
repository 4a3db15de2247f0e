"""Owns "the binlog directory changed": whatever waits for new binlog bytes (the master's gRPC and
MySQL-endpoint streams) waits here, and is woken by an inotify watch on the directory, or by the
writer itself (`changed()`: the --source mirror after each whole transaction it writes). One
inotify instance and one thread serve the whole process (inotify_simple). Where inotify cannot be
had, a slow safety-net poll wakes the waiters instead, and the log says so once."""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

log = logging.getLogger("dumpfilter.binlogs.watch")

# Seconds between two looks at the directory where inotify is unavailable (no inotify, the
# per-user limit of instances or watches reached): the only poll left, and only there.
SAFETY_POLL = 2.0
# Seconds a waiter goes, between changes, before it asks `alive` (its client still there?).
# Not a poll of the binlog: nothing is read on these turns.
LIVENESS = 1.0


class _Inotify:
    """The process's inotify instance (one, however many masters run in it: the kernel allows
    128 instances per user by default, shared by every process of that user, and watches are
    cheap). Its thread reads the events and wakes the watches of the directory they name."""

    def __init__(self) -> None:
        from inotify_simple import INotify, flags  # a thin ctypes wrapper of inotify(7)

        self.flags = flags
        # A binlog grows (MODIFY), is finished (CLOSE_WRITE), and a new one appears (CREATE, or
        # MOVED_TO for a file renamed into place, as a copied or restored series may be), or goes
        # (DELETE, MOVED_FROM: a purge). The index changes with the same events.
        self.mask = flags.MODIFY | flags.CLOSE_WRITE | flags.CREATE | flags.MOVED_TO | flags.DELETE | flags.MOVED_FROM
        # Events that may change a directory's listing (which files there are, in which order):
        # any but a binlog's own growth (MODIFY, CLOSE_WRITE of a file that is not an index).
        self.listing_mask = (flags.CREATE | flags.MOVED_TO | flags.DELETE | flags.MOVED_FROM | flags.Q_OVERFLOW
                             | flags.IGNORED)
        self.fd = INotify()
        self.lock = threading.Lock()
        self.watches: dict[int, set[DirectoryWatch]] = {}
        threading.Thread(target=self._run, name="binlog-inotify", daemon=True).start()

    def add(self, watch: DirectoryWatch) -> int:
        with self.lock:
            wd: int = self.fd.add_watch(str(watch.directory), self.mask)  # the same directory twice: the same wd
            self.watches.setdefault(wd, set()).add(watch)
            return wd

    def remove(self, watch: DirectoryWatch, wd: int) -> None:
        with self.lock:
            group = self.watches.get(wd)
            if group is None:
                return
            group.discard(watch)
            if not group:
                del self.watches[wd]
                with contextlib.suppress(OSError):  # the directory is gone: the kernel dropped the watch already
                    self.fd.rm_watch(wd)

    def _run(self) -> None:
        flags = self.flags
        while True:
            try:
                events = self.fd.read()  # blocks until the kernel has events
            except OSError as exc:
                log.warning("inotify read failed (%s): binlog directories are polled every %gs from now on",
                            exc, SAFETY_POLL)
                with self.lock:
                    every = [w for group in self.watches.values() for w in group]
                for watch in every:
                    watch.lost()
                return
            woken: set[DirectoryWatch] = set()
            relisted: set[DirectoryWatch] = set()
            gone: list[DirectoryWatch] = []
            with self.lock:
                for event in events:
                    if event.mask & flags.Q_OVERFLOW:  # events were dropped: wake everyone
                        every = [w for group in self.watches.values() for w in group]
                        woken.update(every)
                        relisted.update(every)
                        continue
                    group = self.watches.get(event.wd, ())
                    woken.update(group)
                    if event.mask & self.listing_mask or event.name.endswith(".index"):
                        relisted.update(group)
                    if event.mask & flags.IGNORED:  # the directory was removed or unmounted
                        gone.extend(group)
                        self.watches.pop(event.wd, None)
            for watch in woken:
                watch.changed(listing=watch in relisted)
            for watch in gone:
                watch.lost()


_hub: _Inotify | None = None
_hub_failed = False
_hub_lock = threading.Lock()
_said: set[str] = set()


def _say_once(key: str, message: str) -> None:
    if key not in _said:
        _said.add(key)
        log.warning(message)


def _inotify() -> _Inotify | None:
    global _hub, _hub_failed
    with _hub_lock:
        if _hub is None and not _hub_failed:
            try:
                _hub = _Inotify()
            except (ImportError, OSError) as exc:  # not Linux, or the per-user instance limit
                _hub_failed = True
                _say_once("instance", f"inotify is unavailable ({exc}): binlog directories are polled every "
                                      f"{SAFETY_POLL:g}s instead (fs.inotify.max_user_instances?)")
        return _hub


def _after_fork() -> None:
    """A forked child has the instance's descriptor but not its thread: it makes its own."""
    global _hub, _hub_failed
    _hub, _hub_failed = None, False


os.register_at_fork(after_in_child=_after_fork)


class DirectoryWatch:
    """The waiters of one binlog directory: each brings its own threading.Event (`add`), which
    every change of the directory sets. The inotify watch starts with the first waiter."""

    def __init__(self, directory: str | os.PathLike[str], *, safety_poll: float = SAFETY_POLL):
        self.directory = Path(directory)
        self.safety_poll = safety_poll
        self.changes = 0  # changes seen (inotify's events and `changed()` calls)
        # Changes that may have changed the listing (see `listing_changes`).
        self._listing_changes = 0
        self._waiters: set[threading.Event] = set()
        self._lock = threading.Lock()
        self._start_lock = threading.Lock()  # a second waiter returns only once the watch is in place
        self._hub: _Inotify | None = None
        self._wd: int | None = None
        self._started = False

    @property
    def event_driven(self) -> bool:
        """Whether the waiters are woken by the directory's changes (else by the safety-net poll)."""
        return self._wd is not None

    def add(self, wake: threading.Event) -> None:
        """`wake` is set at every change from now on: a waiter adds it before it looks at the
        binlog, so that a change made after that look is not missed."""
        with self._lock:
            self._waiters.add(wake)
        self.start()

    def start(self) -> None:
        """Puts the watch in place now if it is not yet (the first `add` does it otherwise: a
        master does it at start, so that its first slave does not wait for inotify's import)."""
        with self._start_lock:
            if not self._started:
                self._started = True
                self._start()

    def discard(self, wake: threading.Event) -> None:
        with self._lock:
            self._waiters.discard(wake)

    def _start(self) -> None:
        hub = _inotify()
        if hub is None:
            return
        try:
            wd = hub.add(self)
        except OSError as exc:  # ENOSPC: fs.inotify.max_user_watches; EACCES
            _say_once("watch", f"cannot watch {self.directory} with inotify ({exc.strerror or exc}): it is polled "
                               f"every {self.safety_poll:g}s instead")
            return
        with self._lock:
            self._hub, self._wd = hub, wd

    @property
    def listing_changes(self) -> int | None:
        """A number that moves whenever the directory's listing may have changed (a file created,
        renamed, deleted; an index written): while it stays, and only while the watch is
        event-driven, a waiter woken may take the binlog's file list as it last read it and
        look at the size of its own file alone (O(1) per wake). None where it cannot be known
        (no inotify: the safety-net poll sees no events)."""
        return self._listing_changes if self._wd is not None else None

    def changed(self, listing: bool = True) -> None:
        """The directory changed: every waiter is woken. `listing`: the change may have changed
        which files there are (inotify says so; a caller that does not know says True). It is
        counted before any waiter is woken, so a waiter that looks after its wake sees it."""
        with self._lock:
            self.changes += 1
            self._listing_changes += listing
            waiters = list(self._waiters)
        for wake in waiters:
            wake.set()

    def lost(self) -> None:
        """The inotify watch is gone (the directory was removed, or inotify failed): the safety
        net takes over."""
        with self._lock:
            self._hub = self._wd = None
        _say_once("lost", f"inotify no longer watches {self.directory}: it is polled every "
                          f"{self.safety_poll:g}s instead")
        self.changed()

    def wait(self, wake: threading.Event, timeout: float, alive: Callable[[], bool] = lambda: True) -> None:
        """Until `wake` is set (a change, or its owner's own reason: a cancel), `timeout` seconds
        pass (the waiter's heartbeat), the safety-net poll is due (only without inotify), or
        `alive()` turns false (asked every LIVENESS seconds). `wake` is cleared on the way out:
        the caller looks at the binlog after this, so a change set before it is not lost."""
        if not self.event_driven:
            timeout = min(timeout, self.safety_poll)
        deadline = time.monotonic() + max(0.0, timeout)
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or wake.wait(min(left, LIVENESS)) or not alive():
                break
        wake.clear()

    def close(self) -> None:
        """Stop watching (the waiters left are woken once, and poll from then on)."""
        with self._lock:
            hub, wd = self._hub, self._wd
            self._hub = self._wd = None
        if hub is not None and wd is not None:
            hub.remove(self, wd)
        self.changed()
