"""The skip policies: what the master sends in place of what a slave's filters drop (WL#2387), in one
vocabulary for the master, the slave, the wire, the lab and the CLI.

* heartbeat: nothing, then one heartbeat that moves the slave's position past the skipped stretch;
* placeholder: each dropped event as a RAND_EVENT of the same log_pos (MaxScale binlogfilter's
  replacement), inside the transaction's own framing;
* empty-transaction: the GTID with an empty body (MySQL 5.7's way for a filtered transaction).
"""

from __future__ import annotations

import struct

from dumpfilter.codec import Event, EventType
from dumpfilter.codec.constants import LOG_EVENT_SKIP_REPLICATION_F
from dumpfilter.codec.encode import build_event

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
