"""Content snapshots of a server's tables, and human-readable diffs between two of them."""

from __future__ import annotations

import datetime
import decimal
import difflib
import hashlib
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from dumpfilter.rules.ruleset import quote_identifier

from .server import MariaDBServer

if TYPE_CHECKING:
    import pymysql


SYSTEM_SCHEMAS = ("mysql", "information_schema", "performance_schema", "sys")
_AUTO_INC = re.compile(r" AUTO_INCREMENT=\d+")
_MOD = 1 << 256
MAX_ROWS = 100_000  # a table's rows kept for the row-by-row diff; past it, its hash alone
MAX_ROWS_SHOWN = 10  # differing rows listed per table

Row = tuple[str, ...]


@dataclass(frozen=True)
class TableSnapshot:
    """One table: normalised definition, row count, order-independent content hash.

    Rows are canonical text per value (strings quoted, NULL bare, bytes as 0x..),
    kept sorted when the table has at most MAX_ROWS rows, else None.
    """

    schema: str
    table: str
    definition: str
    columns: tuple[str, ...]
    key_columns: tuple[str, ...]  # primary key; () when the table has none
    row_count: int
    content_hash: str
    rows: tuple[Row, ...] | None = field(default=None, repr=False)


@dataclass(frozen=True)
class Snapshot:
    label: str
    schemas: tuple[str, ...]
    tables: dict[tuple[str, str], TableSnapshot]

    def table(self, schema: str, table: str) -> TableSnapshot:
        return self.tables[(schema, table)]


def _canon(v: Any) -> str:
    if v is None:
        return "NULL"
    if isinstance(v, bool):
        return str(int(v))
    if isinstance(v, int | decimal.Decimal):
        return str(v)
    if isinstance(v, float):
        return repr(v)
    if isinstance(v, bytes | bytearray):
        return "0x" + bytes(v).hex()
    if isinstance(v, datetime.datetime | datetime.date | datetime.time):
        return repr(v.isoformat())
    if isinstance(v, datetime.timedelta):
        return repr(str(v))
    if isinstance(v, set):
        return repr(",".join(sorted(v)))
    return repr(str(v))


def _row_digest(row: Row) -> int:
    return int.from_bytes(hashlib.sha256("\x1f".join(row).encode()).digest(), "big")


def snapshot(server: MariaDBServer, *, schemas: Iterable[str] | None = None) -> Snapshot:
    """Snapshot every base table of `schemas` (default: all but SYSTEM_SCHEMAS).

    The content hash is order independent (sum of per-row SHA-256), so it does
    not depend on collation or scan order. Views, routines and triggers are not
    captured.
    """
    excluded = {s.lower() for s in SYSTEM_SCHEMAS}
    with server.connect() as conn, conn.cursor() as cur:
        cur.execute("SELECT SCHEMA_NAME FROM information_schema.SCHEMATA")
        all_schemas = sorted(r[0] for r in cur.fetchall())
        if schemas is not None:
            wanted = set(schemas)
            names = [s for s in all_schemas if s in wanted]
        else:
            names = [s for s in all_schemas if s.lower() not in excluded]
        tables: dict[tuple[str, str], TableSnapshot] = {}
        for schema in names:
            cur.execute(
                "SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA=%s"
                " AND TABLE_TYPE IN ('BASE TABLE','SYSTEM VERSIONED') ORDER BY TABLE_NAME",
                (schema,),
            )
            for (table,) in cur.fetchall():
                tables[(schema, table)] = _table_snapshot(conn, schema, table)
    return Snapshot(label=server.name, schemas=tuple(names), tables=tables)


def _table_snapshot(conn: pymysql.connections.Connection[Any], schema: str, table: str) -> TableSnapshot:
    fq = f"{quote_identifier(schema)}.{quote_identifier(table)}"
    with conn.cursor() as cur:
        cur.execute(f"SHOW CREATE TABLE {fq}")
        definition = _AUTO_INC.sub("", cur.fetchone()[1])
        cur.execute(
            "SELECT COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA=%s"
            " AND TABLE_NAME=%s ORDER BY ORDINAL_POSITION",
            (schema, table),
        )
        columns = tuple(r[0] for r in cur.fetchall())
        cur.execute(
            "SELECT COLUMN_NAME FROM information_schema.STATISTICS WHERE TABLE_SCHEMA=%s"
            " AND TABLE_NAME=%s AND INDEX_NAME='PRIMARY' ORDER BY SEQ_IN_INDEX",
            (schema, table),
        )
        key_columns = tuple(r[0] for r in cur.fetchall())
    total = count = 0
    kept: list[Row] | None = []
    import pymysql.cursors  # on first use (see sandbox.server)

    with conn.cursor(pymysql.cursors.SSCursor) as cur:
        cur.execute(f"SELECT {', '.join(map(quote_identifier, columns))} FROM {fq}")
        for raw in cur:
            row = tuple(_canon(v) for v in raw)
            total = (total + _row_digest(row)) % _MOD
            count += 1
            if kept is not None:
                if count > MAX_ROWS:
                    kept = None
                else:
                    kept.append(row)
    return TableSnapshot(
        schema=schema,
        table=table,
        definition=definition,
        columns=columns,
        key_columns=key_columns,
        row_count=count,
        content_hash=f"{count}:{total:064x}",
        rows=tuple(sorted(kept)) if kept is not None else None,
    )


def _fmt_row(columns: tuple[str, ...], row: Row) -> str:
    return "(" + ", ".join(f"{c}={v}" for c, v in zip(columns, row)) + ")"


def _row_diffs(a: TableSnapshot, b: TableSnapshot, la: str, lb: str, limit: int) -> list[str]:
    if a.rows is None or b.rows is None:
        return ["  (rows not retained: table larger than max_rows)"]
    out: list[str] = []
    if a.columns != b.columns:
        return [f"  columns differ: {la}={a.columns} {lb}={b.columns}"]
    cols = a.columns
    if a.key_columns and a.key_columns == b.key_columns:
        idx = [cols.index(c) for c in a.key_columns]
        ka = {tuple(r[i] for i in idx): r for r in a.rows}
        kb = {tuple(r[i] for i in idx): r for r in b.rows}
        for key in sorted(ka.keys() | kb.keys()):
            ra, rb = ka.get(key), kb.get(key)
            if ra == rb:
                continue
            keytxt = ", ".join(f"{c}={v}" for c, v in zip(a.key_columns, key))
            if rb is None:
                assert ra is not None  # (a key of a's or b's, and the two differ)
                out.append(f"  row only on {la}: {_fmt_row(cols, ra)}")
            elif ra is None:
                out.append(f"  row only on {lb}: {_fmt_row(cols, rb)}")
            else:
                changed = ", ".join(
                    f"{c}: {x} -> {y}" for c, x, y in zip(cols, ra, rb) if x != y
                )
                out.append(f"  row ({keytxt}) differs {la} -> {lb}: {changed}")
    else:
        ca, cb = Counter(a.rows), Counter(b.rows)
        for side, only in ((la, ca - cb), (lb, cb - ca)):
            out += [f"  row only on {side}{f' (x{n})' if n > 1 else ''}: {_fmt_row(cols, row)}"
                    for row, n in sorted(only.items())]
    if len(out) > limit:
        out = out[:limit] + [f"  ... and {len(out) - limit} more differing rows"]
    return out


def diff_snapshots(a: Snapshot, b: Snapshot) -> list[str]:
    """Human-readable differences between two snapshots (at most MAX_ROWS_SHOWN differing rows a
    table); [] when identical."""
    la, lb = a.label or "A", b.label or "B"
    if la == lb:
        la, lb = f"{la} (A)", f"{lb} (B)"
    a_schemas, b_schemas = set(a.schemas), set(b.schemas)
    out = [f"schema {s}: missing on {lb}" for s in sorted(a_schemas - b_schemas)]
    out += [f"schema {s}: only on {lb} (missing on {la})" for s in sorted(b_schemas - a_schemas)]
    at, bt = a.tables, b.tables
    for key in sorted(at.keys() | bt.keys()):
        name = f"{key[0]}.{key[1]}"
        ta, tb = at.get(key), bt.get(key)
        if tb is None:
            if key[0] in b_schemas:  # whole-schema absence already reported
                assert ta is not None  # (a key of a's or b's)
                out.append(f"table {name}: missing on {lb} ({ta.row_count} rows on {la})")
            continue
        if ta is None:
            if key[0] in a_schemas:
                out.append(f"table {name}: only on {lb} ({tb.row_count} rows), missing on {la}")
            continue
        if ta.definition != tb.definition:
            udiff = difflib.unified_diff(
                ta.definition.splitlines(), tb.definition.splitlines(), la, lb, lineterm="", n=0
            )
            lines = [ln for ln in udiff if not ln.startswith("@@")]
            out.append(f"table {name}: definition differs\n  " + "\n  ".join(lines))
        if ta.content_hash != tb.content_hash:
            head = f"table {name}: content differs"
            if ta.row_count != tb.row_count:
                head += f" (row count {la}={ta.row_count} {lb}={tb.row_count})"
            else:
                head += f" ({ta.row_count} rows on both)"
            out.append("\n".join([head, *_row_diffs(ta, tb, la, lb, MAX_ROWS_SHOWN)]))
    return out
