"""`dumpfilter verify`: run a workload on a real MariaDB primary and prove that every slave fed by
dumpfilter's master-side filtering ends with exactly the data of a real replica filtering with the
same --replicate-* options. The work is done in the `verification` package."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from dumpfilter.cli.options import add_json_option, emit_json, seconds_in
from dumpfilter.errors import DumpFilterError

if TYPE_CHECKING:
    from dumpfilter.cli.options import Subparsers


def _formats(values: list[str] | None, builtin: bool) -> list[str]:
    from dumpfilter.lab.verify import FORMATS

    if not values:
        return list(FORMATS) if builtin else ["ROW"]
    out: list[str] = []
    for item in (item.strip().upper() for value in values for item in value.split(",")):
        if item != "ALL" and item not in FORMATS:
            raise DumpFilterError(f"--binlog-format: {item!r} is not one of ROW, STATEMENT, MIXED, all")
        out += [f for f in (FORMATS if item == "ALL" else (item,)) if f not in out]
    return out


def register(subparsers: Subparsers) -> None:
    parser = subparsers.add_parser(
        "verify", help="prove master-side filtering against real MariaDB replicas",
        description="Starts a MariaDB primary, per slave a real replica with the slave's --replicate-* options "
                    "and a fresh server fed by dumpfilter's master-side stream (slave --apply), runs the "
                    "workload, and compares each pair table by table. Exit status 0 only if every pair is "
                    "identical; 1 if one differs; 2 if the verification could not run.")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--topology", type=Path, metavar="FILE", help="TOML topology: the slaves and their rules")
    source.add_argument("--builtin", action="store_true",
                        help="the built-in sharp-edge workload and topology (all three formats by default)")
    parser.add_argument("--workload", type=Path, metavar="SQLFILE", help="SQL run on the primary in one session")
    parser.add_argument("--seed", type=Path, metavar="SQLFILE", help="SQL loaded on every server, not replicated")
    parser.add_argument("--binlog-format", action="append", metavar="ROW|STATEMENT|MIXED",
                        help="repeat or comma-separate for several runs; 'all' for the three "
                             "(default: ROW, or all three with --builtin)")
    parser.add_argument("--keep", action="store_true", help="keep the datadirs and relay logs (servers are stopped)")
    add_json_option(parser, "the verdicts")
    parser.add_argument("--timeout", type=seconds_in(0.001, 86_400), default=60.0, metavar="SECONDS",
                        help="how long to wait for each replica to catch up (default 60)")
    parser.add_argument("--quiet", action="store_true", help="no progress lines")
    parser.add_argument("--listen", metavar="HOST:PORT", default="127.0.0.1:0",
                        help="the in-process master's gRPC address (default 127.0.0.1:0: port 0 picks a free "
                             "port; pin one where a firewall or another harness needs to know it)")
    parser.add_argument("--mysql-listen", metavar="HOST:PORT", default="127.0.0.1:0",
                        help="its MySQL-protocol endpoint's address, for the topology's kind = \"mariadb\" slaves "
                             "(default 127.0.0.1:0)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from dumpfilter.topology import load_topology
    from dumpfilter.lab.verify import builtin_paths, verify
    from dumpfilter.lab.verify.report import as_json, overall_passed, print_report
    from dumpfilter.master.serve.grpc_server import parse_listen

    for option in ("--listen", "--mysql-listen"):  # one line before any server starts
        parse_listen(getattr(args, option[2:].replace("-", "_")), option)

    if args.builtin:
        # (the package's own data directory: resources on the file system)
        topology_path, workload_path, seed_path = (Path(str(path)) for path in builtin_paths())
        workload_path = args.workload or workload_path
        seed_path = args.seed or seed_path
    else:
        if args.workload is None:
            raise DumpFilterError("verify: --workload SQLFILE is required with --topology")
        topology_path, workload_path, seed_path = args.topology, args.workload, args.seed
    try:
        workload = Path(workload_path).read_text(encoding="utf-8")
        seed = Path(seed_path).read_text(encoding="utf-8") if seed_path else ""
    except OSError as exc:
        raise DumpFilterError(f"verify: cannot read {exc.filename}: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise DumpFilterError(f"verify: {workload_path if seed_path is None else 'a script'} is not UTF-8 "
                              f"(byte {exc.start})") from None
    # Split here, before any server starts: a script the client could not run is one line.
    from dumpfilter.lab.verify.against_replicas import VerifyError, split_statements

    for path, text in ((workload_path, workload), (seed_path, seed)):
        try:
            split_statements(text)
        except VerifyError as exc:
            raise DumpFilterError(f"verify: {path}: {exc}") from None
    topology = load_topology(topology_path)
    progress = None if args.quiet else (lambda message: print(f"verify: {message}", file=sys.stderr, flush=True))
    runs = verify(topology, workload, seed=seed, formats=_formats(args.binlog_format, args.builtin),
                  keep=args.keep, timeout=args.timeout,
                  progress=progress, listen=args.listen, mysql_listen=args.mysql_listen)
    if not emit_json(args, as_json(runs)):
        print_report(runs)
    return 0 if overall_passed(runs) else 1
