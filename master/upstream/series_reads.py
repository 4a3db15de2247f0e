"""What the mirror (binlog_mirror.BinlogMirror) reads back: of a series file on disk, its
server_id and its Format_description's size (`first_header`; its format: binlogs.files.file_format);
of a Gtid_list or Previous_gtids event, the set it carries, typed as its flavor's; and of a run of
events, the GTID state at the end of its last whole unit (`UnitGtids`)."""

from __future__ import annotations

import struct
from pathlib import Path
from typing import TypeVar

from dumpfilter.codec import Event, EventType
from dumpfilter.codec.gtid import MariadbGtidList, MysqlGtidSet
from dumpfilter.codec.transactions import TransactionGrouper

_Set = TypeVar("_Set", MariadbGtidList, MysqlGtidSet)
MariadbState = dict[tuple[int, int], int]  # (domain, server_id) -> the last seq_no: MariaDB's binlog state


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


class UnitGtids:
    """The GTID state at the end of the last whole unit of the events `push`ed, in order (the
    mirror's stream, its series read back from disk, the head of a primary file read up to a
    position): MariaDB's binlog state, which a Gtid_list sets whole, and MySQL's executed set,
    which a Previous_gtids joins. A unit's GTID joins once its unit is whole, as a server counts
    it: a unit cut short holds no transaction."""

    def __init__(self) -> None:
        self.mariadb: MariadbState = {}
        self.mysql = MysqlGtidSet()
        self.joined = 0  # units whose GTID joined
        self.drop_open()

    def drop_open(self) -> None:
        """The unit being grouped is cut off (its bytes go; a primary sends it again from its
        start): its GTID joins nothing."""
        self.grouper = TransactionGrouper()
        self.mariadb_gtid: tuple[tuple[int, int], int] | None = None
        self.mysql_gtid: tuple[str, str, int] | None = None  # (source, tag, gno), as MysqlGtidSet holds one

    def push(self, event: Event) -> bool:
        """The next event; True when it ends a unit."""
        self.grouper.push(event)
        kind = event.type_code
        if kind == EventType.MARIADB_GTID_LIST:
            self.mariadb = dict(gtid_set(event, MariadbGtidList).gtids)
        elif kind == EventType.MARIADB_GTID:
            self.mariadb_gtid = ((event.gtid_info.domain, event.server_id), event.gtid_info.gno)
        elif kind == EventType.PREVIOUS_GTIDS:
            for (source, tag), intervals in gtid_set(event, MysqlGtidSet).intervals.items():
                for start, end in intervals:
                    self.mysql.add_interval(source, start, end, tag)
        elif kind in (EventType.GTID, EventType.GTID_TAGGED):
            self.mysql_gtid = (event.gtid_info.source, event.gtid_info.tag, event.gtid_info.gno)
        if self.grouper.current is not None:
            return False
        if self.mariadb_gtid is not None:
            self.mariadb[self.mariadb_gtid[0]] = self.mariadb_gtid[1]
            self.joined += 1
        if self.mysql_gtid is not None:
            source, tag, gno = self.mysql_gtid
            self.mysql.add(source, gno, tag)
            self.joined += 1
        self.mariadb_gtid = self.mysql_gtid = None
        return True
