"""What the mirror (binlog_mirror.BinlogMirror) reads back: of a series file on disk, its
server_id and its Format_description's size (its format: binlogs.files.file_format); of a Gtid_list
or Previous_gtids event, the set it carries, typed as its flavor's."""

from __future__ import annotations

import struct
from pathlib import Path

from dumpfilter.codec import Event
from dumpfilter.codec.gtid import MariadbGtidList, MysqlGtidSet


def mariadb_gtid_list(event: Event) -> MariadbGtidList:
    """The set a MariaDB Gtid_list event carries."""
    found = event.gtid_set
    assert isinstance(found, MariadbGtidList), f"event type {event.type_code} carries no Gtid_list"
    return found


def mysql_gtid_set(event: Event) -> MysqlGtidSet:
    """The set a MySQL Previous_gtids event carries."""
    found = event.gtid_set
    assert isinstance(found, MysqlGtidSet), f"event type {event.type_code} carries no Previous_gtids"
    return found


def file_server_id(path: Path) -> int:
    with open(path, "rb") as f:
        head = f.read(4 + 19)
    server_id: int = struct.unpack_from("<I", head, 9)[0] if len(head) == 23 else 0
    return server_id


def fde_size(path: Path) -> int:
    with open(path, "rb") as f:
        head = f.read(4 + 19)
    size: int = struct.unpack_from("<I", head, 13)[0] if len(head) == 23 else 0
    return size


