"""What the simulation report shows beside its per-slave rows (issue #60, goals 2 and 4): the
bytes by table (experiment's counting: each slave's top tables, then the statements that name no
table and the framing and control row) and every stream's time, as CSV rows and HTML sections
(their tables made as all of report.html's are, `_table`)."""

from __future__ import annotations

import html
from collections.abc import Collection
from pathlib import Path
from typing import Any

from dumpfilter.lab.simulate.report import mb

TOP_TABLES = 10
STREAM_FIELDS = ["slave", "role", "skip_policy", "wall_seconds", "bytes_read", "bytes_sent"]


def top_tables(report: dict[str, Any], slave: str, count: int = TOP_TABLES) -> list[dict[str, Any]]:
    """A slave's `count` largest tables (by bytes in the binlog), then its rows that are no table
    (statements naming none, framing and control events): together with the rest, its bytes."""
    mine = [r for r in report.get("by_table") or () if r["slave"] == slave]
    named = [r for r in mine if not r["table"].startswith("(")]
    return named[:count] + [r for r in mine if r["table"].startswith("(")]


def write_csvs(report: dict[str, Any], out: Path) -> list[Path]:
    """report_by_table.csv (every slave's every table, as experiment's bandwidth_by_table) and
    report_streams.csv (every stream's time), by experiment's table writer."""
    from dumpfilter.spark_jobs.bandwidth_experiment import TABLE_COLUMNS, _write_table

    return [_write_table(rows, fields, out / name, "csv")
            for name, fields, rows in (("report_by_table", TABLE_COLUMNS, report.get("by_table")),
                                       ("report_streams", STREAM_FIELDS, report.get("streams"))) if rows is not None]


def _e(value: object) -> str:
    """A cell's text as HTML (None: empty); report.html's cells too."""
    return html.escape("" if value is None else str(value))


def _table(headers: list[str], rows: list[list[Any]], numeric: Collection[int] = frozenset(), cls: str = "",
           row_classes: list[str] | None = None) -> str:
    head = "".join(f"<th>{_e(h)}</th>" for h in headers)
    body = []
    for n, row in enumerate(rows):
        texts = (cell if isinstance(cell, _Raw) else _e(cell) for cell in row)
        cells = "".join(f'<td class="num">{t}</td>' if i in numeric else f"<td>{t}</td>" for i, t in enumerate(texts))
        mark = row_classes[n] if row_classes else ""
        body.append((f'<tr class="{mark}">' if mark else "<tr>") + cells + "</tr>")
    return f'<table class="{cls}"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>'


class _Raw(str):
    """Cell content that is already HTML."""


def html_sections(report: dict[str, Any]) -> str:
    """The bytes by table (a table per slave: its top tables, then the rows that are no table)
    and every stream's time, as HTML."""
    parts = []
    if report.get("by_table"):
        parts.append("<h2>Bytes by table</h2><p class=\"meta\">Each table's payload, its Table_map and Rows "
                     "events and the statements that update it (with their context events; split evenly between "
                     "the tables a statement updates), and its envelope, its share of the GTID, BEGIN, annotations "
                     "and XID/COMMIT of the transactions that write it (split evenly between the tables each one "
                     "writes), sent as each slave's rules decide; the control events and the framing of "
                     f"transactions that write no table in a row of their own. The {TOP_TABLES} largest tables "
                     "per slave; report_by_table.csv holds every one, payload and envelope apart.</p>")
        for slave in dict.fromkeys(r["slave"] for r in report["by_table"]):
            rows = [[r["table"], mb(r["bytes_all"]), mb(r.get("bytes_envelope", 0)), mb(r["bytes_sent"])]
                    for r in top_tables(report, slave)]
            parts.append(f"<h3>{_e(slave)}</h3>" + _table(["table", "MB in the binlog", "of which envelope MB",
                                                            "MB sent"], rows, numeric={1, 2, 3}, cls="by-table"))
    if report.get("streams"):
        rows = [[s["slave"], s["role"], s["skip_policy"], f"{s['wall_seconds']:.2f}", mb(s["bytes_sent"])]
                for s in sorted(report["streams"], key=lambda s: -s["wall_seconds"])]
        parts.append("<h2>Where the time went: every stream</h2>" + _table(
            ["slave", "stream", "skip policy", "wall s", "MB sent"], rows, numeric={3, 4}, cls="streams"))
    return "\n".join(parts)
