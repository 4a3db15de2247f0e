"""What master-side filtering would send each slave, counted per chunk of binlog (pure).

For every slave of a topology and every unit of a chunk: the events and bytes a dump thread reads
(everything) and what it sends with master-side filtering, counted as the master's stream
(master/stream/slave_stream.py) counts them, in the master's own counter type (dumpfilter.sent):

- the slave's rules ANDed with the master policy's gate for its identity (`gated`, as the master
  composes them), through the TransactionFilter every consumer shares;
- control events (FDE, Gtid_list/Previous_GTIDs, Rotate, Stop, ...) are sent as they are, but
  for a Heartbeat written in the binlog, which the master reads and never forwards;
- a partial or skipped transaction the core leaves is sent as its skip policy says by the one
  model of that step the master's stream runs too (`SkipPolicy.send_unit`), here into a sink that
  counts and never copies;
- a skipped stretch costs one HEARTBEAT event (body: the binlog file name), sent before the next
  event that is sent, or once the stream has read the whole binlog (a stretch ending one file
  without a Rotate goes before the next file's FDE: the same one heartbeat).

The chunk is scanned once, whatever the number of slaves, by the compiled scanner into the core's
UnitList (the master's own unit index); each slave's answer per unit comes from its keep byte per
table name and statement key (`KeepTable`, the one `filter` uses) through `UnitList.rows_many` (every slave's at
once), and the core's count walk counts it as the master's `UnitList.send` sends it, never copying:
every slave whose answers leave no unit of the buffer to Python in one call for all of them
(`UnitList.count_many`, a run of units costing its ends; under the placeholder and
empty-transaction policies each skipped unit's form made once per buffer), the others slave by
slave (one job each, tasks.count_walks). What the core leaves (control events, DDL,
a partial MySQL transaction, a unit the walk cannot make a policy's form of, a restricted gate's
annotated units) goes through TransactionFilter, one unit at a time, once per rule group (`RuleGroup`):
a unit so kept or skipped whole goes back to every slave's compiled walk.

Heartbeat stretches can cross chunk boundaries: `merge_counts` (tasks.counts) joins them again, so the totals do
not depend on how files were cut.
"""

from __future__ import annotations

import bisect
import math
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import replace
from itertools import compress
from typing import TYPE_CHECKING

from dumpfilter import _core
from dumpfilter.codec import Event, EventType, Transaction
from dumpfilter.codec.constants import CHECKSUM_CRC32
from dumpfilter.codec.scanner import KINDS, ROW_SKIP, Scanner, unit_events
from dumpfilter.codec.constants import HEADER_LEN
from dumpfilter.codec.transactions import CONTROL
from dumpfilter.rules.decider import gated
from dumpfilter.rules.keep_table import KeepTable, KeyRows, KeyShapes
from dumpfilter.rules.evaluate import RuleEngine
from dumpfilter.rules.schema import SchemaModel
from dumpfilter.rules.walk_driver import Driver
from dumpfilter import skip_policy
from dumpfilter.errors import CutEventError
from dumpfilter.spark_jobs.tasks.chunks import Chunk, chunk_buffers
from dumpfilter.spark_jobs.tasks.count_walks import CountWalk, GroupAnswers, answer_all, made_rows
from dumpfilter.spark_jobs.tasks.lone_units import LoneUnits
from dumpfilter.spark_jobs.tasks.rule_groups import RuleGroup
from dumpfilter.spark_jobs.tasks.counts import ChunkCounts, SlaveCounts
from dumpfilter.spark_jobs.tasks.statement_tables import (FRAMING, Buffer, KeyedSums, TableName, _unit_tables,
                                                          envelope_key, keyed_tables)

if TYPE_CHECKING:
    from dumpfilter.codec.format_description import FormatDescription
    from dumpfilter.rules.gate import Gate
    from dumpfilter.rules.ruleset import RuleSet, Settings
    from dumpfilter.topology import SlaveSpec


_NOT_FORWARDED = (EventType.HEARTBEAT, EventType.HEARTBEAT_V2)  # read by the master's stream, never sent


HOUR = 3600
MINUTE = 60
# A buffer whose units span at most this many minutes of binlog time is walked minute by minute
# (its bytes per minute as well as per hour: a short run's chart is drawn by minutes); a longer
# one hour by hour (fewer cuts of the walk).
MINUTE_BUCKETS = 120
MANY_SLAVES = 16  # distinct slaves past which a chunk is scanned in half-size buffers (`count_chunk`)


_HELD = threading.local()  # this thread's rule groups (`_rule_group`)
_HELD_MAX = 1024


def _rule_group(rules: RuleSet, settings: Settings, gate: Gate | None) -> RuleGroup:
    """The rule group of `rules` under `settings` and `gate`: its keep table over its rule engine,
    and its answers to lone statements by class. Under mysql semantics, where a table's, a
    statement key's and a class's answers depend on the rules alone, one per thread for every
    chunk it counts (a live master's every pass, and every range of one: a pass that keeps up
    with the streams counts a segment at a time): a table, a key and a class are decided once per
    rule set, not once per chunk (issue #80 goal 1). Effective semantics replays the schema: a
    new engine and group per chunk. A thread's groups number key shapes alike (one `KeyShapes`),
    classes alike (one `LoneUnits`) and share one schema model."""
    held: dict[tuple[str, str, Gate | None], RuleGroup] = _HELD.__dict__.setdefault("groups", {})
    shapes: KeyShapes | None = getattr(_HELD, "shapes", None)
    if (shapes is None or len(held) >= _HELD_MAX or len(shapes) + len(shapes.names) > _HELD_MAX << 6
            or len(_HELD.lone.keys) >= LoneUnits.KEYS_MAX or len(_HELD.lone.numbers) >= LoneUnits.KEYS_MAX << 2):
        held.clear()  # (each group's answers are by the shapes' ids and the classes' ids)
        shapes = _HELD.shapes = KeyShapes()
        _HELD.lone, _HELD.schema = LoneUnits(), SchemaModel()
    key = (repr(rules), repr(settings), gate)
    found = held.get(key)
    if found is None:
        mysql = settings.semantics == "mysql"
        # (mysql semantics: one schema model for the thread's engines, replayed once a unit by
        # `answer_all`; WL#2516's engines, one per chunk, replay their own)
        engine = RuleEngine(rules, settings, schema=_HELD.schema, replay_ddl=False) if mysql else RuleEngine(rules, settings)
        found = RuleGroup(KeepTable(gated(engine, gate), shapes=shapes), settings)
        if mysql:
            held[key] = found
    return found


class _SlaveCounter:
    """One slave over one chunk, as master/stream.py's `_unit` sends and counts each unit."""

    def __init__(self, name: str, rules: RuleSet, settings: Settings, policy_name: str, gate: Gate | None, chunk: Chunk,
                 heartbeat_size: int, shared: dict[tuple[str, str, Gate | None], RuleGroup]) -> None:
        # The keep table, filter and answers per unit of the slaves whose rules and gate are the
        # same (their skip policies differ): one `RuleGroup`, `shared`.
        key = (repr(rules), repr(settings), gate)
        if key not in shared:
            shared[key] = _rule_group(rules, settings, gate)
        group = self.group = shared[key]
        self.policy = skip_policy.named(policy_name)
        self.policy_name = policy_name
        # A gate that reads statement texts (a restricted policy) sends a unit whose Annotate_rows /
        # Rows_query text it may refuse by the reference path (master/decide/policy_check.py): the
        # units whose texts the core cannot show reach only kept tables go one at a time here.
        self.guards = group.filter.decider.checks_annotations
        self.driver: Driver[KeyRows, _core.KeysUsed] = Driver(group.keeps)  # its walks over each buffer

        self.out = ChunkCounts(chunk.file_index, chunk.start, SlaveCounts(slave=name))
        self.out.heartbeat_size = heartbeat_size  # (a Heartbeat's body is the file's name)
        self.pending = False
        self.sent_any = False
        self._configs: dict[bool, _core.SendConfig] = {}

    # -- the skip policy's sink (skip_policy.UnitSink): sent bytes counted, never copied -----
    def emit(self, events: list[Event]) -> int:
        c = self.out.counts
        if self.pending:
            c.add_heartbeats(self.out.heartbeat_size)
            self.pending = False
        self.sent_any = True
        size = sum(e.size for e in events)
        c.events_sent += len(events)
        c.bytes_sent += size
        return size

    def stretch(self) -> None:
        if not self.sent_any and not self.pending:
            self.out.leading_skip = True
        self.pending = True

    def skipped(self, events: int, size: int) -> None:
        c = self.out.counts
        c.events_skipped += max(0, events)
        c.bytes_skipped += max(0, size)

    def config(self, crc: bool) -> _core.SendConfig:
        """The count walk's configuration under the slave's policy (made once per checksum setting)."""
        found = self._configs.get(crc)
        if found is None:
            found = self._configs[crc] = _core.SendConfig(skip=self.policy.walk_skip,
                                                          partial_ok=self.policy.partial_as_kept, server_id=0,
                                                          heartbeat_crc=crc)
        return found

    def lead(self, answer: int) -> None:
        """A walk starts at a unit with `answer`: a skip before anything is sent leads the chunk."""
        if answer == ROW_SKIP and self.policy.skips_as_heartbeat and not self.sent_any and not self.pending:
            self.out.leading_skip = True

    def walked(self, r: _core.SendResult) -> None:
        """What one job of the core's count walk (`UnitList.count_many`) read and sent, added."""
        c = self.out.counts
        c.add_walk(r)
        c.kept_events += r.sent_events
        if r.skip_bytes:
            self.policy.tally_walk(c, r)
        if r.kept or r.partial or r.skip_units:
            self.sent_any = True
        self.pending = r.pending_unit >= 0 or (self.pending and not r.pending_done)

    def unit(self, txn: Transaction, k: int) -> None:
        """Unit `k` of the buffer (`txn`) the general way: its rule group's answer (`RuleGroup.result`,
        decided once for the group's slaves) sent as the skip policy says."""
        c = self.out.counts
        c.events_read += len(txn.events)
        c.bytes_read += txn.size
        if txn.kind == CONTROL:
            if txn.events[0].type_code in _NOT_FORWARDED:
                return
            c.kept_events += 1
            c.kept_bytes += self.emit(txn.events)
            return
        c.kept_events += self.policy.send_unit(txn, self.group.result(k, txn), c, self)

    def finish(self) -> ChunkCounts:
        if self.pending:  # flushed before the next file's FDE, or once the whole binlog is read: counted here
            self.out.counts.add_heartbeats(self.out.heartbeat_size)
            self.out.trailing_skip = True
            for buckets in (self.out.by_hour, self.out.by_minute):
                if buckets:  # sent in the last hour (minute) the chunk reached
                    buckets[max(buckets)][1] += self.out.heartbeat_size
        return self.out


def count_chunk(chunk: Chunk, slaves: Sequence[SlaveSpec], gates: Iterable[Gate | None] | None = None, *,
                verify_checksums: bool = True, minutes: bool = True) -> list[ChunkCounts]:
    """Counts of every slave (`dumpfilter.topology.SlaveSpec`-like: name, rules, settings,
    skip_policy) over one chunk; `gates`: each slave's master-policy gate (None: unbounded);
    `minutes`: False where the counts are wanted by hour alone (`count_buffers`).
    One scan of the chunk for all slaves; per slave, one compiled walk per run of units the core
    handles (see the module's docstring). Slaves alike in all that decides what they are sent
    (rules, settings, gate, skip policy) are counted once: the same walk would give each of them
    the same counts."""
    scanner = Scanner(chunk.path, verify_checksums=verify_checksums)

    def buffers(cuts: list[bool], divide: int) -> Iterator[ScannedBuffer]:
        return chunk_buffers(chunk, scanner, unit_statements=lambda: cuts[0], divide=divide, statements=True)

    return count_buffers(chunk, slaves, gates, buffers, lambda: scanner.names, minutes=minutes)


def count_buffers(chunk: Chunk, slaves: Sequence[SlaveSpec], gates: Iterable[Gate | None] | None,
                  buffers: Callable[[list[bool], int], Iterator[ScannedBuffer]], names: Callable[[], list[TableName]],
                  *, minutes: bool = True) -> list[ChunkCounts]:
    """`count_chunk` over buffers already scanned, or scanned as they are counted: `buffers(cuts,
    divide)` yields them as `chunk_buffers` does (`cuts[0]`: whether a scan still to start should
    read the statements of units kept in part; `divide`: its buffer size's divisor), `names()` the
    (db, table) of the last one's name ids. A live master's shadow candidates are counted over the
    UnitLists its streams' segment reads scanned (spark_jobs.tasks.shadow_counts). `minutes`:
    False where the counts are wanted by hour alone (a live master's candidates' totals keep no
    minutes): each buffer is walked by hours, as one of more than MINUTE_BUCKETS minutes is."""
    gates = list(gates) if gates is not None else [None] * len(slaves)
    alike: dict[tuple[str, str, Gate | None, str], tuple[int, SlaveSpec, Gate | None]] = {}  # the first of each
    which = [alike.setdefault((repr(s.rules), repr(s.settings), gate, s.skip_policy), (len(alike), s, gate))[0]
             for s, gate in zip(slaves, gates)]
    distinct = [(s, gate) for _, s, gate in alike.values()]
    counters: list[_SlaveCounter] | None = None
    rotate_end = False
    last_time = 0
    fmt = None
    # Slaves whose table rules (or effective patterns, or a master policy) may keep a unit of
    # several tables in part: its statements are read on the scan's thread, while its bytes are
    # in the caches, not one unit at a time on this one. But only while units are kept in part:
    # rules naming tables the binlog does not hold cut nothing, and reading every unit's
    # statements would then only slow the scan the counting waits for. (The scan of the next
    # buffer starts before this one is counted: it follows what the one before found.)
    may_cut = any(s.rules.table_rules_on or s.rules.effective_do or s.rules.effective_ignore or gate is not None
                  for s, gate in distinct)
    cuts = [may_cut]
    # Every slave's walk reads each unit's record and answer of a buffer: with many slaves, half
    # a buffer keeps them in the caches from one slave's walk to the next (64 slaves answering 64
    # ways: 10% faster with 4 MiB buffers than with 8; 8 slaves: 5% slower).
    divide = 1 if len(distinct) <= MANY_SLAVES else 2
    cut_found: list[CutEventError] = []
    for fmt_before, buf, base, units, n, crc_len in _up_to_cut(buffers(cuts, divide), cut_found):
        if counters is None:
            fmt = fmt_before
            answers: dict[tuple[str, str, Gate | None], RuleGroup] = {}
            heartbeat = HEADER_LEN + len(chunk.name.encode()) + crc_len
            counters = [_SlaveCounter(s.name, s.rules, s.settings, s.skip_policy, gate, chunk, heartbeat, answers)
                        for s, gate in distinct]
            # the lone statements, read once for every rule group (after theirs are held: `_rule_group`)
            lone: LoneUnits = _HELD.__dict__.setdefault("lone", LoneUnits())
            lone.flush({}, {})  # (what a chunk an error ended left: dropped)
            keyed = KeyedSums()
        partial = sum(c.out.counts.transactions_partial for c in counters)
        fmt = _count_units(counters, units, n, buf, base, names(), fmt, lone, keyed, minutes)
        cuts[0] = may_cut and sum(c.out.counts.transactions_partial for c in counters) > partial
        if n:
            rotate_end = bool(units.unit(n - 1).flags & _core.F_ROTATE_END)
            last_time = max(last_time, units.max_timestamp())
    cut = cut_found[0] if cut_found else None
    if counters is None:
        if cut is not None:
            raise cut  # not one whole unit before it: nothing to count
        return []
    lone.flush(counters[0].out.tables, counters[0].out.statements)
    keyed.flush(counters[0].out.tables)
    done = [counter.finish() for counter in counters]
    for part in done:
        part.rotate_end = rotate_end
        part.last_time = last_time
        part.cut = cut
    return [done[k] if done[k].counts.slave == spec.name else replace(done[k], counts=replace(done[k].counts,
            slave=spec.name)) for spec, k in zip(slaves, which)]


ScannedBuffer = tuple["FormatDescription | None", Buffer, int, _core.UnitList, int, int]  # one of chunk_buffers'


def _up_to_cut(buffers: Iterator[ScannedBuffer], found: list[CutEventError]) -> Iterator[ScannedBuffer]:
    """`buffers` (chunk_buffers) up to a cut at the file's end: each whole unit before it is
    yielded, and the cut put in `found` instead of raised."""
    try:
        yield from buffers
    except CutEventError as exc:
        found.append(exc)


def _count_units(counters: list[_SlaveCounter], units: _core.UnitList, n: int, buf: Buffer, base: int,
                 names: list[TableName], fmt: FormatDescription | None, lone: LoneUnits,
                 keyed: KeyedSums, minutes: bool = True) -> FormatDescription | None:
    """Every slave over the `n` units of one scanned buffer: compiled walks where the core can, the
    rest one unit at a time, in order per slave (by minutes where `minutes` and the buffer spans
    MINUTE_BUCKETS minutes or fewer, else by hours). Returns the format in force after the buffer."""
    # The units the core leaves to Python (never fast), as Transactions made once for all slaves,
    # each decoded with the format in force where it stands.
    made: dict[int, Transaction] = {}
    current = fmt
    def txn(k: int, keep: bool = True) -> Transaction:
        found = made.get(k)
        if found is None:
            u = units.unit(k)
            events, _ = unit_events(bytes(buf[u.start:u.end]), base + u.start, format_at(k))
            found = Transaction(KINDS[u.kind], events, bool(u.flags & _core.F_COMPLETE))
            if keep:
                made[k] = found
        return found

    # The format changes only at a Format_description: (unit index, format after it), in order.
    fdes = [k for k in units.with_flags(_core.F_HAS_FDE, 0) if k < n]
    after: list[tuple[int, FormatDescription | None]] = []
    for k in fdes:
        u = units.unit(k)
        _, current = unit_events(bytes(buf[u.start:u.end]), base + u.start, current)
        after.append((k, current))

    def format_at(k: int) -> FormatDescription | None:
        i = bisect.bisect_left(after, k, key=lambda fde: fde[0])
        return after[i - 1][1] if i else fmt

    crc = current is not None and current.checksum_alg == CHECKSUM_CRC32
    # Runs of units in one hour (or minute: MINUTE_BUCKETS) of binlog time: each slave is walked
    # bucket by bucket, so that what it reads and is sent is known per bucket (a Heartbeat counts
    # in the bucket it is sent).
    # (table_bytes gives the units' runs of time too, by buckets that divide a minute and an hour)
    step = math.gcd(MINUTE, HOUR)
    by_table = units.table_bytes(len(names), step)
    fine = [(cut.unit, cut.bucket * step) for cut in by_table.cuts]
    cuts = _joined(fine, MINUTE)
    width = MINUTE if minutes and len(cuts) <= MINUTE_BUCKETS else HOUR
    cuts = (cuts if width == MINUTE else _joined(fine, HOUR)) or [(0, -1)]
    bounds = [(a, b, start) for (a, start), (b, _) in zip(cuts, [*cuts[1:], (n, 0)])]
    other = by_table.other
    # The statement units by key, read once for every slave (the format in force from the unit
    # after the buffer's last Format_description, or from its start).
    formats = [(0, 0, 1 << 62)] if current is None else [
        (current.post_header_len(EventType.QUERY), current.checksum_len, fdes[-1] + 1 if fdes else 0)]
    # (their bytes read once for every rule group that answers them, `KeyList`; a buffer of fast
    # units holds none)
    keys = units.statement_units(formats).keys if other else []
    tables = counters[0].out.tables if counters else {}
    # (a size per name the scanner has met, most of them 0 in one buffer: the others picked in C)
    by_name = by_table.by_name
    for name, size in zip(compress(names, by_name), filter(None, by_name)):
        tables[name] = tables.get(name, 0) + size
    envelope = by_table.envelope  # each row transaction's envelope to its tables
    for name, size in zip(compress(names, envelope), filter(None, envelope)):
        key = envelope_key(name, None)
        tables[key] = tables.get(key, 0) + size
    tables[FRAMING] = tables.get(FRAMING, 0) + by_table.framing - by_table.shared
    # The statement units decided by keys by the core, once per buffer (`keyed_tables`); the rest
    # (DDL, lone statements, statements the keys do not read) one unit at a time, once the rule
    # groups have read them (`made`: each decoded once).
    statements = counters[0].out.statements if counters else {}
    left = keyed_tables(units, n, keys, tables, statements, keyed) if other else []
    lone.buffer(units, formats, txn)
    # Each rule group's answers, made once for its slaves; the answers per unit from keep bytes for
    # all groups at once: one read of the units' Table_maps and one of their statement keys per 64
    # distinct answers, not one per slave.
    groups: dict[int, GroupAnswers] = {}
    for counter in counters:
        counter.out.tables, counter.out.statements = tables, statements
        if id(counter.group) not in groups:
            counter.group.buffer(lone)
            groups[id(counter.group)] = GroupAnswers(counter.group, units, n, names, keys, fast_only=not other)
    rows = made_rows(units, names, formats, [(a.keep, a.stmt, a.guards) for a in groups.values()])
    answer_all(list(groups.values()), rows, bounds[0][0], txn, lone)
    lone.tally(left, tables, statements, lambda k: _unit_tables(made.get(k) or txn(k, keep=False), tables, statements))
    for counter in _count_all(counters, groups, units, bounds, width, crc):
        _walk(CountWalk(counter, groups[id(counter.group)], units, keys, crc, txn), bounds, width)
    units.forget_forms()  # (counted: the next buffer's forms reuse their memory)
    return current


def _joined(cuts: list[tuple[int, int]], width: int) -> list[tuple[int, int]]:
    """Runs of units ((first unit, first second) each, by buckets that divide `width`) joined by
    `width` seconds: a run starts where its bucket of `width` changes."""
    starts = [cut for k, cut in enumerate(cuts) if not k or cut[1] // width != cuts[k - 1][1] // width]
    return [(unit, at - at % width) for unit, at in starts]


def _count_all(counters: list[_SlaveCounter], groups: dict[int, GroupAnswers], units: _core.UnitList,
               bounds: list[tuple[int, int, int]], width: int, crc: bool) -> list[_SlaveCounter]:
    """Every slave whose answers (its rule group's, `groups`) leave no unit to Python counted over
    the whole buffer in one call of the core's count walk for all of them (`UnitList.count_many`,
    bucket by bucket), as `_walk` counts each; the others returned, their counts untouched, for
    `_walk`."""
    jobs: list[_core.CountJob] = []
    alike: dict[tuple[object, ...], list[_SlaveCounter]] = {}
    left = []
    # Each group's row by the first equal one met, by identity: a row (a byte per unit) compared
    # with the few others, not hashed (hashing 48 groups' rows of every buffer was 3% of a count),
    # once per group, not per slave.
    # (the first equal row stands for the others in their jobs too: the core reads each stretch
    # of a row once for every job of it, `count_walk::count_many`)
    rows: list[bytes] = []
    canon: dict[int, bytes] = {}
    for a in groups.values():
        if a.n and not a.slow:
            row = next((r for r in rows if r == a.row), None)
            if row is None:
                rows.append(row := a.row)
            canon[id(a)] = row
    for counter in counters:
        a = groups[id(counter.group)]
        if id(a) not in canon:
            left.append(counter)
            continue
        # Slaves alike in all the walk reads are counted once (64 candidates: 34 jobs; the keep
        # bytes are read only where a unit is kept in part).
        owed = counter.out.heartbeat_size if counter.pending else 0
        policy = counter.policy
        row = canon[id(a)]
        key = (id(row), a.keep if a.partial else b"", a.stmt_keep, policy.walk_skip, policy.partial_as_kept, owed)
        same = alike.get(key)
        if same is None:
            same = alike[key] = []
            jobs.append(_core.CountJob(row, a.keep, counter.config(crc), owed, a.stmt_keep))
        same.append(counter)
    if not jobs:
        return left
    carry = counters[0].out.heartbeat_size  # (the chunk's file's: every counter's)
    first = bounds[0][0]
    done = units.count_many(jobs, [a for a, _, _ in bounds], carry)
    minutes = width == MINUTE
    for job, got, same in zip(jobs, done, alike.values()):
        r = got.walk
        if r.next < len(job.row):
            left += same
            continue
        buckets = [(bucket, read, sent) for (_, _, bucket), read, sent in
                   zip(bounds, got.read_by_bucket, got.sent_by_bucket) if bucket >= 0]
        answer = job.row[first]
        for counter in same:
            counter.lead(answer)
            counter.walked(r)
            out = counter.out
            if not minutes:
                out.by_minute = None
            for bucket, read, sent in buckets:
                _bucket(out.by_hour, out.by_minute, bucket, read, sent)
    return left


def _walk(walk: CountWalk, bounds: list[tuple[int, int, int]], width: int) -> None:
    """One slave over a buffer's units, bucket by bucket (`width` seconds: an hour or a minute),
    run by its driver (rules.walk_driver): what it reads and is sent is known per hour, and per
    minute when walked by minutes (a Heartbeat counts in the bucket it is sent). A chunk walked by
    hours has no minutes (`by_minute` None)."""
    counter = walk.counter
    c = counter.out.counts
    driver, advance = counter.driver, counter.driver.advance
    driver.begin()
    if width != MINUTE:
        counter.out.by_minute = None  # (for good: a chunk's minutes are all or none)
    minutes = counter.out.by_minute
    for start, stop, bucket in bounds:
        read, sent = c.bytes_read, c.bytes_sent
        walk.hour(start, stop)
        i = start
        while i < stop:
            i = advance(walk, i)
        if bucket >= 0:
            _bucket(counter.out.by_hour, minutes, bucket, c.bytes_read - read, c.bytes_sent - sent)


def _bucket(hours: dict[int, list[int]], minutes: dict[int, list[int]] | None, bucket: int, read: int,
            sent: int) -> None:
    """Bytes read and sent in one bucket (`bucket`: its first second) added to its hour and minute."""
    got = hours.setdefault(bucket - bucket % HOUR, [0, 0])
    got[0] += read
    got[1] += sent
    if minutes is not None:
        minute = minutes.setdefault(bucket, [0, 0])
        minute[0] += read
        minute[1] += sent
