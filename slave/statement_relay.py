"""The slave's relay of statement units by key (issue #43, StatementRelay, held by
slave.node.Slave): the statement units (a GTID, single-table DML Queries, an XID) of a MIXED or
STATEMENT stream that the slave's own rules keep whole are written to the relay log as they came,
by the core (`_core.relay_statements`), each statement answered from its key's keep byte
(`rules.statement_keys.StatementKeeps`: each key decided once, every statement accounted in the
rule engine's counters), without an Event or a TransactionFilter per unit. A unit with a
statement the rules drop, or any other unit, ends the run: the slave's Python path takes it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from dumpfilter.rules.statement_keys import StatementKeeps

if TYPE_CHECKING:
    from dumpfilter.codec.format_description import FormatDescription
    from dumpfilter.codec.scanner import Scanner
    from dumpfilter.rules.decider import Decider
    from dumpfilter.slave.config import Counters
    from dumpfilter.slave.relay_log import RelayLog


class StatementRelay:
    """One slave's statement relay: its keep bytes per key of its scanner (which lives as long as
    the slave, as do the key ids)."""

    __slots__ = ("keeps",)

    def __init__(self, engine: Decider) -> None:
        self.keeps = StatementKeeps(engine)

    def run(self, scanner: Scanner, relay: RelayLog, counters: Counters, blob: bytes, i: int,
            fmt: FormatDescription) -> tuple[int, int]:
        """Writes the statement units of the scanner's last scan (of `blob`) from `i` on that the
        rules keep whole, and the Heartbeats between them (counted), to `relay`; a key met for
        the first time is decided and the run goes on. Returns (the first unit not written, the
        units written)."""
        keeps = self.keeps
        written = 0
        while True:
            run = scanner.relay_statements(blob, i, fmt, keeps.keep_bytes())
            if run.out:
                relay.write_raw(run.out)
            keeps.learn(run.new_keys)
            keeps.used(run.key_uses, run.units, run.statements)
            counters.heartbeats += run.heartbeats
            counters.events_relayed += run.events
            counters.bytes_relayed += run.bytes
            written += run.units
            i = run.next
            if not run.need_keys:
                return i, written
