"""The built-in workload generator: for a given seed, the same multi-schema binlog every time,
written through the codec's writer as files that mariadb-binlog reads and a server applies.

Tables are `(id INT NOT NULL PRIMARY KEY, v INT)`; the generator tracks every row, so row images
and statements always match the data a server replaying the binlog holds."""

from __future__ import annotations

import os
import random
import struct
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from dumpfilter.codec import Event, EventType
from dumpfilter.codec import encode as enc
from dumpfilter.codec.constants import LOG_EVENT_SUPPRESS_USE_F, STMT_END_F
from dumpfilter.binlogs import BinlogSeriesWriter

FORMATS = ("row", "statement", "mixed")
FLAVORS = ("mariadb", "mysql")
SERVER_UUID = "6ba0ff1e-4d0b-11ef-9f4b-0242ac110002"
COLUMN_TYPES = b"\x03\x03"  # MYSQL_TYPE_LONG, MYSQL_TYPE_LONG
TABLE_DDL = "CREATE TABLE `{table}` (id INT NOT NULL PRIMARY KEY, v INT) ENGINE=InnoDB"


@dataclass(frozen=True)
class WorkloadSpec:
    seed: int = 1
    schemas: int = 6
    tables_per_schema: int = 4
    transactions: int = 2000
    binlog_format: str = "row"
    ddl_share: float = 0.02
    cross_db_share: float = 0.1
    flavor: str = "mariadb"
    rows_per_statement: int = 3
    statements_per_transaction: int = 2
    max_binlog_size: int = 1 << 30
    server_id: int = 1
    schema_prefix: str = "db"
    # The share of statement-logged inserts written as INSERT ... SELECT of the same rows (the core
    # keys them apart); chosen by each insert's first id, so the random draws stay as they were.
    insert_select_share: float = 0.0

    def __post_init__(self) -> None:
        if self.binlog_format not in FORMATS:
            raise ValueError(f"binlog_format must be one of {FORMATS}, not {self.binlog_format!r}")
        if self.flavor not in FLAVORS:
            raise ValueError(f"flavor must be one of {FLAVORS}, not {self.flavor!r}")
        if self.schemas < 1 or self.tables_per_schema < 1:
            raise ValueError("a workload needs at least one schema and one table")
        if self.rows_per_statement < 1:
            raise ValueError(f"rows_per_statement must be at least 1, not {self.rows_per_statement}")
        if not 0 <= self.server_id <= 0xFFFFFFFF:  # an event header's 4 bytes
            raise ValueError(f"server_id must be in 0..4294967295, not {self.server_id}")

    @property
    def schema_names(self) -> list[str]:
        return [f"{self.schema_prefix}{i}" for i in range(1, self.schemas + 1)]


@dataclass
class _Table:
    db: str
    name: str
    table_id: int
    rows: dict[int, int] = field(default_factory=dict)
    next_id: int = 1


# One row a statement changes: (id, before, after); None where the row is not (an insert's
# before, a delete's after).
Change = tuple[int, int | None, int | None]


def _row_image(row_id: int, value: int | None) -> bytes:
    assert value is not None, "a row image of a row that is there (an insert's after, a delete's before)"
    return b"\x00" + struct.pack("<ii", row_id, value)  # null bitmap (no NULLs), id, v


class _Generator:
    def __init__(self, spec: WorkloadSpec):
        self.spec = spec
        self.rng = random.Random(spec.seed)
        version = "10.11.6-MariaDB-log" if spec.flavor == "mariadb" else "8.0.36"
        self.fde = enc.format_description(version, server_id=spec.server_id, timestamp=1_700_000_000,
                                          created=1_700_000_000)
        self.fmt = self.fde.fmt
        self.timestamp = 1_700_000_000
        self.seq = 0
        self.xid = 0
        self.tables: list[_Table] = []
        self.next_table_id = 100

    def event(self, type_code: int, body: bytes, flags: int = 0) -> Event:
        return enc.build_event(type_code, body, fmt=self.fmt, server_id=self.spec.server_id,
                               timestamp=self.timestamp, flags=flags)

    def gtid(self, *, standalone: bool) -> Event:
        self.seq += 1
        if self.spec.flavor == "mariadb":
            return self.event(EventType.MARIADB_GTID, enc.mariadb_gtid_body(self.seq, standalone=standalone), flags=0x08)
        # transaction_length is fixed by the writer once the transaction is complete.
        return self.event(EventType.GTID, enc.mysql_gtid_body(SERVER_UUID, self.seq, last_committed=self.seq - 1,
                                                              sequence_number=self.seq, transaction_length=1))

    def query(self, sql: str, db: str, flags: int = 0) -> Event:
        return self.event(EventType.QUERY, enc.query_body(sql, db), flags=flags)

    def ddl(self, sql: str, db: str, flags: int = 0) -> list[Event]:
        return [self.gtid(standalone=True), self.query(sql, db, flags)]

    def transaction(self, body: list[Event], db: str) -> list[Event]:
        self.xid += 1
        head = [self.gtid(standalone=False)]
        if self.spec.flavor == "mysql":
            head.append(self.query("BEGIN", db))
        return head + body + [self.event(EventType.XID, enc.xid_body(self.xid))]

    # -- content --------------------------------------------------------------------------
    def schema_setup(self) -> Iterator[list[Event]]:
        for db in self.spec.schema_names:
            # The server logs CREATE DATABASE with the new database as the event's db and
            # LOG_EVENT_SUPPRESS_USE_F, so that no `USE` of a not-yet-existing db precedes it.
            yield self.ddl(f"CREATE DATABASE `{db}`", db, flags=LOG_EVENT_SUPPRESS_USE_F)
            for t in range(1, self.spec.tables_per_schema + 1):
                table = _Table(db, f"t{t}", self.next_table_id)
                self.next_table_id += 1
                self.tables.append(table)
                yield self.ddl(TABLE_DDL.format(table=table.name), db)

    def change(self, table: _Table) -> tuple[str, list[Change]]:
        """One random statement's effect on `table`: (verb, [(id, before, after)])."""
        rng = self.rng
        n = self.spec.rows_per_statement
        verb = rng.choice(("insert", "insert", "update", "delete")) if table.rows else "insert"
        changes: list[Change] = []
        if verb == "insert":
            for _ in range(n):
                row_id, value = table.next_id, rng.randrange(1_000_000)
                table.next_id += 1
                table.rows[row_id] = value
                changes.append((row_id, None, value))
        else:
            # The ids in ascending order: rows are added with ever larger ids and a dict keeps the
            # order keys came in (an update keeps its place), so no sort (it grew with the table).
            for row_id in rng.sample(list(table.rows), min(n, len(table.rows))):
                before = table.rows[row_id]
                if verb == "update":
                    after = rng.randrange(1_000_000)
                    table.rows[row_id] = after
                    changes.append((row_id, before, after))
                else:
                    del table.rows[row_id]
                    changes.append((row_id, before, None))
        return verb, changes

    def statement_sql(self, table: _Table, verb: str, changes: list[Change], qualified: bool) -> str:
        name = f"`{table.db}`.`{table.name}`" if qualified else f"`{table.name}`"
        if verb == "insert":
            if (changes[0][0] * 2654435761) % 1000 < self.spec.insert_select_share * 1000:
                return f"INSERT INTO {name} (id, v) " + " UNION ALL ".join(f"SELECT {i}, {a}" for i, _, a in changes)
            return f"INSERT INTO {name} (id, v) VALUES " + ", ".join(f"({i}, {a})" for i, _, a in changes)
        ids = ", ".join(str(i) for i, _, _ in changes)
        if verb == "delete":
            return f"DELETE FROM {name} WHERE id IN ({ids})"
        cases = " ".join(f"WHEN {i} THEN {a}" for i, _, a in changes)
        return f"UPDATE {name} SET v = CASE id {cases} END WHERE id IN ({ids})"

    def rows_events(self, table: _Table, verb: str, changes: list[Change], *, last: bool) -> list[Event]:
        v1 = self.spec.flavor == "mariadb"
        type_code = {("insert", True): EventType.WRITE_ROWS_V1, ("insert", False): EventType.WRITE_ROWS,
                     ("update", True): EventType.UPDATE_ROWS_V1, ("update", False): EventType.UPDATE_ROWS,
                     ("delete", True): EventType.DELETE_ROWS_V1, ("delete", False): EventType.DELETE_ROWS}[(verb, v1)]
        # Each row's before image, then its after image: whichever of them the row has.
        image = b"".join(_row_image(i, v) for i, b, a in changes for v in (b, a) if v is not None)
        tmap = self.event(EventType.TABLE_MAP, enc.table_map_body(table.table_id, table.db, table.name,
                                                                  COLUMN_TYPES, nullable=b"\x02"))
        rows = self.event(type_code, enc.rows_body(table.table_id, image, ncols=2, v2=not v1, update=verb == "update",
                                                   flags=STMT_END_F if last else 0))
        return [tmap, rows]

    def dml_transaction(self) -> list[Event]:
        rng = self.rng
        spec = self.spec
        row_format = spec.binlog_format == "row" or (spec.binlog_format == "mixed" and rng.random() < 0.3)
        default_db = rng.choice(spec.schema_names)
        body: list[Event] = []
        for _ in range(max(1, spec.statements_per_transaction)):
            cross = rng.random() < spec.cross_db_share
            candidates = [t for t in self.tables if (t.db != default_db) == cross] or self.tables
            table = rng.choice(candidates)
            verb, changes = self.change(table)
            sql = self.statement_sql(table, verb, changes, qualified=table.db != default_db)
            if row_format:
                if spec.flavor == "mariadb":
                    body.append(self.event(EventType.ANNOTATE_ROWS, sql.encode()))
                body.extend(self.rows_events(table, verb, changes, last=True))
            else:
                body.append(self.query(sql, default_db))
        return self.transaction(body, default_db)

    def ddl_transaction(self) -> list[Event]:
        db = self.rng.choice(self.spec.schema_names)
        n = self.rng.randrange(1000)
        if self.rng.random() < 0.5:
            return self.ddl(f"CREATE TABLE IF NOT EXISTS `scratch_{n}` (id INT PRIMARY KEY)", db)
        return self.ddl(f"DROP TABLE IF EXISTS `scratch_{n}`", db)

    def units(self) -> Iterator[list[Event]]:
        yield from self.schema_setup()
        for _ in range(self.spec.transactions):
            self.timestamp += self.rng.randrange(2)
            if self.rng.random() < self.spec.ddl_share:
                yield self.ddl_transaction()
            else:
                yield self.dml_transaction()


def generate(spec: WorkloadSpec, directory: str | os.PathLike[str], basename: str = "master-bin") -> list[Path]:
    """Write the workload as `<basename>.000001`, ... and `<basename>.index` in `directory`."""
    gen = _Generator(spec)
    initial = gen.event(EventType.MARIADB_GTID_LIST, b"\0" * 6) if spec.flavor == "mariadb" else None
    with BinlogSeriesWriter(directory, basename, gen.fde, max_size=spec.max_binlog_size,
                            start_state=initial) as series:
        for unit in gen.units():
            series.write_transaction(unit)
    return series.close()
