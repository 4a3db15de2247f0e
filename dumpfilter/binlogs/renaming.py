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


class RenamingSink(Sink):
    """Forwards to `inner`, each event renamed by `rename`. A byte range (the fast path's whole
    units) is read into events only when it holds one of `names` (the rewrite rules' FROM names,
    compared without case; None: always): the rest is written as it came."""

    def __init__(self, inner: Sink, rename: Callable[[Event], Event], names: Sequence[str] | None):
        self.inner = inner
        self.rename = rename
        self.names = None if names is None else tuple({n.lower().encode("utf-8", "surrogateescape") for n in names})
        self.fmt: FormatDescription | None = None

    @property
    def renumber_positions(self) -> bool:  # type: ignore[override]
        return self.inner.renumber_positions

    def begin_file(self, fde: Event, path: Path) -> bool:
        self.fmt = fde.fmt
        return self.inner.begin_file(fde, path)

    def _renamed(self, events: Sequence[Event]) -> list[Event] | None:
        out = [self.rename(e) for e in events]
        if all(a is b for a, b in zip(out, events)):
            return None
        return fix_transaction_length(out)

    def write(self, events: Sequence[Event]) -> None:
        renamed = self._renamed(events)
        self.inner.write(renamed if renamed is not None else events)

    def write_raw(self, raw: bytes | memoryview, source_pos: int) -> None:
        if self.fmt is not None:
            if self.names is None or any(name in bytes(raw).lower() for name in self.names):
                events, _ = unit_events(bytes(raw), max(source_pos, 4), self.fmt)
                renamed = self._renamed(events)
                if renamed is not None:
                    self.inner.write(renamed)
                    return
        self.inner.write_raw(raw, source_pos)

    def write_gtid_commit(self, gtid_raw: bytes, fmt: FormatDescription, source_pos: int) -> int:
        return self.inner.write_gtid_commit(gtid_raw, fmt, source_pos)

    def direct_writer(self) -> BinlogWriter | None:
        return None  # every write goes through the renaming

    def close(self) -> list[Path]:
        return self.inner.close()
