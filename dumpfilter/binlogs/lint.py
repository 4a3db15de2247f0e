"""`dumpfilter lint` over binlog files on disk: read in order by binlogs.lint_scan's compiled scan,
the units that may matter handed to dumpfilter.rules.lint. `new_linter` is the one way every
lint is set up (`lint`, `verify`, `simulate`'s lint column, the master's lint at Register)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
import pickle
from dataclasses import dataclass
from pathlib import Path

from dumpfilter.codec import BinlogReader, Transaction, group_transactions
from dumpfilter.codec.format_description import FormatDescription
from dumpfilter.codec.reader import DEFAULT_CHUNK
from dumpfilter.codec.scanner import Scanner
from dumpfilter.errors import BinlogError
from dumpfilter.binlogs.files import file_error, open_binlog
from dumpfilter.binlogs.lint_scan import LintScanStats, _feed, _feed_kept, _Lint, lint_scan
from dumpfilter.binlogs.scan_index import ScanIndex
from dumpfilter.rules.evaluate import RuleEngine
from dumpfilter.rules.lint import Break, Linter
from dumpfilter.rules.lint_divergence import Breaks
from dumpfilter.rules.ruleset import RuleSet, Settings
from dumpfilter.rules.schema import SchemaModel


def new_linter(rules: RuleSet, settings: Settings, schema: SchemaModel | None = None,
               replica_schema: SchemaModel | None = None) -> Linter:
    """A Linter for a replica with `rules`. `schema`: the master's schema before the binlog (the
    rule engine decides with it, as the master's filter does; the primary's replay starts from it);
    `replica_schema`: the replica's own starting schema when it differs (objects created outside
    replication), else the master's. A schema given is complete: what it lacks is absent."""
    engine = RuleEngine(rules, settings, schema=schema.copy() if schema is not None else None)
    return Linter(engine, schema, flavor=settings.flavor, schema_complete=schema is not None,
                  replica_schema=replica_schema)


def units(paths: Iterable[Path], verify_checksums: bool = True) -> Iterator[tuple[str, Transaction]]:
    """(file name, transaction) of each file in order."""
    for path in paths:
        path = Path(path)
        with open_binlog(path) as stream:
            reader = BinlogReader(stream, str(path), verify_checksums=verify_checksums)
            for txn in group_transactions(reader):
                yield path.name, txn


def lint_files(paths: Iterable[Path], rules: RuleSet, settings: Settings, schema: SchemaModel | None = None, *,
               replica_schema: SchemaModel | None = None, verify_checksums: bool = True,
               stop_at_cut: bool = False) -> Breaks:
    """Every break a replica with `rules` would meet in `paths` (schemas: see `new_linter`), carrying
    the writes it would silently get wrong (`.divergence`: rules.lint_divergence). Without
    either schema, tables the binlog never created are taken to exist. One compiled scan; only the
    units that may matter are decoded and fed to the Linter (binlogs.lint_scan): the breaks
    the Linter gives fed every unit. `stop_at_cut`: see lint_scan (the result's `cut`)."""
    return lint_many(paths, [(rules, settings)], schema, replica_schema=replica_schema,
                     verify_checksums=verify_checksums, stop_at_cut=stop_at_cut)[0]


def lint_many(paths: Iterable[Path], rule_sets: Sequence[tuple[RuleSet, Settings]],
              schema: SchemaModel | None = None, *, replica_schema: SchemaModel | None = None,
              verify_checksums: bool = True, stats: LintScanStats | None = None,
              first_break: bool = False, stop_at_cut: bool = False) -> list[Breaks]:
    """`lint_files` for several rule sets over one scan of `paths` (`experiment --candidates`): each
    unit some rule set's Linter needs is decoded once and fed to each one that needs it. Returns
    the breaks per rule set, in order; `stats` counts the scans, units decoded and units fed.
    `first_break`: past its first break a rule set is fed only the units that may diverge or change
    its state (its breaks start as `lint_files`' do; its divergence is theirs)."""
    linters = [new_linter(rules, settings, schema, replica_schema) for rules, settings in rule_sets]
    return lint_scan(paths, linters, verify_checksums=verify_checksums, stats=stats, first_break=first_break,
                     stop_at_cut=stop_at_cut)


MIN_CHUNK = 1 << 16


@dataclass
class Look:
    """What one FollowingLint's look (`look_together`) read: `position` is the end of the last whole
    unit fed (None before the first), `breaks` the first `keep` breaks it found and `found` how many it found,
    `read` the bytes it read, `caught_up` whether it reached the end of the files it was given;
    looks that read together (`look_together`) share `read`: `reader` is this one's place among
    them (0 for the first, which counts the bytes for all); `scanned` what of `read` was read and
    scanned (the rest came from kept scans: binlogs.scan_index)."""

    position: tuple[str, int] | None
    breaks: list[Break]
    found: int
    read: int
    caught_up: bool
    reader: int = 0
    scanned: int = 0
    checkpoint: bytes = b""  # the follower as it stands after this look (`FollowingLint.checkpoint`), when it moved on
    diverges: int = 0  # writes a replica with these rules silently gets wrong, up to `position` (rules.lint_divergence)
    divergence: dict[str, object] | None = None  # those writes by rule (`Divergence.to_json`)


class FollowingLint:
    """Lint over a binlog that grows: each look (`look_together`) feeds the Linter only the whole
    units written since the last one, from where that one stopped, with `lint_scan`'s compiled scan and feed (only the
    units that may matter decoded). Memory: the Linter's schema models and the one unit being read
    (never the binlog, never the breaks beyond those a look hands back)."""

    def __init__(self, linter: Linter, *, verify_checksums: bool = True, chunk_size: int = DEFAULT_CHUNK,
                 index: ScanIndex | None = None):
        self.linter = linter
        self.verify_checksums = verify_checksums
        self.chunk_size = chunk_size
        self.lint = _Lint(linter)
        self.index = index  # whole closed files' scans, kept for every reader from their start
        self.file: str | None = None          # the file being read
        self.pos = 0                          # the end of its last whole unit fed (0: not opened)
        self.fmt: FormatDescription | None = None  # its format, to resume past its Format_description
        self.position: tuple[str, int] | None = None  # how far lint has read: the end of its last whole unit

    def checkpoint(self) -> bytes:
        """The follower as it stands, pickled: where its next look starts, the format in force there and
        its Linter (the schema models lint has built up to `position`). `resume` makes it again, in
        another process (the master's lint worker started anew after it died): it reads on from here,
        and finds what this one would have found. The scan's safe bits are not kept (asked again)."""
        return pickle.dumps((self.linter, self.verify_checksums, self.chunk_size, self.file, self.pos, self.fmt,
                             self.position), protocol=pickle.HIGHEST_PROTOCOL)

    @classmethod
    def resume(cls, checkpoint: bytes, index: ScanIndex | None = None) -> FollowingLint:
        """The follower a `checkpoint` was taken of, reading on with `index` (this process's kept scans)."""
        linter, verify_checksums, chunk_size, file, pos, fmt, position = pickle.loads(checkpoint)
        following = cls(linter, verify_checksums=verify_checksums, chunk_size=chunk_size, index=index)
        following.file, following.pos, following.fmt, following.position = file, pos, fmt, position
        return following

    def place(self) -> tuple[str | None, int, bool, int, int]:
        """Where the next look starts and how it reads: FollowingLints at the same place look
        together (`look_together`)."""
        return self.file, self.pos, self.verify_checksums, self.chunk_size, id(self.index)


def look_together(followings: Sequence[FollowingLint], files: Sequence[tuple[str | Path, int]], budget: int,
                  keep: int = 5) -> list[Look]:
    """Each FollowingLint of `followings` (all at the same `place()`) reads on through `files` ((path,
    size) in binlog order, each read only up to its size) for about `budget` bytes (at most a 64 KiB
    chunk more, and the unit that passes it is finished), in one read of the binlog: each unit
    scanned once and decoded once for all the Linters that need it (the master's lint at Register,
    where slaves that register together have their rule sets linted together). The last file may
    end inside a unit or an event being written: the look stops before it, and the next one starts
    there. A file left behind (a later one exists) is read to its end; what it ends inside is fed as
    lint_files does. Returns each one's Look (its first `keep` breaks), in order. On an error every
    one of them stops where the error was found."""
    lead = followings[0]
    if any(f.place() != lead.place() for f in followings):
        raise ValueError("look_together: the FollowingLints are not at the same place")
    paths = [(Path(p), size) for p, size in files]
    names = [p.name for p, _ in paths]
    if not paths:
        return [Look(f.position, [], 0, 0, True, n) for n, f in enumerate(followings)]
    if lead.file is None:
        _move(followings, names[0])
    if lead.file not in names:
        raise BinlogError(f"{lead.file} left the binlog index before lint read it to its end")
    i = names.index(lead.file)
    read = 0
    befores = [len(f.linter.breaks) for f in followings]
    stats = LintScanStats()
    for f, before in zip(followings, befores):  # each holds the first `keep` breaks of this look (Breaks)
        f.linter.breaks.keep, f.linter.breaks.dropped = before + keep, 0
    caught_up = False
    while True:
        path, size = paths[i]
        last = i == len(paths) - 1
        reached = lead.pos >= size
        if not reached:
            n, reached = _read(followings, path, size, budget - read, not last, stats)
            read += n
        if last or lead.pos < size:
            caught_up = last and reached
            break
        if read >= budget:
            break
        i += 1
        _move(followings, names[i])
    looks = []
    for n, (f, before) in enumerate(zip(followings, befores)):
        found = f.linter.breaks[before:]
        del f.linter.breaks[before:]
        looks.append(Look(f.position, found, len(found) + f.linter.breaks.dropped, read, caught_up, n, stats.bytes_scanned,
                          diverges=f.linter.breaks.divergence.writes, divergence=f.linter.breaks.divergence.to_json()))
    return looks


def _move(followings: Sequence[FollowingLint], name: str) -> None:
    for f in followings:
        f.file, f.pos, f.fmt = name, 0, None


def _read(followings: Sequence[FollowingLint], path: Path, size: int, budget: int, final: bool,
          stats: LintScanStats) -> tuple[int, bool]:
    """Feeds the whole units of `path` from their place up to `size` (`lint_scan`'s `_feed`, or
    `_feed_kept` over the file's kept scan from its start: one read and one scan for all of them);
    stops after the chunk that passes `budget` once a unit was fed. `final`: the file is left behind
    (a later one exists): what it ends inside is fed as `lint_files` does, a partial event is an
    error. Returns the bytes read and whether they reached `size` (the bytes after the place then
    are a unit still being written: read, not yet fed)."""
    lead = followings[0]
    name = path.name
    start, index = lead.pos, lead.index
    # Chunks no larger than the budget (above 64 KiB): a look reads about its budget.
    chunk = min(lead.chunk_size, max(budget, MIN_CHUNK))
    lints = [f.lint for f in followings]

    try:
        made = index.scans if index is not None else 0
        kept = index.get(path, size, lead.verify_checksums, final, chunk) if index is not None and start == 0 else None
        if kept is not None:
            if index is not None and index.scans > made:  # scanned now, out of the mapping
                stats.bytes_scanned += size
            read, reached, pos, fmt = _feed_kept(path, kept, lints, budget, final, stats)
        else:
            read, reached, pos, fmt = _feed(path, lints, Scanner(str(path), verify_checksums=lead.verify_checksums),
                                            start, size, lead.fmt, budget, chunk, final, stats)
    except OSError as exc:  # (a .gz file's bad data is open_binlog's BinlogError already)
        raise file_error(exc, path) from None
    if final and reached:  # a file left behind, read to its end: what it ended inside was fed
        pos = size
    if pos > start:
        for f in followings:
            f.pos, f.fmt = pos, fmt
            f.position = (name, pos)
    return read, reached
