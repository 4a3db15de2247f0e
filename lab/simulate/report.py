"""The simulation report: one row per slave (bytes and events without and with master-side
filtering, the saving, transactions, wall time, throughput, bytes per skip policy), printed as a
rich table and written as report.json, report.csv, two charts (report.png: bytes per slave and
skip policy; timeline.png: cumulative bytes against binlog position) and report.html, which holds
all of it in one self-contained file."""

from __future__ import annotations

import csv
import json
from pathlib import Path

from rich.console import Console
from rich.table import Table

from dumpfilter.charts import policy_chart, timeline_chart
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


def chart_title(report: dict, what: str) -> str:
    source = report["source"]
    return (f"{what}\n{source['description']}\n({source['bytes'] / 1e6:.2f} MB of binlog in "
            f"{len(source['files'])} file(s))")


def write_charts(report: dict, bars_png: Path, timeline_png: Path) -> None:
    policies = report["experiment"]["skip_policies"]
    slaves = []
    for row in report["slaves"]:
        detail = row.get("policy_bytes") or {}
        order = list(dict.fromkeys([*policies, row["skip_policy"]]))  # the same order in every group
        bars = [{"policy": p, "kept": detail[p]["kept_bytes"], "overhead": detail[p]["overhead_bytes"],
                 "own": p == row["skip_policy"]} for p in order if p in detail]
        slaves.append({"slave": row["slave"], "bytes_all": row["bytes_all"], "bars": bars})
    policy_chart(slaves, bars_png, title=chart_title(report, "Bytes sent per slave and skip policy"))
    everything = report["experiment"].get("everything_stream") or {}
    timeline_chart([{"slave": f"{r['slave']} ({r['skip_policy']})", "points": r.get("timeline") or []}
                    for r in report["slaves"]], timeline_png,
                   title=chart_title(report, "Cumulative bytes sent against the master's binlog position"),
                   reference=everything.get("timeline"))


def write_report(report: dict, out: Path) -> list[Path]:
    from dumpfilter.lab.simulate.html_report import write_html

    out.mkdir(parents=True, exist_ok=True)
    paths = [out / "report.json", out / "report.csv", out / "report.png", out / "timeline.png", out / "report.html"]
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
    write_charts(report, paths[2], paths[3])
    write_html(report, paths[4], charts={"Bytes per slave and skip policy": paths[2],
                                         "Cumulative bytes against binlog position": paths[3]})
    return paths
