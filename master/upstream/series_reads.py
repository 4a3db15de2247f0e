"""What the mirror (binlog_mirror.BinlogMirror) reads back: of a series file on disk, its
server_id and its Format_description's size (`first_header`; its format: binlogs.files.file_format);
of a Gtid_list or Previous_gtids event, the set it carries, typed as its flavor's."""

from __future__ import annotations

import struct
from pathlib import Path
from typing import TypeVar

from dumpfilter.codec import Event
from dumpfilter.codec.gtid import MariadbGtidList, MysqlGtidSet

_Set = TypeVar("_Set", MariadbGtidList, MysqlGtidSet)


def gtid_set(event: Event, flavor: type[_Set]) -> _Set:
    """The set a MariaDB Gtid_list (`flavor`: MariadbGtidList) or a MySQL Previous_gtids
    (MysqlGtidSet) event carries."""
    found = event.gtid_set
    assert isinstance(found, flavor), f"event type {event.type_code} carries no {flavor.__name__}"
    return found


def first_header(path: Path) -> tuple[int, int]:
    """The server_id and event size in the common header of a file's first event (its
    Format_description); (0, 0) for a file too short to hold one."""
    with open(path, "rb") as f:
        head = f.read(4 + 19)
    return struct.unpack_from("<II", head, 9) if len(head) == 23 else (0, 0)
