"""Lint at the compiled core's speed (issue #40 goal 6): binlog files scanned once by the core (`UnitList`,
the same one-pass unit scan `filter`, `experiment` and `split` use), and only the units that may matter
decoded and fed to each rule set's `rules.lint.Linter`, whatever the number of rule sets (`experiment
--candidates`: one scan, each needed unit decoded once).

A unit the Linter is not fed is one whose feed would neither change its state nor break:
- a fast ROW unit (`GTID [BEGIN] {Annotate|Rows_query|Table_map|Rows}* XID`) whose every Table_map names a
  *safe* table: skipped by the rules, or present on the replica (`Linter._table_state` of its replica name).
  The Linter reads only the Table_maps of such a unit, and a present table never breaks (row events carry
  their own column count).
- a statement unit the core keys (GTID, single-table DML Queries and their context events, framing Queries, XID:
  `stmt_units.rs`) whose every key is safe: its verdict (`Linter.key_verdict`, the one reading of a key that
  also answers units: `binlogs.lint_keyed`) neither breaks nor counts a divergence: skipped by the rules, or
  naming a present table (replica name, after rewrite-db) with nothing read besides, with no temporary table,
  and, for INSERT/REPLACE, nothing for `_insert_shape` to check (the replica's model has no columns for the
  table and no skipped ALTER changed its count). Where the replica's columns are known (the verdict's
  `columns`), the unit's INSERT texts are looked at (`Heads.failing`: each distinct column list parsed once)
  and the unit is fed only when one may break. Lone keyed DML likewise.
A DML statement changes none of the Linter's state (`_skipped`, `_kept` and the schema models act on DDL
only), so the safe bits stay right across such units. Every other unit (DDL, control events, statements the
core does not key) is fed. After a DDL unit whose changes stay with the tables it names (`Linter.touched`:
CREATE/ALTER/DROP/RENAME TABLE, indexes, triggers, views), only those tables' bits are asked again
(`_Lint.invalidate`); after one that may have changed more (a database, a temporary table, a text not parsed)
the next units are fed as they come until a window of them is past, then every bit is asked again
(`_Lint.refresh`): a run of DDL costs what the Linter alone costs. Safety is asked once per table name and per
key of a buffer (a keep byte each), and the core answers per unit in bulk
(`UnitList.rows_many`): Python loops only over the units fed or looked at. A keyed unit the bits
cannot rule out is answered from its keys' verdicts where each has one (`binlogs.lint_keyed`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from dumpfilter import _core
from dumpfilter.binlogs.files import distinct_paths, file_error, naming, open_binlog
from dumpfilter.binlogs.lint_keyed import COLUMNS, UNSAFE, Heads, KeyVerdicts
from dumpfilter.binlogs.scan_index import KeptScan
from dumpfilter.codec import Transaction
from dumpfilter.codec.constants import HEADER_LEN, MAGIC, EventType
from dumpfilter.codec.event import Buffer, decode_text, query_text
from dumpfilter.codec.format_description import FormatDescription
from dumpfilter.codec.reader import bad_magic, truncated
from dumpfilter.codec.scanner import KINDS, ROW_SKIP, ROW_SLOW, Scanner, UnitList, unit_events
from dumpfilter.errors import BinlogError, CutEventError, TruncatedBinlogError
from dumpfilter.rules.lint import Linter
from dumpfilter.rules.lint_divergence import Breaks

READ_BYTES = 4 << 20  # one read buffer
_QUERY = int(EventType.QUERY)
# ROW_SKIP (nothing to feed) -> 0, any other answer -> 1.
_NEED = bytes(0 if code == ROW_SKIP else 1 for code in range(256))


@dataclass
class LintScanStats:
    """What one scan did: `scans` files read (each once, whatever the number of linters),
    `units` units the core found, `decoded` units decoded in Python (once each, for every linter
    that needs them), `fed` units fed per linter, `bulk` keyed units whose INSERT texts were
    looked at and cleared (each head read once, `Heads`), `refreshes` how often each linter's safe bits
    were asked (once per buffer, and once per window of units after a state change), `answered`
    the keyed units answered per linter from their keys' verdicts, not fed (binlogs.lint_keyed),
    `bytes_scanned` the bytes read and scanned."""

    scans: int = 0
    units: int = 0
    decoded: int = 0
    bytes_scanned: int = 0  # read and scanned (a file's kept scan is neither: binlogs.scan_index)
    fed: list[int] | None = None
    bulk: list[int] | None = None  # keyed units whose INSERT heads checked out together, none alone
    refreshes: list[int] | None = None
    answered: list[int] | None = None


class _Lint(KeyVerdicts):
    """One Linter's safe bits: per table name id of the file's scanner, and per statement key its
    class (`KeyVerdicts`), forgotten when the Linter's state may have changed."""

    def __init__(self, linter: Linter):
        super().__init__(linter)
        self.names: bytearray = bytearray()   # 1: unsafe, by name id
        self.ids_by_table: dict[str, list[int]] = {}  # name ids by table name (lower case), for `invalidate`
        self.need = b""     # per unit of the buffer: 1 fed (or looked at, `check`)
        self.heads: Heads | None = None  # the INSERT heads of the buffer being fed, as asked (`refresh`)
        self.bulk = 0       # keyed units cleared by their INSERTs' column lists
        self.fed = 0
        self.horizon = -1   # units up to here are fed whatever the bits (the state changed lately)
        self.refreshes = 0
        self.first_break = False  # once it has a break, fed only what may diverge (`quiet`)

    def forget(self, tables: set[str] | None = None) -> None:
        super().forget(tables)
        if tables is None:
            self.names = bytearray()
            self.ids_by_table.clear()

    def invalidate(self, touched: set[str], units: UnitList, names: Sequence[tuple[str, str]],
                   keys: Sequence[_core.StatementKey]) -> None:
        """After a unit whose statements changed the state of `touched` tables only (`Linter.touched`;
        their keys' answers forgotten already): their names' safe bits asked again, and `need` made
        again only when one of this buffer's bits changed. A table made or dropped every fifty
        units (bench.common's workload: CREATE TABLE IF NOT EXISTS scratch_N) cost a refresh of every
        name, or the units fed meanwhile: lint fed nearly every unit, at 55 MB/s."""
        flipped = False
        bits = self.names
        for table in touched:
            for nid in self.ids_by_table.get(table, ()):
                bit = 0 if self._table_safe(*names[nid]) else 1
                if bits[nid] != bit:
                    bits[nid] = bit
                    flipped = True
        if not flipped:
            verdicts = self.verdicts
            flipped = any(k.key not in verdicts for k in keys)
        if flipped:
            self.refresh(units, names, keys)

    # -------------------------------------------------------------- safety
    def _table_safe(self, db: str, table: str) -> bool:
        linter = self.linter
        if self.quiet or not linter.engine.decide_table(db, table).apply:  # (row events never diverge)
            return True
        return linter._table_state(linter._replica_table(db, table))[0]

    def refresh(self, units: UnitList, names: Sequence[tuple[str, str]],
                keys: Sequence[_core.StatementKey]) -> None:
        """The unsafe bytes for every name and key of this buffer, and which units the Linter
        must be fed (`need`, one byte per unit)."""
        self.refreshes += 1
        have = len(self.names)
        if have < len(names):
            self.names.extend(0 if self._table_safe(db, table) else 1 for db, table in names[have:])
            by_table = self.ids_by_table
            for nid in range(have, len(names)):
                by_table.setdefault(names[nid][1].lower(), []).append(nid)
        verdicts = self.verdicts
        bad = bytearray(len(keys))
        columns = bytearray(len(keys))
        shapes: dict[int, tuple[tuple[str, ...], bool]] = {}  # by key id: a COLUMNS key's columns
        for key in keys:
            verdict = verdicts[key.key] if key.key in verdicts else \
                self.verdict(key.key, key.key[0], decode_text(key.db), decode_text(key.sql))
            cls = self.key_class(verdict)
            bad[key.id] = cls == UNSAFE
            if cls == COLUMNS:
                assert verdict is not None and verdict.columns is not None  # (COLUMNS)
                columns[key.id] = 1
                shapes[key.id] = verdict.columns
        need = bytearray(units.rows_many([bytes(self.names)], [bytes(bad)])[0].translate(_NEED))
        if any(columns):
            # Keyed units with no unsafe key but a key whose INSERTs have columns to check: those whose
            # statements do not all pass (`Heads.failing`) are fed.
            looked = units.rows_many([bytes(len(self.names))], [bytes(columns)])[0].translate(_NEED)
            check = (int.from_bytes(looked, "little") & ~int.from_bytes(need, "little")).to_bytes(len(need), "little")
            if any(check):
                assert self.heads is not None  # (set by _lint_units)
                failing = self.heads.failing(check, shapes)
                self.bulk += sum(check) - len(failing)
                for k in failing:
                    need[k] = 1
        self.need = bytes(need)


def lint_scan(paths: Iterable[Path | str], linters: Sequence[Linter], *, verify_checksums: bool = True,
              stats: LintScanStats | None = None, first_break: bool = False, stop_at_cut: bool = False) -> list[Breaks]:
    """Feed every Linter of `linters` the binlog files `paths` in order, from one scan by the
    compiled core: each Linter is fed the units that may change its state or break (see the
    module's doc), each such unit decoded once. Returns each Linter's breaks, as feeding it
    every unit gives them. `first_break`: once a Linter has a break (all a verdict needs of breaks:
    where the replica stops), it is fed only the units that change its state or may diverge, so
    its divergence is still what feeding every unit gives (`experiment --candidates`: a candidate
    that stops shows it too); its breaks then start with those of the unit the replica stops in.
    `stop_at_cut`: a file cut inside an event ends the scan there, its whole events fed, and is each
    result's `cut` instead of the error."""
    lints = [_Lint(linter) for linter in linters]
    stats = stats if stats is not None else LintScanStats()
    for lint in lints:
        lint.first_break = first_break
    for path in distinct_paths(paths):  # a file given twice would be replayed twice
        try:
            _lint_file(path, lints, verify_checksums, stats)
        except CutEventError as exc:
            if not stop_at_cut:
                raise
            for linter in linters:
                linter.breaks.cut = exc
            break
    stats.fed = [lint.fed for lint in lints]
    stats.bulk = [lint.bulk for lint in lints]
    stats.refreshes = [lint.refreshes for lint in lints]
    stats.answered = [lint.answered for lint in lints]
    return [linter.breaks for linter in linters]


def _lint_file(path: Path, lints: list[_Lint], verify_checksums: bool, stats: LintScanStats) -> None:
    stats.scans += 1
    try:
        _feed(path, lints, Scanner(str(path), verify_checksums=verify_checksums), 0, 1 << 62, None, 1 << 62,
              READ_BYTES, True, stats)
    except BinlogError as exc:  # a decoder's error names no file, the Linter's only its name: the path
        raise naming(exc, path) from None
    except OSError as exc:
        raise file_error(exc, path) from None


def _feed(path: Path, lints: Sequence[_Lint], scanner: Scanner, start: int, size: int, fmt: FormatDescription | None,
          budget: int, chunk: int, final: bool, stats: LintScanStats) -> tuple[int, bool, int, FormatDescription | None]:
    """Feeds each Linter of `lints` the whole units of `path` from `start` (0: the file's start;
    else the end of a whole unit, with `fmt` the format in force there) up to `size` bytes (or
    its end), in reads of `chunk` bytes, stopping after the read that passes `budget` once a unit
    was fed: one read and one compiled scan for all of them, each unit some Linter needs decoded once (`_lint_units`).
    `final`: what the file ends inside is an error (the file is left behind: `lint_files`, or a
    later file exists). Returns (bytes read, whether they reached `size` or the end, the end of
    the last whole unit, the format in force there)."""
    name = path.name
    for lint in lints:
        lint.forget()  # name ids start again with the scanner
    pos = start
    with open_binlog(path) as stream:
        offset = start
        if start == 0:
            magic = stream.read(min(4, size))
            offset = len(magic)
            stats.bytes_scanned += offset
            if len(magic) < 4:
                if final:
                    raise TruncatedBinlogError(f"file is {len(magic)} bytes long, too short for the binlog magic",
                                               path=str(path), offset=0)
                return offset, offset >= size, pos, fmt
            if magic != MAGIC:
                raise bad_magic(str(path))
        else:
            stream.seek(start)
            if fmt is not None:
                scanner.load_format(fmt.raw)
        # One buffer for the whole read: each read lands after the unit the last one ended inside
        # (`have` bytes, moved to the front), so no read allocates or joins (a fresh buffer per read
        # cost as much as the scan: its page faults and the copy). A unit larger than the buffer
        # doubles it, and the reads, so that it is scanned a bounded number of times.
        # (nothing past the magic shown yet, a server's new file: the read reached `size`)
        base, have, eof, step = offset, 0, offset >= size, chunk
        buf = bytearray(2 * chunk)
        while offset < size and not eof:
            want = min(step, size - offset)
            if have + want > len(buf):
                grown = bytearray(max(2 * len(buf), have + want))
                grown[:have] = buf[:have]
                buf = grown
            # (open_binlog's streams are buffered readers, BufferedReader or GzipFile: they read into)
            got = stream.readinto(memoryview(buf)[have:have + want])  # type: ignore[attr-defined]
            offset += got
            stats.bytes_scanned += got
            eof = offset >= size or got < want  # a short read: the file's end
            n = have + got
            # Read-only, as the core asks of what a UnitList scans: the buffer is written again only
            # after this read's UnitList is gone and the view released (a view the core still held
            # would refuse the release: BufferError, never a silent overwrite).
            view = memoryview(buf)[:n].toreadonly()
            units = UnitList()
            scan = scanner.scan_into(units, view, 0, base, name, at_eof=final and eof)
            stats.units += scan.added
            fmt = _lint_units(units, scan.added, view, base, name, fmt, scanner.names, lints, stats)
            if scan.added:
                pos = base + scan.stop
            if scan.error is not None:
                raise scan.error
            have, base = n - scan.stop, base + scan.stop
            step = chunk if scan.stop else 2 * step  # a read that ended no unit: the next reads twice as far
            del units
            buf = _reuse(view, buf, scan.stop, n)
            if offset - start >= budget and pos > start and not eof:
                return offset - start, False, pos, fmt
    if final and have:
        raise truncated(bytes(buf[:have]), str(path), base)
    return offset - start, eof, pos, fmt


def _reuse(view: memoryview, buf: bytearray, stop: int, n: int) -> bytearray:
    """`buf` with the unit the read ended inside (`buf[stop:n]`) moved to its front once the read's
    view let go of it; else a fresh buffer, the old one left to what still views it: a frame kept by a
    reference cycle (sqlglot's parse error of a statement the core declines, `DELETE t1.* FROM t1, t2`,
    whose traceback reaches back to `_lint_units`) holding the read's UnitList, the core's export."""
    try:
        view.release()
    except BufferError:
        fresh = bytearray(len(buf))
        fresh[:n - stop] = buf[stop:n]
        return fresh
    buf[:n - stop] = buf[stop:n]
    return buf


def _feed_kept(path: Path, kept: KeptScan, lints: Sequence[_Lint], budget: int, final: bool,
               stats: LintScanStats) -> tuple[int, bool, int, FormatDescription | None]:
    """`_feed` from the file's start over its kept scan (binlogs.scan_index): each Linter fed the
    units it needs out of the file's mapping, nothing read or scanned again."""
    name = path.name
    for lint in lints:
        lint.forget()  # name ids: the kept scan's
    pos, fmt = 0, None
    for k, part in enumerate(kept.parts):
        stats.units += part.n
        fmt = _lint_units(part.units, part.n, part.view, part.base, name, fmt, kept.names, lints, stats)
        if part.n:
            pos = part.base + part.stop
        covered = part.base + len(part.view)
        if part.error is not None:
            raise part.error
        if covered >= budget and pos > 0 and k + 1 < len(kept.parts):
            return covered, False, pos, fmt
    if final and kept.rest:
        raise truncated(bytes(kept.whole[kept.size - kept.rest:]), str(path), kept.size - kept.rest)
    return kept.size, True, pos, fmt


_GTIDS = _core.F_MARIADB_GTID | _core.F_MYSQL_GTID | _core.F_TAGGED_GTID


def _lone_dml(buf: Buffer, u: _core.UnitEntry, fmt: FormatDescription | None) -> tuple[str, str, _core.StatementShape] | None:
    """(default database, SQL, statement key) when unit `u` is a complete GTID and one Query that
    the core keys (single-table DML), else None."""
    if fmt is None or u.events != 2 or not u.gtid_size or u.flags & _core.F_COMPLETE == 0 or u.flags & _GTIDS == 0:
        return None
    at = u.start + u.gtid_size
    if at + HEADER_LEN > u.end or buf[at + 4] != _QUERY:
        return None
    text = query_text(buf, at, u.end, fmt)
    if text is None:
        return None
    shape = _core.statement_key(text[1].encode("utf-8", "surrogateescape"))
    return None if shape is None else (text[0], text[1], shape)


def _lint_units(units: UnitList, n: int, buf: Buffer, base: int, name: str, fmt: FormatDescription | None,
                names: list[tuple[str, str]], lints: Sequence[_Lint], stats: LintScanStats) -> FormatDescription | None:
    """The `n` units of one buffer: each Linter fed the units it needs, in order. Returns the format
    in force after them."""
    if not n or not lints:
        return fmt
    # The statement units' format: the one after the buffer's last Format_description (the units
    # before it are not keyed: fed), else the one in force.
    fdes = [k for k in units.with_flags(_core.F_HAS_FDE, 0) if k < n]
    current = fmt
    for k in fdes:
        u = units.unit(k)
        _, current = unit_events(bytes(buf[u.start:u.end]), base + u.start, current)
    if current is None:
        formats = [(0, 0, 1 << 62)]
    else:
        formats = [(current.post_header_len(_QUERY), current.checksum_len, fdes[-1] + 1 if fdes else 0)]
    keys = units.statement_units(formats).keys
    # Units neither fast nor keyed: fed to every Linter, and each one's safe bits asked again after.
    structural = units.rows_many([bytes(len(names))], [bytes(len(keys))])[0]
    heads = Heads(units, n, buf, keys, current)
    for lint in lints:
        lint.heads = heads
        lint.refresh(units, names, keys)
        lint.horizon = -1
    # After a unit that may change a Linter's state, its safe bits are asked again only once the
    # next `window` units are fed as they come (a run of DDL costs what the Linter alone costs,
    # not a refresh per DDL unit): each refresh is paid for by that many units.
    window = 16 + (len(names) + len(keys)) // 8
    k = 0
    while k < n:
        nxt = n
        for lint in lints:
            if lint.horizon >= k:
                nxt = k
                continue
            if lint.horizon >= 0:
                lint.refresh(units, names, keys)
                lint.horizon = -1
            at = lint.need.find(1, k)
            if 0 <= at < nxt:
                nxt = at
        if nxt >= n:
            break
        k = nxt
        u = units.unit(k)
        lone = _lone_dml(buf, u, fmt) if structural[k] == ROW_SLOW else None
        wanted = [lint for lint in lints if lint.horizon >= k or lint.need[k]]
        changes = lone is None and structural[k] == ROW_SLOW
        if lone is not None and fmt is not None:
            # A GTID and one keyed DML Query (a MyISAM table's statement, a standalone group): it
            # changes no state, and is fed only to the Linters for which it may break, unless
            # answered from its shape's verdict.
            fed = [lint for lint in wanted if not lint.answer_lone(k, units, buf, base, u, name, fmt, lone)]
        elif not changes:  # a statement unit by keys: answered from its keys' verdicts?
            fed = [lint for lint in wanted if not lint.answer(k, units, heads.pieces, buf, base, u, name, fmt)]
        else:
            fed = wanted
        if fed:
            events, fmt = unit_events(bytes(buf[u.start:u.end]), base + u.start, fmt, path=name)
            txn = Transaction(KINDS[u.kind], events, bool(u.flags & _core.F_COMPLETE))
            stats.decoded += 1
            for lint in fed:
                if changes:
                    lint.linter.touched = set()
                lint.linter.feed(name, txn)
                lint.fed += 1
                if changes:
                    touched, lint.linter.touched = lint.linter.touched, None
                    if touched is None:  # anything may have changed: every bit asked again later
                        lint.forget()
                        lint.horizon = k + window
                    elif touched:  # only these tables' bits, and answers
                        lint.forget(touched)
                        if lint.horizon < 0:
                            lint.invalidate(touched, units, names, keys)
        for lint in wanted:
            if lint.first_break and lint.linter.breaks and not lint.quiet:
                lint.quiet = True  # every bit asked again, at the next unit
                lint.forget()
                lint.horizon = k
        k += 1
    return fmt
