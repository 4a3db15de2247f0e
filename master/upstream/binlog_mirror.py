"""The local binlog series `master serve --source` keeps of a live primary: the primary's own file
names and byte offsets (each event written where the primary wrote it, so positions mean the same
on both sides and nothing is re-serialised), a `.index` naming the files, a new file at each
Rotate. It remembers the end of the last complete transaction: after a disconnect the partial
group behind it is cut off and the stream resumes there, so nothing is lost or written twice. A
write that fails cuts the series back there too, so readers never see a torn event and the master
serves what is there: a full series (ENOSPC, EDQUOT, EFBIG from a file size limit) is
`SeriesFull`, which the source replicator waits out; any other write error ends the series.

When another source takes over (`switch`, --source failover) its names and offsets no longer match
the series': from then on the series keeps its own (each event's log_pos and CRC remade, a Rotate
into a new file where the source rotates), every file opening with the source's FDE and the
series' own Gtid_list (MariaDB's binlog state: the last seq_no per domain and server_id).

A MySQL primary is read by GTID (auto-position): the series' executed set (`gtids.mysql`: its
last Previous_gtids and every GTID after it, tagged ones included) goes in COM_BINLOG_DUMP_GTID,
and the primary answers from the start of the file that set leaves unfinished, re-sending what
the series holds (checked byte for byte against it, not written again) and skipping the
transactions the set names (a heartbeat tells where it skipped to), until the series' end, from
where the events are appended."""

from __future__ import annotations

import errno
import io
import os
import resource
import struct
import threading
from collections.abc import Callable
from pathlib import Path

from dumpfilter.codec import Event, EventType
from dumpfilter.codec.constants import HEADER_LEN, LOG_EVENT_ARTIFICIAL_F, LOG_EVENT_IGNORABLE_F, MAGIC
from dumpfilter.errors import BinlogError, DumpFilterError
from dumpfilter.codec.encode import build_event
from dumpfilter.codec.format_description import FormatDescription
from dumpfilter.codec.gtid import MariadbGtidList, MysqlGtidSet
from dumpfilter.codec.reader import read_events
from dumpfilter.binlogs.files import file_format, file_size, read_index, write_index
from dumpfilter.binlogs.gtid_start import gtid_position
from dumpfilter.master.upstream.series_reads import MariadbState, UnitGtids, first_header, gtid_set
import contextlib

# Left in the series' directory by the first switch of source: from there on the series keeps its
# own names and offsets, so a restarted master continues it by GTID, never at a source's file.
SWITCHED = "dumpfilter-source-switched"
# The write errors of a series that cannot grow for now (a full disk, a quota, RLIMIT_FSIZE), which
# space returning cures; any other (EROFS, EIO, EACCES) needs the operator.
FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})


class MirrorError(DumpFilterError):
    """The primary's stream does not continue the local series (a hole, or a name clash)."""


class SeriesFull(MirrorError):
    """The series cannot grow for now (`FULL_ERRNOS`); it was cut back to its last whole unit."""

    def __init__(self, message: str, end: tuple[str, int]):
        super().__init__(message)
        self.end = end


def _file_size_limit() -> int | None:
    """This process's file size limit (RLIMIT_FSIZE's soft limit), or None where there is none."""
    soft = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
    return None if soft == resource.RLIM_INFINITY else soft


class BinlogMirror:
    def __init__(self, directory: str | Path):
        self.dir = Path(directory)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.file: str | None = None
        self.offset = 0
        self.safe: tuple[str, int] | None = None  # end of the last complete unit
        self._out: io.FileIO | None = None  # the file being written (unbuffered: a failed write is cut back at once)
        self._size_limit = _file_size_limit()
        self._fmt: FormatDescription | None = None
        self.checksums = True  # whether the dump's events carry CRCs (@master_binlog_checksum)
        self.index_lock = threading.Lock()  # the index is appended to here and rewritten by `purge`
        # The GTID state at `safe`: MariaDB's binlog state, from the last file's Gtid_list and the
        # GTIDs after it (a switch of source writes it as a Gtid_list); MySQL's GTIDs the series
        # holds (its Previous_gtids and the GTIDs after them).
        self.gtids = UnitGtids()
        # The series' end while a dump by GTID re-sends what the series holds (the events up to
        # there are checked against the file, not written).
        self._replay: tuple[str, int] | None = None
        # After a switch of source the series goes on under its own names and offsets: events are
        # written where the series is (log_pos and CRC remade), the source's names are not used.
        self.translating = (self.dir / SWITCHED).exists()
        self._head = False  # translating: the file's FDE and Gtid_list are still to be written
        # Called after each whole unit is written (readers take whole units): the dump service's
        # DirectoryWatch.changed, so the event just written wakes the streams itself.
        self.on_unit: Callable[[], None] | None = None
        self._resume_from_disk()

    # -- the series on disk ---------------------------------------------------------------
    def index_path(self) -> Path:
        indexes = sorted(self.dir.glob("*.index"))
        if indexes:
            return indexes[0]
        return self.dir / f"{self._name().rsplit('.', 1)[0]}.index"

    def files(self) -> list[str]:
        indexes = sorted(self.dir.glob("*.index"))
        if not indexes:
            return []
        return [p.name for p in read_index(indexes[0])]

    def series_bytes(self) -> int:
        """The series' size on disk (what --max-series-bytes bounds)."""
        return sum(file_size(self.dir / name, 0) for name in self.files())

    def _resume_from_disk(self) -> None:
        """A series left by an earlier run: continue after its last complete unit."""
        files = self.files()
        if not files:
            return
        last = self.dir / files[-1]
        data = last.read_bytes() if last.exists() else b""
        end = 4 if data[:4] == MAGIC else 0
        if end:
            try:
                for event in read_events(data, str(last), verify_checksums=False):
                    if self.gtids.push(event):
                        end = event.end_pos
            except BinlogError:
                pass  # a torn tail: what parsed before it stands
            self.gtids.drop_open()  # a torn unit's GTID is not held
        if end < 4:
            self.safe = None
            return
        self.safe = (files[-1], end)

    def resume_position(self) -> tuple[str, int] | None:
        """Where a new dump continues the series: `safe`; but between a Rotate and the next file's
        first event (the series does not hold that file yet), the end of the file the Rotate
        closes. A source that is itself a binlog server (a dumpfilter upstream, a tier) may not
        hold the next file yet either, and refuses a dump from it with 1236 (not in the index)."""
        if self.safe is not None and self.safe[1] == 4:
            files = self.files()
            if files and self.safe[0] not in files:
                return files[-1], file_size(self.dir / files[-1], 4)
        return self.safe

    def begin_gtid(self) -> None:
        """A dump by GTID (MySQL's COM_BINLOG_DUMP_GTID with `gtids.mysql`) is about to start: the
        local file is cut back to the series' last whole unit, and what the primary sends up to
        there is checked against it (`_replay`) rather than written."""
        self.close()
        resume = self.resume_position()
        self.gtids.drop_open()
        self.file, self.offset, self._replay = None, 0, None
        if resume is None:
            return
        file, end = resume
        path = self.dir / file
        if path.exists() and path.stat().st_size > end:
            os.truncate(path, end)
        self._fmt = file_format(path)
        self._replay = resume

    def _replayed(self, raw: bytes, kind: int, log_pos: int) -> bool:
        """While a dump by GTID re-sends what the series holds: True when `raw` (not an artificial
        Rotate) was taken care of here. It is checked against the series' bytes where the primary
        says it is: a heartbeat names where the primary skipped to (transactions the set holds), as
        does an event's log_pos (its end) where no heartbeat came first. At the series' end the
        replay is over and the events from there are written."""
        replay = self._replay
        assert replay is not None, "a dump by GTID is replaying the series"
        file, end = replay
        if self.file != file:
            return False
        if kind in (EventType.HEARTBEAT, EventType.HEARTBEAT_V2):
            named, pos = _heartbeat(raw, self._fmt)
            if named == file and pos > end:
                self._replay = None
                raise MirrorError(f"{file}: the primary skipped to {pos}, past the series' end ({end}): it skipped "
                                  "transactions the series counts as held but does not hold")
            if named == file and pos > self.offset:
                self.offset = pos
        elif kind == EventType.FORMAT_DESCRIPTION and log_pos == 0:
            # The dump thread clears the FDE's log_pos when it skips the file's first transactions
            if self.offset == 4:  # (rpl_binlog_sender.cc): the FDE is still the file's first event.
                self.offset += first_header(self.dir / file)[1]
            self._fmt = FormatDescription.parse(raw)
        else:
            start = log_pos - len(raw) if log_pos else self.offset
            if self.offset < start <= end:
                self.offset = start  # it skipped to here without a heartbeat first: the event's log_pos says so
            if self.offset == end:  # the first event the series lacks: written from here
                self._replay = None
                self.begin(file, end)
                return False
            with open(self.dir / file, "rb") as f:
                f.seek(self.offset)
                held = f.read(len(raw))
            size = len(raw) if held == raw else self._own_previous_gtids(file, raw)
            if not size:
                self._replay = None
                raise MirrorError(f"{file}: the primary re-sent, at offset {self.offset}, an event that differs from "
                                  "the series' copy: its binlog is not the one the series was taken from")
            if kind == EventType.FORMAT_DESCRIPTION:
                self._fmt = FormatDescription.parse(raw)
            self.offset += size
        if self.offset < end:
            return True
        self._replay = None
        self.begin(file, end)  # the series' end: appended to from here
        if kind == EventType.ROTATE and log_pos:  # the file's own closing Rotate, held already
            self.begin(raw[27:len(raw) - (self._fmt.checksum_len if self._fmt else 0)].decode("utf-8", "replace"), 4)
        return True

    def _own_previous_gtids(self, file: str, raw: bytes) -> int:
        """A series begun inside a MySQL file (mid_file) holds its own Previous_gtids, the executed
        set at its start, where the primary's file has its own, smaller one: the primary's, re-sent
        on a resume by GTID, stands for the series' when the series' is followed by the head's
        fillers and holds every GTID the primary's does. Returns the size of the series' event
        (0: not so)."""
        if raw[4] != EventType.PREVIOUS_GTIDS:
            return 0
        with open(self.dir / file, "rb") as f:
            f.seek(self.offset)
            header = f.read(HEADER_LEN)
            if len(header) < HEADER_LEN or header[4] != EventType.PREVIOUS_GTIDS:
                return 0
            size = struct.unpack_from("<I", header, 9)[0]
            held = header + f.read(size - HEADER_LEN)
            after = f.read(HEADER_LEN)
        if len(after) < HEADER_LEN or after[4] != EventType.IGNORABLE or not (
                struct.unpack_from("<H", after, 17)[0] & LOG_EVENT_IGNORABLE_F):
            return 0
        try:
            ours, theirs = (gtid_set(Event(e, self.offset, self._fmt), MysqlGtidSet) for e in (held, raw))
        except BinlogError:
            return 0
        return size if theirs.issubset(ours) else 0

    def gtid_position(self) -> str:
        """The series' GTID position at `safe` (per domain its last GTID), as a MariaDB replica's
        @slave_connect_state: where a new source continues it."""
        return gtid_position(self.gtids.mariadb)

    def switch(self) -> str:
        """A new source continues the series by GTID: the file being written is cut back to its last
        whole unit and ends with a Rotate to a new file (or is itself begun again when it holds
        nothing yet), which the next events begin with their FDE and the series' Gtid_list.
        Returns the new file's name."""
        self.close()
        if self.safe is None:
            raise MirrorError("a switch of source before the series has a file")
        file, end = self.safe
        path = self.dir / file
        if path.exists() and path.stat().st_size > end:
            os.truncate(path, end)
        (self.dir / SWITCHED).touch()
        self.file, self.offset, self.translating = file, end, True
        if end > 4:
            fmt = file_format(path)
            name = _next_name(file)
            self._out = open(path, "ab", buffering=0)
            self._write_own(EventType.ROTATE, struct.pack("<Q", 4) + name.encode(), fmt, first_header(path)[0])
            self.close()
            self.file = name
        self.offset, self._head, self._fmt = 4, True, None
        self.gtids.drop_open()
        self.safe = (self.file, 4)
        return self.file

    def _write_own(self, kind: int, body: bytes, fmt: FormatDescription | None, server_id: int) -> None:
        """An event the series needs that no source sent (a Rotate, a Gtid_list at a switch)."""
        event = build_event(kind, body, fmt=fmt, server_id=server_id, log_pos=0)
        raw = event.with_header(log_pos=self.offset + event.size).raw
        self._write(raw)
        self.offset += len(raw)

    def _translated(self, raw: bytes) -> bytes | None:
        """Translating: the event as it goes into the series (None: not written), beginning a
        new file where the source rotates."""
        kind, log_pos = raw[4], struct.unpack_from("<I", raw, 13)[0]
        artificial = struct.unpack_from("<H", raw, 17)[0] & LOG_EVENT_ARTIFICIAL_F
        if kind in (EventType.MARIADB_GTID_LIST, EventType.BINLOG_CHECKPOINT) or \
                (kind == EventType.ROTATE and (log_pos == 0 or artificial)):
            return None  # the source's own file names and states: the series has its own
        if kind == EventType.FORMAT_DESCRIPTION:
            self._fmt = FormatDescription.parse(raw)
            if not self._head:
                return None
            fde = Event(raw, self.offset, self._fmt).with_header(log_pos=self.offset + len(raw), flags=0)
            self._open_new()
            self._write(fde.raw)
            self.offset += len(fde.raw)
            self._write_own(EventType.MARIADB_GTID_LIST, MariadbGtidList(dict(self.gtids.mariadb)).encode(), self._fmt,
                            fde.server_id)
            self._head = False
            self.safe = (self._name(), self.offset)
            return None
        if self._head or self._fmt is None:
            raise MirrorError(f"the new source sent event type {kind} before its Format_description")
        if kind == EventType.ROTATE:  # the source's next file: the series' next file
            name = _next_name(self._name())
            self._write_own(EventType.ROTATE, struct.pack("<Q", 4) + name.encode(), self._fmt,
                            struct.unpack_from("<I", raw, 5)[0])
            self.close()
            self.file, self.offset, self._head = name, 4, True
            self.safe = (name, 4)
            return None
        return Event(raw, self.offset, self._fmt).with_header(log_pos=self.offset + len(raw)).raw

    # -- writing ----------------------------------------------------------------------------
    def begin(self, file: str, pos: int) -> None:
        """The dump (re)starts at `file`:`pos`: cut the local file back to `pos` (the partial group
        after the last complete unit goes; the primary sends it again, byte for byte). A new file
        (pos 4) is created, and named in the index, with its first event: a reader never finds a
        file without its Format_description."""
        self.close()
        _check_name(file)
        path = self.dir / file
        if pos > 4 and (not path.exists() or path.stat().st_size < pos):
            raise MirrorError(f"cannot continue {file} at {pos}: the local copy ends before it (start the "
                              "series at the beginning of a primary file)")
        self.file, self.offset = file, max(pos, 4)
        self.gtids.drop_open()
        self._fmt = None
        if pos > 4:
            with open(path, "r+b") as f:
                f.truncate(pos)
            self._out = open(path, "ab", buffering=0)  # unbuffered: a failed write is cut back at once
            self._fmt = file_format(path)
        self.safe = (file, self.offset)

    def begin_inside(self, file: str, pos: int, head: bytes, state: MariadbState | MysqlGtidSet) -> None:
        """A new series starts inside the primary's `file` at `pos` (mid_file.series_head: the
        FDE, Gtid_list or Previous_gtids and fillers up to `pos`): the file is created with that
        head, and the primary's events from `pos` follow at their own offsets. `state` is the
        GTID state at `pos`: MariaDB's binlog state, or MySQL's executed set."""
        self.close()
        _check_name(file)
        self.file, self.offset = file, 4
        self._open_new()
        self._write(head[4:])
        self.offset = pos
        self._fmt = file_format(self.dir / file)
        self.gtids.drop_open()
        if isinstance(state, MysqlGtidSet):
            self.gtids.mysql = state.copy()
        else:
            self.gtids.mariadb = dict(state)
        self.safe = (file, pos)

    def _open_new(self) -> None:
        file = self._name()
        path = self.dir / file
        try:
            self._out = open(path, "wb", buffering=0)
        except OSError as exc:
            raise self._cannot_write(exc, path) from None
        self._write(MAGIC)
        self._append_to_index(file)

    def _append_to_index(self, file: str) -> None:
        index = self.index_path()
        with self.index_lock:
            if file in self.files():
                return
            size = index.stat().st_size if index.exists() else 0
            try:
                with open(index, "a") as f:
                    f.write(f"./{file}\n")
            except OSError as exc:
                with contextlib.suppress(OSError):
                    os.truncate(index, size)  # no torn line in the index either
                raise self._cannot_write(exc, index) from None

    def _write(self, data: bytes) -> None:
        """All of `data` at the end of the current file, or (a write failed) a MirrorError once
        the file is cut back to the end of its last whole unit."""
        out = self._out
        assert out is not None, "a file is open while events are written"
        try:
            if self._size_limit is not None and out.tell() + len(data) > self._size_limit:
                # Past a file size limit the kernel writes up to it, then fails (EFBIG): a torn event
                # for mariadb-binlog until the cut back. Refused whole (`prlimit` may raise it: read again).
                self._size_limit = _file_size_limit()
                if self._size_limit is not None and out.tell() + len(data) > self._size_limit:
                    raise OSError(errno.EFBIG, os.strerror(errno.EFBIG))
            view = memoryview(data)
            while view:
                view = view[out.write(view):]
        except OSError as exc:
            raise self._cannot_write(exc, self.dir / self._name()) from None

    def _cannot_write(self, exc: OSError, path: Path) -> MirrorError:
        """Cuts the series back to its last whole unit (a shorter file is left as it is) and says
        where it ends: a `SeriesFull` when space returning cures the error, else a MirrorError."""
        self.close()
        file, end = self.safe if self.safe is not None else (self._name(), 4)
        with contextlib.suppress(OSError):
            if (self.dir / file).stat().st_size > end:
                os.truncate(self.dir / file, end)
        where = f"cannot write {path}: {exc.strerror or exc}"
        if exc.errno in FULL_ERRNOS:
            return SeriesFull(f"{where} (a full disk or a file size limit); the series ends at {file}:{end}, its last "
                              "whole transaction, and is served as it is; nothing more is taken from the primary "
                              "until it can grow (retrying with backoff)", (file, end))
        return MirrorError(f"{where}; the series ends at {file}:{end}, its last whole transaction, and is served as it "
                           "is; nothing more is taken from the primary until the master is restarted")

    def event(self, raw: bytes) -> None:
        """One event as the primary's dump thread sent it."""
        if len(raw) < 19:
            raise MirrorError(f"an event of {len(raw)} bytes from the primary")
        kind = raw[4]
        timestamp, log_pos, flags = struct.unpack_from("<I", raw, 0)[0], *struct.unpack_from("<IH", raw, 13)
        if self._replay is not None and not (kind == EventType.ROTATE and (flags & LOG_EVENT_ARTIFICIAL_F or
                                                                           log_pos == 0 or timestamp == 0)):
            if self._replayed(raw, kind, log_pos):
                return
        if kind in (EventType.HEARTBEAT, EventType.HEARTBEAT_V2):
            _heartbeat(raw, self._fmt)  # a malformed one is a broken stream
            return
        if self.translating:
            translated = self._translated(raw)
            if translated is None:
                return
            raw = translated
            kind, log_pos = raw[4], struct.unpack_from("<I", raw, 13)[0]
        if kind == EventType.ROTATE and (flags & LOG_EVENT_ARTIFICIAL_F or log_pos == 0 or timestamp == 0):
            # The dump thread's own Rotate (start of the dump, a new file, a file that ended
            # without one). It comes before any FDE: its CRC is there when the dump has checksums.
            name = raw[27:len(raw) - (4 if self.checksums else 0)].decode("utf-8", "replace")
            pos = struct.unpack_from("<Q", raw, 19)[0]
            if self._replay is not None:
                self._replay_from(name, pos)
            elif name != self.file or pos != self.offset:
                self.begin(name, pos)
            return
        if kind == EventType.FORMAT_DESCRIPTION and log_pos == 0:
            self._fmt = FormatDescription.parse(raw)  # re-sent at a resume past offset 4: not in the file
            return
        if self.file is None:
            raise MirrorError("an event before the dump named its file")
        if self._out is None:
            self._open_new()
        if kind == EventType.FORMAT_DESCRIPTION:
            self._fmt = FormatDescription.parse(raw)
        size = len(raw)
        if log_pos and log_pos != self.offset + size:
            raise MirrorError(f"{self.file}: an event ending at {log_pos} arrived at offset {self.offset} "
                              f"(size {size}): the primary's stream has a hole")
        self._write(raw)
        event = Event(raw, self.offset, self._fmt)
        self.offset += size
        if self.gtids.push(event):  # (readers take whole units: a unit's first events wait for the rest)
            self.safe = (self.file, self.offset)
            if self.on_unit is not None:
                self.on_unit()
        if kind == EventType.ROTATE:
            name = raw[27:size - (self._fmt.checksum_len if self._fmt else 0)].decode("utf-8", "replace")
            self.begin(name, 4)

    def _replay_from(self, name: str, pos: int) -> None:
        """The dump by GTID names where it starts (or, past a skipped tail, where it stands)."""
        replay = self._replay
        assert replay is not None, "a dump by GTID is replaying the series"
        file, end = replay
        if name == file and pos <= end:
            self.file, self.offset = name, pos
            if pos == end:
                self._replay = None
                self.begin(file, end)
        elif name > file and end == file_size(self.dir / file, 0):
            self._replay = None  # the series' last file is whole: the primary starts after it
            self.begin(name, pos)
        else:
            self._replay = None
            raise MirrorError(f"the primary's dump by GTID starts at {name}:{pos}, which does not continue the series "
                              f"(it ends at {file}:{end}): the primary lacks GTIDs the series holds, or its binlog "
                              "differs")

    def purge(self, names: list[str]) -> None:
        """PURGE BINARY LOGS for the local series: `names`, the oldest files (never the one being
        written), leave the index first (rewritten whole, atomically: a reader never finds a
        name without its file) and then the disk. The first file left keeps its Gtid_list (MariaDB)
        or Previous_gtids (MySQL), which names every GTID logged before it: what was purged."""
        with self.index_lock:
            listed = self.files()
            if not names or listed[:len(names)] != names or len(names) >= len(listed) or self.file in names:
                raise MirrorError(f"cannot purge {names}: not the oldest files of the series {listed}")
            try:
                write_index(self.index_path(), listed[len(names):])
            except OSError as exc:
                if exc.errno not in FULL_ERRNOS:
                    raise
                # No room for the new index beside the old one (a full disk is when purging
                # matters most): rewritten in place, shorter, which takes no new block.
                with open(self.index_path(), "r+b") as f:
                    f.write("".join(f"./{n}\n" for n in listed[len(names):]).encode())
                    f.truncate()
        for name in names:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.dir / name)

    def close(self) -> None:
        if self._out is not None:
            self._out.close()
            self._out = None

    def _name(self) -> str:
        """The file being written (or last written)."""
        file = self.file
        assert file is not None, "the series has a file once a dump began"
        return file


def _check_name(file: str) -> None:
    if not file or "/" in file or "\\" in file or "\0" in file or file in (".", "..") or "." not in file:
        raise MirrorError(f"the primary named binlog file {file[:100]!r}, which is not a plain binlog file name")


def _next_name(file: str) -> str:
    """The series' file after `file` (base.000007 -> base.000008)."""
    base, _, number = file.rpartition(".")
    if not number.isdigit():
        raise MirrorError(f"{file}: not a numbered binlog file name, so the series cannot go on after it")
    return f"{base}.{int(number) + 1:0{len(number)}d}"


def _heartbeat(raw: bytes, fmt: FormatDescription | None) -> tuple[str, int]:
    try:
        return Event(raw, 0, fmt).heartbeat
    except BinlogError as exc:
        raise MirrorError(f"the primary sent a malformed heartbeat: {exc}") from None
