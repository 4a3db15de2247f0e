"""`dumpfilter filter FILE... -o FILE | --out DIR`: apply one replica's replicate-* rules to binlog
files offline, as WL#40 wanted mysqlbinlog to, and write a valid binlog that mariadb-binlog reads
and a server can apply. The loop itself lives in `dumpfilter.binlogs.filtering`; this module
parses options, picks the output shape and prints the summary."""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import sys
import time
from pathlib import Path

from typing import TYPE_CHECKING, Any

from dumpfilter.cli.options import (
    add_binlog_inputs, add_json_option, add_out_dir, add_output_file, deprecated, emit_json, json_on_stdout,
    raise_cut, series_basename, size_in,
)
from dumpfilter.cli.output_paths import (
    OutputError, is_stream, missing_parent, refuse_input_as_output, temp_beside, writable_dir, writable_file,
    writes_named,
)
from dumpfilter.errors import InvalidArgumentError
from dumpfilter.rules.options import add_rule_options, add_schema_option, ruleset_from_args, schema_from_args

if TYPE_CHECKING:  # imported where the filter runs: `filter --help` starts without the codec and the engine
    from dumpfilter.cli.options import Subparsers
    from dumpfilter.binlogs.filtering import FilterStats
    from dumpfilter.binlogs.sinks import Sink

_NUMBERED = re.compile(r"^(?P<base>.+)\.\d{6,}(\.gz)?$")
# --max-binlog-size: MySQL's max_binlog_size goes from 4K to 1G; from 1K here, for small test series.
MIN_BINLOG_SIZE, MAX_BINLOG_SIZE = 1 << 10, 1 << 30
MAGIC_BYTES = 4  # each binlog file's `\xfebin`, which FilterStats.bytes_in does not count


def register(subparsers: Subparsers) -> None:
    parser = subparsers.add_parser(
        "filter", help="filter binlog files offline with replicate-* rules into a valid binlog",
        description="Keeps what a replica with these rules would apply: whole transactions, or in ROW "
                    "format the Table_map/rows events of kept tables. With no rules and one input file "
                    "the output is byte-identical to the input.")
    add_binlog_inputs(parser)
    target = parser.add_mutually_exclusive_group(required=True)
    add_output_file(target, "the filtered binlog, one file ('-': stdout) in a directory that exists (-o creates "
                            "none); an existing directory, a name ending in '/' or several inputs make it the "
                            "deprecated spelling of --out DIR (a series, with a warning)")
    add_out_dir(target, "a directory for the filtered binlog as a numbered series <base>.NNNNNN with its index "
                        "(needed for several input files)")
    add_rule_options(parser)
    add_schema_option(parser)
    # --flavor defaults to the server that wrote the binlog (its FDE's server version), not to mysql:
    # a MariaDB binlog is filtered as a MariaDB replica would (filter-semantics.md §8.1).
    parser.set_defaults(flavor=None)
    parser.add_argument("--empty-transactions", choices=("keep", "drop"), default="keep",
                        help="keep: a transaction with nothing kept is written as an empty GTID transaction "
                             "(as replica-side filtering records it); drop: leave it out")
    parser.add_argument("--no-verify-checksums", dest="verify_checksums", action="store_false",
                        help="do not check event CRC32s while reading")
    parser.add_argument("--no-rewrite-db", dest="write_rewritten_names", action="store_false",
                        help="write the master's database names as they are (for a replica that applies "
                             "replicate-rewrite-db itself); by default the output carries the names the "
                             "rules rewrite to, as mariadb-binlog --rewrite-db writes them")
    parser.add_argument("--basename", type=series_basename,
                        help="--out: the series' base name, a plain file name (default: the input's, e.g. mariadb-bin)")
    parser.add_argument("--max-binlog-size", type=size_in(MIN_BINLOG_SIZE, MAX_BINLOG_SIZE), metavar="BYTES",
                        help="--out: rotate the series' files after this many bytes (1K to 1G, suffixes K, M, G; "
                             "default 1G)")
    # "json": the old spelling of --json (the summary on stderr), kept for scripts and not listed
    parser.add_argument("--summary", choices=("auto", "rich", "plain", "none", "json"), default="auto",
                        metavar="{auto,rich,plain,none}",
                        help="summary on stderr: a rich table on a terminal, plain lines otherwise (auto)")
    add_json_option(parser, "the summary (counters, output files, seconds)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from dumpfilter.binlogs.files import binlog_format, input_paths
    from dumpfilter.binlogs.filtering import filter_files
    from dumpfilter.binlogs.sinks import FileSink, SeriesSink
    from dumpfilter.rules.evaluate import RuleEngine
    from dumpfilter.rules.renamer import event_renamer
    from dumpfilter.rules.transaction_filter import TransactionFilter

    paths = input_paths(args.files)  # every file once, before any output is made
    if args.flavor is None:  # the first FDE's server version: MariaDB's, else MySQL's
        args.flavor = binlog_format(paths[0]).flavor
    rules, settings = ruleset_from_args(args)
    engine = RuleEngine(rules, settings, schema=schema_from_args(args))
    tfilter = TransactionFilter(engine, empty_transactions=args.empty_transactions)
    out, option, series = _target(args, paths)
    if not series:  # one file: nothing to rotate or name
        for given, name in ((args.max_binlog_size, "--max-binlog-size"), (args.basename, "--basename")):
            if given is not None:
                raise InvalidArgumentError(f"{name}: names the files of a --out series; -o {args.output} writes "
                                           "one file (leave it out, or write --out DIR)")
    # Never over an input, never a partial output over an existing file: the output is written
    # beside its place (a temporary file or directory) and renamed into it once complete.
    sink: Sink
    staging: Path | None
    if series:
        match = _NUMBERED.match(paths[0].name)
        basename = args.basename or (match["base"] if match else paths[0].stem or "filtered-bin")
        refuse_input_as_output(paths, directory=out, basename=basename, option=option)
        writable_dir(out, option)
        import tempfile  # only here: with shutil, random, bz2 and lzma, a fifth of `filter -o FILE`'s start

        staging = Path(tempfile.mkdtemp(dir=out, prefix=f".{basename}.", suffix=".tmp"))
        sink = SeriesSink(staging, basename, max_size=args.max_binlog_size or MAX_BINLOG_SIZE)
    elif is_stream(out):  # stdout, a pipe: written as it comes, nothing to rename
        refuse_input_as_output(paths, file=out)
        if json_on_stdout(args) and os.path.samestat(out.stat(), os.fstat(1)):
            raise OutputError(f"--json: stdout carries the filtered binlog (-o {args.output}); write --json FILE")
        sink, staging = FileSink(out), None
    else:
        refuse_input_as_output(paths, file=out)
        writable_file(out, "-o")
        fd, name = temp_beside(out.parent, f".{out.name}.", ".tmp")
        staging = Path(name)
        # Written through this descriptor (not truncated again), on a thread of its own.
        sink = FileSink(staging, fd=fd, write_behind=True)
    renamer = event_renamer(engine, rules, settings) if args.write_rewritten_names else None
    applied = None
    if renamer is not None:  # (imported here: a run that renames nothing does without the module)
        from dumpfilter.rules.renamer import applied_names

        applied = applied_names(engine, rules, settings)
    started = time.perf_counter()
    # An input that cannot be read is its BinlogError; a write that fails is the sink's OSError: one
    # line naming the output (the disk is full, a device refuses), no partial output left; stdout's
    # reader gone (`filter -o - | head`) ends it quietly, as every command.
    try:
        with writes_named(f"{option} {args.output if option == '-o' else out}"):
            # A file cut inside an event: its whole events filtered and written, then told (raise_cut).
            stats = filter_files(paths, tfilter, sink, verify_checksums=args.verify_checksums, read_ahead=True,
                                 stop_at_cut=True, rename=renamer, applied=applied)
            written = sink.close()
            out_bytes = ((sink.writer.position if sink.writer else 0) if isinstance(sink, FileSink)
                         else sum(p.stat().st_size for p in written if p.exists()))
            if staging is not None:
                written = _move_into_place(staging, out, written, basename if series else None)
    finally:
        with contextlib.suppress(Exception):  # an error already on its way is the one to report
            sink.close()
        if staging is not None and staging.is_dir():
            import shutil

            shutil.rmtree(staging, ignore_errors=True)
        elif staging is not None:
            staging.unlink(missing_ok=True)
    elapsed = time.perf_counter() - started
    document = summary_document(stats, written, out_bytes, elapsed, flavor=settings.flavor, assumed=engine.assumed)
    if args.summary == "json":  # the old spelling of --json: the summary as JSON on stderr
        deprecated("--summary json", "--json (the summary on stdout) or --json FILE")
        import json

        print(json.dumps(document), file=sys.stderr)
    if not emit_json(args, document) and args.summary != "json" and stats.cut is None:  # a cut: its one line
        print_summary(stats, written, out_bytes, elapsed, rules_text=" ".join(rules.option_lines()) or "(no rules)",
                      flavor=settings.flavor, mode=args.summary, assumed=engine.assumed)
    raise_cut(stats.cut, f"every whole event before it was filtered and written ({option} "
                         f"{args.output if option == '-o' else out}), no later file read")
    return 0


def _target(args: argparse.Namespace, paths: list[Path]) -> tuple[Path, str, bool]:
    """(the output path, its option, whether it is a series directory). `-o DIR` (an existing
    directory, a trailing /, several inputs) is the old spelling of --out DIR, kept for scripts (one
    warning); -o never makes the directory its path is in."""
    if args.out is not None:
        return Path(args.out), "--out", True
    if args.output == "-":
        return Path("/dev/stdout"), "-o", False
    out = Path(args.output)
    missing_parent(args.output, "-o")  # -o makes no directory, as cp makes none (--out DIR is made with its parents)
    if len(paths) > 1 or os.path.isdir(out) or args.output.endswith(("/", "\\")):
        deprecated(f"-o {args.output} for a series directory", f"--out {args.output}")
        return out, "-o", True
    return out, "-o", False


def _move_into_place(staging: Path, out: Path, written: list[Path], basename: str | None) -> list[Path]:
    """Rename the complete output into place: a file, or a series' files and then its index."""
    if basename is None:
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(staging, 0o666 & ~umask)  # mkstemp made it 0600; a plain open() would not have
        os.replace(staging, out)
        return [out]
    for path in written:
        os.replace(path, out / path.name)
    index = staging / f"{basename}.index"
    if index.exists():
        os.replace(index, out / index.name)
    return [out / path.name for path in written]


def summary_document(stats: FilterStats, written: list[Path], out_bytes: int, elapsed: float, *, flavor: str,
                     assumed: int) -> dict[str, Any]:
    """The summary --json writes: the counters, the output files and their bytes, the seconds.
    `transactions_skipped` counts the transactions the rules keep nothing of, in the master's word
    (its Transactions_skipped); `emptied` and `skipped` say how they were written (as an empty
    transaction, or left out)."""
    return stats.as_dict() | {"transactions_skipped": stats.emptied + stats.skipped, "output_files": [str(p) for p in written], "output_file_bytes": out_bytes,
                              "seconds": round(elapsed, 3), "flavor": flavor, "assumed_decisions": assumed,
                              "cut": str(stats.cut) if stats.cut is not None else None}


def _mb(n: int) -> str:
    return f"{n / 1e6:.2f} MB" if n >= 1e5 else f"{n} B"


def print_summary(stats: FilterStats, written: list[Path], out_bytes: int, elapsed: float, *, rules_text: str,
                  flavor: str, mode: str = "auto", assumed: int = 0) -> None:
    """`out_bytes`: what was written, each file's magic included (also to stdout, which has no size to
    look up); the input side counts its files' magic too, so that an output identical to its input is
    0% smaller. `assumed`: decisions the engine took without what the server would see (RuleEngine.assumed)."""
    if mode == "none":
        return
    if mode == "auto":
        mode = "rich" if sys.stderr.isatty() else "plain"
    in_bytes = stats.bytes_in + MAGIC_BYTES * stats.files_in
    pct = f"{100 * (1 - out_bytes / in_bytes):.1f}% smaller" if stats.bytes_in else ""
    # (what, in, kept, not kept): a transaction the rules keep nothing of is "skipped" (the master's
    # word), written as its empty frame (--empty-transactions keep) or left out.
    forms = [f"{n} {form}" for n, form in ((stats.emptied, "written as empty transactions"),
                                           (stats.skipped, "left out")) if n]
    skipped = f"{stats.emptied + stats.skipped} skipped" + (f" ({', '.join(forms)})" if forms else "")
    rows = [
        ("files", f"{stats.files_in}", f"{len(written)} written", ""),
        ("events", f"{stats.events_in}", f"{stats.events_out}", f"{max(stats.events_in - stats.events_out, 0)} dropped"),
        ("transactions", f"{stats.transactions_in}", f"{stats.kept} whole, {stats.partial} partial", skipped),
        ("bytes", _mb(in_bytes), f"{_mb(out_bytes)} written", pct),
    ]
    if mode == "rich":
        from rich.console import Console
        from rich.table import Table

        table = Table("", "in", "kept", "not kept", title=f"dumpfilter filter ({flavor} replica rules, {elapsed:.2f} s)")
        for row in rows:
            table.add_row(*row)
        console = Console(stderr=True)
        console.print(table)
        if stats.unparsed_statements:
            console.print(f"{stats.unparsed_statements} statement(s) could not be parsed and were kept")
        if assumed:
            console.print(f"{assumed} decision(s) assumed what the schema model lacks (explain says which)")
        return
    print(f"rules ({flavor} replica): {rules_text}", file=sys.stderr)
    for name, before, kept, not_kept in rows:
        print(f"{name}: {before} in, kept {kept}" + (f"; {not_kept}" if not_kept else ""), file=sys.stderr)
    if stats.unparsed_statements:
        print(f"unparsed statements kept: {stats.unparsed_statements}", file=sys.stderr)
    if assumed:
        print(f"assumed_decisions: {assumed} (the schema model lacked a column or trigger; explain says which)",
              file=sys.stderr)
    print(f"output: {', '.join(str(p) for p in written)} ({elapsed:.2f} s)", file=sys.stderr)
