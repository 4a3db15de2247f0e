"""The skip policies: what the master sends in place of what a slave's filters drop (WL#2387), in one
vocabulary for the master, the slave, the wire, the lab and the CLI.

* heartbeat: nothing, then one heartbeat that moves the slave's position past the skipped stretch;
* placeholder: each dropped event as a RAND_EVENT of the same log_pos (MaxScale binlogfilter's
  replacement), inside the transaction's own framing;
* empty-transaction: the GTID with an empty body (MySQL 5.7's way for a filtered transaction).

And what a skipped stretch at the binlog's end becomes for a real replica (replica_tail).
"""

from __future__ import annotations

import struct

from dumpfilter.codec import Event, EventType
from dumpfilter.codec.constants import (HEADER_LEN, LOG_EVENT_ARTIFICIAL_F, LOG_EVENT_BINLOG_IN_USE_F,
                                        LOG_EVENT_SKIP_REPLICATION_F)
from dumpfilter.codec.encode import build_event
from dumpfilter.codec.gtid import MariadbGtidList

MARIADB_FLAG_IGN_GTIDS = 1 << 29  # Gtid_list_log_event::FLAG_IGN_GTIDS: the SQL thread records the GTIDs listed

HEARTBEAT, PLACEHOLDER, EMPTY_TRANSACTION = "heartbeat", "placeholder", "empty-transaction"
SKIP_POLICIES = (HEARTBEAT, PLACEHOLDER, EMPTY_TRANSACTION)


def placeholder(event: Event) -> Event:
    """The RAND_EVENT sent in place of `event`."""
    # MaxScale binlogfilter's replacement: RAND_EVENT, seeds = original size and type, server_id 0,
    # timestamp 0, LOG_EVENT_SKIP_REPLICATION_F; we keep the original log_pos (newer MaxScale).
    return build_event(EventType.RAND, struct.pack("<QQ", event.size, event.type_code), fmt=event.fmt,
                       server_id=0, timestamp=0, log_pos=event.log_pos, flags=LOG_EVENT_SKIP_REPLICATION_F)


def is_placeholder(event: Event) -> bool:
    """A placeholder (a master-made RAND_EVENT), which a slave drops instead of relaying."""
    return (event.type_code == EventType.RAND and event.server_id == 0
            and bool(event.flags & LOG_EVENT_SKIP_REPLICATION_F))


def replica_tail(policy: str, *, flavor: str, file: str, end: int, gtids: dict[tuple[int, int], int], fmt,
                 server_id: int, fde: Event | None = None) -> list[Event]:
    """What a skipped stretch at the end of the binlog becomes for a real MySQL or MariaDB replica,
    once its stream is caught up there: the events that bring the replica's Read_Master_Log_Pos
    and Exec_Master_Log_Pos to `end` in `file`, as they stand behind a real master. Sent once per
    idle point after such a stretch, never per skipped transaction.

    Every policy ends up here the same way: under the heartbeat policy for any skipped tail (a
    replica's IO thread counts a heartbeat, never moves its position on one: slave.cc queue_event,
    and MySQL's only under GTID auto-positioning); under placeholder and empty-transaction only
    for skipped units they cannot stand in for (no GTID, nothing to frame).

    - MariaDB: a Gtid_list event dated at `end`, as MariaDB's own dump thread sends after event
      groups it skipped for a GTID start (sql_repl.cc, send_fake_gtid_list): the IO thread moves
      its position to the event's log_pos, the SQL thread its executed position. `gtids` are the
      skipped tail's last GTID per domain that the replica was never sent: flagged
      FLAG_IGN_GTIDS, the SQL thread records them in gtid_slave_pos as it does for the event
      groups its own IO thread ignored (slave.cc, the Gtid_list it writes for rli->ign_gtids),
      so gtid_slave_pos reaches what a replica filtering for itself records (it commits a
      filtered-out group's GTID too).
    - MySQL: what a dump thread sends when it starts, an artificial Rotate to `file` at `end`
      (process_io_rotate sets the IO position; Rotate_log_event::do_update_pos the executed
      one) and the file's Format_description (log_pos 0: not counted; created 0: the replica's
      temporary tables stay), which a replica's IO thread expects after a Rotate."""
    del policy  # the same for the three policies today (see above); each will say its own
    if flavor == "mariadb":
        listed = MariadbGtidList(dict(gtids), flags=MARIADB_FLAG_IGN_GTIDS >> 28 if gtids else 0)
        return [build_event(EventType.MARIADB_GTID_LIST, listed.encode(), fmt=fmt, server_id=server_id, timestamp=0,
                            log_pos=end, flags=LOG_EVENT_ARTIFICIAL_F)]
    rotate = build_event(EventType.ROTATE, struct.pack("<Q", end) + file.encode("utf-8"), fmt=fmt,
                         server_id=server_id, timestamp=0, log_pos=0, flags=LOG_EVENT_ARTIFICIAL_F)
    if fde is None:
        return [rotate]
    created_at = HEADER_LEN + 2 + 50  # binlog_version, server_version, then `created`
    body = fde.raw[HEADER_LEN:created_at] + b"\0\0\0\0" + fde.raw[created_at + 4:len(fde.raw) - fde.checksum_len]
    return [rotate, fde.with_body(body).with_header(log_pos=0, flags=fde.flags & ~LOG_EVENT_BINLOG_IN_USE_F)]
