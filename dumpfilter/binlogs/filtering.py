"""Filter a sequence of binlog files into one output: a single binlog file or a numbered series.
It sits at the file-system edge: it opens files and writes them; the decisions are dumpfilter.rules'.

The reusable loop behind `dumpfilter filter` (and anything else that filters whole files: the
Spark split, the master's catch-up path). It reads each file, groups its events into
transactions, lets one `TransactionFilter` decide, and hands what is kept to a sink
(binlogs.sinks: `FileSink`, one file, or `SeriesSink`, a numbered series).

Positions: a filtered binlog's `log_pos` values are renumbered to the output's offsets, except
in relay logs, whose `log_pos` are the *source server's* coordinates and are copied unchanged
(binlog-format.md §7.1, §8: rpl_unfiltered_hidden_gcol.000001).

Renaming (`rename`, as `mariadb-binlog --rewrite-db` does): each unit written through Python has its
events renamed by the one event rewriter (dumpfilter.codec.rename, the names from
dumpfilter.rules.renamer), its MySQL GTID's transaction_length recomputed; with `applied` (plain
replicate-rewrite-db's names) the compiled assembly renames what it writes itself, and the units
left to Python teach it their names. The writer renumbers what a longer or shorter name moved.

Speed: `filter_files` scans large read chunks with the compiled scanner, and where the sink has
a writer the compiled assembly may write into (`Sink.direct_writer`) the assembly writes the fast
ROW units (`GTID [BEGIN] {Annotate_rows|Rows_query|Table_map|Rows}* XID`, decided per Table_map
from a name cache), the lone statements answered in stream order and the statement units by their
keys. Every other unit (and every unit where the sink has no such writer: the unit that opens a
series file, a rename the core does not apply) goes through `TransactionFilter`, the reference
path; tests check both give the same bytes.
"""

from __future__ import annotations

import bisect
import io
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

from dumpfilter._core import AssembleConfig
from dumpfilter.codec import Event, EventType, Transaction, bad_magic, fix_transaction_length
from dumpfilter.codec.constants import MAGIC
from dumpfilter.codec.reader import truncated
from dumpfilter.errors import CutEventError, MalformedEventError, TruncatedBinlogError
from dumpfilter.codec.event import query_text
from dumpfilter.codec.format_description import FormatDescription
from dumpfilter.codec.scanner import F_HAS_FDE, KEEP_DROP, KEEP_KEEP, KEEP_ASK, Scanner, unit_events
from dumpfilter.codec.transactions import CONTROL
from dumpfilter.binlogs.files import distinct_paths, file_error, open_binlog
from dumpfilter.rules.keep_table import KeepTable, KeyRows
from dumpfilter.rules.walk_driver import Driver
from dumpfilter.rules.transaction_filter import KEPT, PASSED, FilterResult, TransactionFilter
from dumpfilter.binlogs.background import ReadAhead
from dumpfilter.binlogs.sinks import Sink

if TYPE_CHECKING:
    from dumpfilter import _core
    from dumpfilter._core import AssembleCounts, AssembleResult
    from dumpfilter.codec.scanner import UnitRecords, UnitScan
    from dumpfilter.codec.writer import BinlogWriter
    from dumpfilter.rules.renamer import AppliedNames

FAST_CHUNK = 4 << 20
_PATH_COUNTERS = ("statements_by_key", "statement_keys")


# ---------------------------------------------------------------------------------------------
# statistics
@dataclass
class FilterStats:
    """What went in and what came out, as the summary of `dumpfilter filter` reports it.

    Transactions are units with content (GTID groups, statements); control events (FDE,
    Rotate, Gtid_list, ...) are counted separately."""

    files_in: int = 0
    events_in: int = 0
    bytes_in: int = 0
    transactions_in: int = 0
    control_events: int = 0
    kept: int = 0          # transactions kept whole
    partial: int = 0       # transactions with some content kept
    emptied: int = 0       # transactions reduced to their GTID framing
    skipped: int = 0       # transactions left out entirely
    events_out: int = 0
    bytes_out: int = 0     # bytes of events passed to the sink (file framing it adds not counted)
    unparsed_statements: int = 0
    # How the statements were decided (issue #43), a diagnostic of the path taken, not of what
    # was decided (so not in `as_dict`, which the paths' equivalence tests compare): statements
    # the compiled assembly answered by their keys, and keys decided in Python (each once).
    statements_by_key: int = field(default=0, compare=False)
    statement_keys: int = field(default=0, compare=False)
    # Where an input was cut inside an event (filter_files' stop_at_cut): everything before it was
    # filtered, nothing after it read.
    cut: CutEventError | None = field(default=None, compare=False)

    def add_result(self, result: FilterResult) -> None:
        self.events_in += result.events_in
        self.bytes_in += result.bytes_in
        self.events_out += len(result.events)
        self.bytes_out += result.bytes_out
        outcome = result.outcome
        if outcome == PASSED:
            self.control_events += result.events_in
            return
        self.transactions_in += 1
        setattr(self, outcome, getattr(self, outcome) + 1)  # KEPT, PARTIAL, EMPTIED, SKIPPED: the fields' names

    def add_assembled(self, c: AssembleCounts) -> None:
        """The compiled assembly's counters (an AssembleCounts, see the core's assemble::Counts)."""
        self.transactions_in += c.kept + c.partial + c.emptied + c.skipped
        self.kept += c.kept
        self.partial += c.partial
        self.emptied += c.emptied
        self.skipped += c.skipped
        self.events_in += c.kept_events + c.partial_events_in + c.emptied_events_in + c.skipped_events_in
        self.bytes_in += c.kept_bytes + c.partial_bytes_in + c.emptied_bytes_in + c.skipped_bytes_in
        self.events_out += c.kept_events + c.partial_events_out + c.emptied_events_out
        self.bytes_out += c.kept_bytes + c.partial_bytes_out + c.emptied_bytes_out

    def as_dict(self) -> dict[str, int]:
        return {k: v for k, v in self.__dict__.items() if k not in _PATH_COUNTERS}


# ---------------------------------------------------------------------------------------------
# the loop


class BinlogFilter:
    """Filters binlog files into a sink with one TransactionFilter; `stats` accumulates. Fast
    units are decided from their tables, the others through TransactionFilter (see `_walk`);
    `rename` and `applied`: see the module docstring."""

    def __init__(self, tfilter: TransactionFilter, sink: Sink, *, verify_checksums: bool = True,
                 read_ahead: bool = False, rename: Callable[[Event], Event] | None = None,
                 applied: AppliedNames | None = None):
        self.tfilter = tfilter
        self.sink = sink
        self.rename, self.applied = rename, applied
        self.verify_checksums = verify_checksums
        self.read_ahead = read_ahead  # a plain file's next chunk read on a thread (background.ReadAhead)
        self.stats = FilterStats()
        self.keeps = KeepTable(tfilter.decider)  # by the scanner's name id, and each buffer's statement keys

    # -- a unit as Events, through TransactionFilter ------------------------------------------
    def _unit(self, txn: Transaction) -> None:
        result = self.tfilter.filter(txn)
        if txn.kind == CONTROL and txn.events[0].type_code == EventType.FORMAT_DESCRIPTION:
            self.keeps.forget_tables()
        self.stats.add_result(result)
        events = result.events
        if not events:
            return
        renamed = self._renamed(events) if self.rename is not None and txn.kind != CONTROL else None
        if txn.kind == CONTROL or renamed is not None:
            self.sink.write(renamed or events)
            return
        # One byte range per unit, renumbered in one pass, instead of an Event rebuilt per event.
        # A unit kept whole is contiguous in the source (its positions may still be right);
        # anything changed or synthesised is always renumbered (source_pos -1).
        raw = b"".join([e.raw for e in events])
        self.sink.write_raw(raw, events[0].pos if result.outcome == KEPT else -1)

    def _renamed(self, events: list[Event]) -> list[Event] | None:
        """A unit's `events` renamed (None: no name changed), their names learnt for the assembly."""
        assert self.rename is not None
        if self.applied is not None:
            self.applied.learn(events)
        out = [self.rename(e) for e in events]
        return None if all(a is b for a, b in zip(out, events)) else fix_transaction_length(out)

    def _consumed_control(self, event: Event) -> None:
        """An FDE the sink wrote (or framed) itself: filtered for its side effects and counted."""
        self.keeps.forget_tables()
        self.stats.add_result(self.tfilter.filter(Transaction(CONTROL, [event])))

    def filter_paths(self, paths: Iterable[str | os.PathLike[str]]) -> FilterStats:
        for path in paths:
            self.filter_file(Path(path))
        self.stats.unparsed_statements = self.tfilter.decider.unparsed
        self.stats.statements_by_key = self.keeps.statements
        self.stats.statement_keys = self.keeps.keys_decided
        return self.stats

    def filter_file(self, path: Path) -> None:
        with open_binlog(path) as stream:
            try:
                self._walk(stream, path)
            except MalformedEventError as exc:  # found by the TransactionFilter, which knows no file
                raise exc.in_file(str(path)) from None
        self.stats.files_in += 1

    def _walk(self, stream: BinaryIO, path: Path) -> None:
        """One pass of the compiled scanner over the file, a few MB at a time: it checks every
        event and hands back one record per unit. The compiled assembly writes the units it
        takes (`_FileWalk.run`); every other unit goes to the TransactionFilter as Events."""
        name = str(path)
        scanner = Scanner(name, verify_checksums=self.verify_checksums)
        magic = _read(path, stream, 4)
        if magic != MAGIC:
            if len(magic) < 4:
                raise TruncatedBinlogError(f"file is {len(magic)} bytes long, too short for the binlog magic", path=name, offset=0)
            raise bad_magic(name)
        # A plain file is read again from where the scan stopped (the unit cut at the chunk's end,
        # usually a few hundred bytes), instead of joining the rest to the next chunk: a copy of
        # every byte saved. A compressed stream cannot seek back cheaply: joined.
        rereads = isinstance(stream, io.BufferedReader)
        # Read ahead: the next chunk (from where this scan stopped) is read on a thread while
        # this one's units are decided and written.
        ahead = ReadAhead(stream.fileno()) if rereads and self.read_ahead else None
        try:
            self._chunks(stream, path, scanner, ahead, rereads)
        finally:
            if ahead is not None:
                ahead.close()

    def _chunks(self, stream: BinaryIO, path: Path, scanner: Scanner, ahead: ReadAhead | None,
                rereads: bool) -> None:
        """`_walk`'s loop over the file's chunks, from offset 4: each scanned once, its units
        walked by the one driver (`rules.walk_driver`) with this file's `_FileWalk`."""
        name = str(path)
        walk = _FileWalk(self, scanner, path)
        driver = Driver(self.keeps)
        buf, base = b"", 4  # base: the file offset of buf[0]
        want = FAST_CHUNK
        if ahead is not None:
            ahead.start(base, want)
        while True:
            if rereads:
                buf = _read(path, stream, want, ahead, base)
                eof = len(buf) < want
            else:
                chunk = _read(path, stream, FAST_CHUNK)
                eof = not chunk
                buf = buf + chunk if buf else chunk
            scan = scanner.units(buf, 0, base, at_eof=eof)
            # A unit longer than the chunk: read more at once next time.
            next_want = FAST_CHUNK if scan.stop else want * 2
            if ahead is not None and not eof and scan.error is None:
                ahead.start(base + scan.stop, next_want)
            walk.begin(buf, base, scan)
            driver.drive(walk, len(scan.units))
            if scan.error is not None:
                raise scan.error
            buf, base = buf[scan.stop :], base + scan.stop
            if eof:
                break
            if rereads:
                want = next_want
        if buf:
            raise truncated(buf, name, base)

    def _lone_answers(self, units: UnitRecords, slow: memoryview, buf: bytes, fmt: FormatDescription,
                      start: int) -> tuple[bytes, int]:
        """The answers of the units that are not fast from unit `start` on, up to the first one
        that is not a statement alone (a GTID and one Query: DDL, standalone groups; or one Query
        without a GTID): each decided by the TransactionFilter in stream order (so the schema model
        replays as before), kept whole (KEEP_KEEP) or emptied (KEEP_DROP), the others KEEP_ASK, for
        the assembly to write in bulk. Returns (one byte per unit of the scan, the index the answers stop at)."""
        answers = bytearray([KEEP_ASK]) * len(units)
        lone_kept = self.tfilter.lone_text_kept
        crc_len = fmt.checksum_len
        stop = len(units)
        for i in slow[bisect.bisect_left(slow, start):]:
            lone = units.lone_statement(i, crc_len, mysql=True)
            text = None if lone is None else query_text(buf, lone[0], lone[1], fmt)
            if text is None:  # no lone statement, Query_compressed, or malformed (raised in order per unit)
                stop = i
                break
            answers[i] = KEEP_KEEP if lone_kept(text[1], text[0]) else KEEP_DROP
        return bytes(answers), stop


class _FileWalk:
    """`filter`'s walk over one file's buffers (rules.walk_driver.Walk): the compiled assembly
    writes runs into the sink's direct writer (fast units, lone statements answered in stream
    order, statement units by their keys); each unit it leaves goes through the TransactionFilter."""

    def __init__(self, bf: BinlogFilter, scanner: Scanner, path: Path) -> None:
        self.bf, self.scanner, self.path, self.name = bf, scanner, path, str(path)
        self.fmt: FormatDescription | None = None
        self.direct_ok = False  # the sink has begun: the assembly may write into its direct writer
        self.empty_keep = bf.tfilter.empty_transactions != "drop"
        self._config: AssembleConfig | None = None  # the assembly's, while the sink and format hold it
        self.begin(b"", 4, None)

    def begin(self, buf: bytes, base: int, scan: UnitScan | None) -> None:
        """A new buffer (`base`: the file offset of buf[0]) and its scan."""
        self.buf, self.base, self.scan = buf, base, scan
        self.slow: memoryview | None = None
        self.answers: bytes | None = None  # the lone statements' answers, up to `answered_to`
        self.answered_to = 0

    def _direct(self) -> BinlogWriter | None:
        """The sink's direct writer, where the assembly may write into it now."""
        fmt = self.fmt
        if not self.direct_ok or fmt is None:
            return None
        if self.bf.rename is not None and self.bf.applied is None:
            return None  # renamed in Python alone (WL#2516's table renames)
        direct = self.bf.sink.direct_writer()
        return direct if direct is not None and direct.fmt.checksum_len == fmt.checksum_len else None

    def key_space(self, at: int) -> FormatDescription | None:
        direct = self._direct()
        return self.fmt if direct is not None and direct.renumber_positions and self.bf.keeps.keys_enabled else None

    def statement_units(self, at: int, space: object) -> list[_core.StatementKey] | None:
        assert self.scan is not None and isinstance(space, FormatDescription)
        return self.scanner.statement_units(self.buf, at, space) if self.scan.units.may_hold_statements(at) else None

    def run(self, at: int, keys: KeyRows | None) -> AssembleResult | None:
        direct = self._direct()
        if direct is None:
            return None
        fmt, scan, bf = self.fmt, self.scan, self.bf
        assert fmt is not None and scan is not None
        units, sink = scan.units, bf.sink
        fast = units.is_fast(at)
        if not fast and at >= self.answered_to and direct.renumber_positions:
            if self.slow is None:
                self.slow = self.scanner.slow_units()
            self.answers, self.answered_to = bf._lone_answers(units, self.slow, self.buf, fmt, at)
        answers = self.answers
        keyed = keys is not None and units.may_hold_statements(at)
        # (The assembly stops at once at a unit not fast, not answered and not keyed.)
        if not (fast or (answers is not None and at < self.answered_to and answers[at] != KEEP_ASK) or keyed):
            return None
        # Fast units and answered statements in bulk: written by the compiled assembly.
        config = self._config
        # (one dict for the run, grown as names are met: read at each call)
        renames = bf.applied.map if bf.applied is not None else None
        posts = (fmt.post_header_len(EventType.QUERY), fmt.post_header_len(EventType.EXECUTE_LOAD_QUERY),
                 fmt.post_header_len(EventType.TABLE_MAP)) if renames is not None else (0, 0, 0)
        if config is None or config.renumber != direct.renumber_positions or config.crc != (fmt.checksum_len > 0) \
                or config.gtids != sink.direct_gtids or config.renames is not renames \
                or (config.query_post, config.load_post, config.table_map_post) != posts:
            config = self._config = AssembleConfig(renumber=direct.renumber_positions, crc=fmt.checksum_len > 0,
                                                   empty_keep=self.empty_keep, gtids=sink.direct_gtids, renames=renames,
                                                   query_post=posts[0], load_post=posts[1], table_map_post=posts[2])
        done = self.scanner.core.assemble(
            self.buf, at, bf.keeps.tables(self.scanner.names), direct.position, self.base, config, answers=answers,
            limit=sink.direct_limit, fresh=sink.direct_fresh(), stmt_keep=None if keys is None else keys.keep)
        if done.next > at:
            direct.out.write(done.out)
            direct.position = done.out_pos
            if done.last_timestamp:  # (what a Rotate after it is dated with)
                direct.last_timestamp = done.last_timestamp
            bf.stats.add_assembled(done.counts)
            sink.direct_written(done.out, done.gtids)
            return done
        if done.full:
            sink.direct_rotate()  # the next unit starts the next file
            return self.run(at, keys)
        return None

    def step(self, at: int) -> int:
        bf, scan, buf, base = self.bf, self.scan, self.buf, self.base
        assert scan is not None
        rec = scan.units[at]
        events, self.fmt = unit_events(buf[rec.start : rec.end], base + rec.start, self.fmt, path=self.name)
        if bf.applied is not None:  # the names the assembly renames from now on (a skipped unit's too)
            bf.applied.learn(events)
        if rec.flags & F_HAS_FDE and rec.kind == CONTROL:
            bf.keeps.forget_tables()
            if bf.sink.begin_file(events[0], self.path):
                bf._consumed_control(events[0])
                self.direct_ok = True
                return at + 1
        bf._unit(Transaction(rec.kind, events, rec.complete))
        return at + 1


def _read(path: Path, stream: BinaryIO, size: int, ahead: ReadAhead | None = None, at: int | None = None) -> bytes:
    """`size` bytes of the input `path` (the read `ahead` started, or from offset `at`). An OSError
    reading it is the input's one line (file_error); nothing else is caught on the way: an OSError
    the sink raises is the output's, raised as it is for whoever named the output to report."""
    try:
        if ahead is not None:
            return ahead.take()
        if at is not None:
            stream.seek(at)
        return stream.read(size)
    except OSError as exc:
        raise file_error(exc, path) from None


def filter_files(paths: Sequence[str | os.PathLike[str]], tfilter: TransactionFilter, sink: Sink, *,
                 verify_checksums: bool = True, read_ahead: bool = False, stop_at_cut: bool = False,
                 rename: Callable[[Event], Event] | None = None, applied: AppliedNames | None = None) -> FilterStats:
    """Filter `paths` in order into `sink` (closed at the end); returns the statistics.
    `read_ahead`: each plain file's next chunk is read on a thread of its own meanwhile. A file that
    cannot be read is a BinlogError naming it; a write the sink fails (a full disk) is its OSError.
    `stop_at_cut`: a file cut inside an event ends the run there, its whole events filtered, and is
    the statistics' `cut` (the caller reports it) instead of the error."""
    bf = BinlogFilter(tfilter, sink, verify_checksums=verify_checksums, read_ahead=read_ahead, rename=rename,
                      applied=applied)
    try:
        bf.filter_paths(distinct_paths(paths))  # a file given twice: its transactions would be written twice
    except CutEventError as exc:
        if not stop_at_cut:
            raise
        bf.stats.cut = exc
        bf.stats.files_in += 1  # read up to its cut
    finally:
        sink.close()
    return bf.stats


__all__ = ["BinlogFilter", "FilterStats", "filter_files"]
