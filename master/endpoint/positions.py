"""A real replica's binlog positions: where its IO thread counts itself in the master's binlog as
it queues the events it is sent (Read_Master_Log_Pos) and, once the stream is caught up after a
skipped stretch, the events that bring the replica to the master's end (the skip policy's
`replica_tail`), as it stands behind a real master."""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from dumpfilter.codec import Event, EventType, read_format_description
from dumpfilter.codec.format_description import FormatDescription
from dumpfilter.codec.gtid import MariadbGtidList
from dumpfilter.errors import DumpFilterError
from dumpfilter.binlogs import open_binlog
from dumpfilter.binlogs.files import file_size
from dumpfilter.binlogs.gtid_start import file_gtid_list, gtid_position
from dumpfilter.skip_policy import MARIADB_FLAG_IGN_GTIDS, SkipPolicy

if TYPE_CHECKING:
    from dumpfilter.master.model import Batch

# The events counted one by one; of the others, only a batch's last moves the count.
_NOTED = frozenset({EventType.ROTATE, EventType.MARIADB_GTID, EventType.MARIADB_GTID_LIST, EventType.HEARTBEAT,
                    EventType.HEARTBEAT_V2, EventType.FORMAT_DESCRIPTION})


class ReplicaCount:
    """Follows what one replica is sent as its IO thread counts it: a Rotate sets the file and
    position, an event with a log_pos moves the position there, a heartbeat or an event with
    log_pos 0 moves nothing. Also the MariaDB GTIDs it has: its connect state, the GTIDs and
    Gtid_lists it was sent (`events`)."""

    def __init__(self, binlog_dir: Path, policy: SkipPolicy, *, file: str, pos: int, gtid_state: str | None,
                 fmt: FormatDescription | None, server_id: int, records_gtids: bool = True) -> None:
        self.binlog_dir, self.policy, self.fmt, self.server_id = binlog_dir, policy, fmt, server_id
        # A replica's SQL thread records the skipped tail's GTIDs from a Gtid_list flagged
        # FLAG_IGN_GTIDS (see `tail`); a client that did not register as a replica is sent the
        # list without them (its flag word read as a count fails python-mysql-replication).
        self.records_gtids = records_gtids
        self.file, self.pos = file, pos
        self.start_file = file
        self.has: dict[int, int] = {}  # domain -> the highest sequence number the replica has
        for domain, _server, seq in _mariadb_gtids(gtid_state or ""):
            self._has(domain, seq)
        self.stop_at: tuple[str, int] | None = None  # where a Stop began whose tail the next Rotate sends

    def _has(self, domain: int, seq: int) -> None:
        if seq > self.has.get(domain, -1):
            self.has[domain] = seq

    def events(self, batch: Batch, events: Iterable[Event]) -> Iterator[Event]:
        """A batch's events as the replica is sent them, passed through; when the batch is caught
        up past what the replica counts, the skip policy's `replica_tail` after them."""
        last = None  # the last event whose log_pos the replica moves to, unless one noted follows
        noted = _NOTED
        for event in events:
            if event.type_code == EventType.STOP:  # never counted: the tail before it (stop_tail)
                yield from self.stop_tail(last, event, batch)
                last = None
            elif event.type_code in noted:
                if event.type_code == EventType.ROTATE:
                    if last is not None:
                        self._moved(last)
                        last = None
                    yield from self.rotate_tail(event, batch)
                if self._note(event):
                    last = None
            else:
                last = event
            yield event
        if last is not None:
            self._moved(last)
        if batch.caught_up and batch.position is not None:
            file, end = batch.position
            if file == self.file:
                yield from self.owed(end, batch.gtid_state)
                self.pos = max(self.pos, end)

    def rotate_tail(self, rotate: Event, batch: Batch) -> list[Event]:
        """A Rotate taking a MariaDB replica out of its file after a stretch the rules skipped
        there: the GTIDs of that stretch, as at a caught-up end (`tail`), before it. Without them
        the replica's gtid_slave_pos stayed at its last kept transaction while the primary's
        gtid_binlog_pos was past the skipped ones, and a replica repointed at the primary by
        slave_pos got them again. The stretch ends where the file's own Rotate starts, or where
        the file ends (an artificial Rotate after a Stop or nothing); the GTID state there is the
        next file's Gtid_list (a batch may go on into that file: its own state is past it). A
        server writes its Rotate before it creates the next file: a batch that ends at that
        Rotate (nothing of the next file yet) has the state there itself."""
        if self.fmt is None or self.fmt.flavor != "mariadb" or not self.records_gtids:
            return []
        pos, file = rotate.rotate
        if file == self.file:
            return []
        try:
            if rotate.log_pos > rotate.size:
                end = rotate.log_pos - rotate.size
            elif self.stop_at is not None and self.stop_at[0] == self.file:
                end = self.stop_at[1]
            else:
                end = file_size(self.binlog_dir / self.file, 0)
        except (DumpFilterError, OSError, ValueError):
            return []
        try:
            listed = file_gtid_list(self.binlog_dir / file)
            state = gtid_position(listed.gtids) if isinstance(listed, MariadbGtidList) else None
        except (DumpFilterError, OSError, ValueError):
            state = None
        if state is None and batch.position == (file, pos):
            state = batch.gtid_state
        if state is None:  # the next caught-up end sends them (`owed`): its state is past them
            return []
        return self.owed(end, state, gtids_only=True)  # else its position moves with the Rotate

    def owed(self, end: int, walked: str, *, gtids_only: bool = False) -> list[Event]:
        """The skip policy's tail (`tail`) at `end` in the replica's file, noted as sent, when
        the replica is behind `end` or lacks GTIDs the stream walked past; else nothing. The
        second happens with the position already at the end: a Binlog_checkpoint the server
        wrote after skipped transactions is sent as it is and moves the replica there, yet a
        replica filtering for itself records their GTIDs. Dated at the replica's position when
        that is past `end` (a Gtid_list moves a replica's executed position to its log_pos)."""
        tail = self.tail(self.file, max(end, self.pos), walked)
        if not any(_lists_gtids(e) for e in tail) and (gtids_only or end <= self.pos):
            return []
        for event in tail:
            self._note(event)
        return tail

    def framed(self, moved: int | None, gtids: list[tuple[int, int]]) -> None:
        """What `events` counts of a batch the core framed (`dump.framed_batch`): the position it
        moved to, if any, and the highest sequence number of each domain's GTIDs sent."""
        if moved is not None:
            self.pos = moved
        for domain, seq in gtids:
            self._has(domain, seq)

    def stop_tail(self, last: Event | None, stop: Event, batch: Batch) -> list[Event]:
        """A Stop event (the primary shut down) is never counted by a replica's IO thread (slave.cc
        queue_event: not even mi->master_log_pos), so a replica filtering for itself ends where the
        Stop starts. One behind a skipped stretch is brought there first, as at a caught-up end;
        past the Stop there is nothing more to count (its file ends there). When the batch goes on
        into a later file, that file's Rotate moves the replica instead."""
        if last is not None:
            self._moved(last)
        start = stop.log_pos - stop.size if stop.log_pos > stop.size else 0
        here = batch.position is not None and batch.position[0] == self.file
        if not here:  # the next file's Rotate sends the tail, with the state the Stop left (rotate_tail)
            self.stop_at = (self.file, start)
            return [stop]
        tail = self.owed(start, batch.gtid_state)
        self.pos = max(self.pos, stop.log_pos)
        return [*tail, stop]

    def _moved(self, event: Event) -> None:
        if event.log_pos:
            self.pos = event.log_pos

    def _note(self, event: Event) -> bool:
        """A Rotate, a GTID, a Gtid_list, a heartbeat or an FDE; True when it set the position."""
        kind = event.type_code
        if kind == EventType.ROTATE:
            self.pos, self.file = event.rotate
            return True
        if kind == EventType.MARIADB_GTID:
            info = event.gtid_info
            self._has(info.domain, info.gno)
        elif kind == EventType.MARIADB_GTID_LIST and (self.file == self.start_file or _lists_gtids(event)):
            # A replica's SQL thread records a Gtid_list's GTIDs only when it is flagged
            # FLAG_IGN_GTIDS (Gtid_list_log_event::do_apply_event). A file's own list names what
            # came before the file: in the file the replica started in, history it has or never
            # asked for; in a later one, what this stream walked past, skipped or sent.
            try:
                listed = MariadbGtidList.decode(event.body).gtids
            except struct.error:
                listed = {}  # a list shorter than its count: the replica reports it, nothing to count
            for (domain, _server), seq in listed.items():
                self._has(domain, seq)
        elif kind != EventType.FORMAT_DESCRIPTION or not event.log_pos:
            return False  # a heartbeat, or the FDE a dump sends first (log_pos 0): not counted
        self._moved(event)
        return True

    def tail(self, file: str, end: int, walked: str) -> list[Event]:
        """The skip policy's events for a skipped tail ending at `end`; `walked` is the stream's
        GTID state (the last GTID per domain and server it walked past, sent or not)."""
        flavor = self.fmt.flavor if self.fmt is not None else "mysql"
        skipped: dict[tuple[int, int], int] = {}
        if flavor == "mariadb" and self.records_gtids:
            last: dict[int, tuple[int, int]] = {}  # within a domain, sequence numbers grow
            for domain, server, seq in _mariadb_gtids(walked):
                if seq > last.get(domain, (0, -1))[1]:
                    last[domain] = (server, seq)
            skipped = {(domain, server): seq for domain, (server, seq) in last.items()
                       if seq > self.has.get(domain, -1)}
        return self.policy.replica_tail(flavor=flavor, file=file, end=end, gtids=skipped, fmt=self.fmt,
                            server_id=self.server_id, fde=None if flavor == "mariadb" else self._fde(file))

    def _fde(self, file: str) -> Event | None:
        path = self.binlog_dir / file
        try:
            with open_binlog(path) as f:
                return read_format_description(f, str(path))[0]
        except (DumpFilterError, OSError):
            return None


def _lists_gtids(event: Event) -> bool:
    """Whether `event` is a Gtid_list flagged FLAG_IGN_GTIDS: GTIDs a replica's SQL thread records."""
    if event.type_code != EventType.MARIADB_GTID_LIST:
        return False
    try:
        return bool(MariadbGtidList.decode(event.body).flags << 28 & MARIADB_FLAG_IGN_GTIDS)
    except struct.error:
        return False


def _mariadb_gtids(text: str) -> Iterator[tuple[int, int, int]]:
    """(domain, server_id, seq_no) of each `domain-server-seq` in a MariaDB GTID state's text
    (nothing of a MySQL GTID set's)."""
    for part in filter(None, (p.strip() for p in text.split(","))):
        fields = part.split("-")
        if len(fields) == 3 and all(f.isdigit() for f in fields):
            yield int(fields[0]), int(fields[1]), int(fields[2])


class WithoutHeartbeats(SkipPolicy):
    """`policy` for a client that set no @master_heartbeat_period (mariadb-binlog, CDC readers):
    a server sends such a client no heartbeat (sql_repl.cc sends them only at the period the
    client asked for), and mariadb-binlog cannot read one ("Found invalid event in binary log").
    A skipped stretch is then only a hole in the positions, which these clients follow. (The tail
    after a skipped stretch, `replica_tail`, is SkipPolicy's, the same for every policy.)"""

    def __init__(self, policy: SkipPolicy) -> None:
        self.policy = policy
        self.name = policy.name  # type: ignore[misc]

    def for_replica(self, event: Event, *, gtid_log_pos: int | None, end: int | None, server_id: int) -> Event | None:
        if event.type_code in (EventType.HEARTBEAT, EventType.HEARTBEAT_V2):
            return None
        return self.policy.for_replica(event, gtid_log_pos=gtid_log_pos, end=end, server_id=server_id)
