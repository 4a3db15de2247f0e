"""`dumpfilter simulate`: a master and every slave of a topology over real gRPC on loopback; the
bytes master-side filtering saves each slave, per skip policy; `--verify` checks each slave
against slave-side filtering of the full stream. The work is in the `simulation` package."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from dumpfilter.cli.options import add_json_option, add_out_dir, emit_json
from dumpfilter.cli.output_paths import made_for_the_run, writable_dir
from dumpfilter.progress import consoles, shown
from dumpfilter.topology import load_topology

if TYPE_CHECKING:  # rich is imported where the report is printed: `simulate --help` starts without it
    from dumpfilter.cli.options import Subparsers
    from rich.console import Console


def register(subparsers: Subparsers) -> None:
    parser = subparsers.add_parser(
        "simulate", help="master + slaves over gRPC: bytes saved by master-side filtering, per slave",
        description="Runs the topology (default: a built-in one with 4 slaves over a generated 6-schema "
                    "workload), prints a table and writes report.json, report.csv, report.png (bytes per slave), "
                    "timeline.png (bytes sent over the run) and a self-contained report.html under --out.")
    parser.add_argument("--topology", metavar="FILE", help="topology TOML (see --print-default-topology)")
    add_out_dir(parser, "report directory (default out/simulate)", default="out/simulate")
    add_json_option(parser, "the summary (report.json's document, the verdict and the files written)")
    parser.add_argument("--verify", action="store_true",
                        help="check that each slave received exactly what slave-side filtering of the full stream "
                             "keeps; differences are listed by transaction and the exit status is 1")
    parser.add_argument("--mariadb", action="store_true",
                        help="take the binlog from a real MariaDB started here (temp datadir, loopback port) and "
                             "driven with the built-in SQL workload")
    parser.add_argument("--listen", metavar="HOST:PORT", default="127.0.0.1:0",
                        help="the master's gRPC address during the run (default 127.0.0.1:0: port 0 picks a free "
                             "port; pin one where a firewall or another harness needs to know it)")
    parser.add_argument("--keep-work", metavar="DIR", help="keep the binlog and every relay log in DIR")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.add_argument("--print-default-topology", action="store_true",
                        help="print the built-in topology TOML and exit")
    parser.set_defaults(func=run)


class _ConsoleLog(logging.Handler):
    """Log lines on the stderr console (above the progress bars while they run)."""

    def __init__(self, console: Console):
        super().__init__(logging.INFO)
        self.console = console

    def emit(self, record: logging.LogRecord) -> None:
        self.console.print(f"dumpfilter simulate: {record.getMessage()}", style="dim", markup=False, highlight=False)


def run(args: argparse.Namespace) -> int:
    from dumpfilter.lab.simulate.orchestration import default_topology_text, print_verification, run_simulation
    from dumpfilter.lab.simulate.report import print_report, summary_line

    if args.print_default_topology:
        sys.stdout.write(default_topology_text())
        return 0
    console, err = consoles()
    topology = load_topology(args.topology) if args.topology else None
    handler = _ConsoleLog(err)
    logger = logging.getLogger("dumpfilter")
    # --out made before the run, not after it; removed with what it holds if this run made it and is
    # interrupted or fails (an empty or partial report is never left)
    with made_for_the_run(args.out) as out:
        if args.keep_work:
            writable_dir(args.keep_work, "--keep-work")
        logger.addHandler(handler)
        logging.getLogger("dumpfilter.lab.simulate").setLevel(logging.INFO)
        try:
            result = run_simulation(topology, out, verify=args.verify, mariadb=args.mariadb, console=err,
                                    progress=shown(err, args.no_progress),
                                    keep_work=Path(args.keep_work) if args.keep_work else None, listen=args.listen)
        finally:
            logger.removeHandler(handler)
    if emit_json(args, result.report | {"ok": result.ok, "files": [str(p) for p in result.paths]}):
        return 0 if result.ok else 1
    print_report(result.report, console)
    if args.verify:
        print_verification(result.verifications, console)
    console.print(summary_line(result.report), highlight=False)
    console.print("wrote " + ", ".join(str(p) for p in result.paths), highlight=False)
    return 0 if result.ok else 1
