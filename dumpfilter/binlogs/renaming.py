"""`filter`'s output renamed as the replica's rules rewrite (as `mariadb-binlog --rewrite-db`
does): a Sink in front of the output sink that passes each kept unit through the one event
rewriter (dumpfilter.codec.rename, the names from dumpfilter.rules.renamer). The output's
positions are its own: the writer renumbers what a longer or shorter name moved, and a MySQL
GTID's transaction_length is recomputed."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from dumpfilter.codec import BinlogWriter, Event, fix_transaction_length
from dumpfilter.codec.format_description import FormatDescription
from dumpfilter.codec.scanner import unit_events
from dumpfilter.binlogs.sinks import Sink
from dumpfilter.rules.renamer import AppliedNames


class RenamingSink(Sink):
    """Forwards to `inner`, each event renamed by `rename`. A byte range (the fast path's whole
    units) is read into events only when it holds one of `names` (the rewrite rules' FROM names,
    compared without case; None: always): the rest is written as it came. With `applied` (plain
    replicate-rewrite-db's names), the compiled assembly writes into `inner` directly and renames
    what it writes itself (`direct_renames`); the units it leaves here teach it their names."""

    def __init__(self, inner: Sink, rename: Callable[[Event], Event], names: Sequence[str] | None,
                 applied: AppliedNames | None = None):
        self.inner = inner
        self.rename = rename
        self.names = None if names is None else tuple({n.lower().encode("utf-8", "surrogateescape") for n in names})
        self.fmt: FormatDescription | None = None
        self.applied = applied

    # -- the compiled assembly's direct writes: the inner sink's, renamed by the core ----------
    @property
    def direct_renames(self) -> dict[bytes, bytes] | None:  # type: ignore[override]
        return None if self.applied is None else self.applied.map

    @property
    def direct_limit(self) -> int | None:  # type: ignore[override]
        return self.inner.direct_limit

    @property
    def direct_gtids(self) -> bool:  # type: ignore[override]
        return self.inner.direct_gtids

    def direct_fresh(self) -> bool:
        return self.inner.direct_fresh()

    def learn_names(self, events: list[Event]) -> None:
        if self.applied is not None:
            self.applied.learn(events)

    def direct_written(self, out: bytes, gtids: bytes) -> None:
        self.inner.direct_written(out, gtids)

    def direct_rotate(self) -> None:
        self.inner.direct_rotate()

    @property
    def renumber_positions(self) -> bool:  # type: ignore[override]
        return self.inner.renumber_positions

    def begin_file(self, fde: Event, path: Path) -> bool:
        self.fmt = fde.fmt
        return self.inner.begin_file(fde, path)

    def _renamed(self, events: Sequence[Event]) -> list[Event] | None:
        if self.applied is not None:
            self.applied.learn(list(events))
        out = [self.rename(e) for e in events]
        if all(a is b for a, b in zip(out, events)):
            return None
        return fix_transaction_length(out)

    def write(self, events: Sequence[Event]) -> None:
        renamed = self._renamed(events)
        self.inner.write(renamed if renamed is not None else events)

    def write_raw(self, raw: bytes | memoryview, source_pos: int) -> None:
        if self.fmt is not None:
            # (read into events where a name may change, or the assembly has names to learn)
            if self.names is None or self.applied is not None or any(name in bytes(raw).lower() for name in self.names):
                events, _ = unit_events(bytes(raw), max(source_pos, 4), self.fmt)
                renamed = self._renamed(events)
                if renamed is not None:
                    self.inner.write(renamed)
                    return
        self.inner.write_raw(raw, source_pos)

    def direct_writer(self) -> BinlogWriter | None:
        # every write goes through the renaming, but the assembly's where it renames (`applied`)
        return None if self.applied is None else self.inner.direct_writer()

    def close(self) -> list[Path]:
        return self.inner.close()
