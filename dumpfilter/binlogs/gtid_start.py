"""Where a dump that starts from a replica's GTID state begins: the binlog file to read first,
found from each file's Previous_GTIDs (MySQL) or Gtid_list (MariaDB) event, newest file first, as
the servers' dump threads do, instead of scanning every file from the first."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path

from dumpfilter.codec import BinlogReader, Event, EventType
from dumpfilter.codec.constants import HEADER_LEN
from dumpfilter.errors import BinlogError, PositionError
from dumpfilter.codec.gtid import MariadbGtidList, MysqlGtidSet, decode_mysql_gtid, decode_tagged_gtid
from dumpfilter.codec.scanner import F_COMPLETE, KINDS, Scanner, UnitList
from dumpfilter.binlogs.files import open_binlog
from dumpfilter.binlogs.written import WrittenEnd

# Events a file may start with before its GTID list (MariaDB writes Gtid_list right after the
# FDE; MySQL writes Previous_GTIDs there; a relay log may have a Rotate first).
_HEADER_TYPES = frozenset({EventType.FORMAT_DESCRIPTION, EventType.ROTATE, EventType.BINLOG_CHECKPOINT,
                           EventType.STOP})


@dataclass(frozen=True)
class GtidState:
    """A replica's GTID position: MariaDB `domain-server-seq,...` (gtid_slave_pos) or a MySQL GTID
    set (gtid_executed). `limits` is MariaDB's per-domain last sequence number."""

    text: str
    limits: dict[int, int] | None = None
    mysql: MysqlGtidSet | None = None

    @classmethod
    def parse(cls, text: str) -> GtidState:
        text = text.strip()
        if ":" in text:
            try:
                return cls(text, mysql=MysqlGtidSet.parse(text))
            except ValueError as exc:
                raise PositionError(f"GTID state: {exc}") from None
        limits: dict[int, int] = {}
        try:
            for part in filter(None, (p.strip() for p in text.split(","))):
                domain, _server, seq = (int(x) for x in part.split("-"))
                limits[domain] = max(limits.get(domain, 0), seq)
        except ValueError:
            raise PositionError(f"GTID state {text!r} is neither 'domain-server-seq,...' nor 'uuid:1-5,...'") from None
        return cls(text, limits=limits)

    def covers(self, before_file: MariadbGtidList | MysqlGtidSet | None) -> bool:
        """True when the replica has every GTID logged before a file whose GTID list is
        `before_file` (a MariadbGtidList or MysqlGtidSet; None when the file has none)."""
        if before_file is None:
            return False
        if isinstance(before_file, MysqlGtidSet):
            return self.mysql is not None and before_file.issubset(self.mysql)
        if self.limits is None:
            return False
        # MariaDB: the list holds the last GTID per (domain, server_id) before the file. Within a
        # domain sequence numbers grow, so the replica is past them when its domain's last
        # sequence number is at least each of them.
        return all(seq <= self.limits.get(domain, -1) for (domain, _server), seq in before_file.gtids.items())


def file_gtid_list(path: Path) -> MariadbGtidList | MysqlGtidSet | None:
    """The Gtid_list / Previous_GTIDs event at the head of a binlog file, or None."""
    with open_binlog(path) as stream:
        for event in BinlogReader(stream, str(path), chunk_size=1 << 16):
            t = event.type_code
            if t in (EventType.MARIADB_GTID_LIST, EventType.PREVIOUS_GTIDS):
                return event.gtid_set
            if t not in _HEADER_TYPES:
                return None
    return None


def start_file(paths: list[Path], state: GtidState) -> Path:
    """The newest file whose GTID list the replica already has: every GTID it lacks is in that
    file or later. Raises PositionError (MySQL's error 1236) when the oldest file starts after
    GTIDs the replica lacks: they were in purged files."""
    if not paths:
        raise PositionError("no binlog files to start from")
    for path in reversed(paths):
        try:
            before = file_gtid_list(path)
        except (BinlogError, OSError):
            before = None  # an unreadable head: the stream reports the file itself
        if before is not None and state.covers(before):
            return path
    first = paths[0]
    # Not even the oldest file's list (`before`, the loop's last) is covered (an empty list always
    # is). A file without a list (a server without GTIDs) gives no answer: scan from the oldest file.
    if before is not None:
        # MariaDB's dump thread says this (gtid_find_binlog_file); our detail follows it
        lead = ("Could not find GTID state requested by slave in any binlog files. Probably the slave state is too "
                "old and required binlog files have been purged. ") if state.limits is not None else ""
        raise PositionError(f"{lead}The replica's GTID state {state.text!r} lacks GTIDs that were logged before "
                            f"'{first.name}', the oldest binlog file: the files holding them were purged")
    return first


def gtid_position(binlog_state: dict[tuple[int, int], int]) -> str:
    """MariaDB's GTID position for a binlog state (the last seq_no per domain and server_id): per
    domain its last GTID, as @slave_connect_state and BINLOG_GTID_POS() spell it."""
    last: dict[int, tuple[int, int]] = {}
    for (domain, server_id), seq in binlog_state.items():
        if domain not in last or seq > last[domain][1]:
            last[domain] = (server_id, seq)
    return ",".join(f"{d}-{sid}-{seq}" for d, (sid, seq) in sorted(last.items()))


def binlog_gtid_pos(paths: list[Path], file: str, pos: int) -> str | None:
    """BINLOG_GTID_POS(file, 4) over the served `paths`, which a downstream dumpfilter's
    --source-gtid asks: the file's Gtid_list as a MariaDB GTID position. None (NULL, as MariaDB
    answers a position it cannot place) for a file not served, one without a Gtid_list, and any
    offset but a file's start."""
    path = next((p for p in paths if p.name == file), None)
    if path is None or pos != 4:
        return None
    try:
        found = file_gtid_list(path)
    except (BinlogError, OSError):
        return None
    return gtid_position(found.gtids) if isinstance(found, MariadbGtidList) else None


class BinlogStatus:
    """SHOW BINARY LOG STATUS (MASTER STATUS before MySQL 8.2): `of(paths)` is the newest file, the
    end of what is written there (its last complete event, binlogs/written.py; for a MySQL file its
    last whole transaction, where the set is taken) and, for a MySQL file, the executed set: its
    Previous_GTIDs plus the GTIDs of its whole transactions. A MariaDB file is hopped over by its
    headers only, and only over what was added since the last call. A MySQL file's GTIDs are walked
    once per size of the file (a server keeps gtid_executed in memory; monitoring asks this again
    and again), and when the same file has grown, from the end of its last whole transaction on:
    a live file of a GB is not walked again from its start at each commit."""

    def __init__(self) -> None:
        self._written = WrittenEnd()
        # ((path, inode, size), the walk there)
        self._known: tuple[tuple[Path, int, int], _Executed] | None = None

    def of(self, paths: list[Path]) -> tuple[str, int, MysqlGtidSet | None] | None:
        if not paths:
            return None
        path = paths[-1]
        try:
            head = file_gtid_list(path)
            if not isinstance(head, MysqlGtidSet):
                return path.name, self._written.of(path), None
            st = path.stat()
        except (BinlogError, OSError):
            return None
        key = (path, st.st_ino, st.st_size)
        known = self._known
        if known is None or known[0] != key:
            grown = known is not None and known[0][:2] == key[:2] and known[0][2] < key[2]
            known = key, _mysql_executed(path, known[1] if grown and known is not None else None)
            self._known = known
        done = known[1]
        return path.name, done.end, done.executed


@dataclass(frozen=True)
class _Executed:
    """A MySQL file's GTIDs walked to `end` (the end of its last whole unit), with the raw
    Format_description event the walk read (None: not reached yet) to go on from there."""

    end: int
    executed: MysqlGtidSet
    fde: bytes | None


_READ = 4 << 20  # bytes read at a time
_FDE, _PREVIOUS = int(EventType.FORMAT_DESCRIPTION), int(EventType.PREVIOUS_GTIDS)
_TAGGED = int(EventType.GTID_TAGGED)
_CONTROL = KINDS.index("control")


def _mysql_executed(path: Path, since: _Executed | None = None) -> _Executed:
    """The file's GTIDs from its start, or from where `since` ended (the file grew), by the
    compiled scan: the core reads the untagged GTIDs as runs (`UnitList.mysql_gtids`); Python
    decodes the head's Previous_GTIDs and a tagged GTID, nothing else."""
    scanner = Scanner(str(path))
    if since is None or since.fde is None:
        end, executed, fde = 4, MysqlGtidSet(), None
    else:  # a copy: the answer given for the smaller file stays as it was
        end, executed, fde = since.end, since.executed.copy(), since.fde
        scanner.load_format(fde)
    with contextlib.suppress(BinlogError, OSError):
        with open_binlog(path) as stream:
            stream.seek(end)
            buf, base = b"", end
            while True:
                chunk = stream.read(_READ)
                buf = buf + chunk if buf else chunk
                units = UnitList()
                scan = scanner.scan_into(units, buf, 0, base, path.name, at_eof=not chunk)
                n = len(units)
                if n and not chunk and not units.unit(n - 1).flags & F_COMPLETE:
                    n -= 1  # the tail being written: the status is what comes before it
                k = 0
                while k < n and (head := units.unit(k)).kind == _CONTROL:  # the FDE, Previous_GTIDs
                    first = buf[head.start + 4]
                    if first == _PREVIOUS:
                        found = Event(buf[head.start : head.end], base + head.start, None).gtid_set
                        if isinstance(found, MysqlGtidSet):
                            executed = found.copy()
                    elif first == _FDE:
                        fde = buf[head.start : head.end]
                    k += 1
                gtids = units.mysql_gtids(0, n)
                for run in gtids.runs:
                    executed.add_interval(run.source, run.first, run.last + 1)
                for k in gtids.tagged:
                    rec = units.unit(k)
                    body = buf[rec.start + HEADER_LEN : rec.start + rec.gtid_size]
                    info = decode_tagged_gtid(body) if buf[rec.start + 4] == _TAGGED else decode_mysql_gtid(body, anonymous=False)
                    executed.add(info.source, info.gno, info.tag)
                if n:
                    end = base + units.unit(n - 1).end
                if scan.error is not None or not chunk:
                    break  # a bad event: the status is what comes before it
                buf, base = buf[scan.stop :], base + scan.stop
    return _Executed(end, executed, fde)
