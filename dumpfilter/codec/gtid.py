"""GTIDs: MySQL (untagged, anonymous, tagged 8.3+) and MariaDB GTID events, MySQL GTID sets as in
Previous_GTIDs, MariaDB GTID lists, and the transaction_length field a writer must keep right."""

from __future__ import annotations

import struct
import uuid as uuidlib
from dataclasses import dataclass, field

from dumpfilter.codec.packing import (
    encode_lenenc,
    encode_varlen,
    read_lenenc,
    read_varlen,
    read_varlen_signed,
)

_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")
_I64 = struct.Struct("<q")
_MARIADB_GTID = struct.Struct("<QIB")  # seq_no, domain_id, flags2


@dataclass(frozen=True, slots=True)
class GtidInfo:
    """One transaction's GTID. For MySQL `source` is the server UUID (with `tag`), for MariaDB
    `domain`-`server_id`-`seq`. `transaction_length` is 0 where the event does not carry it."""

    flavor: str
    source: str = ""
    tag: str = ""
    gno: int = 0
    domain: int = 0
    server_id: int = 0
    anonymous: bool = False
    transaction_length: int = 0
    # Where the transaction_length value sits in the body (untagged MySQL), for rewriting.
    length_field: tuple[int, int] | None = None

    @property
    def text(self) -> str:
        if self.flavor == "mariadb":
            return f"{self.domain}-{self.server_id}-{self.gno}"
        if self.anonymous:
            return "ANONYMOUS"
        return f"{self.source}:{self.tag}:{self.gno}" if self.tag else f"{self.source}:{self.gno}"


def decode_mariadb_gtid(body: bytes, server_id: int) -> GtidInfo:
    seq, domain, _flags = _MARIADB_GTID.unpack_from(body, 0)
    return GtidInfo("mariadb", gno=seq, domain=domain, server_id=server_id)


def decode_mysql_gtid(body: bytes, *, anonymous: bool) -> GtidInfo:
    """5.6: flags, sid[16], gno. 5.7 adds lt_type=2, last_committed, sequence_number. 8.0 adds
    immediate_commit_ts (7 bytes; MSB set means 7 more bytes of original ts), then
    transaction_length (lenenc), then server versions."""
    sid = str(uuidlib.UUID(bytes=bytes(body[1:17])))
    gno = _I64.unpack_from(body, 17)[0]
    length = 0
    length_field = None
    i = 25
    if len(body) > i and body[i] == 2:
        i += 17
        if len(body) >= i + 7:
            ts = int.from_bytes(body[i : i + 7], "little")
            i += 7
            if ts & (1 << 55):
                i += 7
            if len(body) > i:
                start = i
                length, i = read_lenenc(body, i)
                length_field = (start, i)
    return GtidInfo("mysql", source=sid, gno=gno, anonymous=anonymous,
                    transaction_length=length, length_field=length_field)


# Tagged GTID events (type 42, MySQL 8.3+) use the mysql::serialization format: a version byte,
# then varlen payload_size (counting the whole message, itself included) and
# last_non_ignorable_field_id, then (field_id, value) pairs.
_TAGGED_SID, _TAGGED_GNO, _TAGGED_TAG, _TAGGED_LENGTH = 1, 2, 3, 8


def _tagged_fields(body: bytes) -> tuple[int, int, list[tuple[int, int, int]]]:
    """(payload_size, last_non_ignorable, [(field_id, value_start, value_end)])."""
    payload_size, i = read_varlen(body, 1)
    last_non_ignorable, i = read_varlen(body, i)
    end = min(payload_size, len(body))
    fields = []
    while i < end:
        fid, i = read_varlen(body, i)
        start = i
        if fid == _TAGGED_SID:
            for _ in range(16):
                _, i = read_varlen(body, i)
        elif fid == _TAGGED_TAG:
            n, i = read_varlen(body, i)
            i += n
        elif fid <= 11:
            _, i = read_varlen(body, i)
        else:
            break  # an unknown field cannot be skipped: its length is not self-describing
        fields.append((fid, start, i))
    return payload_size, last_non_ignorable, fields


def decode_tagged_gtid(body: bytes) -> GtidInfo:
    _, _, fields = _tagged_fields(body)
    sid = b""
    tag = ""
    gno = 0
    length = 0
    for fid, start, end in fields:
        if fid == _TAGGED_SID:
            j = start
            out = bytearray()
            for _ in range(16):
                b, j = read_varlen(body, j)
                out.append(b)
            sid = bytes(out)
        elif fid == _TAGGED_GNO:
            gno, _ = read_varlen_signed(body, start)
        elif fid == _TAGGED_TAG:
            n, j = read_varlen(body, start)
            tag = body[j : j + n].decode("utf-8", "replace")
        elif fid == _TAGGED_LENGTH:
            length, _ = read_varlen(body, start)
    source = str(uuidlib.UUID(bytes=sid)) if len(sid) == 16 else ""
    return GtidInfo("mysql", source=source, tag=tag, gno=gno, transaction_length=length)


def with_transaction_length(type_code: int, body: bytes, new_length: int) -> bytes:
    """Rewrite the transaction_length field of a MySQL GTID event body. The caller iterates if the
    field's width, and so the event's size, changes."""
    if type_code == 42:
        payload_size, _, fields = _tagged_fields(body)
        for fid, start, end in fields:
            if fid == _TAGGED_LENGTH:
                new_body = body[:start] + encode_varlen(new_length) + body[end:]
                # payload_size counts the whole serialized message, itself included.
                rest = new_body[1 + len(encode_varlen(payload_size)) :]
                new_size = 1 + len(rest)
                while 1 + len(encode_varlen(new_size)) + len(rest) != new_size:
                    new_size = 1 + len(encode_varlen(new_size)) + len(rest)
                return new_body[:1] + encode_varlen(new_size) + rest
        return body
    info = decode_mysql_gtid(body, anonymous=type_code == 34)
    if info.length_field is None:
        return body
    start, end = info.length_field
    return body[:start] + encode_lenenc(new_length) + body[end:]


# -- sets ------------------------------------------------------------------------------------
@dataclass
class MysqlGtidSet:
    """A MySQL GTID set: {(uuid, tag): [[start, end), ...]} with half-open intervals, as
    Previous_GTIDs stores them."""

    intervals: dict[tuple[str, str], list[list[int]]] = field(default_factory=dict)

    def add(self, source: str, gno: int, tag: str = "") -> None:
        ivs = self.intervals.setdefault((source, tag), [])
        for iv in ivs:
            if iv[0] <= gno < iv[1]:
                return
            if gno == iv[1]:
                iv[1] += 1
                self._merge(ivs)
                return
            if gno == iv[0] - 1:
                iv[0] -= 1
                self._merge(ivs)
                return
        ivs.append([gno, gno + 1])
        ivs.sort()

    @staticmethod
    def _merge(ivs: list[list[int]]) -> None:
        ivs.sort()
        i = 0
        while i + 1 < len(ivs):
            if ivs[i][1] >= ivs[i + 1][0]:
                ivs[i][1] = max(ivs[i][1], ivs[i + 1][1])
                del ivs[i + 1]
            else:
                i += 1

    def add_interval(self, source: str, start: int, end: int, tag: str = "") -> None:
        """Add gnos [start, end), merged with what is there (no gno by gno expansion)."""
        if end <= start:
            return
        ivs = self.intervals.setdefault((source, tag), [])
        ivs.append([start, end])
        self._merge(ivs)

    def __contains__(self, item: tuple[str, str, int]) -> bool:
        source, tag, gno = item
        return any(a <= gno < b for a, b in self.intervals.get((source, tag), ()))

    def issubset(self, other: "MysqlGtidSet") -> bool:
        """Every GTID of this set is in `other`."""
        for key, ivs in self.intervals.items():
            theirs = other.intervals.get(key, ())
            for a, b in ivs:
                if not any(c <= a and b <= d for c, d in theirs):
                    return False
        return True

    @classmethod
    def parse(cls, text: str) -> "MysqlGtidSet":
        """The text form, as @@gtid_executed prints it: `uuid:1-5:7[:tag:1-3...],uuid2:...`.
        MySQL 8.3+ tags start a new group of intervals inside a uuid's part; a tag is a word, an
        interval starts with a digit. Ranges stay intervals (a set like uuid:1-1000000000 is one
        interval, never a billion gnos)."""
        out = cls()
        for part in filter(None, (p.strip() for p in text.replace("\n", "").split(","))):
            source, *rest = part.split(":")
            try:
                source = str(uuidlib.UUID(source.strip()))
            except ValueError:
                raise ValueError(f"{source.strip()!r} in GTID set {text!r} is not a UUID") from None
            tag = ""
            for token in rest:
                token = token.strip()
                if token[:1].isdigit():
                    lo, _, hi = token.partition("-")
                    if not lo.isdigit() or (hi and not hi.isdigit()):
                        raise ValueError(f"bad interval {token!r} in GTID set {text!r}")
                    out.add_interval(source, int(lo), int(hi or lo) + 1, tag)
                elif token and (token[0].isalpha() or token[0] == "_"):
                    tag = token.lower()
                else:
                    raise ValueError(f"bad GTID set {text!r} near {token!r}")
        return out

    def __str__(self) -> str:
        parts = []
        for (source, tag), ivs in sorted(self.intervals.items()):
            spans = ":".join(f"{a}" if b == a + 1 else f"{a}-{b - 1}" for a, b in ivs)
            parts.append(f"{source}:{tag}:{spans}" if tag else f"{source}:{spans}")
        return ",".join(parts)

    @property
    def tagged(self) -> bool:
        return any(tag for _, tag in self.intervals)

    @classmethod
    def decode(cls, body: bytes) -> "MysqlGtidSet":
        """n_sids u64; in the tagged format (8.3+) the top byte is 1 and n_sids sits in bits 8-55.
        Per sid: uuid[16], [tag: varlen length + bytes], n_intervals u64, intervals 2×u64."""
        head = _U64.unpack_from(body, 0)[0]
        tagged = head >> 56 == 1
        n_sids = (head >> 8) & ((1 << 48) - 1) if tagged else head
        out = cls()
        i = 8
        for _ in range(n_sids):
            source = str(uuidlib.UUID(bytes=bytes(body[i : i + 16])))
            i += 16
            tag = ""
            if tagged:
                n, i = read_varlen(body, i)
                tag = body[i : i + n].decode("utf-8", "replace")
                i += n
            count = _U64.unpack_from(body, i)[0]
            i += 8
            ivs = out.intervals.setdefault((source, tag), [])
            for _ in range(count):
                start, end = struct.unpack_from("<qq", body, i)
                i += 16
                ivs.append([start, end])
        return out

    def encode(self) -> bytes:
        tagged = self.tagged
        items = sorted(self.intervals.items())
        n = len(items)
        out = bytearray(_U64.pack((1 << 56) | (n << 8) | 1 if tagged else n))
        for (source, tag), ivs in items:
            out += uuidlib.UUID(source).bytes
            if tagged:
                raw_tag = tag.encode()
                out += encode_varlen(len(raw_tag)) + raw_tag
            out += _U64.pack(len(ivs))
            for a, b in ivs:
                out += struct.pack("<qq", a, b)
        return bytes(out)


@dataclass
class MariadbGtidList:
    """A MariaDB Gtid_list: the last GTID per (domain, server_id), in file order. The count's low
    28 bits are the count; bits 28-31 are flags."""

    gtids: dict[tuple[int, int], int] = field(default_factory=dict)
    flags: int = 0

    def add(self, domain: int, server_id: int, seq: int) -> None:
        self.gtids[(domain, server_id)] = seq

    def __str__(self) -> str:
        return ",".join(f"{d}-{s}-{q}" for (d, s), q in self.gtids.items())

    @classmethod
    def decode(cls, body: bytes) -> "MariadbGtidList":
        head = _U32.unpack_from(body, 0)[0]
        count = head & ((1 << 28) - 1)
        out = cls(flags=head >> 28)
        for k in range(count):
            domain, server_id, seq = struct.unpack_from("<IIQ", body, 4 + 16 * k)
            out.gtids[(domain, server_id)] = seq
        return out

    def encode(self) -> bytes:
        out = bytearray(_U32.pack(len(self.gtids) | (self.flags << 28)))
        for (domain, server_id), seq in self.gtids.items():
            out += struct.pack("<IIQ", domain, server_id, seq)
        if not self.gtids:
            out += b"\0\0"  # an empty list is the count plus 2 zero bytes (get_data_size)
        return bytes(out)
