"""One binlog event as a lazy view over its bytes: the header is unpacked once, and only the
fields a decision needs (db, table, SQL text, table id, GTID) are decoded, on demand.
Row images are never decoded."""

from __future__ import annotations

import functools
import struct
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, Self, TypeVar, overload

from dumpfilter.codec import gtid as gtids
from dumpfilter.codec.checksum import with_crc
from dumpfilter.errors import BinlogError, MalformedEventError
from dumpfilter.codec.constants import (
    HEADER_LEN,
    MARIADB_FL_STANDALONE,
    MYSQL_GTID_EVENT_TYPES,
    QUERY_EVENT_TYPES,
    ROWS_EVENT_TYPES,
    EventType,
    type_name,
)
from dumpfilter.codec.format_description import FormatDescription
from dumpfilter.codec.malformed import problem as malformed_problem
from dumpfilter.codec.packing import mariadb_uncompress, read_lenenc

HEADER = struct.Struct("<IBIIIH")  # timestamp, type, server_id, event_size, log_pos, flags
_U16 = struct.Struct("<H")
_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")
# Decoded (db, table) by the raw name bytes of a Table_map: a walk meets the same few names
# again and again. Bounded; cleared when full.
_TABLE_NAMES: dict[bytes, tuple[str, str]] = {}
_TABLE_NAMES_MAX = 1 << 16
_QUERY_POST = struct.Struct("<IIBHH")  # thread_id, exec_time, db_len, error_code, status_vars_len
_RAND_SEEDS = struct.Struct("<QQ")  # RAND_EVENT: seed1, seed2
# A common header, unpacked: (timestamp, type, server_id, event_size, log_pos, flags).
Header = tuple[int, int, int, int, int, int]

_T = TypeVar("_T")


class cached_property(Generic[_T]):  # noqa: N801 - same role as functools.cached_property
    """Computes once, then lives in the instance __dict__ (shadowing this non-data descriptor).
    functools.cached_property takes a lock on every first access in Python 3.11, which costs
    more than decoding a Table_map."""

    def __init__(self, func: Callable[[Any], _T]) -> None:
        self.func = func
        self.name = func.__name__
        self.__doc__ = func.__doc__

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, obj: None, owner: type | None = None) -> Self: ...
    @overload
    def __get__(self, obj: object, owner: type | None = None) -> _T: ...

    def __get__(self, obj: object | None, owner: type | None = None) -> _T | Self:
        if obj is None:
            return self
        value: _T
        value = obj.__dict__[self.name] = self.func(obj)
        return value


# What a decoder meets on bytes that contradict the event's size: every one becomes a
# MalformedEventError naming the event type and its offset (hostile input is normal input), saying
# what is wrong in the codec's words (`codec.malformed`).
_MALFORMED = (IndexError, struct.error, ValueError, zlib.error, OverflowError)


def _decoder(func: Callable[[Event], _T]) -> Callable[[Event], _T]:
    """A lazy decoder whose failures on malformed bytes are MalformedEventErrors."""
    @functools.wraps(func)
    def wrapper(self: Event, *args: Any) -> _T:
        try:
            return func(self, *args)
        except _MALFORMED as exc:
            raise self._malformed(self._problem(exc)) from None
    return wrapper


def decode_text(raw: bytes | bytearray | memoryview) -> str:
    """A binlog's text (a name, a statement) as Python reads it: UTF-8, other bytes as surrogates."""
    return str(raw, "utf-8", "surrogateescape")


Buffer = bytes | bytearray | memoryview  # bytes a compiled scan reads events from (a read, or a view of it)


def query_text(buf: Buffer, start: int, end: int, fmt: FormatDescription) -> tuple[str, str] | None:
    """(default database, SQL text) of the QUERY event buf[start:end] without building an Event:
    what a bulk reader asks of each DDL. None for anything else (Query_compressed, lengths that do
    not add up): `Event.query` then decodes it, or says why it cannot."""
    if buf[start + 4] != EventType.QUERY or start + HEADER_LEN + _QUERY_POST.size > end:
        return None
    _, _, db_len, _, status_len = _QUERY_POST.unpack_from(buf, start + HEADER_LEN)
    db_start = start + HEADER_LEN + fmt.post_header_len(EventType.QUERY) + status_len
    stop = end - fmt.checksum_len
    if db_start + db_len + 1 > stop:
        return None
    return decode_text(buf[db_start : db_start + db_len]), decode_text(buf[db_start + db_len + 1 : stop])


@dataclass(frozen=True, slots=True)
class QueryFields:
    thread_id: int
    db: str
    sql: str


class Event:
    """A binlog event. `raw` is every byte of it, CRC included; `pos` is its offset in its file."""

    # The event's bytes are _buf[:size].
    __slots__ = ("_buf", "pos", "fmt", "timestamp", "type_code", "server_id", "size", "log_pos",
                 "flags", "__dict__")
    _buf: bytes
    pos: int
    fmt: FormatDescription | None
    timestamp: int
    type_code: int
    server_id: int
    size: int
    log_pos: int
    flags: int

    def __init__(self, raw: bytes, pos: int, fmt: FormatDescription | None, header: Header | None = None):
        self._buf = raw
        self.pos = pos
        self.fmt = fmt
        (self.timestamp, self.type_code, self.server_id, self.size, self.log_pos, self.flags) = (
            header if header is not None else HEADER.unpack_from(raw, 0)
        )

    @property
    def raw(self) -> bytes:
        """Every byte of the event, CRC included."""
        buf = self._buf
        return buf if len(buf) == self.size else buf[: self.size]

    # -- generic ------------------------------------------------------------------------------
    @property
    def type_name(self) -> str:
        return type_name(self.type_code)

    @property
    def end_pos(self) -> int:
        return self.pos + self.size

    @property
    @_decoder
    def checksum_len(self) -> int:
        if self.type_code == EventType.FORMAT_DESCRIPTION:
            return FormatDescription.parse(self.raw).fde_checksum_len
        return self.fmt.checksum_len if self.fmt is not None else 0

    @property
    def body(self) -> bytes:
        """Post-header and body, without the common header and the CRC."""
        return self.raw[HEADER_LEN : len(self.raw) - self.checksum_len]

    def __repr__(self) -> str:
        return f"<Event {self.type_name} pos={self.pos} size={self.size} log_pos={self.log_pos}>"

    def _malformed(self, problem: str) -> MalformedEventError:
        return MalformedEventError(f"malformed {self.type_name} event: {problem}", offset=self.pos)

    def _problem(self, exc: BaseException) -> str:
        """What a decoder's `exc` says of this event (`codec.malformed.problem`)."""
        crc = self.fmt.checksum_len if self.fmt is not None and self.type_code != EventType.FORMAT_DESCRIPTION else 0
        return malformed_problem(self.type_code, max(0, self.size - HEADER_LEN - crc), exc)

    @property
    def is_query(self) -> bool:
        return self.type_code in QUERY_EVENT_TYPES or self.type_code == EventType.EXECUTE_LOAD_QUERY

    @property
    def is_rows(self) -> bool:
        return self.type_code in ROWS_EVENT_TYPES

    @property
    def is_gtid(self) -> bool:
        return self.type_code in MYSQL_GTID_EVENT_TYPES or self.type_code == EventType.MARIADB_GTID

    # -- RAND ----------------------------------------------------------------------------------
    @property
    @_decoder
    def rand_seeds(self) -> tuple[int, int]:
        """RAND_EVENT's two seeds (a placeholder's: the size and type of the event it stands for)."""
        return _RAND_SEEDS.unpack_from(self._buf, HEADER_LEN)

    # -- Query, QUERY_COMPRESSED, EXECUTE_LOAD_QUERY --------------------------------------------
    @cached_property
    @_decoder
    def query(self) -> QueryFields:
        raw, fmt = self._buf, self.fmt
        assert fmt is not None  # decoders run on events read with a format
        end = self.size - fmt.checksum_len
        if HEADER_LEN + _QUERY_POST.size > end:
            raise self._malformed("the post-header runs past the end of the event")
        thread_id, _, db_len, _, status_len = _QUERY_POST.unpack_from(raw, HEADER_LEN)
        # EXECUTE_LOAD_QUERY has 13 more post-header bytes; the FDE table tells us.
        start = HEADER_LEN + fmt.post_header_len(self.type_code)
        db_start = start + status_len
        if db_start + db_len + 1 > end:  # status variables, db name and its NUL
            raise self._malformed(f"status variables ({status_len} bytes) and db name ({db_len} bytes) "
                                  "run past the end of the event")
        db = raw[db_start : db_start + db_len]
        sql = raw[db_start + db_len + 1 : end]
        if self.type_code == EventType.QUERY_COMPRESSED:
            sql = mariadb_uncompress(sql)
        return QueryFields(thread_id, decode_text(db), decode_text(sql))

    @property
    def db(self) -> str | None:
        """The Query event's default database ('' when the session had none), or the Table_map's db."""
        if self.is_query:
            return self.query.db
        if self.type_code == EventType.TABLE_MAP:
            return self.table_map[1]
        return None

    @property
    def sql(self) -> str | None:
        if self.is_query:
            return self.query.sql
        if self.type_code == EventType.ANNOTATE_ROWS:
            return decode_text(self.body)
        if self.type_code == EventType.ROWS_QUERY:
            return decode_text(self.body[1:])  # a 1-byte length the server ignores, then the text
        return None

    # -- Table_map and rows -----------------------------------------------------------------
    @property
    @_decoder
    def table_id(self) -> int:
        """The table id of a Table_map or rows event."""
        at = HEADER_LEN
        assert self.fmt is not None  # decoders run on events read with a format
        if self.fmt.table_id_len(self.type_code) == 4:
            table_id: int = _U32.unpack_from(self._buf, at)[0]
            return table_id
        return int.from_bytes(self._buf[at : at + 6], "little")

    @property
    def rows_flags_offset(self) -> int:
        assert self.fmt is not None  # decoders run on events read with a format
        return HEADER_LEN + self.fmt.table_id_len(self.type_code)

    @property
    @_decoder
    def rows_flags(self) -> int:
        flags: int = _U16.unpack_from(self._buf, self.rows_flags_offset)[0]
        return flags

    @cached_property
    @_decoder
    def table_map(self) -> tuple[int, str, str]:
        """(table_id, db, table) of a Table_map event."""
        raw = self._buf
        start = HEADER_LEN
        # 5.1 pre-GA servers wrote a 4-byte table id (a 6-byte post-header).
        db, table = self.table_names
        id_len = 4 if self._table_map_post_header() == 6 else 6
        return int.from_bytes(raw[start : start + id_len], "little"), db, table

    def _table_map_post_header(self) -> int:
        # A hostile FDE may list fewer event types than Table_map's (19): the server could not read
        # the event either, so it is malformed here (found by the atheris binlog target).
        assert self.fmt is not None  # decoders run on events read with a format
        length = self.fmt.post_header_len(EventType.TABLE_MAP)
        if not length:
            raise self._malformed("the Format_description event gives Table_map no post-header length")
        return length

    @property
    def table_names(self) -> tuple[str, str]:
        """(db, table) of a Table_map event: the lazy name lookup walks use. Each distinct name
        is decoded once and shared (a walk meets the same few tables again and again)."""
        raw = self._buf
        i = HEADER_LEN + self._table_map_post_header()
        try:
            tbl = i + 2 + raw[i]
            end = tbl + 1 + raw[tbl]
        except IndexError:
            end = -1
        if end < 0 or end > self.size:
            raise self._malformed("the db or table name runs past the end of the event")
        key = raw[i:end]  # db length, db, NUL, table length, table
        names = _TABLE_NAMES.get(key)
        if names is None:
            if len(_TABLE_NAMES) >= _TABLE_NAMES_MAX:
                _TABLE_NAMES.clear()
            names = _TABLE_NAMES[key] = (key[1 : 1 + key[0]].decode("utf-8", "surrogateescape"),
                                         key[key[0] + 3 :].decode("utf-8", "surrogateescape"))
        return names

    @property
    def table(self) -> str | None:
        return self.table_map[2] if self.type_code == EventType.TABLE_MAP else None

    # -- GTIDs ------------------------------------------------------------------------------
    @cached_property
    @_decoder
    def gtid_info(self) -> gtids.GtidInfo:
        """The GTID of a MySQL GTID / Anonymous_GTID / tagged GTID or MariaDB GTID event."""
        if self.type_code == EventType.MARIADB_GTID:
            return gtids.decode_mariadb_gtid(self.body, self.server_id)
        if self.type_code == EventType.GTID_TAGGED:
            return gtids.decode_tagged_gtid(self.body)
        return gtids.decode_mysql_gtid(self.body, anonymous=self.type_code == EventType.ANONYMOUS_GTID)

    @property
    def gtid(self) -> str | None:
        return self.gtid_info.text if self.is_gtid else None

    @property
    @_decoder
    def mariadb_gtid_flags(self) -> int:
        return self.raw[HEADER_LEN + 12]

    @property
    def is_standalone(self) -> bool:
        """A MariaDB GTID with FL_STANDALONE opens a group with no terminating COMMIT/XID (DDL)."""
        return self.type_code == EventType.MARIADB_GTID and bool(self.mariadb_gtid_flags & MARIADB_FL_STANDALONE)

    @cached_property
    @_decoder
    def gtid_set(self) -> gtids.MysqlGtidSet | gtids.MariadbGtidList | None:
        """The set carried by Previous_GTIDs (MySQL) or Gtid_list (MariaDB)."""
        if self.type_code == EventType.PREVIOUS_GTIDS:
            return gtids.MysqlGtidSet.decode(self.body)
        if self.type_code == EventType.MARIADB_GTID_LIST:
            body = self.body
            count = _U32.unpack_from(body, 0)[0] & ((1 << 28) - 1)
            if 4 + 16 * count > len(body):
                raise self._malformed(f"{count} GTIDs (16 bytes each) in a body of {len(body)} bytes")
            return gtids.MariadbGtidList.decode(body)
        return None

    # -- control events ---------------------------------------------------------------------
    @property
    @_decoder
    def rotate(self) -> tuple[int, str]:
        """(position, next file name) of a Rotate event. The name has no path and no NUL."""
        body = self.body
        return _U64.unpack_from(body, 0)[0], decode_text(body[8:])

    @cached_property
    @_decoder
    def heartbeat(self) -> tuple[str, int]:
        """(file, position) a heartbeat names. v1 (type 27): the body is the file name, the header's
        32-bit log_pos the position. v2 (type 41, MySQL 8.0.26+): length-encoded fields (type,
        length, value; type 0 ends them), 1 the file name, 2 the 64-bit position (itself
        length-encoded); unknown fields are passed over, as MySQL's Heartbeat::decode does."""
        body = self.body
        if self.type_code != EventType.HEARTBEAT_V2:
            return decode_text(body), self.log_pos
        file, position, i = None, None, 0
        while i < len(body):
            kind, i = read_lenenc(body, i)
            if kind == 0:
                break
            length, i = read_lenenc(body, i)
            if i + length > len(body):
                raise ValueError(f"heartbeat field {kind} of {length} bytes runs past the event")
            if kind == 1:
                file = decode_text(body[i:i + length])
            elif kind == 2:
                position, _ = read_lenenc(body[:i + length], i)
            i += length
        if file is None or position is None:
            raise ValueError("a HEARTBEAT_LOG_EVENT_V2 without its file name or position")
        return file, position

    @cached_property
    @_decoder
    def transaction_payload(self) -> tuple[dict[int, int], bytes]:
        """({field: value}, compressed bytes) of a MySQL Transaction_payload event. The header
        fields are lenenc-encoded (net_store_length), not plain little-endian."""
        body = self.body
        fields: dict[int, int] = {}
        i = 0
        while i < len(body):
            field_type = body[i]
            i += 1
            if field_type == 0:  # end mark
                break
            length, i = read_lenenc(body, i)
            fields[field_type], _ = read_lenenc(body, i)
            i += length
        return fields, body[i:]

    def payload_events(self) -> list[Event]:
        """The events inside a Transaction_payload: decompressed, no CRC, log_pos 0."""
        from dumpfilter.codec.payload import payload_events

        try:
            return payload_events(self)
        except BinlogError as exc:  # naming no file: a MalformedEventError, which the caller's in_file names
            if exc.path is not None or isinstance(exc, MalformedEventError):
                raise
            raise MalformedEventError(exc.message, offset=exc.offset) from None

    # -- rewriting (returns new events; the CRC is recomputed) -----------------------------
    def replaced(self, raw_without_crc: bytes) -> Event:
        """A new event from header+body bytes: fixes event_size and appends a fresh CRC when the
        stream is checksummed."""
        crc_len = self.checksum_len
        size = len(raw_without_crc) + crc_len
        head = raw_without_crc[:9] + _U32.pack(size) + raw_without_crc[13:]
        raw = with_crc(head) if crc_len else head
        return Event(raw, self.pos, self.fmt)

    def with_header(self, *, log_pos: int | None = None, flags: int | None = None) -> Event:
        lp = self.log_pos if log_pos is None else log_pos
        fl = self.flags if flags is None else flags
        if (lp, fl) == (self.log_pos, self.flags):
            return self
        head = HEADER.pack(self.timestamp, self.type_code, self.server_id, self.size, lp, fl)
        return self.replaced(head + self.raw[HEADER_LEN : len(self.raw) - self.checksum_len])

    def with_rows_flags(self, rows_flags: int) -> Event:
        off = self.rows_flags_offset
        raw = self.raw[: len(self.raw) - self.checksum_len]
        return self.replaced(raw[:off] + _U16.pack(rows_flags) + raw[off + 2 :])

    def with_body(self, body: bytes) -> Event:
        return self.replaced(self.raw[:HEADER_LEN] + body)
