"""`master serve --shadow FILE` and `dumpfilter master shadow add|remove|list|report`: shadow
candidates on a live master (master/shadow), counted by `experiment`'s own counting
(spark_jobs.tasks.shadow_counts), which this layer, above both, hands the master; the report written
by `experiment`'s writers."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dumpfilter.cli.master_client import MasterClient, add_connection_options
from dumpfilter.cli.options import add_json_option, emit_json

if TYPE_CHECKING:
    from dumpfilter.cli.master_client import Row
    from dumpfilter.master.serve.grpc_server import MasterServer
    from dumpfilter.topology import Topology

MAX_CANDIDATES = 64  # master.shadow.board's (not imported here: the parser does without the master)

SHADOW_COLUMNS = ["Name", "Skip_policy", "Added_by", "Start", "Counted_to", "MB_all", "MB_sent", "Saving",
                  "Events_sent", "State", "Lint"]


def add_serve_option(serve: argparse.ArgumentParser) -> None:
    serve.add_argument("--shadow", metavar="FILE",
                       help="shadow candidates (the `experiment --candidates` format: each [[slaves]] entry one "
                            "rule set, at most 64) counted, never streamed, from the first binlog file to the live "
                            "end, with lint following each: `master shadow list|report`, `master status`, "
                            "/metrics. They come back at a restart (counted again); those added at run time "
                            "(`master shadow add`) do not")


def load_shadow(args: argparse.Namespace) -> Topology | None:
    """--shadow's candidates, read before anything listens (one line on a bad file or rule)."""
    from dumpfilter.errors import InvalidArgumentError
    from dumpfilter.topology import load_candidates

    if not args.shadow:
        return None
    candidates = load_candidates(args.shadow)
    if len(candidates.slaves) > MAX_CANDIDATES:
        raise InvalidArgumentError(f"--shadow {args.shadow}: {len(candidates.slaves)} candidates; at most "
                                   f"{MAX_CANDIDATES} are counted")
    return candidates


def start_shadow(args: argparse.Namespace, master: MasterServer, candidates: Topology | None) -> None:
    """The master's shadow board, counting with `experiment`'s counting; --shadow's candidates added."""
    from dumpfilter.master.shadow.board import ShadowBoard
    from dumpfilter.spark_jobs.tasks.shadow_counts import ShadowCounts

    service = master.service
    board = ShadowBoard(service.binlog_dir, ShadowCounts(args.verify_checksums), service.lint, service.policy,
                        service.segments)
    if candidates is not None:
        try:
            board.add(candidates, None, from_start=True)
        except BaseException:
            master.stop(0)
            raise
        print(f"dumpfilter master: shadow: {len(candidates.slaves)} candidate(s) from {args.shadow}, counted from "
              "the first binlog file (candidates added at run time are not kept across a restart)",
              file=sys.stderr, flush=True)
    service.shadow = board
    board.follow(service.watch)


def print_shadows(rows: list[Row]) -> None:
    """`master status`'s and `master shadow list`'s table of candidates, and each one's note."""
    from dumpfilter.cli.master_client import format_table

    if not rows:
        return
    print(format_table([table_cells(r) for r in rows], SHADOW_COLUMNS))
    for row in rows:
        if row["note"]:
            print(f"shadow {row['name']}: {row['note']}")


def register(sub: Any) -> None:
    shadow = sub.add_parser("shadow", help="shadow candidates of a running master: rule sets counted, never streamed")
    cmds = shadow.add_subparsers(dest="shadow_command", metavar="SUBCOMMAND", required=True)
    add = cmds.add_parser("add", help="count the candidates of FILE (the --candidates format) from the live end on",
                          description="An admin identity only. Each candidate counts from the master's live end "
                                      "(the start of the last transaction written) under its skip policy and the "
                                      "gate of the identity adding it.")
    add_connection_options(add)
    add.add_argument("file", metavar="FILE", help="candidates: a topology file, each [[slaves]] entry one candidate")
    add.set_defaults(func=add_command)
    remove = cmds.add_parser("remove", help="stop counting a candidate (admin only)")
    add_connection_options(remove)
    remove.add_argument("name", help="the candidate's name")
    remove.set_defaults(func=remove_command)
    listed = cmds.add_parser("list", help="every candidate: where it counts from and to, bytes sent and saved, lint")
    add_connection_options(listed)
    add_json_option(listed, "the candidates")
    listed.set_defaults(func=list_command)
    report = cmds.add_parser("report", help="experiment's CSVs and charts for the candidates counted so far")
    add_connection_options(report)
    report.add_argument("--out", required=True, metavar="DIR", help="report directory")
    report.add_argument("--no-charts", dest="charts", action="store_false", help="the tables only, no PNG")
    report.set_defaults(func=report_command)


def _ask(args: argparse.Namespace, method: str, **fields: Any) -> Any:
    """The master's reply to the shadow call `method` (MasterClient.call)."""
    with MasterClient.from_args(args) as client:
        return client.call(method, **fields)


def add_command(args: argparse.Namespace) -> int:
    from dumpfilter.errors import InvalidArgumentError

    try:
        text = Path(args.file).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidArgumentError(f"{args.file}: cannot read the candidates file: "
                                   f"{getattr(exc, 'strerror', None) or exc}") from None
    reply = _ask(args, "AddShadow", candidates=text)
    print(f"counting {', '.join(reply.names)} from {reply.start.file}:{reply.start.pos}")
    return 0


def remove_command(args: argparse.Namespace) -> int:
    _ask(args, "RemoveShadow", name=args.name)
    print(f"removed {args.name}")
    return 0


def list_command(args: argparse.Namespace) -> int:
    rows = [shadow_row(c) for c in _ask(args, "ListShadows").candidates]
    if emit_json(args, rows):
        return 0
    print_shadows(rows) if rows else print("no shadow candidates")
    return 0


def shadow_row(c: Any) -> Row:
    """A ShadowCandidate as a plain row (JSON, `master status`)."""
    return {"name": c.name, "skip_policy": c.skip_policy, "rules": list(c.rules), "added_by": c.added_by,
            "start": f"{c.start.file}:{c.start.pos}",
            "counted_to": f"{c.counted_to.file}:{c.counted_to.pos}" if c.HasField("counted_to") else "",
            "state": c.state, "note": c.note, "counts": dict(c.counts), "lint_state": c.lint_state,
            "lint": c.lint, "lint_breaks": c.lint_breaks, "diverges": c.diverges}


def table_cells(row: Row) -> Row:
    counts = row["counts"]
    every, sent = counts.get("bytes_all", 0), counts.get("bytes_sent", 0)
    return {"Name": row["name"], "Skip_policy": row["skip_policy"], "Added_by": row["added_by"],
            "Start": row["start"], "Counted_to": row["counted_to"] or "-", "MB_all": f"{every / 1e6:.2f}",
            "MB_sent": f"{sent / 1e6:.2f}", "Saving": f"{100 * (every - sent) / every:.1f}%" if every else "-",
            "Events_sent": counts.get("events_sent", 0), "State": row["state"], "Lint": row["lint"]}


def report_command(args: argparse.Namespace) -> int:
    from dumpfilter.spark_jobs.bandwidth_experiment import (CANDIDATE_COLUMNS, _write_table, write_breakdowns,
                                                            write_report)

    reply = _ask(args, "ShadowReport")

    def rows(items: Any) -> list[dict[str, Any]]:
        return [{k: json.loads(v) for k, v in item.cells.items()} for item in items]

    out = Path(args.out)
    paths = write_report(rows(reply.bandwidth), out, source="shadow candidates of a live master", charts=args.charts)
    paths += write_breakdowns(rows(reply.by_hour), rows(reply.by_table), out, charts=args.charts)
    paths.append(_write_table(rows(reply.candidates), CANDIDATE_COLUMNS, out / "candidates", "csv"))
    print("wrote " + ", ".join(str(p) for p in paths))
    return 0
