"""`dumpfilter lint BINLOG...`: predict, from the binlog alone, where a replica with these rules would stop
and which writes it would silently get wrong (dumpfilter.rules.lint does the replay, rules.lint_divergence
the divergence; this module parses options, reads the files and prints)."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import TYPE_CHECKING

from dumpfilter.cli.options import add_binlog_inputs, add_json_option, emit_json, raise_cut
from dumpfilter.binlogs.lint import lint_files
from dumpfilter.binlogs.files import binlog_format, input_paths
from dumpfilter.rules.options import add_rule_options, add_schema_option, ruleset_from_args, schema_from_args
from dumpfilter.rules.lint_divergence import Breaks
from dumpfilter.rules.lint_rules import rule_warnings
from dumpfilter.rules.schema import load_schema

if TYPE_CHECKING:
    from dumpfilter.cli.options import Subparsers


def register(subparsers: Subparsers) -> None:
    parser = subparsers.add_parser(
        "lint", help="predict where a replica with these rules would stop (1146, 1049, 1136, ...) and why, "
                     "and the writes it would silently get wrong",
        description="Replays the binlog as the primary saw it and as a replica with these rules would, and "
                    "reports each kept statement or row event that needs an object the replica lacks, with the "
                    "skipped event that caused it; and, per rule, the writes the replica silently gets wrong (a "
                    "statement judged by its default database where its table's database judges otherwise: "
                    "skipped though the rules keep its table, or applied to a table they do not keep), with the "
                    "cause and the fix. Exit 0: no break; 1: a break is predicted; 2: bad input.")
    add_binlog_inputs(parser, "BINLOG")
    add_rule_options(parser)
    add_schema_option(parser)
    parser.add_argument("--replica-schema", metavar="FILE|mysql://USER@HOST:PORT",
                        help="the replica's starting schema, when it is not the master's (a database or table "
                             "created on it outside replication): a dump file or a server's information_schema. "
                             "Default: --schema (or, without it, what the binlog creates)")
    parser.set_defaults(flavor=None)  # the server that wrote the binlog, as `filter` does
    add_json_option(parser, '{"breaks": [{"file", "pos", "gtid", "errno", "message", "cause": {...}}], '
                            '"divergence": {"writes": N, "rules": [{"rule", "kind": "lost"|"applied", "writes", '
                            '"cause", "fix", "first": [{"file", "pos", "gtid", "default_db", "tables", '
                            '"statement"}]}]}, "warnings": ["a rule that keeps no table ..."]}')
    parser.add_argument("--no-verify-checksums", dest="verify_checksums", action="store_false",
                        help="do not check event CRC32s while reading")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    paths = input_paths(args.files)
    if args.flavor is None:
        args.flavor = binlog_format(paths[0]).flavor
    rules, settings = ruleset_from_args(args)
    schema = schema_from_args(args) if args.schema else None
    replica_schema = load_schema(args.replica_schema, "--replica-schema") if args.replica_schema else None
    breaks = lint_files(paths, rules, settings, schema, replica_schema=replica_schema,
                        verify_checksums=args.verify_checksums, stop_at_cut=True)
    # A rule that can match no table (`db.`) is accepted, as mysqld accepts it: said, not a break.
    warnings = rule_warnings(rules)
    if not emit_json(args, lambda: {"breaks": [b.to_json() for b in breaks],
                                    "divergence": breaks.divergence.to_json(), "warnings": warnings,
                                    **({"cut": str(breaks.cut)} if breaks.cut is not None else {})}):
        print_breaks(breaks, warnings)
    raise_cut(breaks.cut, "every whole event before it was linted (the breaks above), no later file read")
    return 1 if breaks else 0


def print_breaks(breaks: Breaks, warnings: Sequence[str]) -> None:
    for warning in warnings:
        print(f"warning: {warning}")
    if not breaks:
        print("no break predicted")
    else:
        print(f"{len(breaks)} break(s) predicted; a replica with these rules stops at the first:")
        for number, item in enumerate(breaks, 1):
            print(f"{number}. {item}")
    # beside the stops: the writes it silently gets wrong (up to its first stop)
    for line in breaks.divergence.lines():
        print(line)
