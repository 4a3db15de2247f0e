"""The simulation report: one row per slave (bytes and events without and with master-side
filtering, the saving, transactions, wall time, throughput, bytes per skip policy), printed as a
rich table and written as report.json, report.csv and a PNG bar chart."""

from __future__ import annotations

import csv
import json
from pathlib import Path

from rich.console import Console
from rich.table import Table

from dumpfilter.bandwidth_chart import bytes_chart
from dumpfilter.topology import SKIP_POLICIES

CSV_FIELDS = ["slave", "server_id", "channel", "semantics", "skip_policy", "events_all", "bytes_all", "events_sent",
              "bytes_sent", "kept_bytes", "heartbeats", "heartbeat_bytes", "placeholders", "placeholder_bytes",
              "empty_transactions", "empty_transaction_bytes", "saved_bytes", "saved_percent", "transactions_kept",
              "transactions_partial", "transactions_skipped", "transactions_emptied", "wall_seconds",
              "throughput_mb_s"] + [f"bytes_{p}" for p in SKIP_POLICIES] + ["verified", "lint_breaks"]


def lint_cell(row: dict) -> str:
    """`dumpfilter lint`'s prediction for one slave: 'no break', or the first break's errno and position."""
    lint = row.get("lint")
    if lint is None:
        return "-"
    first = lint["first"]
    if not first:
        return "no break"
    more = f" (+{lint['breaks'] - 1} more)" if lint["breaks"] > 1 else ""
    return f"{first['errno']} at {first['file']}:{first['pos']}{more}"


def _mb(n: int | None) -> str:
    return "-" if n is None else f"{n / 1e6:.2f}"


def print_report(report: dict, console: Console | None = None) -> None:
    console = console or Console()
    source = report["source"]
    table = Table(title=f"Master-side filtering: {source['description']} "
                        f"({source['bytes'] / 1e6:.2f} MB in {len(source['files'])} file(s))",
                  title_justify="left",
                  caption=f"wall s and MB/s (master binlog MB served per second) are per stream, with all "
                          f"{report['experiment']['streams']} streams running at once in this process",
                  caption_justify="left")
    table.add_column("slave")
    table.add_column("policy")
    table.add_column("without MB\n(events)", justify="right")
    table.add_column("with MB\n(events)", justify="right")
    table.add_column("saved MB", justify="right")
    table.add_column("saved %", justify="right")
    table.add_column("txns kept/partial\n/skipped/emptied", justify="right")
    table.add_column("wall s", justify="right")
    table.add_column("MB/s", justify="right")
    table.add_column("lint: replica\nwould stop", justify="right")
    verified = any(row["verified"] is not None for row in report["slaves"])
    if verified:
        table.add_column("verify")
    for row in report["slaves"]:
        cells = [row["slave"], row["skip_policy"],
                 f"{_mb(row['bytes_all'])} ({row['events_all']})" if row["bytes_all"] is not None else "-",
                 f"{_mb(row['bytes_sent'])} ({row['events_sent']})",
                 _mb(row["saved_bytes"]), "-" if row["saved_percent"] is None else f"{row['saved_percent']:.1f}",
                 f"{row['transactions_kept']}/{row['transactions_partial']}/{row['transactions_skipped']}"
                 f"/{row['transactions_emptied']}",
                 f"{row['wall_seconds']:.2f}", f"{row['throughput_mb_s']:.1f}", lint_cell(row)]
        if verified:
            cells.append({True: "[green]ok[/]", False: "[red]FAILED[/]", None: "-"}[row["verified"]])
        table.add_row(*cells)
    console.print(table)
    policies = report["experiment"]["skip_policies"]
    if policies:
        ptable = Table(title="Bytes sent per skip policy (MB)", title_justify="left")
        ptable.add_column("slave")
        for policy in policies:
            ptable.add_column(policy, justify="right")
        for row in report["slaves"]:
            ptable.add_row(row["slave"], *[_mb(row["policies"].get(p)) for p in policies])
        console.print(ptable)


def write_report(report: dict, out: Path) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / "report.json", out / "report.csv", out / "report.png"]
    paths[0].write_text(json.dumps(report, indent=2, sort_keys=False) + "\n")
    with open(paths[1], "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=CSV_FIELDS, extrasaction="ignore")
        writer.writeheader()
        for row in report["slaves"]:
            flat = dict(row)
            for policy in SKIP_POLICIES:
                flat[f"bytes_{policy}"] = row["policies"].get(policy, "")
            flat["lint_breaks"] = (row.get("lint") or {}).get("breaks", "")
            writer.writerow(flat)
    rows = [{"slave": r["slave"], "bytes_all": r["bytes_all"] or 0, "bytes_sent": r["bytes_sent"]}
            for r in report["slaves"]]
    bytes_chart(rows, paths[2], title="Bytes sent per slave: without vs with master-side filtering")
    return paths
