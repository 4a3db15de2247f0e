"""Retention of the local series `master serve --source` keeps (`--expire-logs-seconds`,
`--max-series-bytes`: the servers' binlog_expire_logs_seconds and max_binlog_total_size): whole
files are purged, oldest first, never the one being written. A file a registered slave (a gRPC
slave or a real replica) still reads is kept, whatever its age, unless the series is over
--max-series-bytes without it: then it goes, with one line naming the file and the slaves, and
their streams end with 1236 / OUT_OF_RANGE naming it (as a server's dump thread does when its file
is purged under it). A start that needs a purged file gets the same error a server gives."""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from dumpfilter.binlogs.files import file_size
from dumpfilter.errors import DumpFilterError, PositionError

if TYPE_CHECKING:
    from dumpfilter.master.service import DumpService
    from dumpfilter.master.upstream.binlog_mirror import BinlogMirror

log = logging.getLogger("dumpfilter.master.upstream.retention")
CHECK_EVERY = 1.0  # seconds between looks at the series (files are rotated by the primary)


@dataclass(frozen=True)
class RetentionLimits:
    expire_seconds: float | None = None  # files last written longer ago go (binlog_expire_logs_seconds)
    max_bytes: int | None = None         # the series' total size cap (max_binlog_total_size)

    @property
    def active(self) -> bool:
        return bool(self.expire_seconds) or bool(self.max_bytes)


@dataclass(frozen=True)
class PurgeChoice:
    names: list[str]                   # oldest first
    forced: dict[str, list[int]]       # file -> server_ids still reading it (--max-series-bytes forced it)


def choose_purge(names: list[str], sizes: dict[str, int], mtimes: dict[str, float], readers: dict[str, list[int]],
               limits: RetentionLimits, now: float) -> PurgeChoice:
    """Which files of the series (`names`, oldest first) go: expired ones up to the first a slave
    reads (`readers`: file -> server_ids positioned in it), then, while the series is over its
    cap, the oldest ones whoever reads them. The last file (being written) always stays."""
    total = sum(sizes.values())
    purge: list[str] = []
    forced: dict[str, list[int]] = {}
    expire, cap = limits.expire_seconds, limits.max_bytes
    for name in names[:-1]:
        read_by = readers.get(name)
        expired = expire is not None and bool(expire) and mtimes[name] < now - expire
        over = cap is not None and bool(cap) and total > cap
        if not (over or (expired and not read_by)):
            break
        if read_by:
            forced[name] = sorted(read_by)
        purge.append(name)
        total -= sizes[name]
    return PurgeChoice(purge, forced)


class SeriesRetention:
    """A thread that applies `limits` to `mirror`'s series, which `service` serves."""

    def __init__(self, mirror: BinlogMirror, service: DumpService, limits: RetentionLimits, *,
                 clock: Callable[[], float] = time.time) -> None:
        self.mirror, self.service, self.limits, self.clock = mirror, service, limits, clock
        self.purged_files = 0
        self.forced = 0  # files purged while a slave still read them
        self.stop_event = threading.Event()
        self._thread = threading.Thread(target=self._run, name="series-retention", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self.stop_event.set()
        self._thread.join(10)

    def _run(self) -> None:
        while not self.stop_event.wait(CHECK_EVERY):
            try:
                self.apply()
            except (OSError, DumpFilterError) as exc:  # the next look tries again
                log.warning("retention of %s: %s", self.mirror.dir, getattr(exc, "strerror", None) or exc)

    def apply(self) -> list[str]:
        """One look at the series: purges what the limits say; returns the names purged."""
        names = self.mirror.files()
        if len(names) < 2:
            return []
        directory = self.mirror.dir
        sizes = {name: file_size(directory / name, 0) for name in names}
        mtimes = {name: _mtime(directory / name) for name in names[:-1]}
        # Under the service's lock: a stream takes its start position under it too (SlaveStream),
        # so no file a stream has just started in is purged between the look and the purge.
        with self.service.lock:
            readers = self._readers()
            plan = choose_purge(names, sizes, mtimes, readers, self.limits, self.clock())
            if not plan.names:
                return []
            self._end_streams(plan.forced)
            self.mirror.purge(plan.names)
        self.service.segments.forget(plan.names)
        self.purged_files += len(plan.names)
        self.forced += len(plan.forced)
        for name, server_ids in plan.forced.items():
            log.warning("retention: purged %s, which server_id %s still read: the series is over --max-series-bytes "
                        "%d without it; %s error 1236 naming it", name, ", ".join(map(str, server_ids)),
                        self.limits.max_bytes, "they get" if len(server_ids) > 1 else "it gets")
        return plan.names

    def _readers(self) -> dict[str, list[int]]:
        """file -> the server_ids of the registered slaves positioned in it (a slave not yet
        positioned reads nothing yet: its start is checked when it streams)."""
        readers: dict[str, list[int]] = {}
        with self.service.lock:
            for slave in self.service.slaves.values():
                if slave.position is not None:
                    readers.setdefault(slave.position[0], []).append(slave.server_id)
        return readers

    def _end_streams(self, forced: dict[str, list[int]]) -> None:
        """The running streams of slaves whose file is forced out end with 1236 / OUT_OF_RANGE
        naming it (set before the purge: no stream reads on past the loss unaware)."""
        with self.service.lock:
            for name, server_ids in forced.items():
                for server_id in server_ids:
                    slave = self.service.slaves.get(server_id)
                    if slave is not None and slave.stream is not None:
                        slave.stream.fail(PositionError(
                            f"binlog file '{name}' was purged from {self.mirror.dir} while server_id {server_id} "
                            f"read it (the series was over --max-series-bytes {self.limits.max_bytes}): could not "
                            "find next log"), "purged")


def _mtime(path: str | Path) -> float:
    try:
        return os.stat(path).st_mtime
    except OSError:
        return 0.0
