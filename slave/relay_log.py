"""The slave's relay log and its crash-safe position files: `relay-bin.NNNNNN` + `relay-bin.index`
(valid binlogs: magic, the master's FDE, then events with master coordinates), `relay-log.info`
(master position, GTID state, relay position: written in place AFTER the relay data is fsync'd,
with a check of its own, see info_file; itself made durable by a checkpoint,
`relay-log.info.synced`) and `relay-apply.info`
(what --apply executed)."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from dumpfilter.codec import Event, EventType
from dumpfilter.codec.constants import MAGIC
from dumpfilter.codec.encode import build_event, rotate_body
from dumpfilter.binlogs.files import read_index, write_index
from dumpfilter.skip_policy import DEFAULT as DEFAULT_SKIP_POLICY
from dumpfilter.slave.info_file import (INFO, SYNCED, fsync_dir, info_text, parse_info, read_info, write_atomic,
                                        write_in_place)

BASENAME = "relay-bin"
APPLY_INFO = "relay-apply.info"
# Seconds from one commit of relay-log.info to the next at least (see Committer). 0: a commit
# starts as soon as a batch is written, and the batches written while it runs share the next
# one (group commit): no batch waits for a timer to be durable. A larger interval makes fewer
# commits while a slave catches up in bulk; a batch that reaches the master's end is committed
# at once at any interval. The position is never ahead of durable relay data either way.
DEFAULT_COMMIT_INTERVAL = 0.0
# Seconds a position that moved over skipped stretches only (heartbeats: no relay byte written
# since the last hand-over) may wait before it is recorded: there is nothing new to make
# durable, and on a live master that skips most of what it writes such batches come hundreds of
# times a second; committing each would queue the batches that do carry data behind their
# fsyncs. The next batch with data, a drain or this long records it.
IDLE_COMMIT_INTERVAL = 1.0
# Seconds between checkpoints of relay-log.info itself (see Committer): each commit's info is put
# in place after the relay bytes it names are on disk, but is not itself fsync'd, so that a live
# batch waits for one disk flush. A crash may then leave an older relay-log.info (the next start
# cuts the relay log back to it and fetches the rest again, as MySQL's relay_log_recovery does),
# or on a file system that does not order a rename after the renamed file's data, an unreadable
# one: the checkpoint is the version to fall back to. MySQL's sync_relay_log_info bounds the same
# re-fetch by a count of transactions (10000 by default).
CHECKPOINT_INTERVAL = 1.0


def _writeback_starter() -> Callable[[int, int], int] | None:
    """Linux's sync_file_range(fd, 0, 0, SYNC_FILE_RANGE_WRITE), which starts writing a file's
    dirty pages out and returns without waiting for them (RocksDB's bytes_per_sync does the
    same): the next fsync then finds little left to write, above all the one the end of the
    stream waits for. Python's os module lacks it, so it is libc's, through ctypes; None where
    there is no such call (the fsyncs still make everything durable, only later)."""
    try:
        import ctypes

        call = ctypes.CDLL(None, use_errno=True).sync_file_range
    except (OSError, AttributeError):
        return None
    call.argtypes = (ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint)
    call.restype = ctypes.c_int

    def start(fd: int, end: int) -> int:
        return int(call(fd, 0, end, _SYNC_FILE_RANGE_WRITE))  # restype c_int

    return start


_SYNC_FILE_RANGE_WRITE = 2
_PAGE = 4096
start_writeback = _writeback_starter()


@dataclass
class RelayInfo:
    """relay-log.info: everything up to (master_file, master_pos) is in the relay log up to
    (relay_file, relay_pos), as whole transactions."""

    master: str = ""
    server_id: int = 0
    master_file: str = ""
    master_pos: int = 4
    gtid_state: str = ""
    relay_file: str = ""
    relay_pos: int = 0
    channel: str = ""
    skip_policy: str = DEFAULT_SKIP_POLICY
    filters: dict[str, str] = field(default_factory=dict)  # FILTER_NAME -> rule text, as the master applies them
    policy_allow: list[str] = field(default_factory=list)
    stats: dict[str, int] = field(default_factory=dict)  # counters summed over every run of this slave
    last_error: str = ""                            # Last_IO_Error
    # The threads' state and errors, for `slave status` (slave/status.py writes them).
    pid: int = 0
    io_running: bool = False
    sql_running: bool = False
    connected: bool = False
    caught_up: bool = False
    master_timestamp: int = 0                       # newest master event timestamp received
    user: str = ""
    ssl_ca: str = ""
    connect_retry: float = 0.0
    apply_target: str = ""
    last_io_errno: int = 0
    last_io_error_timestamp: str = ""
    last_sql_errno: int = 0
    last_sql_error: str = ""
    last_sql_error_timestamp: str = ""
    filters_changed_at: str = ""                    # where a live ChangeFilter on the master took effect
    last_disagreement: str = ""                     # the last event the slave's own check drops (slave/trust.py)
    # When the relay bytes this version names were found on disk (the commit's fsync returned),
    # Unix seconds: MySQL's LAST_QUEUED_TRANSACTION_END_QUEUE_TIMESTAMP
    # (performance_schema.replication_connection_status), set at every commit.
    committed_at: float = 0.0

    @classmethod
    def load(cls, directory: Path) -> RelayInfo | None:
        data = read_info(directory)
        if data is None:
            return None
        return cls(**{k: v for k, v in data.items() if k in cls.__dataclass_fields__})

    def save(self, directory: Path) -> None:
        write_atomic(directory / INFO, info_text(self.snapshot()))

    def snapshot(self) -> dict[str, Any]:
        """The fields as relay-log.info holds them, taken now (what `save` writes; the committer
        writes it later). Shallow: the dicts and lists held are replaced, never changed in place,
        by the code that sets them (asdict's deep copy cost more than the fsyncs)."""
        return {name: getattr(self, name) for name in _INFO_FIELDS}


_INFO_FIELDS = tuple(RelayInfo.__dataclass_fields__)


def _same_format(a: Event, b: Event) -> bool:
    """Two FDEs describe the same format (the `created` timestamp and header do not matter)."""
    body_a, body_b = a.body, b.body
    return body_a[:52] + body_a[56:] == body_b[:52] + body_b[56:] and a.checksum_len == b.checksum_len


class Committer:
    """Group commit of relay-log.info. After each batch, the slave hands over the relay file's
    descriptor (its bytes already written to the kernel) and the info as it is then; the relay
    file is fsync'd, then the next relay-log.info is written over the last in place
    (`_commit`): one disk flush per commit, and relay-log.info never names relay bytes that
    were not on disk before it was written. A live batch (`now`: the master says it reached
    its end) finding nothing waiting or under way is committed on the receiving thread itself,
    whose next batch cannot come before the master writes more: no hand-over to a thread on
    its way to the disk. Every other hand-over goes to the committer's thread. The info itself
    is made durable by a checkpoint at most once per `checkpoint_interval`, when no hand-over
    waits, and at every drain (see CHECKPOINT_INTERVAL). A commit starts at most once per
    `interval` seconds (and when batches come faster than a commit takes: two or three
    flushes); the newest hand-over waiting replaces the older ones, so one flush covers all of
    them, as MySQL's binlog group commit covers the transactions queued behind one flush
    (binlog_group_commit_sync_delay is its interval; `now` does not wait for it, `idle` waits
    longer: IDLE_COMMIT_INTERVAL). A crash loses nothing (CHECKPOINT_INTERVAL). The receiving
    thread of a slave catching up never waits for the disk, except in `drain` (before a relay
    file is closed, before --apply and when the stream ends), which returns once every
    hand-over is on disk and checkpointed. An error of the thread (ENOSPC, EIO) is raised by
    the next `submit` or `drain`."""

    def __init__(self, path: Path, interval: float = 0.0, idle_interval: float = IDLE_COMMIT_INTERVAL):
        self.path = path
        self.interval = interval  # seconds from one commit's start to the next's (0: at once)
        self._hurry = 0  # drains waiting: the interval is cut short
        self._now = False  # the waiting hand-over is to be committed without waiting for the interval
        self.idle_interval = idle_interval
        self._idle = False  # every hand-over waiting is idle (see IDLE_COMMIT_INTERVAL)
        self.commits = 0   # relay-log.info writes done (a test and the bench look)
        self._cond = threading.Condition()
        self._pending: tuple[int, dict[str, Any]] | None = None
        self._retired: list[BinaryIO] = []  # closed relay files (file objects) to fsync and close, see retire
        self._busy = False
        self._closing = False
        self._error: BaseException | None = None
        self._thread: threading.Thread | None = None
        self.checkpoint_interval = CHECKPOINT_INTERVAL
        self._unsynced = False  # relay-log.info was written since the last checkpoint
        self.checkpoints = 0  # (a test looks)
        # The slave's RelayInfo, told each commit's `committed_at` (one float assigned: a later
        # save, `slave status`'s at a stop, shows the last commit's, not the time of the batch
        # its snapshot was taken for).
        self.owner: RelayInfo | None = None

    def submit(self, fd: int, data: dict[str, Any], now: bool = False, idle: bool = False) -> None:
        with self._cond:
            self._raise()
            if not (now and not idle and self._pending is None and not self._retired and not self._busy):
                # Idle while every hand-over waiting is; `now` for what waits with it (a caught-up
                # heartbeat after a batch with data commits that batch at once).
                self._idle = idle and (self._pending is None or self._idle)
                self._now = self._now or now
                self._pending = (fd, data)
                self._wake()
                return
            self._busy = True  # the thread starts nothing (a checkpoint) until this commit is done
        done = False
        try:
            self._commit(fd, data)  # an error is this caller's, at once
            done = True
        finally:
            with self._cond:
                self._busy = False
                if done:
                    self.commits += 1
                    self._unsynced = True
                self._wake()  # the thread checkpoints it in time

    def retire(self, file: BinaryIO) -> None:
        """A relay file the slave has finished (rotation): the thread fsyncs and closes it
        before it writes the next relay-log.info, which names the next file. The receiving
        thread goes on at once: a rotation used to wait here for the disk (a drain, then an
        fsync of the file's last megabytes), tens of milliseconds in which nothing was read
        from the master."""
        with self._cond:
            self._raise()
            self._retired.append(file)
            self._wake()

    def _wake(self) -> None:
        if self._thread is None:
            self._closing = False
            self._thread = threading.Thread(target=self._run, name="slave-relay-commit", daemon=True)
            self._thread.start()
        self._cond.notify_all()

    def drain(self) -> None:
        with self._cond:
            self._hurry += 1
            self._cond.notify_all()
            try:
                while self._pending is not None or self._retired or self._busy or self._unsynced:
                    self._cond.wait()
            finally:
                self._hurry -= 1
            self._raise()

    def close(self) -> None:
        """Drain, then end the thread (the next submit starts another)."""
        try:
            self.drain()
        finally:
            with self._cond:
                self._closing = True
                self._cond.notify_all()
                thread, self._thread = self._thread, None
            if thread is not None:
                thread.join()

    def _commit(self, fd: int, data: dict[str, Any]) -> None:
        """The relay file's fsync, then the next relay-log.info written over the last in place,
        not fsync'd itself (see CHECKPOINT_INTERVAL): a live slave's batch waits for one disk
        flush. A version of the info that reaches the disk names relay bytes that were on disk
        before it was written; one a crash cuts short fails its check (`info_text`)."""
        os.fsync(fd)  # its error first: the relay bytes are what the position stands for
        data["committed_at"] = at = time.time()  # (the hand-over's own snapshot: this commit's to change)
        if self.owner is not None:
            self.owner.committed_at = at
        write_in_place(self.path, info_text(data))

    def _checkpoint(self) -> None:
        """relay-log.info as it is, copied to relay-log.info.synced atomically (tmp, fsync,
        rename, the directory fsync'd): the version a start falls back to if a crash leaves
        relay-log.info cut short (`read_info`). relay-log.info itself is not fsync'd: what a
        crash leaves of it is a whole version, older or newer, or one its check refuses."""
        text = self.path.read_bytes()
        parse_info(text)  # whole: nothing else writes it in place while the thread is busy
        write_atomic(self.path.with_name(SYNCED), text)
        self._unsynced = False
        self.checkpoints += 1

    def _raise(self) -> None:
        if self._error is not None:
            error, self._error = self._error, None
            raise error

    def _run(self) -> None:
        cond = self._cond
        next_at = 0.0
        last_at = time.monotonic()  # when the last commit started
        written_back = None  # the hand-over whose file's writeback was started last
        synced_at = time.monotonic()  # the last checkpoint
        while True:
            writeback = None
            with cond:
                while True:
                    if self._busy:  # a live batch's commit on the receiving thread (`submit`)
                        cond.wait()
                        continue
                    if self._pending is None:
                        if self._retired:
                            break
                        sync_in = synced_at + self.checkpoint_interval - time.monotonic()
                        if self._unsynced and (sync_in <= 0 or self._hurry or self._closing):
                            break  # a checkpoint, with no hand-over waiting for its flush
                        if self._closing:
                            return
                        cond.wait(sync_in if self._unsynced else None)
                        continue
                    due = max(next_at, last_at + self.idle_interval) if self._idle else next_at
                    wait = due - time.monotonic()
                    if wait <= 0 or self._hurry or self._closing or (self._now and not self._idle):
                        break
                    if self._pending is not written_back and start_writeback is not None:
                        writeback = written_back = self._pending
                        break  # started outside the lock, then back to waiting
                    cond.wait(wait)
                if writeback is None:
                    retired, self._retired = self._retired, []
                    pending, self._pending = self._pending, None
                    self._now = self._idle = False
                    if pending is not None:
                        last_at = time.monotonic()
                        next_at = last_at + self.interval
                    self._busy = True
            if writeback is not None:
                # While the interval runs: each batch handed over is sent toward the disk at
                # once, so that the commit's fsync waits for little. A failure is the fsync's
                # to report.
                # Whole pages only: a page under writeback stalls the next write into it.
                fd, data = writeback
                if start_writeback is not None and data.get("relay_pos", 0) >= 2 * _PAGE:  # (None: no writeback)
                    start_writeback(fd, data["relay_pos"] // _PAGE * _PAGE - _PAGE)
                continue
            try:
                # The finished files first: the info about to be written names a later one. They
                # are closed only after it: the hand-over may still be one of theirs (a commit
                # that waited for its interval while the file was finished), and its descriptor
                # must not be closed, or reused by the next file, before its fsync.
                try:
                    for file in retired:
                        file.flush()
                        os.fsync(file.fileno())
                    if pending is not None:
                        self._commit(*pending)
                        self._unsynced = True
                        self.commits += 1
                    # A checkpoint with no hand-over waiting, or one overdue under a load that
                    # never leaves the thread idle.
                    if self._unsynced and (pending is None or
                                           time.monotonic() - synced_at > 5 * self.checkpoint_interval):
                        self._checkpoint()
                        synced_at = time.monotonic()
                finally:
                    for file in retired:
                        file.close()
            except BaseException as exc:  # handed to the receiving thread
                with cond:
                    self._error = exc
                    self._pending = None  # nothing after a failed commit may be written
                    self._unsynced = False  # (nor a checkpoint tried again while drain waits)
                    for file in self._retired:
                        file.close()
                    self._retired = []
            finally:
                with cond:
                    self._busy = False
                    cond.notify_all()


class RelayLog:
    """Appends whole transactions to relay-bin files; `commit` has the committer make them
    durable and then record `info` (see Committer); rotation at `max_size` happens only between
    transactions."""

    def __init__(self, directory: Path, *, max_size: int = 64 << 20, server_id: int = 0,
                 commit_interval: float = 0.0):
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.max_size = max_size
        self.server_id = server_id
        self.index = self.directory / f"{BASENAME}.index"
        self.names: list[str] = []
        self.file: BinaryIO | None = None
        self.fde: Event | None = None
        self.position = 0
        self.committer = Committer(self.directory / INFO, commit_interval)
        self._handed: tuple[str, int] | None = None  # the relay position of the last hand-over

    @property
    def current(self) -> str:
        return self.names[-1] if self.names else ""

    # -- recovery ---------------------------------------------------------------------------
    def recover(self, info: RelayInfo | None) -> None:
        """Cut the relay log back to what relay-log.info says was committed: bytes after that
        point (a batch being written when the slave died) and later files are removed."""
        names = [p.name for p in read_index(self.index)] if self.index.exists() else []
        if info is None or not info.relay_file or info.relay_file not in names:
            for name in names:
                (self.directory / name).unlink(missing_ok=True)
            self.index.unlink(missing_ok=True)
            self.names = []
            return
        keep = names[: names.index(info.relay_file) + 1]
        for name in names[len(keep):]:
            (self.directory / name).unlink(missing_ok=True)
        write_index(self.index, keep)
        self.names = keep
        path = self.directory / info.relay_file
        self.file = open(path, "r+b")
        self.file.truncate(info.relay_pos)
        self.file.seek(info.relay_pos)
        self.position = info.relay_pos
        from dumpfilter.codec import read_format_description
        with open(path, "rb") as f:
            self.fde, _ = read_format_description(f, str(path))

    # -- writing ----------------------------------------------------------------------------
    def _open_new(self, fde: Event) -> None:
        number = int(self.current.rsplit(".", 1)[1]) + 1 if self.names else 1
        name = f"{BASENAME}.{number:06d}"
        self.file = open(self.directory / name, "wb")
        self.file.write(MAGIC)
        # The FDE that opens the file must count: an FDE with log_pos 0 (how a dump that starts
        # mid-file sends it) is fine for mariadb-binlog, but give it its real end for tidiness.
        fde = fde.with_header(log_pos=len(MAGIC) + fde.size)
        self.file.write(fde.raw)
        self.fde = fde
        self.position = len(MAGIC) + fde.size
        self.file.flush()
        os.fsync(self.file.fileno())
        self.names.append(name)
        write_index(self.index, self.names)
        fsync_dir(self.directory)

    def format_event(self, fde: Event) -> None:
        """A master FDE: opens the first file, or a new file when the format changes."""
        if self.file is None:
            self._open_new(fde)
        else:
            assert self.fde is not None  # an open relay file begins with its FDE
            if not _same_format(fde, self.fde):
                self._rotate(fde)

    def write(self, events: list[Event]) -> None:
        file = self.file
        assert file is not None  # opened by the first format_event
        for event in events:
            file.write(event.raw)
            self.position += event.size

    def write_raw(self, raw: bytes | memoryview) -> None:
        """Whole events given as one byte range (kept as the master sent them; a view of the
        batch's bytes where the relay run relays one stretch of them: no copy)."""
        assert self.file is not None  # opened by the first format_event
        self.file.write(raw)
        self.position += len(raw)

    def commit(self, info: RelayInfo, now: bool = False) -> None:
        """The batches written so far are whole: have the committer fsync them, then save
        `info` (taken now) as relay-log.info. The Python buffer is flushed here, so the fsync
        sees every byte written before this call. `now`: without waiting for the interval."""
        if self.file is None:  # no relay file yet (nothing but heartbeats so far): nothing to fsync
            self.committer.drain()
            info.save(self.directory)
            return
        self.file.flush()
        at = (self.current, self.position)
        idle, self._handed = at == self._handed, at
        self.committer.owner = info
        self.committer.submit(self.file.fileno(), info.snapshot(), now, idle)

    def _rotate(self, fde: Event | None = None) -> None:
        assert self.file is not None and self.fde is not None  # only an open relay file rotates
        fde = fde or self.fde
        next_name = f"{BASENAME}.{int(self.current.rsplit('.', 1)[1]) + 1:06d}"
        rotate = build_event(EventType.ROTATE, rotate_body(next_name), fmt=self.fde.fmt, server_id=self.server_id,
                             log_pos=0)
        self.file.write(rotate.raw)
        self.position += rotate.size
        # Made durable and closed by the committer before it records a position in the next
        # file (a commit handed over earlier may still be fsyncing this one: it stays open).
        self.file.flush()
        self.committer.retire(self.file)
        self.file = None
        self._open_new(fde)

    def maybe_rotate(self) -> None:
        if self.file is not None and self.position >= self.max_size:
            self._rotate()

    def close(self) -> None:
        try:
            self.committer.close()
        finally:
            if self.file is not None:
                self.file.close()
                self.file = None

