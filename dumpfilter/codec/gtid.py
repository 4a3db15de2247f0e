"""GTIDs: MySQL (untagged, anonymous, tagged 8.3+) and MariaDB GTID events, MySQL GTID sets as in
Previous_GTIDs, MariaDB GTID lists, and the transaction_length field a writer must keep right."""

from __future__ import annotations

import bisect
from operator import itemgetter
import types
import struct
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
_start, _end = itemgetter(0), itemgetter(1)  # an interval's bounds, the keys its bisections take


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


def uuid_text(raw: bytes) -> str:
    """16 bytes as a UUID's text (str(uuid.UUID(bytes=raw))), without the uuid module: it
    imports platform and more, read at every command's start for a GTID or two."""
    h = bytes(raw).hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def uuidlib() -> types.ModuleType:
    """The uuid module, imported when a GTID set's text is parsed (`uuid.UUID` checks it)."""
    import uuid

    return uuid


def decode_mariadb_gtid(body: bytes, server_id: int) -> GtidInfo:
    seq, domain, _flags = _MARIADB_GTID.unpack_from(body, 0)
    return GtidInfo("mariadb", gno=seq, domain=domain, server_id=server_id)


def decode_mysql_gtid(body: bytes, *, anonymous: bool) -> GtidInfo:
    """5.6: flags, sid[16], gno. 5.7 adds lt_type=2, last_committed, sequence_number. 8.0 adds
    immediate_commit_ts (7 bytes; MSB set means 7 more bytes of original ts), then
    transaction_length (lenenc), then server versions."""
    sid = uuid_text(body[1:17])
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
    for fid, start, _end in fields:
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
    source = uuid_text(sid) if len(sid) == 16 else ""
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
# A set with more intervals than this is refused (a typed error, not a minute of CPU): a real
# gtid_executed has a handful per server UUID; a hundred thousand holes is a forged set.
MAX_INTERVALS = 100_000
GNO_END = (1 << 63) - 1  # MySQL's largest gno (GNO_END): a gno is a signed 64-bit number


class GtidSetError(ValueError):
    """A GTID set that cannot be read: malformed text, a gno out of range, or more than
    MAX_INTERVALS intervals. Callers turn it into their typed error (a GtidState into a
    PositionError, MySQL's 1236)."""


@dataclass
class MysqlGtidSet:
    """A MySQL GTID set: {(uuid, tag): [[start, end), ...]} with half-open intervals, as
    Previous_GTIDs stores them. Each key's intervals are kept sorted, disjoint and not adjacent
    (normalised), so lookups bisect and comparisons walk two lists once: no operation is
    quadratic in the number of intervals (a replica's set of 40 000 took 122 s of CPU when every
    interval was merged into the list by a sort of its own)."""

    intervals: dict[tuple[str, str], list[list[int]]] = field(default_factory=dict)

    def add(self, source: str, gno: int, tag: str = "") -> None:
        """Add one gno: O(log n) to find its place (GTIDs usually extend the last interval)."""
        ivs = self.intervals.setdefault((source, tag), [])
        i = bisect.bisect_right(ivs, gno, key=_start)  # ivs[i - 1] is the last starting at or before gno
        before = ivs[i - 1] if i else None
        if before is not None and gno < before[1]:
            return
        if before is not None and gno == before[1]:
            before[1] += 1
            if i < len(ivs) and ivs[i][0] == before[1]:
                before[1] = ivs.pop(i)[1]
            return
        if i < len(ivs) and ivs[i][0] == gno + 1:
            ivs[i][0] = gno
            return
        ivs.insert(i, [gno, gno + 1])

    def add_interval(self, source: str, start: int, end: int, tag: str = "") -> None:
        """Add gnos [start, end), merged with what is there (no gno by gno expansion): the
        intervals it touches are found by bisection and replaced by one."""
        if end <= start:
            return
        ivs = self.intervals.setdefault((source, tag), [])
        if ivs and start >= ivs[-1][0]:  # at or after the last interval's start: only it is touched
            last = ivs[-1]
            if start > last[1]:
                ivs.append([start, end])
            elif end > last[1]:
                last[1] = end
            return
        lo = bisect.bisect_left(ivs, start, key=_end)     # the first that ends at or after start
        hi = bisect.bisect_right(ivs, end, key=_start)    # past the last that starts at or before end
        if lo < hi:
            start, end = min(start, ivs[lo][0]), max(end, ivs[hi - 1][1])
        ivs[lo:hi] = [[start, end]]

    def overlaps(self, source: str, start: int, end: int, tag: str = "") -> bool:
        """Whether any gno of [start, end) is in the set."""
        ivs = self.intervals.get((source, tag), ())
        i = bisect.bisect_right(ivs, start, key=_end)  # the first that ends after start
        return i < len(ivs) and ivs[i][0] < end

    def __contains__(self, item: tuple[str, str, int]) -> bool:
        source, tag, gno = item
        ivs = self.intervals.get((source, tag), ())
        i = bisect.bisect_right(ivs, gno, key=_start)
        return bool(i) and gno < ivs[i - 1][1]

    def copy(self) -> MysqlGtidSet:
        """A set whose intervals change apart from this one's."""
        return MysqlGtidSet({key: [list(iv) for iv in ivs] for key, ivs in self.intervals.items()})

    def issubset(self, other: MysqlGtidSet) -> bool:
        """Every GTID of this set is in `other`: one walk over both sorted lists per key."""
        for key, ivs in self.intervals.items():
            theirs = other.intervals.get(key, ())
            j = 0
            for a, b in ivs:
                while j < len(theirs) and theirs[j][1] <= a:
                    j += 1
                if j == len(theirs) or not (theirs[j][0] <= a and b <= theirs[j][1]):
                    return False
        return True

    @classmethod
    def parse(cls, text: str) -> MysqlGtidSet:
        """The text form, as @@gtid_executed prints it: `uuid:1-5:7[:tag:1-3...],uuid2:...`.
        MySQL 8.3+ tags start a new group of intervals inside a uuid's part; a tag is a word, an
        interval starts with a digit. Ranges stay intervals (a set like uuid:1-1000000000 is one
        interval, never a billion gnos). The intervals are gathered, then sorted and merged once:
        O(n log n). GtidSetError for a malformed set or one of more than MAX_INTERVALS intervals."""
        gathered: dict[tuple[str, str], list[list[int]]] = {}
        count = 0
        for part in filter(None, (p.strip() for p in text.replace("\n", "").split(","))):
            source, *rest = part.split(":")
            try:
                source = str(uuidlib().UUID(source.strip()))
            except ValueError:
                raise GtidSetError(f"{_shown(source.strip())} in GTID set {_shown(text)} is not a UUID") from None
            tag = ""
            for token in rest:
                token = token.strip()
                if token[:1].isdigit():
                    lo, _, hi = token.partition("-")
                    if not lo.isdigit() or (hi and not hi.isdigit()):
                        raise GtidSetError(f"bad interval {_shown(token)} in GTID set {_shown(text)}")
                    first, last = int(lo), int(hi or lo)
                    if last > GNO_END:
                        raise GtidSetError(f"interval {_shown(token)} in GTID set {_shown(text)}: a gno is at most "
                                           f"{GNO_END}")
                    count += 1
                    if count > MAX_INTERVALS:
                        raise GtidSetError(f"the GTID set has more than {MAX_INTERVALS} intervals")
                    if first <= last:
                        gathered.setdefault((source, tag), []).append([first, last + 1])
                elif token and (token[0].isalpha() or token[0] == "_"):
                    tag = token.lower()
                else:
                    raise GtidSetError(f"bad GTID set {_shown(text)} near {_shown(token)}")
        return cls({key: _normalised(ivs) for key, ivs in gathered.items()})

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
    def decode(cls, body: bytes) -> MysqlGtidSet:
        """n_sids u64; in the tagged format (8.3+) the top byte is 1 and n_sids sits in bits 8-55.
        Per sid: uuid[16], [tag: varlen length + bytes], n_intervals u64, intervals 2×u64."""
        head = _U64.unpack_from(body, 0)[0]
        tagged = head >> 56 == 1
        n_sids = (head >> 8) & ((1 << 48) - 1) if tagged else head
        gathered: dict[tuple[str, str], list[list[int]]] = {}
        i = 8
        for _ in range(n_sids):
            source = uuid_text(body[i : i + 16])
            i += 16
            tag = ""
            if tagged:
                n, i = read_varlen(body, i)
                tag = body[i : i + n].decode("utf-8", "replace")
                i += n
            count = _U64.unpack_from(body, i)[0]
            i += 8
            if count > (len(body) - i) // 16:
                raise GtidSetError(f"Previous_GTIDs: {count} intervals for {source} in {len(body) - i} bytes")
            spans = [[start, end] for start, end in struct.iter_unpack("<qq", body[i:i + 16 * count])]
            # MySQL's Gtid_set::add_gtid_encoding refuses ("Malformed GTID_set encoding") an interval
            # that is empty or does not start after the last one ended: within one sid's list the
            # intervals are sorted, disjoint and not even adjacent, and gnos start at 1.
            last = 0
            for a, b in spans:
                if a <= last or b <= a:
                    raise GtidSetError(f"GTID set: interval {a}-{b} of {source} is "
                                       + ("empty" if b <= a else f"not after {last} (unsorted, overlapping or adjacent)"))
                last = b
            gathered.setdefault((source, tag), []).extend(spans)
            i += 16 * count
        # One sid may come twice (MySQL adds both lists to the set): merged here.
        return cls({key: _normalised(ivs) for key, ivs in gathered.items()})

    def encode(self) -> bytes:
        tagged = self.tagged
        items = sorted(self.intervals.items())
        n = len(items)
        out = bytearray(_U64.pack((1 << 56) | (n << 8) | 1 if tagged else n))
        for (source, tag), ivs in items:
            out += uuidlib().UUID(source).bytes
            if tagged:
                raw_tag = tag.encode()
                out += encode_varlen(len(raw_tag)) + raw_tag
            out += _U64.pack(len(ivs))
            for a, b in ivs:
                out += struct.pack("<qq", a, b)
        return bytes(out)


def _normalised(ivs: list[list[int]]) -> list[list[int]]:
    """Sorted, with overlapping and adjacent intervals merged: one sort, one pass."""
    out: list[list[int]] = []
    for start, end in sorted(ivs):
        if out and start <= out[-1][1]:
            if end > out[-1][1]:
                out[-1][1] = end
        else:
            out.append([start, end])
    return out


def _shown(text: str) -> str:
    """Client text inside an error message: quoted, and cut (a set can be a megabyte)."""
    return repr(text if len(text) <= 80 else text[:80] + "...")


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
    def decode(cls, body: bytes) -> MariadbGtidList:
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
