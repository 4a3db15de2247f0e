"""The slave's own check of what the master sends, and who wins when the two disagree.

WL#2387 makes the master the authority for filtering: it decides each event with the slave's rules
and sends only what they keep. The slave re-checks what arrives with its own copy of the rules, as
a safety net, and relays what the master sent (what a real replica behind `master serve
--mysql-listen`, which checks nothing, applies). Two cases:

- A statement the master kept by a decision that read its schema model (a multi-table UPDATE whose
  trigger writes a kept table, a DROP TRIGGER of a trigger this replica has): the master lists it in
  DumpBatch.schema_decided. It holds every DDL statement of the binlog at that position; the slave
  only the DDL its rules keep (and a --schema of its own cannot hold what was skipped since), so
  its answer for such a statement is the weaker one. The slave keeps it and counts it
  (`master_schema_kept`), with or without a --schema of its own.
- Any other event the slave's rules drop is a disagreement: its rules and the master's differ, or
  the master is wrong. Never silent: `error` (the default) stops the slave with an error naming the
  statement and its master position before that batch is committed; `warn` relays it, counts it
  (`slave status` Check_Disagreements, the slave's metrics) and keeps the last one's text.

The other direction (the master skipped what the slave's rules keep) cannot be seen on the wire:
a skipped event is sent as a heartbeat, a placeholder or an empty transaction, never as itself.
`dumpfilter simulate` and `verify` compare against the whole stream and catch it there.

After a live CHANGE REPLICATION FILTER on the master (DumpBatch.filter_changed_at) the slave's copy
of the rules is stale: the check is off for the rest of the run, which says so once.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import TYPE_CHECKING

from dumpfilter.codec import Event, EventType, Transaction
from dumpfilter.errors import DumpFilterError, one_line
from dumpfilter.rules.transaction_filter import decided_events, framing_statement

if TYPE_CHECKING:
    from dumpfilter.codec.scanner import UnitRecords
    from dumpfilter.rules.decider import Decider
    from dumpfilter.slave.config import Counters
    from dumpfilter.v1.dump_pb2 import DumpBatch

ERROR, WARN = "error", "warn"
ON_DISAGREEMENT = (ERROR, WARN)
WARNINGS_TOLD = 10  # disagreements printed per run under `warn`; the rest are counted only
_LOG_POS = struct.Struct("<I")


class DisagreementError(DumpFilterError):
    """The slave's own rules drop an event the master sent (and did not mark as decided by its
    schema): the message names the statement and its master position."""

    mysql_errno = 1593  # ER_SLAVE_FATAL_ERROR: the replica's IO thread stops


class MasterTrust:
    """One slave's check of what it receives (see the module docstring) by its `rules` (its rule
    engine, with its schema model); `counters` gets `check_disagreements` and
    `master_schema_kept`; `note(text)` is the last disagreement's text; `say` prints."""

    def __init__(self, rules: Decider, mode: str, counters: Counters, note: Callable[[str], None],
                 say: Callable[[str], None]) -> None:
        if mode not in ON_DISAGREEMENT:
            raise ValueError(f"on_disagreement must be one of {ON_DISAGREEMENT}, not {mode!r}")
        self.rules = rules
        self.mode, self.counters, self.note, self.say = mode, counters, note, say
        self.file: str | None = None          # the master file of the events being checked
        self.marks: set[tuple[str, int]] = set()
        self.marked_ends: set[int] = set()    # the same, by end position alone (file not known)
        self.suspended = False
        self.told = 0

    # -- the stream around the events ----------------------------------------------------------
    def batch(self, batch: DumpBatch, start_file: str) -> None:
        """A batch arrives; `start_file` is the master file the stream stands in before it ("":
        not known yet, a first start from the first file)."""
        self.file, self.end_file = start_file or None, batch.position.file
        marks = batch.schema_decided
        self.marks = {(p.file, p.pos) for p in marks}
        self.marked_ends = {p.pos for p in marks}
        changed = batch.filter_changed_at
        if changed.file and not self.suspended:
            self.suspended = True
            self.say(f"the master's filters for this slave changed at {changed.file}:{changed.pos} (CHANGE "
                     "REPLICATION FILTER on the master): the slave's own check of what it receives, made of the "
                     "rules it registered, is off for the rest of this run")

    def scanned(self, rotates: bool) -> None:
        """The batch's scan found a real Rotate in it, or none: then every event of it is in the
        file the batch ends in (what a first start from the first file learns that way)."""
        if self.file is None and not rotates:
            self.file = self.end_file or None

    def control(self, event: Event) -> None:
        """A control event the relay log does not copy: a real Rotate names the next file."""
        if event.type_code == EventType.ROTATE:
            self.file = event.rotate[1]

    # -- the check ----------------------------------------------------------------------------
    def unit(self, unit: Transaction) -> None:
        """A transaction or statement group, as the master sent it (the slave relays it so): each
        statement and Table_map the slave's rules drop is judged (`_judge`). Every statement is
        asked, the check suspended or not: its schema model replays the DDL it sees."""
        for event, at in decided_events(unit):
            if event.is_query:
                sql, db = event.sql or "", event.db
                if self.rules.statement_kept(sql, db) or self.suspended:
                    continue
                what = f"`{one_line(sql, 200)}`" + (f" (default database {db!r})" if db else "")
            else:
                _, db, table = event.table_map
                if self.rules.table_kept(db, table) or self.suspended:
                    continue
                what = f"the rows of {db}.{table} (its Table_map)"
            self._judge(at.pos + at.size, at.pos, what, unit.gtid)

    def lone(self, db: str, sql: str, blob: bytes, units: UnitRecords, k: int) -> None:
        """A GTID-and-one-statement unit the slave wrote from its bytes (unit `k` of `units`, a
        scan of `blob`), checked by its text (the check's schema model replays it)."""
        if framing_statement(sql) or self.rules.statement_kept(sql, db) or self.suspended:
            return
        rec = units[k]
        end = _LOG_POS.unpack_from(blob, rec.last + 13)[0]
        pos = end - (rec.end - rec.last)
        self._judge(end, pos, f"`{one_line(sql, 200)}`" + (f" (default database {db!r})" if db else ""),
                    f"{rec.gtid_domain}-{rec.gtid_server}-{rec.gtid_seq}")

    # -- one event the check drops -----------------------------------------------------------
    def _judge(self, end: int, pos: int, what: str, gtid: str | None) -> None:
        marked = (self.file, end) in self.marks if self.file else end in self.marked_ends
        if marked:
            self.counters.master_schema_kept += 1
            return
        where = f"{self.file or 'the master binlog'}:{pos}" + (f" (GTID {gtid})" if gtid else "")
        message = (f"the master sent {what} at {where}, which this slave's own rules skip: the two rule sets "
                   "disagree")
        if self.mode == ERROR:
            raise DisagreementError(f"{message}. The master is the authority for filtering; `dumpfilter explain` "
                                    "tells why the rules skip it, and `slave run --on-disagreement warn` relays "
                                    "what the master sends and counts each such event")
        self.counters.check_disagreements += 1
        self.note(message)
        if self.told < WARNINGS_TOLD:
            self.told += 1
            self.say(f"warning: {message}" + ("" if self.told < WARNINGS_TOLD else
                                              " (further disagreements are counted in `slave status` only)"))
