"""`master serve --source mysql://USER:PASS@HOST:PORT`: the master reads a live primary the way a
replica's IO thread does and keeps what it receives as a local binlog series (binlog_mirror),
which the dump service tails and serves. The client side is pymysql (the connection, handshake and
queries, and its packet reader for the dump, as python-mysql-replication also does; that library
parses events into objects and drops the bytes, which this needs whole). On a lost connection it
reconnects with backoff and resumes after the last complete transaction. When the series cannot
grow (a full disk, a quota, a file size limit: `SeriesFull`) it says so once, stops taking from
the primary, retries with backoff and resumes by itself from the series' last whole transaction
once a write succeeds; slaves are served what the series holds meanwhile. With several --source
candidates, a primary that stays unreachable (FAILOVER_AFTER tries, or `master serve
--source-failover-tries`) gives way to the first other
candidate whose binlog continues the series' GTID position (MariaDB's gtid_strict_mode check on
the dump refuses a diverged one), read by GTID from there into a new file of the series.

The series starts at the beginning of a primary file: --source-file (offset 4), the file a MariaDB
--source-gtid state needs (the newest file whose starting GTID position the state covers, asked
with BINLOG_GTID_POS), or the primary's first binlog; or inside --source-file at --source-pos, a
transaction boundary (mid_file: the series' own head and fillers up to there), from MariaDB and
MySQL primaries alike. A MySQL --source-gtid set starts the series in the file the primary's dump
by GTID names, at the first transaction the set lacks (the same head up to there).

A MySQL primary with gtid_mode ON (8.4, 9.x) is read as a MySQL 8.4 replica reads it: by GTID
(COM_BINLOG_DUMP_GTID with the series' executed set, tagged GTIDs included, in MySQL's binary
set encoding; heartbeats as HEARTBEAT_LOG_EVENT_V2), which is also how a restarted master
resumes (binlog_mirror checks what the primary re-sends against the series). Its accounts use
caching_sha2_password: pymysql does the fast and full authentication; the URL says how the
password travels (`?ssl-mode=REQUIRED|VERIFY_CA|VERIFY_IDENTITY&ssl-ca=PATH`, mTLS with
`ssl-cert`/`ssl-key`; without TLS the RSA exchange with the key pinned by `public-key=PATH`, or
asked of the primary with `get-public-key=1`, as MySQL's GET_SOURCE_PUBLIC_KEY=1; neither is
refused with 2061, as a MySQL replica refuses it)."""

from __future__ import annotations

import logging
import struct
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, UTC
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import pymysql
from pymysql.connections import Connection
from pymysql.cursors import Cursor

from dumpfilter.errors import DumpFilterError, RuleError, without_password
from dumpfilter.regular_file import SIDE_FILE_BYTES, read_regular
from dumpfilter.binlogs.files import file_size
from dumpfilter.binlogs.gtid_start import GtidState
from dumpfilter.master.upstream.binlog_mirror import BinlogMirror, MirrorError, SeriesFull
from dumpfilter.codec.gtid import GtidSetError, MariadbGtidList, MysqlGtidSet
from dumpfilter.master.upstream.mid_file import MidFileError, read_head, read_packet, send_command, series_head
from dumpfilter.master.protocol.commands import (
    BINLOG_DUMP_NON_BLOCK,
    BINLOG_SEND_ANNOTATE_ROWS_EVENT,
    BINLOG_THROUGH_GTID,
    COM_BINLOG_DUMP,
    COM_BINLOG_DUMP_GTID,
    COM_REGISTER_SLAVE,
    USE_HEARTBEAT_EVENT_V2,
)
import contextlib

log = logging.getLogger("dumpfilter.master.source")
HEARTBEAT_PERIOD = 1.0      # asked of the primary, so a dead connection shows within a few seconds
READ_TIMEOUT = 5.0
BACKOFF = (0.2, 0.5, 1.0, 2.0, 5.0)
FAILOVER_AFTER = 3  # failed tries of the current source before another candidate is asked (default)
SSL_MODES = ("DISABLED", "PREFERRED", "REQUIRED", "VERIFY_CA", "VERIFY_IDENTITY")
CR_AUTH_PLUGIN_ERR = 2061  # a MySQL client's "Authentication requires secure connection"


@dataclass(frozen=True)
class SourceURL:
    user: str
    password: str = field(repr=False)  # never in a log line or a traceback's locals
    host: str
    port: int
    ssl_mode: str = "PREFERRED"
    ssl_ca: str | None = None
    ssl_cert: str | None = None
    ssl_key: str | None = None
    public_key: str | None = None     # the primary's RSA key (PEM file), for full auth without TLS
    get_public_key: bool = False      # or ask the primary for it (MySQL's GET_SOURCE_PUBLIC_KEY=1)

    @classmethod
    def parse(cls, text: str) -> SourceURL:
        parts = urlsplit(text)
        shown = without_password(text)  # never the password in a message
        if parts.scheme != "mysql" or not parts.hostname:
            raise RuleError(f"--source {shown!r}: expected mysql://USER:PASS@HOST:PORT[?ssl-mode=...]")
        try:
            port = parts.port or 3306
        except ValueError:
            raise RuleError(f"--source {shown!r}: the port is not a number in 0..65535") from None
        options = {k: v[-1] for k, v in parse_qs(parts.query, keep_blank_values=True).items()}
        known = {"ssl-mode", "ssl-ca", "ssl-cert", "ssl-key", "public-key", "get-public-key"}
        if set(options) - known:
            raise RuleError(f"--source {shown!r}: unknown option {sorted(set(options) - known)[0]!r} (known: "
                            f"{', '.join(sorted(known))})")
        mode = options.get("ssl-mode", "VERIFY_CA" if options.get("ssl-ca") else "PREFERRED").upper()
        if mode not in SSL_MODES:
            raise RuleError(f"--source {shown!r}: ssl-mode {mode!r} is not one of {', '.join(SSL_MODES)}")
        if mode.startswith("VERIFY") and not options.get("ssl-ca"):
            raise RuleError(f"--source {shown!r}: ssl-mode {mode} needs ssl-ca=PATH (the CA that signed the primary's "
                            "certificate)")
        for name in ("ssl-ca", "ssl-cert", "ssl-key", "public-key"):
            try:  # a regular file of a side file's size: a FIFO blocked the start, /dev/zero never ended
                if options.get(name):
                    read_regular(options[name], SIDE_FILE_BYTES)
            except (OSError, ValueError) as exc:
                raise RuleError(f"--source {shown!r}: {name} {options[name]!r} is not a readable file: "
                                f"{getattr(exc, 'strerror', None) or exc}") from None
        return cls(unquote(parts.username or "root"), unquote(parts.password or ""), parts.hostname, port, mode,
                   options.get("ssl-ca") or None, options.get("ssl-cert") or None, options.get("ssl-key") or None,
                   options.get("public-key") or None, options.get("get-public-key", "0") in ("1", "true", "yes", "on"))

    def connect(self) -> pymysql.connections.Connection:
        """A session to the primary: TLS as ssl-mode says; caching_sha2_password's full
        authentication over TLS, or without it by RSA with the pinned or (get-public-key) asked key."""
        tls: dict[str, Any] = {}  # pymysql's TLS arguments
        if self.ssl_mode == "DISABLED":
            tls["ssl_disabled"] = True
        elif self.ssl_mode != "PREFERRED":
            tls = {"ssl": {"ca": self.ssl_ca, "verify_mode": self.ssl_mode != "REQUIRED",
                           "check_hostname": self.ssl_mode == "VERIFY_IDENTITY"}}
            if self.ssl_cert:
                tls["ssl"].update(cert=self.ssl_cert, key=self.ssl_key or self.ssl_cert)
        key = Path(self.public_key).read_bytes() if self.public_key else None
        conn = _PrimaryConnection(host=self.host, port=self.port, user=self.user, password=self.password,
                                  connect_timeout=5, read_timeout=READ_TIMEOUT, write_timeout=READ_TIMEOUT,
                                  autocommit=True, server_public_key=key, defer_connect=True, **tls)
        conn.may_ask_key = self.get_public_key
        conn.connect()
        return conn

    def __str__(self) -> str:
        return f"{self.user}@{self.host}:{self.port}"


class SourceReplicator:
    """A thread that keeps `mirror` up to date with the primary."""

    def __init__(self, url: SourceURL | list[SourceURL], mirror: BinlogMirror, *, server_id: int = 2387,
                 start_file: str | None = None, start_gtid: str | None = None, start_pos: int = 4,
                 failover_after: int = FAILOVER_AFTER):
        # The candidates (--source, repeated), in order; `current` is the one read.
        self.urls = list(url) if isinstance(url, (list, tuple)) else [url]
        self.failover_after = failover_after  # failed tries in a row before the other candidates are asked
        self.current = 0
        self.mirror, self.server_id = mirror, server_id
        self.switches, self.changed_at = 0, _now()
        self._switch_to: int | None = None  # a candidate that holds the series' last GTID, next to read
        self._refused: set[SourceURL] = set()  # candidates named as diverged in this outage
        if mirror.translating and mirror.safe is not None:
            self._switch_to = 0  # a series a switch left: continued by GTID, in a new file
        self.start_file, self.start_gtid, self.start_pos = start_file, start_gtid, start_pos
        self.stop_event = threading.Event()
        self.connected = threading.Event()
        self.reconnects = 0
        self.last_error: str | None = None
        # What `master status` and the metrics show: the state (connecting, streaming, full,
        # stopped), since when, and how many times the series could not grow.
        self.state, self.since = "connecting", _now()
        self.full_stalls = 0
        self._full_at: tuple[str, int] | None = None  # where the series ended when it filled up
        self.retention = None  # set by `master serve` with --expire-logs-seconds / --max-series-bytes
        self._conn: Connection[Cursor] | None = None
        self._thread = threading.Thread(target=self._run, name="source-replicator", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self.stop_event.set()
        self._set_state("stopped")
        conn = self._conn
        if conn is not None:
            with contextlib.suppress(Exception):
                conn._sock.shutdown(2)  # type: ignore[attr-defined]  # (pymysql's socket: its stubs leave it out)
        self._thread.join(10)
        self.mirror.close()

    def wait_ready(self, timeout: float) -> bool:
        """True once the first file of the series exists (the dump service needs one)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and not self.stop_event.is_set():
            files = self.mirror.files()
            if files and file_size(self.mirror.dir / files[0], 0) > 4:
                return True
            if self.last_error and self.reconnects == 0 and not self.connected.is_set() and self._fatal:
                return False
            time.sleep(0.05)
        return bool(self.mirror.files())

    _fatal = False

    # -- the loop ---------------------------------------------------------------------------
    def _run(self) -> None:
        attempt = lost = 0  # lost: failed tries of the current source in a row
        while not self.stop_event.is_set():
            safe = self.mirror.safe
            try:
                self._stream()
                attempt = 0
            except SeriesFull as exc:
                self.last_error = str(exc)
                if self._full_at is None:  # one line per stall, however many retries it takes
                    self._full_at = exc.end
                    self.full_stalls += 1
                    self._set_state("full")
                    log.warning("source %s: %s", self.url, exc)
            except MirrorError as exc:
                self.last_error, self._fatal = str(exc), True
                self._set_state("stopped")
                log.error("source %s: %s; the series stops here", self.url, exc)
                return
            except (pymysql.err.MySQLError, OSError, DumpFilterError) as exc:
                self.last_error = _describe(exc)
                if _fatal_mysql(exc):
                    self._fatal = True
                    self._set_state("stopped")
                    log.error("source %s: %s; not retrying", self.url, self.last_error)
                    return
                if not self.stop_event.is_set():
                    log.warning("source %s: %s; reconnecting", self.url, self.last_error)
                lost += 1
                if lost >= self.failover_after and len(self.urls) > 1 and not self.stop_event.is_set():
                    self._failover()
                    lost = 0
            finally:
                self.connected.clear()
                if self._conn is not None:
                    with contextlib.suppress(Exception):
                        self._conn.close()
                    self._conn = None
            if self.mirror.safe != safe and self._full_at is None:
                attempt = lost = 0  # the stream made progress: a new outage starts its backoff afresh
            elif self._full_at is None:
                self._set_state("connecting")
            if self.stop_event.wait(BACKOFF[min(attempt, len(BACKOFF) - 1)]):
                return
            attempt += 1
            self.reconnects += 1

    @property
    def url(self) -> SourceURL:
        return self.urls[self.current]

    def _failover(self) -> None:
        """The current source stays unreachable: the first other candidate (in order) whose binlog
        holds the series' last GTID is read next, by GTID. One that refuses the series' GTID
        position (MariaDB's gtid_strict_mode check: it lacks that GTID, or holds another
        transaction under it) is named with that GTID, once per outage. A series with no
        transaction yet simply moves to the next candidate."""
        if self.mirror.safe is None or not self.mirror.gtids.mariadb:
            self.current = (self.current + 1) % len(self.urls)
            return
        position = self.mirror.gtid_position()
        for i, url in enumerate(self.urls):
            if i == self.current:
                continue
            try:
                conn, _data, _at = self._open(url, position)
                conn.close()
            except pymysql.err.MySQLError as exc:
                if exc.args and exc.args[0] == 1236 and url not in self._refused:
                    self._refused.add(url)
                    log.warning("source %s refused: its binlog does not continue the series at GTID %s (%s)", url,
                                position, _describe(exc))
                continue
            except (OSError, DumpFilterError):
                continue
            self._switch_to = i
            return

    def _set_state(self, state: str) -> None:
        if state != self.state:
            self.state, self.since = state, _now()

    def _grew(self) -> None:
        """A whole transaction past where the series filled up is written: space is back."""
        full_at = self._full_at
        assert full_at is not None, "the series grew past where it filled up"
        log.warning("source %s: the series grows again after %s:%s", self.url, *full_at)
        self._full_at = None
        self._set_state("streaming")

    def status(self) -> dict[str, Any]:
        """The source's part of `master status` and the metrics (with the series' retention's
        counters when `retention`, a master.upstream.retention.SeriesRetention, is set)."""
        retention = self.retention
        return {"source": str(self.url), "state": self.state, "since": self.since.isoformat(timespec="seconds"),
                "switches": self.switches, "changed_at": self.changed_at.isoformat(timespec="seconds"),
                "full_stalls": self.full_stalls, "reconnects": self.reconnects, "last_error": self.last_error or "",
                "series_bytes": self.mirror.series_bytes(),
                "purged_files": retention.purged_files if retention else 0,
                "forced_purges": retention.forced if retention else 0}

    def _open(self, url: SourceURL, gtid: str | None) -> tuple[Connection[Cursor], bytes, tuple[str, int] | str]:
        """Connects to `url` and starts its dump: by GTID (`gtid`, with gtid_strict_mode, so a
        source whose binlog has diverged refuses with 1236), else at the series' position (the
        local file cut back to it). A MySQL primary with gtid_mode ON is read by GTID with the
        series' executed set (`_dump_mysql_gtid`). Returns (connection, the first packet, where it
        started)."""
        conn = url.connect()
        try:
            mysql = not _is_mariadb(conn)
            with conn.cursor() as cur:
                by_mysql_gtid = mysql and self._mysql_by_gtid(cur)
                if by_mysql_gtid and gtid is not None:
                    raise DumpFilterError(f"source {url}: a MySQL primary cannot continue a series by MariaDB GTID "
                                          "(failover between MySQL primaries is not supported)")
                self.mirror.checksums = _checksums(cur, mysql)
                cur.execute(f"SET @master_heartbeat_period = {int(HEARTBEAT_PERIOD * 1e9)}")
                if mysql:  # MySQL 8.0.26+ reads this name (the old one for older servers)
                    cur.execute(f"SET @source_heartbeat_period = {int(HEARTBEAT_PERIOD * 1e9)}")
                if gtid is not None:
                    cur.execute("SET @slave_connect_state = %s", (gtid,))
                    cur.execute("SET @slave_gtid_strict_mode = 1")
                    cur.execute("SET @slave_gtid_ignore_duplicates = 0")
            if by_mysql_gtid:
                return conn, *self._dump_mysql_gtid(conn)
            file, pos = ("", 4) if gtid is not None else self._start_position(conn)
            # server_id, empty report_host, report_user and report_password, port, rank, master_id
            send_command(conn, COM_REGISTER_SLAVE, struct.pack("<I3BHII", self.server_id, 0, 0, 0, 0, 0, 0))
            read_packet(conn)
            if gtid is None:
                self.mirror.begin(file, pos)
            send_command(conn, COM_BINLOG_DUMP, struct.pack("<IHI", pos, BINLOG_SEND_ANNOTATE_ROWS_EVENT,
                                                            self.server_id) + file.encode())
            data = read_packet(conn)  # raises the source's ERR packet as a MySQLError
        except BaseException:
            conn.close()
            raise
        return conn, data, (file, pos) if gtid is None else gtid

    def _mysql_by_gtid(self, cur: Cursor) -> bool:
        """Whether a MySQL primary is read by GTID: its gtid_mode is ON, and the series holds
        something or is not asked to start at a given file (--source-file, --source-gtid: a new
        series starts at a file's start, by position)."""
        cur.execute("SELECT @@global.gtid_mode")
        row = cur.fetchone()
        if not row or str(row[0]).upper() != "ON":
            return False
        return self.mirror.resume_position() is not None or not (self.start_file or self.start_gtid)

    def _dump_mysql_gtid(self, conn: Connection[Cursor]) -> tuple[bytes, str]:
        """COM_BINLOG_DUMP_GTID, as a MySQL 8.4 replica sends it with SOURCE_AUTO_POSITION=1: no
        file name, position 4, its executed set (the series', or --source-gtid for a new series; in
        MySQL 8.3+'s tagged encoding when it holds tags), heartbeats v2. The mirror checks what is
        re-sent against the series. Returns (the first packet, where the dump started)."""
        executed = self.mirror.gtids.mysql
        encoded = executed.encode()
        send_command(conn, COM_REGISTER_SLAVE, struct.pack("<I3BHII", self.server_id, 0, 0, 0, 0, 0, 0))
        read_packet(conn)
        self.mirror.begin_gtid()
        send_command(conn, COM_BINLOG_DUMP_GTID, struct.pack("<HIIQI", BINLOG_THROUGH_GTID | USE_HEARTBEAT_EVENT_V2,
                                                             self.server_id, 0, 4, len(encoded)) + encoded)
        data = read_packet(conn)  # raises the primary's ERR packet as a MySQLError
        return data, f"GTID set '{executed}'"

    def _stream(self) -> None:
        target = self._switch_to
        by_gtid = target is not None or self.mirror.translating
        try:
            conn, data, at = self._open(self.urls[target] if target is not None else self.url,
                                        self.mirror.gtid_position() if by_gtid else None)
        except pymysql.err.MySQLError as exc:
            if target is not None and exc.args and exc.args[0] == 1236:  # it diverged since it was asked
                self._switch_to = None
                raise DumpFilterError(f"source {self.urls[target]} refused the series' GTID position "
                                      f"{self.mirror.gtid_position()}: {_describe(exc)}") from None
            raise
        self._conn = conn
        if target is not None:
            self.current = target
            old = self.mirror.safe
            name = self.mirror.switch()  # a full disk here: the switch is made again at the next try
            assert old is not None  # (a switch refuses a series without a file)
            self._switch_to = None
            self.switches, self.changed_at = self.switches + 1, _now()
            self._refused = set()
            log.warning("source: now %s, from the series' GTID position %s (after %s:%s); the series continues in %s",
                        self.url, at, *old, name)
        elif by_gtid:
            safe = self.mirror.safe
            assert safe is not None, "a series read by GTID has a file"
            self.mirror.begin(*safe)  # cut back to the last whole unit, as a file resume does
        self.connected.set()
        if self._full_at is None:
            self._set_state("streaming")
        log.info("source %s: streaming from %s into %s", self.url, at, self.mirror.dir)
        while True:
            if data[:1] == b"\xfe" and len(data) < 9:
                raise DumpFilterError("the primary ended the dump (EOF)")
            self.mirror.event(data[1:])
            if self._full_at is not None and self.mirror.safe != self._full_at:
                self._grew()
            if self.stop_event.is_set():
                return
            data = read_packet(conn)  # raises the primary's ERR packet as a MySQLError

    def _start_position(self, conn: Connection[Cursor]) -> tuple[str, int]:
        resume = self.mirror.resume_position()
        if resume is not None:
            return resume
        with conn.cursor() as cur:
            cur.execute("SHOW BINARY LOGS")
            names = [row[0] for row in cur.fetchall()]
            if not names:
                raise MirrorError("the primary has no binary logs (it runs without --log-bin)")
            if self.start_file:
                if self.start_file not in names:
                    raise MirrorError(f"--source-file {self.start_file!r} is not among the primary's binary logs "
                                      f"({names[0]} .. {names[-1]})")
                if self.start_pos > 4:
                    return self._start_inside(self.start_file, self.start_pos, not _is_mariadb(conn))
                return self.start_file, 4
            if self.start_gtid is not None:
                if not _is_mariadb(conn):
                    return self._start_inside(self._mysql_file_for_gtid(self.start_gtid), 0, True,
                                              lacking=MysqlGtidSet.parse(self.start_gtid))
                return _file_for_gtid(cur, names, self.start_gtid), 4
            return names[0], 4

    def _start_inside(self, file: str, pos: int, mysql: bool, lacking: MysqlGtidSet | None = None) -> tuple[str, int]:
        """Reads the primary's `file` up to `pos` (or, `lacking`, up to the first transaction the
        set lacks) on a second session and begins the series there with its own head (mid_file).
        --source-pos P inside --source-file F: P must end a whole transaction, and the series' F is
        created with its own head up to P (a MariaDB Gtid_list, or a MySQL Previous_gtids with the
        executed set at P); the dump continues from P.
        A MySQL --source-gtid whose first lacking transaction is the file's first, or sits too close
        to the file's start for the head, takes the file from 4."""
        head_conn = self.url.connect()
        try:
            with head_conn.cursor() as cur:
                _checksums(cur, mysql)
            fde, state, pos = read_head(head_conn, file, pos, self.server_id, mysql=mysql, lacking=lacking)
        finally:
            head_conn.close()
        if pos == 4:
            return file, 4
        try:
            head = series_head(fde, state, pos)
        except MidFileError:
            if lacking is None:
                raise
            return file, 4
        self.mirror.begin_inside(file, pos, head, state)
        log.info("source %s: the series starts inside %s at %s (%s %s)", self.url, file, pos,
                 "executed GTID set" if mysql else "binlog state",
                 state if isinstance(state, MysqlGtidSet) else MariadbGtidList(state))
        return file, pos

    def _mysql_file_for_gtid(self, gtid: str) -> str:
        """The file a MySQL primary's dump thread starts at for --source-gtid (the newest whose
        Previous_gtids the set covers; MySQL has no BINLOG_GTID_POS): the artificial Rotate that
        a COM_BINLOG_DUMP_GTID with the set begins with names it. The series starts in that file
        at the first transaction the set lacks (`_start_inside`); what follows is taken whole, the
        transactions the set holds after it included (a dump by position, as --source-pos)."""
        try:
            encoded = MysqlGtidSet.parse(gtid).encode()
        except GtidSetError as exc:
            raise MirrorError(f"--source-gtid: {exc} (a MySQL primary takes a MySQL GTID set)") from None
        conn = self.url.connect()
        try:
            with conn.cursor() as cur:
                crc = 4 if _checksums(cur, True) else 0
            send_command(conn, COM_BINLOG_DUMP_GTID, struct.pack("<HIIQI", BINLOG_DUMP_NON_BLOCK | BINLOG_THROUGH_GTID,
                                                                 self.server_id, 0, 4, len(encoded)) + encoded)
            raw = read_packet(conn)[1:]
        finally:
            conn.close()
        if len(raw) < 27 + crc or raw[4] != 4:  # ROTATE_EVENT
            raise MirrorError(f"--source-gtid: the primary's dump by GTID did not begin with a Rotate (type {raw[4:5]!r})")
        name = raw[27:len(raw) - crc].decode("utf-8", "replace")
        log.info("source %s: --source-gtid %s starts at %s", self.url, gtid, name)
        return name


def _file_for_gtid(cur: Cursor, names: list[str], gtid: str) -> str:
    """The newest primary file whose starting GTID position the state covers (MariaDB)."""
    state = GtidState.parse(gtid)
    if state.limits is None:
        raise MirrorError("--source-gtid takes a MariaDB GTID position (domain-server-seq,...)")
    for name in reversed(names):
        cur.execute("SELECT BINLOG_GTID_POS(%s, 4)", (name,))
        row = cur.fetchone()
        text = (row[0] or "") if row else ""
        before = GtidState.parse(text) if text.strip() else GtidState("", limits={})
        assert before.limits is not None, "BINLOG_GTID_POS answers a MariaDB GTID position"
        if all(seq <= state.limits.get(domain, -1) for domain, seq in before.limits.items()):
            return name
    raise MirrorError(f"--source-gtid {gtid!r}: the primary's binary logs no longer hold every transaction after it "
                      f"(the oldest, {names[0]}, starts later)")


class _PrimaryConnection(pymysql.connections.Connection):
    """pymysql's connection, but caching_sha2_password's request for the server's RSA key (a 0x02
    packet) is sent only when the URL allows it (get-public-key=1): a key asked over a plain
    connection can be anybody's. Otherwise it is refused as a MySQL client refuses it (2061)."""

    may_ask_key = False

    def write_packet(self, payload: bytes) -> None:
        secure = self._secure  # type: ignore[attr-defined]  # (pymysql's own state: its stubs leave it out)
        if payload == b"\x02" and not secure and not self.may_ask_key and not self.server_public_key:
            raise pymysql.err.OperationalError(CR_AUTH_PLUGIN_ERR, "Authentication plugin 'caching_sha2_password' "
                                               "reported error: Authentication requires secure connection (use "
                                               "ssl-mode, public-key=PATH or get-public-key=1 in the --source URL)")
        return super().write_packet(payload)


def _checksums(cur: Cursor, mysql: bool) -> bool:
    """Tells the primary that this reader takes the checksums it writes (MySQL 8.0.26+ reads
    @source_binlog_checksum, older servers the @master_ name) and, of a MariaDB primary, the
    events of its GTID era (capability 4); whether its events carry a checksum."""
    cur.execute("SET @master_binlog_checksum = @@global.binlog_checksum")
    cur.execute("SET @source_binlog_checksum = @master_binlog_checksum" if mysql
                else "SET @mariadb_slave_capability = 4")
    cur.execute("SELECT @master_binlog_checksum")
    row = cur.fetchone()
    return bool(row and row[0] and str(row[0]).upper() != "NONE")


def _is_mariadb(conn: Connection[Cursor]) -> bool:
    info: str = conn.get_server_info()  # type: ignore[no-untyped-call]  # (pymysql's stubs leave it untyped)
    return "mariadb" in info.lower()


def _now() -> datetime:
    return datetime.now(UTC)


def _describe(exc: BaseException) -> str:
    if isinstance(exc, pymysql.err.MySQLError) and len(exc.args) >= 2:
        return f"error {exc.args[0]}: {exc.args[1]}"
    return str(exc) or type(exc).__name__


def _fatal_mysql(exc: BaseException) -> bool:
    """Errors a retry cannot fix: credentials (1045), privileges (1227), a purged position (1236)."""
    return isinstance(exc, pymysql.err.MySQLError) and bool(exc.args) and exc.args[0] in (1045, 1227, 1236, 2026,
                                                                                          CR_AUTH_PLUGIN_ERR)
