"""One Dump call (SlaveStream): walks the shared segments, filters each unit for one slave (whole
runs by the flag words, the rest through TransactionFilter), applies the slave's skip policy, and
cuts batches at transaction boundaries, with heartbeats while idle."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, NamedTuple, cast

from dumpfilter.codec import Event, EventType, GtidTracker, read_format_description
from dumpfilter.codec.format_description import FormatDescription
from dumpfilter.codec.constants import CHECKSUM_CRC32
from dumpfilter.codec.encode import artificial_rotate
from dumpfilter._core import heartbeat
from dumpfilter.codec.transactions import CONTROL
from dumpfilter.errors import DumpFilterError, MalformedEventError, PositionError, StreamReplacedError
from dumpfilter.binlogs import open_binlog, served_paths
from dumpfilter.binlogs.gtid_start import GtidState, start_file
from dumpfilter.rules.transaction_filter import KEPT, PARTIAL
from dumpfilter import _core, skip_policy
from dumpfilter.master.decide.flags import schema_marks
from dumpfilter.master.model import Batch, Part
from dumpfilter.master.decide.policy_check import guard_row
from dumpfilter.master.registry import RegisteredSlave, StreamHandle
from dumpfilter.master.read.columns import LazyUnits, UnitIndex
from dumpfilter.master.decide.gtid_skip import KnownMariaDB, gtid_filter
from dumpfilter.master.decide.rule_hits import RuleHits
from dumpfilter.codec.scanner import ROW_SLOW
from dumpfilter.master.decide.statement_answers import StatementAnswers
from dumpfilter.master.decide.statement_keys import StatementPathCounts, StreamStatementKeys
from dumpfilter.rules.keep_table import KeyRows
from dumpfilter.rules.walk_driver import Driver
from dumpfilter.master.read.units import MariaGtid, Pos, Segment, Unit

if TYPE_CHECKING:
    from dumpfilter.master.service import DumpService

BINLOG_IN_USE_F = 0x0001
BATCH_SEGMENTS = 4  # a batch not full goes on over segments (#30: one each doubled a do-db slave's)
# Seconds a live stream's new position may wait when all it has to send is a Heartbeat for a
# skipped stretch: it goes with the next kept data, or after this long. A primary taking 400
# small transactions a second in schemas a slave does not keep woke its stream 400 times a
# second, and each time the master made, sent and the slave received, scanned and handed
# over a batch that carried a position only; that work stood in the way of the batches that
# carry data (#30, `bench latency`). A stream that has not yet said it reached the end says so
# at once, as does one whose batch carries anything else (a filter change, schema marks).
POSITION_WAIT = 0.25
HEARTBEAT_PERIOD_RANGE = (0.001, 4294967.0)  # MySQL's MASTER_HEARTBEAT_PERIOD: 1 ms to 4294967 s
# Seconds between two foldings of a stream's rule hits into its slave's stats and P_S counters
# (RuleHits.flush), and at every batch that reaches the end of the binlog, every filter change
# and the stream's end. Folded at every batch (about 1 MiB), they were a tenth of a do-db
# stream's CPU over a binlog of eight schemas (py-spy: a decision per table name per batch).
HITS_EVERY = 0.25


class _RowState(NamedTuple):
    """A segment's answers for this stream (SlaveStream._row), good while the flag words' generation
    holds: its row, the keep byte per table name, the statement keys' keep bytes and answers. The
    three are None for a segment that goes unit by unit (it holds GTIDs the slave has)."""

    seg: Segment
    generation: int
    row: bytes | None
    keep: bytes | None
    by_keys: KeyRows | None


class _Sent(NamedTuple):
    """What one send walk did (rules.walk_driver.Ran): the first unit not handled, the statements
    it answered per key id (a u32 each; None where it took none by key)."""

    next: int
    by_keys: bytearray | None


class _SendWalk:
    """One segment's units for one stream (rules.walk_driver.Walk): the core's send walk
    (`SlaveStream._fast_runs`) from a unit, the rest one at a time (`SlaveStream._unit`), with the
    segment's statement keys answered for the slave (`StreamStatementKeys`)."""

    __slots__ = ("seg", "index", "keys", "_send", "_unit")

    def __init__(self, seg: Segment, keys: StreamStatementKeys,
                 send: Callable[[Segment, int, KeyRows | None], _Sent | None], unit: Callable[[Unit], None]) -> None:
        self.seg, self.index, self.keys, self._send, self._unit = seg, seg.index, keys, send, unit

    def key_space(self, at: int) -> object | None:
        return None if self.index is None else self.keys.space()

    def statement_units(self, at: int, space: object) -> list[_core.StatementKey] | None:
        assert self.index is not None
        keys, units = self.index.statement_units()
        if not units:
            return None
        self.keys.counts.key_units += units
        return keys

    def run(self, at: int, keys: KeyRows | None) -> _Sent | None:
        return self._send(self.seg, at, keys)

    def step(self, at: int) -> int:
        self._unit(self.seg.units[at])
        return at + 1


class SlaveStream:
    """One Dump call: walks shared segments, filters each unit for this slave, applies its skip
    policy and cuts batches at transaction boundaries. What the rules answer for the units that
    are not fast is asked of `answers` (StatementAnswers), and every rule hit is counted by
    `hits` (RuleHits): collaborators it holds, called with what they need."""

    def __init__(self, service: DumpService, slave: RegisteredSlave, handle: StreamHandle, start: Pos | None,
                 gtid_state: str | None, heartbeat_period: float, is_active: Callable[[], bool], *,
                 placeholder_runs: bool = False, skip_stretches: bool = False):
        self.svc, self.slave, self.handle = service, slave, handle
        self.policy = skip_policy.named(slave.reg.skip_policy)
        state = GtidState.parse(gtid_state) if gtid_state and gtid_state.strip() else None
        self.skip_known = gtid_filter(state)
        with service.lock:  # the start holds its file from now: retention purges under this lock
            if state is not None:
                # Like the servers' dump threads: start in the newest file whose Previous_GTIDs /
                # Gtid_list the slave already has, not at the first file.
                start = (start_file(served_paths(service.binlog_dir), state).name, 4)
            file, pos = start if start and start[0] else (service.segments.first_file(), 4)
            self.pos: Pos = (file, max(pos, 4) if start and start[0] else 4)
            if not (service.binlog_dir / file).exists():  # purged since the caller checked its name
                raise PositionError(f"binlog file {file[:256]!r} is not in the binlog index (purged or never written)")
            slave.position = self.pos
        self.walk_file = self.pos[0]  # the file of the unit walked last (`_entered`)
        # MASTER_HEARTBEAT_PERIOD's range, in MySQL's resolution (milliseconds): a slave asking for
        # 1e-300 s had its stream send heartbeats in a loop (88% of a core); NaN or 0: the default.
        self.heartbeat_period = (min(max(heartbeat_period, HEARTBEAT_PERIOD_RANGE[0]), HEARTBEAT_PERIOD_RANGE[1])
                                 if heartbeat_period > 0 else 1.0)
        self.is_active = is_active
        self.tracker = GtidTracker()
        self.fmt: FormatDescription | None = None
        self.master_server_id = 0
        self.parts: list[Part] = []
        self.placeholder_runs = placeholder_runs  # the slave asked for runs of placeholders as one (SendConfig)
        self.skip_stretches = skip_stretches  # and for skipped transactions in a row as one
        self.batch_bytes = 0  # what a replica is sent of this batch (a run counted as its placeholders; a stretch as itself)
        self.limit = service.reply_bytes()  # this batch's bytes (fewer with many streams: DumpService.reply_bytes)
        self.batch_units = 0
        self.batch_skipped = self.batch_segments = 0  # (the segments the batch spans: BATCH_SEGMENTS)
        self.pending_hb: Pos | None = None
        self.unit_end: Pos = ("", 0)  # where the unit `_unit` sends ends (a skipped stretch's heartbeat)
        self.changed_at: Pos | None = None
        # The run loop over fast units (see _fast_run): off when a GTID start has to be checked
        # unit by unit.
        self.gtid_limits: dict[int, int] | None = self.skip_known.limits if isinstance(self.skip_known, KnownMariaDB) else None
        self.gtid_wanted = state.mysql if state is not None else None  # a MySQL GTID start's set
        self._states: _RowState | None = None
        self.hits = RuleHits(slave)  # the rule hits of every decision, into the slave's stats
        self.hits_at = time.monotonic()  # when they were last folded into them (HITS_EVERY)
        # What this stream did with its statement units (read by tests and `bench`): a fresh count
        # per stream, on the slave.
        counts = slave.statement_path = StatementPathCounts()
        self.answers = StatementAnswers(service, slave, self.policy, self.hits, counts)  # the units that are not fast
        self.keys = StreamStatementKeys(service, slave, counts, self.hits)  # statement units answered by key
        self.driver: Driver[KeyRows, bytearray] = Driver(self.keys)  # the send walk's runs and steps
        self.schema_decided: list[Pos] = []  # DumpBatch.schema_decided; marked in `_unit` only (StatementAnswers.row)
        self._key_tally: tuple[KeyRows, bytearray] | None = None  # the statements a segment's sends answered by key
        self._quiet: tuple[Pos, int | None, int] | None = None  # (position, file size, listing_changes) of a look that found the end
        self.looks = self.quiet_wakes = 0  # segment reads asked for; looks answered by a stat (`_look`)

    def run(self) -> Iterator[Batch]:
        try:
            yield from self._run()
        finally:  # however the call ends (cancelled, replaced, an error): no rule hit is lost
            self.svc.segments.at(self, None)  # no segment is kept for it any more (TRAIL_BYTES)
            self._fold_hits()

    def _run(self) -> Iterator[Batch]:
        svc, slave = self.svc, self.slave
        first = self._start_fde()
        seg = self._look()  # a bad start position fails here, before any batch
        if first is not None:
            self._send(first)
        last_sent = time.monotonic()
        reported_end_at: Pos | None = None
        while True:
            if self.handle.cancelled == "replaced":
                raise StreamReplacedError(f"server_id {slave.server_id}: replaced by a newer registration or "
                                          "stream with the same server_id, or unregistered")
            if self.handle.error is not None:
                raise self.handle.error
            if self.handle.cancelled or not self.is_active():
                return
            units = seg.units
            i, n = 0, len(units)
            walk, advance = _SendWalk(seg, self.keys, self._fast_runs, self._unit), self.driver.advance
            self.driver.begin()
            while i < n:
                if slave.pending:
                    self._boundary()
                i = advance(walk, i)
                if self.batch_bytes >= self.limit:
                    yield self._batch(False, cut=True)
                    last_sent = time.monotonic()
                    if self.handle.cancelled:
                        break
                    cut = seg.index.cut_short() if seg.index is not None else None
                    if cut is not None:  # a mapped file truncated while the batch was sent (windows.py)
                        raise cut
            if slave.pending:
                self._boundary()
            if seg.units:
                caught_up = seg.at_end and self._at_binlog_end()
                self.batch_segments += 1
                # (at the segment's end but not the binlog's: the server wrote more since the
                # read, which the next segment brings; a position alone waits for it all the same)
                if seg.at_end and seg.error is None and self._position_may_wait(reported_end_at, last_sent):
                    pass  # sent with the next kept data, or by the wait below once POSITION_WAIT is over
                elif caught_up or seg.at_end or seg.error is not None or self.batch_segments >= BATCH_SEGMENTS:
                    yield self._batch(caught_up, cut=not (caught_up or seg.at_end or seg.error is not None))
                    last_sent = time.monotonic()
                    if caught_up:
                        reported_end_at = self.pos
            elif seg.at_end:
                now = time.monotonic()
                waits = reported_end_at != self.pos and self._position_may_wait(reported_end_at, last_sent)
                if (reported_end_at != self.pos and not waits) or now - last_sent >= self.heartbeat_period:
                    caught_up = self._at_binlog_end()
                    yield self._idle_heartbeat(caught_up)
                    last_sent = now
                    reported_end_at = self.pos
                    waits = False
                until = last_sent + (POSITION_WAIT if waits else self.heartbeat_period)
                svc.watch.wait(self.handle.wake, until - time.monotonic(), self.is_active)
            if self.handle.cancelled or not self.is_active():
                continue
            # The segment done with is let go before the next one is read: unless the cache
            # keeps it, a mapped one is unmapped now, not once the next one's pages are in (eight
            # streams spread over the binlog each held two).
            svc.segments.at(self, self.pos)  # past it: its pages stay only for streams behind it
            svc.segments.done_with(seg)
            self._states = None
            del units, seg, walk
            seg = self._look()

    def _fold_hits(self, current: bool = True) -> None:
        """Every rule hit so far into the slave's stats and P_S counters: the statements answered
        by key, then the rest (RuleHits.flush; without `current`, the Table_maps of the segment
        being walked wait for its end)."""
        self.keys.settle()
        self.hits.flush(current)

    def _position_may_wait(self, reported_end_at: Pos | None, last_sent: float) -> bool:
        """The batch due holds a live stream's new position and nothing else (see POSITION_WAIT)."""
        return (reported_end_at is not None and not self.parts and self.changed_at is None
                and not self.schema_decided and time.monotonic() - last_sent < POSITION_WAIT)

    def _look(self) -> Segment:
        """The segment at the stream's position, read through the shared cache; but after a wake
        that cannot have brought it anything (the stream is where a look last found the end of
        what was written, its file has the size it had then, and the directory's listing has
        not changed: `DirectoryWatch.listing_changes`), an empty segment at once, for one stat.
        Every write to the directory wakes every stream; one that finds nothing new pays O(1),
        not a segment read (its file opened, its format and start checked, a scan set up)."""
        watch = self.svc.watch
        generation = watch.listing_changes  # read before the file's size: a change after either is seen next time
        file = self.pos[0]
        quiet = self._quiet
        if quiet is not None and generation is not None and quiet == (self.pos, self._size(file), generation):
            self.quiet_wakes += 1
            return Segment(self.pos, [], self.pos, at_end=True)
        self._quiet = None
        segments = self.svc.segments
        segments.at(self, self.pos)  # a segment let go before it keeps its pages for it (TRAIL_BYTES)
        seg = segments.get(self.pos)
        self.looks += 1
        # The file's size is read after the read (only for a segment that reached the end of what
        # was written: a stream catching up stats no file per segment). Files only grow: a size
        # equal to the segment's end after the read was its end before it too.
        if generation is not None and seg.at_end and seg.error is None and seg.end[0] == file:
            size = self._size(file)
            if seg.end == (file, size) and self._in_last_file(file):
                # Every byte there was before the read is behind the stream, and no later file was
                # listed: only a write to this file or a change of the listing can bring it more. (A
                # segment from the cache was read earlier: its at_end alone says nothing of now.)
                self._quiet = (seg.end, size, generation)
        return seg

    def _size(self, file: str) -> int | None:
        try:
            return os.stat(self.svc.segments.path(file)).st_size
        except OSError:
            return None

    def _in_last_file(self, file: str) -> bool:
        try:
            names = self.svc.segments.file_names()
        except DumpFilterError:
            return False
        return bool(names) and names[-1] == file

    def _start_fde(self) -> Event | None:
        """The start file's FDE, sent first when the stream starts after offset 4. Like MySQL's
        Binlog_sender: log_pos 0 (the slave must not count it) and the in-use flag cleared."""
        file, pos = self.pos
        path = self.svc.binlog_dir / file
        if not path.exists():
            raise PositionError(f"binlog file '{file}' is not in {self.svc.binlog_dir} (purged or never written)")
        with open_binlog(path) as f:
            fde, fmt = read_format_description(f, str(path))
        self.fmt = fmt
        self.master_server_id = fde.server_id
        if pos <= 4:
            return None
        return fde.with_header(log_pos=0, flags=fde.flags & ~BINLOG_IN_USE_F)

    def _at_binlog_end(self) -> bool:
        try:
            end = self.svc.segments.end()
        except DumpFilterError:
            return False
        if self.pos[0] == end[0]:
            return self.pos[1] >= end[1]
        # After the last file's Rotate, before the server creates the file it names.
        return self.pos[1] == 4 and self.pos[0] > end[0] and not (self.svc.binlog_dir / self.pos[0]).exists()

    def _boundary(self) -> None:
        self._fold_hits()  # counted under the rules they were decided with
        at = self.svc.apply_pending(self.slave, self.pos)
        self.hits.state = self.slave.state  # the rules decided with from here
        if at is not None:
            self.changed_at = at

    # -- one unit ---------------------------------------------------------------------------
    def _unit(self, unit: Unit) -> None:
        slave, stats = self.slave, self.slave.stats
        if unit.file != self.walk_file:
            self._entered(unit.file)
        txn = unit.txn
        stats.events_read += len(txn.events)
        stats.bytes_read += unit.size
        self.batch_units += 1
        if txn.kind == CONTROL:
            event = txn.events[0]
            t = event.type_code
            if t == EventType.FORMAT_DESCRIPTION:
                state = slave.state
                assert state is not None, "a stream's slave has its state"
                state.txn_filter.reset()
                self.fmt = event.fmt
                self.master_server_id = event.server_id
            elif t in (EventType.PREVIOUS_GTIDS, EventType.MARIADB_GTID_LIST):
                try:
                    self.tracker.start_from(event)
                except MalformedEventError as exc:
                    raise exc.in_file(self.pos[0]) from None
            if t in (EventType.HEARTBEAT, EventType.HEARTBEAT_V2):
                self._advance(unit)
                return
            self._flush_heartbeat()
            self._send(event)
            self._advance(unit)
            return
        gtid_event = txn.gtid_event
        if gtid_event is not None and self.skip_known is not None and self.skip_known(gtid_event):
            # Before the slave's GTID start: never sent, not a filter decision. MySQL's dump thread
            # sends a heartbeat at the end of such a stretch before its next event (rpl_binlog_sender.cc,
            # exclude_group_end_pos), so a replica's position moves past it; MariaDB's sends nothing
            # (a Gtid_list once caught up: the skip policy's replica_tail).
            if gtid_event.type_code != EventType.MARIADB_GTID:
                self.pending_hb = unit.end
            self._advance(unit)
            return
        if gtid_event is not None:
            self.tracker.add(gtid_event)
        result, hits, schema_kept = self.answers.result(unit)
        if hits:
            self.hits.add(hits)
        if result.outcome in (KEPT, PARTIAL):
            self.schema_decided += schema_marks(unit.file, result.events, schema_kept)
        self.unit_end = unit.end
        self.policy.send_unit(txn, result, stats, self)
        self._advance(unit)

    def _row(self, seg: Segment, by_keys: KeyRows | None) -> bytes | None:
        """This slave's answer for each unit of `seg`, one byte per unit: ROW_KEEP (every table
        kept), ROW_SKIP (none), ROW_PARTIAL, or ROW_SLOW (not a fast unit), computed by the core from this
        slave's flag words and its statement keys' answers (`by_keys`, from the walk driver);
        cached per segment, flag-word generation and answers. None for a segment without a
        UnitIndex (the tests' reference reader): every unit through `_unit`."""
        index = seg.index
        if index is None or self.fmt is None:
            return None
        words = self.svc.words
        states = self._states
        if states is None or states.seg is not seg or states.generation != words.generation or (
                states.row is not None and states.by_keys is not by_keys):
            if self.skip_known is not None and self._holds_known_gtids(index):
                # Started by GTID: a segment holding GTIDs the slave already has goes unit by unit.
                self._states = _RowState(seg, words.generation, None, None, None)
                return None
            if by_keys is None:
                row, keep = index.rows_for(lambda names: words.keep(names, self.slave.bit), words.keeps)
            else:
                # Statement units answered by their statements' keys, in the core (issue #43): a row
                # of this slave's own (`rows_for`' rows, made for every slave, answer them ROW_SLOW).
                # (under a policy gate, a unit with a statement the core cannot show reaches only
                # its key's table stays ROW_SLOW: Python reads its reach)
                keep = words.keep(index.names, self.slave.bit)
                row = index.unit_list.rows_many([keep], [by_keys.keep], [by_keys.gated], index.formats())[0]
            # A restricted gate sends a fast unit whose statement text it refuses by the reference path.
            row = self.answers.row(seg, guard_row(seg, row, keep, self.slave.gate, self.keys.counts))
            states = self._states = _RowState(seg, words.generation, row, keep, by_keys)
        return states.row

    def _holds_known_gtids(self, index: UnitIndex) -> bool:
        """Whether a segment may hold GTIDs this slave's start state already has (or GTIDs of the
        other flavor, which the state's predicate judges unit by unit)."""
        limits, wanted = self.gtid_limits, self.gtid_wanted
        mysql, mariadb = index.mysql_gtids, index.gtids
        if limits is not None:  # MariaDB state: domain -> last seq_no
            return mysql is not None or any(g is not None and g[1] <= limits.get(g[0][0], -1) for g in mariadb)
        if wanted is not None:  # MySQL GTID set
            return any(g is not None for g in mariadb) or (mysql is not None and any(
                wanted.overlaps(source, first, end, tag) for source, tag, first, end in mysql(0, len(mariadb))))
        return True

    def _fast_runs(self, seg: Segment, i: int, by_keys: KeyRows | None) -> _Sent | None:
        """Handle fast units from `i` on without an Event or a TransactionFilter call per unit:
        runs kept whole, MariaDB units kept in part, and stretches skipped under the heartbeat
        policy (one Heartbeat each), assembled by the core in one call (`UnitList.send`) up to the
        end of the batch. Stops at a unit that needs more (a statement partly kept, skipped under
        another policy, not a fast unit), when the batch is full (after the unit that fills it,
        as the reference path cuts), or when a ChangeFilter is pending. Returns the index of the
        first unit not handled and the statements it answered by key (None: it did not start)."""
        row = self._row(seg, by_keys)
        if row is None or row[i] == ROW_SLOW:  # not a fast unit: both walks stop there at once
            return None
        index, states = seg.index, self._states
        assert index is not None and states is not None and states.keep is not None  # (a row: `_row` made it)
        unit_list = index.unit_list
        slave = self.slave
        if slave.pending:
            return None
        stats = slave.stats
        pending = self._heartbeat_raw(self.pending_hb) if self.pending_hb is not None else None
        crc = self.fmt is not None and self.fmt.checksum_alg == CHECKSUM_CRC32
        key_tally = None
        if by_keys is not None:  # (one tally per segment's keys, added to by each send: `account`)
            if self._key_tally is None or self._key_tally[0] is not by_keys:
                self._key_tally = (by_keys, bytearray(4 * len(by_keys.keep)))
            key_tally = self._key_tally[1]
        config = _core.SendConfig(skip=self.policy.walk_skip, partial_ok=self.policy.partial_as_kept,
                                  server_id=self.master_server_id, heartbeat_crc=crc,
                                  batch_bytes=self.batch_bytes, limit=self.limit,
                                  placeholder_runs=self.placeholder_runs, skip_stretches=self.skip_stretches)
        sent = unit_list.send(row, states.keep, i, config, pending,
                              by_keys.keep if by_keys is not None else None, key_tally)
        j = sent.next
        if j == i:
            return _Sent(j, key_tally)
        out = sent.out
        if out:
            self.parts.append(out)
            # What a replica is sent (runs of placeholders are cut where the counting walk cuts),
            # or with stretches what the wire carries (the walk cut it so: `send::walk`).
            self.batch_bytes += len(out) if self.skip_stretches else sent.sent_bytes + sent.heartbeat_bytes + sent.skip_bytes
        if sent.pending_done:
            self.pending_hb = None
        units = seg.units
        end_of = units.end_of if isinstance(units, LazyUnits) else (lambda k: units[k].end)
        if sent.pending_unit >= 0:
            self.pending_hb = end_of(sent.pending_unit)
        stats.add_walk(sent)
        if sent.skip_bytes:  # units sent in the policy's form: its placeholders or empty transactions
            self.policy.tally_walk(stats, sent)
        self.batch_skipped += sent.read_bytes - sent.sent_bytes
        self.batch_units += j - i
        hits = self.hits
        hits.walked(index, i, j)
        if hits.unit_hits or hits.group_hits:
            hits.statements(i, j)
        self._track_gtids(index, i, j)
        self.pos = self.slave.position = end_of(j - 1)
        return _Sent(j, key_tally)

    def _track_gtids(self, index: UnitIndex, start: int, i: int) -> None:
        """The GTIDs of units start..i-1 into the stream's tracker."""
        mysql_gtids = index.mysql_gtids
        if mysql_gtids is not None:  # MySQL units (Anonymous_GTID ones have none)
            add = self.tracker.mysql.add_interval
            for source, tag, first, end in mysql_gtids(start, i):
                add(source, first, end, tag)
        elif (last := index.gtids[i - 1]) is not None:  # MariaDB units (MySQL Anonymous_GTID units have none)
            if index.one_gtid_source:
                self.tracker.mariadb.gtids.update((last,))
            else:
                # (a run's units are fast or lone statement units: each has its MariaDB GTID)
                self.tracker.mariadb.gtids.update(cast("list[MariaGtid]", index.gtids[start:i]))

    def _entered(self, file: str) -> None:
        """The walk enters the next file. The first unit of a file is its Format_description,
        never a fast unit, so every walk meets a new file here. When no Rotate named the file (the
        last one ended with a Stop, or with nothing at all: the server crashed, or was killed),
        the slave is sent an artificial Rotate to it first, as a server's dump thread sends one
        whenever it opens a file (sql_repl.cc, rpl_binlog_sender.cc): a replica's IO thread takes
        its master file from Rotates alone, and refuses a heartbeat naming any other (error
        1623). A heartbeat owed for the old file's skipped tail goes before it."""
        self.walk_file = file
        if self.pos[0] == file:  # a real Rotate named it
            return
        self._flush_heartbeat()
        self._send(artificial_rotate(file, 4, fmt=self.fmt, server_id=self.master_server_id))
        self.pos = self.slave.position = (file, 4)

    def _advance(self, unit: Unit) -> None:
        self.pos = self.slave.position = unit.end

    # -- the skip policy's sink (skip_policy.UnitSink) for a unit `_unit` decided ------------
    def emit(self, events: list[Event]) -> int:
        self._flush_heartbeat()
        return self._send_all(events)

    def stretch(self) -> None:
        self.pending_hb = self.unit_end

    def skipped(self, events: int, size: int) -> None:
        self.slave.stats.events_skipped += max(0, events)
        self.slave.stats.bytes_skipped += max(0, size)
        self.batch_skipped += max(0, size)

    # -- sending ----------------------------------------------------------------------------
    def _send(self, event: Event) -> None:
        """Queue one master event sent as itself (kept bytes)."""
        self.slave.stats.kept_bytes += self._send_all((event,))

    def _send_all(self, events: Sequence[Event]) -> int:
        """Queue events; returns their bytes. Which are kept and which the skip policy's (its
        `tally`) is the caller's to count."""
        stats = self.slave.stats
        self.parts.extend(event.raw for event in events)
        size = sum(event.size for event in events)
        self.batch_bytes += size
        stats.events_sent += len(events)
        stats.bytes_sent += size
        return size

    def _heartbeat_raw(self, pos: Pos) -> bytes:
        """The Heartbeat sent for a skipped stretch ending at `pos`, made by the core as MySQL's
        Binlog_sender::send_heartbeat_event makes it: timestamp 0, the master's server_id,
        log_pos = the position, body = the file name (CRC when the binlog is checksummed)."""
        crc = self.fmt is not None and self.fmt.checksum_alg == CHECKSUM_CRC32
        return heartbeat(pos[0], pos[1], self.master_server_id, crc)

    def _flush_heartbeat(self) -> None:
        if self.pending_hb is None:
            return
        raw = self._heartbeat_raw(self.pending_hb)
        size = len(raw)
        self.pending_hb = None
        self.parts.append(raw)
        self.batch_bytes += size
        self.slave.stats.add_heartbeats(size)

    def _batch(self, caught_up: bool, *, cut: bool = False) -> Batch:
        """The batch made so far. One `cut` where the stream goes on (full, or BATCH_SEGMENTS
        segments) leaves the heartbeat of a skipped stretch still under way owed: it goes once, at
        the stretch's end, wherever the batches are cut, as MySQL's dump thread sends one per
        stretch (and as `experiment` counts it); the batch's position says where the stream is."""
        if not cut:
            self._flush_heartbeat()
        now = time.monotonic()
        if caught_up or now - self.hits_at >= HITS_EVERY:
            self._fold_hits(current=caught_up)
            self.hits_at = now
        gtids = self.tracker.mariadb if self.tracker.mariadb.gtids else self.tracker.mysql
        batch = Batch(self.parts, self.pos, self.batch_units, self.batch_skipped, caught_up,
                      False, str(gtids), self.changed_at, self.schema_decided)
        self.parts, self.batch_bytes, self.batch_units, self.batch_skipped, self.schema_decided = [], 0, 0, 0, []
        self.changed_at, self.batch_segments = None, 0
        self.limit = self.svc.reply_bytes()
        return batch

    def _idle_heartbeat(self, caught_up: bool) -> Batch:
        self.pending_hb = self.pos
        batch = self._batch(caught_up)
        batch.heartbeat = True
        return batch
