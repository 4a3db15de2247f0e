"""@@binlog_row_metadata as the served binlog shows it: the master serving a directory knows no
primary's variables, but each Table_map event carries the optional metadata the primary's setting
wrote (FULL: the column names among them; MINIMAL: signedness, charsets; NO_LOG: none). Clients
ask it before they read rows: python-mysql-replication names the columns from the Table_map only
when the server says FULL, and calls them UNKNOWN_COL0... otherwise."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from dumpfilter.binlogs import open_binlog
from dumpfilter.codec import EventType
from dumpfilter.codec.constants import HEADER_LEN
from dumpfilter.codec.packing import read_lenenc
from dumpfilter.codec.reader import BinlogReader
from dumpfilter.errors import DumpFilterError

COLUMN_NAME = 4          # the optional metadata field FULL alone writes (log_event.h, Table_map_log_event)
LOOK_BYTES = 64 << 20    # what one look reads at most, newest file first, before it answers without a Table_map


def table_map_metadata(body: bytes, id_len: int) -> str:
    """FULL, MINIMAL or NO_LOG from one Table_map event's body (its checksum cut off)."""
    at = id_len + 2                                # table id, flags
    at += 1 + body[at] + 1                         # database name, NUL
    at += 1 + body[at] + 1                         # table name, NUL
    columns, at = read_lenenc(body, at)
    at += columns                                  # column types
    length, at = read_lenenc(body, at)
    at += length + (columns + 7) // 8              # metadata, null bitmap
    fields = set()
    while at < len(body):
        fields.add(body[at])
        length, at = read_lenenc(body, at + 1)
        at += length
    return "FULL" if COLUMN_NAME in fields else "MINIMAL" if fields else "NO_LOG"


def binlog_row_metadata(paths: Iterable[Path], budget: int = LOOK_BYTES) -> str | None:
    """The setting the first Table_map of the newest file that has one (of `paths`, oldest first)
    was written with, reading at most `budget` bytes in all; None when none is found (a binlog
    without row events, unreadable files)."""
    for path in reversed(list(paths)):
        try:
            with open_binlog(path) as f:
                reader = BinlogReader(f, str(path), verify_checksums=False)
                for event in reader:
                    if event.type_code != EventType.TABLE_MAP:
                        continue
                    fmt = event.fmt
                    assert fmt is not None, "a reader's events carry the format in force"
                    id_len = 4 if fmt.post_header_len(EventType.TABLE_MAP) == 6 else 6
                    return table_map_metadata(event.raw[HEADER_LEN:len(event.raw) - event.checksum_len], id_len)
                budget -= reader.position
        except (DumpFilterError, OSError, ValueError, IndexError):
            continue
        if budget <= 0:
            return None
    return None
