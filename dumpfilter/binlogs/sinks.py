"""Where filtered binlog events go: one output file (`FileSink`), or a series of files that rotates
as the input does (`SeriesSink`), each renumbering log_pos for its own offsets as a server's writer
would; and whether an input is a relay log (`looks_like_relay_log`)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import BinaryIO

from dumpfilter.codec import BinlogWriter, Event, EventType
from dumpfilter.codec.format_description import FormatDescription
from dumpfilter.errors import MalformedEventError
from dumpfilter._core import foreign_log_pos, last_timestamp as core_last_timestamp
from dumpfilter.binlogs.background import WriteBehind
from dumpfilter.binlogs.files import open_binlog
from dumpfilter.binlogs.series import DEFAULT_MAX_BINLOG_SIZE, FILE_FRAMING_TYPES, BinlogSeriesWriter, renumber


def looks_like_relay_log(path: str | os.PathLike[str], probe: int = 1 << 20) -> bool:
    """Whether a file's log_pos values are another server's coordinates (a relay log).

    A server's own binlog has log_pos = the event's end offset (or 0: artificial events,
    MariaDB 11.4+ inside groups). A relay log copies the source's log_pos. Only the first
    `probe` bytes are looked at, so that a 500 MB file costs nothing extra."""
    with open_binlog(path) as stream:
        data = stream.read(probe)
    return foreign_log_pos(data, 4)


class Sink:
    """Where kept events go. `begin_file` is called at each input file's FDE (before it is
    written); `write(events)` takes one unit (a transaction or one control event)."""

    renumber_positions = True

    def begin_file(self, fde: Event, path: Path) -> bool:
        """Returns True when the sink has written (or deliberately dropped) this FDE itself."""
        raise NotImplementedError

    def write(self, events: Sequence[Event]) -> None:
        raise NotImplementedError

    def direct_writer(self) -> BinlogWriter | None:
        """The writer the compiled assembly may write into directly now, if any. A sink whose
        files rotate also says where (`direct_limit`, `direct_fresh`, `direct_rotate`) and is
        told what was written (`direct_written`)."""
        return None

    # The output offset at which the current file takes no more units (None: no limit).
    direct_limit: int | None = None
    # Whether the sink needs the GTID events the assembly writes (`direct_written`).
    direct_gtids = False

    def direct_fresh(self) -> bool:
        """Whether the direct writer's file holds no unit yet (its first unit goes in whatever
        `direct_limit` says)."""
        return False

    def direct_written(self, out: bytes, gtids: bytes) -> None:
        """The assembly wrote `out` into the direct writer; `gtids` packs (u64) the offsets in
        `out` of the GTID events the sink asked for."""

    def direct_rotate(self) -> None:
        """The assembly stopped at `direct_limit`: the next unit starts the next file."""
        raise NotImplementedError

    def write_raw(self, raw: bytes | memoryview, source_pos: int) -> None:
        """Write whole events given as one byte range that came from input offset `source_pos`.
        Renumbers log_pos like BinlogWriter."""
        raise NotImplementedError

    def close(self) -> list[Path]:
        raise NotImplementedError


def _write_raw_into(writer: BinlogWriter, raw: bytes | bytearray | memoryview, source_pos: int) -> None:
    """Byte-range writes into a BinlogWriter: same log_pos rule, no Event object per event."""
    out_pos = writer.position
    if writer.renumber_positions and out_pos != source_pos:  # (as BinlogWriter.write does each event)
        raw = bytearray(raw)
        renumber(raw, 0, len(raw), out_pos, writer.fmt.checksum_len, writer.fmt)
    writer.out.write(raw)
    writer.position += len(raw)
    if ts := core_last_timestamp(raw):  # a Rotate after it is dated as after events written
        writer.last_timestamp = ts


class FileSink(Sink):
    """One output binlog file. Every kept event is written, the source's control events
    included: with nothing filtered, one input file comes out byte for byte.

    Later FDEs (a second input file, or a relay log's source FDE) are written where they occur,
    as they are in relay logs; their `created` field tells readers nothing was reset."""

    def __init__(self, path: str | os.PathLike[str], *, fd: int | None = None, write_behind: bool = False):
        """`fd`: a descriptor open for writing on `path`, a new empty file (a staging file), which
        the sink then owns: written through as it is, not opened again. Opening it again with
        "wb" would truncate it, and ext4 takes a truncation to 0 bytes for a rewrite in place
        (auto_da_alloc): closing the file then flushes all of it, some 30 ms per 150 MB.
        `write_behind`: the file is written on a thread of its own (background.WriteBehind)."""
        self.path = Path(path)
        self.writer: BinlogWriter | None = None
        self._file: WriteBehind | BinaryIO | None = None
        self._fd = fd
        self._write_behind = write_behind

    def begin_file(self, fde: Event, path: Path) -> bool:
        if self.writer is not None:
            return False  # written in sequence, like the second FDE of a relay log
        renumber = not looks_like_relay_log(path)
        buffering = 0 if self._write_behind else -1  # WriteBehind gathers the writes itself
        if self._fd is not None:
            file, self._fd = open(self._fd, "wb", buffering=buffering), None
        else:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            file = open(self.path, "wb", buffering=buffering)
        self._file = out = WriteBehind(file) if self._write_behind else file
        self.writer = BinlogWriter(out, fde, renumber_positions=renumber)
        return True

    @property
    def renumber_positions(self) -> bool:  # type: ignore[override]
        return self.writer.renumber_positions if self.writer else True

    def _begun(self) -> BinlogWriter:
        assert self.writer is not None, "FileSink: a write before begin_file"
        return self.writer

    def write(self, events: Sequence[Event]) -> None:
        writer = self._begun()
        for event in events:
            writer.write(event)

    def write_raw(self, raw: bytes | bytearray | memoryview, source_pos: int) -> None:
        _write_raw_into(self._begun(), raw, source_pos)

    def direct_writer(self) -> BinlogWriter | None:
        return self.writer

    def close(self) -> list[Path]:
        if self._file is not None:
            file, self._file = self._file, None
            file.close()  # (a write-behind file raises here the error of a write on its thread)
        elif self._fd is not None:  # never begun (no input FDE): the descriptor is still ours
            os.close(self._fd)
            self._fd = None
        return [self.path]


def _format_key(fmt: FormatDescription) -> tuple[object, ...]:
    return fmt.checksum_alg, fmt.post_header_lens, fmt.flavor


class SeriesSink(Sink):
    """A numbered series `<basename>.NNNNNN` + `<basename>.index` in `directory`.

    Each output file gets its framing from BinlogSeriesWriter: the FDE, the GTID state of the
    output so far (Gtid_list for MariaDB, Previous_GTIDs for MySQL, started from the first
    input file's), and a Rotate naming the next *output* file. The source's own framing events
    (FILE_FRAMING_TYPES) are dropped: their names and sets describe the input, not the output.
    An input file whose format differs (another checksum setting or server) starts a new output
    file with its own FDE."""

    def __init__(self, directory: str | os.PathLike[str], basename: str, *, max_size: int = DEFAULT_MAX_BINLOG_SIZE):
        self.directory = Path(directory)
        self.basename = basename
        self.max_size = max_size
        self.series: BinlogSeriesWriter | None = None
        self._fde: Event | None = None
        self._start_state: Event | None = None
        self._first_path: Path | None = None  # the input file the FDE and the start state come from
        self._renumber = True
        self._waiting_state = False
        self._closed: list[Path] | None = None

    @property
    def renumber_positions(self) -> bool:  # type: ignore[override]
        return self._renumber

    def begin_file(self, fde: Event, path: Path) -> bool:
        if self._fde is None:
            self._fde = fde
            self._first_path = path
            self._waiting_state = True
            self._renumber = not looks_like_relay_log(path)
            return True
        if self.series is not None:
            assert fde.fmt is not None and self._fde.fmt is not None  # an FDE is read with its own format
            if _format_key(fde.fmt) != _format_key(self._fde.fmt):
                self.series.change_format(fde)
                self._fde = fde
        return True

    def _series(self) -> BinlogSeriesWriter:
        if self.series is None:
            assert self._fde is not None, "SeriesSink: a write before begin_file"
            try:
                self.series = BinlogSeriesWriter(self.directory, self.basename, self._fde, max_size=self.max_size,
                                                 start_state=self._start_state, renumber_positions=self._renumber)
            except MalformedEventError as exc:  # the start state's GTID set: its decoder knows no file
                raise (exc if self._first_path is None else exc.in_file(str(self._first_path))) from None
        return self.series

    def write(self, events: Sequence[Event]) -> None:
        if len(events) == 1 and events[0].type_code in FILE_FRAMING_TYPES:
            event = events[0]
            # The first input file's GTID state (before any transaction) starts the output's.
            if self._waiting_state and self.series is None and event.type_code in (
                    EventType.PREVIOUS_GTIDS, EventType.MARIADB_GTID_LIST):
                self._start_state = event
            return
        self._waiting_state = False
        self._series().write_transaction(events)

    def write_raw(self, raw: bytes | bytearray | memoryview, source_pos: int) -> None:
        # Rotation and GTID tracking as in BinlogSeriesWriter.write_transaction, so that both
        # routes produce the same files.
        self._waiting_state = False
        series = self._series()
        _write_raw_into(series.writer_for_unit(), raw, source_pos)
        series.track_gtid(raw)

    # The compiled assembly writes into the current series file (issue #43): rotation at
    # max_size on a unit boundary, GTIDs tracked for the next file's state, as write_raw does.
    direct_gtids = True

    @property
    def direct_limit(self) -> int:  # type: ignore[override]
        return self.max_size

    def direct_writer(self) -> BinlogWriter | None:
        # The file in progress (None before the first unit or after a format change: the unit
        # that opens the next file goes through write_raw / write).
        return self.series.writer if self.series is not None else None

    def direct_fresh(self) -> bool:
        return self.series is not None and self.series.fresh

    def _direct_series(self) -> BinlogSeriesWriter:
        assert self.series is not None, "SeriesSink: the assembly wrote with no direct writer"
        return self.series

    def direct_written(self, out: bytes, gtids: bytes) -> None:
        self._direct_series().track_gtids(out, gtids)

    def direct_rotate(self) -> None:
        self._direct_series().rotate()

    def close(self) -> list[Path]:
        if self._closed is None:
            if self.series is None and self._fde is not None:
                self._series()
            self._closed = self.series.close() if self.series is not None else []
        return self._closed
