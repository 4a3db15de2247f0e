"""Event type codes, header flags and fixed sizes of binlog v4 (MySQL 5.0-9.x, MariaDB 10.x-11.x)."""

from __future__ import annotations

from enum import IntEnum

MAGIC = b"\xfebin"
HEADER_LEN = 19
CHECKSUM_LEN = 4

# Format_description checksum algorithm byte.
CHECKSUM_OFF = 0
CHECKSUM_CRC32 = 1


class EventType(IntEnum):
    UNKNOWN = 0
    START_V3 = 1
    QUERY = 2
    STOP = 3
    ROTATE = 4
    INTVAR = 5
    LOAD = 6
    SLAVE = 7
    CREATE_FILE = 8
    APPEND_BLOCK = 9
    EXEC_LOAD = 10
    DELETE_FILE = 11
    NEW_LOAD = 12
    RAND = 13
    USER_VAR = 14
    FORMAT_DESCRIPTION = 15
    XID = 16
    BEGIN_LOAD_QUERY = 17
    EXECUTE_LOAD_QUERY = 18
    TABLE_MAP = 19
    PRE_GA_WRITE_ROWS = 20
    PRE_GA_UPDATE_ROWS = 21
    PRE_GA_DELETE_ROWS = 22
    WRITE_ROWS_V1 = 23
    UPDATE_ROWS_V1 = 24
    DELETE_ROWS_V1 = 25
    INCIDENT = 26
    HEARTBEAT = 27
    IGNORABLE = 28
    ROWS_QUERY = 29
    WRITE_ROWS = 30
    UPDATE_ROWS = 31
    DELETE_ROWS = 32
    GTID = 33
    ANONYMOUS_GTID = 34
    PREVIOUS_GTIDS = 35
    TRANSACTION_CONTEXT = 36
    VIEW_CHANGE = 37
    XA_PREPARE = 38
    PARTIAL_UPDATE_ROWS = 39
    TRANSACTION_PAYLOAD = 40
    HEARTBEAT_V2 = 41
    GTID_TAGGED = 42
    # MariaDB
    ANNOTATE_ROWS = 160
    BINLOG_CHECKPOINT = 161
    MARIADB_GTID = 162
    MARIADB_GTID_LIST = 163
    START_ENCRYPTION = 164
    QUERY_COMPRESSED = 165
    WRITE_ROWS_COMPRESSED_V1 = 166
    UPDATE_ROWS_COMPRESSED_V1 = 167
    DELETE_ROWS_COMPRESSED_V1 = 168
    WRITE_ROWS_COMPRESSED = 169
    UPDATE_ROWS_COMPRESSED = 170
    DELETE_ROWS_COMPRESSED = 171


def type_name(code: int) -> str:
    """The event type's name, or `UNKNOWN_<code>` for a type this codec does not know."""
    try:
        return EventType(code).name
    except ValueError:
        return f"UNKNOWN_{code}"


# Header flags (common header offset 17).
LOG_EVENT_BINLOG_IN_USE_F = 0x0001
LOG_EVENT_SUPPRESS_USE_F = 0x0008
LOG_EVENT_ARTIFICIAL_F = 0x0020
LOG_EVENT_IGNORABLE_F = 0x0080
LOG_EVENT_SKIP_REPLICATION_F = 0x8000

# Rows event flags.
STMT_END_F = 0x0001

ROWS_EVENT_TYPES = frozenset(
    {
        EventType.PRE_GA_WRITE_ROWS, EventType.PRE_GA_UPDATE_ROWS, EventType.PRE_GA_DELETE_ROWS,
        EventType.WRITE_ROWS_V1, EventType.UPDATE_ROWS_V1, EventType.DELETE_ROWS_V1,
        EventType.WRITE_ROWS, EventType.UPDATE_ROWS, EventType.DELETE_ROWS,
        EventType.PARTIAL_UPDATE_ROWS,
        EventType.WRITE_ROWS_COMPRESSED_V1, EventType.UPDATE_ROWS_COMPRESSED_V1,
        EventType.DELETE_ROWS_COMPRESSED_V1, EventType.WRITE_ROWS_COMPRESSED,
        EventType.UPDATE_ROWS_COMPRESSED, EventType.DELETE_ROWS_COMPRESSED,
    }
)
QUERY_EVENT_TYPES = frozenset({EventType.QUERY, EventType.QUERY_COMPRESSED})
MYSQL_GTID_EVENT_TYPES = frozenset({EventType.GTID, EventType.ANONYMOUS_GTID, EventType.GTID_TAGGED})
GTID_EVENT_TYPES = MYSQL_GTID_EVENT_TYPES | {EventType.MARIADB_GTID}
# Events that parametrise the next Query and must travel with it.
STATEMENT_CONTEXT_TYPES = frozenset(
    {EventType.INTVAR, EventType.RAND, EventType.USER_VAR, EventType.BEGIN_LOAD_QUERY, EventType.APPEND_BLOCK}
)
# Every type this codec knows; a type outside it passes through only if flagged IGNORABLE.
KNOWN_TYPES = frozenset(int(t) for t in EventType)

# MariaDB GTID event flags2.
MARIADB_FL_STANDALONE = 0x01
