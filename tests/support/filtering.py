"""Shared helpers for the filtering tests: engines from mysqld-style options, filtering bytes,
re-reading outputs, and synthetic transactions built with dumpfilter.codec.encode."""

from __future__ import annotations

import gzip
import io
import shutil
import subprocess
import tempfile
from pathlib import Path

from dumpfilter.codec import BinlogReader, Event, EventType, group_transactions
from dumpfilter.codec import encode as enc
from dumpfilter.codec.constants import STMT_END_F
from dumpfilter.rules.evaluate import RuleEngine
from dumpfilter.rules.ruleset import Settings
from dumpfilter.binlogs.filtering import FilterStats, filter_files
from dumpfilter.binlogs.sinks import FileSink
from dumpfilter.rules.parse import StartupFilters
from dumpfilter.rules.transaction_filter import TransactionFilter
from tests.oracles.filtering import reference_filter_bytes


def filter_bytes(data: bytes, tfilter: TransactionFilter, *, verify_checksums: bool = True) -> tuple[bytes, FilterStats]:
    """Filter one binlog held in memory into a new one, by the filter's path (`filter_files`)."""
    with tempfile.TemporaryDirectory(prefix="dumpfilter-") as tmp:
        src, dst = Path(tmp, "in.bin"), Path(tmp, "out.bin")
        src.write_bytes(data)
        stats = filter_files([src], tfilter, FileSink(dst), verify_checksums=verify_checksums)
        return dst.read_bytes(), stats


def per_unit_units(monkeypatch, which) -> list:
    """The units `TransactionFilter.filter` is handed from here on for which `which(txn)` holds:
    those that go the per-unit (Python) way rather than the compiled walk."""
    seen: list = []
    whole = TransactionFilter.filter

    def counted(self, txn):
        if which(txn):
            seen.append(txn)
        return whole(self, txn)

    monkeypatch.setattr(TransactionFilter, "filter", counted)
    return seen


def statement_without_gtid(txn) -> bool:
    """A statement alone with no GTID before it (MySQL 5.5, 5.6 with GTIDs off)."""
    return txn.kind != "control" and txn.gtid_event is None and len(txn.events) == 1


def engine(options=(), flavor: str = "mysql", lctn: int = 0) -> RuleEngine:
    return RuleEngine(StartupFilters.from_options(list(options)).for_channel(""),
                      Settings(flavor=flavor, lower_case_table_names=lctn))


def load(path: Path) -> bytes:
    return gzip.open(path).read() if path.suffix == ".gz" else path.read_bytes()


def events_of(data: bytes) -> list[Event]:
    return list(BinlogReader(io.BytesIO(data)))


def run(data: bytes, options=(), *, flavor: str = "mysql", empty: str = "keep", fast: bool = True):
    """(output bytes, stats, engine) of filtering `data` with `options`."""
    eng = engine(options, flavor)
    filter_ = filter_bytes if fast else reference_filter_bytes  # the reference: tests/oracles/filtering.py
    out, stats = filter_(data, TransactionFilter(eng, empty_transactions=empty))
    return out, stats, eng


def content_units(data: bytes):
    return [u for u in group_transactions(events_of(data)) if u.kind != "control"]


def assert_transaction_lengths(data: bytes) -> int:
    """Every MySQL GTID's transaction_length equals its transaction's real size; returns how many."""
    checked = 0
    for unit in group_transactions(events_of(data)):
        gtid = unit.gtid_event
        if gtid is not None and gtid.type_code != EventType.MARIADB_GTID and gtid.gtid_info.transaction_length:
            assert gtid.gtid_info.transaction_length == unit.size, unit.gtid
            checked += 1
    return checked


def assert_positions(data: bytes) -> None:
    """A server's own binlog: every non-zero log_pos is the event's end offset."""
    for event in events_of(data):
        assert event.log_pos in (0, event.end_pos), event


def mariadb_binlog_reads(path: Path) -> str:
    """mariadb-binlog decodes the file, checking CRCs; returns its SQL text."""
    tool = shutil.which("mariadb-binlog")
    assert tool, "mariadb-binlog not on PATH"
    run_ = subprocess.run([tool, "--no-defaults", "--verify-binlog-checksum", str(path)], capture_output=True)
    assert run_.returncode == 0, run_.stderr.decode()
    assert b"ERROR" not in run_.stderr, run_.stderr.decode()
    return run_.stdout.decode("utf-8", "replace")


class Synth:
    """Hand-built binlogs for shapes the generator never writes (multi-table rows statements)."""

    def __init__(self, flavor: str = "mariadb"):
        self.flavor = flavor
        version = "10.11.6-MariaDB-log" if flavor == "mariadb" else "8.0.36"
        self.fde = enc.format_description(version, timestamp=1_700_000_000)
        self.fmt = self.fde.fmt
        self.seq = 0
        self.events: list[Event] = [self.fde]

    def ev(self, type_code, body, flags=0) -> Event:
        return enc.build_event(type_code, body, fmt=self.fmt, timestamp=1_700_000_000, flags=flags)

    def gtid(self) -> Event:
        self.seq += 1
        if self.flavor == "mariadb":
            return self.ev(EventType.MARIADB_GTID, enc.mariadb_gtid_body(self.seq), flags=0x08)
        return self.ev(EventType.GTID, enc.mysql_gtid_body("6ba0ff1e-4d0b-11ef-9f4b-0242ac110002", self.seq,
                                                           transaction_length=1))

    def rows_txn(self, statements: list[list[tuple[int, str, str]]], rows_order=None) -> None:
        """One transaction; each statement is a list of (table_id, db, table); its rows events
        follow its Table_maps, the last carrying STMT_END_F."""
        body: list[Event] = [self.gtid()]
        if self.flavor == "mysql":
            body.append(self.ev(EventType.QUERY, enc.query_body("BEGIN", "")))
        for tables in statements:
            body.append(self.ev(EventType.ANNOTATE_ROWS if self.flavor == "mariadb" else EventType.ROWS_QUERY,
                                (b"" if self.flavor == "mariadb" else b"\x00") + b"UPDATE something"))
            for table_id, db, table in tables:
                body.append(self.ev(EventType.TABLE_MAP, enc.table_map_body(table_id, db, table, b"\x03\x03",
                                                                            nullable=b"\x02")))
            order = list(tables) if rows_order is None else [tables[i] for i in rows_order]
            for i, (table_id, _db, _table) in enumerate(order):
                image = b"\x00" + table_id.to_bytes(4, "little") + b"\x01\x00\x00\x00"
                body.append(self.ev(EventType.WRITE_ROWS_V1 if self.flavor == "mariadb" else EventType.WRITE_ROWS,
                                    enc.rows_body(table_id, image, ncols=2, v2=self.flavor != "mariadb",
                                                  flags=STMT_END_F if i == len(order) - 1 else 0)))
        body.append(self.ev(EventType.XID, enc.xid_body(self.seq)))
        self.events.extend(body)

    def bytes(self) -> bytes:
        out = io.BytesIO()
        from dumpfilter.codec import BinlogWriter

        writer = BinlogWriter(out, self.fde)
        for unit in group_transactions(self.events[1:]):
            writer.write_transaction(unit.events)
        return out.getvalue()
