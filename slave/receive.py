"""The slave's walk over one batch's units (rules.walk_driver.Walk): what reaches the relay log in
bulk (the compiled relay run), what goes as it came (a lone statement, a fast unit its own rules
keep) and what goes through the grouper, its own rules and the rewrites (`Slave._event`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from dumpfilter.codec import EventType, TransactionGrouper
from dumpfilter.codec.event import query_text
from dumpfilter.codec.scanner import UnitScan, unit_events
from dumpfilter.errors import BinlogError

from dumpfilter.codec.format_description import FormatDescription

if TYPE_CHECKING:
    from dumpfilter import _core
    from dumpfilter._core import RelayResult
    from dumpfilter.rules.keep_table import KeyRows
    from dumpfilter.slave.node import Slave

_HEARTBEAT_TYPES = frozenset({int(EventType.HEARTBEAT), int(EventType.HEARTBEAT_V2)})


class BatchWalk:
    """One batch `blob` (its scan `scan`) into the slave's relay log; `fmt` the format in force
    after it, `grouper` the units left open (none, from a faithful master)."""

    def __init__(self, slave: Slave, blob: bytes, scan: UnitScan) -> None:
        self.slave, self.blob, self.scan = slave, blob, scan
        self.fmt: FormatDescription | None = slave.fmt
        self.grouper = TransactionGrouper()
        self._declined: tuple[int, KeyRows | None] = (-1, None)  # where the relay run last stopped, with what keys

    def _raw_ok(self) -> bool:
        """Whether units may go to the relay log as they came (no rewrite, a relay file open,
        no unit half-grouped)."""
        slave = self.slave
        return slave.rename is None and slave.relay.file is not None and self.grouper.current is None

    def _run_ok(self) -> bool:
        """Whether the compiled relay run may write units: as `_raw_ok`, or renamed by it where the
        only renames are replicate-rewrite-db's (`Slave.names_applied`)."""
        slave = self.slave
        return (slave.rename is None or slave.names_applied is not None) and slave.relay.file is not None \
            and self.grouper.current is None

    def key_space(self, at: int) -> FormatDescription | None:
        return self.fmt if self.slave._keep_table.keys_enabled else None

    def statement_units(self, at: int, space: object) -> list[_core.StatementKey] | None:
        assert isinstance(space, FormatDescription)
        if not self.scan.units.may_hold_statements(at):
            return None
        return self.slave._scanner.statement_units(self.blob, at, space)

    def run(self, at: int, keys: KeyRows | None) -> RelayResult | None:
        """In bulk (the compiled relay run): lone Heartbeats counted and passed over, the placeholder
        policy's units for skipped ones written as their framing (GTID, XID) and its row units kept
        in part without their placeholders, fast units the slave's own rules keep whole, lone statements and (MIXED, STATEMENT) statement units its rules keep
        by their statements' keys (each decided once: issue #43) written as they came, up to the
        first unit that needs `step`. The lone statements' texts come back for the slave's own
        check: the keep answers the run used were fixed before it (per table name, for the batch),
        so checking them after the run's write (never committed if it fails) changes nothing."""
        slave = self.slave
        if (self._declined[0] == at and self._declined[1] is keys) or slave.after_unit is not None or not self._run_ok():
            return None  # (stopped here with these keys: the unit is Python's)
        names = slave.names_applied
        if names is not None and slave.rename is not None and self.fmt is None:
            return None  # (no format to read the names with: Python renames)
        run = slave._scanner.relay_run(self.blob, at, slave._keeps(), self.fmt, None if keys is None else keys.keep,
                                       None if names is None else names.map)
        self._declined = (run.next, keys)
        if run.out:
            slave.relay.write_raw(run.out)
        for text in run.lone:  # (the run hands back no framing word: the check keeps one whatever the rules)
            slave.trust.lone(text.db, text.sql, self.blob, self.scan.units, text.unit)
        c = slave.counters
        c.heartbeats += run.heartbeats
        c.placeholders += run.placeholders  # a placeholder unit's framing relayed without them
        c.rewritten += run.renamed
        c.events_relayed += run.events
        c.bytes_relayed += run.bytes
        slave.units_written += run.units
        return run

    def step(self, at: int) -> int:
        slave, blob, units = self.slave, self.blob, self.scan.units
        c = slave.counters
        raw_ok = self._raw_ok()
        lone = units.lone_statement(at, slave._scanner.checksum_len) if raw_ok else None
        if lone is not None:
            # A MariaDB GTID and one Query (DDL, standalone groups): its text decoded straight
            # from the bytes (codec.event.query_text) for the slave's own check, which sees it
            # (and its schema model replays it) as _unit's would; it goes to the relay log as
            # it came, as _unit writes what the master sent.
            query, end = lone
            text = query_text(blob, query, end, self.fmt) if self.fmt is not None else None
            if text is not None:
                start = units[at].start
                slave.trust.lone(*text, blob, units, at)
                slave.relay.write_raw(blob[start:end])
                slave.relayed(2, end - start)
                return at + 1
        lone_at = units.lone_control(at)
        if lone_at is not None and blob[lone_at + 4] in _HEARTBEAT_TYPES:
            # A lone Heartbeat (the master's mark for a skipped stretch, kind control, one
            # event): counted, nothing else, as _event does, without an Event for it.
            c.heartbeats += 1
            return at + 1
        if lone_at is not None and blob[lone_at + 4] == EventType.RAND:
            # Only a stretch (skipped transactions in a row as one event) is a RAND of its own: the
            # relay run writes a well-formed one whole, so this one is malformed, or came where no
            # relay log is open; a placeholder dropped here would lose its transactions' GTIDs.
            end = int.from_bytes(blob[lone_at + 13 : lone_at + 17], "little")
            raise BinlogError(f"the master sent a stretch of skipped transactions the slave cannot relay "
                              f"(ending at {end})", path="<stream>")
        rec = units[at]
        raw = blob[rec.start : rec.end]
        if raw_ok and rec.fast and slave._keeps_tables(self.scan.tables, rec):
            slave.relay.write_raw(raw)  # as it came
            slave.relayed(rec.events, len(raw))
            return at + 1
        events, self.fmt = unit_events(raw, rec.start, self.fmt, path="<stream>", stream_positions=True)
        if slave.names_applied is not None:  # the names the next runs rename
            slave.names_applied.learn(events)
        for event in events:
            slave._event(event, self.grouper)
        return at + 1
