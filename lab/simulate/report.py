"""The simulation report: one row per slave (bytes and events without and with master-side
filtering, the saving, transactions, wall time, throughput, bytes per skip policy), printed as a
rich table and written as report.json, report.csv, two charts (report.png: bytes per slave and
skip policy, the slave lint says breaks in red; timeline.png: MB/s sent against the binlog's event
timestamps, peaks marked) and report.html, which holds
all of it in one self-contained file."""

from __future__ import annotations

import json
import pickle
import subprocess
import sys
from pathlib import Path
from typing import Any, Literal

from rich import box
from rich.console import Console
from rich.measure import Measurement
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from dumpfilter.charts import TIMELINE_FIELDS, policy_chart, timeline_chart, timeline_rows
from dumpfilter.errors import DumpFilterError
from dumpfilter.rules.lint_divergence import WHAT
from dumpfilter.rules.lint_rules import KEEPS_NO_TABLE
from dumpfilter.skip_policy import NAMES as SKIP_POLICIES

CSV_FIELDS = ["slave", "server_id", "channel", "semantics", "skip_policy", "events_all", "bytes_all", "events_sent",
              "bytes_sent", "kept_bytes", "heartbeats", "heartbeat_bytes", "placeholders", "placeholder_bytes",
              "empty_transactions", "empty_transaction_bytes", "saved_bytes", "saved_percent", "transactions_kept",
              "transactions_partial", "transactions_skipped", "wall_seconds",
              "stream_mb_s"] + [f"bytes_{p}" for p in SKIP_POLICIES] + ["verified", "lint_breaks", "lint_diverges",
                                                                                     "real_replica"]

VERIFY_MEANING = ("verify: the slave was sent exactly what slave-side filtering of the full stream keeps (a slave "
                  "whose rules break a replica breaks it alike either way); lint: where a replica with these rules "
                  "would stop applying them")


def lint_cell(row: dict[str, Any]) -> str:
    """`dumpfilter lint`'s prediction for one slave: 'no break', or the first break's errno and position;
    '; diverges: N writes' after either when lint finds writes a replica with these rules silently
    gets wrong (as `experiment --candidates` shows them); '; keeps no table' when a rule of the
    slave can match no table (`db.`)."""
    lint = row.get("lint")
    if lint is None:
        return "-"
    first = lint["first"]
    empty = "; keeps no table" if any(KEEPS_NO_TABLE in w for w in lint.get("warnings") or ()) else ""
    diverges = f"; diverges: {lint['diverges']} writes" if lint.get("diverges") else ""
    if not first:
        return "no break" + diverges + empty
    more = f" (+{lint['breaks'] - 1} more)" if lint["breaks"] > 1 else ""
    return f"{first['errno']} at {first['file']}:{first['pos']}{more}{diverges}{empty}"


def lint_diverges(row: dict[str, Any]) -> int:
    """The writes lint says a replica with this slave's rules silently gets wrong (0: none)."""
    return int((row.get("lint") or {}).get("diverges") or 0)


def lint_breaks(row: dict[str, Any]) -> bool:
    """Whether lint says a replica with this slave's rules stops."""
    return bool((row.get("lint") or {}).get("first"))


def lint_fine(row: dict[str, Any]) -> bool:
    """No break, no divergence predicted and no rule that keeps no table: nothing for the reader to look at."""
    lint = row.get("lint") or {}
    return not lint.get("first") and not lint.get("diverges") and not any(KEEPS_NO_TABLE in w for w in lint.get("warnings") or ())


def lint_explanation(row: dict[str, Any]) -> str | None:
    """Why lint says a replica with this slave's rules stops: the error, where, and the skipped event
    it needed; the writes it silently gets wrong (per rule: how many, the cause, the fix); and each
    rule that keeps no table (None: nothing to say)."""
    lint = row.get("lint") or {}
    first = lint.get("first")
    said = "; ".join([*(lint.get("warnings") or ()), *_divergence_texts(lint)])
    if not first:
        return said or None
    gtid = f" (GTID {first['gtid']})" if first.get("gtid") else ""
    cause = first.get("cause") or {}
    why = (f"; the event it needs was skipped at {cause['file']}:{cause['pos']}: {cause.get('reason')}"
           if cause.get("file") else f"; {cause['reason']}" if cause.get("reason") else "")
    more = row["lint"]["breaks"] - 1
    return (f"a replica with these rules stops at {first['file']}:{first['pos']}{gtid} with error {first['errno']}: "
            f"{first['message']}{why}" + (f" ({more} more predicted)" if more else "") + (f"; {said}" if said else ""))


def _divergence_texts(lint: dict[str, Any]) -> list[str]:
    """One text per rule and way lint's divergence groups (`rules.lint_divergence.Divergence.to_json`)."""
    out = []
    for group in (lint.get("divergence") or {}).get("rules") or ():
        what = WHAT.get(group["kind"], group["kind"])
        first = group["first"][0] if group.get("first") else None
        at = f", first at {first['file']}:{first['pos']}" if first else ""
        out.append(f"{group['writes']} write(s) silently diverge ({group['rule']}: {what}{at}; it never stops "
                   f"for them): {group['cause']}; fix: {group['fix']}")
    return out


def real_replica_cell(row: dict[str, Any]) -> str:
    verdict = row.get("real_replica_verdict")
    return "-" if verdict is None else verdict["text"]


def throughput_line(report: dict[str, Any]) -> str | None:
    """The master's total throughput, and what a stream's share of it means."""
    master = report.get("master") or {}
    if not master.get("mb_s"):
        return None
    return (f"master: {master['binlog_bytes_served'] / 1e6:.1f} MB of binlog served to {master['streams']} streams in "
            f"{master['seconds']:.1f} s = {master['mb_s']:.1f} MB/s in total, {master['streams_at_once']} streams at "
            f"a time in this process; 'share MB/s' is one stream's part of that while it ran beside the others"
            + (f"; --verify then took {master['verify_seconds']:.1f} s" if master.get("verify_seconds") is not None
               else ""))


def summary_line(report: dict[str, Any]) -> str:
    """One line: how many slaves verified, how many lint says would stop, how the real replicas ended."""
    rows = report["slaves"]
    parts = [f"{len(rows)} slave(s)"]
    checked = [r for r in rows if r.get("verified") is not None]
    if checked:
        failed = [r["slave"] for r in checked if not r["verified"]]
        parts.append(f"verify: {len(checked) - len(failed)} ok" + (f", FAILED: {', '.join(failed)}" if failed else ""))
    breaking = [r["slave"] for r in rows if lint_breaks(r)]
    parts.append("lint: " + (f"a replica would stop for {', '.join(breaking)}" if breaking else "no break predicted"))
    diverging = [f"{r['slave']} ({lint_diverges(r)} writes)" for r in rows if lint_diverges(r)]
    if diverging:
        parts.append(f"silent divergence for {', '.join(diverging)}")
    empty = [r["slave"] for r in rows if "keeps no table" in lint_cell(r)]
    if empty:
        parts.append(f"a rule keeps no table for {', '.join(empty)}")
    real = [r for r in rows if r.get("real_replica_verdict")]
    if real:
        parts.append("real replicas: " + ", ".join(
            f"{r['slave']} {_real_short(r)}" for r in real))
    return "summary: " + "; ".join(parts)


def _real_short(row: dict[str, Any]) -> str:
    outcome, verdict = row["real_replica"], row["real_replica_verdict"]
    what = "caught up" if outcome.get("caught_up") else (
        f"stopped with {outcome.get('errno') or 'no error'}" + (f" in GTID {outcome['gtid']}" if outcome.get("gtid")
                                                                 else ""))
    return what + ("" if verdict["ok"] else " (DISAGREES with lint or its stream)")


def mb(n: float | None) -> str:
    """Bytes as MB with two decimals, "-" for None (the report's tables, report.html's too)."""
    return "-" if n is None else f"{n / 1e6:.2f}"


def row_cells(row: dict[str, Any]) -> dict[str, Any]:
    """The figures of one slave's row, as text (the table, the blocks and report.html show the same)."""
    return {
        "without": f"{mb(row['bytes_all'])} ({row['events_all']})" if row["bytes_all"] is not None else "-",
        "with": f"{mb(row['bytes_sent'])} ({row['events_sent']})",
        "saved": mb(row["saved_bytes"]),
        "saved_pct": "-" if row["saved_percent"] is None else f"{row['saved_percent']:.1f}",
        "txns": f"{row['transactions_kept']}/{row['transactions_partial']}/{row['transactions_skipped']}",
        "wall": f"{row['wall_seconds']:.2f}", "share": f"{row['stream_mb_s']:.1f}", "lint": lint_cell(row),
        "real": real_replica_cell(row), "verify": {True: "ok", False: "FAILED", None: "-"}[row.get("verified")],
    }


def transactions_text(row: dict[str, Any]) -> str:
    """A slave's transactions in the master's words: kept, partial, skipped (the rules keep nothing
    of them), and the empty transactions its skip policy sent for the skipped ones, if any."""
    text = (f"{row['transactions_kept']} kept, {row['transactions_partial']} partial, "
            f"{row['transactions_skipped']} skipped")
    empty = row.get("empty_transactions") or 0
    return text + (f" (as {empty} empty transactions)" if empty else "")


_STYLE = {"ok": "green", "FAILED": "bold red"}


def _table(report: dict[str, Any]) -> Table:
    verified = any(row["verified"] is not None for row in report["slaves"])
    real = any(row.get("real_replica") is not None for row in report["slaves"])
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False)
    columns: tuple[tuple[str, Literal["left", "right"]], ...] = (
        ("slave", "left"), ("policy", "left"), ("without MB\n(events)", "right"),
        ("with MB\n(events)", "right"), ("saved\nMB", "right"), ("saved\n%", "right"),
        ("txns kept/\npartial/skipped", "right"), ("wall\ns", "right"),
        ("share\nMB/s", "right"), ("lint: replica\nwould stop", "left"))
    for header, justify in columns:
        table.add_column(header, justify=justify, no_wrap=True)
    if real:
        table.add_column("real replica", no_wrap=True)
    if verified:
        table.add_column("verify", no_wrap=True)
    for row in report["slaves"]:
        c = row_cells(row)
        cells = [row["slave"], row["skip_policy"], c["without"], c["with"], c["saved"], c["saved_pct"], c["txns"],
                 c["wall"], c["share"], c["lint"]]
        cells += [c["real"]] if real else []
        cells += [Text(c["verify"], style=_STYLE.get(c["verify"], ""))] if verified else []
        table.add_row(*cells)
    return table


def _blocks(report: dict[str, Any], console: Console) -> None:
    """One block per slave, for a terminal too narrow for the table: every figure, nothing cut."""
    for row in report["slaves"]:
        c = row_cells(row)
        grid = Table.grid(padding=(0, 1))
        grid.add_column(style="dim", no_wrap=True)
        grid.add_column(overflow="fold")
        grid.add_row("sent", f"{mb(row['bytes_sent'])} of {mb(row['bytes_all'])} MB ({row['events_sent']} of "
                             f"{row['events_all']} events) with master-side filtering")
        grid.add_row("saved", f"{c['saved']} MB, {c['saved_pct']}%")
        grid.add_row("txns", transactions_text(row))
        grid.add_row("stream", f"{c['wall']} s, share {c['share']} MB/s")
        grid.add_row("lint", "replica would stop: " + c["lint"] if lint_breaks(row) else c["lint"])
        if row.get("real_replica") is not None:
            grid.add_row("real replica", c["real"])
        if row.get("verified") is not None:
            grid.add_row("verify", Text(c["verify"], style=_STYLE.get(c["verify"], "")))
        console.print(Text.assemble((row["slave"], "bold"), f" ({row['skip_policy']})"))
        console.print(Padding(grid, (0, 0, 0, 2), expand=False))


def print_report(report: dict[str, Any], console: Console | None = None) -> None:
    """The per-slave figures in one table when it fits the console's width, else one block per
    slave; then why each predicted break happens, the master's throughput and the bytes per skip
    policy."""
    console = console or Console()
    source = report["source"]
    console.print(f"Master-side filtering: {source['description']} "
                  f"({source['bytes'] / 1e6:.2f} MB in {len(source['files'])} file(s))", highlight=False)
    table = _table(report)
    if Measurement.get(console, console.options.update_width(1 << 16), table).maximum <= console.width:
        console.print(table)
    else:
        _blocks(report, console)
    for row in report["slaves"]:
        why = lint_explanation(row)
        if why:
            console.print(Text.assemble(("lint ", "yellow"), (row["slave"], "bold"), f": {why}"))
    if any(r.get("verified") is not None for r in report["slaves"]):
        console.print(Text(VERIFY_MEANING, style="dim"))
    line = throughput_line(report)
    if line:
        console.print(Text(line, style="dim"))
    policies = report["experiment"]["skip_policies"]
    if policies:
        ptable = Table(title="Bytes sent per skip policy (MB)", title_justify="left", box=box.SIMPLE_HEAD,
                       pad_edge=False)
        ptable.add_column("slave", no_wrap=True)
        for policy in policies:
            ptable.add_column(policy, justify="right")
        for row in report["slaves"]:
            ptable.add_row(row["slave"], *[mb(row["policies"].get(p)) for p in policies])
        console.print(ptable)
    times = stream_seconds(report)
    if times:
        order = list(dict.fromkeys(policy for by_policy in times.values() for policy in by_policy))
        ttable = Table(title="Seconds per stream, every stream of this run", title_justify="left",
                       box=box.SIMPLE_HEAD, pad_edge=False)
        ttable.add_column("slave", no_wrap=True)
        for policy in order:
            ttable.add_column(policy, justify="right")
        for slave, by_policy in times.items():
            ttable.add_row(slave, *[f"{by_policy[p]:.2f}" if p in by_policy else "-" for p in order])
        console.print(ttable)


def stream_seconds(report: dict[str, Any]) -> dict[str, dict[str, float]]:
    """Each stream's wall seconds by slave and skip policy (its own policy's stream, its other
    policies', the rule-less stream's): where `simulate`'s streaming time went."""
    times: dict[str, dict[str, float]] = {}
    for stream in report.get("streams") or []:
        times.setdefault(stream["slave"], {})[stream["skip_policy"]] = stream["wall_seconds"]
    return times


def chart_title(report: dict[str, Any], what: str) -> str:
    source = report["source"]
    return (f"{what}\n{source['description']}\n({source['bytes'] / 1e6:.2f} MB of binlog in "
            f"{len(source['files'])} file(s))")


def write_charts(report: dict[str, Any], bars_png: Path, timeline_png: Path) -> None:
    policies = report["experiment"]["skip_policies"]
    slaves = []
    for row in report["slaves"]:
        detail = row.get("policy_bytes") or {}
        order = list(dict.fromkeys([*policies, row["skip_policy"]]))  # the same order in every group
        bars = [{"policy": p, "sent": detail[p]["bytes_sent"], "overhead": detail[p]["overhead_bytes"],
                 "own": p == row["skip_policy"]} for p in order if p in detail]
        first = (row.get("lint") or {}).get("first")
        slaves.append({"slave": row["slave"], "bytes_all": row["bytes_all"], "bars": bars,
                       "breaks": f"error {first['errno']}" if first else None})
    policy_chart(slaves, bars_png, title=chart_title(report, "Bytes sent per slave and skip policy"))
    series, reference = timeline_series(report)
    timeline_chart(series, timeline_png, title=chart_title(report, "Bytes per second sent against binlog time"),
                   reference=reference)


def timeline_series(report: dict[str, Any]) -> tuple[list[dict[str, Any]], list[list[Any]] | None]:
    """The lines of timeline.png (each slave's stream, the rule-less stream's as the reference):
    what the chart draws and timeline.csv holds."""
    everything = report["experiment"].get("everything_stream") or {}
    return ([{"slave": f"{r['slave']} ({r['skip_policy']})", "points": r.get("timeline") or [],
              "breaks": lint_breaks(r)} for r in report["slaves"]], everything.get("timeline"))


def draw_charts(report: dict[str, Any], bars_png: Path, timeline_png: Path) -> None:
    """`write_charts` in a child Python: matplotlib would add some 30 MB to this process's peak
    that it never gives back, for two PNGs."""
    proc = subprocess.run([sys.executable, "-c", f"import {__name__} as m; m._draw_charts_child()"],
                          input=pickle.dumps((report, str(bars_png), str(timeline_png))), capture_output=True)
    if proc.returncode != 0:
        last = (proc.stderr.decode(errors="replace").strip().splitlines() or ["no message"])[-1]
        raise DumpFilterError(f"drawing the charts failed (exit {proc.returncode}): {last}")


def _draw_charts_child() -> None:
    report, bars_png, timeline_png = pickle.load(sys.stdin.buffer)
    write_charts(report, Path(bars_png), Path(timeline_png))


def write_report(report: dict[str, Any], out: Path) -> list[Path]:
    from dumpfilter.lab.simulate.breakdowns import write_csvs
    from dumpfilter.lab.simulate.html_report import write_html
    from dumpfilter.spark_jobs.bandwidth_experiment import _write_table

    out.mkdir(parents=True, exist_ok=True)
    paths = [out / "report.json", out / "report.csv", out / "report.png", out / "timeline.png", out / "report.html",
             out / "timeline.csv"]
    paths[0].write_text(json.dumps(report, indent=2, sort_keys=False) + "\n")
    flat = [dict(row, **{f"bytes_{policy}": row["policies"].get(policy, "") for policy in SKIP_POLICIES},
                 lint_breaks=(row.get("lint") or {}).get("breaks", ""),
                 lint_diverges=(row.get("lint") or {}).get("diverges", ""),
                 real_replica=real_replica_cell(row) if row.get("real_replica") is not None else "")
            for row in report["slaves"]]
    _write_table(flat, CSV_FIELDS, out / "report", "csv")
    _write_table(timeline_rows(*timeline_series(report)), TIMELINE_FIELDS, out / "timeline", "csv")  # timeline.png's
    draw_charts(report, paths[2], paths[3])
    write_html(report, paths[4], charts={"Bytes per slave and skip policy": paths[2],
                                         "MB/s sent against binlog time (the events' timestamps), peaks marked":
                                         paths[3]})
    return paths + write_csvs(report, out)
